"""Delegate after a refusal: the next card over the threshold gets the task once, in one budget.

CLI tests run the real `tiny delegate` against the scripted server with cards written here
and the hashing embedder (routing without a model), and check the wire, the Digest, the run
log and `tiny runs stats`; library tests drive `delegate` with a clock moved by the script.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from tiny_cli.agent.calls import capped, left_after, short_of
from tiny_cli.agent.loop import approve_writes
from tiny_cli.cards.card import Budget
from tiny_cli.cli.live import LiveView
from tiny_cli.delegation import REROUTE_MIN_SHARE, delegate
from tiny_cli.digest import Attempt, Cost, Digest, Routing, make_brief
from tiny_cli.events import Event, Finished, RunStarted
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.routing.factory import build_router
from tiny_cli.runs import RunLog
from tiny_cli.runs.query import count_reroutes
from tiny_cli.serve import digest_text
from tiny_cli.settings import load_settings
from tiny_cli.testing import Turn, http_error, reply, respond, tool_call
from tiny_cli.workspace import open_workspace

TASK = "what does the travel expense policy say about reimbursement"
REFUSAL = {
    "status": "refused",
    "summary": "The handbook has no travel policy.",
    "reason": "no_page",
}
WEB_OK = {
    "status": "ok",
    "summary": "Economy class; receipts within 30 days.",
    "url": "https://x.test/t",
}
CARDS = {
    "policy-docs": """id: policy-docs
summary: >-
  Answers questions about the travel expense policy from the internal handbook:
  searches the handbook for travel, expenses and reimbursement rules.
examples:
  - what does the travel expense policy say about reimbursement
tools: [docs_search]
returns_required: [source]
budget: {max_tool_calls: 4, max_output_tokens: 400, max_wall_seconds: 45}
""",
    "policy-web": """id: policy-web
summary: >-
  Answers questions about the travel expense policy from the public policy page:
  fetches the travel, expenses and reimbursement rules from the web.
tools: [http_get, html_to_text]
returns_required: [url]
budget: {max_tool_calls: 6, max_output_tokens: 300, max_wall_seconds: 60}
""",
    "policy-wiki": """id: policy-wiki
summary: >-
  Answers questions about the travel expense policy from the team wiki pages:
  looks up travel, expenses and reimbursement notes.
tools: [http_get]
returns_required: [page]
budget: {max_tool_calls: 4, max_output_tokens: 300, max_wall_seconds: 45}
""",
    "policy-writer": """id: policy-writer
summary: >-
  Records the travel expense policy of a customer company in the CRM: adds the
  company with its travel, expenses and reimbursement rules.
tools: [crm_find_company, crm_add_company]
returns_required: [company_id]
side_effects: write
budget: {max_tool_calls: 4, max_output_tokens: 300, max_wall_seconds: 45}
""",
    "calendar": """id: calendar
summary: >-
  Books meeting rooms and schedules calls in the team calendar for a given day and hour.
