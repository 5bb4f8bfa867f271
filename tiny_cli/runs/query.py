"""Reading the log: the rows as records, which runs a query matches, and `--since`."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from tiny_cli.errors import ConfigError
from tiny_cli.runs import search
from tiny_cli.runs.schema import iso

DEFAULT_LIMIT = 20
SQLITE_MAX_INT = 2**63 - 1  # a larger id or --limit cannot go into a query
# How a Digest with earlier attempts reads as stored (compact JSON): a cheap look in SQLite that
# spares `stats` every other Digest; what counts is then read from the parsed JSON
ATTEMPTS_MARK = '"attempts":['
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_AGE_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@dataclass(frozen=True)
class RunSummary:
    """One row of the log without its transcript: what `tiny runs` lists."""

    id: int
    started_at: str  # ISO 8601, UTC
    ended_at: str | None
    command: str  # invoke, delegate or bench
    label: str  # the run's name: the command, or e.g. `onboarding/tiny/0` in a bench
    card: str | None
    model: str | None
    endpoint: str  # host only
    goal: str
    status: str  # a Digest status, or running / interrupted
    reason: str | None
    tokens_in: int
    tokens_out: int
    tool_calls: int
    ghost_calls: int
    recovered_calls: int
    caller_tokens: int
    wall_seconds: float | None
    tool_mode: str | None
    pid: int
    repaired: bool

    def to_json(self) -> dict[str, Any]:
        """Return the row as a JSON object."""
        return {**asdict(self), "repaired": bool(self.repaired)}


SUMMARY_COLUMNS = tuple(f.name for f in fields(RunSummary))
# SQLite keeps any value in any column: a row edited by hand reads with the types RunSummary
# names (an integer column holding text reads 0, a text column holding a number its digits)
_WHOLE = ("id", "tokens_in", "tokens_out", "tool_calls", "ghost_calls", "recovered_calls",
          "caller_tokens", "pid", "repaired")  # fmt: skip
_MAYBE_TEXT = ("ended_at", "card", "model", "reason", "tool_mode")
_NUMBER = "('integer', 'real')"


def _typed(column: str) -> str:
    """The SELECT expression that reads `column` with its RunSummary type (in C, not Python)."""
    kind = f"typeof({column})"
    if column == "id":
        return column  # the primary key: always an integer
    if column in _WHOLE:
        return f"CASE {kind} WHEN 'integer' THEN {column} ELSE 0 END AS {column}"
    if column == "wall_seconds":
        return f"CASE WHEN {kind} IN {_NUMBER} THEN CAST({column} AS REAL) END AS {column}"
    fallback = "NULL" if column in _MAYBE_TEXT else "''"
    return (
        f"CASE WHEN {kind} = 'text' THEN {column} WHEN {kind} IN {_NUMBER} "
        f"THEN CAST({column} AS TEXT) ELSE {fallback} END AS {column}"
    )


SUMMARY_SQL = ", ".join(_typed(c) for c in SUMMARY_COLUMNS)
RUN_SQL = f"SELECT {SUMMARY_SQL}, routing, digest, transcript, calls FROM runs"


@dataclass(frozen=True)
class RunRecord:
    """One run in full: the row, its routing, Digest, transcript and tool calls."""

    summary: RunSummary
    routing: Mapping[str, Any] | None
    digest: Mapping[str, Any] | None
    transcript: Sequence[Mapping[str, Any]]  # the messages as sent to the model
    calls: Sequence[Mapping[str, Any]]  # each tool call: name, arguments, outcome, seconds

    @property
    def status(self) -> str:
        """Return the run's status."""
        return self.summary.status

    def to_json(self) -> dict[str, Any]:
        """Return the run as one JSON object."""
        return {
            **self.summary.to_json(),
            "routing": self.routing,
            "digest": self.digest,
            "transcript": list(self.transcript),
            "calls": list(self.calls),
        }


@dataclass(frozen=True)
class RunQuery:
    """Which runs to read: equal card, status, model; started since; with `text`; the newest."""

    card: str | None = None
    status: str | None = None
    model: str | None = None
    since: datetime | None = None
    limit: int | None = DEFAULT_LIMIT
    text: str | None = None  # words each run must hold (tiny_cli.runs.search)


