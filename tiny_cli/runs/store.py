"""The SQLite file and its tables: opening it (owner-only, WAL), one transaction at a time, the
runs table's first schema, the column sets rows are written with, stored times, and the
numbered schema migrations with `PRAGMA user_version` (how many a database has had).

A schema change is a new migration at the end of MIGRATIONS, never an edit of an old one:
a database made by any earlier tiny upgrades by running the ones it lacks, in order.

Recording runs (the last section): the observer's Recorder builds each run's one row on the
runner's threads (several at once under the bench); one Writer thread does every write.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tiny_cli.errors import ConfigError
from tiny_cli.events import (
    Aborted,
    Event,
    Finished,
    GhostCall,
    ModelReplied,
    Observer,
    Routed,
    RunStarted,
    ToolCalled,
    ToolFinished,
    ignore,
)
from tiny_cli.secrets import Scrubber

DB_NAME = "runs.sqlite3"
BUSY_SECONDS = 30.0  # wait this long for another tiny process's write (a bench next door)
NO_LOG_HINT = " (--no-log or TINY_NO_LOG=1 runs without the log)"


def connect(path: Path, hint: str) -> sqlite3.Connection:
    """Open the file (only its owner may read it: transcripts hold what agents read) in WAL;
    `hint` ends the error (how to run without the log: only for a command that writes it)."""
    db = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
        db = sqlite3.connect(
            path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False
        )
        db.execute("PRAGMA journal_mode = WAL")  # fails for a file that is not a database
        db.execute("PRAGMA synchronous = NORMAL")  # WAL: a killed process loses no commit
    except (OSError, sqlite3.Error) as exc:
        if db is not None:
            db.close()
        raise ConfigError(f"{path}: cannot open the run log: {exc}{hint}") from exc
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
SCHEMA_V1 = """CREATE TABLE runs (
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
    )"""

# The search index (v5). runs_text: per run, the text `tiny runs search` finds it by; runs_fts
# indexes it (FTS5), brought up to date by each search. Never edit: a change is a new migration.
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
    *("tool_mode", "pid", "process", "status", "calls"),
)
FINISHED = (
    *("started_at", "ended_at", "command", "label", "card", "model", "endpoint", "goal"),
    *("routing", "status", "reason", "digest", "transcript", "calls", "tokens_in"),
    *("tokens_out", "tool_calls", "ghost_calls", "recovered_calls", "caller_tokens"),
    *("wall_seconds", "tool_mode", "pid", "process", "repaired"),
)

# left empty ("[]") when the disk will not take a row whole: the big columns
SLIMMED = ("transcript", "calls")
DISK_REFUSED = (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL)  # primary result codes

# a row no Finished fills in (Ctrl-C, an error): how it ended, and what it did until then,
# its last card included (a re-route ends on another card than the row started with)
ENDED = (
    *("ended_at", "status", "reason", "card", "model", "tool_mode", "transcript", "calls"),
    "routing",
    *("tokens_in", "tokens_out", "tool_calls", "ghost_calls", "recovered_calls"),
    *("wall_seconds", "repaired"),
)
INTERRUPT = (
    "UPDATE runs SET status = 'interrupted', ended_at = ?, reason = ? "
    "WHERE id = ? AND status = 'running'"
)


def repaired(messages: Sequence[object]) -> bool:
    """Tell whether a transcript holds the runner's repair request (a second chance)."""
    # it begins the message: a task or a tool result that quotes it is no repair request
    return any(
        isinstance(m, Mapping)
        and m.get("role") == "user"
        and str(m.get("content") or "").startswith(REPAIR_MARK)
        for m in messages
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
    db.execute(SCHEMA_V1)


def _v2(db: sqlite3.Connection) -> None:
    """Add `repaired`, so `stats` need not read every transcript; fill it for old rows."""
    db.execute("ALTER TABLE runs ADD COLUMN repaired INTEGER NOT NULL DEFAULT 0")
    rows = db.execute("SELECT id, transcript FROM runs").fetchall()
    for run_id, transcript in rows:
        try:  # a damaged transcript marks no repair and stops no upgrade; the row stays
            messages = json.loads(transcript or "[]")
            found = isinstance(messages, list) and repaired(messages)
        except (ValueError, RecursionError):
            found = False
        if found:
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
    """Add the text `tiny runs search` reads, and its FTS5 index where `fts5` says there is one."""
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


def _v6(db: sqlite3.Connection) -> None:
    """Add `process`: which process holds the row's pid (see this_process); NULL in old rows."""
    db.execute("ALTER TABLE runs ADD COLUMN process TEXT")


# Applied in order; the database's user_version is how many have been applied.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2, _v3, _v4, _v5, _v6)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: sqlite3.Connection, path: Path, fts5: Probe | None, hint: str) -> None:
    """Apply every migration the database lacks, in order, in one transaction; `fts5` says
    whether this SQLite has FTS5 (None: fts5_available asks it); `hint` as for connect."""
    steps = [functools.partial(m, fts5=fts5) if m is _v5 else m for m in MIGRATIONS]
    try:
        with transaction(db):
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise ConfigError(
                    f"{path}: the run log has schema v{version}, this tiny knows up to "
                    f"v{SCHEMA_VERSION}: upgrade tiny{hint}"
                )
            for number, migration in enumerate(steps[version:], start=version + 1):
                migration(db)
                db.execute(f"PRAGMA user_version = {number}")
    except sqlite3.Error as exc:
        raise ConfigError(f"{path}: cannot upgrade the run log: {exc}{hint}") from exc


# --- which process a row's pid names -------------------------------------------------------
# A pid names one process only within one boot and one PID namespace: the pid of a run killed
# in a container, or before a reboot, may be held by another process now. So a row keeps, as
# `process`, the boot's id, the PID namespace and the process's start time (Linux; elsewhere
# NULL, and the pid alone tells, as before v6).

BOOT_ID = "/proc/sys/kernel/random/boot_id"


def this_process() -> str | None:
    """Return this process's identity as a row keeps it; None where /proc cannot tell."""
    return _identity(os.getpid())


@functools.lru_cache(maxsize=4)  # keyed by pid: a forked child is another process
def _identity(pid: int) -> str | None:
    where, start = boot_and_namespace(), process_started(pid)
    return None if where is None or start is None else " ".join((*where, start))


def boot_and_namespace() -> tuple[str, str] | None:
    """Return this boot's id and this process's PID namespace; None without /proc."""
    try:
        with open(BOOT_ID, encoding="ascii") as file:
            boot = file.read().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except (OSError, ValueError):
        return None
    return (boot, str(namespace)) if boot and " " not in boot else None


def process_started(pid: int) -> str | None:
    """Return when process `pid` started (clock ticks since boot); None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()  # the name may hold ')' and spaces
        return fields[19].decode("ascii")  # field 22: fields[0] is field 3
    except (OSError, IndexError, ValueError):
        return None


# --- recording runs -----------------------------------------------------------------------

FLUSH_SECONDS = 0.1  # the writer's tick: a process killed this soon after an event loses it
LEFT = "the command ended before the run finished"

Job = Callable[[sqlite3.Connection, bool], None]  # the bool: slim, the SLIMMED columns left empty
# The most of one call's arguments the log keeps whole: the runner refuses longer ones (the
# same number as tiny_cli.agent.calls.MAX_ARGUMENT_CHARS; a wing imports no other wing), and
# of those the log keeps the first ARGUMENTS_PREVIEW_CHARS and their size, so a model's 12 MB
# of arguments make no 12 MB row.
MAX_LOGGED_ARGUMENT_CHARS = 100_000
ARGUMENTS_PREVIEW_CHARS = 1_000  # enough to see what the model was writing


def observer(writer: Writer, command: str, run: str, endpoint: str, goal: str) -> Observer:
    """Return the observer that records one run of `command` (`run` labels it, `goal` its task)."""
    recorder = Recorder(writer, command, run, endpoint, goal)
    handlers: dict[type, Callable[[Any], None]] = {
        Routed: recorder.routed,
        RunStarted: recorder.started,
        ModelReplied: recorder.replied,
        ToolCalled: recorder.called.append,
        ToolFinished: recorder.answered.append,
        GhostCall: recorder.ghosted,
        Finished: recorder.finished,
        Aborted: recorder.aborted,
    }

    def notify(event: Event) -> None:
        """Hand the event to its handler; the other events are not recorded."""
        handlers.get(type(event), ignore)(event)

    return notify


class Recorder:
    """Record one run: a `running` row at RunStarted, filled in at Finished.

    On the runner's thread it keeps the events; at Finished it builds the row as one tuple,
    scrubs and encodes it, and lets the events go, so only that row waits for the writer,
    which runs just the SQL (SQLite releases the GIL while it works). It also tallies what
    the run spent, across a re-route's cards: a run no Finished ends is written with that.
    """

    __slots__ = (
        *("answered", "began", "called", "command", "endpoint", "ghosts", "goal", "label"),
        *("route", "row", "start", "starts", "tokens_in", "tokens_out", "whole", "writer"),
    )

    def __init__(self, writer: Writer, command: str, label: str, endpoint: str, goal: str) -> None:
        self.writer, self.command, self.label, self.endpoint = writer, command, label, endpoint
        self.goal = goal  # the task as the face knows it: an abstain has no RunStarted
        self.row: int | None = None  # set by the writer, before it runs the Finished job
        self.began: float | None = None  # time.time() at RunStarted
        self.start: RunStarted | None = None  # the latest card's; dropped once the row is whole
        self.starts: dict[str, RunStarted] = {}  # each card's: a re-route's refusal may stand
        self.route: Routed | None = None  # delegate's routing decision, before any card ran
        self.called: list[ToolCalled] = []
        self.answered: list[ToolFinished] = []
        self.tokens_in = self.tokens_out = self.ghosts = 0  # every card's, for an ended row
        self.whole: tuple[Any, ...] | None = None  # the FINISHED columns, ready to store

    def routed(self, event: Routed) -> None:
        """Keep the routing decision: the row records it, however the run ends."""
        self.route = event

    def started(self, event: RunStarted) -> None:
        """Have the row written as `running` at the writer's next pass, unless finished by then
        (a re-route's second RunStarted keeps the row and its start time)."""
        self.began, self.start = self.began or time.time(), event
        self.starts[event.card_id] = event
        self.writer.started.add(self)

    def replied(self, event: ModelReplied) -> None:
        """Count the tokens of one model reply."""
        self.tokens_in += event.tokens_in
        self.tokens_out += event.tokens_out

    def ghosted(self, event: GhostCall) -> None:
        """Count one ghost call."""
        self.ghosts += 1

    def finished(self, event: Finished) -> None:
        """Queue the finished row: inserted whole, or filling in the running one."""
        row = self._finished_row(event, time.time())
        self.whole = tuple(self.writer.scrub.columns(row))
        self.writer.started.discard(self)  # after `whole`, then the events go: see below
        self.start, self.starts, self.called, self.answered = None, {}, [], []
        self.writer.submit(self._store)

    def aborted(self, event: Aborted) -> None:
        """Queue the run's end, with what it did until then, when Ctrl-C (interrupted) or an
        error (failed) ended it: not left `running` while `tiny serve` goes on serving."""
        start = self.start
        if start is None:
            return  # no RunStarted, no row (the runner tells it before anything can stop it)
        status, reason = ("interrupted", LEFT) if event.interrupted else ("failed", event.reason)
        ended = self._ended_row(start, status, reason, event.messages)
        self.writer.submit(lambda db, slim: self._end(db, ended, slim))

    def left(self, db: sqlite3.Connection, slim: bool, failure: str | None) -> None:
        """End the run the command left running as it closes the log (on the writer's side):
        interrupted, or failed with `failure`, with what it did until then; no Aborted came
        (a bench run on a worker thread goes on), so the transcript is its latest card's first."""
        start = self.start  # read before `whole`: finished() sets `whole`, then drops this
        if self.whole is not None or start is None:
            self._store(db, slim)  # finished as the command closed (its row was not queued): whole
            return
        status, reason = ("failed", failure) if failure else ("interrupted", LEFT)
        self._end(db, self._ended_row(start, status, reason, start.messages), slim)

    def _ended_row(
        self, start: RunStarted, status: str, reason: str, messages: Sequence[Any]
    ) -> list[Any]:
        """Return the ENDED columns' values, scrubbed: what the run's events told, its cards'
        tallies, its latest card, and the time since its first card started."""
        at, called = time.time(), self.called
        row = (
            *(stamp(at), status, reason, start.card_id, start.model, start.tool_mode, messages),
            _calls(called, self.answered, self.writer.scrub.text),
            routing_of(self.route, None),  # no Digest: the router's decision alone
            *(self.tokens_in, self.tokens_out, len(called), self.ghosts),
            sum(c.recovered for c in called),
            *(round(at - (self.began or at), 3), int(repaired(messages))),
        )
        return self.writer.scrub.columns(row)

    def _end(self, db: sqlite3.Connection, ended: Sequence[Any], slim: bool) -> None:
        self.insert_running(db, slim)  # a run shorter than the writer's tick has no row yet
        if self.row is not None:
            self.writer.complete(db, self.row, ENDED, ended, slim, running_only=True)
            self.writer.open_runs.discard(self)

    def insert_running(self, db: sqlite3.Connection, slim: bool) -> None:
        """Insert the row as `running` (on the writer thread), unless the run is over."""
        start = self.start  # read before `whole`: finished() sets `whole`, then drops this
        self.writer.started.discard(self)
        if self.whole is not None or start is None or self.began is None:
            return  # finished meanwhile: its queued row goes in whole
        if self.row is not None:
            return  # written at the first card's start: a re-route keeps the one row
        row = (
            *(stamp(self.began), self.command, self.label, start.card_id, start.model),
            *(self.endpoint, start.goal, start.messages, start.tool_mode, os.getpid()),
            *(this_process(), "running", "[]"),
        )
        self.writer.insert(db, self, STARTED, self.writer.scrub.columns(row), slim)
        self.writer.open_runs.add(self)

    def _finished_row(self, event: Finished, at: float) -> tuple[Any, ...]:
        """Return the FINISHED columns' values: a tuple, no dicts (this runs for every run)."""
        digest, cost = event.digest, event.digest.cost
        start = self.starts.get(digest.agent_id or "", self.start)  # the card the Digest names
        messages = event.messages or (start.messages if start else ())
        decided = digest.routing.to_json() if digest.routing is not None else None
        routing = routing_of(self.route, decided)
        return (
            *(stamp(self.began or at), stamp(at), self.command, self.label),
            *(start.card_id if start else digest.agent_id, start.model if start else None),
            *(self.endpoint, start.goal if start else self.goal, routing, digest.status),
            *(digest.reason, digest.to_json(), messages),
            _calls(self.called, self.answered, self.writer.scrub.text),
            cost.tokens_in,
            *(cost.tokens_out, cost.tool_calls, cost.ghost_calls, cost.recovered_calls),
            *(cost.caller_tokens, cost.wall_seconds, start.tool_mode if start else None),
            *(os.getpid(), this_process(), int(repaired(messages))),
        )

    def _store(self, db: sqlite3.Connection, slim: bool) -> None:
        assert self.whole is not None
        if self.row is None:  # finished before its running row was written, or never started
            self.writer.insert(db, self, FINISHED, self.whole, slim)
        else:  # written as running: fill it in
            self.writer.complete(db, self.row, FINISHED, self.whole, slim)
            self.writer.open_runs.discard(self)


def routing_of(routed: Routed | None, decided: dict[str, Any] | None) -> dict[str, Any] | None:
    """Return the routing decision as a row keeps it: the Digest's (`decided`: the final card,
    a re-route's first), with the threshold and the cards the router ranked, best first; the
    Routed event's own decision when no Digest came (an error ended the run)."""
    if routed is None:
        return decided
    chosen = decided or {
        "decision": routed.decision,
        "agent_id": routed.agent_id,
        "score": round(routed.score, 4),
    }
    ranked = {
        "threshold": round(routed.threshold, 4),
        "candidates": [{"agent_id": c, "score": round(s, 4)} for c, s in routed.candidates],
    }
    return {**chosen, **ranked}


def _calls(
    called: Sequence[ToolCalled], answered: Sequence[ToolFinished], scrub: Callable[[str], str]
) -> list[dict[str, Any]]:
    """Return each tool call with its outcome, time and result size (None: never answered)."""
    calls: list[dict[str, Any]] = []
    waiting: dict[str, list[dict[str, Any]]] = {}  # a model may reuse an id: first in, first out
    for event in called:
        call = {
            "id": event.call_id,
            "name": event.name,
            **_logged_arguments(event.arguments or "", scrub),
            "recovered": event.recovered,
            "outcome": None,
            "seconds": None,
            "result_chars": 0,
        }
        calls.append(call)
        waiting.setdefault(event.call_id, []).append(call)
    for answer in answered:  # each after its call: the runner answers calls in order
        if waiting.get(answer.call_id):
            call = waiting[answer.call_id].pop(0)
            seconds = round(answer.seconds, 3)
            call.update(outcome=answer.outcome, seconds=seconds, result_chars=len(answer.result))
    return calls


def _logged_arguments(text: str, scrub: Callable[[str], str]) -> dict[str, Any]:
    """A call's arguments as the log keeps them: whole, or refused ones cut, with their size
    (scrubbed whole before the cut: a secret across it would leave a part no scrub knows)."""
    if len(text) <= MAX_LOGGED_ARGUMENT_CHARS:
        return {"arguments": text}
    return {"arguments": scrub(text)[:ARGUMENTS_PREVIEW_CHARS], "arguments_chars": len(text)}


class Writer:
    """The one thread that writes the log, and the connection it shares with readers.

    It commits the queued rows in order, so the agent loop never waits on the disk, nor on
    another tiny process's write lock. It wakes every FLUSH_SECONDS and writes in one
    transaction what is queued and a `running` row for each run started since: waking it
    sooner (per event, per finished run) made a scripted run slower (the GIL's hand-offs).
    """

    def __init__(self, db: sqlite3.Connection, scrub: Scrubber) -> None:
        self.db: sqlite3.Connection | None = db
        self.lock = threading.Lock()  # one connection: the writer and the readers take turns
        self.scrub = scrub
        self.open_runs: set[Recorder] = set()  # written as running, not ended yet
        self.recorded: list[int] = []  # every row inserted, in order (RunLog.recorded)
        self.started: set[Recorder] = set()  # running, no row written yet
        self.failure: Exception | None = None
        self.cut: sqlite3.Error | None = None  # a pass kept only with its transcripts left out
        self.closing = False
        self._fresh: list[Recorder] = []  # given a row in this try: none if it rolls back
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._wake = threading.Event()  # set by flush and close: write now, not at the tick
        self._thread = threading.Thread(target=self._write_all, name="tiny-run-log", daemon=True)
        self._thread.start()

    def flush(self) -> None:
        """Wait until every run so far has its row committed, finished or running."""
        if self.closing:
            return  # the writer is gone or going: close() waited for it
        self._jobs.put(lambda db, slim: None)  # a pass of the writer, which writes the running rows
        self._wake.set()
        self._jobs.join()

    def close(self, wait: float | None, failure: str | None = None) -> bool:
        """Write what is queued, end unfinished runs with what they did until now (Recorder.
        left: interrupted, or failed with `failure` as their reason when an error ended them),
        close the database.

        Return False, having closed nothing, when already closing or still writing after
        `wait` seconds (stuck on another process's lock).
        """
        if self.closing:
            return False
        self.closing = True
        self._jobs.put(None)
        self._wake.set()
        self._thread.join(wait)
        if self._thread.is_alive():
            return False  # stuck on another process's lock: the sweep will mark these runs later
        with self.lock:
            db, self.db = self.db, None
            left = sorted(self.open_runs, key=lambda recorder: recorder.row or 0)
            if db is not None and left:  # each ends by taking itself out: a copy
                ends = [functools.partial(recorder.left, failure=failure) for recorder in left]
                self._committed(db, lambda db, slim: _run(db, ends, slim))
            if db is not None:
                db.close()
        return True

    def submit(self, job: Job) -> None:
        """Queue a write; dropped once closing (close ends the runs left behind: Recorder.left)."""
        if not self.closing:
            self._jobs.put(job)

    def insert(
        self,
        db: sqlite3.Connection,
        recorder: Recorder,
        names: Sequence[str],
        values: Sequence[Any],
        slim: bool,
    ) -> None:
        """Insert one row for `recorder` (on the writer thread), which takes its id."""
        sql = f"INSERT INTO runs ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        run_id = db.execute(sql, _slimmed(names, values, slim)).lastrowid
        assert run_id is not None
        recorder.row = run_id
        self.recorded.append(run_id)
        self._fresh.append(recorder)

    def complete(
        self,
        db: sqlite3.Connection,
        run_id: int,
        names: Sequence[str],
        values: Sequence[Any],
        slim: bool,
        running_only: bool = False,
    ) -> None:
        """Fill in a started row (on the writer thread); with `running_only`, only if running."""
        sets = ", ".join(f"{name} = ?" for name in names)
        guard = " AND status = 'running'" if running_only else ""
        db.execute(
            f"UPDATE runs SET {sets} WHERE id = ?{guard}", [*_slimmed(names, values, slim), run_id]
        )

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

    def _write(self, batch: Sequence[Job]) -> None:
        """Insert a `running` row for each run started since the last pass, then run the
        jobs, in one transaction: all of it is committed, or none (the failure is kept)."""
        started = list(self.started)  # one call in C: the runners' threads add and discard
        if not batch and not started:
            return
        with self.lock:
            if self.db is not None:
                jobs = [*(recorder.insert_running for recorder in started), *batch]
                self._committed(self.db, lambda db, slim: _run(db, jobs, slim))

    def _committed(self, db: sqlite3.Connection, work: Job) -> None:
        """Run `work` in one transaction, the failure kept for close(): a write that failed
        must not end the run. One the disk will not take (full, a quota) is tried once more
        with the transcripts and tool calls left out, so a finished run still reads as it ended."""
        try:
            self._try(db, work, slim=False)
        except sqlite3.Error as exc:
            if not _disk_refused(exc):  # a lock, a damaged or read-only file: slimmer won't help
                self.failure = self.failure or exc
                return
            try:
                self._try(db, work, slim=True)
                self.cut = self.cut or exc
            except Exception as again:
                self.failure = self.failure or again
        except Exception as exc:  # a bug in tiny: its traceback is wanted at close
            self.failure = self.failure or exc

    def _try(self, db: sqlite3.Connection, work: Job, slim: bool) -> None:
        """Run `work` in one transaction; on failure forget what it did, and raise."""
        self._fresh, open_runs, recorded = [], set(self.open_runs), len(self.recorded)
        try:
            with transaction(db):
                work(db, slim)
        except BaseException:  # rolled back: forget the rows it gave and the runs it ended
            for recorder in self._fresh:
                recorder.row = None
            del self.recorded[recorded:]
            self.open_runs = open_runs
            raise


def _drain(jobs: queue.Queue[Job | None]) -> list[Job | None]:
    """Take everything queued so far, up to and including the closing None."""
    batch: list[Job | None] = []
    while not batch or batch[-1] is not None:
        try:
            batch.append(jobs.get_nowait())
        except queue.Empty:
            break
    return batch


def _run(db: sqlite3.Connection, jobs: Sequence[Job], slim: bool) -> None:
    """Run the jobs of one pass, in order."""
    for job in jobs:
        job(db, slim)


def _slimmed(names: Sequence[str], values: Sequence[Any], slim: bool) -> Sequence[Any]:
    """The row's values; `slim`: the SLIMMED columns emptied."""
    if not slim:
        return values
    return ["[]" if name in SLIMMED else value for name, value in zip(names, values, strict=True)]


def _disk_refused(exc: sqlite3.Error) -> bool:
    """Tell whether SQLite failed because the disk would not take the write: full (SQLITE_FULL),
    or a file not allowed to grow (a quota, `ulimit -f`: SQLITE_IOERR)."""
    return ((getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF) in DISK_REFUSED
