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
import stat
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tiny_cli.cards.card import Card
from tiny_cli.routing.lexical import Lexical, read_saved
from tiny_cli.routing.space import CardSpace, space_from_parts, space_parts

__all__ = [
    "KEEP_STATES",
    "STATE_VERSION",
    "Saved",
    "cards_key",
    "load_state",
    "save_state",
    "state_key",
]

STATE_VERSION = 8  # bump when what a router computes changes: old states are then ignored
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
    """Hash everything a router is built from (`settings`: knn, margin, the background's sha)."""
    digest = hashlib.sha256(f"{STATE_VERSION}\0{embedder}\0{list(settings)!r}".encode())
    digest.update(_views(cards))
    digest.update(json.dumps(list(out_of_scope)).encode())
    return digest.hexdigest()[:32]


def cards_key(cards: Sequence[Card]) -> str:
    """Hash what routing reads of `cards`, as `state_key` does (a derived threshold's basis)."""
    return hashlib.sha256(_views(cards)).hexdigest()[:32]


def _views(cards: Sequence[Card]) -> bytes:
    return json.dumps([_routing_view(c) for c in cards], default=str).encode()


def _routing_view(card: Card) -> list[Any]:
    """What the router reads of one card: id, summary, examples, tools, declared functions."""
    functions = [[f["name"], f.get("description"), f.get("parameters")] for f in card.functions]
    view = [card.id, card.summary, list(card.examples), list(card.tools), functions]
    # only when there are some: the view of a card without them is what it always was
    return [*view, list(card.generated)] if card.generated else view


def load_state(cache_dir: Path | None, key: str) -> Saved | None:
    """Return the saved state for `key`, or None when there is none or it cannot be read."""
    if cache_dir is None:
        return None
    folder = cache_dir / STATE_DIR / key
    try:
        saved = _loaded(folder)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        saved = None  # missing, partial, damaged or from elsewhere: built again
    if saved is None:
        # removed, so the state built again is saved in its place (a rename cannot replace it)
        shutil.rmtree(folder, ignore_errors=True)
        return None
    with contextlib.suppress(OSError):
        os.utime(folder)  # most recently used: the last one pruned
    return saved


def _loaded(folder: Path) -> Saved | None:
    """Read the state in `folder`; None when a file is not as it was written."""
    meta = json.loads((folder / "meta.json").read_text("utf-8"))
    if not _intact(folder, meta):  # an edited or truncated file: stale, built again
        return None
    arrays = {name: np.load(folder / f"{name}.npy", allow_pickle=False) for name in meta["arrays"]}
    space = space_from_parts(arrays, meta["knn"], _reader(folder / TEXTS_FILE))
    return Saved(space, Lexical.load(folder), arrays["out_of_scope"], tuple(meta["scales"]))


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
        sizes = {p.name: p.stat().st_size for p in tmp.iterdir()}
        meta = {
            "arrays": sorted(arrays),
            "knn": saved.space.knn,
            "scales": list(saved.scales),
            "sizes": sizes,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, ensure_ascii=False), "utf-8")
        os.replace(tmp, root / key)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # a cache: failing to write it is not an error
        return
    with contextlib.suppress(OSError):  # nor failing to prune it: a route must not fail
        _prune(root)


def _intact(folder: Path, meta: Any) -> bool:
    """Tell whether a state's files are the sizes it wrote, and its meta the types it wrote."""
    if type(meta) is not dict or type(meta.get("sizes")) is not dict:
        return False
    scales = meta.get("scales")
    if not isinstance(scales, list) or len(scales) != 4 or type(meta.get("knn")) is not int:
        return False
    if not all(type(v) in (int, float) for v in scales) or type(meta.get("arrays")) is not list:
        return False
    sizes: dict[str, Any] = meta["sizes"]
    if TEXTS_FILE not in sizes or len(sizes) <= len(meta["arrays"]):
        return False
    if not all(os.stat(folder / name).st_size == size for name, size in sizes.items()):
        return False
    # the JSON files read only later: a crash before the data reached the disk can leave
    # zeros where the text was, at the size written
    return all(_json_ends(folder / name) for name in sizes if name.endswith(".json"))


def _json_ends(path: Path) -> bool:
    """Tell whether a JSON file `save_state` wrote starts and ends as a list or an object."""
    with path.open("rb") as file:
        first = file.read(1)
        file.seek(-1, os.SEEK_END)
        return first + file.read(1) in (b"{}", b"[]")


def _reader(path: Path) -> Callable[[], dict[str, Any]]:
    """Read the texts when first asked (the state was just marked most recent: kept)."""
    return functools.cache(lambda: read_saved(path, _texts_ok))


def _texts_ok(data: Any) -> bool:
    """Tell whether texts.json holds what `save_state` wrote: texts and owners, typed."""
    if type(data) is not dict or type(data.get("texts")) is not list:
        return False
    owners = data.get("owners")
    if type(owners) is not list or not all(type(rows) is list for rows in data["texts"]):
        return False
    pairs = (pair for rows in data["texts"] for pair in rows)
    texts = all(type(p) is list and len(p) == 2 and _strs(p) for p in pairs)
    return texts and all(
        type(o) is list and len(o) == 3 and type(o[0]) is int and _strs(o[1:]) for o in owners
    )


def _strs(values: list[Any]) -> bool:
    return all(type(v) is str for v in values)


def _prune(root: Path) -> None:
    """Remove all but the KEEP_STATES most recently used states."""
    # another process saving at once may remove a state between the listing and its stat
    found = ((p, _used(p)) for p in root.iterdir() if not p.name.startswith("."))
    states = sorted(((used, p) for p, used in found if used is not None), key=lambda s: s[0])
    for _, old in states[:-KEEP_STATES]:
        shutil.rmtree(old, ignore_errors=True)


def _used(folder: Path) -> float | None:
    """Return when a state folder was last used; None when it is no folder, or gone."""
    try:
        info = folder.stat()
    except OSError:
        return None
    return info.st_mtime if stat.S_ISDIR(info.st_mode) else None
