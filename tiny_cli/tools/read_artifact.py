"""read_artifact: the runner's own tool — a stored result read by offset or by query.

Offered only while a run holds artifacts; its BM25 index (bm25s, numpy) is built on first query.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated

import pydantic

from tiny_cli.errors import ConfigError, ToolCallError
from tiny_cli.tools.artifacts import READ_ARTIFACT, Artifact, ArtifactStore
from tiny_cli.tools.registry import LazyTool, Tool

DEFAULT_READ_CHARS = 4000


READ_HEADROOM = 300  # room for read_artifact's own lines, so its result fits the result limit


Offset = Annotated[int, pydantic.Field(ge=0)]


Length = Annotated[int, pydantic.Field(ge=1)]


def read_artifact_tool(
    store: ArtifactStore, held: Callable[[], Sequence[Artifact]], limit: int
) -> Tool:
    """Return the runner's `read_artifact` tool over the artifacts `held()` returns right now.

    Its schema is built once per process; making the tool for a run costs little.
    """
    reader = LazyTool(
        _Reader.read_artifact, lambda: _Reader(store, held, limit), name=READ_ARTIFACT
    )
    return reader.build()


class _Reader:
    """One run's artifacts, read by window or by query."""

    def __init__(
        self, store: ArtifactStore, held: Callable[[], Sequence[Artifact]], limit: int
    ) -> None:
        self._store, self._held = store, held
        self._most = max(1, limit - READ_HEADROOM)

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
        artifact = _held(self._held(), handle)
        try:
            if query is not None and query.strip():
                return _passages_text(artifact, query, self._store.passages(artifact, query))
            return window(self._store.text(artifact), artifact, offset, min(length, self._most))
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
