"""Upgrading a recording: replay it whole and write it again with its making in the header.

A recording made before tiny kept its making (the bench's options, the digests of its tasks
and cards, the routing decisions) replays only with the flags it was made with, and its
routing is recomputed by an embedder whose last digits differ from one CPU to another.
`tiny bench --replay OLD [the flags it was made with] --upgrade` replays it and rewrites it
in place: the same header plus the making, and each exchange with its answer unchanged and
the body as this replay sent it (the key matched, so it is the recorded request, in tiny's
own order). Nothing is written unless every recorded exchange was asked for.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from tiny_cli.errors import ConfigError
from tiny_cli.provider.client import Completion
from tiny_cli.provider.recfile import entry_of, header_of, read_lines
from tiny_cli.provider.replay import Replayer, _RunLabel, sent_body

KEPT = ("run", "agent", "key")  # written first, then the body, then the rest as recorded
DROPPED = ("request", "body")  # the old copy of the request: replaced by the body as sent


class Upgrader(Replayer):
    """A Replayer that writes its recording again, with the making noted during the run."""

    def __init__(self, path: Path, header: dict[str, Any], entries: Any) -> None:
        super().__init__(path, header, entries)
        self._notes: dict[str, Any] = {}
        self._rewritten: list[dict[str, Any]] = []
        self._write_lock = threading.Lock()

    @classmethod
    def open(cls, path: Path) -> Upgrader:
        """Read the one recording to upgrade."""
        lines = list(read_lines(Path(path)))
        header = header_of(Path(path), lines[0] if lines else None)
        return cls(Path(path), header, [entry_of(Path(path), n, line) for n, line in lines[1:]])

    def answer(self, label: _RunLabel, request: dict[str, Any]) -> Completion:
        """Answer from the recording and keep the exchange with the body as sent."""
        entry = self.popped(label, request)
        first = {k: entry[k] for k in KEPT if k in entry}
        rest = {k: v for k, v in entry.items() if k not in (*KEPT, *DROPPED)}
        with self._write_lock:
            self._rewritten.append({**first, "body": sent_body(request, label.volatile), **rest})
        return self.replayed(label, entry)

    def note(self, part: str, value: Any) -> None:
        """Keep `value` as `part` of the upgraded header."""
        with self._write_lock:
            self._notes[part] = value

    def written_to(self) -> Path | None:
        """The recording, rewritten in place."""
        return self.path

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self._write()

    def _write(self) -> None:
        """Replace the recording with the upgraded one, whole; refuse a partial replay."""
        left = self.unused()
        if left:
            first = next(run for (run, _), queue in self._answers.items() if queue)
            raise ConfigError(
                f"{self.path}: not upgraded: this replay left {left} recorded exchange(s) "
                f"unasked (first of run {first}); give the options it was recorded with"
            )
        header = {**self.header, **self._notes}
        lines = [json.dumps(e, ensure_ascii=False) for e in (header, *self._rewritten)]
        partial = self.path.with_name(f".{self.path.name}.upgrade")
        partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
        partial.replace(self.path)