def summary(row: Sequence[Any]) -> RunSummary:
    """Return a row of SUMMARY_COLUMNS as a RunSummary."""
    values = dict(zip(SUMMARY_COLUMNS, row, strict=True))
    return RunSummary(**{**values, "repaired": bool(values["repaired"])})


def record(row: Sequence[Any]) -> RunRecord:
    """Return a row of RUN_SQL as a RunRecord; ValueError when its JSON is damaged."""
    size = len(SUMMARY_COLUMNS)
    routing, digest, transcript, calls = (_json(v) for v in row[size:])
    # a row edited by hand may hold any JSON: keep the shapes `runs show` can print
    routing = routing if isinstance(routing, dict) else None
    digest = digest if isinstance(digest, dict) else None
    transcript = (
        [m for m in transcript if isinstance(m, dict)] if isinstance(transcript, list) else []
    )
    calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    return RunRecord(summary(row[:size]), routing, digest, transcript, calls)


def _json(value: Any) -> Any:
    """Parse a JSON column; None when empty or not text; ValueError when it is not JSON."""
    if not isinstance(value, str | bytes) or not value:
        return None
    try:
        return json.loads(value)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def select_runs(query: RunQuery, indexed: bool = True) -> tuple[str, list[Any]]:
    """Return the SELECT of the matching runs' summaries, newest first, and its parameters.

    `indexed`: the log has the search index (`search.indexed`), which `query.text` then reads.
    """
    where, params = _where(query, indexed)
    sql = f"SELECT {SUMMARY_SQL} FROM runs{where} ORDER BY id DESC"
    if query.limit is not None:
        sql, params = sql + " LIMIT ?", [*params, min(query.limit, SQLITE_MAX_INT)]
    return sql, params


def select_records(query: RunQuery, indexed: bool = True) -> tuple[str, list[Any]]:
    """Return the SELECT of the matching runs in full (RUN_SQL), oldest first, every one."""
    where, params = _where(query, indexed)
    return f"{RUN_SQL}{where} ORDER BY id", params


def select_rerouted(query: RunQuery, indexed: bool = True) -> tuple[str, list[Any]]:
    """Return the SELECT of (status, digest) of the matching runs whose Digest has attempts."""
    where, params = _where(query, indexed)
    inner = f"SELECT id FROM runs{where} ORDER BY id DESC"
    if query.limit is not None:
        inner, params = inner + " LIMIT ?", [*params, min(query.limit, SQLITE_MAX_INT)]
    sql = f"SELECT status, digest FROM runs WHERE id IN ({inner}) AND instr(digest, ?) > 0"
    return sql, [*params, ATTEMPTS_MARK]


def _where(query: RunQuery, indexed: bool) -> tuple[str, list[Any]]:
    """Return the WHERE clause and its parameters for a query's filters."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (("card", query.card), ("status", query.status), ("model", query.model)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if query.since is not None:
        clauses.append("started_at >= ?")
        params.append(iso(query.since))
    if query.text is not None:
        matching, words = search.clause(query.text, indexed)
        clauses.append(matching)
        params.extend(words)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def parse_since(text: str, now: datetime | None = None, option: str = "--since") -> datetime:
    """Read `--since`: an age (30m, 2h, 3d, 1w) or an ISO date or time (local unless zoned).

    `option` is the flag its errors name (--older-than reads the same).
    """
    now = now or datetime.now(UTC)
    age = _AGE.match(text)
    if not age:
        try:
            moment = datetime.fromisoformat(text.strip())
        except ValueError:
            raise ConfigError(
                f"{option} {text!r}: use an ISO date or time (2024-05-01, 2024-05-01T14:00) "
                "or an age (30m, 2h, 3d, 1w)"
            ) from None
    try:
        if age:
            return now - timedelta(**{_AGE_UNITS[age.group(2)]: float(age.group(1))})
        return moment.astimezone(UTC)  # a naive time is taken as local, as a person means it
    except (OverflowError, ValueError):  # 99999999999d, 0001-01-01 or 9999-12-31 made UTC
        raise ConfigError(f"{option} {text!r}: out of the calendar's range") from None
