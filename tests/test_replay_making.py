"""A recording carries its making (options, digests, routing) and the bodies as sent; a replay
needs no flag, routes from the file, says what changed, and stays out of the run log (issue 30)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from tiny_cli.cards.load import Card
from tiny_cli.routing.router import Router
from tiny_cli.testing import ScriptedServer, respond

from .test_bench import TURNS, model, write_tasks


@pytest.fixture
def cli_env(cli_env: dict[str, str], plain_cards: Path) -> dict[str, str]:
    """Replay tests script answers without tool calls: use cards that allow that."""
    return {**cli_env, "TINY_CARDS": str(plain_cards)}


def _recorded(tiny, tmp_path: Path) -> tuple[Path, Path, dict]:
    """Record `tiny bench --repeat 2` against a scripted server; return tasks, file, report."""
    tasks, recording = write_tasks(tmp_path / "bench"), tmp_path / "recordings" / "run.jsonl"
    with ScriptedServer() as server:
        server.add(*[respond(model)] * TURNS)
        result = tiny(
            "bench", "--tasks", str(tasks), "--json", "--repeat", "2", "--record", str(recording),
            env={"TINY_BASE_URL": server.url},
        )  # fmt: skip
    assert result.exit_code == 0 and not server.errors, result.output
    return tasks, recording, json.loads(result.stdout)


def _lines(recording: Path) -> list[dict]:
    return [json.loads(line) for line in recording.read_text("utf-8").splitlines()]


def _same_runs(one: dict, other: dict) -> bool:
    """The runs' outcomes and costs alike (wall times and dates are the replay's own)."""

    def runs(report: dict) -> list:
        return [
            (r["status"], r["tool_calls"], r.get("tokens_in"), r.get("outcome"))
            for task in report["tasks"] for arm in task["runs"].values() for r in arm
        ]  # fmt: skip

    return runs(one) == runs(other)


@pytest.mark.slow
def test_a_recording_holds_its_options_digests_and_routing(tiny, tmp_path: Path) -> None:
    _, recording, _ = _recorded(tiny, tmp_path)
    header = _lines(recording)[0]
    assert header["bench"]["tasks"] == "../bench/tasks.yaml"  # relative to the recording
    assert header["bench"]["repeat"] == 2 and header["bench"]["arm"] == "both"
    assert set(header["digests"]) == {"tasks", "cards", "learned"}
    assert len(header["digests"]["tasks"]) == 64 and header["digests"]["learned"] is None
    routes = header["routes"]
    assert routes and all(
        {"agent", "candidates", "score", "threshold"} <= set(r) for r in routes.values()
    )


@pytest.mark.slow
def test_a_recording_keeps_the_body_as_sent_in_its_order(tiny, tmp_path: Path) -> None:
    _, recording, _ = _recorded(tiny, tmp_path)
    exchange = _lines(recording)[1]
    assert "request" not in exchange
    assert list(exchange["body"])[:3] == ["model", "messages", "max_tokens"]  # not sorted
    assert list(exchange)[:4] == ["run", "agent", "key", "body"]  # the key beside the body


@pytest.mark.slow
def test_the_file_alone_replays_the_run_and_is_not_logged(tiny, tmp_path: Path) -> None:
    _, recording, recorded = _recorded(tiny, tmp_path)
    before = json.loads(tiny("runs", "--json").stdout)
    result = tiny("bench", "--replay", str(recording), "--json")
    assert result.exit_code == 0, result.output
    assert _same_runs(json.loads(result.stdout), recorded)
    assert json.loads(tiny("runs", "--json").stdout) == before  # a replay is not a run
    home = tmp_path / "fresh-home"
    fresh = tiny("bench", "--replay", str(recording), "--json", env={"TINY_HOME": str(home)})
    assert fresh.exit_code == 0, fresh.output
    written = {p.relative_to(home).parts[0] for p in home.rglob("*") if p.is_file()}
    assert written == {"cache"}  # docs/bench.md: all a replay writes under TINY_HOME
    logged = tiny("bench", "--replay", str(recording), "--json", "--log")
    assert logged.exit_code == 0, logged.output
    assert len(json.loads(tiny("runs", "--json").stdout)) > len(before)  # unless asked


@pytest.mark.slow
def test_a_replay_routes_as_recorded_whatever_the_embedder(tiny, tmp_path: Path) -> None:
    _, recording, recorded = _recorded(tiny, tmp_path)
    result = tiny("bench", "--replay", str(recording), "--json", env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 0, result.output
    assert _same_runs(json.loads(result.stdout), recorded)
    header, *exchanges = recording.read_text("utf-8").splitlines()
    making = json.loads(header)
    routed = next(k for k, r in making["routes"].items() if r["agent"] is not None)
    making["routes"][routed]["agent"] = None  # the recording now says: abstain
    recording.write_text("\n".join([json.dumps(making), *exchanges]) + "\n", "utf-8")
    edited = tiny("bench", "--replay", str(recording), "--json")
    runs = next(t["runs"]["tiny"] for t in json.loads(edited.stdout)["tasks"] if t["id"] == routed)
    assert {r["status"] for r in runs} == {"abstain"}  # as recorded, not as routed now


@pytest.mark.parametrize(
    "broken",
    [{"agent": "no-such-card", "candidates": [["no-such-card", 2.0]]}, {"agent": 3}, "route"],
    ids=["unknown card", "wrong types", "not an object"],
)
@pytest.mark.slow
def test_a_route_that_is_no_decision_here_routes_live(tiny, tmp_path: Path, broken) -> None:
    _, recording, recorded = _recorded(tiny, tmp_path)
    header, *exchanges = recording.read_text("utf-8").splitlines()
    making = json.loads(header)
    making["routes"][next(iter(making["routes"]))] = broken  # edited by hand, or cards changed
    recording.write_text("\n".join([json.dumps(making), *exchanges]) + "\n", "utf-8")
    result = tiny("bench", "--replay", str(recording), "--json")
    assert result.exit_code == 0, result.output  # routed live, as the recording was made here
    assert _same_runs(json.loads(result.stdout), recorded)


@pytest.mark.slow
def test_a_flag_given_still_wins_over_the_recorded_one(tiny, tmp_path: Path) -> None:
    _, recording, _ = _recorded(tiny, tmp_path)
    result = tiny("bench", "--replay", str(recording), "--json", "--repeat", "1")
    assert result.exit_code == 0, result.output
    assert "never asked for" in result.stderr  # --repeat 1 replays half the recording


@pytest.mark.slow
def test_a_replay_says_in_one_line_what_changed(tiny, tmp_path: Path) -> None:
    tasks, recording, _ = _recorded(tiny, tmp_path)
    tasks.write_text(tasks.read_text("utf-8") + "\n", "utf-8")
    result = tiny("bench", "--replay", str(recording), "--json")
    (line,) = [x for x in result.stderr.splitlines() if "changed since the recording" in x]
    assert f"the task file {tasks}" in line


@pytest.mark.slow
def test_the_learned_examples_beside_the_cards_are_part_of_the_making(
    tiny, tmp_path: Path, plain_cards: Path
) -> None:
    _, recording, _ = _recorded(tiny, tmp_path)
    header, *exchanges = recording.read_text("utf-8").splitlines()
    assert json.loads(header)["digests"]["learned"] is None  # none beside the cards
    learned = plain_cards / "learned.jsonl"
    learned.write_text('{"task": "book a table for two", "card": null}\n', "utf-8")
    result = tiny("bench", "--replay", str(recording), "--json")
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.stderr.splitlines() if "changed since the recording" in x]
    assert "learned.jsonl (the replay routes as recorded)" in line and "card(s)" not in line
    older = json.loads(header)
    del older["digests"]["learned"]  # made before the digests covered the file: not known
    recording.write_text("\n".join([json.dumps(older), *exchanges]) + "\n", "utf-8")
    result = tiny("bench", "--replay", str(recording), "--json")
    assert result.exit_code == 0 and "changed since" not in result.stderr, result.stderr
    _, recorded_again, _ = _recorded(tiny, tmp_path / "again")  # made with the file there
    digest = _lines(recorded_again)[0]["digests"]["learned"]
    assert digest == hashlib.sha256(learned.read_bytes()).hexdigest()


@pytest.mark.slow
def test_a_miss_names_the_options_it_was_recorded_with(tiny, tmp_path: Path) -> None:
    _, recording, _ = _recorded(tiny, tmp_path)
    lines = recording.read_text("utf-8").splitlines()
    recording.write_text("\n".join(lines[:-1]) + "\n", "utf-8")
    result = tiny("bench", "--replay", str(recording))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert (
        "no recorded answer" in line and "it was recorded with --tasks ../bench/tasks.yaml" in line
    )


def _old_format(recording: Path) -> None:
    """Make a recording as tiny wrote them before: no making, a key-sorted request."""
    header, *exchanges = _lines(recording)
    old = {k: v for k, v in header.items() if k not in ("bench", "digests", "routes")}
    for e in exchanges:
        e["request"] = json.loads(json.dumps(e.pop("body"), sort_keys=True))
    text = [json.dumps(x, sort_keys=True) for x in (old, *exchanges)]
    recording.write_text("\n".join(text) + "\n", "utf-8")


@pytest.mark.slow
def test_an_old_recording_replays_with_its_flags_and_upgrades(tiny, tmp_path: Path) -> None:
    tasks, recording, recorded = _recorded(tiny, tmp_path)
    _old_format(recording)
    flags = ("--tasks", str(tasks), "--repeat", "2")
    old = tiny("bench", "--replay", str(recording), "--json", *flags)
    assert old.exit_code == 0 and _same_runs(json.loads(old.stdout), recorded), old.output
    upgraded = tiny("bench", "--replay", str(recording), "--json", *flags, "--upgrade")
    assert upgraded.exit_code == 0, upgraded.output
    header, *exchanges = _lines(recording)
    assert header["bench"]["repeat"] == 2 and header["routes"]
    assert all(list(e)[:4] == ["run", "agent", "key", "body"] for e in exchanges)
    alone = tiny("bench", "--replay", str(recording), "--json")
    assert alone.exit_code == 0 and _same_runs(json.loads(alone.stdout), recorded), alone.output


@pytest.mark.slow
def test_an_upgrade_of_a_partial_replay_writes_nothing(tiny, tmp_path: Path) -> None:
    tasks, recording, _ = _recorded(tiny, tmp_path)
    _old_format(recording)
    before = recording.read_text("utf-8")
    flags = ("--tasks", str(tasks), "--repeat", "1", "--upgrade")
    result = tiny("bench", "--replay", str(recording), *flags)
    assert result.exit_code == 2 and "not upgraded" in result.stderr
    assert recording.read_text("utf-8") == before


class _ByIdentity:
    """An embedder that gives every text the same vector: every card ties on every task."""

    name = "same"

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = np.ones((len(texts), 8), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_a_tie_in_routing_goes_to_the_lower_card_id() -> None:
    cards = [
        Card(name, "look things up", ("docs_search",), ()) for name in ("zeta", "alpha", "mid")
    ]
    decision = Router(cards, _ByIdentity(), None, threshold=-100).route("anything at all")
    assert [c.agent_id for c in decision.candidates] == ["alpha", "mid", "zeta"]
    assert decision.agent_id == "alpha"


SHIPPED = Path(__file__).resolve().parent.parent / "examples" / "bench" / "recordings"


def _edited(tmp_path: Path, **bench: object) -> Path:
    """A shipped recording copied, its header's paths made absolute and its options edited."""
    source = SHIPPED / "qwen2.5-coder-1.5b-json.jsonl"
    header, *rest = source.read_text("utf-8").splitlines(keepends=True)
    doc = json.loads(header)
    paths = {k: str((SHIPPED / doc["bench"][k]).resolve()) for k in ("tasks", "cards")}
    doc["bench"] = {**doc["bench"], **paths, **bench}
    path = tmp_path / "edited.jsonl"
    path.write_text(json.dumps(doc) + "\n" + "".join(rest), "utf-8")
    return path


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"out": "notes.txt"}, "header bench.out: not an option a recording keeps"),
        ({"arm": 5}, "header bench.arm: must be str, got a number"),
        ({"repeat": "three"}, "header bench.repeat: must be int, got a string"),
        ({"arm": "bogus"}, "header bench.arm: 'bogus' is not tiny, all-tools or both"),
        # a choice typer checks while it parses: still the header's, not --prompt's
        ({"prompt": "bogus"}, "header bench.prompt: must be one of same, card, got 'bogus'"),
        ({"expected_tools": "middle"}, "header bench.expected_tools: must be one of first, last"),
        ({"prompt": "\x1b[31mred"}, "bench.prompt: must be one of same, card, got '\\x1b[31mred'"),
    ],
)
def test_a_recordings_header_gives_only_its_options_of_their_kinds(tiny, tmp_path, edit, said):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine", "utf-8")
    recording = _edited(tmp_path, **{k: str(notes) if k == "out" else v for k, v in edit.items()})
    result = tiny("bench", "--replay", str(recording), "-q")
    assert result.exit_code == 2 and said in result.stderr, result.output
    assert notes.read_text("utf-8") == "mine"


def test_a_bad_flag_beside_a_replay_is_the_flags_not_the_headers(tiny, tmp_path):
    recording = _edited(tmp_path)
    result = tiny("bench", "--replay", str(recording), "--arm", "bogus", "-q")
    assert result.exit_code == 2 and "--arm" in result.stderr, result.output
    assert "header" not in result.stderr
