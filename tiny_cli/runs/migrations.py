"""The numbered schema migrations, and `PRAGMA user_version`: how many a database has had.

A schema change is a new migration at the end of MIGRATIONS, never an edit of an old one:
a database made by any earlier tiny upgrades by running the ones it lacks, in order.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path

from tiny_cli.errors import ConfigError
from tiny_cli.runs.schema import SCHEMA_V1, SEARCH_V5, TEXT_VIEW, repaired
from tiny_cli.runs.store import NO_LOG_HINT, transaction

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
