"""The run log through the real CLI against the scripted server: what is kept, and how it reads."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tiny_cli.agent.loop import repair_message
from tiny_cli.digest import Cost, Digest
from tiny_cli.errors import ConfigError
from tiny_cli.events import Finished, RunStarted, ToolCalled, ToolFinished
from tiny_cli.runs import DB_NAME, RunLog, RunQuery, parse_since
from tiny_cli.runs.query import percentile
from tiny_cli.runs.store import REPAIR_MARK, SCHEMA_VERSION
from tiny_cli.secrets import Scrubber
from tiny_cli.testing import reply, respond, tool_call

from .conftest import HANDBOOK, REPO, SEED_CARDS
from .test_bench import TURNS, model, write_tasks
from .test_properties import QUICK, json_values

TASK = "how did the onboarding process work again"
ANSWER = {"status": "ok", "summary": "Day one: laptop.", "source": "onboarding.md"}
V1_SQL = Path(__file__).parent / "data" / "runlog-v1.sql"
SECRET = "sk-test-SECRET-123"


@pytest.fixture
def run(tiny, scripted_server):
    """Run `tiny ARGS` against the scripted server; `--json` output is parsed."""

    def go(*args: str, env: dict[str, str] | None = None):
        result = tiny(*args, env={"TINY_BASE_URL": scripted_server.url, **(env or {})})
        assert "Traceback" not in result.output
        return json.loads(result.stdout) if "--json" in args and result.stdout else result

    return go


def _ghost_then_answer(server) -> None:
    server.add(
        tool_call("web_search", {"q": "x"}),
        tool_call("docs_search", {"query": "onboarding"}),
        reply(json.dumps(ANSWER)),
    )


def _record(log: RunLog, card: str, model: str, status: str = "ok", **cost: int) -> None:
    """Record one finished run through the observer, as the runner would."""
    observe = log.observer("invoke", "invoke", "127.0.0.1")
    observe(RunStarted(card, model, "native", f"task for {card}", 4, 30.0, 400, ()))
    messages = [{"role": "user", "content": "task"}]
    observe(Finished(Digest(card, status, cost=Cost(**cost)), messages))  # type: ignore[arg-type]


# --- what an invocation leaves ------------------------------------------------------------


def test_invoke_logs_one_run_with_its_transcript(run, scripted_server, home) -> None:
    _ghost_then_answer(scripted_server)
    digest = run("invoke", "docs-finder", TASK, "--tool-mode", "native", "--json")
    assert digest["status"] == "ok"
    [row] = run("runs", "--json")
    assert row["command"] == "invoke" and row["card"] == "docs-finder"
    assert row["status"] == "ok" and row["endpoint"] == "127.0.0.1"
    assert row["goal"] == TASK and row["tool_mode"] == "native" and row["pid"] == os.getpid()
    assert (row["tool_calls"], row["ghost_calls"]) == (2, 1)
    assert row["tokens_in"] == digest["cost"]["tokens_in"] == 30
    assert row["caller_tokens"] == digest["cost"]["caller_tokens"] > 0
    shown = run("runs", "show", str(row["id"]), "--json")
    assert shown["digest"] == digest
    roles = [m["role"] for m in shown["transcript"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    calls = [(c["name"], c["arguments"], c["outcome"]) for c in shown["calls"]]
    assert calls == [
        ("web_search", '{"q": "x"}', "ghost"),
        ("docs_search", '{"query": "onboarding"}', "ok"),
    ]
    assert "onboarding" in shown["transcript"][5]["content"].lower()  # the tool's result


def test_runs_show_highlights_calls_and_sizes(run, scripted_server) -> None:
    _ghost_then_answer(scripted_server)
    run("invoke", "docs-finder", TASK, "--tool-mode", "native", "--json")
    text = run("runs", "show", "1").output
    assert "ghost call: not a tool of this card" in text
    assert '→ call "web_search"' in text and "→ call docs_search" in text
    assert "result of docs_search · ok" in text
    assert "#1 system ·" in text and "chars in all; --full shows all" in text  # long: cut
    assert "--full shows all" not in run("runs", "show", "1", "--full").output


def test_a_repeated_call_id_shows_each_calls_own_outcome(run, scripted_server) -> None:
    scripted_server.add(  # a server that numbers each message's calls from call_0
        tool_call("web_search", {"q": "x"}, call_id="call_0"),
        tool_call("docs_search", {"query": "onboarding"}, call_id="call_0"),
        reply(json.dumps(ANSWER)),
    )
    run("invoke", "docs-finder", TASK, "--tool-mode", "native", "--json")
    lines = run("runs", "show", "1").output.splitlines()
    (ghost,) = [line for line in lines if '→ call "web_search"' in line]
    (found,) = [line for line in lines if "→ call docs_search" in line]
    assert ghost.endswith("· ghost call: not a tool of this card")
    assert found.endswith("· ok")


def test_a_run_an_error_ended_is_failed_at_once_while_the_log_stays_open(
    scripted_server, home
) -> None:
    from tiny_cli import OpenAIProvider, ProviderError, load_settings, make_brief, open_workspace
    from tiny_cli.delegation import run_card
    from tiny_cli.testing import http_error

    scripted_server.add(http_error(401))
    settings = load_settings(env={"TINY_HOME": str(home), "TINY_BASE_URL": scripted_server.url})
    brief = make_brief(TASK)
    with RunLog.open(home) as log:  # as `tiny serve` keeps it: open across many runs
        observer = log.observer("serve", "invoke", "127.0.0.1")
        with pytest.raises(ProviderError), OpenAIProvider(scripted_server.url) as provider:
            run_card(
                open_workspace(settings), "docs-finder", brief, provider=provider, observer=observer
            )
        [row] = log.runs()
        assert (row.status, row.card) == ("failed", "docs-finder")
        assert "HTTP 401" in (row.reason or "") and row.ended_at is not None


def test_a_task_quoting_the_repair_request_is_no_repair(run, scripted_server) -> None:
    scripted_server.add(tool_call("docs_search", {"query": "x"}), reply(json.dumps(ANSWER)))
    run("invoke", "docs-finder", f"what does '{REPAIR_MARK}' mean in the handbook", "--json")
    [row] = run("runs", "--json")
    assert row["repaired"] is False
    assert "repair request" not in run("runs", "show", "1").output


@pytest.mark.parametrize(
    ("flags", "env"), [(["--no-log"], {}), ([], {"TINY_NO_LOG": "1"})], ids=["flag", "env"]
)
def test_no_log_records_nothing(run, scripted_server, home, flags, env) -> None:
    _ghost_then_answer(scripted_server)
    digest = run("invoke", "docs-finder", TASK, *flags, "--json", env=env)
    assert digest["status"] == "ok"
    assert not (home / DB_NAME).exists()


def test_delegate_abstain_is_logged_with_its_routing(run, home) -> None:
    digest = run("delegate", "make me a sandwich", "--json", env={"TINY_EMBEDDER": "hashing"})
    assert digest["status"] == "abstain"
    [row] = run("runs", "--json")
    assert (row["command"], row["status"], row["card"]) == ("delegate", "abstain", None)
    shown = run("runs", "show", str(row["id"]), "--json")
    assert shown["routing"]["decision"] == "abstain" and shown["transcript"] == []


@pytest.mark.slow
def test_bench_with_concurrency_logs_every_run(run, scripted_server, tmp_path) -> None:
    scripted_server.add(*[respond(model)] * TURNS)
    tasks = write_tasks(tmp_path / "bench")
    args = ("bench", "--tasks", str(tasks), "--repeat", "2", "--concurrency", "8", "--json")
    report = run(*args)
    ran = [r for t in report["tasks"] for runs in t["runs"].values() for r in runs]
    assert len(ran) == 4 * 2 * 2  # tasks x arms x repeats
    stats = run("runs", "stats", "--json")
    assert stats["total"]["runs"] == len(ran)
    assert "running" not in stats["total"]["statuses"]
    rows = run("runs", "--limit", "100", "--json")
    assert {r["command"] for r in rows} == {"bench"}
    assert len({r["label"] for r in rows}) == len(ran)  # one row per run, none twice


def test_stats_per_card_and_model(run, scripted_server) -> None:
    _ghost_then_answer(scripted_server)
    run("invoke", "docs-finder", TASK, "--tool-mode", "native", "--json")
    scripted_server.add(  # a first answer that cannot be used, then a repaired one
        tool_call("docs_search", {"query": "onboarding"}),
        reply("the onboarding takes two weeks"),
        reply(json.dumps(ANSWER)),
    )
    run("invoke", "docs-finder", TASK, "--tool-mode", "native", "--json")
    stats = run("runs", "stats", "--json")
    [card] = stats["by_card"]
    assert card["name"] == "docs-finder" and card["runs"] == 2 and card["statuses"] == {"ok": 2}
    assert card["repair_rate"] == 0.5 and card["ghost_rate"] == round(1 / 3, 4)
    assert card["mean_tokens_in"] == 30.0 and card["wall_p50"] is not None
    assert card["compression"] == round(card["mean_caller_tokens"] / 30, 4)
    assert [m["runs"] for m in stats["by_model"]] == [2]
    text = run("runs", "stats").output
    assert "per card" in text and "per model" in text and "runs per card, by status" in text


# --- safety -------------------------------------------------------------------------------


def test_no_api_key_anywhere_under_the_data_directory(run, scripted_server, home) -> None:
    said = f"Authorization: Bearer {SECRET} was in the page"
    scripted_server.add(
        tool_call("docs_search", {"query": f"onboarding {SECRET}"}),
        reply(json.dumps({**ANSWER, "summary": said})),
    )
    env = {"TINY_API_KEY": SECRET}
    run("invoke", "docs-finder", f"{TASK} (key {SECRET})", "--tool-mode", "native", env=env)
    assert SECRET in scripted_server.headers[0]["authorization"]  # the key was in play
    [row] = run("runs", "--json")
    assert "[redacted]" in row["goal"]
    files = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.name == DB_NAME for p in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path


def test_scrubber_hides_keys_and_headers() -> None:
    scrub = Scrubber(["k-123456789"])
    assert scrub.text("use k-123456789 now") == "use [redacted] now"
    assert scrub.text("Authorization: Bearer abc.def-ghi") == "Authorization: [redacted]"
    assert scrub.text("key sk-abcdefghijklmnopqrstuv") == "key [redacted]"
    assert scrub.tree({"api_key": "short", "n": [1, "x"]}) == {
        "api_key": "[redacted]",
        "n": [1, "x"],
    }
    assert json.loads(scrub.column([{"a": 'api_key="abc\\"'}])) == [{"a": 'api_key="[redacted]\\"'}]


def test_runs_show_escapes_terminal_control_characters(run, scripted_server, plain_cards) -> None:
    hostile = "\x1b[2J\x1b]0;pwned\x07[bold red]markup[/] \u202eevil"
    scripted_server.add(reply(hostile), reply(json.dumps({**ANSWER, "summary": hostile})))
    run(
        "invoke", "docs-finder", TASK, "--tool-mode", "native", env={"TINY_CARDS": str(plain_cards)}
    )
    text = run("runs", "show", "1").output
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\\u001b[2J" in text and "[bold red]markup[/]" in text and "\\u202e" in text


def test_unknown_run_is_one_line_exit_2(run) -> None:
    result = run("runs", "show", "41")
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line.startswith("tiny: error: no run 41 in the run log")


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "show", str(2**70)],  # past SQLite's integers
        ["runs", "--since", "99999999999d"],
        ["runs", "--since", "0001-01-01"],  # year 0 once made UTC east of Greenwich
        ["runs", "stats", "--since", "9999-12-31T23:59:59-05:00"],  # year 10000 in UTC
    ],
)
def test_out_of_range_input_is_one_line_exit_2(run, args) -> None:
    result = run(*args)
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line.startswith("tiny: error: ")


def test_a_huge_limit_lists_every_run(run, home) -> None:
    with RunLog.open(home) as log:
        _record(log, "docs-finder", "m")
    assert [r["id"] for r in run("runs", "--limit", str(2**70), "--json")] == [1]


def _damage(home: Path) -> None:
    """Record 20 runs, then scramble the pages past the schema and the tables' first pages."""
    with RunLog.open(home) as log:
        for _ in range(20):
            _record(log, "docs-finder", "m")
    with sqlite3.connect(home / DB_NAME) as db:  # one file, no WAL beside it
        db.execute("PRAGMA journal_mode = DELETE")
        roots = db.execute("SELECT max(rootpage) FROM sqlite_master").fetchone()[0]
    data = bytearray((home / DB_NAME).read_bytes())
    page = int.from_bytes(data[16:18], "big")
    assert len(data) > (roots + 1) * page  # the rows live past the tables' first pages
    for i in range(roots * page, len(data), 7):  # keep what opens the log, scramble the rows
        data[i] = (data[i] * 31 + 7) % 256
    (home / DB_NAME).write_bytes(bytes(data))


