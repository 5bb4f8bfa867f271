"""Deleting runs: which rows a deletion takes (by id, or started before a time), and the delete.

A run still `running` belongs to a live process (opening the log marked the others
interrupted): it is never deleted. A run's corrections go with it, and so does its row of the
search index (a trigger, tiny_cli.runs.schema.SEARCH_V5).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tiny_cli.errors import ConfigError
from tiny_cli.runs.query import SQLITE_MAX_INT
from tiny_cli.runs.schema import iso

OLDER_SQL = "SELECT id FROM runs WHERE started_at < ? AND status != 'running' ORDER BY id"
STATE_SQL = "SELECT status, pid FROM runs WHERE id = ?"


@dataclass(frozen=True)
class Deletion:
    """What a deletion removed: the runs' ids and how many corrections; `declined`: nothing."""

    runs: tuple[int, ...]
    corrections: int
    declined: bool = False  # the confirmation said no

    def to_json(self) -> dict[str, Any]:
        """Return the deletion as a JSON object."""
        return {
            "deleted": list(self.runs),
            "corrections": self.corrections,
            "declined": self.declined,
        }


def chosen(
    db: sqlite3.Connection, path: Path, ids: Iterable[int], before: datetime | None
) -> list[int]:
    """Return the ids to delete, in order: the runs `ids`, and those started before `before`.

    ConfigError for an id the log lacks or a run still running: all or nothing.
    """
    wanted = {_deletable(db, path, run_id) for run_id in ids}
    if before is not None:
        wanted.update(run_id for (run_id,) in db.execute(OLDER_SQL, (iso(before),)))
    return sorted(wanted)


def _deletable(db: sqlite3.Connection, path: Path, run_id: int) -> int:
    """Return `run_id` if the log has that run and it is over; else ConfigError."""
    row = db.execute(STATE_SQL, (run_id,)).fetchone() if abs(run_id) <= SQLITE_MAX_INT else None
    if row is None:
        raise ConfigError(f"no run {run_id} in the run log {path}: nothing deleted")
    if row[0] == "running":
        raise ConfigError(f"run {run_id} is still running (pid {row[1]}): nothing deleted")
    return run_id


def delete(db: sqlite3.Connection, ids: Sequence[int]) -> Deletion:
    """Delete these runs, unless running, and their corrections (in the caller's transaction)."""
    sql = "DELETE FROM runs WHERE id = ? AND status != 'running'"
    gone = tuple(run_id for run_id in ids if db.execute(sql, (run_id,)).rowcount)
    dropped = db.executemany("DELETE FROM corrections WHERE run_id = ?", [(i,) for i in gone])
    return Deletion(gone, dropped.rowcount)
