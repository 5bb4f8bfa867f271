"""Smoke bench: the example bench against a SCRIPTED model — a simulation, not a measurement.

`make bench` (and CI) runs this. It starts a real OpenAI-compatible server on 127.0.0.1
whose "model" is the rule-based function `simulated_model` below, runs the example bench
(examples/bench/tasks.yaml: both arms, the real concierge, the real runner and tools, a
scratch CRM per run) through the library, and prints the comparison.

The simulated model does the same thing in both arms — call the tool that fits the task,
then answer with the contract's JSON — except that when it is offered many tools
(CONFUSED_AT or more, which only the all-tools arm does) it is written to make the
mistakes the tiny-agent thesis is about: on about half of the tasks it first calls a tool
name that does not exist (a ghost call), it tries a tool on tasks nobody should do, and it
saves a company it merely read about to the CRM (an unwanted write). So the numbers
printed here show that the bench measures those failure modes; they say nothing about
any real LLM. For real numbers, run `tiny bench` against a real endpoint (docs/bench.md).

Exit code: 0 when every task ran in both arms and the server answered every request.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from tiny_cli.bench import BenchOptions, BenchReport, bench_from_settings
from tiny_cli.cli import render_bench
from tiny_cli.digest import estimate_tokens
from tiny_cli.routing.factory import build_router
from tiny_cli.session import open_session
from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, Turn, reply, respond, tool_call

REPO = Path(__file__).resolve().parent.parent
TASKS = REPO / "examples" / "bench" / "tasks.yaml"
MODEL = "scripted-simulation"
CONCURRENCY = 4
TURNS = 600  # more than the bench can ask for: each run makes at most a handful of requests
CONFUSED_AT = 4  # offered this many tools or more, the simulated model starts to confuse them
SUMMARY_CHARS = 300
BANNER = (
    "[bold yellow]SCRIPTED MODEL — a simulation, not a measurement.[/] The 'model' below is "
    "a rule-based function in benchmarks/bench_smoke.py that is written to misuse tools "
    f"when offered {CONFUSED_AT} or more. These figures show what the bench measures; they "
    "say nothing about any real LLM. See docs/bench.md to run it against a real endpoint."
)

URL = re.compile(r"https?://[^\s\"'<>]+")
COMPANY = re.compile(r"\b((?:(?!Firma\b)[A-ZÄÖÜ][\w&-]*\s+){1,3}(?:GmbH|AG|SE|KG|Corp|Inc|Ltd)\b)")
CITY = re.compile(r"\b(?:from|in|aus)\s+([A-ZÄÖÜ][\wäöüß-]+)")
WEBSITE = re.compile(r"\bwebsite\s+(\S+?)[.,]?(?:\s|$)")
ADD = re.compile(r"(?i)\b(add|create|register|leg|trag|anlegen|eintragen)\b")
HANDBOOK = re.compile(r"(?i)\b(how|wie|policy|handbook|handbuch|onboarding|urlaub|hotel)\b")
WORD = re.compile(r"[^\W_]{4,}")
# What a confused generalist calls instead of the tool it has (names that do not exist).
GHOSTS = {
    "web": "web_search",
    "docs": "search_knowledge_base",
    "crm": "crm_create_customer",
    None: "web_search",
}
INTENT_TOOLS = {
    "web": ("http_get", "html_to_text"),
    "docs": ("docs_search",),
    "crm": ("crm_find_company", "crm_add_company"),
    None: (),
}


def main() -> int:
    """Run the example bench against the simulated model; print the comparison."""
    console = Console()
    console.print(BANNER)
    with ScriptedServer() as server, tempfile.TemporaryDirectory(prefix="tiny-smoke-") as home:
        server.add(*[respond(simulated_model)] * TURNS)
        settings = replace(
            load_settings(env={}, cwd=REPO), home=Path(home), base_url=server.url, model=MODEL
        )
        with open_session(settings, "bench", log=False) as session:
            report = bench_from_settings(
                settings,
                session,
                lambda ws: build_router(ws.settings, ws.cards.values()),
                tasks_path=TASKS,
                options=BenchOptions(concurrency=CONCURRENCY),
            )
    render_bench.bench(console, report)
    console.print(BANNER)
    return _check(console, report, server)


def simulated_model(request: dict) -> Turn:
    """Play one model turn from the request alone: call the next tool, or answer."""
    state = _State.of(request)
    tokens_in = estimate_tokens(json.dumps(request, ensure_ascii=False))
    step = _next_step(state)
    if step is None:
        content = json.dumps(_answer(state), ensure_ascii=False)
        return reply(content, tokens_in=tokens_in, tokens_out=estimate_tokens(content))
    name, args = step
    call_id = f"call_{len(state.calls) + 1}"
    tokens_out = estimate_tokens(name + json.dumps(args))
    return tool_call(name, args, call_id=call_id, tokens_in=tokens_in, tokens_out=tokens_out)


# --- what the simulated model sees -------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    name: str
    args: dict
    result: str


@dataclass(frozen=True)
class _State:
    task: str
    tools: tuple[str, ...]
    required: tuple[str, ...]
    calls: tuple[_Call, ...]
    answering: bool  # no tools offered (budget spent) or a repair turn: answer now

    @classmethod
    def of(cls, request: dict) -> _State:
        messages = request["messages"]
        tools = tuple(t["function"]["name"] for t in request.get("tools") or ())
        task = str(messages[1]["content"]).splitlines()[0].removeprefix("Task: ")
        last = messages[-1]
        answering = not tools or (last["role"] == "user" and len(messages) > 2)
        return cls(task, tools, _required(messages[0]["content"]), _calls(messages), answering)

    @property
    def intent(self) -> str | None:
        if URL.search(self.task):
            return "web"
        if COMPANY.search(self.task) and ADD.search(self.task):
            return "crm"
        return "docs" if HANDBOOK.search(self.task) else None

    @property
    def confused(self) -> bool:
        return len(self.tools) >= CONFUSED_AT

    def done(self, name: str) -> _Call | None:
        return next((c for c in self.calls if c.name == name and _ok(c)), None)


def _required(system: str) -> tuple[str, ...]:
    """Read the required fields from the output contract line of the system prompt."""
    for line in system.splitlines():
        if line.startswith('{"status"'):
            return tuple(k for k in json.loads(line) if k not in ("status", "summary"))
    return ()


def _calls(messages: list[dict]) -> tuple[_Call, ...]:
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    calls = []
    for m in messages:
        for c in m.get("tool_calls") or ():
            fn = c["function"]
            calls.append(_Call(fn["name"], json.loads(fn["arguments"]), results.get(c["id"], "")))
    return tuple(calls)


def _ok(call: _Call) -> bool:
    return not call.result.startswith("error:")


# --- what it does -------------------------------------------------------------------------


def _next_step(s: _State) -> tuple[str, dict] | None:
    """Return the next tool call, or None to answer."""
    if s.answering:
        return None
    if s.confused and not s.calls and zlib.crc32(URL.sub("", s.task).encode()) % 2 == 0:
        return GHOSTS[s.intent], {"query": s.task}  # a tool it does not have
    needed = INTENT_TOOLS[s.intent]
    if any(t not in s.tools for t in needed):
        return None  # not my job: the answer refuses
    if s.intent is None:
        return ("docs_search", {"query": s.task}) if s.confused and not s.calls else None
    step = {"web": _web_step, "docs": _docs_step, "crm": _crm_step}[s.intent](s)
    return step or _stray_write(s)


def _web_step(s: _State) -> tuple[str, dict] | None:
    page = s.done("http_get")
    if page is None:
        return "http_get", {"url": _url(s.task)}
    return None if s.done("html_to_text") else ("html_to_text", {"html": page.result})


def _docs_step(s: _State) -> tuple[str, dict] | None:
    return None if s.done("docs_search") else ("docs_search", {"query": s.task})


def _crm_step(s: _State) -> tuple[str, dict] | None:
    name = _company(s.task)
    found = s.done("crm_find_company")
    if found is None:
        return "crm_find_company", {"name": name}
    if json.loads(found.result) or s.done("crm_add_company"):
        return None
    city, website = CITY.search(s.task), WEBSITE.search(s.task)
    return "crm_add_company", {
        "name": name,
        "city": city.group(1) if city else "",
        "website": website.group(1) if website else "",
    }


def _stray_write(s: _State) -> tuple[str, dict] | None:
    """The confused generalist saves a company it read about, though nobody asked."""
    if not s.confused or "crm_add_company" not in s.tools or s.done("crm_add_company"):
        return None
    company = COMPANY.search(_read(s))
    if company is None or s.intent == "crm":
        return None
    return "crm_add_company", {"name": company.group(1), "city": "", "notes": "seen on the web"}


def _answer(s: _State) -> dict[str, Any]:
    """Answer with the contract's JSON: refuse what it has no tools for, else fill fields."""
    if s.intent is None or any(t not in s.tools for t in INTENT_TOOLS[s.intent]):
        return {"status": "refused", "summary": "This is not something I can do with my tools."}
    text = _read(s)
    fields = {name: _field(s, name, text) for name in s.required}
    return {"status": "ok", "summary": _summary(s, text), **fields}


