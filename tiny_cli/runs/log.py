"""The run log's facade, RunLog: open, observe, read, search, show, count, delete, export; and
the corrections it keeps beside the runs.

A row left `running` by a process that is gone (killed, crashed) becomes `interrupted`
whenever the log is opened: gone when its pid now names another process (a reboot, another
PID namespace: a container), which the identity the row keeps beside the pid tells.

Corrections: where a routed run's task should have gone (another card, or nowhere: it should
have abstained), one per run: correcting again replaces it (a new id, not learned yet).
`learned_at` stays empty until it was taught (`tiny runs correct`, `tiny learn --from-runs`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from tiny_cli.errors import ConfigError, TinyError, TinyWarning
from tiny_cli.events import Observer
from tiny_cli.runs import store
from tiny_cli.runs.query import (
    RUN_SQL,
    SQLITE_MAX_INT,
    UNFINISHED,
    RunQuery,
    RunRecord,
    RunStats,
    RunSummary,
    count_reroutes,
    parse_since,
    record,
    run_stats,
    search_ready,
    select_records,
    select_rerouted,
    select_runs,
    summary,
)
from tiny_cli.runs.store import (
    DB_NAME,
    INTERRUPT,
    NO_LOG_HINT,
    Probe,
    connect,
    iso,
    migrate,
    now,
    transaction,
)
from tiny_cli.secrets import Scrubber, scrubber
from tiny_cli.text import ascii_json
from tiny_cli.userfiles import escape_separators, refuse_special

__all__ = ["DB_NAME", "Correction", "Deletion", "RunLog", "RunQuery", "parse_since"]

CORRECTIONS_SQL = "SELECT id, run_id, task, routed, card, created_at, learned_at FROM corrections"
CORRECTION_RUN_SQL = "SELECT command, goal, status, routing FROM runs WHERE id = ?"
DELETE_CORRECTIONS_SQL = "DELETE FROM corrections WHERE run_id = ?"
CORRECT_SQL = (
    "INSERT INTO corrections (run_id, task, routed, card, created_at) VALUES (?, ?, ?, ?, ?)"
)
LEARNED_SQL = "UPDATE corrections SET learned_at = ? WHERE id = ? AND learned_at IS NULL"


@dataclass(frozen=True)
class Correction:
    """Where one run's task should have gone, and whether that was taught yet."""

    id: int
    run_id: int
    task: str  # the run's goal, as the run log keeps it (secrets scrubbed)
    routed: str | None  # the card the router chose first; None: it abstained
    card: str | None  # where the task should have gone; None: no card (abstain)
    created_at: str  # ISO 8601, UTC
    learned_at: str | None  # None until taught

    def to_json(self) -> dict[str, Any]:
        """Return the correction as a JSON object."""
        return asdict(self)


def correctable(path: Path, run_id: int, row: Sequence[Any]) -> tuple[str, str | None]:
    """Return the task and the router's first card of a run row: ConfigError unless the run has
    a routing decision (routed or abstained on; one an error ended after it too) and a task."""
    command, goal, status, routing = row
    if routing is None:
        raise ConfigError(f"run {run_id} {_unrouted(command, status)}")
    if not goal:
        raise ConfigError(f"run {run_id} has no task in the run log: nothing to correct")
    try:
        decision = json.loads(routing)
        first = decision.get("rerouted_from") or decision.get("agent_id")
    except (ValueError, AttributeError):
        raise ConfigError(f"{path}: run {run_id} is damaged: its routing is not JSON") from None
    routed = first if decision.get("decision") == "route" and isinstance(first, str) else None
    return goal, routed


