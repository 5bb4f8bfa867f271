"""Corrections as data: `tiny runs correct`, `tiny learn`, and the question after delegate."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tiny_cli.cli.run import ABSTAINED, ROUTED, ask_route
from tiny_cli.digest import Routing
from tiny_cli.errors import ConfigError
from tiny_cli.runs import DB_NAME, RunLog
from tiny_cli.runs.store import MIGRATIONS, SCHEMA_VERSION
from tiny_cli.settings import load_settings
from tiny_cli.testing import reply

from .conftest import SEED_CARDS

V1_SQL = Path(__file__).parent / "data" / "runlog-v1.sql"
SANDWICH = "make me a sandwich"  # abstains on the seed cards (hashing embedder)
ONBOARDING = "how did the onboarding process work again"  # routes to docs-finder
# routes to docs-finder too, and is none of its own examples: it can be taught out of scope
NEW_STAFF = "how did the onboarding process work for new staff"
WRITER_TASK = "please add mustermann gmbh as a new customer"  # crm-writer: no model call here
ANSWER = {"status": "ok", "summary": "Day one: laptop.", "source": "onboarding.md"}


@pytest.fixture
def cards(tmp_path: Path) -> Path:
    """The seed cards copied into tmp_path: learned.jsonl is written there, not in the repo."""
    return Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))


@pytest.fixture
def go(tiny, cards, scripted_server):
    """Run `tiny ARGS` on the copied cards, the hashing embedder and the scripted server."""

    def run(*args: str, env: dict[str, str] | None = None):
        extra = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
        result = tiny(*args, env={"TINY_BASE_URL": scripted_server.url, **extra, **(env or {})})
        assert "Traceback" not in result.output
        return result

    return run


def _json(result) -> dict:
    assert result.exit_code in (0, 3, 4, 5, 6, 7), result.output
    return json.loads(result.stdout)


def _route(go, task: str) -> tuple[str, str | None]:
    decision = _json(go("route", task, "--json"))
    return decision["decision"], decision["agent_id"]


def _learned(cards: Path) -> list[dict]:
    lines = (cards / "learned.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines[1:]]  # after the header


def _only_run_id(go) -> int:
    [row] = _json(go("runs", "--json"))
    return row["id"]


# --- tiny runs correct --------------------------------------------------------------------


def test_correcting_an_abstain_to_a_card_teaches_the_router(go, cards, home) -> None:
    assert _route(go, SANDWICH) == ("abstain", None)
    assert go("delegate", SANDWICH, "--json").exit_code == 6
    [row] = _json(go("runs", "--json"))
    assert row["goal"] == SANDWICH  # an abstain keeps its task now: it can be corrected
    result = go("runs", "correct", str(row["id"]), "--card", "docs-finder")
    assert result.exit_code == 0, result.output
    line = result.stdout.strip()
    assert line.startswith(f'run {row["id"]}: "{SANDWICH}" → docs-finder (was: abstain); ')
    assert f"learned into {cards / 'learned.jsonl'} (threshold: default threshold:" in line
    assert _learned(cards) == [{"task": SANDWICH, "card": "docs-finder"}]
    assert _route(go, SANDWICH) == ("route", "docs-finder")
    assert not (SEED_CARDS / "learned.jsonl").exists()
    with RunLog.open(home) as log:
        [taught] = log.corrections(pending_only=False)
        assert log.corrections() == []  # taught: nothing pending
    assert (taught.run_id, taught.routed, taught.card) == (row["id"], None, "docs-finder")
    assert taught.learned_at is not None and taught.task == SANDWICH


def test_correcting_a_routed_run_to_abstain_puts_it_out_of_scope(
    go, cards, scripted_server
) -> None:
    assert _route(go, NEW_STAFF) == ("route", "docs-finder")
    scripted_server.add(reply(json.dumps(ANSWER)))
    digest = _json(go("delegate", NEW_STAFF, "--json", "--tool-mode", "native"))
    assert digest["routing"]["agent_id"] == "docs-finder"
    done = _json(go("runs", "correct", str(_only_run_id(go)), "--abstain", "--json"))
    correction, learned = done["correction"], done["learned"]
    assert (correction["routed"], correction["card"]) == ("docs-finder", None)
    assert correction["task"] == NEW_STAFF and correction["learned_at"] is not None
    assert (learned["status"], learned["added"], learned["out_of_scope"]) == ("learned", 1, 1)
    assert learned["path"] == str(cards / "learned.jsonl")
    assert _learned(cards) == [{"task": NEW_STAFF, "card": None}]
    text = go("runs", "correct", str(_only_run_id(go)), "--abstain").stdout
    assert "→ abstain (was: docs-finder); already known in" in text


def test_correcting_again_replaces_the_correction(go, cards, home) -> None:
    go("delegate", SANDWICH, "--json")
    run_id = str(_only_run_id(go))
    first = _json(go("runs", "correct", run_id, "--card", "docs-finder", "--json"))
    second = _json(go("runs", "correct", run_id, "--card", "web-reader", "--json"))
    assert second["learned"]["moved"] == 1 and second["learned"]["added"] == 0
    assert second["correction"]["id"] != first["correction"]["id"]
    assert _learned(cards) == [{"task": SANDWICH, "card": "web-reader"}]
    with RunLog.open(home) as log:
        [only] = log.corrections(pending_only=False)
    assert only.card == "web-reader" and only.id == second["correction"]["id"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["99", "--card", "docs-finder"], "tiny: error: no run 99 in the run log "),
        (["1", "--card", "nope"], "tiny: error: no card 'nope' in "),
        (["2", "--abstain"], "tiny: error: run 2 (invoke) was not routed: only delegate runs"),
    ],
    ids=["unknown-run", "unknown-card", "not-delegate"],
)
@pytest.mark.slow
def test_bad_corrections_are_one_line_exit_2(go, scripted_server, cards, args, message) -> None:
    go("delegate", SANDWICH, "--json")
    scripted_server.add(reply(json.dumps(ANSWER)))
    assert go("invoke", "docs-finder", ONBOARDING, "--json", "--tool-mode", "native").exit_code in (
        0,
        3,
    )
    result = go("runs", "correct", *args)
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(message), line
    if "nope" in args:
        assert line.endswith("(known: crm-writer, docs-finder, web-reader)")
    assert result.stdout == "" and not (cards / "learned.jsonl").exists()


@pytest.mark.parametrize("args", [[], ["--card", "docs-finder", "--abstain"]])
def test_exactly_one_of_card_or_abstain(go, args) -> None:
    result = go("runs", "correct", "1", *args)
    assert result.exit_code == 2 and "give one of --card ID or --abstain" in result.output


def test_the_task_is_stored_scrubbed(go, cards) -> None:
    secret = "sk-" + "A" * 24
    go("delegate", f"make me a sandwich, my key is {secret}", "--json")
    done = _json(go("runs", "correct", str(_only_run_id(go)), "--abstain", "--json"))
    assert secret not in done["correction"]["task"] and "[redacted]" in done["correction"]["task"]
    assert secret not in (cards / "learned.jsonl").read_text("utf-8")


def test_terminal_controls_in_a_task_are_escaped(go) -> None:
    go("delegate", "make me a \x1b[2Jsandwich", "--json")
    text = go("runs", "correct", str(_only_run_id(go)), "--card", "docs-finder").stdout
    assert "\x1b" not in text and "make me a \\u001b[2Jsandwich" in text


# --- tiny learn -----------------------------------------------------------------------------


def test_learn_a_file(go, cards, tmp_path) -> None:
    tasks = tmp_path / "teach.jsonl"
    rows = [{"task": SANDWICH, "card": "docs-finder"}, {"task": "book a taxi", "card": None}]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    report = _json(go("learn", str(tasks), "--json"))
    assert (report["status"], report["added"], report["from_file"]) == ("learned", 2, 2)
    assert report["from_runs"] is None and report["examples"] == 1
    assert sorted(_learned(cards), key=str) == sorted(rows, key=str)
    text = go("learn", str(tasks)).stdout
    assert f"unchanged: {cards / 'learned.jsonl'}: 0 added, 0 moved" in text
    assert "2 already known" in text and f"taught: 2 from {tasks}" in text
    assert "threshold: default threshold: 1 out-of-scope examples" in text


def test_learn_from_runs_takes_pending_corrections_once(go, cards, home) -> None:
    go("delegate", SANDWICH, "--json")
    result = go("runs", "correct", str(_only_run_id(go)), "--card", "docs-finder", "--no-learn")
    assert "; recorded: `tiny learn --from-runs` teaches it" in result.stdout
    assert not (cards / "learned.jsonl").exists()
    assert _route(go, SANDWICH) == ("abstain", None)
    first = _json(go("learn", "--from-runs", "--json"))
    assert (first["from_runs"], first["added"], first["status"]) == (1, 1, "learned")
    assert _route(go, SANDWICH) == ("route", "docs-finder")
    with RunLog.open(home) as log:
        assert log.corrections() == []
        [marked] = log.corrections(pending_only=False)
    assert marked.learned_at is not None
    again = _json(go("learn", "--from-runs", "--json"))
    assert (again["from_runs"], again["added"], again["status"]) == (0, 0, "unchanged")
    assert "0 correction(s) from the run log" in go("learn", "--from-runs").stdout


def test_learn_a_file_and_the_runs_together(go, cards, tmp_path) -> None:
    go("delegate", SANDWICH, "--json")
    go("runs", "correct", str(_only_run_id(go)), "--abstain", "--no-learn")
    tasks = tmp_path / "teach.jsonl"
    tasks.write_text(json.dumps({"task": "book a taxi", "card": "web-reader"}) + "\n", "utf-8")
    report = _json(go("learn", str(tasks), "--from-runs", "--json"))
    assert (report["from_file"], report["from_runs"], report["added"]) == (1, 1, 2)


def test_learn_with_nothing_derives_the_threshold_again(go, cards) -> None:
    report = _json(go("learn", "--json"))
    assert report["status"] == "unchanged" and report["added"] == 0
    assert "deriving one needs 20" in report["threshold_note"]


def test_a_bad_line_names_the_file_and_line(go, tmp_path) -> None:
    tasks = tmp_path / "teach.jsonl"
    tasks.write_text(json.dumps({"task": SANDWICH, "card": None}) + "\n{not json\n", "utf-8")
    result = go("learn", str(tasks))
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"tiny: error: {tasks}:2: not JSON")


def test_learn_is_in_the_help(go) -> None:
    listed = go("--help").stdout
    assert listed.index("route") < listed.index("learn") < listed.index("invoke")
    assert "--from-runs" in go("learn", "--help").stdout


# --- the run log ----------------------------------------------------------------------------


def test_an_older_log_upgrades_and_keeps_its_runs(home) -> None:
    with sqlite3.connect(home / DB_NAME) as db:
        db.executescript(V1_SQL.read_text(encoding="utf-8"))
        for number, migration in enumerate(MIGRATIONS[1:3], start=2):  # up to v3
            migration(db)
            db.execute(f"PRAGMA user_version = {number}")
        db.execute(
            "INSERT INTO runs (started_at, command, label, endpoint, goal, routing, status,"
            " transcript, calls, pid) VALUES ('2025-03-02T09:00:00.000+00:00', 'delegate',"
            " 'delegate', '127.0.0.1', 'make me a sandwich',"
            ' \'{"decision": "abstain", "agent_id": null, "score": 0.1}\', \'abstain\','
            " '[]', '[]', 1)"
        )
    with RunLog.open(home) as log:
        assert log.corrections() == []
        correction = log.correct(3, "docs-finder")
        with pytest.raises(
            ConfigError, match=r"run 1 \(invoke\) was not routed: only delegate runs"
        ):
            log.correct(1, None)
        with pytest.raises(
            ConfigError, match=r"run 2 \(bench\) has no routing decision in the log"
        ):
            log.correct(2, None)
        assert len(log.runs()) == 3
    assert (correction.task, correction.routed, correction.card) == (SANDWICH, None, "docs-finder")
    with sqlite3.connect(home / DB_NAME) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6


def test_an_abstain_logged_without_its_task_cannot_be_corrected(home) -> None:
    with RunLog.open(home) as log:
        from tiny_cli.digest import Digest
        from tiny_cli.events import Finished

        log.observer("delegate", "delegate", "127.0.0.1")(
            Finished(Digest(None, "abstain", routing=Routing("abstain", None, 0.1)))
        )
        [run_id] = log.recorded()
        with pytest.raises(ConfigError, match=f"run {run_id} has no task in the run log"):
            log.correct(run_id, "docs-finder")


def test_mark_learned_counts_only_pending(home) -> None:
    with RunLog.open(home) as log:
        from tiny_cli.digest import Digest
        from tiny_cli.events import Finished

        observe = log.observer("delegate", "delegate", "127.0.0.1", goal=SANDWICH)
        observe(Finished(Digest(None, "abstain", routing=Routing("abstain", None, 0.1))))
        [run_id] = log.recorded()
        correction = log.correct(run_id, None)
        assert log.mark_learned([correction.id, correction.id]) == 1
        assert log.mark_learned([correction.id]) == 0


# --- the question after a human delegate ----------------------------------------------------


def _answers(*keys: str):
    """A fake key reader: the keys in turn, and the questions it was asked."""
    asked: list[str] = []
    queue = list(keys)

    def ask(question: str) -> str:
        asked.append(question)
        return queue.pop(0)

    return ask, asked


def _settings(home: Path, cards: Path):
    return load_settings(
        env={"TINY_HOME": str(home), "TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
    )


def test_answering_a_records_a_correction_to_abstain(go, cards, home) -> None:
    digest = _json(go("delegate", WRITER_TASK, "--json"))  # needs_confirmation: no model call
    routing = Routing("route", digest["routing"]["agent_id"], digest["routing"]["score"])
    assert routing.agent_id == "crm-writer"
    ask, asked = _answers("a")
    said: list[str] = []
    run_id = _only_run_id(go)
    made = ask_route(
        _settings(home, cards), run_id, routing, ["crm-writer"], ask=ask, say=said.append
    )
    assert asked == [ROUTED]
    assert made is not None and (made.routed, made.card, made.task) == (
        "crm-writer",
        None,
        WRITER_TASK,
    )
    assert said == [
        f'run {run_id}: "{WRITER_TASK}" → abstain (was: crm-writer); recorded: '
        "`tiny learn --from-runs` teaches it"
    ]
    with RunLog.open(home) as log:
        assert [c.id for c in log.corrections()] == [made.id]  # pending, for --from-runs


def test_choosing_a_card_after_an_abstain(go, cards, home) -> None:
    go("delegate", SANDWICH, "--json")
    ask, asked = _answers("c", "2")
    said: list[str] = []
    made = ask_route(
        _settings(home, cards),
        _only_run_id(go),
        Routing("abstain", None, -1.0),
        ["docs-finder", "web-reader", "crm-writer"],
        ask=ask,
        say=said.append,
    )
    assert asked == [ABSTAINED, "Which card? [1-3] · [enter] none"]
    assert said[0] == "[1] docs-finder  [2] web-reader  [3] crm-writer"
    assert made is not None and made.card == "web-reader"


@pytest.mark.slow
@pytest.mark.parametrize("keys", [("",), ("y",), ("c", ""), ("c", "7"), ("a",)])
def test_enter_or_no_choice_records_nothing(go, cards, home, keys) -> None:
    go("delegate", SANDWICH, "--json")  # an abstain: [a] means nothing there
    ask, _ = _answers(*keys)
    made = ask_route(
        _settings(home, cards),
        _only_run_id(go),
        Routing("abstain", None, -1.0),
        ["docs-finder"],
        ask=ask,
        say=lambda line: None,
    )
    assert made is None
    with RunLog.open(home) as log:
        assert log.corrections(pending_only=False) == []


def test_no_question_without_a_terminal(go) -> None:
    result = go("delegate", SANDWICH, "--ask-route")  # CliRunner: stdin is no terminal
    assert result.exit_code == 6 and "Right" not in result.output
    result = go("delegate", SANDWICH, env={"TINY_ASK_ROUTE": "1"})
    assert result.exit_code == 6 and "Right" not in result.output


def test_the_setting_is_off_by_default() -> None:
    assert load_settings(env={}).ask_route is False
    assert load_settings(env={"TINY_ASK_ROUTE": "1"}).ask_route is True
    assert load_settings(env={"TINY_ASK_ROUTE": "1"}).with_flags(ask_route=False).ask_route is False
    assert load_settings(env={}).with_flags(ask_route=None).ask_route is False
