"""A cards folder's index: which files are cards, and what the check of each unchanged one found.

Checking 10,000 card files costs seconds in every process; the index keeps, per accepted card
file, its stamp and the data its check accepted, so only a file whose stamp differs is checked
again. The stamp is the size, mtime, ctime and inode: `cp -p`, `rsync -t` or `touch -r` still
change the ctime, a file renamed over has another inode. Whatever else a check depends on is in
the salt (`card_salt`): another salt, another index, one JSON file per set of card folders. An
entry not as the index wrote it is stale. A file changed less than `RACY_NS` before the index
was written is checked again too: on coarse timestamps (FAT: 2 s) an edit right after a check
can leave the whole stamp as it was (git's "racily clean" entries, handled as git does).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tiny_cli._version import __version__
from tiny_cli.cards.card import Card, Problem
from tiny_cli.tools.args_check import fast_pass
from tiny_cli.tools.mcp_config import MCP_FILENAMES, McpConfig
from tiny_cli.userfiles import read_json, write_json

__all__ = [
    "CACHE_DIR",
    "CARD_SUFFIXES",
    "CLAUDE_TOOLS",
    "NOT_CARDS",
    "SCHEMA_FILE",
    "CardIndex",
    "Listing",
    "card_salt",
    "card_schema",
    "cards_by_folder",
    "is_valid",
    "list_cards",
    "longest",
    "mapping_text",
    "schema_text",
]


CARD_SUFFIXES = (".yaml", ".yml", ".md")
# a folder's MCP servers, and what the folder is for (its README.md): never read as cards
NOT_CARDS = {*MCP_FILENAMES, "README.md", "Readme.md", "readme.md"}
# Claude Code's tools -> tiny's built-in tools that do that job; any other Claude tool
# (Bash, Edit, Write, Task, WebSearch, ...) has none and is a problem, never dropped
CLAUDE_TOOLS: dict[str, tuple[str, ...]] = {
    "Read": ("docs_search",),  # over the knowledge folder (TINY_DOCS), not the file system
    "Grep": ("docs_search",),
    "Glob": ("docs_search",),
    "WebFetch": ("http_get", "html_to_text"),
}


def cards_by_folder(cards: Sequence[Card]) -> dict[Path | None, list[Card]]:
    """The cards of each folder (None: a card from no file), in order, as a route reads one."""
    folders: dict[Path | None, list[Card]] = {}
    for card in cards:
        folders.setdefault(card.path.parent if card.path else None, []).append(card)
    return folders


def mapping_text() -> str:
    """The table in one line: `Read, Grep, Glob -> docs_search; WebFetch -> http_get + ...`."""
    by_target: dict[tuple[str, ...], list[str]] = {}
    for claude, tiny in CLAUDE_TOOLS.items():
        by_target.setdefault(tiny, []).append(claude)
    return "; ".join(f"{', '.join(c)} -> {' + '.join(t)}" for t, c in by_target.items())


# --- the card schema ------------------------------------------------------------------------

SCHEMA_FILE = "card.schema.json"


def is_valid(data: Any) -> bool:
    """True if `data` satisfies the card schema (compiled, no jsonschema); False: ask jsonschema."""
    return fast_pass(card_schema(), data)


@cache
def card_schema() -> dict[str, Any]:
    """Return the card JSON Schema shipped inside the package."""
    return json.loads(schema_text())


def schema_text() -> str:
    """Return card.schema.json as shipped inside the package."""
    return Path(__file__).with_name(SCHEMA_FILE).read_text("utf-8")  # the package is files


def longest(pattern: str) -> int:
    """The most characters a name the schema's `pattern` takes: 1 + the N of its first `{0,N}`."""
    return int(re.findall(r"\{0,(\d+)\}", pattern)[0]) + 1


# --- the context a check rests on ---------------------------------------------------------


def card_salt(known_tools: Mapping[str, bool], mcp: McpConfig | None) -> str:
    """Everything a card's check depends on besides its file."""
    parts = [__version__, schema_text(), sorted(known_tools.items()),
             sorted(mcp.servers) if mcp is not None else None, CLAUDE_TOOLS]  # fmt: skip
    return hashlib.sha256(repr(parts).encode()).hexdigest()


CACHE_DIR = "cards"
# bump when what an entry holds, or what a check accepts, changes: old indexes are ignored
INDEX_VERSION = 8
# a file changed this close to the index's writing may change again unseen: FAT's mtime step
RACY_NS = 2_000_000_000

