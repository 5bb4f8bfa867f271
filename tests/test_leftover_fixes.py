"""Leftover fixes: a home inside a tool call's JSON arguments is masked in a recording and
replays in another home; a bench report's fields are masked in their strings; refused
over-long arguments reach the run log as a bounded preview; `--concurrency` has a bound."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tiny_cli.agent.calls import MAX_ARGUMENT_CHARS
from tiny_cli.bench.arms import Job, Ran
from tiny_cli.bench.run import MAX_CONCURRENCY, BenchOptions, run_bench
from tiny_cli.bench.scale import ScaleOptions, run_scale
from tiny_cli.bench.scoring import judge
from tiny_cli.bench.tasks import BenchTask, Expect
from tiny_cli.digest import Digest
from tiny_cli.errors import ConfigError
from tiny_cli.provider.client import ChatRequest, OpenAIProvider, Provider, ToolCall
from tiny_cli.provider.replay import Recorder, Replayer, Volatile
from tiny_cli.runs.store import ARGUMENTS_PREVIEW_CHARS
from tiny_cli.testing import ScriptedServer, reply, tool_call

# backslashes, a quote and a letter JSON writes as \u00eb: every escape a home may need
THERE = 'C:\\Users\\zoë "z"\\tiny-bench-1'
ELSEWHERE = ('D:\\Temp\\bo "b"\\tiny-bench-2', "/tmp/tiny-bench-3", "/tmp/zoë/tiny-bench-4")
ANSWER = {"status": "ok", "summary": "Two weeks, with a buddy.", "source": "onboarding.md"}
TASK = "how does onboarding work"


def _home(home: str) -> Volatile:
    return Volatile.of({"{home}": home})


def _args(home: str) -> dict[str, str]:
    return {"path": f"{home}\\report.txt"}


def _asked(home: str) -> ChatRequest:
    said = f"summarise the report in {home}"
    return ChatRequest("m", [{"role": "user", "content": said}], [], 64)


def _then(first: ChatRequest, call: ToolCall, home: str) -> ChatRequest:
    """The next request: the call echoed as the model sent it, then its JSON result."""
    function = {"name": call.name, "arguments": call.arguments}
    echoed = {"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": function}]}  # fmt: skip
    result = json.dumps({"read": _args(home)["path"]}, ensure_ascii=False)
    answered = {"role": "tool", "tool_call_id": call.id, "content": result}
    return ChatRequest("m", [*first.messages, echoed, answered], [], 64)


def _converse(provider: Provider, home: str) -> ToolCall:
    """Ask, run the one call the model makes, and hear it done; return that call."""
    first = _asked(home)
    (call,) = provider.complete(first).tool_calls
    assert provider.complete(_then(first, call, home)).content == "done"
    return call


# --- 1: a home inside a tool call's JSON-string arguments ----------------------------------


def test_a_home_inside_tool_call_arguments_replays_in_any_home(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with (
        ScriptedServer([tool_call("read_file", _args(THERE)), reply("done")]) as server,
        Recorder(OpenAIProvider(server.url), path, "m", "h") as recorder,
    ):
        sent = _converse(recorder.for_run("t/tiny/0", _home(THERE)), THERE)
    assert sent.arguments == json.dumps(_args(THERE))
    assert THERE not in path.read_text("utf-8")
    assert json.dumps(THERE)[1:-1] not in path.read_text("utf-8")  # nor as JSON escapes it
    for home in (THERE, *ELSEWHERE):
        replay = Replayer.load(path).for_run("t/tiny/0", _home(home))
        call = _converse(replay, home)  # the second request is found: its key is the same
        # the model's arguments in this home, escaped as it escaped them (\u00eb, \\, \")
        assert call.arguments == json.dumps(_args(home))


# --- 2: a bench report's fields, masked in their strings -----------------------------------


def _judged(fields: dict, volatile: Volatile, expect: dict[str, Expect]) -> dict:
    task = BenchTask("t", "list the reports", "docs-finder", expect=expect)
    digest = Digest("docs-finder", "ok", fields=fields)
    result = judge(Ran(Job(task, "all-tools", 0), digest, None, volatile))
    return {"fields": dict(result.fields), "matching": result.fields_matching}


def test_a_field_holding_json_text_is_masked_where_the_home_is_escaped() -> None:
    call = json.dumps(_args(THERE))  # a field that is itself JSON: the home escaped in it
    expect = {"call": Expect(value=json.dumps(_args("{home}")))}
    judged = _judged({"call": call, "files": [_args(THERE)]}, _home(THERE), expect)
    assert judged == {
        "fields": {"call": json.dumps(_args("{home}")), "files": [_args("{home}")]},
        "matching": 1,
    }


def test_masking_a_field_never_breaks_it_across_an_escape() -> None:
    # \x01 is \u0001 in JSON text, whose last digit runs on into the page server's host
    odd = "\x0127.0.0.1:8080"
    volatile = Volatile.of({"{site_host}": "127.0.0.1:8080"})
    judged = _judged({"id": [odd]}, volatile, {"id": Expect(value="x")})
    assert judged["fields"] == {"id": [odd]}


# --- 3: refused over-long arguments in the run log -----------------------------------------


@pytest.mark.parametrize("extra", [1, 4 * MAX_ARGUMENT_CHARS])
def test_refused_arguments_reach_the_run_log_as_a_preview_and_their_size(
    tiny, scripted_server, plain_cards, home, extra
) -> None:
    huge = json.dumps({"query": "x" * (MAX_ARGUMENT_CHARS + extra)})
    scripted_server.add(
        tool_call("docs_search", huge),
        tool_call("docs_search", {"query": "onboarding"}),
        reply(json.dumps(ANSWER)),
    )
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(plain_cards)}
    assert tiny("invoke", "docs-finder", TASK, "--json", env=env).exit_code == 0
    with sqlite3.connect(home / "runs.sqlite3") as db:
        ((calls, size),) = db.execute("SELECT calls, length(calls) FROM runs").fetchall()
    refused, kept = json.loads(calls)
    assert refused["arguments"] == huge[:ARGUMENTS_PREVIEW_CHARS]
    assert refused["arguments_chars"] == len(huge)
    assert kept["arguments"] == '{"query": "onboarding"}' and "arguments_chars" not in kept
    assert size < 2 * ARGUMENTS_PREVIEW_CHARS


def test_arguments_the_runner_takes_are_logged_whole(
    tiny, scripted_server, plain_cards, home
) -> None:
    longest = '{"query": "' + "x" * (MAX_ARGUMENT_CHARS - 13) + '"}'  # at the bound: run
    assert len(longest) == MAX_ARGUMENT_CHARS
    scripted_server.add(tool_call("docs_search", longest), reply(json.dumps(ANSWER)))
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(plain_cards)}
    tiny("invoke", "docs-finder", TASK, "--json", env=env)
    with sqlite3.connect(home / "runs.sqlite3") as db:
        ((calls,),) = db.execute("SELECT calls FROM runs").fetchall()
    assert json.loads(calls)[0]["arguments"] == longest


# --- 4: tiny bench --concurrency -----------------------------------------------------------


@pytest.mark.parametrize("scale", [[], ["--all-tools-sizes", "5"]], ids=["bench", "scale"])
def test_bench_refuses_a_concurrency_over_the_bound_in_one_line(tiny, scale) -> None:
    result = tiny("bench", *scale, "--concurrency", "100000")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"less than or equal to {MAX_CONCURRENCY}" in lines[0], lines


def test_run_bench_refuses_a_concurrency_over_the_bound() -> None:
    options = BenchOptions(arms=("all-tools",), concurrency=100_000)
    match = rf"^concurrency=100000: at most {MAX_CONCURRENCY} runs at a time$"
    with pytest.raises(ConfigError, match=match):
        run_bench(None, [], None, router=None, options=options)  # type: ignore[arg-type]


@pytest.mark.parametrize("concurrency", [0, MAX_CONCURRENCY + 1, 100_000])
def test_run_scale_refuses_a_concurrency_out_of_its_range(concurrency) -> None:
    options = ScaleOptions(concurrency=concurrency)
    match = rf"^concurrency={concurrency}: from 1 to {MAX_CONCURRENCY} runs at a time$"
    with pytest.raises(ConfigError, match=match):
        run_scale(None, [], None, None, options)  # type: ignore[arg-type]
