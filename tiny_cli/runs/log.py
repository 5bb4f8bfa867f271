"""The run log: every invocation recorded in SQLite under the data directory.

One row per run: inserted as `running` (with the process id) by the writer's first pass after
the run starts, completed when it finishes; a run over before that pass is inserted once,
whole. A row left `running` by a process that is gone (killed, crashed) becomes `interrupted`
whenever the log is opened. Schema changes are numbered migrations (`PRAGMA user_version`).
Observers are called on the runner's threads, several at once under the bench; one writer
thread does every write, under the lock readers take too, each pass in one transaction. API
keys and Authorization headers are scrubbed from every text before it is stored. JSON columns
are compact ASCII (other characters as \\u escapes, which SQLite's json functions decode).
"""

from __future__ import annotations

import functools
import json
import math
import os
import queue
import re
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tiny_cli.errors import ConfigError

if TYPE_CHECKING:  # the events bring the Digest (jsonschema, yaml): `tiny runs` needs neither
    from tiny_cli.events import Event, Finished, Observer, RunStarted, ToolCalled, ToolFinished

DB_NAME = "runs.sqlite3"
BUSY_SECONDS = 30.0  # wait this long for another tiny process's write (a bench next door)
# How tiny_cli.prompts.repair_message begins: a transcript holding it needed a repair.
REPAIR_MARK = "Your answer cannot be used"
SECRET_ENV = ("TINY_API_KEY", "OPENAI_API_KEY")  # where settings read the key from
MIN_SECRET_CHARS = 6  # a shorter "key" would scrub ordinary words out of transcripts
REDACTED = "[redacted]"
UNFINISHED = ("running", "interrupted")  # no Digest: left out of the means in `stats`
DEFAULT_LIMIT = 20
FLUSH_SECONDS = 0.1  # the writer's tick: a process killed this soon after an event loses it
INTERRUPTED_WAIT = 1.0  # seconds Ctrl-C waits for queued writes (the sweep covers the rest)
SQLITE_MAX_INT = 2**63 - 1  # a larger id or --limit cannot go into a query
NO_LOG_HINT = " (--no-log or TINY_NO_LOG=1 runs without the log)"
GONE = "the process ended before the run finished"
LEFT = "the command ended before the run finished"
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_AGE_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# keys of a JSON object whose string values are never stored
SECRET_KEYS = frozenset(
    [
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api_key",
        "api-key",
        "apikey",
        "password",
    ]
)
# Built once (dumps(default=) is not); ASCII and compact: less to scan, bind and store
_JSON = json.JSONEncoder(default=str, separators=(",", ":"))
_SECRET_TEXT = re.compile(
    # header-like "Authorization: Bearer X", "api_key=X", "x-api-key: X": the name is kept.
    # ASCII case folding only, as _may_hold_secret's look at bytes.lower() sees it
    r"(?ai)\b(?P<name>(?:proxy-)?authorization|x-api-key|api[-_]?key)"
    r"(?P<sep>['\"]?\s*[:=]\s*['\"]?)(?:(?:bearer|basic|token)\s+)?[^\s'\",;\\]+"
    r"|\b(?P<scheme>bearer)(?P<space>\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|\bsk-[A-Za-z0-9_-]{16,}"  # OpenAI-style keys wherever they appear
)


# --- schema ---------------------------------------------------------------------------------

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


# Applied in order; the database's user_version is how many have been applied.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2, _v3)
SCHEMA_VERSION = len(MIGRATIONS)


