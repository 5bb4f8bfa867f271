"""Teach the router: labelled tasks into the cards folder's learned.jsonl, threshold re-derived.

`learn` merges labelled tasks (`tiny learn FILE`, `tiny runs correct`, `tiny learn
--from-runs`) into the file beside the cards, keeps each card under its cap by dropping the
most redundant example (the one nearest another example of the same card), and derives the
threshold again from what the file now holds. Nothing is written when nothing changed.
"""

from __future__ import annotations

import fcntl
import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tiny_cli.errors import ConfigError
from tiny_cli.routing.learned import (
    MAX_EXAMPLES_PER_CARD,
    MAX_OUT_OF_SCOPE,
    DerivedThreshold,
    Learned,
    load_learned,
    merge,
    write_learned,
)
from tiny_cli.settings import Settings
from tiny_cli.workspace import embedder_for, learned_folder, open_workspace

if TYPE_CHECKING:
    import httpx

    from tiny_cli.routing.embed import Embedder, VectorCache

__all__ = ["LearnReport", "learn"]


@dataclass(frozen=True)
class LearnReport:
    """What one `tiny learn` did to the cards folder's learned examples."""

    path: Path
    status: Literal["learned", "unchanged"]
    added: int
    moved: int
    known: int
    dropped: int
    examples: int
    out_of_scope: int
    threshold: DerivedThreshold | None
    threshold_note: str

    def to_json(self) -> dict[str, Any]:
        """Return the report as plain JSON types (`--json`)."""
        return {**asdict(self), "path": str(self.path)}


def learn(
    settings: Settings,
    labelled: Sequence[tuple[str, str | None]],
    transport: httpx.BaseTransport | None = None,
) -> LearnReport:
    """Teach `labelled` (card id, or None for out of scope); rewrite learned.jsonl if it changed."""
    from tiny_cli.routing.threshold import MIN_OUT_OF_SCOPE, derive_threshold

    ws = open_workspace(settings, transport)
    cards = list(ws.cards.values())
    folder = learned_folder(settings)
    with _locked(settings.home, folder):  # two `tiny learn` at once must not lose a lesson
        before = load_learned(folder)
        merged = merge(before, labelled, cards)
        embedder = embedder_for(settings, transport)
        learned, dropped = _capped(merged.learned, embedder, settings.cache_dir)
        derived = derive_threshold(cards, learned, embedder, settings.cache_dir)
        learned = replace(learned, threshold=derived)
        changed = learned != before
        if changed:
            write_learned(learned)
    note = (
        derived.describe()
        if derived is not None
        else f"default threshold: {len(learned.out_of_scope)} out-of-scope examples, "
        f"deriving one needs {MIN_OUT_OF_SCOPE}"
    )
    if settings.threshold is not None:
        note = f"--threshold / TINY_THRESHOLD {settings.threshold:g} applies; {note}"
    return LearnReport(
        path=learned.path,
        status="learned" if changed else "unchanged",
        added=merged.added,
        moved=merged.moved,
        known=merged.known,
        dropped=dropped,
        examples=learned.count(),
        out_of_scope=len(learned.out_of_scope),
        threshold=derived,
        threshold_note=note,
    )


@contextmanager
def _locked(home: Path, folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on the folder's learned examples while reading and rewriting.

    The lock file lives in the data directory, not beside the cards: nothing to commit.
    """
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
    lock = home / "locks" / f"learned-{digest}.lock"
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = lock.open("a")
    except OSError as exc:
        raise ConfigError(f"{lock}: cannot lock the learned examples: {exc.strerror}") from exc
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _capped(learned: Learned, embedder: Embedder, cache_dir: Path) -> tuple[Learned, int]:
    """Drop the most redundant examples of every card (and out of scope) past its cap."""
    from tiny_cli.routing.embed import VectorCache

    cache = VectorCache(cache_dir)
    examples = dict(learned.examples)
    dropped = 0
    for card, tasks in learned.examples.items():
        if len(tasks) > MAX_EXAMPLES_PER_CARD:
            examples[card] = _least_redundant(tasks, MAX_EXAMPLES_PER_CARD, embedder, cache)
            dropped += len(tasks) - MAX_EXAMPLES_PER_CARD
    out = learned.out_of_scope
    if len(out) > MAX_OUT_OF_SCOPE:
        dropped += len(out) - MAX_OUT_OF_SCOPE
        out = _least_redundant(out, MAX_OUT_OF_SCOPE, embedder, cache)
    return replace(learned, examples=examples, out_of_scope=out), dropped


def _least_redundant(
    tasks: Sequence[str], keep: int, embedder: Embedder, cache: VectorCache
) -> tuple[str, ...]:
    """Keep `keep` tasks: repeatedly drop one of the two closest (the one listed later)."""
    import numpy as np

    vectors = cache.embed(embedder, list(tasks))
    cosines = vectors @ vectors.T
    np.fill_diagonal(cosines, -np.inf)
    alive = list(range(len(tasks)))
    while len(alive) > keep:
        sub = cosines[np.ix_(alive, alive)]
        i, j = np.unravel_index(int(np.argmax(sub)), sub.shape)
        alive.pop(max(int(i), int(j)))
    return tuple(tasks[k] for k in alive)