tools: [http_get]
returns_required: [slot]
budget: {max_tool_calls: 2, max_output_tokens: 200, max_wall_seconds: 30}
""",
}


def reroute_cards(folder: Path, *ids: str) -> Path:
    folder.mkdir()
    for card_id in ids:
        (folder / f"{card_id}.yaml").write_text(CARDS[card_id], encoding="utf-8")
    return folder


@pytest.fixture
def tiny_with(tiny, scripted_server, tmp_path: Path):
    """Return `tiny ARGS` over the given cards, routed by the hashing embedder."""

    def with_cards(*ids: str):
        cards = reroute_cards(tmp_path / "cards", *ids)
        env = {
            "TINY_BASE_URL": scripted_server.url,
            "TINY_CARDS": str(cards),
            "TINY_EMBEDDER": "hashing",
        }

        def go(*args: str):
            result = tiny(*args, env=env)
            assert "Traceback" not in result.output
            return json.loads(result.stdout) if "--json" in args else result

        routed = go("route", TASK, "--json")
        return go, routed

    return with_cards


def _tools(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def _system(request: dict) -> str:
    return request["messages"][0]["content"]


def _passes(routed: dict[str, Any]) -> list[str]:
    """The cards whose score reaches the threshold, best first."""
    return [c["agent_id"] for c in routed["candidates"] if c["score"] >= routed["threshold"]]


# --- the CLI: wire, Digest, run log, stats ------------------------------------------------


def test_a_refusal_is_re_routed_to_the_second_card(tiny_with, scripted_server) -> None:
    go, routed = tiny_with("policy-docs", "policy-web")
    assert _passes(routed) == ["policy-docs", "policy-web"]  # both over the threshold
    scripted_server.add(reply(json.dumps(REFUSAL), tokens_out=150), reply(json.dumps(WEB_OK)))
    digest = go("delegate", TASK, "--json")
    first, second = scripted_server.requests  # two requests, no third
    assert _tools(first) == ["docs_search"] and "internal handbook" in _system(first)
    assert _tools(second) == ["http_get", "html_to_text"] and "You are policy-web" in _system(
        second
    )
    assert [m["role"] for m in second["messages"]] == ["system", "user"]  # a fresh context
    assert first["max_tokens"] == 400
    assert second["max_tokens"] == 250  # what the refusal left of 400, under policy-web's 300
    assert (digest["status"], digest["agent_id"]) == ("ok", "policy-web")
    assert digest["routing"]["agent_id"] == "policy-web"
    assert digest["routing"]["rerouted_from"] == "policy-docs"
    [attempt] = digest["attempts"]
    assert attempt["agent_id"] == "policy-docs" and attempt["status"] == "refused"
    assert attempt["reason"] == "no_page" and attempt["summary"] == REFUSAL["summary"]
    assert attempt["cost"]["tokens_out"] == 150 and attempt["cost"]["caller_tokens"] == 0
    cost = digest["cost"]  # both attempts, each once
    assert (cost["tokens_in"], cost["tokens_out"], cost["tool_calls"]) == (20, 155, 0)
    [row] = go("runs", "--json")
    assert (row["command"], row["card"], row["status"]) == ("delegate", "policy-web", "ok")
    assert (row["tokens_in"], row["tokens_out"]) == (20, 155)
    stored = go("runs", "show", str(row["id"]), "--json")
    assert stored["digest"]["attempts"] == digest["attempts"]
    assert stored["routing"]["rerouted_from"] == "policy-docs"
    systems = [m["content"] for m in stored["transcript"] if m["role"] == "system"]
    assert len(systems) == 2 and "You are policy-web" in systems[1]  # both transcripts
    assert "re-routed after policy-docs refused" in go("runs", "show", str(row["id"])).output
    assert go("runs", "stats", "--json")["reroutes"] == {"rerouted": 1, "rescued": 1}
    text = go("runs", "stats").output
    assert "re-routed after a refusal: 1, of which rescued (final status ok or partial): 1" in text


def test_the_human_digest_names_both_attempts_escaped(tiny_with, scripted_server) -> None:
    go, _ = tiny_with("policy-docs", "policy-web")
    why = "not mine [bold]x[/bold]\x1b[2J"
    scripted_server.add(
        reply(json.dumps({"status": "refused", "summary": why})), reply(json.dumps(WEB_OK))
    )
    result = go("delegate", TASK)
    assert result.exit_code == 0 and "\x1b" not in result.output
    assert "re-routed: policy-docs refused (not mine [bold]x[/bold]\\u001b[2J) → policy-web" in (
        result.output
    )


def test_no_re_route_when_the_second_card_is_under_the_threshold(
    tiny_with, scripted_server
) -> None:
    go, routed = tiny_with("policy-docs", "calendar")
    assert _passes(routed) == ["policy-docs"] and len(routed["candidates"]) == 2
    scripted_server.add(reply(json.dumps(REFUSAL)))
    digest = go("delegate", TASK, "--json")
    assert len(scripted_server.requests) == 1
    assert (digest["status"], digest["agent_id"]) == ("refused", "policy-docs")
    assert "attempts" not in digest and "rerouted_from" not in digest["routing"]
    assert not any("re-routed" in n for n in digest["notes_for_caller"])
    assert go("runs", "stats", "--json")["reroutes"] == {"rerouted": 0, "rescued": 0}


def test_no_re_route_to_a_writer_nobody_can_approve(tiny_with, scripted_server) -> None:
    go, routed = tiny_with("policy-docs", "policy-writer")
    assert _passes(routed) == ["policy-docs", "policy-writer"]
    scripted_server.add(reply(json.dumps(REFUSAL)))
    result = go("delegate", TASK)  # no terminal, no --yes: nobody can approve a write
    assert result.exit_code == 4  # the refusal stands: not needs_confirmation (exit 7)
    assert len(scripted_server.requests) == 1  # nothing asked of the model for the writer
    digest = go("runs", "show", "1", "--json")["digest"]
    assert (digest["status"], digest["agent_id"]) == ("refused", "policy-docs")
    assert "attempts" not in digest
    [note] = [n for n in digest["notes_for_caller"] if "re-routed" in n]
    assert note.startswith("not re-routed to policy-writer after the refusal: policy-writer writes")
    assert note.endswith("policy-writer writes and nobody can approve a write here")
    assert "note: not re-routed to policy-writer" in result.output


def test_a_writer_approved_with_yes_is_re_routed_to(tiny_with, scripted_server, home) -> None:
    go, _ = tiny_with("policy-docs", "policy-writer")
    scripted_server.add(
        reply(json.dumps(REFUSAL)),
        tool_call("crm_add_company", {"name": "Travel GmbH", "city": "Berlin"}),
        reply(json.dumps({"status": "ok", "summary": "Recorded.", "company_id": 1})),
    )
    digest = go("delegate", TASK, "--yes", "--json")
    assert _tools(scripted_server.requests[1]) == ["crm_find_company", "crm_add_company"]
    assert (digest["status"], digest["agent_id"]) == ("ok", "policy-writer")
    assert [a["agent_id"] for a in digest["attempts"]] == ["policy-docs"]
    assert [w["tool"] for w in digest["approved_writes"]] == ["crm_add_company"]
    with sqlite3.connect(home / "crm.sqlite3") as db:
        assert db.execute("select name from companies").fetchall() == [("Travel GmbH",)]


def test_a_second_refusal_is_not_re_routed_again(tiny_with, scripted_server) -> None:
    go, routed = tiny_with("policy-docs", "policy-web", "policy-wiki")
    passing = _passes(routed)
    assert len(passing) == 3 and passing[0] == "policy-docs"  # a third card could take it
    second = passing[1]
    scripted_server.add(reply(json.dumps(REFUSAL)), reply(json.dumps(REFUSAL)))
    digest = go("delegate", TASK, "--json")
    assert len(scripted_server.requests) == 2  # never a third
    assert f"You are {second}" in _system(scripted_server.requests[1])
    assert (digest["status"], digest["agent_id"]) == ("refused", second)
    assert [(a["agent_id"], a["status"]) for a in digest["attempts"]] == [
        ("policy-docs", "refused")
    ]
    assert go("runs", "stats", "--json")["reroutes"] == {"rerouted": 1, "rescued": 0}


# --- the library: one budget, one Finished --------------------------------------------------


class Clock:
    """A clock the scripted model moves: each answer takes the seconds the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def after(self, seconds: float, turn: Turn) -> Turn:
        """Answer with `turn` once `seconds` have passed on this clock."""

        def answer(request: dict) -> Turn:
            self.now += seconds
            return turn

        return respond(answer)