def repaired(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Tell whether a transcript holds the runner's repair request (a second chance)."""
    return any(
        m.get("role") == "user" and REPAIR_MARK in str(m.get("content") or "") for m in messages
    )


# --- records --------------------------------------------------------------------------------


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


def _summary(row: Sequence[Any]) -> RunSummary:
    values = dict(zip(SUMMARY_COLUMNS, row, strict=True))
    return RunSummary(**{**values, "repaired": bool(values["repaired"])})


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
    """Which runs to read: equal card, status and model, started since; the newest `limit`."""

    card: str | None = None
    status: str | None = None
    model: str | None = None
    since: datetime | None = None
    limit: int | None = DEFAULT_LIMIT


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
class RunStats:
    """`tiny runs stats`: every matching run, per card and per model."""

    total: GroupStats
    by_card: tuple[GroupStats, ...]
    by_model: tuple[GroupStats, ...]

    def to_json(self) -> dict[str, Any]:
        """Return the statistics as a JSON object."""
        return {
            "total": self.total.to_json(),
            "by_card": [g.to_json() for g in self.by_card],
            "by_model": [g.to_json() for g in self.by_model],
        }


# --- the log --------------------------------------------------------------------------------


class RunLog:
    """The SQLite run log under TINY_HOME; safe to share between threads.

    An observer builds a finished run's row (scrubbed, encoded) and queues it; one writer
    thread commits the rows in order, so the agent loop never waits on the disk, nor on
    another tiny process holding the database's write lock. The writer wakes every
    FLUSH_SECONDS and writes in one transaction what is queued and a `running` row for each
    run started since. Waking it sooner (per event, per finished run, before each model call)
    cost a scripted run 5-10 % more: the threads' hand-offs of the GIL. Reads wait for a
    writer pass first; `close` drains the queue.
    """

    def __init__(self, db: sqlite3.Connection, path: Path, secrets: Iterable[str]) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = db
        self._lock = threading.Lock()  # one connection: the writer and the readers take turns
        self._scrub = Scrubber(secrets)
        self._open_rows: set[int] = set()  # written as running, not finished yet
        self._started: set[_Recorder] = set()  # running, no row written yet
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._wake = threading.Event()  # set by flush and close: write now, not at the tick
        self._failure: Exception | None = None
        self._closing = False
        self._writer = threading.Thread(target=self._write_all, name="tiny-run-log", daemon=True)
        self._writer.start()

    @classmethod
    def open(cls, home: Path, secrets: Iterable[str] | None = None) -> RunLog:
        """Open (creating or upgrading) the run log in `home`; mark dead runs interrupted.

        `secrets` are strings never to store; by default the API keys in the environment.
        """
        path = home / DB_NAME
        db = _connect(path)
        try:
            _migrate(db, path)
        except BaseException:
            db.close()
            raise
        log = cls(db, path, _env_secrets() if secrets is None else secrets)
        try:
            log.sweep()
        except BaseException:
            log.close()
            raise
        return log

    def observer(self, command: str, run: str, endpoint: str) -> Observer:
        """Return the observer that records one run of `command` (`run` labels it)."""
        from tiny_cli.events import Finished, RunStarted, ToolCalled, ToolFinished

        recorder = _Recorder(self, command, run, endpoint)
        handlers: dict[type, Callable[[Any], None]] = {
            RunStarted: recorder.started,
            ToolCalled: recorder.called.append,
            ToolFinished: recorder.answered.append,
            Finished: recorder.finished,
        }

        def notify(event: Event) -> None:
            handler = handlers.get(type(event))
            if handler is not None:
                handler(event)

        return notify

    def sweep(self) -> int:
        """Mark `running` rows whose process is gone as `interrupted`; return how many."""
        me = os.getpid()
        with self._reading() as db:
            rows = db.execute("SELECT id, pid FROM runs WHERE status = 'running'").fetchall()
            dead = [(run_id,) for run_id, pid in rows if pid != me and not _alive(pid)]
            if dead:
                with _transaction(db):
                    db.executemany(_INTERRUPT, [(_now(), GONE, *d) for d in dead])
        return len(dead)

    def runs(self, query: RunQuery = RunQuery()) -> list[RunSummary]:
        """Return the matching runs, newest first."""
        where, params = _where(query)
        sql = f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM runs{where} ORDER BY id DESC"
        if query.limit is not None:
            sql, params = sql + " LIMIT ?", [*params, min(query.limit, SQLITE_MAX_INT)]
        with self._reading() as db:
            rows = db.execute(sql, params).fetchall()
        return [_summary(row) for row in rows]

    def run(self, run_id: int) -> RunRecord:
        """Return one run in full; ConfigError when the log has no such run."""
        sql = f"SELECT {', '.join(SUMMARY_COLUMNS)}, routing, digest, transcript, calls FROM runs"
        row = None
        with self._reading() as db:
            if abs(run_id) <= SQLITE_MAX_INT:  # a larger number is no id, and no query takes it
                row = db.execute(f"{sql} WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise ConfigError(f"no run {run_id} in the run log {self.path}: `tiny runs` lists them")
        size = len(SUMMARY_COLUMNS)
        try:
            routing, digest, transcript, calls = (json.loads(v) if v else None for v in row[size:])
        except ValueError as exc:  # edited or damaged by hand: say so, no traceback
            raise ConfigError(f"{self.path}: run {run_id} is damaged: {exc}") from None
        return RunRecord(_summary(row[:size]), routing, digest, transcript or [], calls or [])

    def stats(self, query: RunQuery = RunQuery(limit=None)) -> RunStats:
        """Return the figures of every matching run, in all, per card and per model."""
        found = self.runs(query)
        return RunStats(
            _group(None, found),
            tuple(_group(name, rows) for name, rows in _by(found, lambda r: r.card)),
            tuple(_group(name, rows) for name, rows in _by(found, lambda r: r.model)),
        )

    def flush(self) -> None:
        """Wait until every run so far has its row committed, finished or running."""
        if self._closing:
            return  # the writer is gone or going: close() waited for it
        self._jobs.put(_no_job)  # a pass of the writer, which also writes the running rows
        self._wake.set()
        self._jobs.join()

    def close(self, wait: float | None = None) -> None:
        """Write what is queued, mark runs that started but never finished as interrupted,
        and close the database; raise if a write failed. `wait` bounds the wait in seconds."""
        if self._closing:
            return
        self._closing = True
        self._jobs.put(None)
        self._wake.set()
        self._writer.join(wait)
        if self._writer.is_alive():
            return  # stuck on another process's lock: the sweep will mark these runs later
        with self._lock:
            db, self._db = self._db, None
            if db is not None:
                _interrupt_left(db, self._open_rows)
                db.close()
        self._raise_failure()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Ctrl-C ends the command at once: what is still queued is not worth waiting for
        self.close(wait=INTERRUPTED_WAIT if kind is KeyboardInterrupt else None)

    # --- the writer ---------------------------------------------------------------------------

    def _submit(self, job: _Job) -> None:
        """Queue a write; dropped once closing (Ctrl-C leaves bench runs behind, reporting)."""
        if not self._closing:
            self._jobs.put(job)

    def _write_all(self) -> None:
        """The writer thread: at each tick (or when asked), commit what is queued, in order."""
        while True:
            self._wake.wait(FLUSH_SECONDS)
            self._wake.clear()
            batch = _drain(self._jobs)
            try:
                self._write([job for job in batch if job is not None])
            finally:
                for _ in batch:
                    self._jobs.task_done()
            if None in batch:
                return

    def _write(self, batch: Sequence[_Job]) -> None:
        """Insert a `running` row for each run started since the last pass, then run the
        jobs, in one transaction: all of it is committed, or none (the failure is kept)."""
        started = list(self._started)  # one call in C: the runners' threads add and discard
        if not batch and not started:
            return
        try:
            with self._lock:
                if self._db is not None:
                    with _transaction(self._db) as db:
                        for recorder in started:
                            recorder.insert_running(db)
                        for job in batch:
                            job(db)
        except Exception as exc:  # kept for close(): a write that failed must not end the run
            self._failure = self._failure or exc

    def _insert(
        self, db: sqlite3.Connection, names: Sequence[str], values: Sequence[Any], running: bool
    ) -> int:
        """Insert one row, scrubbed and encoded (on the writer thread); return its id."""
        run_id = db.execute(_insert_sql(tuple(names)), values).lastrowid
        assert run_id is not None
        if running:
            self._open_rows.add(run_id)
        return run_id

    def _complete(
        self, db: sqlite3.Connection, run_id: int, names: Sequence[str], values: Sequence[Any]
    ) -> None:
        """Fill in a started row with the whole finished run (on the writer thread)."""
        sets = ", ".join(f"{name} = ?" for name in names)
        db.execute(f"UPDATE runs SET {sets} WHERE id = ?", [*values, run_id])
        self._open_rows.discard(run_id)

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, once every queued write is in; ConfigError when closed or when
        SQLite fails (a damaged file, a lock held too long): one line, not a traceback."""
        if self._closing:
            raise ConfigError(f"the run log {self.path} is closed")
        self.flush()
        with self._lock:
            if self._db is None:
                raise ConfigError(f"the run log {self.path} is closed")
            try:
                yield self._db
            except sqlite3.Error as exc:
                raise ConfigError(
                    f"{self.path}: cannot read the run log: {exc}{NO_LOG_HINT}"
                ) from exc

    def _raise_failure(self) -> None:
        failure, self._failure = self._failure, None
        if isinstance(failure, sqlite3.Error):
            raise ConfigError(
                f"{self.path}: could not record a run: {failure}{NO_LOG_HINT}"
            ) from failure
        if failure is not None:
            raise failure  # a bug in tiny, not the user's: its traceback is wanted


_Job = Callable[[sqlite3.Connection], None]


def _no_job(db: sqlite3.Connection) -> None:
    """Nothing to write: queued by flush to make the writer pass."""


_PLAIN = (str, int, float, type(None))  # column values stored as they are; the rest as JSON


def _drain(jobs: queue.Queue[_Job | None]) -> list[_Job | None]:
    """Take everything queued so far, up to and including the closing None."""
    batch: list[_Job | None] = []
    while True:
        try:
            job = jobs.get_nowait()
        except queue.Empty:
            return batch
        batch.append(job)
        if job is None:
            return batch


@functools.lru_cache(maxsize=8)  # a row has one of three column sets
def _insert_sql(names: tuple[str, ...]) -> str:
    return f"INSERT INTO runs ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"


_INTERRUPT = (
    "UPDATE runs SET status = 'interrupted', ended_at = ?, reason = ? "
    "WHERE id = ? AND status = 'running'"
)


def _interrupt_left(db: sqlite3.Connection, rows: set[int]) -> None:
    """Mark runs this process started and never finished as interrupted."""
    if rows:
        with _transaction(db):
            db.executemany(_INTERRUPT, [(_now(), LEFT, r) for r in sorted(rows)])


class _Recorder:
    """Record one run: a `running` row at RunStarted, filled in at Finished.

    On the runner's thread it keeps the events; at Finished it builds the row as one tuple,
    scrubs and encodes it, and lets the events go, so only that row waits for the writer,
    which runs just the SQL (SQLite releases the GIL while it works).
    """

    __slots__ = (
        *("answered", "began", "called", "command", "endpoint", "label", "log", "row"),
        *("start", "whole"),
    )

    def __init__(self, log: RunLog, command: str, label: str, endpoint: str) -> None:
        self.log, self.command, self.label, self.endpoint = log, command, label, endpoint
        self.row: int | None = None  # set by the writer, before it runs the Finished job
        self.began: float | None = None  # time.time() at RunStarted
        self.start: RunStarted | None = None  # dropped once the row is whole
        self.called: list[ToolCalled] = []
        self.answered: list[ToolFinished] = []
        self.whole: tuple[Any, ...] | None = None  # the FINISHED columns, ready to store

    def started(self, event: RunStarted) -> None:
        """Have the row written as `running` at the writer's next pass, unless finished by
        then: a run shorter than FLUSH_SECONDS is written once, whole."""
        self.began, self.start = time.time(), event
        self.log._started.add(self)

    def finished(self, event: Finished) -> None:
        """Queue the finished row: inserted whole, or filling in the running one."""
        row = self._finished_row(event, time.time())
        self.whole = tuple(self.log._scrub.columns(row))
        self.log._started.discard(self)  # after `whole`, then the events go: see below
        self.start, self.called, self.answered = None, [], []
        self.log._submit(self._store)

    def insert_running(self, db: sqlite3.Connection) -> None:
        """Insert the row as `running` (on the writer thread), unless the run is over."""
        start = self.start  # read before `whole`: finished() sets `whole`, then drops this
        self.log._started.discard(self)
        if self.whole is not None or start is None or self.began is None:
            return  # finished meanwhile: its queued row goes in whole
        row = (
            *(_stamp(self.began), self.command, self.label, start.card_id, start.model),
            *(self.endpoint, start.goal, start.messages, start.tool_mode, os.getpid()),
            *("running", "[]"),
        )
        self.row = self.log._insert(db, STARTED, self.log._scrub.columns(row), running=True)

    def _finished_row(self, event: Finished, at: float) -> tuple[Any, ...]:
        """Return the FINISHED columns' values: a tuple, no dicts (this runs for every run)."""
        start, digest, cost = self.start, event.digest, event.digest.cost
        messages = event.messages or (start.messages if start else ())
        routing = asdict(digest.routing) if digest.routing is not None else None
        return (
            *(_stamp(self.began or at), _stamp(at), self.command, self.label),
            start.card_id if start else digest.agent_id,
            start.model if start else None,
            *(self.endpoint, start.goal if start else "", routing, digest.status, digest.reason),
            *(digest.to_json(), messages, _calls(self.called, self.answered), cost.tokens_in),
            *(cost.tokens_out, cost.tool_calls, cost.ghost_calls, cost.recovered_calls),
            *(cost.caller_tokens, cost.wall_seconds, start.tool_mode if start else None),
            *(os.getpid(), int(repaired(messages))),
        )

    def _store(self, db: sqlite3.Connection) -> None:
        assert self.whole is not None
        if self.row is None:  # finished before its running row was written, or never started
            self.row = self.log._insert(db, FINISHED, self.whole, running=False)
        else:  # written as running: fill it in
            self.log._complete(db, self.row, FINISHED, self.whole)


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


def _calls(called: Sequence[ToolCalled], answered: Sequence[ToolFinished]) -> list[dict[str, Any]]:
    """Return each tool call with its outcome, time and result size (None: never answered)."""
    calls: list[dict[str, Any]] = []
    waiting: dict[str, list[dict[str, Any]]] = {}  # a model may reuse an id: first in, first out
    for event in called:
        call: dict[str, Any] = {"id": event.call_id, "name": event.name}
        call |= {"arguments": event.arguments}
        call |= {"recovered": event.recovered, "outcome": None, "seconds": None}
        calls.append(call | {"result_chars": 0})
        waiting.setdefault(event.call_id, []).append(calls[-1])
    for answer in answered:  # each after its call: the runner answers calls in order
        if waiting.get(answer.call_id):
            call = waiting[answer.call_id].pop(0)
            call.update(outcome=answer.outcome, seconds=round(answer.seconds, 3))
            call["result_chars"] = len(answer.result)
    return calls


# --- secrets --------------------------------------------------------------------------------


class Scrubber:
    """Replace known secrets and anything shaped like a key or an Authorization header."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len)[::-1]
        # each secret as it reads inside JSON text (quotes and backslashes escaped)
        self._encoded = [_JSON.encode(s)[1:-1] for s in self.secrets]

    def text(self, text: str) -> str:
        """Return `text` with every secret replaced by [redacted]."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        if _may_hold_secret(_lowered(text)):  # a pass in C spares most texts the slow pattern
            text = _SECRET_TEXT.sub(_redact, text)
        return text

    def tree(self, value: Any) -> Any:
        """Scrub every string in a JSON-like value; a key named like a secret hides its value."""
        kind = type(value)  # exact types first: this runs for every value of a transcript
        if kind is str:
            return self.text(value)
        if kind is dict or (kind is not list and isinstance(value, Mapping)):
            return {k: self._entry(k, v) for k, v in value.items()}
        if kind is list or kind is tuple:
            return [self.tree(v) for v in value]
        return self.text(value) if isinstance(value, str) else value

    def columns(self, values: Iterable[Any]) -> list[Any]:
        """Return a row's column values to store; one look in C spares a clean row the walk."""
        raw = list(values)
        encoded = [v if type(v) in _PLAIN else _JSON.encode(v) for v in raw]
        if not self._suspect("\n".join(v for v in encoded if type(v) is str)):
            return encoded
        return [self.column(v) for v in raw]

    def column(self, value: Any) -> Any:
        """Return a column value to store: JSON for lists and mappings, scrubbed first."""
        if isinstance(value, Mapping | list | tuple):
            encoded = _JSON.encode(value)  # one pass in C tells whether any string needs a look
            if not self._suspect(encoded):
                return encoded
            # scrubbed before encoding: a replacement can never split a JSON escape
            return _JSON.encode(self.tree(value))
        return self.tree(value)

    def _suspect(self, encoded: str) -> bool:
        """Tell whether JSON text may hold a secret, a key-like token or a secret-named key."""
        low = _lowered(encoded)
        return (
            _may_hold_secret(low) or b"password" in low or any(e in encoded for e in self._encoded)
        )

    def _entry(self, key: Any, value: Any) -> Any:
        if type(value) is str and str(key).lower() in SECRET_KEYS:
            return REDACTED
        return self.tree(value)


def _lowered(text: str) -> bytes:
    """Return the text as UTF-8 with ASCII letters lowered: bytes.lower and `in` on bytes
    run in C several times faster than on a str holding one non-Latin-1 character."""
    return text.encode("utf-8", "surrogatepass").lower()


def _may_hold_secret(low: bytes) -> bool:
    return b"authorization" in low or b"key" in low or b"bearer" in low or b"sk-" in low


def _redact(found: re.Match[str]) -> str:
    if found.group("name"):
        return f"{found.group('name')}{found.group('sep')}{REDACTED}"
    if found.group("scheme"):
        return f"{found.group('scheme')}{found.group('space')}{REDACTED}"
    return REDACTED


def _env_secrets() -> list[str]:
    """Return the API keys settings would read from the environment."""
    return [os.environ[name] for name in SECRET_ENV if os.environ.get(name)]


# --- database -------------------------------------------------------------------------------


def _connect(path: Path) -> sqlite3.Connection:
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


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    """Apply every migration the database lacks, in order, in one transaction."""
    try:
        with _transaction(db):
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise ConfigError(
                    f"{path}: the run log has schema v{version}, this tiny knows up to "
                    f"v{SCHEMA_VERSION}: upgrade tiny{NO_LOG_HINT}"
                )
            for number, migration in enumerate(MIGRATIONS[version:], start=version + 1):
                migration(db)
                db.execute(f"PRAGMA user_version = {number}")
    except sqlite3.Error as exc:
        raise ConfigError(f"{path}: cannot upgrade the run log: {exc}{NO_LOG_HINT}") from exc


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE … COMMIT, rolled back on any error: never half a write."""
    db.execute("BEGIN IMMEDIATE")  # take the write lock now, not on the first write
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _alive(pid: int) -> bool:
    """Tell whether process `pid` exists (a zombie counts until its parent reaps it)."""
    if sys.platform == "win32":
        return True  # os.kill(pid, 0) would end the process there: never sweep on Windows
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _where(query: RunQuery) -> tuple[str, list[Any]]:
    """Return the WHERE clause and its parameters for a query's filters."""
    clauses, params = [], []
    for column, value in (("card", query.card), ("status", query.status), ("model", query.model)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if query.since is not None:
        clauses.append("started_at >= ?")
        params.append(_iso(query.since))
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _now() -> str:
    return _iso(datetime.now(UTC))


_last_second: tuple[int, str] = (-1, "")  # the run log stamps every run twice: reuse the date


def _stamp(seconds: float) -> str:
    """Format a time.time() as stored, as _iso would."""
    global _last_second
    whole, milliseconds = divmod(int(seconds * 1000), 1000)
    second, text = _last_second
    if whole != second:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _last_second = (whole, text)  # one tuple: a thread reads the old pair or the new one
    return f"{text}.{milliseconds:03d}+00:00"


def _iso(moment: datetime) -> str:
    """Format as stored: UTC, milliseconds, one fixed width so text order is time order."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """Read `--since`: an age (30m, 2h, 3d, 1w) or an ISO date or time (local unless zoned)."""
    now = now or datetime.now(UTC)
    age = _AGE.match(text)
    if not age:
        try:
            moment = datetime.fromisoformat(text.strip())
        except ValueError:
            raise ConfigError(
                f"--since {text!r}: use an ISO date or time (2024-05-01, 2024-05-01T14:00) "
                "or an age (30m, 2h, 3d, 1w)"
            ) from None
    try:
        if age:
            return now - timedelta(**{_AGE_UNITS[age.group(2)]: float(age.group(1))})
        return moment.astimezone(UTC)  # a naive time is taken as local, as a person means it
    except (OverflowError, ValueError):  # 99999999999d, 0001-01-01 or 9999-12-31 made UTC
        raise ConfigError(f"--since {text!r}: out of the calendar's range") from None


# --- statistics -----------------------------------------------------------------------------


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
    statuses: dict[str, int] = {}
    for r in runs:
        statuses[r.status] = statuses.get(r.status, 0) + 1
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