Stamp = tuple[int, int]  # a file's size and its times and inode (`_stamp`), when listed


@dataclass(frozen=True)
class Listing:
    """The card files under some paths, in load order, and what is wrong with the paths."""

    files: list[tuple[Path, Stamp]]
    problems: list[Problem]

    @property
    def paths(self) -> list[Path]:
        """The card files alone."""
        return [path for path, _ in self.files]


def list_cards(paths: Sequence[Path], skip: Sequence[Path] = ()) -> Listing:
    """Expand folders into their card files, sorted by name; report paths that cannot be read."""
    # mcp.yaml, README.md, `skip`, hidden files and other suffixes are no cards (some a problem
    # named alone); one scan per folder, one stat per file: at 10,000 cards every call shows
    files: list[tuple[Path, Stamp]] = []
    problems: list[Problem] = []
    skipped = {p.resolve() for p in skip}
    listed: set[Path] = set()  # files of the paths before: a file named twice is read once
    for path in paths:
        before = len(files)
        try:
            _named(path, skipped, files, problems)
        except OSError as exc:  # unreadable folder, or a file gone while listed
            problems.append(Problem(str(path), None, "path", f"cannot read: {exc.strerror}"))
        if len(paths) > 1:  # only then: a resolve per file shows at 10,000 cards
            files[before:] = _unlisted(files[before:], listed)
    return Listing(files, problems)


def _named(
    path: Path, skipped: set[Path], files: list[tuple[Path, Stamp]], problems: list[Problem]
) -> None:
    """Add one path given: a folder's card files, or a file judged as its folder would judge it."""
    if path.is_dir():
        _folder(path, skipped, files, problems)
    elif not path.exists() and not path.is_symlink():
        problems.append(Problem(str(path), None, "path", "no such file or directory"))
    elif path.name not in NOT_CARDS and not (skipped and path.resolve() in skipped):
        why = _not_a_card(path.name) or _refusal(path, path.parent, path.is_symlink())
        if why:
            problems.append(Problem(str(path), None, "file", why))
        else:
            files.append((path, _stamp(path.stat())))


def _not_a_card(name: str) -> str | None:
    """Say why a file named on its own is no card file, where its folder would skip it."""
    if name.startswith("."):
        return "a hidden file (its name starts with '.'), which a cards folder skips; not a card"
    suffix = os.path.splitext(name)[1]
    if suffix in CARD_SUFFIXES:
        return None
    read = ", ".join(f"*{s}" for s in CARD_SUFFIXES)
    tip = f"; rename it to end in {suffix.lower()}" if suffix.lower() in CARD_SUFFIXES else ""
    return f"not a card file: a cards folder reads only {read} files, so skips it{tip}"


def _unlisted(found: list[tuple[Path, Stamp]], listed: set[Path]) -> list[tuple[Path, Stamp]]:
    """The files of one path that no path before it listed; they join `listed`."""
    resolved = [(item, item[0].resolve()) for item in found]
    kept = [item for item, real in resolved if real not in listed]
    listed.update(real for _, real in resolved)
    return kept


def _folder(
    folder: Path, skipped: set[Path], files: list[tuple[Path, Stamp]], problems: list[Problem]
) -> None:
    """Add a folder's card files (and why any of them is not read) in name order."""
    base = folder.resolve() if skipped else folder
    with os.scandir(folder) as entries:
        found = sorted(entries, key=lambda entry: entry.name)
    for entry in found:
        # hidden (an editor's `.#web.yaml`, macOS's `._web.yaml`), another suffix, a README
        if entry.name in NOT_CARDS or _not_a_card(entry.name) is not None:
            continue
        path = folder / entry.name  # a join parses only the name, not the whole entry.path
        link = entry.is_symlink()
        # only a link needs resolving: a system call per file shows at 10,000 cards
        if skipped and (path.resolve() if link else base / entry.name) in skipped:
            continue
        refusal = _refusal(path, folder, link) if link or not entry.is_file() else None
        if refusal:
            problems.append(Problem(str(path), None, "file", refusal))
            continue
        files.append((path, _stamp(entry.stat())))


def _stamp(found: os.stat_result) -> Stamp:
    """A file's size, and its mtime, ctime and inode packed into one number (no hash: cheaper)."""
    return found.st_size, (found.st_mtime_ns << 128) + (found.st_ctime_ns << 64) + found.st_ino


