"""`tiny runs search`, `delete` and `export`: real runs in a real SQLite log, through the CLI."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tiny_cli.cli.common import Terminal
from tiny_cli.digest import Cost, Digest
from tiny_cli.events import Finished, RunStarted
from tiny_cli.runs import DB_NAME, RunLog, RunQuery
from tiny_cli.runs.query import indexed
from tiny_cli.runs.store import MIGRATIONS, SCHEMA_VERSION, fts5_available
from tiny_cli.testing import reply, tool_call

V1_SQL = Path(__file__).parent / "data" / "runlog-v1.sql"
ONBOARDING = "how did the onboarding process work again"
VACATION = "how do I request vacation days"
SANDWICH = "make me a sandwich"  # abstains on the seed cards (hashing embedder): no model call
QUOKKA = {"status": "ok", "summary": "Day one: a laptop and a quokka.", "source": "onboarding.md"}
FORM = {"status": "ok", "summary": "File the form in Personio.", "source": "urlaubsantrag.md"}
HAS_FTS5 = fts5_available(sqlite3.connect(":memory:"))
needs_fts5 = pytest.mark.skipif(not HAS_FTS5, reason="this SQLite has no FTS5: search uses LIKE")


@pytest.fixture
def run(tiny, scripted_server):
    """Run `tiny ARGS` against the scripted server; `--json` output is parsed."""

    def go(
        *args: str, input: str | None = None, env: dict[str, str] | None = None, obj: Any = None
    ):
        environ = {"TINY_BASE_URL": scripted_server.url, **(env or {})}
        result = tiny(*args, input=input, env=environ, obj=obj)
        assert "Traceback" not in result.output
        return json.loads(result.stdout) if "--json" in args and result.exit_code == 0 else result

    return go


@pytest.fixture
def two_runs(run, scripted_server) -> None:
    """Log two real invocations: 1 onboarding (a quokka in its summary), 2 vacation."""
    scripted_server.add(
        tool_call("docs_search", {"query": "onboarding zebrafish"}), reply(json.dumps(QUOKKA))
    )
    run("invoke", "docs-finder", ONBOARDING, "--tool-mode", "native", "--json")
    scripted_server.add(
        tool_call("docs_search", {"query": "urlaubsantrag"}), reply(json.dumps(FORM))
    )
    run("invoke", "docs-finder", VACATION, "--tool-mode", "native", "--json")


def _ids(run, *args: str) -> list[int]:
    return [r["id"] for r in run(*args, "--json")]


def _record(log: RunLog, goal: str, summary: str = "", status: str = "ok") -> None:
    """Record one finished run through the observer, as the runner would."""
    observe = log.observer("invoke", "invoke", "127.0.0.1")
    observe(RunStarted("docs-finder", "m", "native", goal, 4, 30.0, 400, ()))
    observe(Finished(Digest("docs-finder", status, summary=summary, cost=Cost()), ()))  # type: ignore[arg-type]


# --- search ---------------------------------------------------------------------------------


def test_search_finds_a_run_by_its_task_summary_fields_and_tool_calls(run, two_runs) -> None:
    assert _ids(run, "runs", "search", "onboarding") == [1]  # the task (and its tool call)
    assert _ids(run, "runs", "search", "quokka") == [1]  # only in the Digest's summary
    assert _ids(run, "runs", "search", "Personio") == [2]  # summary
    assert _ids(run, "runs", "search", "urlaubsantrag.md") == [2]  # a field, and the call
    assert _ids(run, "runs", "search", "zebrafish") == [1]  # only in a tool call's arguments
    assert _ids(run, "runs", "search", "docs_search") == [2, 1]  # the tool's name: newest first
    assert _ids(run, "runs", "search", "QUOKKA day") == [1]  # every word, any case
    assert _ids(run, "runs", "search", "quokka vacation") == []
    assert _ids(run, "runs", "search", "quok*") == [1]  # a prefix
    assert _ids(run, "runs", "search", "giraffe") == []


def test_search_finds_what_a_tool_answered(run, two_runs) -> None:
    onboarding, vacation = (run("runs", "show", str(i), "--json") for i in (1, 2))
    [result] = [m["content"] for m in onboarding["transcript"] if m["role"] == "tool"]
    assert "probation" in result.lower()  # the onboarding page's text, as the tool returned it
    assert "probation" not in json.dumps(vacation).lower()
    assert "probation" not in json.dumps(onboarding["digest"]).lower() + ONBOARDING
    assert _ids(run, "runs", "search", "probation") == [1]


def test_search_output_is_the_runs_table_or_says_nothing_matched(run, two_runs, home) -> None:
    text = run("runs", "search", "quokka").output
    assert "1 run(s), newest first" in text and "onboarding" in text and "vacation" not in text
    empty = run("runs", "search", "giraffe")
    assert empty.exit_code == 0
    assert f"no run in {home / DB_NAME} matches 'giraffe'\n" == empty.output  # the path whole


def test_search_output_escapes_what_the_log_and_the_query_hold(run, home) -> None:
    with RunLog.open(home) as log:
        _record(log, "quokka \x1b[2J [bold red]markup[/] \u202eevil")
    text = run("runs", "search", "quokka", env={"COLUMNS": "200"}).output  # the goal on one line
    assert "\x1b" not in text and "\u202e" not in text
    assert "\\u001b[2J" in text and "[bold red]markup[/]" in text and "\\u202e" in text
    empty = run("runs", "search", "zzz \x1b]0;pwned\x07 [bold]").output
    assert "\x1b" not in empty and "\x07" not in empty and "[bold]" in empty


def test_search_filters_by_card_and_status_and_limits(run, home) -> None:
    with RunLog.open(home) as log:
        _record(log, "alpaca wool one")
        _record(log, "alpaca wool two", status="failed")
        _record(log, "alpaca wool three")
        _record(log, "llama wool four")
    assert _ids(run, "runs", "search", "alpaca") == [3, 2, 1]
    assert _ids(run, "runs", "search", "alpaca", "--status", "failed") == [2]
    assert _ids(run, "runs", "search", "wool", "--limit", "2") == [4, 3]
    assert _ids(run, "runs", "search", "alpaca", "--card", "web-reader") == []
    assert _ids(run, "runs", "search", "alpaca", "--card", "docs-finder", "--limit", "1") == [3]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('quokka"', [1]),
        ("(quokka", [1]),
        ("quokka OR giraffe", []),  # three words, each needed: OR is one of them
        ("quokka NOT giraffe", []),
        ("quokka -giraffe", []),
        ("task:quokka", []),  # no column filter: the phrase `task quokka`
        ("quokka task", [1]),
    ],
)
def test_search_text_is_words_never_query_syntax(run, home, text, found) -> None:
    with RunLog.open(home) as log:
        _record(log, "a quokka task")
    result = run("runs", "search", text, "--json")
    assert isinstance(result, list), result.output  # exit 0: no FTS5 syntax error
    assert [r["id"] for r in result] == found


def test_search_without_a_word_is_one_line_exit_2(run) -> None:
    result = run("runs", "search", "!! --")
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line == "tiny: error: search '!! --': no word to search for (letters or digits)"


def test_a_running_run_is_found_by_its_task_then_by_its_summary(home) -> None:
    with RunLog.open(home) as log:
        observe = log.observer("invoke", "invoke", "127.0.0.1")
        observe(RunStarted("docs-finder", "m", "native", "the alpaca task", 4, 30.0, 400, ()))
        [running] = log.runs(RunQuery(text="alpaca"))  # the writer passed: the row is in
        assert running.status == "running"
        assert log.runs(RunQuery(text="vicuna")) == []
        observe(Finished(Digest("docs-finder", "ok", summary="a vicuna", cost=Cost()), ()))
        [done] = log.runs(RunQuery(text="vicuna"))
        assert done.id == running.id and done.status == "ok"
        assert [r.id for r in log.runs(RunQuery(text="alpaca"))] == [done.id]  # indexed once


def test_text_in_any_script_and_accents_are_found(run, home) -> None:
    with RunLog.open(home) as log:
        _record(log, "ein naïver Urlaubsantrag", summary="東京 の 天気")
    assert _ids(run, "runs", "search", "naïver") == [1]
    assert _ids(run, "runs", "search", "東京") == [1]  # stored as \\u escapes, found decoded
    if HAS_FTS5:
        assert _ids(run, "runs", "search", "naiver") == [1]  # the index drops diacritics


# --- the index: migration v5, and no FTS5 -----------------------------------------------


def _v4_log(home: Path) -> None:
    """Build the log as tiny with schema v4 left it: the first schema's rows, migrated to v4."""
    with sqlite3.connect(home / DB_NAME) as db:
        db.executescript(V1_SQL.read_text(encoding="utf-8"))
        for number, migration in enumerate(MIGRATIONS[1:4], start=2):
            migration(db)
            db.execute(f"PRAGMA user_version = {number}")
        assert not indexed(db)


