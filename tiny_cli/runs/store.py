"""The SQLite file and its tables: opening it (owner-only, WAL), one transaction at a time, the
runs table's first schema, the column sets rows are written with, stored times, and the
numbered schema migrations with `PRAGMA user_version` (how many a database has had).

A schema change is a new migration at the end of MIGRATIONS, never an edit of an old one:
a database made by any earlier tiny upgrades by running the ones it lacks, in order.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from tiny_cli.errors import ConfigError

DB_NAME = "runs.sqlite3"
BUSY_SECONDS = 30.0  # wait this long for another tiny process's write (a bench next door)
NO_LOG_HINT = " (--no-log or TINY_NO_LOG=1 runs without the log)"


def connect(path: Path) -> sqlite3.Connection:
    """Open the file (only its owner may read it: transcripts hold what agents read) in WAL."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
        db = sqlite3.connect(
            path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False
        )
    except (OSError, sqlite3.Error) as exc:
        raise ConfigError(f"{path}: cannot open the run log: {exc}{NO_LOG_HINT}") from exc
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")  # WAL: a killed process loses no commit
    except sqlite3.Error as exc:  # e.g. not a database
        db.close()
        raise ConfigError(f"{path}: cannot open the run log: {exc}{NO_LOG_HINT}") from exc
    return db


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE … COMMIT, rolled back on any error: never half a write."""
    db.execute("BEGIN IMMEDIATE")  # take the write lock now, not on the first write
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


# How tiny_cli.agent.loop.repair_message begins: a transcript holding it needed a repair.
REPAIR_MARK = "Your answer cannot be used"

# The first schema. tests/data/runlog-v1.sql keeps a copy: never edit this, add a migration.
SCHEMA_V1 = (
    """CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        command TEXT NOT NULL,
        label TEXT NOT NULL,
        card TEXT,
        model TEXT,
        endpoint TEXT NOT NULL,
        goal TEXT NOT NULL,
        routing TEXT,
        status TEXT NOT NULL,
        reason TEXT,
        digest TEXT,
        transcript TEXT NOT NULL,
        calls TEXT NOT NULL,
        tokens_in INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0,
        tool_calls INTEGER NOT NULL DEFAULT 0,
        ghost_calls INTEGER NOT NULL DEFAULT 0,
        recovered_calls INTEGER NOT NULL DEFAULT 0,
        caller_tokens INTEGER NOT NULL DEFAULT 0,
        wall_seconds REAL,
        tool_mode TEXT,
        pid INTEGER NOT NULL
    )""",
)

# The search index (v5). runs_text: per run, the text `tiny runs search` finds it by; runs_fts
# indexes it (FTS5), kept current by triggers. Never edit: a change is a new migration.
# Short SQL: the log's whole schema stays on its first page (tests/test_runlog.py's damage).
SEARCH_COLUMNS = ("task", "summary", "fields", "calls", "results")
_JSON_COLUMNS = ("digest", "calls", "transcript")
# JSON that is not (a row damaged by hand) reads as NULL: it must stop no upgrade, no write
_VALID = ", ".join(f"CASE WHEN json_valid({c}) THEN {c} END AS {c}" for c in _JSON_COLUMNS)
_ROLE, _CONTENT = (
    f"CASE type WHEN 'object' THEN json_extract(value, '$.{key}') END AS {key}"
    for key in ("role", "content")
)
_TEXT = (
    "goal",
    "json_extract(digest, '$.summary')",
    "(SELECT group_concat(value, ' ') FROM json_tree(digest, '$.fields') "
    "WHERE type IN ('text', 'integer', 'real'))",
    # each tool call's name and arguments
    "(SELECT group_concat(value, ' ') FROM json_tree(calls) "
    "WHERE key IN ('name', 'arguments') AND type = 'text')",
    # what the tools answered: the tool messages, and json tool mode's `Result of …` ones
    f"(SELECT group_concat(content, ' ') FROM (SELECT {_ROLE}, {_CONTENT} "
    "FROM json_each(transcript)) WHERE role = 'tool' OR role = 'user' "
    "AND content LIKE 'Result of %')",
)
_NAMES = ", ".join(SEARCH_COLUMNS)
_INDEX = f"INSERT INTO runs_fts (rowid, {_NAMES}) SELECT * FROM runs_text"
TEXT_VIEW = (
    f"CREATE VIEW runs_text (id, {_NAMES}) AS SELECT id, {', '.join(_TEXT)} "
    f"FROM (SELECT id, goal, {_VALID} FROM runs)"
)
SEARCH_V5 = (  # with FTS5 only: without it, search reads runs_text (LIKE)
    # unicode61 without diacritics: `naive` finds `naïve`, `Urlaubsantrag` `urlaubsantrag`
    f"CREATE VIRTUAL TABLE runs_fts USING fts5({_NAMES}, state UNINDEXED, "
    "tokenize = 'unicode61 remove_diacritics 2')",
    # rows are indexed when a search needs them (CATCH_UP), not as runs are written: indexing
    # a run's tool results in the write path slowed every scripted run (docs/overhead.md)
    "CREATE TRIGGER runs_fts_delete AFTER DELETE ON runs "
    "BEGIN DELETE FROM runs_fts WHERE rowid = old.id; END",
)
# what each search does first: a row indexed while its run was running is taken out (its
# text was not whole), then every row not in the index goes in, with its status then
CATCH_UP = (
    "DELETE FROM runs_fts WHERE state = 'running'",
    f"INSERT INTO runs_fts (rowid, {_NAMES}, state) SELECT t.*, r.status FROM runs_text t "
    "JOIN runs r ON r.id = t.id WHERE t.id NOT IN (SELECT rowid FROM runs_fts)",
)

# The columns a row gets at RunStarted and, in this order, at Finished; `id` is SQLite's
STARTED = (
    *("started_at", "command", "label", "card", "model", "endpoint", "goal", "transcript"),
    *("tool_mode", "pid", "status", "calls"),
)
FINISHED = (
    *("started_at", "ended_at", "command", "label", "card", "model", "endpoint", "goal"),
    *("routing", "status", "reason", "digest", "transcript", "calls", "tokens_in"),
    *("tokens_out", "tool_calls", "ghost_calls", "recovered_calls", "caller_tokens"),
    *("wall_seconds", "tool_mode", "pid", "repaired"),
)

INTERRUPT = (
    "UPDATE runs SET status = 'interrupted', ended_at = ?, reason = ? "
    "WHERE id = ? AND status = 'running'"
)


@functools.lru_cache(maxsize=8)  # a row has one of three column sets
def insert_sql(names: tuple[str, ...]) -> str:
    """Return the INSERT of one row with these columns."""
    return f"INSERT INTO runs ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"


def repaired(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Tell whether a transcript holds the runner's repair request (a second chance)."""
    return any(
        m.get("role") == "user" and REPAIR_MARK in str(m.get("content") or "") for m in messages
    )


