"""Checked cards, remembered: a card file that has not changed is not parsed or checked again.

At 10,000 cards, reading and checking every file costs seconds in every process. The cache
keeps, per card file, its size, mtime and the data its check accepted; a file whose size or
mtime differ is checked again, and a file with problems is never cached (its problems are
reported fresh every time). Everything else a check depends on — tiny's version, the card
schema, the registered tools and whether they write, the MCP servers — goes into the salt:
another salt, another cache. It is one JSON file per card folder under the cache directory.

Beside it lies the folder's snapshot (tiny_cli.cards.snapshot): what a clean load of the
whole set found, read instead of every card while the folder's listing stays the same.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tiny_cli.jsonfile import read_json, write_json
from tiny_cli.jsonfile import stamp as file_stamp

__all__ = ["CardCache", "cache_file"]

CACHE_DIR = "cards"
SNAPSHOT_SUFFIX = ".set.json"


class CardCache:
    """The accepted data of unchanged card files, for one salt."""

    def __init__(self, file: Path | None, salt: str, entries: dict[str, list[Any]]) -> None:
        self.file = file
        self.salt = salt
        self._entries = entries
        self._dirty = False

    @classmethod
    def open(cls, cache_dir: Path | None, paths: Sequence[Path], salt: str) -> CardCache:
        """Open the cache of the card folders `paths` (nothing is read when there is none)."""
        if cache_dir is None:
            return cls(None, salt, {})
        file = cache_file(cache_dir, paths)
        data = read_json(file, salt)
        entries = data.get("files") if data is not None else None
        return cls(file, salt, entries if isinstance(entries, dict) else {})

    def get(
        self, path: Path, stamp: tuple[int, int] | None = None
    ) -> tuple[dict[str, Any], int | None] | None:
        """Return the accepted data and id line of `path`, if the file is as it was then.

        `stamp`: the size and mtime to compare with (default: the file's now).
        """
        entry = self._entries.get(str(path))
        if entry is None:
            return None
        stamp = stamp or file_stamp(path)
        # changed, or damaged (not as `put` wrote it): forget it until it passes again
        if stamp is None or not _well_formed(entry) or entry[:2] != list(stamp):
            del self._entries[str(path)]
            self._dirty = True
            return None
        return entry[2], entry[3]

    def forget(self, path: Path) -> None:
        """Drop `path`'s entry: what it held could not be built into a card (damaged)."""
        if self._entries.pop(str(path), None) is not None:
            self._dirty = True

    def put(self, path: Path, data: Mapping[str, Any], id_line: int | None) -> None:
        """Remember that `path`, as it is now, was accepted with `data`."""
        stamp = file_stamp(path)
        if stamp is None:
            return
        try:
            json.dumps(data)  # YAML can hold what JSON cannot (dates): such a card is not cached
        except (TypeError, ValueError):
            return
        self._entries[str(path)] = [*stamp, dict(data), id_line]
        self._dirty = True

    def save(self, keep: Sequence[Path]) -> None:
        """Write the cache if it changed, dropping files no longer among `keep`."""
        wanted = {str(p) for p in keep}
        stale = set(self._entries) - wanted
        if self.file is None or not (self._dirty or stale):
            return
        entries = {k: v for k, v in self._entries.items() if k in wanted}
        write_json(self.file, {"salt": self.salt, "files": entries})


def _well_formed(entry: Any) -> bool:
    """Tell whether an entry has the shape `put` writes: [size, mtime, data, id line]."""
    if type(entry) is not list or len(entry) != 4:
        return False
    size, mtime, data, line = entry
    ints = all(type(v) is int for v in (size, mtime))
    return ints and type(data) is dict and (line is None or type(line) is int)


def cache_file(cache_dir: Path, paths: Sequence[Path], suffix: str = ".json") -> Path:
    """The cache file of the card folders `paths` (`suffix`: the card cache or its snapshot)."""
    where = hashlib.sha256("\0".join(str(p.resolve()) for p in paths).encode()).hexdigest()
    return cache_dir / CACHE_DIR / f"{where[:24]}{suffix}"
