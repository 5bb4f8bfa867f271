"""The run log's facade, RunLog: open, observe, read, search, show, count, delete, export.

A row left `running` by a process that is gone (killed, crashed) becomes `interrupted`
whenever the log is opened. Also re-exported here, for the modules that import them from
this one: DB_NAME, Correction, RunQuery and parse_since.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TextIO

from tiny_cli.errors import ConfigError, ReplayError
from tiny_cli.events import Observer
from tiny_cli.runs import corrections, prune, recorder, search
from tiny_cli.runs.corrections import Correction
from tiny_cli.runs.export import destination, write_runs
from tiny_cli.runs.migrations import Probe, migrate
from tiny_cli.runs.prune import Deletion
from tiny_cli.runs.query import (
    RUN_SQL,
    SQLITE_MAX_INT,
    RunQuery,
    RunRecord,
    RunSummary,
    parse_since,
    record,
    select_rerouted,
    select_runs,
    summary,
)
from tiny_cli.runs.schema import INTERRUPT, now
from tiny_cli.runs.stats import RunStats, count_reroutes, run_stats
from tiny_cli.runs.store import DB_NAME, NO_LOG_HINT, connect, transaction
from tiny_cli.secrets import Scrubber, scrubber

__all__ = ["DB_NAME", "Correction", "Deletion", "RunLog", "RunQuery", "parse_since"]

INTERRUPTED_WAIT = 1.0  # seconds Ctrl-C waits for queued writes (the sweep covers the rest)
GONE = "the process ended before the run finished"
Confirm = Callable[[Sequence[int]], bool]  # shown the ids a deletion takes: go ahead?


class RunLog:
    """The SQLite run log under TINY_HOME; safe to share between threads.

    Observers queue each run's row for one writer thread (tiny_cli.runs.recorder), so the
    agent loop never waits on the disk; reads wait for a writer pass first; `close` drains
    the queue.
    """

    def __init__(self, db: sqlite3.Connection, path: Path, scrub: Scrubber) -> None:
        self.path = path
        self._writer = recorder.Writer(db, scrub)

    @classmethod
    def open(cls, home: Path, scrub: Scrubber | None = None, fts5: Probe | None = None) -> RunLog:
        """Open (creating or upgrading) the run log in `home`; mark dead runs interrupted.

        `scrub` keeps secrets out of every row and export; by default the environment's keys.
        `fts5` says whether SQLite has FTS5 (default: it is asked).
        """
        path = home / DB_NAME
        db = connect(path)
        try:
            migrate(db, path, fts5)
        except BaseException:
            db.close()
            raise
        log = cls(db, path, scrubber() if scrub is None else scrub)
        try:
            log.sweep()
        except BaseException:
            log.close()
            raise
        return log

    def observer(self, command: str, run: str, endpoint: str, goal: str = "") -> Observer:
        """Return the observer that records one run of `command` (`run` labels it).

        `goal` is the task, kept even when no card runs (an abstain): a correction needs it.
        """
        return recorder.observer(self._writer, command, run, endpoint, goal)

    def recorded(self) -> list[int]:
        """Return the ids of the runs this log recorded since it was opened, oldest first."""
        self.flush()
        with self._writer.lock:
            return list(self._writer.recorded)

    def sweep(self) -> int:
        """Mark `running` rows whose process is gone as `interrupted`; return how many."""
        me = os.getpid()
        with self._reading() as db:
            rows = db.execute("SELECT id, pid FROM runs WHERE status = 'running'").fetchall()
            dead = [(run_id,) for run_id, pid in rows if pid != me and not _alive(pid)]
            if dead:
                with transaction(db):
                    db.executemany(INTERRUPT, [(now(), GONE, *d) for d in dead])
        return len(dead)

    def runs(self, query: RunQuery = RunQuery()) -> list[RunSummary]:
        """Return the matching runs, newest first (`query.text`: those holding its words)."""
        with self._reading() as db:
            sql, params = select_runs(query, query.text is not None and search.ready(db))
            rows = db.execute(sql, params).fetchall()
        return [summary(row) for row in rows]

    def run(self, run_id: int) -> RunRecord:
        """Return one run in full; ConfigError when the log has no such run."""
        row = None
        with self._reading() as db:
            if abs(run_id) <= SQLITE_MAX_INT:  # a larger number is no id, and no query takes it
                row = db.execute(f"{RUN_SQL} WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise self._no_run(run_id)
        try:
            return record(row)
        except ValueError as exc:  # edited or damaged by hand: say so, no traceback
            raise ConfigError(f"{self.path}: run {run_id} is damaged: {exc}") from None

    def stats(self, query: RunQuery = RunQuery(limit=None)) -> RunStats:
        """Return the figures of every matching run: in all, per card, per model, re-routes."""
        found = self.runs(query)
        with self._reading() as db:
            sql, params = select_rerouted(query, query.text is not None and search.ready(db))
            rerouted = db.execute(sql, params).fetchall()
        return run_stats(found, count_reroutes(rerouted))

    def correct(self, run_id: int, card: str | None) -> Correction:
        """Record where run `run_id`'s task should have gone (None: abstain); replaces any.

        ConfigError when the log has no such run, or the run is no delegate run with a task.
        """
        with self._reading() as db:
            row = None
            if abs(run_id) <= SQLITE_MAX_INT:
                row = db.execute(corrections.RUN_SQL, (run_id,)).fetchone()
            if row is None:
                raise self._no_run(run_id)
            task, routed = corrections.correctable(self.path, run_id, row)
            with transaction(db):  # the goal was scrubbed when stored: once more costs little
                return corrections.store(db, run_id, self._writer.scrub.text(task), routed, card)

    def delete(
        self,
        ids: Iterable[int] = (),
        before: datetime | None = None,
        confirm: Confirm | None = None,
    ) -> Deletion:
        """Delete the runs `ids` and those started before `before`, with their corrections.

        `confirm` is shown the ids first and may decline. ConfigError, deleting nothing, for an
        id the log lacks or a run still running; by age, running runs are left alone.
        """
        with self._reading() as db:
            doomed = prune.chosen(db, self.path, ids, before)
        if doomed and confirm is not None and not confirm(doomed):
            return Deletion((), 0, declined=True)  # asked outside the lock: others may write
        with self._reading() as db, transaction(db):
            return prune.delete(db, doomed)

    def export(self, query: RunQuery, out: Path | None, stream: TextIO) -> int:
        """Write each matching run as a JSON line to `stream`, or whole to `out`; count them.

        A line is the document `runs show --json` prints, scrubbed again (a key set since the
        run was logged is kept out too); the oldest run comes first.
        """
        with destination(out, stream, self.path) as write, self._reading() as db:
            searched = query.text is not None and search.ready(db)
            scrubbed = self._writer.scrub.document
            return write_runs(db, query, searched, lambda doc: write(scrubbed(doc)), self.path)

    def corrections(self, pending_only: bool = True) -> list[Correction]:
        """Return the corrections, oldest first: by default only those not taught yet."""
        with self._reading() as db:
            return corrections.select(db, pending_only)

    def mark_learned(self, ids: Iterable[int]) -> int:
        """Mark these corrections as taught; return how many were pending."""
        with self._reading() as db, transaction(db):
            return corrections.mark(db, ids)

    def flush(self) -> None:
        """Wait until every run so far has its row committed, finished or running."""
        self._writer.flush()

    def close(self, wait: float | None = None, failure: str | None = None) -> None:
        """Write what is queued and close the database; raise if a write failed.

        Runs that started but never finished are marked interrupted, or failed with `failure`
        as their reason when an error ended them; `wait` bounds the wait in seconds.
        """
        if self._writer.close(wait, failure):
            self._raise_failure()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Ctrl-C ends the command at once: what is still queued is not worth waiting for.
        # A replay miss ends the run it names: failed with that reason, not interrupted
        failure = str(exc) if isinstance(exc, ReplayError) else None
        self.close(wait=INTERRUPTED_WAIT if kind is KeyboardInterrupt else None, failure=failure)

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, once every queued write is in; ConfigError when closed or when
        SQLite fails (a damaged file, a lock held too long): one line, not a traceback."""
        writer = self._writer
        if writer.closing:
            raise ConfigError(f"the run log {self.path} is closed")
        writer.flush()
        with writer.lock:
            if writer.db is None:
                raise ConfigError(f"the run log {self.path} is closed")
            try:
                yield writer.db
            except sqlite3.Error as exc:
                raise ConfigError(
                    f"{self.path}: cannot read the run log: {exc}{NO_LOG_HINT}"
                ) from exc

    def _no_run(self, run_id: int) -> ConfigError:
        return ConfigError(f"no run {run_id} in the run log {self.path}: `tiny runs` lists them")

    def _raise_failure(self) -> None:
        failure, self._writer.failure = self._writer.failure, None
        if isinstance(failure, sqlite3.Error):
            raise ConfigError(
                f"{self.path}: could not record a run: {failure}{NO_LOG_HINT}"
            ) from failure
        if failure is not None:
            raise failure  # a bug in tiny, not the user's: its traceback is wanted


def _alive(pid: object) -> bool:
    """Tell whether process `pid` exists (a zombie counts until its parent reaps it)."""
    if sys.platform == "win32":
        return True  # os.kill(pid, 0) would end the process there: never sweep on Windows
    if type(pid) is not int or pid <= 0:
        return False  # a row edited by hand: no process has that id (0 and -1 mean groups)
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True  # someone else's process
    return True
