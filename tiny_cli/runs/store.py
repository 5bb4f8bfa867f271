"""The SQLite file: opening it (owner-only, WAL) and one transaction at a time."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