@needs_fts5
def test_v4_to_v5_indexes_the_runs_written_before_it(run, home) -> None:
    _v4_log(home)
    assert _ids(run, "runs", "search", "buddy") == [1]  # the v1 row's summary
    assert _ids(run, "runs", "search", "onboarding") == [2, 1]  # both rows' task
    with sqlite3.connect(home / DB_NAME) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
        assert db.execute("SELECT rowid FROM runs_fts ORDER BY rowid").fetchall() == [(1,), (2,)]
    with RunLog.open(home) as log:  # the upgraded log indexes new runs as a new one does
        _record(log, "a capybara task")
    assert _ids(run, "runs", "search", "capybara") == [3]


@needs_fts5
def test_v5_upgrades_a_log_with_a_damaged_row(run, home) -> None:
    _v4_log(home)
    with sqlite3.connect(home / DB_NAME) as db:
        db.execute("UPDATE runs SET digest = '{not json', transcript = '[\"x\"]' WHERE id = 1")
    assert _ids(run, "runs", "search", "onboarding") == [2, 1]  # its task is still indexed


def test_without_fts5_search_reads_the_rows(run, two_runs, home) -> None:
    fresh = home / "no-fts5"
    RunLog.open(fresh, fts5=lambda db: False).close()  # a SQLite built without FTS5
    with sqlite3.connect(fresh / DB_NAME) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert not indexed(db)
    with sqlite3.connect(home / DB_NAME) as db:  # the two runs' log, its index taken away
        for name in ("runs_fts_insert", "runs_fts_update", "runs_fts_delete"):
            db.execute(f"DROP TRIGGER IF EXISTS {name}")
        db.execute("DROP TABLE IF EXISTS runs_fts")
    assert _ids(run, "runs", "search", "quokka") == [1]
    assert _ids(run, "runs", "search", "zebrafish") == [1]
    assert _ids(run, "runs", "search", "probation") == [1]
    assert _ids(run, "runs", "search", "docs_search") == [2, 1]
    assert _ids(run, "runs", "search", "quokka vacation") == []
    assert _ids(run, "runs", "search", "100%") == []  # LIKE's wildcards are the words' own