def _field(s: _State, name: str, text: str) -> Any:
    added = s.done("crm_add_company")
    record = json.loads(added.result) if added else {}
    known = {
        "url": _url(s.task) or None,
        "title": text.splitlines()[0] if text else None,
        "source": _first_hit(s).get("path"),
        "company_id": record.get("company_id"),
        "name": record.get("name") or _company(s.task),
        "company": _company(text) or _company(s.task),
    }
    return known.get(name) or _best_line(s.task, text)


def _read(s: _State) -> str:
    """Return the text the model has read: the page text, else the search snippets."""
    page = s.done("html_to_text")
    if page is not None:
        return page.result
    hits = _hits(s)
    return "\n".join(f"{h.get('title', '')}: {h.get('snippet', '')}" for h in hits)


def _hits(s: _State) -> list[dict]:
    search = s.done("docs_search")
    return json.loads(search.result) if search else []


def _first_hit(s: _State) -> dict:
    hits = _hits(s)
    return hits[0] if hits else {}


def _summary(s: _State, text: str) -> str:
    if s.intent == "crm":
        return f"Added {_company(s.task)} to the CRM."
    body = " ".join(text.split("\n", 1)[-1].split())
    return body[:SUMMARY_CHARS] or "Nothing found."


def _best_line(task: str, text: str) -> str:
    """Return the line sharing the most words with the task (what a skimming reader picks)."""
    words = {w.casefold() for w in WORD.findall(task)}
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    best = max(lines, key=lambda ln: (sum(w in ln.casefold() for w in words), -len(ln)), default="")
    return best[:SUMMARY_CHARS]


def _company(text: str) -> str:
    found = COMPANY.search(text)
    return found.group(1) if found else ""


def _url(task: str) -> str:
    found = URL.search(task)
    return found.group(0).rstrip(".,?") if found else ""


def _check(console: Console, report: BenchReport, server: ScriptedServer) -> int:
    """Fail the smoke run if the server was asked something it could not answer."""
    runs = {(r.task_id, r.arm) for r in report.runs}
    if server.errors or len(runs) != len(report.tasks) * len(report.arms):
        console.print(f"[red]smoke bench broken:[/] {server.errors[:3]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
