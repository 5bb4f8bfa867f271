"""Artifacts: a tool result too long for the context, kept whole under a handle.

The model sees the head of the result, its size and a handle; the runner's own tool
`read_artifact` reads a window by offset or the passages that best match a query. The
caller gets the handles in the Digest, and `tiny artifacts show HANDLE` prints one whole.

Each artifact is two files under `TINY_HOME/artifacts/`: `<handle>.txt` (the text, exactly,
but for secrets: tiny_cli.secrets scrubs it first) and `<handle>.json` (its metadata), each
written to a temporary file and renamed, so a reader never sees half of one. The metadata is
written last: without it there is no artifact. Files damaged or replaced by hand read as a
one-line ConfigError, never a traceback. A query's BM25 index is built on its first query.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import pydantic

from tiny_cli.errors import ConfigError, ToolCallError
from tiny_cli.secrets import Scrubber, scrubber
from tiny_cli.text import tokenize
from tiny_cli.threads import import_numpy
from tiny_cli.tools.registry import Tool, tool

ARTIFACTS_DIR = "artifacts"
READ_ARTIFACT = "read_artifact"  # the runner's own tool, offered while a run holds artifacts
HANDLE_PREFIX = "art_"
# 40 random bits: not guessable from another run; a recording masks the handles by this
# shape (tiny_cli.provider.replay.ARTIFACT_HANDLE: change both together)
HANDLE = re.compile(r"^art_[0-9a-f]{10}$")
PREVIEW_CHARS = 120
MAX_RECORD_CHARS = 64 * 1024  # a metadata file holds a few short fields: more is not one
BRIEF_CHARS = 60  # of a damaged record's value in its error line
CHUNK_CHARS = 1000  # one query passage, before overlapping neighbours are merged
CHUNK_STEP = 800  # chunks overlap, so a phrase across a boundary is whole in one of them
CHUNK_SLACK = 150  # a chunk starts and ends after a space this near, not inside a word
MAX_PASSAGES = 3
DEFAULT_READ_CHARS = 4000
READ_HEADROOM = 300  # room for read_artifact's own lines, so its result fits the result limit
Offset = Annotated[int, pydantic.Field(ge=0)]
Length = Annotated[int, pydantic.Field(ge=1)]


class ArtifactStore:
    """The artifacts under one data directory (TINY_HOME, or the bench's scratch home)."""

    def __init__(self, home: Path, scrub: Scrubber | None = None) -> None:
        self.folder = Path(home) / ARTIFACTS_DIR
        self.scrub = scrubber() if scrub is None else scrub  # default: the environment's keys
        self._indexes: dict[str, _Index] = {}
        self._lock = threading.Lock()

    def reader(self, held: Callable[[], Sequence[Artifact]], max_chars: int) -> Tool:
        """Return the `read_artifact` tool over the artifacts `held()` names right now."""
        return tool(_Reader(self, held, max_chars).read_artifact, name=READ_ARTIFACT)

    def save(self, text: str, *, tool: str, card: str) -> Artifact:
        """Store `text`, scrubbed of secrets, under a new handle; return its record."""
        text = self.scrub.text(text)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # tool results may be private
        handle = self._new_handle()
        created = datetime.now(UTC).isoformat(timespec="seconds")
        artifact = Artifact(handle, tool, len(text), created, card, _preview(text))
        _write_atomically(self.folder / f"{handle}.txt", text)
        _write_atomically(self.folder / f"{handle}.json", json.dumps(artifact.metadata()))
        return artifact

    def get(self, handle: str) -> Artifact:
        """Return the artifact under `handle`; an unknown or damaged one is a ConfigError."""
        path = self.folder / f"{handle}.json"
        if not HANDLE.fullmatch(handle) or not path.exists():  # never a path: "../x" goes nowhere
            raise ConfigError(f"no artifact {handle!r} in {self.folder}")
        try:
            return _record(json.loads(_read(path, MAX_RECORD_CHARS)), handle)
        except (OSError, ValueError, RecursionError) as exc:  # edited by hand: one line
            why = _why(exc)
            raise ConfigError(f"{path}: artifact {handle}'s record is damaged: {why}") from None

    def text(self, artifact: Artifact) -> str:
        """Return the artifact's whole text, as it was stored."""
        path = self.folder / f"{artifact.handle}.txt"
        try:
            return _read(path)
        except (OSError, ValueError) as exc:  # removed or edited by hand: one line
            raise ConfigError(
                f"{path}: artifact {artifact.handle}'s text cannot be read: {_why(exc)}"
            ) from None

    def passages(self, artifact: Artifact, query: str) -> list[tuple[int, str]]:
        """Return (offset, text) of the chunks that best match `query`, in document order."""
        words = tokenize(query)
        if not words:
            raise ToolCallError(f"the query {query!r} has no searchable words; use key terms")
        return self._index(artifact).best(words, MAX_PASSAGES)

    def _index(self, artifact: Artifact) -> _Index:
        with self._lock:  # built once per artifact and store; the bench runs in threads
            if artifact.handle not in self._indexes:
                self._indexes[artifact.handle] = _Index.build(self.text(artifact))
            return self._indexes[artifact.handle]

    def _new_handle(self) -> str:
        while True:  # a clash is one in a trillion; never overwrite one anyway
            handle = HANDLE_PREFIX + secrets.token_hex(5)
            if not (self.folder / f"{handle}.json").exists():
                return handle


def stored_result(text: str, artifact: Artifact, limit: int) -> str:
    """Return what the model sees of a stored result: its head, its size and how to read on."""
    chars = artifact.chars
    return (
        f"{text[:limit]}\n[… cut by tiny: {chars - limit} more characters not shown. "
        f"The whole result ({chars} characters) is stored as artifact {artifact.handle}: "
        f"call {READ_ARTIFACT} with handle {artifact.handle!r} and a query for the passages "
        f"that match it, or with offset={limit} to read on.]"
    )


def held_note(artifacts: Sequence[Artifact]) -> str:
    """Tell the model which earlier results it may read, for the task's message."""
    lines = [f"Stored results you can read with {READ_ARTIFACT} (handle, query or offset):"]
    lines += (
        f"- {a.handle}: a {a.tool} result, {a.chars} characters, starting {a.preview!r}"
        for a in artifacts
    )
    return "\n".join(lines)


# --- helpers ------------------------------------------------------------------------------


def _write_atomically(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, then rename: whole or not at all."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace", newline="") as f:
            f.write(text)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _read(path: Path, most: int | None = None) -> str:
    """Read a regular file as UTF-8, "\r\n" kept as offsets count it (a FIFO or a device is
    refused: it could block or never end); with `most`, a larger file raises ValueError."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO's open waits else
    with os.fdopen(fd, encoding="utf-8", newline="") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        text = f.read(-1 if most is None else most + 1)
    if most is not None and len(text) > most:
        raise ValueError(f"over {most:,} characters")
    return text


def _why(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    return str(exc) or type(exc).__name__


def _preview(text: str) -> str:
    flat = " ".join(text[: PREVIEW_CHARS * 4].split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


def _record(data: Any, handle: str) -> Artifact:
    """Read a metadata file's record of `handle`; ValueError naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data.get("handle") != handle:  # the file's name decides which text is read, nothing else
        raise ValueError(f"'handle' is {_brief(data.get('handle'))}, not {handle!r}")
    tool, chars = data.get("tool"), data.get("chars")
    if not isinstance(tool, str):
        raise ValueError(f"'tool' must be a string, got {_brief(tool)}")
    if type(chars) is not int or chars < 0:
        raise ValueError(f"'chars' must be a whole number, got {_brief(chars)}")
    extra = {k: _field(data.get(k)) for k in ("created", "card", "preview")}
    return Artifact(handle, tool, chars, **extra)


def _brief(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= BRIEF_CHARS else shown[: BRIEF_CHARS - 1] + "…"


def _field(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Artifact:
    """One stored tool result: its handle, the tool that gave it, its size and first words."""

    handle: str
    tool: str
    chars: int
    created: str = ""  # ISO 8601, UTC
    card: str = ""  # the card whose run stored it
    preview: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return the Digest's entry: handle, tool, chars, preview."""
        return {k: v for k, v in asdict(self).items() if k not in ("created", "card")}

    def metadata(self) -> dict[str, Any]:
        """Return everything the metadata file holds."""
        return asdict(self)


@dataclass(frozen=True)
class _Index:
    """BM25 over overlapping fixed-size chunks of one artifact, each a (start, end) span."""

    text: str
    spans: tuple[tuple[int, int], ...]
    bm25: Any  # bm25s.BM25; None when the text has no searchable word (bm25s needs one)

    @classmethod
    def build(cls, text: str) -> _Index:
        spans = _spans(text)
        chunks = [tokenize(text[a:b]) for a, b in spans]
        return cls(text, spans, bm25_index(chunks) if any(chunks) else None)

    def best(self, words: list[str], count: int) -> list[tuple[int, str]]:
        """Return the `count` best chunks that match at all, in document order, overlaps merged."""
        if self.bm25 is None:
            return []
        scores = self.bm25.get_scores(words)
        ranked = sorted(range(len(self.spans)), key=lambda i: -scores[i])
        chosen = sorted(self.spans[i] for i in ranked[:count] if scores[i] > 0)
        merged: list[tuple[int, int]] = []
        for start, end in chosen:
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return [(a, self.text[a:b]) for a, b in merged]


def _spans(text: str) -> tuple[tuple[int, int], ...]:
    """Cut text into chunks of about CHUNK_CHARS every CHUNK_STEP characters, at spaces."""
    spans, start = [], 0
    while True:
        end = _after_space(text, start + CHUNK_CHARS, start)
        spans.append((start, end))
        if end >= len(text):
            return tuple(spans)
        start = _after_space(text, start + CHUNK_STEP, start)


def _after_space(text: str, at: int, floor: int) -> int:
    """Move `at` back to just after a space within CHUNK_SLACK, so no word is cut in two."""
    if at >= len(text):
        return len(text)
    space = text.rfind(" ", max(floor + 1, at - CHUNK_SLACK), at)
    return space + 1 if space != -1 else at


def bm25_index(tokens: list[list[str]]) -> Any:
    """A bm25s index of tokenized texts (the one place the tools import bm25s, on first search)."""
    import_numpy()  # OpenBLAS on one thread, if bm25s brings numpy first
    import bm25s

    index = bm25s.BM25()
    index.index(tokens, show_progress=False)
    return index


# --- read_artifact ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Reader:
    """One run's artifacts, read by window or by query, within `limit` characters."""

    store: ArtifactStore
    held: Callable[[], Sequence[Artifact]]
    limit: int

    def read_artifact(
        self,
        handle: str,
        query: str | None = None,
        offset: Offset = 0,
        length: Length = DEFAULT_READ_CHARS,
    ) -> str:
        """Read a stored tool result that was too long to show whole (an artifact).

        With a query: the passages that best match it, each with its offset. Without one:
        the text from `offset` on, `length` characters at most.

        Args:
            handle: The artifact's handle, e.g. art_3f9c2a1b7d.
            query: Key words to look for; the best passages come back, in document order.
            offset: Where to start reading, in characters from the start (without a query).
            length: How many characters to read (without a query).
        """
        artifact = _held(self.held(), handle)
        length = min(length, max(1, self.limit - READ_HEADROOM))
        try:
            if query is not None and query.strip():
                return _passages_text(artifact, query, self.store.passages(artifact, query))
            return window(self.store.text(artifact), artifact, offset, length)
        except ConfigError as exc:  # its text removed or damaged since: the model is told so
            raise ToolCallError(str(exc)) from None


def window(text: str, artifact: Artifact, offset: int, length: int) -> str:
    """Return `length` characters from `offset`, headed by where they are and what is left."""
    if offset >= len(text) > 0:
        raise ToolCallError(
            f"offset {offset} is past the end: {artifact.handle} has {len(text)} characters"
        )
    end = min(len(text), offset + length)
    head = f"{artifact.handle}, characters {offset} to {end} of {len(text)}:\n"
    rest = len(text) - end
    tail = f"\n[{rest} more characters: read on with offset={end}]" if rest else "\n[end]"
    return head + text[offset:end] + tail


def _held(artifacts: Sequence[Artifact], handle: str) -> Artifact:
    for artifact in artifacts:
        if artifact.handle == handle.strip():
            return artifact
    have = ", ".join(a.handle for a in artifacts) or "none"
    raise ToolCallError(f"no artifact {handle!r} in this run; your artifacts are: {have}")


def _passages_text(artifact: Artifact, query: str, found: list[tuple[int, str]]) -> str:
    if not found:
        return (
            f"no passage of {artifact.handle} matches {query!r}; try other words, or read by offset"
        )
    parts = [f"{artifact.handle}: {len(found)} passage(s) best matching {query!r}, in order:"]
    parts += [f"[offset {at}, {len(text)} characters]\n{text}" for at, text in found]
    return "\n\n".join(parts)
