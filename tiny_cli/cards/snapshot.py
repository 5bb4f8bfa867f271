"""A card set remembered whole: an unchanged folder is not built or checked card by card again.

At 10,000 cards, even with every card file in the card cache (tiny_cli.cards.cache), a load
built 10,000 Cards and re-ran the checks across them (duplicate ids, functions declared
twice, clashing wire names) in every process: 0.4 s of a cached `tiny route`. When a load
ends clean, the snapshot keeps a digest of the folder listing (each card file's name, size,
times, inode), the card ids and files in order, and what commands need of every card: the
routing digest the router's state is keyed by, whether a card names an MCP tool, and the
functions cards declare. The next load with the same listing and salt returns a `CardSet`
that builds a card only when one is asked for; the set passed the cross-card checks when
it was taken. Any change (a file edited, touched, added, removed or renamed; other tools,
other MCP servers, another tiny) is another listing or salt: the full load runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from tiny_cli.cards.basis import CARD_SUFFIXES, NOT_CARDS, card_salt
from tiny_cli.cards.cache import SNAPSHOT_SUFFIX, CardCache, cache_file
from tiny_cli.errors import CardError
from tiny_cli.jsonfile import read_json, write_json
from tiny_cli.tools.mcp_names import original, qualified

if TYPE_CHECKING:  # the checker loads only for a set that is not taken whole
    from tiny_cli.cards.load import Card
    from tiny_cli.tools.mcp_config import McpConfig  # read only where an mcp.yaml is

__all__ = ["CardSet", "Facts", "card_ids", "load_card_set", "routing_digest", "routing_digests"]

SNAPSHOT_VERSION = 2  # bump when what a snapshot holds changes: old ones are then ignored
ROUTING_HEX = 32  # hex digits of one card's routing digest


def routing_digest(card: Card) -> str:
    """Hash what the router's state depends on in one card: id, summary, examples, tools.

    Its tools count by name, those it declares by their description and parameters: the
    router reads them as routing texts (tiny_cli.routing.tooltexts).
    """
    functions = [[f["name"], f.get("description"), f.get("parameters")] for f in card.functions]
    text = json.dumps(
        [card.id, card.summary, list(card.examples), list(card.tools), functions], default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()[:ROUTING_HEX]


def routing_digests(cards: Sequence[Card]) -> str:
    """Every card's routing digest in order, joined (a CardSet has them without its cards)."""
    if isinstance(cards, CardSet):
        return cards.facts.routing
    return "".join(routing_digest(card) for card in cards)


def card_ids(cards: Sequence[Card]) -> tuple[str, ...]:
    """The cards' ids in order (a CardSet has them without building a card)."""
    return cards.ids if isinstance(cards, CardSet) else tuple(card.id for card in cards)


@dataclass(frozen=True)
class Facts:
    """What commands need of every card of a set, kept so that no card is built for it."""

    ids: tuple[str, ...]
    files: tuple[str, ...]  # each card's file, as the card cache names it
    routing: str  # each card's routing digest, ROUTING_HEX hex digits each, in order
    mcp: bool  # some card names a tool of an MCP server
    functions: tuple[tuple[str, Mapping[str, Any]], ...]  # (card id, spec): first of each name

    @classmethod
    def of(cls, cards: Sequence[Card]) -> Facts:
        """The facts of built cards."""
        functions: dict[str, tuple[str, Mapping[str, Any]]] = {}
        for card in cards:
            for spec in card.functions:
                functions.setdefault(spec["name"], (card.id, spec))
        return cls(
            ids=tuple(card.id for card in cards),
            files=tuple(str(card.path or "") for card in cards),
            routing=routing_digests(cards),
            mcp=any(qualified(original(t)) for card in cards for t in card.tools),
            functions=tuple(functions.values()),
        )


