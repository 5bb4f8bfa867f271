"""Recording runs: the observer's recorder, which builds each run's row, and the writer thread.

One row per run: inserted as `running` (with the process id) by the writer's first pass after
the run starts, completed when it finishes; a run over before that pass is inserted once,
whole. Observers are called on the runner's threads, several at once under the bench; one
writer thread does every write, under the lock readers take too, each pass in one transaction.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from tiny_cli.events import Event, Finished, Observer, RunStarted, ToolCalled, ToolFinished
from tiny_cli.runs.store import (
    FINISHED,
    INTERRUPT,
    STARTED,
    insert_sql,
    now,
    repaired,
    stamp,
    transaction,
)
from tiny_cli.secrets import Scrubber

FLUSH_SECONDS = 0.1  # the writer's tick: a process killed this soon after an event loses it
LEFT = "the command ended before the run finished"
# a run the command's error ended (a replay miss): failed, with the error as its reason
FAIL_LEFT = (
    "UPDATE runs SET status = 'failed', ended_at = ?, reason = ? "
    "WHERE id = ? AND status = 'running'"
)

Job = Callable[[sqlite3.Connection], None]


def observer(writer: Writer, command: str, run: str, endpoint: str, goal: str = "") -> Observer:
    """Return the observer that records one run of `command` (`run` labels it, `goal` its task)."""
    recorder = Recorder(writer, command, run, endpoint, goal)
    handlers: dict[type, Callable[[Any], None]] = {
        RunStarted: recorder.started,
        ToolCalled: recorder.called.append,
        ToolFinished: recorder.answered.append,
        Finished: recorder.finished,
    }

    def notify(event: Event) -> None:
        """Hand the event to its handler; the other events are not recorded."""
        handler = handlers.get(type(event))
        if handler is not None:
            handler(event)

    return notify


class Recorder:
    """Record one run: a `running` row at RunStarted, filled in at Finished.

    On the runner's thread it keeps the events; at Finished it builds the row as one tuple,
    scrubs and encodes it, and lets the events go, so only that row waits for the writer,
    which runs just the SQL (SQLite releases the GIL while it works).
    """

    __slots__ = (
        *("answered", "began", "called", "command", "endpoint", "goal", "label", "row"),
        *("start", "whole", "writer"),
    )

    def __init__(
        self, writer: Writer, command: str, label: str, endpoint: str, goal: str = ""
    ) -> None:
        self.writer, self.command, self.label, self.endpoint = writer, command, label, endpoint
        self.goal = goal  # the task as the face knows it: an abstain has no RunStarted
        self.row: int | None = None  # set by the writer, before it runs the Finished job
        self.began: float | None = None  # time.time() at RunStarted
        self.start: RunStarted | None = None  # dropped once the row is whole
        self.called: list[ToolCalled] = []
        self.answered: list[ToolFinished] = []
        self.whole: tuple[Any, ...] | None = None  # the FINISHED columns, ready to store

    def started(self, event: RunStarted) -> None:
        """Have the row written as `running` at the writer's next pass, unless finished by then.

        A run shorter than FLUSH_SECONDS is written once, whole. A second RunStarted (delegate
        re-routed to another card) keeps the row and its start time; Finished fills it in.
        """
        self.began, self.start = self.began or time.time(), event
        self.writer.started.add(self)

    def finished(self, event: Finished) -> None:
        """Queue the finished row: inserted whole, or filling in the running one."""
        row = self._finished_row(event, time.time())
        self.whole = tuple(self.writer.scrub.columns(row))
        self.writer.started.discard(self)  # after `whole`, then the events go: see below
        self.start, self.called, self.answered = None, [], []
        self.writer.submit(self._store)

    def insert_running(self, db: sqlite3.Connection) -> None:
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
            *("running", "[]"),
        )
        self.row = self.writer.insert(db, STARTED, self.writer.scrub.columns(row), running=True)

    def _finished_row(self, event: Finished, at: float) -> tuple[Any, ...]:
        """Return the FINISHED columns' values: a tuple, no dicts (this runs for every run)."""
        start, digest, cost = self.start, event.digest, event.digest.cost
        messages = event.messages or (start.messages if start else ())
        routing = digest.routing.to_json() if digest.routing is not None else None
        return (
            *(stamp(self.began or at), stamp(at), self.command, self.label),
            start.card_id if start else digest.agent_id,
            start.model if start else None,
            *(self.endpoint, start.goal if start else self.goal, routing, digest.status),
            digest.reason,
            *(digest.to_json(), messages, _calls(self.called, self.answered), cost.tokens_in),
            *(cost.tokens_out, cost.tool_calls, cost.ghost_calls, cost.recovered_calls),
            *(cost.caller_tokens, cost.wall_seconds, start.tool_mode if start else None),
            *(os.getpid(), int(repaired(messages))),
        )

    def _store(self, db: sqlite3.Connection) -> None:
        assert self.whole is not None
        if self.row is None:  # finished before its running row was written, or never started
            self.row = self.writer.insert(db, FINISHED, self.whole, running=False)
        else:  # written as running: fill it in
            self.writer.complete(db, self.row, FINISHED, self.whole)


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