def _unrouted(command: str, status: str) -> str:
    """Say why a run without a routing decision cannot be corrected."""
    if command == "delegate" and status in UNFINISHED:
        return f"did not finish ({status}): no routing to correct"
    if command == "delegate":  # it ended before routing, or was logged by an older tiny
        return "(delegate) has no routing decision in the log: nothing to correct"
    # an invoke names its card; a bench run may be of an arm that does not route, or of
    # the tiny arm in a log written before tiny kept its routing
    why = "was not routed" if command == "invoke" else "has no routing decision in the log"
    return (
        f"({command}) {why}: only delegate runs and the bench's tiny arm, "
        "which the router routed or abstained on, can be corrected"
    )


OLDER_SQL = "SELECT id FROM runs WHERE started_at < ? AND status != 'running' ORDER BY id"
STATE_SQL = "SELECT status, pid FROM runs WHERE id = ?"
# a running run stays: its process lives (opening the log marked the others interrupted)
DELETE_SQL = "DELETE FROM runs WHERE id = ? AND status != 'running'"


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


def chosen_for_deletion(
    db: sqlite3.Connection, path: Path, ids: Iterable[int], before: datetime | None
) -> list[int]:
    """Return the ids to delete, in order: the runs `ids`, and those started before `before`."""
    wanted = {_deletable(db, path, run_id) for run_id in ids}
    if before is not None:
        wanted.update(run_id for (run_id,) in db.execute(OLDER_SQL, (iso(before),)))
    return sorted(wanted)


def _deletable(db: sqlite3.Connection, path: Path, run_id: int) -> int:
    """Return `run_id` if the log has that run and it is over; else ConfigError."""
    row = by_id(db, STATE_SQL, run_id)
    if row is None:
        raise ConfigError(f"no run {run_id} in the run log {path}: nothing deleted")
    if row[0] == "running":
        raise ConfigError(f"run {run_id} is still running (pid {row[1]}): nothing deleted")
    return run_id


Write = Callable[[Mapping[str, Any]], object]
LOG_SUFFIXES = ("", "-wal", "-shm", "-journal")  # the files SQLite keeps a database in


def checked_record(path: Path, row: Sequence[Any]) -> RunRecord:
    """Return a row of RUN_SQL as a RunRecord; ConfigError when it was damaged by hand."""
    try:
        return record(row)
    except ValueError as exc:  # edited or damaged by hand: say so, no traceback
        raise ConfigError(f"{path}: run {row[0]} is damaged: {exc}") from None


def by_id(db: sqlite3.Connection, sql: str, run_id: int) -> Sequence[Any] | None:
    """Return the row `sql` selects for run `run_id`; None for none (an id past SQLite's)."""
    return db.execute(sql, (run_id,)).fetchone() if abs(run_id) <= SQLITE_MAX_INT else None


@contextmanager
def destination(out: Path | None, stream: TextIO, log: Path) -> Iterator[Write]:
    """Yield what writes one JSON line: to `stream`, or to the file `out`, which appears whole
    (a failure leaves any earlier file as it was)."""
    if out is None:
        ascii_only = ascii_json(stream)  # a terminal, or a stream that cannot hold every character
        yield lambda document: stream.write(_line(document, ascii_only))
        return
    with _whole(_checked(out, log)) as file:
        yield lambda document: file.write(_line(document, False))


def _line(document: Mapping[str, Any], ascii_only: bool) -> str:
    text = json.dumps(document, ensure_ascii=ascii_only, separators=(",", ":"))
    return escape_separators(text) + "\n"  # a reader's splitlines() keeps each run whole


def _checked(out: Path, log: Path) -> Path:
    """Return `out`; ConfigError when it is the run log (or a file of it) or no regular file."""
    if any(_same(out, log.with_name(log.name + suffix)) for suffix in LOG_SUFFIXES):
        raise ConfigError(f"{out}: that is the run log itself: export to another file")
    try:
        refuse_special(out)  # a FIFO or /dev/stdout's link would be replaced, not written to
    except ConfigError as exc:
        raise ConfigError(f"{exc} (without --out the runs go to stdout)") from None
    if out.is_dir():
        raise ConfigError(f"{out}: is a folder: name the file to export to")
    if not out.parent.is_dir():
        raise ConfigError(f"{out}: there is no folder {out.parent}")
    return out