def _refusal(path: Path, folder: Path, link: bool) -> str | None:
    """Say why a file in a cards folder is not read: a FIFO hangs, a link may leave it."""
    if link:
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):  # a loop (RuntimeError before Python 3.13) or dangling
            return "a symlink that leads nowhere (a loop, or a missing target); not read"
        if not target.is_relative_to(folder.resolve()):
            return "a symlink to outside the cards folder; not read"
    if not path.is_file():
        return "not a regular file; not read"
    return None


class CardIndex:
    """The accepted data of unchanged card files, for one salt."""

    def __init__(
        self,
        file: Path | None,
        salt: str,
        entries: dict[str, list[Any]],
        written: int = 0,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.file = file
        self.salt = salt
        self._entries = entries
        self._written = written  # when the index was written (ns), as its own entry says
        self._clock = clock
        self._dirty = False

    @classmethod
    def open(
        cls,
        cache_dir: Path | None,
        paths: Sequence[Path],
        salt: str,
        clock: Callable[[], int] = time.time_ns,
    ) -> CardIndex:
        """Open the index of the card folders `paths` (nothing is read when there is none)."""
        if cache_dir is None:
            return cls(None, salt, {}, clock=clock)
        salt = f"{INDEX_VERSION}:{salt}"
        file = index_file(cache_dir, paths)
        data = read_json(file, salt) or {}
        entries, written = data.get("files"), data.get("written")
        entries = entries if isinstance(entries, dict) else {}
        return cls(file, salt, entries, written if type(written) is int else 0, clock)

    def get(self, path: Path, stamp: Stamp) -> tuple[dict[str, Any], int | None] | None:
        """Return the accepted data and id line of `path`, if the file is as it was then."""
        entry = self._entries.get(str(path))
        if entry is None:
            return None
        # changed, damaged (not as `put` wrote it) or racy: forgotten until it passes again
        racy = self._written - RACY_NS
        if not _well_formed(entry) or entry[:2] != [*stamp] or _changed_ns(stamp) > racy:
            self.forget(path)
            return None
        return entry[2], entry[3]

    def forget(self, path: Path) -> None:
        """Drop `path`'s entry: it is stale, or what it held could not be built into a card."""
        if self._entries.pop(str(path), None) is not None:
            self._dirty = True

    def put(self, path: Path, stamp: Stamp, data: Mapping[str, Any], id_line: int | None) -> None:
        """Remember that `path`, as it was when listed (`stamp`), was accepted with `data`."""
        try:
            seal = _seal(data, id_line)  # YAML holds what JSON cannot (dates): not kept then
        except (TypeError, ValueError):
            return
        self._entries[str(path)] = [*stamp, dict(data), id_line, seal]
        self._dirty = True

    def save(self, keep: Sequence[Path]) -> None:
        """Write the index if it changed, dropping files no longer among `keep`."""
        wanted = {str(p) for p in keep}
        stale = set(self._entries) - wanted
        if self.file is None or not (self._dirty or stale):
            return
        entries = {k: v for k, v in self._entries.items() if k in wanted}
        write_json(self.file, {"salt": self.salt, "written": self._clock(), "files": entries})


def _changed_ns(stamp: Stamp) -> int:
    """When a file last changed, as its stamp says: the later of its mtime and ctime (ns)."""
    times = stamp[1]
    return max(times >> 128, (times >> 64) & (2**64 - 1))


def _well_formed(entry: Any) -> bool:
    """Tell whether an entry is as `put` wrote it: [size, times, data, id line, seal]."""
    if type(entry) is not list or len(entry) != 5:
        return False
    size, times, data, line, seal = entry
    ints = type(size) is int and type(times) is int
    if not (ints and type(data) is dict and (line is None or type(line) is int)):
        return False
    try:
        return seal == _seal(data, line)
    except (TypeError, ValueError):
        return False


def _seal(data: Mapping[str, Any], id_line: int | None) -> str:
    text = json.dumps([data, id_line], sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def index_file(cache_dir: Path, paths: Sequence[Path]) -> Path:
    """The index file of the card folders `paths`."""
    # the bytes of the paths: under an ASCII locale a UTF-8 name is a str no codec takes whole
    where = hashlib.sha256(b"\0".join(os.fsencode(p.resolve()) for p in paths)).hexdigest()
    return cache_dir / CACHE_DIR / f"{where[:24]}.json"