def now() -> str:
    """Return the time now, as stored."""
    return iso(datetime.now(UTC))


_last_second: tuple[int, str] = (-1, "")  # the run log stamps every run twice: reuse the date


def stamp(seconds: float) -> str:
    """Format a time.time() as stored, as iso would."""
    global _last_second
    whole, milliseconds = divmod(int(seconds * 1000), 1000)
    second, text = _last_second
    if whole != second:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _last_second = (whole, text)  # one tuple: a thread reads the old pair or the new one
    return f"{text}.{milliseconds:03d}+00:00"


def iso(moment: datetime) -> str:
    """Format as stored: UTC, milliseconds, one fixed width so text order is time order."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


Probe = Callable[[sqlite3.Connection], bool]


def _v1(db: sqlite3.Connection) -> None:
    """Create the runs table."""
    for statement in SCHEMA_V1:
        db.execute(statement)


def _v2(db: sqlite3.Connection) -> None:
    """Add `repaired`, so `stats` need not read every transcript; fill it for old rows."""
    db.execute("ALTER TABLE runs ADD COLUMN repaired INTEGER NOT NULL DEFAULT 0")
    rows = db.execute("SELECT id, transcript FROM runs").fetchall()
    for run_id, transcript in rows:
        if repaired(json.loads(transcript or "[]")):
            db.execute("UPDATE runs SET repaired = 1 WHERE id = ?", (run_id,))


def _v3(db: sqlite3.Connection) -> None:
    """Index what every command reads: recent runs first, and the rows still running."""
    db.execute("CREATE INDEX runs_by_start ON runs (started_at)")
    db.execute("CREATE INDEX runs_running ON runs (pid) WHERE status = 'running'")


def _v4(db: sqlite3.Connection) -> None:
    """Add the corrections: where a routed run's task should have gone, one per run."""
    db.execute(
        """CREATE TABLE corrections (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id INTEGER NOT NULL UNIQUE REFERENCES runs (id),
            task TEXT NOT NULL,
            routed TEXT,
            card TEXT,
            created_at TEXT NOT NULL,
            learned_at TEXT
        )"""
    )
    db.execute("CREATE INDEX corrections_pending ON corrections (id) WHERE learned_at IS NULL")


def _v5(db: sqlite3.Connection, fts5: Probe | None = None) -> None:
    """Index each run's text for `tiny runs search` (FTS5): the rows so far, then by triggers.

    A SQLite without FTS5 (as `fts5`, default fts5_available, tells) gets no index: search
    then reads the text view (LIKE).
    """
    db.execute(TEXT_VIEW)
    if (fts5 or fts5_available)(db):
        for statement in SEARCH_V5:
            db.execute(statement)


def fts5_available(db: sqlite3.Connection) -> bool:
    """Tell whether this SQLite has FTS5 (some builds leave it out)."""
    try:
        db.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(text)")
    except sqlite3.OperationalError:  # no such module: fts5
        return False
    db.execute("DROP TABLE temp.fts5_probe")
    return True


# Applied in order; the database's user_version is how many have been applied.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2, _v3, _v4, _v5)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: sqlite3.Connection, path: Path, fts5: Probe | None = None) -> None:
    """Apply every migration the database lacks, in order, in one transaction; `fts5` says
    whether this SQLite has FTS5 (default: fts5_available asks it)."""
    steps = [partial(m, fts5=fts5) if m is _v5 else m for m in MIGRATIONS]
    try:
        with transaction(db):
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise ConfigError(
                    f"{path}: the run log has schema v{version}, this tiny knows up to "
                    f"v{SCHEMA_VERSION}: upgrade tiny{NO_LOG_HINT}"
                )
            for number, migration in enumerate(steps[version:], start=version + 1):
                migration(db)
                db.execute(f"PRAGMA user_version = {number}")
    except sqlite3.Error as exc:
        raise ConfigError(f"{path}: cannot upgrade the run log: {exc}{NO_LOG_HINT}") from exc