def _same(a: Path, b: Path) -> bool:
    """Tell whether two paths name one file (a link, a relative path or a hard link included)."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


@contextmanager
def _whole(path: Path) -> Iterator[TextIO]:
    """Yield a temporary file beside `path`, renamed onto it once complete; removed on failure."""
    try:  # owner-only, as the log: transcripts hold what agents read
        handle, temporary = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
        )
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write there: {exc.strerror}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())  # the rename must not publish a file still in the page cache
        os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):  # a full disk, a quota: one line, not a traceback
            raise ConfigError(f"{path}: cannot write: {exc.strerror or exc}") from None
        raise


RUNNING_SQL = "SELECT id, pid, process, started_at FROM runs WHERE status = 'running'"
INTERRUPTED_WAIT = 1.0  # seconds Ctrl-C waits for queued writes (the sweep covers the rest)
GONE = "the process ended before the run finished"
BOOT_STAT = "/proc/stat"  # its btime line: when the machine booted, in seconds since the epoch
Confirm = Callable[[Sequence[int]], bool]  # shown the ids a deletion takes: go ahead?


class RunLog:
    """The SQLite run log under TINY_HOME; safe to share between threads.

    Observers queue each run's row for one writer thread (tiny_cli.runs.store.Writer); reads
    wait for a writer pass first.
    """

    def __init__(self, db: sqlite3.Connection, path: Path, scrub: Scrubber, hint: str = "") -> None:
        self.path = path
        self._hint = hint  # ends an error: how to run without the log, where that helps
        self._writer = store.Writer(db, scrub)

    @classmethod
    def open(
        cls,
        home: Path,
        scrub: Scrubber | None = None,
        fts5: Probe | None = None,
        logging_runs: bool = True,
    ) -> RunLog:
        """Open (creating or upgrading) the run log in `home`; mark dead runs interrupted.

        `scrub` keeps secrets out of every row and export (by default the environment's keys);
        `fts5` as for store.migrate; `logging_runs` false (a command that only reads or edits
        the log): its errors suggest no --no-log.
        """
        path, hint = home / DB_NAME, NO_LOG_HINT if logging_runs else ""
        db = connect(path, hint)
        try:
            migrate(db, path, fts5, hint)
        except BaseException:
            db.close()
            raise
        log = cls(db, path, scrubber() if scrub is None else scrub, hint)
        try:
            log.sweep()
        except BaseException:
            log.close()
            raise
        return log

    def observer(self, command: str, run: str, endpoint: str, goal: str = "") -> Observer:
        """Return the observer that records one run of `command` (`run` labels it); `goal` is
        the task, kept even when no card runs (an abstain): a correction needs it."""
        return store.observer(self._writer, command, run, endpoint, goal)

    def recorded(self) -> list[int]:
        """Return the ids of the runs this log recorded since it was opened, oldest first."""
        self.flush()
        with self._writer.lock:
            return list(self._writer.recorded)

    def sweep(self) -> int:
        """Mark `running` rows whose process is gone as `interrupted`; return how many."""
        me = os.getpid()
        with self._reading() as db:
            rows = db.execute(RUNNING_SQL).fetchall()
            dead = [row[0] for row in rows if _gone(row, me)]
            if dead:
                with transaction(db):
                    db.executemany(INTERRUPT, [(now(), GONE, run_id) for run_id in dead])
        return len(dead)

    def runs(self, query: RunQuery = RunQuery()) -> list[RunSummary]:
        """Return the matching runs, newest first (`query.text`: those holding its words)."""
        with self._reading() as db:
            rows = db.execute(*select_runs(query, search_ready(db, query))).fetchall()
        return [summary(row) for row in rows]

    def run(self, run_id: int) -> RunRecord:
        """Return one run in full; ConfigError when the log has no such run."""
        with self._reading() as db:
            row = by_id(db, f"{RUN_SQL} WHERE id = ?", run_id)
        if row is None:
            raise self._no_run(run_id)
        return checked_record(self.path, row)

    def stats(self, query: RunQuery = RunQuery(limit=None)) -> RunStats:
        """Return the figures of every matching run: in all, per card, per model, re-routes."""
        found = self.runs(query)
        with self._reading() as db:
            rerouted = db.execute(*select_rerouted(query, search_ready(db, query))).fetchall()
        return run_stats(found, count_reroutes(rerouted))

    def correct(self, run_id: int, card: str | None) -> Correction:
        """Record where run `run_id`'s task should have gone (None: abstain); replaces any."""
        with self._reading() as db:
            row = by_id(db, CORRECTION_RUN_SQL, run_id)
            if row is None:
                raise self._no_run(run_id)
            task, routed = correctable(self.path, run_id, row)
            task = self._writer.scrub.text(task)  # scrubbed when stored: once more costs little
            with transaction(db):  # one correction per run: this one replaces any
                db.execute(DELETE_CORRECTIONS_SQL, (run_id,))
                at = now()
                added = db.execute(CORRECT_SQL, (run_id, task, routed, card, at)).lastrowid
        assert added is not None
        return Correction(added, run_id, task, routed, card, at, None)

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
            doomed = chosen_for_deletion(db, self.path, ids, before)
        if doomed and confirm is not None and not confirm(doomed):
            return Deletion((), 0, declined=True)  # asked outside the lock: others may write
        with self._reading() as db, transaction(db):
            gone = tuple(i for i in doomed if db.execute(DELETE_SQL, (i,)).rowcount)
            dropped = db.executemany(DELETE_CORRECTIONS_SQL, [(i,) for i in gone])
            return Deletion(gone, dropped.rowcount)

    def export(self, query: RunQuery, out: Path | None, stream: TextIO) -> int:
        """Write each matching run as a JSON line to `stream`, or whole to `out`; count them.

        A line is the document `runs show --json` prints, scrubbed again (a key set since the
        run was logged is kept out too); the oldest run comes first.
        """
        scrubbed = self._writer.scrub.document
        with destination(out, stream, self.path) as write, self._reading() as db:
            count = 0
            for row in db.execute(*select_records(query, search_ready(db, query))):
                write(scrubbed(checked_record(self.path, row).to_json()))
                count += 1
            return count

    def corrections(self, pending_only: bool = True) -> list[Correction]:
        """Return the corrections, oldest first: by default only those not taught yet."""
        where = " WHERE learned_at IS NULL" if pending_only else ""
        with self._reading() as db:
            rows = db.execute(f"{CORRECTIONS_SQL}{where} ORDER BY id").fetchall()
        return [Correction(*row) for row in rows]

    def mark_learned(self, ids: Iterable[int]) -> int:
        """Mark these corrections as taught; return how many were pending."""
        with self._reading() as db, transaction(db):
            at = now()
            return sum(db.execute(LEARNED_SQL, (at, i)).rowcount for i in dict.fromkeys(ids))

    def flush(self) -> None:
        """Wait until every run so far has its row committed, finished or running."""
        self._writer.flush()

    def close(self, wait: float | None = None, failure: str | None = None) -> None:
        """Write what is queued and close the database; raise if a write failed (warn if a run
        is logged without its transcript, a disk that would not take it: never raise).

        Runs never finished keep what they did until now, marked interrupted, or failed with
        `failure` as their reason; `wait` bounds the wait in seconds.
        """
        if not self._writer.close(wait, failure):
            return  # already closing, or stuck on another process's lock
        kept, self._writer.failure = self._writer.failure, None
        cut, self._writer.cut = self._writer.cut, None
        _report_failed(self.path, kept, cut, self._hint)

    def __enter__(self) -> RunLog:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Ctrl-C ends the command at once: what is still queued is not worth waiting for.
        # An error that ended the command (a replay miss, a refused key) ends the runs it left
        # unfinished: failed with that reason, not interrupted
        failure = str(exc) if isinstance(exc, TinyError) else None
        self.close(wait=INTERRUPTED_WAIT if kind is KeyboardInterrupt else None, failure=failure)

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, once every queued write is in; ConfigError when closed or when
        SQLite fails (a damaged file, a lock held too long): one line, not a traceback."""
        writer = self._writer
        writer.flush()  # returns at once when closing
        with writer.lock:
            if writer.closing or writer.db is None:
                raise ConfigError(f"the run log {self.path} is closed")
            try:
                yield writer.db
            except sqlite3.Error as exc:
                raise ConfigError(
                    f"{self.path}: cannot read the run log: {exc}{self._hint}"
                ) from exc

    def _no_run(self, run_id: int) -> ConfigError:
        return ConfigError(f"no run {run_id} in the run log {self.path}: `tiny runs` lists them")


def _report_failed(
    path: Path, kept: Exception | None, cut: sqlite3.Error | None, hint: str
) -> None:
    """Raise `kept`, a write that failed; else warn (a TinyWarning) of `cut`, a pass written
    without the transcripts and tool calls (a full disk): a warning, as its runs are logged,
    with their status (bench, serve and library callers end as they would have)."""
    if isinstance(kept, sqlite3.Error):
        raise ConfigError(f"{path}: could not record a run: {kept}{hint}") from kept
    if kept is not None:
        raise kept  # a bug in tiny, not the user's: its traceback is wanted
    if cut is not None:  # as written: a face escapes it (it quotes a path and SQLite's message)
        message = f"{path}: a run is logged without its transcript and tool calls: {cut}"
        warnings.warn(message, TinyWarning, stacklevel=3)  # where RunLog.close was called


def _gone(row: Sequence[object], me: int) -> bool:
    """Tell whether the process that wrote a `running` row (as RUNNING_SQL reads it) is gone:
    by the identity the row keeps (a pid a reboot or another PID namespace gave to another
    process, this one's included), else (a row from before schema v6, or from a system without
    /proc) by when it started, before this boot, or by the pid."""
    _, pid, process, started = row
    running = still_running(pid, process)
    if running is None:
        return before_boot(started) or (pid != me and not _alive(pid))
    return not running


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


def still_running(pid: object, process: object) -> bool | None:
    """Tell whether the process a `running` row names (its pid and `process`) still runs;
    None when `process` cannot tell (NULL, edited by hand, or no /proc here)."""
    where = store.boot_and_namespace()
    parts = process.split(" ") if isinstance(process, str) else []
    if where is None or len(parts) != 3:
        return None
    boot, namespace, start = parts
    if boot != where[0]:
        return False  # rebooted since: every process of that boot is gone
    if namespace == where[1]:  # the pid is numbered here: is it still the same process?
        return type(pid) is int and pid > 0 and store.process_started(pid) == start
    return _in_sight(namespace, start)


def before_boot(started: object) -> bool:
    """Tell whether a row started before this machine booted (then no process of it runs,
    whatever its pid names now); False when /proc or the row cannot tell."""
    try:
        with open(BOOT_STAT, encoding="ascii") as file:
            boot = next(int(line.split()[1]) for line in file if line.startswith("btime "))
        return datetime.fromisoformat(str(started)).timestamp() < boot
    except (OSError, ValueError, IndexError, StopIteration):
        return False


def _in_sight(namespace: str, start: str) -> bool:
    """Tell whether a process of PID namespace `namespace` started at `start` is in sight: a
    container's, seen from its host. One out of sight (another container's) counts as gone."""
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return False
    return any(store.process_started(pid) == start and _namespace(pid) == namespace for pid in pids)


def _namespace(pid: int) -> str | None:
    """Return the PID namespace of process `pid`; None when gone or not ours to look at."""
    try:
        return str(os.stat(f"/proc/{pid}/ns/pid").st_ino)
    except OSError:
        return None