# --- delete ---------------------------------------------------------------------------------


def test_delete_by_id_takes_its_corrections_and_search_rows(run, two_runs, home) -> None:
    run("delegate", SANDWICH, "--json", env={"TINY_EMBEDDER": "hashing"})
    with RunLog.open(home) as log:
        log.correct(3, "docs-finder")
        assert len(log.corrections(pending_only=False)) == 1
    assert _ids(run, "runs", "search", "sandwich") == [3]
    result = run("runs", "delete", "3", "1", "--yes")
    assert result.exit_code == 0
    assert result.stdout == "deleted 2 run(s) and 1 correction(s)\n"
    assert _ids(run, "runs") == [2]
    assert _ids(run, "runs", "search", "sandwich") == [] == _ids(run, "runs", "search", "quokka")
    with RunLog.open(home) as log:
        assert log.corrections(pending_only=False) == []
    with sqlite3.connect(home / DB_NAME) as db:
        assert db.execute("SELECT count(*) FROM corrections").fetchone() == (0,)
        if HAS_FTS5:
            assert db.execute("SELECT rowid FROM runs_fts").fetchall() == [(2,)]


def test_delete_older_than_an_age(run, home) -> None:
    with RunLog.open(home) as log:
        for goal in ("one", "two", "three"):
            _record(log, goal)
    old = (datetime.now(UTC) - timedelta(days=3)).isoformat(timespec="milliseconds")
    with sqlite3.connect(home / DB_NAME) as db:
        db.execute("UPDATE runs SET started_at = ? WHERE id = 2", (old,))
    done = run("runs", "delete", "--older-than", "2d", "--yes", "--json")
    assert done == {"deleted": [2], "corrections": 0, "declined": False}
    assert _ids(run, "runs") == [3, 1]
    assert run("runs", "delete", "--older-than", "2d", "--yes").stdout.startswith("deleted 0 run")


