"""Reading the log: the rows as records, which runs a query matches, `--since`, full-text
search, and `tiny runs stats`'s figures over the matching runs (in all, per card, per model).

Search: with the index (runs_fts: FTS5, brought up to date by each search) a run matches when
each word of the query is among its indexed words, a word ending in `*` as a prefix;
without it (a SQLite without FTS5), when each word is in the same text as LIKE reads it
(ASCII case folded).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

from tiny_cli.digest import Status
from tiny_cli.errors import ConfigError
from tiny_cli.runs.store import CATCH_UP, SEARCH_COLUMNS, iso, transaction
from tiny_cli.text import printable

# A run's text (the view runs_text) as one string: what LIKE reads without the index
TEXT_SQL = " || ' ' || ".join(f"coalesce({column}, '')" for column in SEARCH_COLUMNS)
INDEX_SQL = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs_fts'"


def indexed(db: sqlite3.Connection) -> bool:
    """Tell whether the log has the search index (v5 made it where SQLite has FTS5)."""
    return db.execute(INDEX_SQL).fetchone() is not None


def search_ready(db: sqlite3.Connection, query: RunQuery) -> bool:
    """Tell whether `query` has words to look up in the index and the log has one, brought up
    to date first (the finished runs not indexed yet go in)."""
    if query.text is None or not indexed(db):
        return False
    with transaction(db):  # all or nothing: a search that fails leaves the index as it was
        for statement in CATCH_UP:
            db.execute(statement)
    return True


def search_words(text: str) -> list[str]:
    """Return the words of a query; ConfigError when it has none."""
    found = [word for word in text.split() if any(c.isalnum() for c in word)]
    if not found:  # a word without letters or digits indexes nothing: it would match no run
        raise ConfigError(f"search {text!r}: no word to search for (letters or digits)")
    return found


def search_clause(text: str, with_index: bool) -> tuple[str, list[Any]]:
    """Return the condition on a runs row that the query's words match, and its parameters."""
    if with_index:
        return "id IN (SELECT rowid FROM runs_fts WHERE runs_fts MATCH ?)", [match_query(text)]
    terms = search_words(text)
    likes = " AND ".join(["text LIKE ? ESCAPE '\\'"] * len(terms))
    sql = f"id IN (SELECT id FROM (SELECT id, {TEXT_SQL} AS text FROM runs_text) WHERE {likes})"
    return sql, [f"%{_like_escaped(word.rstrip('*'))}%" for word in terms]


def match_query(text: str) -> str:
    """Return the FTS5 query of the words: each one a quoted phrase, so no operator, all needed."""
    return " ".join(_phrase(word) for word in search_words(text))


def _phrase(word: str) -> str:
    """Quote one word for FTS5 (`"` doubled); a trailing `*` stays outside: a prefix."""
    body = word.rstrip("*")
    return '"' + body.replace('"', '""') + '"' + ("*" if body != word else "")


def _like_escaped(word: str) -> str:
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


DEFAULT_LIMIT = 20
SQLITE_MAX_INT = 2**63 - 1  # a larger id or --limit cannot go into a query
# How a Digest with earlier attempts reads as stored (compact JSON): a cheap look in SQLite that
# spares `stats` every other Digest; what counts is then read from the parsed JSON
ATTEMPTS_MARK = '"attempts":['
# what --since reads in any time zone: a day inside the calendar's ends, which a time's UTC
# offset (under a day) may cross
SINCE_RANGE = "out of range: give a date or time from 0001-01-02 to 9999-12-30"
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
        return asdict(self)


SUMMARY_COLUMNS = tuple(f.name for f in fields(RunSummary))
# SQLite keeps any value in any column: a row edited by hand reads with the types RunSummary
# names (an integer column holding text reads 0, a text column holding a number its digits,
# a number past a double's range, 9e999, as none: JSON has no Infinity)
_WHOLE = ("id", "tokens_in", "tokens_out", "tool_calls", "ghost_calls", "recovered_calls",
          "caller_tokens", "pid", "repaired")  # fmt: skip
_MAYBE_TEXT = ("ended_at", "card", "model", "reason", "tool_mode")
_NUMBER = "('integer', 'real')"
_FINITE = 1.7976931348623157e308  # the largest double: SQLite reads 9e999 as infinity