class Writer:
    """The one thread that writes the log, and the connection it shares with readers.

    A recorder builds a finished run's row (scrubbed, encoded) and queues it; this thread
    commits the rows in order, so the agent loop never waits on the disk, nor on another tiny
    process holding the database's write lock. It wakes every FLUSH_SECONDS and writes in one
    transaction what is queued and a `running` row for each run started since. Waking it
    sooner (per event, per finished run, before each model call) made a scripted run
    measurably slower: the threads' hand-offs of the GIL. Readers wait for a pass first
    (`flush`), then take `lock`; `close` drains the queue.
    """

    def __init__(self, db: sqlite3.Connection, scrub: Scrubber) -> None:
        self.db: sqlite3.Connection | None = db
        self.lock = threading.Lock()  # one connection: the writer and the readers take turns
        self.scrub = scrub
        self.open_rows: set[int] = set()  # written as running, not finished yet
        self.recorded: list[int] = []  # every row inserted, in order (RunLog.recorded)
        self.started: set[Recorder] = set()  # running, no row written yet
        self.failure: Exception | None = None
        self.closing = False
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._wake = threading.Event()  # set by flush and close: write now, not at the tick
        self._thread = threading.Thread(target=self._write_all, name="tiny-run-log", daemon=True)
        self._thread.start()

    def flush(self) -> None:
        """Wait until every run so far has its row committed, finished or running."""
        if self.closing:
            return  # the writer is gone or going: close() waited for it
        self._jobs.put(_no_job)  # a pass of the writer, which also writes the running rows
        self._wake.set()
        self._jobs.join()

    def close(self, wait: float | None, failure: str | None = None) -> bool:
        """Write what is queued, mark unfinished runs interrupted (failed, with `failure` as
        their reason, when an error ended them), close the database.

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
            if db is not None:
                _interrupt_left(db, self.open_rows, failure and self.scrub.text(failure))
                db.close()
        return True

    def submit(self, job: Job) -> None:
        """Queue a write; dropped once closing (Ctrl-C leaves bench runs behind, reporting)."""
        if not self.closing:
            self._jobs.put(job)

    def insert(
        self, db: sqlite3.Connection, names: Sequence[str], values: Sequence[Any], running: bool
    ) -> int:
        """Insert one row, scrubbed and encoded (on the writer thread); return its id."""
        run_id = db.execute(insert_sql(tuple(names)), values).lastrowid
        assert run_id is not None
        self.recorded.append(run_id)
        if running:
            self.open_rows.add(run_id)
        return run_id

    def complete(
        self, db: sqlite3.Connection, run_id: int, names: Sequence[str], values: Sequence[Any]
    ) -> None:
        """Fill in a started row with the whole finished run (on the writer thread)."""
        sets = ", ".join(f"{name} = ?" for name in names)
        db.execute(f"UPDATE runs SET {sets} WHERE id = ?", [*values, run_id])
        self.open_rows.discard(run_id)

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
        try:
            with self.lock:
                if self.db is not None:
                    with transaction(self.db) as db:
                        for recorder in started:
                            recorder.insert_running(db)
                        for job in batch:
                            job(db)
        except Exception as exc:  # kept for close(): a write that failed must not end the run
            self.failure = self.failure or exc


def _no_job(db: sqlite3.Connection) -> None:
    """Nothing to write: queued by flush to make the writer pass."""


def _drain(jobs: queue.Queue[Job | None]) -> list[Job | None]:
    """Take everything queued so far, up to and including the closing None."""
    batch: list[Job | None] = []
    while True:
        try:
            job = jobs.get_nowait()
        except queue.Empty:
            return batch
        batch.append(job)
        if job is None:
            return batch


def _interrupt_left(db: sqlite3.Connection, rows: set[int], failure: str | None = None) -> None:
    """Mark runs this process started and never finished as interrupted, or failed."""
    sql, reason = (FAIL_LEFT, failure) if failure else (INTERRUPT, LEFT)
    if rows:
        with transaction(db):
            db.executemany(sql, [(now(), reason, r) for r in sorted(rows)])