def test_a_damaged_log_is_one_line_exit_2(run, home) -> None:
    _damage(home)
    for args in (["runs"], ["runs", "stats", "--json"], ["runs", "show", "1"]):
        result = run(*args)
        assert result.exit_code == 2, result.output
        [line] = result.output.strip().splitlines()
        assert line.startswith(f"tiny: error: {home / DB_NAME}: cannot read the run log:"), line


def test_a_run_the_log_cannot_record_still_prints_its_digest(tiny, scripted_server, home) -> None:
    _damage(home)
    scripted_server.add(
        tool_call("docs_search", {"query": "onboarding"}), reply(json.dumps(ANSWER))
    )
    result = tiny(
        "invoke", "docs-finder", TASK, "--json", env={"TINY_BASE_URL": scripted_server.url}
    )
    assert json.loads(result.stdout)["status"] == "ok"  # the run happened: its Digest is not lost
    assert result.exit_code == 0
    [warning] = [line for line in result.stderr.splitlines() if line.startswith("tiny:")]
    assert warning.startswith(f"tiny: warning: {home / DB_NAME}:"), warning
    assert "Traceback" not in result.stderr


# --- interrupted runs ---------------------------------------------------------------------


def test_killed_run_is_interrupted_not_missing(run, scripted_server, home) -> None:
    scripted_server.add(reply(json.dumps(ANSWER), delay=60))
    env = {
        **os.environ,
        "TINY_HOME": str(home),
        "TINY_CARDS": str(SEED_CARDS),
        "TINY_DOCS": str(HANDBOOK),
        "TINY_BASE_URL": scripted_server.url,
        "TINY_WALL_SCALE": "10",
    }
    args = [sys.executable, "-m", "tiny_cli", "invoke", "docs-finder", TASK, "--json"]
    child = subprocess.Popen(args, env=env, cwd=REPO, stdout=subprocess.DEVNULL)
    try:
        row = _wait_for_running(run, child)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert row["pid"] == child.pid
    [after] = run("runs", "--json")
    assert after["id"] == row["id"] and after["status"] == "interrupted"
    assert after["reason"] == "the process ended before the run finished"