def _typed(column: str) -> str:
    """The SELECT expression that reads `column` with its RunSummary type (in C, not Python)."""
    kind = f"typeof({column})"
    if column == "id":
        return column  # the primary key: always an integer
    if column in _WHOLE:
        return f"CASE {kind} WHEN 'integer' THEN {column} ELSE 0 END AS {column}"
    if column == "wall_seconds":
        finite = f"{kind} IN {_NUMBER} AND abs({column}) <= {_FINITE!r}"
        return f"CASE WHEN {finite} THEN CAST({column} AS REAL) END AS {column}"
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


UNFINISHED = ("running", "interrupted")  # no Digest: left out of the means in `stats`
RUN_STATUSES = (*get_args(Status), *UNFINISHED)  # a Digest's status, or a run's without one


@dataclass(frozen=True)
class RunQuery:
    """Which runs to read: equal card, status, model; started since; with `text`; the newest."""

    card: str | None = None
    status: str | None = None
    model: str | None = None
    since: datetime | None = None
    limit: int | None = DEFAULT_LIMIT
    text: str | None = None  # words each run must hold (search_clause)

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in RUN_STATUSES:  # a typo lists nothing
            raise ConfigError(
                f"status {printable(self.status)[:40]!r} is no run's status; use one of "
                + ", ".join(RUN_STATUSES),
                field="status",
            )


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
    return RunRecord(summary(row[:size]), routing, digest, _objects(transcript), _objects(calls))


def _objects(value: Any) -> list[dict[str, Any]]:
    """Return the JSON objects of a JSON list; none for anything else."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _json(value: Any) -> Any:
    """Parse a JSON column; None when empty or not text; ValueError when it is not JSON.

    A number past a double's range (1e999) and NaN or Infinity, which Python's JSON reads and
    the JSON tiny prints cannot hold, read as null.
    """
    if not isinstance(value, str | bytes) or not value:
        return None
    try:
        return json.loads(value, parse_float=_finite, parse_constant=lambda _: None)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _finite(text: str) -> float | None:
    number = float(text)
    return number if math.isfinite(number) else None


def select_runs(
    query: RunQuery, with_index: bool, columns: str = SUMMARY_SQL
) -> tuple[str, list[Any]]:
    """Return the SELECT of the matching runs' `columns` (summaries), newest first, and its
    parameters; `with_index`: `query.text` is looked up in the search index (search_ready)."""
    where, params = _where(query, with_index)
    sql = f"SELECT {columns} FROM runs{where} ORDER BY id DESC"
    if query.limit is not None:
        sql, params = sql + " LIMIT ?", [*params, min(query.limit, SQLITE_MAX_INT)]
    return sql, params


def select_records(query: RunQuery, with_index: bool) -> tuple[str, list[Any]]:
    """Return the SELECT of the matching runs in full (RUN_SQL), oldest first, every one."""
    where, params = _where(query, with_index)
    return f"{RUN_SQL}{where} ORDER BY id", params


def select_rerouted(query: RunQuery, with_index: bool) -> tuple[str, list[Any]]:
    """Return the SELECT of (status, digest) of the matching runs whose Digest has attempts."""
    inner, params = select_runs(query, with_index, "id")
    sql = f"SELECT status, digest FROM runs WHERE id IN ({inner}) AND instr(digest, ?) > 0"
    return sql, [*params, ATTEMPTS_MARK]


def _where(query: RunQuery, with_index: bool) -> tuple[str, list[Any]]:
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
        matching, words = search_clause(query.text, with_index)
        clauses.append(matching)
        params.extend(words)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def parse_since(text: str, now: datetime | None = None, option: str = "--since") -> datetime:
    """Read `--since`: an age (30m, 2h, 3d, 1w) or an ISO date or time (local unless zoned);
    `option` is the flag its errors name (--older-than reads the same)."""
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
        what = "an age that long reaches before the year 1" if age else SINCE_RANGE
        raise ConfigError(f"{option} {text!r}: {what}") from None


RESCUED = ("ok", "partial")  # a re-routed task's final statuses that count as rescued


@dataclass(frozen=True)
class GroupStats:
    """Figures for one card or one model over the matching runs."""

    name: str | None
    runs: int
    statuses: Mapping[str, int]
    ghost_calls: int
    ghost_rate: float | None  # ghost calls / tool calls attempted
    repair_rate: float | None  # finished runs that needed a repair / finished runs
    mean_tokens_in: float | None
    mean_tokens_out: float | None
    mean_caller_tokens: float | None
    compression: float | None  # caller tokens / tokens the agent read
    wall_p50: float | None
    wall_p95: float | None

    def to_json(self) -> dict[str, Any]:
        """Return the figures as a JSON object."""
        return {**asdict(self), "statuses": dict(self.statuses)}


@dataclass(frozen=True)
class Reroutes:
    """Delegated runs re-routed after a refusal, and how many the next card rescued."""

    rerouted: int = 0  # runs whose Digest names an earlier attempt that was refused
    rescued: int = 0  # of those, the runs that ended ok or partial


@dataclass(frozen=True)
class RunStats:
    """`tiny runs stats`: every matching run, per card and per model, and the re-routes."""

    total: GroupStats
    by_card: tuple[GroupStats, ...]
    by_model: tuple[GroupStats, ...]
    reroutes: Reroutes = field(default_factory=Reroutes)

    def to_json(self) -> dict[str, Any]:
        """Return the statistics as a JSON object."""
        return {
            "total": self.total.to_json(),
            "by_card": [g.to_json() for g in self.by_card],
            "by_model": [g.to_json() for g in self.by_model],
            "reroutes": asdict(self.reroutes),
        }


def run_stats(found: Sequence[RunSummary], reroutes: Reroutes | None = None) -> RunStats:
    """Return the figures of these runs, in all, per card and per model, with `reroutes`."""
    return RunStats(
        _group(None, found),
        tuple(_group(name, rows) for name, rows in _by(found, lambda r: r.card)),
        tuple(_group(name, rows) for name, rows in _by(found, lambda r: r.model)),
        reroutes or Reroutes(),
    )


def count_reroutes(rows: Iterable[tuple[str, str | None]]) -> Reroutes:
    """Count (status, stored Digest JSON) rows re-routed after a refusal, and those rescued:
    by the Digest's `attempts` statuses, never by its text."""
    rerouted = rescued = 0
    for status, stored in rows:
        try:
            attempts = json.loads(stored or "null").get("attempts")
        except (ValueError, AttributeError):
            continue
        if not isinstance(attempts, list):
            continue
        if any(isinstance(a, dict) and a.get("status") == "refused" for a in attempts):
            rerouted += 1
            rescued += status in RESCUED
    return Reroutes(rerouted, rescued)