def test_delete_leaves_a_running_run_alone(run, home) -> None:
    with RunLog.open(home) as log:
        _record(log, "finished")
        observe = log.observer("invoke", "invoke", "127.0.0.1")
        observe(RunStarted("docs-finder", "m", "native", "still going", 4, 30.0, 400, ()))
        log.flush()  # the running row is in: this process is alive, so no sweep takes it
        [going] = [r.id for r in log.runs() if r.status == "running"]
        [over] = [r.id for r in log.runs() if r.status == "ok"]
        done = run("runs", "delete", "--older-than", "0s", "--yes", "--json")
        assert done["deleted"] == [over]
        refused = run("runs", "delete", str(going), "--yes")
        assert refused.exit_code == 2
        assert refused.stderr.startswith(f"tiny: error: run {going} is still running (pid ")
        assert [(r.id, r.status) for r in log.runs()] == [(going, "running")]


def test_delete_without_a_terminal_says_first_what_is_wrong_with_the_ids(run, home) -> None:
    """It asked for --yes, and only with --yes said that run 99 was never there."""
    with RunLog.open(home) as log:
        _record(log, "one")
    for args, said in (
        (("99",), f"no run 99 in the run log {home / 'runs.sqlite3'}: nothing deleted"),
        (("--older-than", "abc"), "--older-than 'abc': use an ISO date or time"),
    ):
        result = run("runs", "delete", *args)  # CliRunner's stdin is no terminal
        assert result.exit_code == 2 and result.stderr.startswith(f"tiny: error: {said}")
    assert _ids(run, "runs") == [1]


def test_delete_without_a_terminal_refuses_unless_yes(run, home) -> None:
    with RunLog.open(home) as log:
        _record(log, "one")
    result = run("runs", "delete", "1")  # CliRunner's stdin is no terminal
    assert result.exit_code == 1
    assert result.stderr == "tiny: error: no terminal to confirm the deletion on: add --yes\n"
    assert result.stdout == ""
    assert _ids(run, "runs") == [1]


def test_delete_at_a_terminal_asks_first(run, home) -> None:
    run = partial(run, obj=Terminal(True))  # the CLI is told stdin is a terminal
    with RunLog.open(home) as log:
        _record(log, "one")
        _record(log, "two")
    declined = run("runs", "delete", "2", "1", input="n\n")
    assert declined.exit_code == 1
    assert "Delete 2 run(s) (1, 2) and their corrections? [y/N]" in declined.stderr
    assert "nothing deleted" in declined.stderr and _ids(run, "runs") == [2, 1]
    assert run("runs", "delete", "1", input="\n").exit_code == 1  # the default is no
    agreed = run("runs", "delete", "1", input="y\n")
    assert agreed.exit_code == 0
    assert agreed.stdout == "deleted 1 run(s) and 0 correction(s)\n"
    assert _ids(run, "runs") == [2]


def test_delete_an_unknown_run_deletes_nothing(run, home) -> None:
    with RunLog.open(home) as log:
        _record(log, "one")
    result = run("runs", "delete", "1", "41", "--yes")
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line == f"tiny: error: no run 41 in the run log {home / DB_NAME}: nothing deleted"
    assert _ids(run, "runs") == [1]


@pytest.mark.parametrize(
    "args", [[], ["1", "--older-than", "2d"], ["--older-than", "yesterday"]], ids=str
)
def test_delete_needs_ids_or_an_age(run, home, args) -> None:
    with RunLog.open(home) as log:
        _record(log, "one")
    result = run("runs", "delete", *args, "--yes")
    assert result.exit_code == 2
    assert ("--older-than 'yesterday'" if args[-1:] == ["yesterday"] else "ID") in result.output
    assert _ids(run, "runs") == [1]


# --- export ---------------------------------------------------------------------------------