def _wait_for_running(run, child: subprocess.Popen, seconds: float = 30.0) -> dict:
    """Poll the log until the child's row is `running` (it waits on the model by then)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert child.poll() is None, "the child ended before it could be killed"
        rows = run("runs", "--status", "running", "--json")
        if rows:
            return rows[0]
        time.sleep(0.1)
    raise AssertionError("no running row appeared")


def test_runs_left_unfinished_by_a_closing_log_are_interrupted(home) -> None:
    with RunLog.open(home) as log:
        observe = log.observer("bench", "onboarding/tiny/0", "127.0.0.1")
        observe(RunStarted("docs-finder", "m", "native", TASK, 4, 30.0, 400, ()))
    with RunLog.open(home) as log:
        [row] = log.runs()
    assert row.status == "interrupted" and row.reason == "the command ended before the run finished"


# --- concurrency, schema ------------------------------------------------------------------


def test_concurrent_observers_lose_nothing(home) -> None:
    with RunLog.open(home) as log:

        def work(n: int) -> None:
            for i in range(25):
                observe = log.observer("bench", f"t{n}/{i}", "127.0.0.1")
                observe(RunStarted("c", "m", "native", "goal", 4, 30.0, 400, ()))
                observe(ToolCalled(f"c{i}", "docs_search", "{}"))
                observe(ToolFinished(f"c{i}", "docs_search", "ok", 0.01, "result"))
                observe(Finished(Digest("c", "ok", cost=Cost(tokens_in=10)), ()))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        found = log.runs(RunQuery(limit=None))
    assert len(found) == 200 and {r.status for r in found} == {"ok"}
    assert len({r.label for r in found}) == 200


def test_a_run_is_one_row_running_then_finished(home) -> None:
    with RunLog.open(home) as log:
        observe = log.observer("invoke", "invoke", "127.0.0.1")
        context = [{"role": "system", "content": "card"}, {"role": "user", "content": TASK}]
        observe(RunStarted("docs-finder", "m", "native", TASK, 4, 30.0, 400, context))
        [running] = log.runs()  # a read makes the writer pass: the running row is in
        assert running.status == "running" and running.card == "docs-finder"
        assert log.run(running.id).transcript == context
        observe(Finished(Digest("docs-finder", "ok", cost=Cost(tokens_in=7)), ()))
        [done] = log.runs()
    assert done.id == running.id and done.status == "ok" and done.tokens_in == 7
    assert done.started_at == running.started_at and done.ended_at is not None


def test_a_run_over_before_the_writer_passes_is_written_once(home) -> None:
    with RunLog.open(home) as log:
        for _ in range(3):
            _record(log, "docs-finder", "m")
        found = log.runs()
    assert [r.status for r in found] == ["ok"] * 3 and len({r.id for r in found}) == 3
    assert all(r.ended_at is not None and r.started_at <= r.ended_at for r in found)


def test_calls_pair_with_their_outcomes_even_when_a_model_reuses_an_id(home) -> None:
    with RunLog.open(home) as log:
        observe = log.observer("invoke", "invoke", "127.0.0.1")
        observe(RunStarted("docs-finder", "m", "json", TASK, 4, 30.0, 400, ()))
        observe(ToolCalled("call_1", "docs_search", '{"query": "a"}'))
        observe(ToolFinished("call_1", "docs_search", "ok", 0.25, "12345"))
        observe(ToolCalled("call_1", "web_search", "{}", recovered=True))
        observe(ToolFinished("call_1", "web_search", "ghost", 0.0, "no such tool"))
        observe(ToolCalled("call_2", "docs_search", "{}"))  # never answered: budget spent
        observe(Finished(Digest("docs-finder", "partial", cost=Cost()), ()))
        [row] = log.runs()
        calls = log.run(row.id).calls
    assert [(c["name"], c["outcome"], c["result_chars"]) for c in calls] == [
        ("docs_search", "ok", 5),
        ("web_search", "ghost", 12),
        ("docs_search", None, 0),
    ]
    assert calls[0]["seconds"] == 0.25 and calls[1]["recovered"] is True


def test_text_in_any_script_round_trips_and_the_stored_json_is_ascii(home) -> None:
    words = "東京の天気 — 5 € — naïve"
    with RunLog.open(home) as log:
        observe = log.observer("invoke", "invoke", "127.0.0.1")
        observe(RunStarted("docs-finder", "m", "native", words, 4, 30.0, 400, ()))
        messages = [{"role": "user", "content": words}, {"role": "assistant", "content": words}]
        observe(Finished(Digest("docs-finder", "ok", summary=words, cost=Cost()), messages))
        [row] = log.runs()
        record = log.run(row.id)
    assert row.goal == words and record.transcript == messages
    assert record.digest is not None and record.digest["summary"] == words
    with sqlite3.connect(home / DB_NAME) as db:
        stored = db.execute("SELECT transcript, digest FROM runs").fetchone()
    assert all(text.isascii() for text in stored)  # escaped: JSON readers (json_extract) decode it


def test_flush_after_close_returns(home) -> None:
    log = RunLog.open(home)
    _record(log, "docs-finder", "m")
    log.close()
    finished = threading.Event()
    threading.Thread(target=lambda: (log.flush(), finished.set()), daemon=True).start()
    assert finished.wait(5), "flush() on a closed log waited for a writer that is gone"


def test_first_schema_upgrades_under_the_newest_code(home) -> None:
    with sqlite3.connect(home / DB_NAME) as db:
        db.executescript(V1_SQL.read_text(encoding="utf-8"))
    with RunLog.open(home) as log:
        done, killed = sorted(log.runs(RunQuery(limit=None)), key=lambda r: r.id)
        _record(log, "web-reader", "m")  # the upgraded log records as a new one does
        assert len(log.runs()) == 3
    assert done.repaired and done.status == "ok" and done.tokens_in == 820  # filled in by v2
    assert killed.status == "interrupted" and not killed.repaired
    with sqlite3.connect(home / DB_NAME) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        upgraded = _schema(db)
    fresh = home / "fresh"
    RunLog.open(fresh).close()
    with sqlite3.connect(fresh / DB_NAME) as db:
        assert _schema(db) == upgraded  # a new log and an upgraded one are the same


def test_a_v1_log_with_a_damaged_transcript_upgrades_and_keeps_the_row(home: Path) -> None:
    with sqlite3.connect(home / DB_NAME) as db:
        db.executescript(V1_SQL.read_text(encoding="utf-8"))
        db.execute("UPDATE runs SET transcript = substr(transcript, 1, 30) WHERE id = 1")
    with RunLog.open(home) as log:  # a transcript that is no JSON marks no repair; it stays
        runs = sorted(log.runs(RunQuery(limit=None)), key=lambda r: r.id)
    assert [r.id for r in runs] == [1, 2] and not runs[0].repaired


def _schema(db: sqlite3.Connection) -> list[tuple[str, str]]:
    """The tables, indexes and columns of a database, in a comparable form."""
    names = db.execute("SELECT type, name FROM sqlite_master ORDER BY name").fetchall()
    columns = db.execute("SELECT name, type, dflt_value FROM pragma_table_info('runs')").fetchall()
    return sorted(names) + sorted(columns)


def test_a_newer_schema_is_refused(home) -> None:
    with sqlite3.connect(home / DB_NAME) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ConfigError, match="upgrade tiny"):
        RunLog.open(home)


def test_the_repair_mark_is_what_the_runner_says() -> None:
    assert repair_message(["no JSON object found"], ["source"]).startswith(REPAIR_MARK)


# --- reading: filters -----------------------------------------------------------------------


def test_filters(run, home) -> None:
    with RunLog.open(home) as log:
        _record(log, "docs-finder", "m1")
        _record(log, "docs-finder", "m2", status="failed")
        _record(log, "web-reader", "m1")
    old = (datetime.now(UTC) - timedelta(days=3)).isoformat(timespec="milliseconds")
    with sqlite3.connect(home / DB_NAME) as db:
        db.execute("UPDATE runs SET started_at = ? WHERE id = 1", (old,))

    def ids(*flags: str) -> list[int]:
        return [r["id"] for r in run("runs", *flags, "--json")]

    assert ids() == [3, 2, 1]
    assert ids("--card", "docs-finder") == [2, 1]
    assert ids("--status", "failed") == [2]
    assert ids("--model", "m1") == [3, 1]
    assert ids("--since", "2d") == [3, 2]
    assert ids("--since", (datetime.now() - timedelta(days=4)).date().isoformat()) == [3, 2, 1]
    assert ids("--limit", "1") == [3]
    assert ids("--card", "docs-finder", "--model", "m1") == [1]
    assert run("runs", "stats", "--since", "2d", "--json")["total"]["runs"] == 2
    assert "web-reader" in run("runs").output


def test_parse_since() -> None:
    now = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    assert parse_since("2h", now) == now - timedelta(hours=2)
    assert parse_since("3d", now) == now - timedelta(days=3)
    assert parse_since("2025-02-01T00:00+00:00", now) == datetime(2025, 2, 1, tzinfo=UTC)
    with pytest.raises(ConfigError, match="--since"):
        parse_since("yesterday", now)


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0], 95) == 1.0
    assert percentile([float(i) for i in range(1, 21)], 95) == 19.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0


def test_a_row_of_the_wrong_shape_shows_what_it_can(tiny, cli_env) -> None:
    import sqlite3

    from tiny_cli.runs.log import DB_NAME, RunLog

    home = Path(cli_env["TINY_HOME"])
    with RunLog.open(home):
        pass
    db = sqlite3.connect(home / DB_NAME)
    db.execute(
        "INSERT INTO runs (started_at, command, label, card, endpoint, goal, status, transcript, "
        "calls, digest, pid) VALUES ('2026-12-01T10:00:00', 'invoke', 'invoke', 'docs-finder', "
        "'127.0.0.1', 'a task', 'ok', '[null, 5]', '7', '[1]', 1)"
    )
    db.commit()
    db.close()
    shown = tiny("runs", "show", "1")
    assert shown.exit_code == 0, shown.output
    assert "Traceback" not in shown.output


# --- rows of any shape (edited or damaged by hand) ----------------------------------------

_sqlite_values = (
    st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.binary(max_size=10)
)
_anything = json_values | st.text(max_size=10)
_call_like = st.fixed_dictionaries(
    {},
    optional={
        "id": _anything,
        "name": _anything,
        "outcome": st.sampled_from(["ok", "ghost", "bad_arguments"]) | _anything,
        "seconds": _anything,
        "result_chars": _anything,
        "recovered": _anything,
        "arguments": _anything,
        "function": st.fixed_dictionaries({}, optional={"name": _anything, "arguments": _anything})
        | _anything,
    },
)
_message_like = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["system", "user", "assistant", "tool"]) | _anything,
        "content": st.just("Result of x: y") | st.just(REPAIR_MARK) | _anything,
        "tool_calls": st.lists(_call_like, max_size=3) | _anything,
        "tool_call_id": _anything,
    },
)
_routing_like = st.fixed_dictionaries(
    {},
    optional={k: _anything for k in ("decision", "agent_id", "score", "rerouted_from")},
)


def _json_column(shaped: st.SearchStrategy) -> st.SearchStrategy:
    """A JSON column: JSON of the right shape with any values, any JSON, not JSON, any value."""
    return shaped.map(json.dumps) | json_values.map(json.dumps) | _sqlite_values | st.none()


_ROW = {
    "started_at": st.sampled_from(["2026-12-01T10:00:00", "0001-01-01", "9999-12-31T23:59"])
    | _sqlite_values,
    "ended_at": _sqlite_values | st.none(),
    "command": _sqlite_values,
    "label": _sqlite_values,
    "card": _sqlite_values | st.none(),
    "model": _sqlite_values | st.none(),
    "endpoint": _sqlite_values,
    "goal": _sqlite_values,
    "status": st.sampled_from(["ok", "running", "interrupted", "failed"]) | _sqlite_values,
    "reason": _sqlite_values | st.none(),
    "routing": _json_column(_routing_like),
    "digest": _json_column(st.fixed_dictionaries({}, optional={"attempts": _anything})),
    "transcript": _json_column(st.lists(_message_like, max_size=4)).filter(lambda v: v is not None),
    "calls": _json_column(st.lists(_call_like, max_size=3)).filter(lambda v: v is not None),
    **{
        name: st.integers(min_value=-(2**63), max_value=2**63 - 1) | _sqlite_values
        for name in ("tokens_in", "tokens_out", "tool_calls", "ghost_calls", "caller_tokens")
    },
    "recovered_calls": _sqlite_values,
    "wall_seconds": _sqlite_values | st.none(),
    "tool_mode": _sqlite_values | st.none(),
    "pid": st.sampled_from([1, 0, -1, 2**62, os.getpid()]) | _sqlite_values,
    "repaired": _sqlite_values,
}
any_row = st.fixed_dictionaries(_ROW)
DEEP_ROW = {
    **{k: "x" for k in ("started_at", "command", "label", "endpoint", "goal", "status")},
    "transcript": "[" * 5000 + "]" * 5000,  # deeper than json.loads can nest
    "calls": "[]",
    "pid": 1,
}


def _put_row(home: Path, row: dict) -> None:
    """Replace the log's rows with this one, as id 1."""
    if not (home / DB_NAME).exists():
        RunLog.open(home).close()
    db = sqlite3.connect(home / DB_NAME)
    try:
        db.execute("DELETE FROM runs")
        names = ", ".join(["id", *row])
        db.execute(f"INSERT INTO runs ({names}) VALUES (1{', ?' * len(row)})", list(row.values()))
        db.commit()
    finally:
        db.close()


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
@QUICK
@given(any_row)
@example(DEEP_ROW)
@example({**DEEP_ROW, "transcript": '[{"tool_calls": "abc", "content": 5}]', "calls": "7"})
@example({**DEEP_ROW, "transcript": "[]", "status": "running", "pid": "abc"})
def test_a_row_of_any_shape_reads_and_renders(home: Path, row: dict) -> None:
    from rich.console import Console

    from tiny_cli.cli import render_runs

    _put_row(home, row)
    console = Console(file=io.StringIO(), width=100)
    with RunLog.open(home) as log:
        found = log.runs(RunQuery())
        try:
            record = log.run(1)
        except ConfigError as exc:  # JSON that is not JSON: one line naming the run
            assert "\n" not in str(exc) and "run 1 is damaged" in str(exc)
            record = None
    render_runs.runs(console, found, home / DB_NAME)
    json.dumps([r.to_json() for r in found])
    if record is not None:
        render_runs.run(console, record, full=True)
        json.dumps(record.to_json())


# through the CLI each example costs two commands: fewer of them, the test above has the rest
@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
@settings(QUICK, max_examples=8)
@given(any_row)
@example(DEEP_ROW)
@example({**DEEP_ROW, "transcript": '[{"tool_calls": "abc"}]', "tokens_in": "abc"})
def test_runs_show_and_list_have_an_outcome_for_any_row(tiny, home: Path, row: dict) -> None:
    _put_row(home, row)
    for args in (("runs", "show", "1"), ("runs",)):
        result = tiny(*args)
        assert result.exit_code in (0, 2), result.output
        if result.exit_code == 2:
            [line] = result.stderr.splitlines()
            assert line.startswith("tiny: error: ")
