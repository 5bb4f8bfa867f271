"""Client overhead: tiny's cold start against `import typer`, and CPU per model turn vs peers.

Run with `python benchmarks/overhead.py` (from the repository, in the project's venv). Two
parts, each reported as ratios against a baseline measured in the same run:

1. Cold start: the wall time of a fresh `python -c "import typer"` (the baseline), of
   `python -m tiny_cli --help`, and of `python -m tiny_cli invoke docs-finder TASK --json`
   as a whole process against a scripted OpenAI-compatible server (tiny_cli.testing). The
   three commands alternate, in a rotating order, and the medians are compared.
2. Per-turn client overhead of the agent loop: the same 3-turn task (two calls of a trivial
   local `add` tool, then a final answer) for tiny's library API (`tiny_cli.agent.invoke`)
   and, where installed, the OpenAI Agents SDK and PydanticAI, plus a bare httpx loop as
   the floor. Each framework runs in a fresh subprocess that imports only what it needs,
   warms up, then times every task with time.process_time (the client's CPU, all its
   threads) and perf_counter; it also reports its own peak RSS. The scripted server runs
   in another process, so it never counts as client CPU; it has exactly one scripted turn
   per expected request and answers any extra request with HTTP 500, so the requests a
   framework sends per task are counted and shown. Frameworks alternate over the rounds.

`--json FILE` also writes the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Only the standard library at the top: this file is also the client subprocess of every
# framework, and a peer's RSS and CPU must not include tiny's (or rich's) imports.

REPO = Path(__file__).resolve().parent.parent
COLD_TASK = "how did the onboarding process work again"
COLD_REPEATS = 7
COLD_FINAL = '{"status": "ok", "summary": "Two weeks, with a buddy.", "source": "onboarding.md"}'
COLD_TARGETS = {"help": 1.5, "invoke": 2.0}
# What every model-backed command needs before tiny runs a line: the CLI, the HTTP client, the
# card parser and validator, the terminal renderer (all named by the design), pydantic (tools)
DESIGN_LIBRARIES = ("typer", "httpx", "yaml", "jsonschema", "rich.console", "pydantic")
LOOP_PROMPT = "What is 3 + 4 + 5? Use the add tool for every addition."
LOOP_INSTRUCTIONS = "You add numbers. Always use the add tool; never add in your head."
LOOP_FINAL = '{"status": "ok", "summary": "3 + 4 + 5 = 12", "result": "12"}'
LOOP_CALLS = ({"a": 3, "b": 4}, {"a": 7, "b": 5})
MODEL_TURNS = len(LOOP_CALLS) + 1  # two tool-call turns, then the final answer
MODEL = "scripted"
FRAMEWORKS = ("tiny", "openai-agents", "pydantic-ai", "bare httpx")
PEER_IMPORTS = {"openai-agents": "agents", "pydantic-ai": "pydantic_ai"}
DISTRIBUTIONS = {
    "tiny": "tiny-cli",
    "openai-agents": "openai-agents",
    "pydantic-ai": "pydantic-ai-slim",
    "bare httpx": "httpx",
}
BASELINE = "tiny"  # the peers' CPU per turn is divided by tiny's
MIB = 1024.0  # ru_maxrss is in KiB on Linux


def main(argv: Sequence[str] | None = None) -> int:
    """Run both parts (or one hidden helper role) and print the tables; return the exit code."""
    args = _parser().parse_args(argv)
    if args.serve:
        return _serve(args.serve, args.serve_count)
    if args.client:
        return _client(args.client, args.url, args.tasks, args.warmup)
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # piped: wide enough for the tables
        console = Console(width=max(console.width, 130))
    console.print(
        f"[dim]python {sys.version.split()[0]} · {os.cpu_count()} CPUs · {sys.executable}[/dim]"
    )
    results: dict[str, Any] = {}
    if not args.skip_cold:
        results["cold_start"] = cold_start(console, args.repeats)
    if not args.skip_loop:
        results["loop"] = loop_overhead(console, args.rounds, args.tasks, args.warmup)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    return 0


# --- the scripted server, in its own process -----------------------------------------------


def _script(kind: str) -> list[Any]:
    """Return the turns of one task: the cold-start invoke, or the 3-turn add loop."""
    from tiny_cli.testing import reply, tool_call

    if kind == "cold":
        return [tool_call("docs_search", {"query": "onboarding"}), reply(COLD_FINAL)]
    return [*(tool_call("add", call) for call in LOOP_CALLS), reply(LOOP_FINAL)]


def _serve(kind: str, count: int) -> int:
    """Serve `count` copies of the script; print the URL, then stats for each stdin line."""
    from tiny_cli.testing import ScriptedServer

    turns = _script(kind)
    with ScriptedServer(turns * count) as server:
        print(server.url, flush=True)
        for _ in sys.stdin:  # one stats line per request from the parent; EOF stops
            try:
                server.assert_done()
                problems = ""
            except AssertionError as exc:
                problems = str(exc)
            stats = {"requests": len(server.requests), "errors": server.errors}
            print(json.dumps({**stats, "problems": problems}), flush=True)
    return 0


class Server:
    """A scripted server subprocess with `count` copies of a task's turns."""

    def __init__(self, kind: str, count: int) -> None:
        command = [sys.executable, __file__, "--serve", kind, "--serve-count", str(count)]
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.close()
            raise SystemExit(f"scripted server did not start (exit {self.proc.returncode})")

    def stats(self) -> dict[str, Any]:
        """Return requests seen, requests without a turn, and unplayed turns."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- part 1: cold start ------------------------------------------------------------------


def cold_start(console: Any, repeats: int) -> dict[str, Any]:
    """Time three fresh processes, alternating, and compare their medians to `import typer`."""
    from rich.table import Table

    tiny = [sys.executable, "-m", "tiny_cli"]
    commands = {
        "baseline": [sys.executable, "-c", "import typer"],
        # the floor for any invoke: the libraries the design names, imported and nothing run
        "libraries": [sys.executable, "-c", f"import {', '.join(DESIGN_LIBRARIES)}"],
        "help": [*tiny, "--help"],
        "invoke": [*tiny, "invoke", "docs-finder", COLD_TASK, "--json"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    with tempfile.TemporaryDirectory() as home, Server("cold", repeats + 1) as server:
        env = {
            **os.environ,
            "TINY_BASE_URL": server.url,
            "TINY_HOME": home,
            "TINY_CARDS": str(REPO / "cards"),
            "TINY_DOCS": str(REPO / "examples" / "handbook"),
        }
        first = _timed(commands["invoke"], env)  # fills TINY_HOME; reported, not in the median
        names = list(commands)
        with console.status("cold start"):
            for i in range(repeats):
                shift = i % len(names)
                for name in names[shift:] + names[:shift]:  # rotate the order each repeat
                    times[name].append(_timed(commands[name], env))
        stats = server.stats()
    per_run = stats["requests"] / (repeats + 1)
    base = statistics.median(times["baseline"])
    rows = {name: statistics.median(values) for name, values in times.items()}
    table = Table(title=f"cold start: fresh processes, median of {repeats}, alternating")
    for name in ("command", "wall ms", "ratio to baseline", "target"):
        table.add_column(name, justify="left" if name == "command" else "right")
    labels = {
        "baseline": 'baseline: python -c "import typer"',
        "libraries": f'floor: python -c "import {", ".join(DESIGN_LIBRARIES)}"',
        "help": "python -m tiny_cli --help",
        "invoke": f"python -m tiny_cli invoke docs-finder {COLD_TASK!r} --json",
    }
    for name, seconds in rows.items():
        target = COLD_TARGETS.get(name)
        ratio = seconds / base
        shown = f"{ratio:.2f}x" if target is None or ratio <= target else f"[red]{ratio:.2f}x[/]"
        table.add_row(labels[name], f"{seconds * 1000:.0f}", shown, _target(target))
    table.add_row(
        "  first invoke (fresh TINY_HOME), not in the median",
        f"{first * 1000:.0f}",
        f"{first / base:.2f}x",
        "",
    )
    console.print(table)
    console.print(
        f"[dim]invoke: {per_run:g} requests per run to the scripted server "
        f"(expected 2); {len(stats['errors'])} unanswered.[/dim]\n"
    )
    if stats["problems"]:
        console.print(f"[red]{stats['problems']}[/red]")
    return {
        "repeats": repeats,
        "median_s": rows,
        "ratio": {name: rows[name] / base for name in ("libraries", "help", "invoke")},
        "targets": COLD_TARGETS,
        "first_invoke_s": first,
        "requests_per_invoke": per_run,
        "server_problems": stats["problems"],
    }


def _timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, cwd=REPO)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[1:4])} failed ({done.returncode}): {done.stderr}")
    if "invoke" in command:
        status = json.loads(done.stdout).get("status")
        if status != "ok":
            raise SystemExit(f"tiny invoke answered status {status!r}, not ok: {done.stdout}")
    return elapsed


def _target(target: float | None) -> str:
    return "" if target is None else f"≤ {target:g}x"


# --- part 2: the agent loop --------------------------------------------------------------


def loop_overhead(console: Any, rounds: int, tasks: int, warmup: int) -> dict[str, Any]:
    """Run every framework's loop in its own subprocess, alternating over `rounds`."""
    from rich.table import Table

    present, notes = [], []
    for name in FRAMEWORKS:
        module = PEER_IMPORTS.get(name)
        if module and importlib.util.find_spec(module) is None:
            notes.append(f"{name}: not installed (import {module}), skipped")
        else:
            present.append(name)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in present}
    with console.status("agent loop") as status:
        for r in range(rounds):
            order = present[r % len(present) :] + present[: r % len(present)]
            for name in order:
                if name not in runs:
                    continue  # failed in an earlier round
                status.update(f"agent loop: round {r + 1}/{rounds}, {name}")
                run = _client_run(name, tasks, warmup)
                if "failure" in run:
                    notes.append(f"{name}: {run['failure']}")
                    del runs[name]
                else:
                    runs[name].append(run)
    rows = [_summary(name, done, tasks, warmup) for name, done in runs.items()]
    base = next((row["cpu_ms_per_turn"] for row in rows if row["framework"] == BASELINE), None)
    table = Table(
        title=f"agent loop: {MODEL_TURNS}-turn task, {rounds} fresh processes x {tasks} tasks "
        f"after {warmup} warm-up, per model turn (medians)"
    )
    heads = (
        "framework",
        "version",
        "model turns / task",
        "requests / task",
        "client CPU ms / turn",
        "wall ms / turn",
        "peak RSS MiB",
        "CPU ratio to tiny",
    )
    for name in heads:
        table.add_column(name, justify="left" if name in heads[:2] else "right")
    for row in rows:
        row["cpu_ratio_to_tiny"] = row["cpu_ms_per_turn"] / base if base else None
        requests = row["requests_per_task"]
        table.add_row(
            row["framework"],
            row["version"],
            str(MODEL_TURNS),
            f"{requests:g}" if requests == MODEL_TURNS else f"[red]{requests:g}[/]",
            f"{row['cpu_ms_per_turn']:.2f}",
            f"{row['wall_ms_per_turn']:.2f}",
            f"{row['peak_rss_mib']:.0f}",
            "—" if base is None else f"{row['cpu_ratio_to_tiny']:.2f}x",
        )
    console.print(table)
    console.print(
        "[dim]client CPU: time.process_time of the client process (all its threads) per task "
        f"÷ {MODEL_TURNS}, includes running the tool; the server is another process. wall: "
        "perf_counter per task ÷ turns, includes the server's answer time over loopback. "
        "peak RSS: ru_maxrss of the client process after all its tasks (interpreter, imports "
        "and the loop). bare httpx: the same three POSTs with hand-built messages, no "
        "framework — the floor.[/dim]"
    )
    for note in notes:
        console.print(f"[yellow]note: {note}[/yellow]")
    return {"rounds": rounds, "tasks": tasks, "warmup": warmup, "rows": rows, "notes": notes}


