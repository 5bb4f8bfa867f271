"""Delegate after review: a declined write ends the task, the run log keeps the routing, the
live view's budget line.

CLI tests run the real `tiny delegate` against the scripted server with the re-route cards
and the hashing embedder; the write prompt is answered as at a terminal.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.test_reroute import REFUSAL, TASK, WEB_OK, Clock, reroute_cards
from tiny_cli.cli.common import Terminal
from tiny_cli.cli.live import LiveView
from tiny_cli.delegation import delegate
from tiny_cli.digest import make_brief
from tiny_cli.errors import ConfigError
from tiny_cli.events import Aborted, Event, RunStarted
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.routing.factory import build_router
from tiny_cli.runs import RunLog
from tiny_cli.settings import load_settings
from tiny_cli.testing import http_error, reply, tool_call
from tiny_cli.workspace import open_workspace

CRM_TASK = "record the travel policy of customer company Acme in the CRM"
ACME = {"name": "Acme", "city": "Berlin"}
REFUSED = {"status": "refused", "summary": "User did not approve; not my job then."}
DOCS_OK = {"status": "ok", "summary": "Acme travel policy recorded.", "source": "travel.md"}


@pytest.fixture
def delegating(tiny, scripted_server, tmp_path: Path):
    """Return `tiny ARGS` over the given cards (hashing embedder), at a terminal."""

    def with_cards(*ids: str):
        cards = reroute_cards(tmp_path / "cards", *ids)
        env = {
            "TINY_BASE_URL": scripted_server.url,
            "TINY_CARDS": str(cards),
            "TINY_EMBEDDER": "hashing",
        }

        def go(*args: str, input: str | None = None):
            result = tiny(*args, input=input, env=env, obj=Terminal(True))
            assert "Traceback" not in result.output
            return result

        return go

    return with_cards


def _show(go: Any, run_id: int = 1) -> dict[str, Any]:
    return json.loads(go("runs", "show", str(run_id), "--json").stdout)


# --- 1. a declined write ends the task where it is ------------------------------------------


def test_a_declined_write_is_not_re_routed_nor_ok(delegating, scripted_server) -> None:
    go = delegating("policy-docs", "policy-writer")
    routed = json.loads(go("route", CRM_TASK, "--json").stdout)
    assert [c["agent_id"] for c in routed["candidates"][:2]] == ["policy-writer", "policy-docs"]
    scripted_server.add(
        tool_call("crm_add_company", ACME),
        reply(json.dumps(REFUSED)),
        tool_call("docs_search", {"query": "Acme travel policy"}),
        reply(json.dumps(DOCS_OK)),
    )
    result = go("delegate", CRM_TASK, input="n\n")
    assert result.exit_code != 0, result.output
    assert len(scripted_server.requests) == 2  # policy-docs is never asked
    assert "re-routed:" not in result.stdout and "Acme travel policy recorded." not in result.stdout
    note = "not re-routed to policy-docs after the refusal: policy-writer refused after a write"
    assert f"{note} of its was declined" in " ".join(result.stdout.split())
    assert 'declined write: crm_add_company {"name": "Acme", "city": "Berlin"}' in result.stdout
    digest = _show(go)["digest"]
    assert digest["status"] != "ok" and digest["agent_id"] == "policy-writer"
    assert [c["tool"] for c in digest["declined_writes"]] == ["crm_add_company"]
    assert "attempts" not in digest


# --- 2. and 3. the run log keeps the routing: candidates, threshold, also after an error -----


def test_the_run_log_keeps_the_candidates_and_the_threshold(delegating, scripted_server) -> None:
    go = delegating("policy-docs", "policy-web")
    routed = json.loads(go("route", TASK, "--json").stdout)
    scripted_server.add(reply(json.dumps(REFUSAL)), reply(json.dumps(WEB_OK)))
    assert go("delegate", TASK, "--json").exit_code == 0
    routing = _show(go)["routing"]
    assert routing["candidates"] == [  # as `tiny route --json` gives them, scores rounded
        {"agent_id": c["agent_id"], "score": pytest.approx(c["score"], abs=1e-4)}
        for c in routed["candidates"]
    ]
    assert routing["threshold"] == pytest.approx(routed["threshold"], abs=1e-4)
    assert (routing["agent_id"], routing["rerouted_from"]) == ("policy-web", "policy-docs")


@pytest.mark.parametrize("refused_first", [False, True])
def test_a_run_ended_by_an_error_keeps_its_routing_and_can_be_corrected(
    delegating, scripted_server, refused_first: bool
) -> None:
    go = delegating("policy-docs", "policy-web")
    if refused_first:
        scripted_server.add(reply(json.dumps(REFUSAL)))
    scripted_server.add(http_error(401, "bad key"))
    result = go("delegate", TASK, "--json")
    assert result.exit_code != 0 and "401" in result.output
    run = _show(go)
    assert run["status"] == "failed"
    assert (run["routing"]["decision"], run["routing"]["agent_id"]) == ("route", "policy-docs")
    assert [c["agent_id"] for c in run["routing"]["candidates"][:2]] == [
        "policy-docs",
        "policy-web",
    ]
    corrected = go("runs", "correct", "1", "--card", "policy-web", "--no-learn", "--json")
    assert corrected.exit_code == 0, corrected.output
    correction = json.loads(corrected.stdout)["correction"]
    assert (correction["routed"], correction["card"]) == ("policy-docs", "policy-web")


def test_a_delegate_run_with_no_routing_says_so_truly(home: Path) -> None:
    with RunLog.open(home) as log:
        observe = log.observer("delegate", "delegate", "127.0.0.1", TASK)
        observe(RunStarted("policy-docs", "m", "native", TASK, 4, 45.0, 400, ()))
        observe(Aborted("the server refused the key", ()))
        with pytest.raises(ConfigError) as caught:
            log.correct(log.recorded()[0], "policy-web")
    message = str(caught.value)
    assert "no routing decision in the log" in message
    assert "only delegate runs" not in message  # it is a delegate run


# --- 4. the live view's budget line after a re-route ------------------------------------------


def test_the_live_budget_line_rounds_both_numbers_alike(tmp_path, scripted_server) -> None:
    clock = Clock()
    scripted_server.add(clock.after(0.0136, reply(json.dumps(REFUSAL))), reply(json.dumps(WEB_OK)))
    cards = reroute_cards(tmp_path / "cards", "policy-docs", "policy-web")
    env = {"TINY_HOME": str(tmp_path), "TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
    ws = open_workspace(load_settings(env=env))
    screen = io.StringIO()
    console = Console(file=screen, width=120, force_terminal=True, color_system=None)
    with LiveView(console, clock=clock) as view:
        see = view.observer("delegate")

        def observe(event: Event) -> None:
            see(event)
            if isinstance(event, RunStarted) and event.card_id == "policy-web":
                with view.paused():  # as a write prompt would: the frame is drawn as it stops
                    pass

        delegate(ws, build_router(ws.settings, ws.cards.values()), make_brief(TASK),
                 provider=OpenAIProvider(scripted_server.url), clock=clock,
                 observer=observe)  # fmt: skip
    assert "45 s of 45 s left" in screen.getvalue()
    assert "44.9864" not in screen.getvalue()