class CardSet(Sequence["Card"]):
    """A card set in load order; a card taken from a snapshot is built when first asked for."""

    def __init__(
        self,
        facts: Facts,
        make: Callable[[int], Card],
        base: CardSet | None = None,
        from_snapshot: bool = False,
    ) -> None:
        self.facts = facts
        self.from_snapshot = from_snapshot  # taken whole, not loaded card by card
        self._make = make
        self._cards: dict[int, Card] = {}
        self._base = base  # the set this one adds examples to: it builds the cards
        self._built = 0

    @classmethod
    def of(cls, cards: Sequence[Card]) -> CardSet:
        """The set of cards already built (a load that checked them)."""
        built = tuple(cards)
        return cls(Facts.of(built), built.__getitem__)

    @property
    def ids(self) -> tuple[str, ...]:
        """The cards' ids in order."""
        return self.facts.ids

    @property
    def built(self) -> int:
        """How many cards this set has built (or taken, of built ones): tests count them."""
        return self._base.built if self._base is not None else self._built

    @cached_property
    def by_id(self) -> CardsById:
        """The cards by id, each built when first asked for."""
        return CardsById(self)

    @cached_property
    def _index(self) -> dict[str, int]:
        return {card_id: i for i, card_id in enumerate(self.ids)}

    def index_of(self, card_id: str) -> int:
        """The position of card `card_id`; KeyError when the set has no such card."""
        return self._index[card_id]

    def __len__(self) -> int:
        return len(self.facts.ids)

    @overload
    def __getitem__(self, index: int) -> Card: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Card]: ...

    def __getitem__(self, index: int | slice) -> Card | Sequence[Card]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        i = range(len(self))[index]  # a negative index counts from the end; IndexError past it
        card = self._cards.get(i)
        if card is None:
            card = self._cards[i] = self._make(i)
            self._built += 1
        return card

    def with_examples(self, extra: Mapping[str, Sequence[str]]) -> CardSet:
        """This set with `extra` examples after each card's own (as `with_learned` adds them).

        Only the cards given examples are built; their routing digests are taken anew.
        """
        changed = {}
        for card_id, examples in extra.items():
            if card_id in self._index:
                card = self[self._index[card_id]]
                both = tuple(dict.fromkeys((*card.examples, *examples)))
                changed[self._index[card_id]] = replace(card, examples=both)
        facts = self.facts
        if changed:
            routing = list(_chunks(facts.routing))
            for i, card in changed.items():
                routing[i] = routing_digest(card)
            facts = replace(facts, routing="".join(routing))
        return CardSet(
            facts, lambda i: changed[i] if i in changed else self[i], self, self.from_snapshot
        )


class CardsById(Mapping[str, "Card"]):
    """A CardSet by id: asking whether a card is there, or for the ids, builds none."""

    def __init__(self, cards: CardSet) -> None:
        self.cards = cards

    def __getitem__(self, card_id: str) -> Card:
        return self.cards[self.cards.index_of(card_id)]

    def __contains__(self, card_id: object) -> bool:
        return isinstance(card_id, str) and card_id in self.cards._index

    def __iter__(self) -> Iterator[str]:
        return iter(self.cards.ids)

    def __len__(self) -> int:
        return len(self.cards)


def load_card_set(
    paths: Sequence[Path],
    known_tools: Mapping[str, bool],
    mcp: McpConfig | None = None,
    cache_dir: Path | None = None,
) -> CardSet:
    """Load the cards under `paths` as `load_cards` does; an unchanged set from its snapshot.

    Raise CardError listing every problem, as `load_cards` does. Only a load that checked
    every card (and found nothing wrong) writes the snapshot.
    """
    salt = card_salt(known_tools, mcp)
    seen = listing(paths, (mcp.path,) if mcp is not None else ()) if cache_dir else None
    if cache_dir is None or seen is None:
        return _loaded(paths, known_tools, mcp, cache_dir)
    file = cache_file(cache_dir, paths, SNAPSHOT_SUFFIX)
    facts = _read(file, salt, seen.digest)
    if facts is not None:
        return CardSet(facts, _maker(paths, known_tools, mcp, cache_dir, facts, seen), None, True)
    cards = _loaded(paths, known_tools, mcp, cache_dir)
    _write(file, salt, seen.digest, cards.facts)
    return cards


def _loaded(
    paths: Sequence[Path],
    known_tools: Mapping[str, bool],
    mcp: McpConfig | None,
    cache_dir: Path | None,
) -> CardSet:
    """Load and check every card (the checker is imported only for a set not taken whole)."""
    from tiny_cli.cards.load import load_cards

    return CardSet.of(load_cards(paths, known_tools, mcp, cache_dir))


def _maker(
    paths: Sequence[Path],
    known_tools: Mapping[str, bool],
    mcp: McpConfig | None,
    cache_dir: Path,
    facts: Facts,
    seen: Listing,
) -> Callable[[int], Card]:
    """Build card `i` as its file was when the set was listed, from the card cache.

    A card is its file as it was at load time, however late it is asked for (a server's
    cards do not change under it); only a cache that lost the card makes its file be
    checked again, as it is now.
    """
    memo: list[CardCache] = []  # opened when the first card is asked for

    def make(i: int) -> Card:
        from tiny_cli.cards.load import Problem, check_one

        if not memo:
            memo.append(CardCache.open(cache_dir, paths, card_salt(known_tools, mcp)))
        path = Path(facts.files[i])
        card, problems, _ = check_one(path, known_tools, mcp, memo[0], seen.stamp(facts.files[i]))
        if card is None or card.id != facts.ids[i]:  # it changed while this command ran
            gone = Problem(str(path), None, "id", f"card {facts.ids[i]!r} changed; run again")
            raise CardError(problems or [gone])
        return card

    return make


Row = tuple[str, str, int, int, int, int, int]  # name, link, mode, size, mtime, ctime, inode