def _client_run(name: str, tasks: int, warmup: int) -> dict[str, Any]:
    """One fresh client process against one fresh server with exactly enough turns."""
    with Server("loop", tasks + warmup) as server:
        command = [sys.executable, __file__, "--client", name, "--url", server.url]
        command += ["--tasks", str(tasks), "--warmup", str(warmup)]
        env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        stats = server.stats()
    seen = f"{stats['requests']} requests for {tasks + warmup} tasks"
    if done.returncode != 0:  # an extra request gets HTTP 500 and usually ends up here
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"failure": f"client exited {done.returncode} ({seen}): {tail}"}
    if stats["problems"]:  # extra requests, or scripted turns never asked for
        return {"failure": f"scripted server ({seen}): {stats['problems']}"}
    run = json.loads(done.stdout.strip().splitlines()[-1])
    run["requests_per_task"] = stats["requests"] / (tasks + warmup)
    return run


def _summary(name: str, runs: list[dict[str, Any]], tasks: int, warmup: int) -> dict[str, Any]:
    cpu = [c for run in runs for c in run["cpu_s"]]
    wall = [w for run in runs for w in run["wall_s"]]
    return {
        "framework": name,
        "version": runs[0]["version"],
        "model_turns_per_task": MODEL_TURNS,
        "requests_per_task": statistics.median(run["requests_per_task"] for run in runs),
        "cpu_ms_per_turn": statistics.median(cpu) / MODEL_TURNS * 1000,
        "wall_ms_per_turn": statistics.median(wall) / MODEL_TURNS * 1000,
        "peak_rss_mib": statistics.median(run["maxrss_kib"] for run in runs) / MIB,
        "import_s": statistics.median(run["import_s"] for run in runs),
        "processes": len(runs),
    }


