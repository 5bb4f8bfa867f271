"""The runner reports every step to its observer, in order; delegate adds the routing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiny_cli.agent.loop import invoke
from tiny_cli.digest import make_brief
from tiny_cli.events import (
    BudgetHit,
    Event,
    Finished,
    GhostCall,
    ModelReplied,
    ModeSwitched,
    RunStarted,
    ToolCalled,
    ToolFinished,
    TurnStarted,
    fan_out,
)
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.settings import load_settings
from tiny_cli.testing import reply, tool_call
from tiny_cli.workspace import open_workspace

from .conftest import HANDBOOK, SEED_CARDS

ANSWER = {"status": "ok", "summary": "Day one: laptop.", "source": "onboarding.md"}


@pytest.fixture
def workspace(home: Path):
    env = {"TINY_HOME": str(home), "TINY_CARDS": str(SEED_CARDS), "TINY_DOCS": str(HANDBOOK)}
    return open_workspace(load_settings(env=env))


def _run(workspace, server, mode: str = "native") -> tuple[list[Event], object]:
    seen: list[Event] = []
    digest = invoke(
        workspace.card("docs-finder"),
        make_brief("how did the onboarding process work again"),
        registry=workspace.registry,
        provider=OpenAIProvider(server.url),
        model="m",
        tool_mode=mode,
        observer=seen.append,
    )
    return seen, digest


def test_events_follow_the_loop(workspace, scripted_server) -> None:
    scripted_server.add(
        tool_call("web_search", {"q": "x"}),
        tool_call("docs_search", {"query": "onboarding"}),
        reply(json.dumps(ANSWER)),
    )
    seen, digest = _run(workspace, scripted_server)
    kinds = [type(e).__name__ for e in seen]
    assert kinds == [
        "RunStarted",
        "TurnStarted", "ModelReplied", "ToolCalled", "GhostCall", "ToolFinished",
        "TurnStarted", "ModelReplied", "ToolCalled", "ToolFinished",
        "TurnStarted", "ModelReplied",
        "Finished",
    ]  # fmt: skip
    start = seen[0]
    assert isinstance(start, RunStarted) and start.card_id == "docs-finder"
    assert start.max_tool_calls == 4 and len(start.messages) == 2
    ghost = next(e for e in seen if isinstance(e, GhostCall))
    assert ghost.name == "web_search" and ghost.count == 1
    ran = [e for e in seen if isinstance(e, ToolFinished)]
    assert [r.outcome for r in ran] == ["ghost", "ok"] and "onboarding" in ran[1].result.lower()
    replies = [e for e in seen if isinstance(e, ModelReplied)]
    assert [r.turn for r in replies] == [1, 2, 3]
    assert [t.calls_used for t in seen if isinstance(t, TurnStarted)] == [0, 1, 2]
    end = seen[-1]
    assert isinstance(end, Finished) and end.digest == digest
    assert len(end.messages) == 7  # system, user, 2 x (call, result), the answer
    assert isinstance(seen[3], ToolCalled) and seen[3].arguments == '{"q": "x"}'


def test_a_mode_switch_and_a_spent_budget_are_events(workspace, scripted_server) -> None:
    text_call = '{"name": "docs_search", "arguments": {"query": "onboarding"}}'
    call = json.dumps({"tool": "docs_search", "arguments": {"query": "onboarding"}})
    scripted_server.add(reply(text_call), *[reply(call)] * 3, reply(json.dumps(ANSWER)))
    seen, _ = _run(workspace, scripted_server, mode="auto")
    assert ModeSwitched("json", "the model wrote tool calls as text") in seen
    assert BudgetHit("max_tool_calls") in seen
    assert [e.recovered for e in seen if isinstance(e, ToolCalled)] == [True] + [False] * 3


def test_fan_out_passes_each_event_to_every_observer() -> None:
    first: list[Event] = []
    second: list[Event] = []
    event = BudgetHit("ghost_calls")
    fan_out(first.append, None, second.append)(event)
    assert first == second == [event]
