"""Reasoning blocks left in a reply, and `learn --generate` after a provider error.

A reasoning model served without a reasoning parser (vLLM without --reasoning-parser,
llama-server --reasoning-format none) sends its `<think>…</think>` block in `content`: it is
neither a call nor an answer, and the context keeps the reply as the model sent it. A provider
error ends a card's asking at once: the provider already retried what it could.

A scripted model server on loopback answers; the cards, the handbook and learned.jsonl are real.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from tiny_cli.agent.reply import REASONING_ONLY, without_reasoning
from tiny_cli.routing.examples_file import load_learned
from tiny_cli.testing import ScriptedServer, http_error, reply, tool_call

TASK = "how does onboarding work"
THINK = "<think>\nThe user asks about onboarding; I will search the handbook.\n</think>\n\n"
JSON_CALL = '{"tool": "docs_search", "arguments": {"query": "onboarding"}}'
BARE_CALL = '{"name": "docs_search", "arguments": {"query": "onboarding"}}'
SEARCH = {"query": "onboarding"}
ANSWER = {"status": "ok", "summary": "Two weeks with a buddy.", "source": "onboarding.md"}
REQUESTS = ["Where does the handbook explain parental leave?", "Find the travel expense rules"]


@pytest.fixture
def invoke(tiny: Callable[..., Result], scripted_server: ScriptedServer):
    """Run `tiny invoke docs-finder TASK --json ARGS`; return the Digest."""

    def go(*args: str) -> dict:
        env = {"TINY_BASE_URL": scripted_server.url, "TINY_MODEL": "m"}
        result = tiny("invoke", "docs-finder", TASK, "--json", *args, env=env)
        assert "Traceback" not in result.output, result.output
        scripted_server.assert_done()
        return json.loads(result.stdout)

    return go


@pytest.fixture
def learn(tiny: Callable[..., Result], seed_copy: Path, scripted_server: ScriptedServer):
    """Run `tiny learn --generate --card web-reader --json` on the copied cards."""

    def go() -> dict:
        env = {"TINY_CARDS": str(seed_copy), "TINY_EMBEDDER": "hashing",
               "TINY_BASE_URL": scripted_server.url, "TINY_MODEL": "m"}  # fmt: skip
        result = tiny("learn", "--generate", "--card", "web-reader", "--json", env=env)
        assert "Traceback" not in result.output, result.output
        scripted_server.assert_done()
        return json.loads(result.stdout)

    return go


def _sent(request: dict, role: str) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == role]


# --- reasoning blocks --------------------------------------------------------------------


@pytest.mark.parametrize(
    "prefix",
    [THINK, "<think>\n\n</think>\n\n", "The user asks about onboarding.\n</think>\n\n"],
    ids=["reasoned", "empty", "opened-by-the-template"],
)
def test_a_json_mode_call_after_a_think_block_is_run(invoke, scripted_server, prefix) -> None:
    scripted_server.add(reply(prefix + JSON_CALL), reply(json.dumps(ANSWER)))
    digest = invoke("--tool-mode", "json")
    assert (digest["status"], digest["cost"]["tool_calls"]) == ("ok", 1)
    second = scripted_server.requests[1]
    assert _sent(second, "user")[-1].startswith("Result of docs_search:")
    assert _sent(second, "assistant") == [prefix + JSON_CALL]  # kept as the model sent it


def test_an_auto_mode_bare_call_after_a_think_block_is_recovered(invoke, scripted_server) -> None:
    scripted_server.add(reply(THINK + BARE_CALL), reply(json.dumps(ANSWER)))
    digest = invoke("--tool-mode", "auto")
    assert digest["status"] == "ok"
    assert digest["cost"]["tool_calls"] == digest["cost"]["recovered_calls"] == 1
    assert _sent(scripted_server.requests[1], "user")[-1].startswith("Result of docs_search:")


def test_a_draft_answer_in_the_think_block_is_not_a_second_answer(invoke, scripted_server) -> None:
    draft = {"status": "partial", "summary": "Not sure yet."}
    think = f"<think>A first draft: {json.dumps(draft)}; the page says more.</think>\n"
    scripted_server.add(tool_call("docs_search", SEARCH), reply(think + json.dumps(ANSWER)))
    digest = invoke()
    assert (digest["status"], digest["summary"]) == ("ok", ANSWER["summary"])
    assert len(scripted_server.requests) == 2  # no repair turn


def test_a_reply_cut_off_while_thinking_is_repaired_as_no_answer(invoke, scripted_server) -> None:
    scripted_server.add(
        tool_call("docs_search", SEARCH),
        reply('<think>Draft: {"status": "ok", "summary": "x"', finish_reason="length"),
        reply(json.dumps(ANSWER)),
    )
    digest = invoke()
    assert digest["status"] == "ok"
    repair = _sent(scripted_server.requests[2], "user")[-1]
    assert REASONING_ONLY in repair


@pytest.mark.slow
def test_a_draft_shown_when_time_runs_out_leaves_its_reasoning_out(invoke, scripted_server) -> None:
    bad = '<think>private plan</think>\n{"summary": "Two weeks with a buddy."}'  # no status
    late = reply(json.dumps(ANSWER), delay=4)
    scripted_server.add(tool_call("docs_search", SEARCH), reply(bad), late)
    digest = invoke("--wall-scale", "0.04")  # docs-finder's 45 s: 1.8 s
    assert len(scripted_server.requests) == 3  # the repaired answer came after the wall budget
    assert digest["reason"] == "max_wall_seconds"
    assert "Two weeks with a buddy." in digest["summary"]
    assert "private plan" not in digest["summary"] and "think>" not in digest["summary"]


def test_json_from_its_first_character_keeps_a_quoted_closing_tag() -> None:
    answer = json.dumps({"status": "ok", "summary": "it ends with </think>"})
    assert without_reasoning(answer) == answer
    assert without_reasoning(THINK + answer).strip() == answer
    assert without_reasoning("<think>one</think><think>two</think>[1]") == "[1]"


# --- learn --generate ----------------------------------------------------------------------


def test_generate_takes_the_list_after_the_think_block(learn, scripted_server, seed_copy) -> None:
    think = '<think>\nSomething like ["x"]? No: longer, concrete requests.\n</think>\n\n'
    scripted_server.add(reply(think + json.dumps(REQUESTS)))
    data = learn()
    assert [c["status"] for c in data["cards"]] == ["generated"]
    generated = load_learned(seed_copy).generated["web-reader"]
    assert "x" not in generated and set(generated) <= set(REQUESTS) and generated


@pytest.mark.parametrize("status,sent", [(400, 1), (503, 4)])  # 503: the provider's 4 tries
def test_a_provider_error_fails_the_card_without_asking_again(
    learn, scripted_server, status, sent
) -> None:
    now = {"Retry-After": "0"}
    scripted_server.add(*(http_error(status, headers=now) for _ in range(sent)))
    data = learn()
    assert len(scripted_server.requests) == sent  # not asked a second time
    assert data["card_requests"] == 1 and data["failed"] == ["web-reader"]
    [card] = data["cards"]
    assert card["status"] == "failed" and f"HTTP {status}" in card["problem"]