@dataclass(frozen=True)
class Listing:
    """What a load of some paths would read: one digest, and each card file's row."""

    digest: str
    rows: tuple[tuple[str, bool, list[Row]], ...]  # (path as given, a folder?, its files' rows)

    def stamp(self, file: str) -> tuple[int, int] | None:
        """The size and mtime `file` (as the card cache names it) had when it was listed."""
        return self._stamps.get(file)

    @cached_property
    def _stamps(self) -> dict[str, tuple[int, int]]:
        stamps = {}
        for path, folder, rows in self.rows:
            prefix = str(Path(path))
            for row in rows:
                stamps[_file_key(prefix, folder, row[0])] = (row[3], row[4])
        return stamps


def _file_key(prefix: str, folder: bool, name: str) -> str:
    """The name card_files gives a file (Path(entry.path): no leading './')."""
    if not folder:
        return prefix
    return name if prefix == "." else os.path.join(prefix, name)


def listing(paths: Sequence[Path], skip: Sequence[Path] = ()) -> Listing | None:
    """List what a load of `paths` would read: each card file's name, size, times, inode.

    No Path per file: one scan and one stat per file. None when something cannot be listed
    (the full load then says what is wrong).
    """
    skipped = {os.path.realpath(p) for p in skip}
    digest = hashlib.sha256(json.dumps([SNAPSHOT_VERSION, sorted(skipped)]).encode())
    found = []
    try:
        for path in paths:
            name, folder = os.fspath(path), os.path.isdir(path)
            rows = _rows(name, skipped) if folder else [_row(name, "", os.stat(name))]
            # pickle writes the same value as the same bytes, three times faster than repr
            digest.update(pickle.dumps([name, rows], protocol=5))
            found.append((name, folder, rows))
    except OSError:
        return None
    return Listing(digest.hexdigest(), tuple(found))


def _rows(folder: str, skipped: set[str]) -> list[Row]:
    """One row per card file of `folder` (card_files' choice of files), in name order."""
    base = os.path.realpath(folder) if skipped else folder
    rows = []
    with os.scandir(folder) as entries:
        for entry in entries:  # inlined (no call per file): a route at 10,000 cards runs it all
            name = entry.name
            if not name.endswith(CARD_SUFFIXES) or name in NOT_CARDS:
                continue
            if name.startswith(".") and not _card_name(name):
                continue
            link = os.readlink(entry.path) if entry.is_symlink() else ""
            if skipped and _real(entry.path, link, base, name) in skipped:
                continue
            st = entry.stat()
            # ctime and inode too: an edit that keeps size and mtime still changes the ctime
            rows.append(
                (name, link, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            )
    return sorted(rows)


def _card_name(name: str) -> bool:
    """card_files' test of a name, without splitext's cost for the names of most files."""
    if not name.endswith(CARD_SUFFIXES) or name in NOT_CARDS:
        return False
    return not name.startswith(".") or os.path.splitext(name)[1] in CARD_SUFFIXES


def _real(path: str, link: str, base: str, name: str) -> str:
    """The file's real path, as card_files compares it (only a link costs a system call)."""
    return os.path.realpath(path) if link else os.path.join(base, name)


def _row(name: str, link: str, st: os.stat_result) -> Row:
    # ctime and inode too: an edit that keeps size and mtime still changes the ctime
    return (name, link, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _read(file: Path, salt: str, seen: str) -> Facts | None:
    """The snapshot's facts, if it was taken of this listing with this salt."""
    data = read_json(file, salt)
    if data is None or data.get("listing") != seen:
        return None
    try:
        facts = Facts(
            ids=tuple(data["ids"]),
            files=tuple(data["files"]),
            routing=data["routing"],
            mcp=data["mcp"],
            functions=tuple((card_id, spec) for card_id, spec in data["functions"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
    return facts if _well_formed(facts) and data.get("sha") == _sha(facts) else None


def _well_formed(facts: Facts) -> bool:
    """Tell whether facts read back are as `_write` wrote them (a damaged snapshot is stale)."""
    if type(facts.routing) is not str or type(facts.mcp) is not bool:
        return False
    sizes = {len(facts.ids), len(facts.files), len(facts.routing) / ROUTING_HEX}
    texts = all(type(v) is str for v in (*facts.ids, *facts.files))
    functions = all(
        type(c) is str and type(s) is dict and type(s.get("name")) is str
        for c, s in facts.functions
    )
    return len(sizes) == 1 and texts and functions


def _sha(facts: Facts) -> str:
    """A digest of the facts: an edited snapshot no longer matches it, and is stale."""
    digest = hashlib.sha256("\0".join((*facts.ids, "", *facts.files, "", facts.routing)).encode())
    digest.update(json.dumps([facts.mcp, facts.functions], sort_keys=True).encode())
    return digest.hexdigest()


def _write(file: Path, salt: str, seen: str, facts: Facts) -> None:
    data = {
        "salt": salt,
        "listing": seen,
        "ids": facts.ids,
        "files": facts.files,
        "routing": facts.routing,
        "mcp": facts.mcp,
        "functions": facts.functions,
        "sha": _sha(facts),
    }
    write_json(file, data)


def _chunks(routing: str) -> Iterator[str]:
    return (routing[i : i + ROUTING_HEX] for i in range(0, len(routing), ROUTING_HEX))