def _by(
    runs: Sequence[RunSummary], key: Callable[[RunSummary], str | None]
) -> list[tuple[str | None, list[RunSummary]]]:
    """Group runs by `key`, the largest group first."""
    groups: dict[str | None, list[RunSummary]] = {}
    for run in runs:
        groups.setdefault(key(run), []).append(run)
    return sorted(groups.items(), key=lambda g: (-len(g[1]), g[0] or ""))


def _group(name: str | None, runs: Sequence[RunSummary]) -> GroupStats:
    """Compute one group's figures; means over runs that finished."""
    done = [r for r in runs if r.status not in UNFINISHED]
    statuses = dict(Counter(r.status for r in runs))
    ghosts, calls = sum(r.ghost_calls for r in runs), sum(r.tool_calls for r in runs)
    read = [r for r in done if r.tokens_in > 0]
    walls = sorted(r.wall_seconds for r in done if r.wall_seconds is not None)
    return GroupStats(
        name,
        len(runs),
        statuses,
        ghosts,
        _ratio(ghosts, calls),
        _ratio(sum(bool(r.repaired) for r in done), len(done)),
        _mean([r.tokens_in for r in done]),
        _mean([r.tokens_out for r in done]),
        _mean([r.caller_tokens for r in done]),
        _ratio(sum(r.caller_tokens for r in read), sum(r.tokens_in for r in read)),
        percentile(walls, 50),
        percentile(walls, 95),
    )


def _ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def percentile(ordered: Sequence[float], p: float) -> float | None:
    """Return the nearest-rank `p`th percentile of sorted values (None when there are none)."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]