def _delegate(tmp_path: Path, server: Any, clock: Clock) -> tuple[Any, list[Event]]:
    cards = reroute_cards(tmp_path / "cards", "policy-docs", "policy-web")
    env = {"TINY_HOME": str(tmp_path), "TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
    ws = open_workspace(load_settings(env=env))
    events: list[Event] = []
    digest = delegate(
        ws,
        build_router(ws.settings, ws.cards.values()),
        make_brief(TASK),
        provider=OpenAIProvider(server.url),
        clock=clock,
        observer=events.append,
    )
    return digest, events


def test_the_second_card_gets_only_what_is_left_and_one_finished(tmp_path, scripted_server) -> None:
    clock = Clock()
    scripted_server.add(clock.after(20, reply(json.dumps(REFUSAL))), reply(json.dumps(WEB_OK)))
    digest, events = _delegate(tmp_path, scripted_server, clock)
    starts = [e for e in events if isinstance(e, RunStarted)]
    assert [s.card_id for s in starts] == ["policy-docs", "policy-web"]  # the view sees both
    assert starts[1].max_wall_seconds == 25.0  # 45 s less the 20 the refusal took, not 60
    assert starts[1].max_output_tokens == 300  # its own: the refusal left 395 of 400
    [finished] = [e for e in events if isinstance(e, Finished)]
    assert finished.digest == digest and events[-1] is finished
    assert digest.status == "ok" and [a.agent_id for a in digest.attempts] == ["policy-docs"]
    assert [m["role"] for m in finished.messages] == ["system", "user", "assistant"] * 2


def test_no_re_route_when_too_little_budget_is_left(tmp_path, scripted_server) -> None:
    clock = Clock()
    scripted_server.add(clock.after(40, reply(json.dumps(REFUSAL))))
    digest, events = _delegate(tmp_path, scripted_server, clock)
    assert len(scripted_server.requests) == 1
    assert digest.status == "refused" and digest.attempts == ()
    [note] = [n for n in digest.notes_for_caller if "re-routed" in n]
    assert note == (
        "not re-routed to policy-web after the refusal: too little is left of policy-docs's "
        "budget: 5.0 s of wall time left, under the 15.0 s needed"
    )
    [finished] = [e for e in events if isinstance(e, Finished)]
    assert finished.digest == digest


class Ranked:
    """A router that ranks the cards as told, every score over the threshold."""

    def __init__(self, *ids: str) -> None:
        self.ids = ids

    def route(self, task: str, top: int = 5) -> SimpleNamespace:
        ranked = tuple(SimpleNamespace(agent_id=c, score=9.0 - i) for i, c in enumerate(self.ids))
        first = self.ids[0]
        return SimpleNamespace(
            decision="route", agent_id=first, score=9.0, threshold=1.5, candidates=ranked
        )


def test_a_refusal_after_a_write_ran_is_not_re_routed(tmp_path, scripted_server) -> None:
    cards = reroute_cards(tmp_path / "cards", "policy-writer", "policy-docs")
    ws = open_workspace(load_settings(env={"TINY_HOME": str(tmp_path), "TINY_CARDS": str(cards)}))
    scripted_server.add(
        tool_call("crm_add_company", {"name": "Travel GmbH", "city": "Berlin"}),
        reply(json.dumps(REFUSAL)),
    )
    brief, provider = make_brief(TASK), OpenAIProvider(scripted_server.url)
    router = Ranked("policy-writer", "policy-docs")
    digest = delegate(ws, router, brief, provider=provider, approve=approve_writes)  # type: ignore[arg-type]
    assert len(scripted_server.requests) == 2 and digest.status == "refused"
    assert digest.agent_id == "policy-writer" and digest.attempts == ()
    assert digest.notes_for_caller[-1] == (
        "not re-routed to policy-docs after the refusal: policy-writer refused after a write "
        "of its ran"
    )


def test_a_second_card_whose_model_is_not_there_keeps_the_first_attempts_work(
    tmp_path, scripted_server
) -> None:
    scripted_server.add(
        tool_call("docs_search", {"query": "travel policy"}),
        reply(json.dumps(REFUSAL)),
        http_error(404, "model not found"),
    )
    cards = reroute_cards(tmp_path / "cards", "policy-docs", "policy-web")
    ws = open_workspace(load_settings(env={"TINY_HOME": str(tmp_path), "TINY_CARDS": str(cards)}))
    events: list[Event] = []
    router = Ranked("policy-docs", "policy-web")
    digest = delegate(
        ws, router, make_brief(TASK), provider=OpenAIProvider(scripted_server.url),  # type: ignore[arg-type]
        observer=events.append,
    )  # fmt: skip
    assert len(scripted_server.requests) == 3
    assert (digest.status, digest.agent_id) == ("refused", "policy-docs")
    assert [c.name for c in digest.calls] == ["docs_search"]  # the tool's work is kept
    assert digest.notes_for_caller[-1].startswith("not re-routed to policy-web after the refusal")
    [finished] = [e for e in events if isinstance(e, Finished)]
    assert finished.digest == digest and events[-1] is finished


# --- the rules as functions of data ---------------------------------------------------------


def test_what_is_left_caps_and_when_it_is_too_little() -> None:
    first = Budget(max_tool_calls=4, max_output_tokens=400, max_wall_seconds=45.0)
    left = left_after(first, Cost(tokens_out=150, tool_calls=3), 20.0)
    assert left == Budget(1, 250, 25.0)
    own = Budget(6, 300, 60.0)
    assert capped(own, left) == Budget(1, 250, 25.0) and capped(own, None) == own
    assert short_of(left, own, REROUTE_MIN_SHARE) == (
        "1 tool call(s) left, under the 2 needed"  # a quarter of 6, rounded up
    )
    assert short_of(Budget(2, 75, 15.0), own, 0.25) is None  # exactly a quarter is enough
    assert left_after(first, Cost(tokens_out=900, tool_calls=9), 99.0) == Budget(0, 0, 0.0)


def test_costs_add_up_once_and_routing_json_keeps_its_keys() -> None:
    a = Cost(10, 150, 1, 1, ("ghost",), 1.25, caller_tokens=40, recovered_calls=1)
    b = Cost(12, 5, 2, 0, (), 0.5, caller_tokens=30)
    assert a.plus(b) == Cost(22, 155, 3, 1, ("ghost",), 1.75, 0, 1)
    assert Routing("route", "x", 2.0).to_json() == {
        "decision": "route",
        "agent_id": "x",
        "score": 2.0,
    }
    assert Routing("route", "y", 1.6, "x").to_json()["rerouted_from"] == "x"


def test_reroute_counts_read_statuses_not_text() -> None:
    refused = json.dumps({"attempts": [{"agent_id": "a", "status": "refused"}]})
    failed = json.dumps({"attempts": [{"agent_id": "a", "status": "failed"}]})
    field = json.dumps({"fields": {"attempts": [{"status": "refused"}]}})  # a card's field
    rows = [("ok", refused), ("partial", refused), ("refused", refused), ("ok", failed)]
    rows += [("ok", field), ("ok", "{broken"), ("ok", None), ("ok", "[1]")]
    assert count_reroutes(rows).rerouted == 3 and count_reroutes(rows).rescued == 2


# --- what the faces and the run log make of a second start --------------------------------


def _start(card: str) -> RunStarted:
    return RunStarted(
        card, "m", "native", TASK, 4, 45.0, 400, ({"role": "system", "content": "s"},)
    )


def _rescued() -> Digest:
    attempt = Attempt("policy-docs", "refused", "no_page", "Not in \x1b[2Jthe handbook.")
    routing = Routing("route", "policy-web", 11.6, "policy-docs")
    return Digest("policy-web", "ok", "Economy.", routing=routing, attempts=(attempt,))


def test_a_second_start_keeps_one_row_in_the_run_log(home: Path) -> None:
    with RunLog.open(home) as log:
        observe = log.observer("delegate", "delegate", "127.0.0.1")
        observe(_start("policy-docs"))
        log.flush()  # the row is written as running before the re-route starts
        observe(_start("policy-web"))
        log.flush()
        observe(Finished(_rescued(), ({"role": "system", "content": "s"},)))
        [row] = log.runs()
        assert (row.card, row.status) == ("policy-web", "ok")
        assert log.run(row.id).digest["attempts"][0]["agent_id"] == "policy-docs"  # type: ignore[index]
        assert log.stats().reroutes.rescued == 1


def test_the_live_view_and_the_mcp_text_show_the_re_route() -> None:
    view = LiveView(Console(file=io.StringIO(), width=120))
    see = view.observer("delegate")
    see(_start("policy-docs"))
    see(_start("policy-web"))
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(view._render())
    screen = console.file.getvalue()  # type: ignore[attr-defined]
    assert "re-routed: policy-docs → policy-web" in screen and "policy-web · m" in screen
    text = digest_text(_rescued())
    assert "re-routed: policy-docs refused (Not in \\u001b[2Jthe handbook.) → policy-web" in text
