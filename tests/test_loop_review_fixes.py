"""The run loop's review fixes: every call the model made is counted and kept (the wrap-up
turn's, each of several in one json-mode reply, native calls in json mode); an `ok` a cut reply
was taking back is not `ok`; reply text is kept bounded; a config error after only a ghost
call raises.

The real `tiny invoke` runs against the scripted model server; each test checks what went
over the wire as well as the Digest and the run log.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tiny_cli.agent.reply import MAX_REPLY_CHARS, REPLY_CUT, parse_reply
from tiny_cli.testing import http_error, reply, tool_call, tool_calls

from .conftest import one_error_line

TASK = "how does onboarding work"
SEARCH = tool_call("docs_search", {"query": "onboarding"})
OK = {"status": "ok", "summary": "Two weeks, with a buddy.", "source": "onboarding.md"}
JSON_SEARCH = reply('{"tool": "docs_search", "arguments": {"query": "onboarding"}}')
BUDGET = 4  # docs-finder's max_tool_calls
MAX_TOKENS = 400  # and its max_output_tokens


@pytest.fixture
def run(tiny, scripted_server):
    """Run `tiny invoke docs-finder TASK --json [ARGS]`: its exit code and Digest (or stderr)."""

    def go(*args: str) -> tuple[int, Any]:
        env = {"TINY_BASE_URL": scripted_server.url}
        result = tiny("invoke", "docs-finder", TASK, "--json", *args, env=env)
        assert "Traceback" not in result.output, result.output
        scripted_server.assert_done()
        if result.exit_code == 2:
            return 2, one_error_line(result)
        return result.exit_code, json.loads(result.stdout)

    return go


@pytest.fixture
def logged(tiny):
    """Return run 1 as the run log keeps it (`tiny runs show 1 --json`)."""

    def go() -> dict[str, Any]:
        result = tiny("runs", "show", "1", "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    return go


def _tools(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def _branches(request: dict) -> list[dict]:
    schema = request["response_format"]["json_schema"]["schema"]
    return schema.get("anyOf", [schema])


# --- 2: every call the model made is counted and kept --------------------------------------


@pytest.mark.parametrize("name", ["delete_all_docs", "docs_search"])
def test_a_call_in_the_wrap_up_turn_is_a_ghost_kept_in_the_transcript(
    run, logged, scripted_server, name: str
) -> None:
    last = tool_calls((name, {"really": True}, "call_last"), content=None)
    scripted_server.add(*[SEARCH] * BUDGET, last)
    code, digest = run()
    wrap_up = scripted_server.requests[-1]
    assert len(scripted_server.requests) == BUDGET + 1
    assert _tools(wrap_up) == [] and wrap_up["max_tokens"] == MAX_TOKENS  # no tool offered
    assert code == 3 and (digest["status"], digest["reason"]) == ("partial", "max_tool_calls")
    cost = digest["cost"]
    assert (cost["tool_calls"], cost["ghost_calls"], cost["ghost_names"]) == (5, 1, [name])
    assert (
        f'1 ghost call(s) to tools this agent does not have: "{name}"'
        in (digest["notes_for_caller"])
    )
    row = logged()
    assert (row["tool_calls"], row["ghost_calls"]) == (5, 1)
    assert [c["outcome"] for c in row["calls"]] == ["ok"] * BUDGET + ["ghost"]
    said = row["transcript"][-1]  # the reply as the model sent it: the run ended there
    assert said["role"] == "assistant" and said["tool_calls"][0]["id"] == "call_last"
    assert said["tool_calls"][0]["function"] == {"name": name, "arguments": '{"really": true}'}


def test_a_json_mode_call_in_the_wrap_up_turn_is_a_ghost(run, logged, scripted_server) -> None:
    written = '{"tool": "delete_all_docs", "arguments": {}}'
    scripted_server.add(*[JSON_SEARCH] * BUDGET, reply(written))
    code, digest = run("--tool-mode", "json")
    wrap_up = scripted_server.requests[-1]
    assert not any("tool" in b.get("properties", {}) for b in _branches(wrap_up))
    assert code == 3 and digest["reason"] == "max_tool_calls"
    assert digest["cost"]["ghost_names"] == ["delete_all_docs"]
    assert digest["cost"]["tool_calls"] == BUDGET + 1
    row = logged()
    assert row["ghost_calls"] == 1 and row["transcript"][-1]["content"] == written


def test_more_ghosts_than_allowed_in_the_wrap_up_turn_end_the_run_failed(
    run, scripted_server
) -> None:
    ghosts = tool_calls(*[(f"ghost_{n}", {}) for n in range(4)])
    scripted_server.add(*[SEARCH] * BUDGET, ghosts)
    code, digest = run()
    assert code == 5 and (digest["status"], digest["reason"]) == ("failed", "ghost_calls")
    assert digest["cost"]["ghost_names"] == [f"ghost_{n}" for n in range(4)]


def test_each_of_several_calls_in_one_json_mode_reply_counts(run, logged, scripted_server):
    two = (
        '<tool_call>{"name": "docs_search", "arguments": {"query": "onboarding"}}</tool_call>\n'
        '<tool_call>{"name": "rm_rf", "arguments": {"path": "/"}}</tool_call>'
    )
    scripted_server.add(reply(two), reply(json.dumps(OK)))
    code, digest = run("--tool-mode", "json")
    sent = scripted_server.requests[1]["messages"]
    assert [m["role"] for m in sent[2:]] == ["assistant", "user", "user"]
    assert sent[2]["content"] == two
    assert sent[3]["content"].startswith("Result of docs_search:")
    assert sent[4]["content"].startswith("Result of rm_rf:\nerror: unknown tool 'rm_rf'")
    assert code == 0 and digest["status"] == "ok"
    cost = digest["cost"]
    assert (cost["tool_calls"], cost["ghost_names"], cost["recovered_calls"]) == (2, ["rm_rf"], 0)
    assert [c["outcome"] for c in logged()["calls"]] == ["ok", "ghost"]


def test_native_tool_calls_in_json_mode_run_and_count(run, logged, scripted_server) -> None:
    scripted_server.add(
        tool_calls(("rm_rf", {"path": "/"}, "c1"), ("docs_search", {"query": "onboarding"}, "c2")),
        reply(json.dumps(OK)),
    )
    code, digest = run("--tool-mode", "json")
    second = scripted_server.requests[1]
    assert "tools" not in second and "response_format" in second  # still json mode
    echoed, ghost, result = second["messages"][2:]
    assert [c["function"]["name"] for c in echoed["tool_calls"]] == ["rm_rf", "docs_search"]
    assert ghost == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "error: unknown tool 'rm_rf'. Your tools are: docs_search.",
    }
    assert result["tool_call_id"] == "c2" and "onboarding" in result["content"]
    assert code == 0 and digest["status"] == "ok" and digest["cost"]["ghost_names"] == ["rm_rf"]
    assert [c["outcome"] for c in logged()["calls"]] == ["ghost", "ok"]


# --- 3: an ok the cut reply was taking back is not ok ---------------------------------------


TAKEN_BACK = (
    json.dumps(OK) + "\nWait, that is wrong. Corrected answer:\n"
    '{"status": "partial", "summary": "The handbook does not say how long onboar'
)


def test_an_ok_a_cut_reply_was_taking_back_is_partial(run, logged, scripted_server) -> None:
    scripted_server.add(SEARCH, reply(TAKEN_BACK, finish_reason="length"))
    code, digest = run()
    assert len(scripted_server.requests) == 2
    assert code == 3 and (digest["status"], digest["reason"]) == ("partial", "answer_cut")
    assert digest["notes_for_caller"] == [
        "the reply ended with finish_reason 'length', not 'stop', inside another object after "
        "its answer: that may not be its last word"
    ]
    assert logged()["status"] == "partial"


@pytest.mark.parametrize(
    ("text", "cut_after"),
    [
        (TAKEN_BACK, True),
        (json.dumps(OK), False),
        (json.dumps(OK) + "\nHope this helps {", True),
        (json.dumps(OK) + "\nWait, that is wrong", False),
        ("Here: " + json.dumps(OK) + " and {set} of braces", False),
    ],
)
def test_an_object_cut_off_after_the_answer_is_seen(text: str, cut_after: bool) -> None:
    parsed = parse_reply(text, ("source",))
    assert parsed.data["status"] == "ok" and parsed.cut_after is cut_after


# --- 6: reply text is kept bounded ----------------------------------------------------------


def _bounded(text: str) -> str:
    return text[:MAX_REPLY_CHARS] + REPLY_CUT.format(more=len(text) - MAX_REPLY_CHARS)


def test_long_text_beside_a_tool_call_is_kept_bounded(run, logged, scripted_server) -> None:
    long = "y" * (MAX_REPLY_CHARS + 12_345)
    called = tool_calls(("docs_search", {"query": "onboarding"}), content=long)
    scripted_server.add(called, reply(json.dumps(OK)))
    code, digest = run()
    echoed = scripted_server.requests[1]["messages"][2]
    assert echoed["content"] == _bounded(long) and echoed["tool_calls"]
    assert echoed["content"].endswith(
        "[… cut by tiny: 12,345 more characters of this reply not kept]"
    )
    assert code == 0 and digest["status"] == "ok"
    assert logged()["transcript"][2]["content"] == _bounded(long)


def test_a_long_answer_is_refused_and_sent_back_bounded(run, logged, scripted_server) -> None:
    long = "z" * (MAX_REPLY_CHARS + 1)
    scripted_server.add(SEARCH, reply(long), reply(json.dumps(OK)))
    code, digest = run()
    repair = scripted_server.requests[2]["messages"]
    assert repair[-2] == {"role": "assistant", "content": _bounded(long)}
    assert repair[-1]["content"].startswith(
        f"Your answer cannot be used: your answer is {len(long):,} characters"
    )
    assert code == 0 and digest["status"] == "ok"
    assert logged()["transcript"][-3]["content"] == _bounded(long)


# --- 7: a config error after only a ghost or bad arguments raises ---------------------------


@pytest.mark.parametrize(
    "first", [tool_call("ghost", {}), tool_call("docs_search", "{")], ids=["ghost", "bad_args"]
)
@pytest.mark.parametrize("status", [401, 404])
def test_a_config_error_before_any_tool_ran_raises(run, logged, scripted_server, first, status):
    scripted_server.add(first, http_error(status))
    code, said = run()
    assert code == 2 and f"HTTP {status}" in said
    row = logged()
    assert row["status"] == "failed" and row["tool_calls"] == 1


def test_a_config_error_after_a_tool_ran_ends_the_run_failed(run, scripted_server) -> None:
    scripted_server.add(SEARCH, http_error(404))
    code, digest = run()
    assert code == 5 and digest["status"] == "failed" and digest["cost"]["tool_calls"] == 1
