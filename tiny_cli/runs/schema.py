"""The runs table: its first schema, the column sets rows are written with, and stored times."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

# How tiny_cli.agent.prompts.repair_message begins: a transcript holding it needed a repair.
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