# --- the client subprocess: one framework, N tasks -----------------------------------------

CALLS = [0]  # how often the tool ran in this process


def add(a: int, b: int) -> int:
    """Add two integers and return the sum.

    Args:
        a: The first number.
        b: The second number.
    """
    CALLS[0] += 1
    return a + b


def _client(name: str, url: str, tasks: int, warmup: int) -> int:
    """Set up one framework, warm up, time `tasks` tasks, print one JSON line."""
    start = time.perf_counter()
    task, is_async = SETUPS[name](url)
    imported = time.perf_counter() - start
    cpu: list[float] = []
    wall: list[float] = []

    def check(answer: str) -> None:
        if "12" not in str(answer):
            raise SystemExit(f"{name}: unexpected final answer {answer!r}")

    async def run_async() -> None:
        for _ in range(warmup):
            check(await task())
        for _ in range(tasks):
            c, w = time.process_time(), time.perf_counter()
            answer = await task()
            wall.append(time.perf_counter() - w)
            cpu.append(time.process_time() - c)
            check(answer)

    def run_sync() -> None:
        for _ in range(warmup):
            check(task())
        for _ in range(tasks):
            c, w = time.process_time(), time.perf_counter()
            answer = task()
            wall.append(time.perf_counter() - w)
            cpu.append(time.process_time() - c)
            check(answer)

    if is_async:
        asyncio.run(run_async())
    else:
        run_sync()
    expected = len(LOOP_CALLS) * (tasks + warmup)
    if CALLS[0] != expected and name != "bare httpx":
        raise SystemExit(f"{name}: the tool ran {CALLS[0]} times, expected {expected}")
    result = {
        "framework": name,
        "version": importlib.metadata.version(DISTRIBUTIONS[name]),
        "import_s": imported,
        "cpu_s": cpu,
        "wall_s": wall,
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    print(json.dumps(result))
    return 0


def _setup_tiny(url: str) -> tuple[Callable[[], Any], bool]:
    from tiny_cli.agent.loop import invoke
    from tiny_cli.cards.load import Budget, Card
    from tiny_cli.digest import Brief
    from tiny_cli.provider.client import OpenAIProvider
    from tiny_cli.tools import Registry, tool

    registry = Registry([tool(add)])
    card = Card(
        "adder",
        "Adds numbers with the add tool.",
        ("add",),
        ("result",),
        budget=Budget(max_tool_calls=4),
    )
    provider = OpenAIProvider(url)
    brief = Brief(LOOP_PROMPT)

    def task() -> str:
        digest = invoke(card, brief, registry=registry, provider=provider, model=MODEL)
        if digest.status != "ok":
            raise SystemExit(f"tiny: digest status {digest.status}: {digest.reason}")
        return str(digest.fields.get("result"))

    return task, False


def _setup_openai_agents(url: str) -> tuple[Callable[[], Any], bool]:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    model = OpenAIChatCompletionsModel(
        model=MODEL, openai_client=AsyncOpenAI(base_url=url, api_key="x")
    )
    agent = Agent(
        name="adder", instructions=LOOP_INSTRUCTIONS, model=model, tools=[function_tool(add)]
    )

    async def task() -> str:
        result = await Runner.run(agent, LOOP_PROMPT)
        return str(result.final_output)

    return task, True


def _setup_pydantic_ai(url: str) -> tuple[Callable[[], Any], bool]:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=url, api_key="x"))
    agent = Agent(model, instructions=LOOP_INSTRUCTIONS, tools=[add])

    async def task() -> str:
        result = await agent.run(LOOP_PROMPT)
        return str(result.output)

    return task, True


