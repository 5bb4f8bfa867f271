"""Exporting runs: each matching run as one JSON line, to a stream or to a file written whole.

A line is the document `tiny runs show ID --json` prints. A file appears only complete: the
lines go to a temporary file beside it (owner-only, as the log: transcripts hold what agents
read), renamed onto it at the end; a failure leaves any earlier file as it was. Only a regular file
is replaced: a FIFO, a device or a link (`/dev/stdout`) is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from tiny_cli.errors import ConfigError
from tiny_cli.runs.query import RunQuery, record, select_records
from tiny_cli.userfiles import escape_separators, refuse_special

Write = Callable[[Mapping[str, Any]], object]
LOG_SUFFIXES = ("", "-wal", "-shm", "-journal")  # the files SQLite keeps a database in


def write_runs(
    db: sqlite3.Connection, query: RunQuery, indexed: bool, write: Write, path: Path
) -> int:
    """Write each matching run, oldest first, as `runs show --json` has it; return how many."""
    sql, params = select_records(query, indexed)
    count = 0
    for row in db.execute(sql, params):
        try:
            document = record(row).to_json()
        except ValueError as exc:  # edited or damaged by hand: say so, no traceback
            raise ConfigError(f"{path}: run {row[0]} is damaged: {exc}") from None
        write(document)
        count += 1
    return count


@contextmanager
def destination(out: Path | None, stream: TextIO, log: Path) -> Iterator[Write]:
    """Yield what writes one JSON line: to `stream`, or to the file `out`, which appears whole."""
    if out is None:
        ascii_only = stream.isatty()  # on a terminal no character a page wrote may steer it
        yield lambda document: stream.write(_line(document, ascii_only))
        return
    with _whole(_checked(out, log)) as file:
        yield lambda document: file.write(_line(document, False))


def _line(document: Mapping[str, Any], ascii_only: bool) -> str:
    text = json.dumps(document, ensure_ascii=ascii_only, separators=(",", ":"))
    return escape_separators(text) + "\n"  # a reader's splitlines() keeps each run whole


def _checked(out: Path, log: Path) -> Path:
    """Return `out`; ConfigError when it is the run log (or a file of it) or cannot be a file."""
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
    try:
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
