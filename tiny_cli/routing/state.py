"""A built router, saved: it loads in one read instead of embedding, decomposing and indexing.

The state is keyed by a hash of everything it was built from — each card's id, summary and
examples, the out-of-scope examples, the embedder's fingerprint, the background and the
router's settings — so a changed card is a new key, never a stale state. It lives in the
cache directory as a folder per key (arrays in .npy files, BM25's matrix too, the rest in
JSON); at most KEEP_STATES are kept. A state that cannot be read is rebuilt.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tiny_cli.cards.snapshot import routing_digests
from tiny_cli.errors import ConfigError
from tiny_cli.routing.lexical import Lexical
from tiny_cli.routing.space import CardSpace, space_from_parts, space_parts

if TYPE_CHECKING:  # cards from the snapshot: the checker loads only if a card is built
    from tiny_cli.cards.load import Card

__all__ = ["KEEP_STATES", "STATE_VERSION", "Saved", "load_state", "save_state", "state_key"]

STATE_VERSION = 3  # bump when what a router computes changes: old states are then ignored
KEEP_STATES = 4  # card sets whose state is kept (a bench, a project, its tests)
STATE_DIR = "router"
TEXTS_FILE = "texts.json"  # read only when a text is shown


@dataclass(frozen=True)
class Saved:
    """What a built router is, besides its cards and embedder."""

    space: CardSpace
    lexical: Lexical
    out_of_scope: np.ndarray
    scales: tuple[float, float, float, float]  # loc, scale, confidence loc, confidence scale


def state_key(
    cards: Sequence[Card], out_of_scope: Sequence[str], embedder: str, settings: Sequence[object]
) -> str:
    """Hash everything a router is built from (`settings`: knn, margin, the background's sha).

    A card counts by its routing digest, which a card set taken whole has without its cards.
    """
    digest = hashlib.sha256(f"{STATE_VERSION}\0{embedder}\0{list(settings)!r}".encode())
    digest.update(routing_digests(cards).encode())  # fixed-width hex: the cards end unambiguously
    digest.update(json.dumps(list(out_of_scope)).encode())
    return digest.hexdigest()[:32]


def load_state(cache_dir: Path | None, key: str) -> Saved | None:
    """Return the saved state for `key`, or None when there is none or it cannot be read."""
    if cache_dir is None:
        return None
    folder = cache_dir / STATE_DIR / key
    try:
        meta = json.loads((folder / "meta.json").read_text("utf-8"))
        arrays = {
            name: np.load(folder / f"{name}.npy", allow_pickle=False) for name in meta["arrays"]
        }
        space = space_from_parts(arrays, meta["knn"], _reader(folder / TEXTS_FILE))
        saved = Saved(space, Lexical.load(folder), arrays["out_of_scope"], tuple(meta["scales"]))
    except (OSError, ValueError, KeyError, TypeError):  # missing, partial or from elsewhere
        return None
    with contextlib.suppress(OSError):
        os.utime(folder)  # most recently used: the last one pruned
    return saved


def save_state(cache_dir: Path | None, key: str, saved: Saved) -> None:
    """Write the state for `key` atomically (a temporary folder, then a rename); prune old ones."""
    if cache_dir is None:
        return

    root = cache_dir / STATE_DIR
    arrays, space = space_parts(saved.space)
    arrays = {**arrays, "out_of_scope": saved.out_of_scope}
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    except OSError:  # an unusable cache directory: route without saving
        return
    try:
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        saved.lexical.save(tmp)
        (tmp / TEXTS_FILE).write_text(json.dumps(space, ensure_ascii=False), "utf-8")
        meta = {"arrays": sorted(arrays), "knn": saved.space.knn, "scales": list(saved.scales)}
        (tmp / "meta.json").write_text(json.dumps(meta, ensure_ascii=False), "utf-8")
        os.replace(tmp, root / key)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # a cache: failing to write it is not an error
        return
    _prune(root)


def _reader(path: Path) -> Callable[[], dict[str, Any]]:
    """Read the texts when first asked (the state was just marked most recent: kept)."""

    def read() -> dict[str, Any]:
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{path}: the saved router state went away while in use ({exc}); run again"
            ) from exc
        return data if isinstance(data, dict) else {}

    return functools.cache(read)


def _prune(root: Path) -> None:
    states = sorted(
        (p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
    )
    for old in states[:-KEEP_STATES]:
        shutil.rmtree(old, ignore_errors=True)