def _setup_bare_httpx(url: str) -> tuple[Callable[[], Any], bool]:
    """The floor: POST the three requests with hand-built messages, run the tool, no checks."""
    import httpx

    client = httpx.Client()
    schema = {
        "type": "function",
        "function": {
            "name": "add",
            "description": add.__doc__,
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }

    def task() -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": LOOP_INSTRUCTIONS},
            {"role": "user", "content": LOOP_PROMPT},
        ]
        while True:
            body = {"model": MODEL, "messages": messages, "tools": [schema]}
            response = client.post(f"{url}/chat/completions", json=body)
            response.raise_for_status()
            message = response.json()["choices"][0]["message"]
            messages.append(message)
            if not message.get("tool_calls"):
                return str(message["content"])
            for call in message["tool_calls"]:
                result = add(**json.loads(call["function"]["arguments"]))
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": str(result)}
                )

    return task, False


SETUPS: dict[str, Callable[[str], tuple[Callable[[], Any], bool]]] = {
    "tiny": _setup_tiny,
    "openai-agents": _setup_openai_agents,
    "pydantic-ai": _setup_pydantic_ai,
    "bare httpx": _setup_bare_httpx,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    parser.add_argument("--repeats", type=int, default=COLD_REPEATS, help="cold-start repeats")
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per framework")
    parser.add_argument("--tasks", type=int, default=20, help="timed tasks per process")
    parser.add_argument("--warmup", type=int, default=3, help="untimed tasks per process first")
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold-start part")
    parser.add_argument("--skip-loop", action="store_true", help="skip the agent-loop part")
    # the helper roles this file plays in its own subprocesses
    parser.add_argument("--serve", choices=("cold", "loop"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-count", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--client", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    return parser


if __name__ == "__main__":
    sys.exit(main())