def _lines(text: str) -> list[dict]:
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_export_is_runs_show_json_line_by_line(run, two_runs) -> None:
    run("delegate", SANDWICH, "--json", env={"TINY_EMBEDDER": "hashing"})
    result = run("runs", "export")
    assert result.exit_code == 0
    exported = _lines(result.stdout)
    assert [r["id"] for r in exported] == [1, 2, 3]  # oldest first
    for document in exported:
        assert document == run("runs", "show", str(document["id"]), "--json")
    assert run("runs", "export", "--format", "jsonl").stdout == result.stdout
    assert run("runs", "export", "--format", "csv").exit_code == 2


def test_export_filters_by_card_and_age(run, two_runs, home) -> None:
    run("delegate", SANDWICH, "--json", env={"TINY_EMBEDDER": "hashing"})
    old = (datetime.now(UTC) - timedelta(days=3)).isoformat(timespec="milliseconds")
    with sqlite3.connect(home / DB_NAME) as db:
        db.execute("UPDATE runs SET started_at = ? WHERE id = 1", (old,))
    assert [r["id"] for r in _lines(run("runs", "export", "--card", "docs-finder").stdout)] == [
        1,
        2,
    ]
    assert [r["id"] for r in _lines(run("runs", "export", "--since", "2d").stdout)] == [2, 3]
    assert run("runs", "export", "--card", "nobody").stdout == ""


def test_an_exported_file_keeps_a_pasted_line_separator_inside_its_run(run, home, tmp_path) -> None:
    with RunLog.open(home) as log:
        _record(log, "pasted\u2028task", summary="a\u0085b")
    out = tmp_path / "runs.jsonl"
    assert run("runs", "export", "--out", str(out)).exit_code == 0
    [line] = out.read_text(encoding="utf-8").splitlines()  # one run, one line for any reader
    assert json.loads(line)["goal"] == "pasted\u2028task"


def test_export_to_a_file(run, two_runs, tmp_path) -> None:
    out = tmp_path / "runs.jsonl"
    out.write_text("an older export\n", encoding="utf-8")
    result = run("runs", "export", "--out", str(out))
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr == f"2 run(s) written to {out}\n"
    assert out.read_text(encoding="utf-8") == run("runs", "export").stdout
    assert (out.stat().st_mode & 0o777) == 0o600  # transcripts: the owner's, as the log is
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "runs.jsonl"]


def test_export_never_overwrites_the_run_log(run, two_runs, home, monkeypatch) -> None:
    log = home / DB_NAME
    before = log.read_bytes()
    monkeypatch.chdir(home)
    for target in (str(log), DB_NAME, f"{log}-wal"):
        result = run("runs", "export", "--out", target)
        assert result.exit_code == 2
        [line] = result.output.strip().splitlines()
        assert line.startswith("tiny: error: ") and "is the run log itself" in line
    assert log.read_bytes() == before
    assert _ids(run, "runs") == [2, 1]


def test_a_failed_export_leaves_the_file_as_it_was(run, two_runs, home, tmp_path) -> None:
    with sqlite3.connect(home / DB_NAME) as db:
        db.execute("UPDATE runs SET digest = '{not json' WHERE id = 2")
    out = tmp_path / "runs.jsonl"
    out.write_text("an older export\n", encoding="utf-8")
    result = run("runs", "export", "--out", str(out))
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"tiny: error: {home / DB_NAME}: run 2 is damaged")
    assert out.read_text(encoding="utf-8") == "an older export\n"  # not half of a new one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "runs.jsonl"]  # no temp left
    missing = run("runs", "export", "--out", str(tmp_path / "nowhere" / "runs.jsonl"))
    assert missing.exit_code == 2 and "there is no folder" in missing.output


def test_export_refuses_to_replace_a_fifo_or_a_link(run, two_runs, tmp_path) -> None:
    """Issue 31, finding 12: a FIFO or /proc/self/fd/1 was replaced by a regular file."""
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    link = tmp_path / "stdout.jsonl"
    link.symlink_to("/proc/self/fd/1")
    for out, why in ((fifo, "is not a regular file"), (link, "is a link")):
        result = run("runs", "export", "--out", str(out))
        assert result.exit_code == 2
        [line] = result.output.strip().splitlines()
        assert line.startswith(f"tiny: error: {out}: ") and why in line
        assert line.endswith("(without --out the runs go to stdout)")
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and link.is_symlink()
    assert os.readlink(link) == "/proc/self/fd/1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "pipe.jsonl", "stdout.jsonl"]
