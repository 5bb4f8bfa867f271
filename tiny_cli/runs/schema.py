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
