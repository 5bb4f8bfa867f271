"""An MCP server's tools grouped into cards: few tools one card, more a few of related tools.

Read-only tools and tools that write never share a card. A server with more than CARD_TOOLS
of one kind is split by the tools' texts (names and descriptions as stemmed words, weighted by
how rare a word is on that server): the two most alike groups merge while they fit in a card.
Ties go to the smaller pair, then to the names' order, so the same tools give the same cards.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from itertools import combinations

from tiny_cli.cards.index import card_schema, longest
from tiny_cli.text import stem, tokenize
from tiny_cli.tools.mcp_listing import ListedTool

__all__ = ["CARD_TOOLS", "CardPlan", "plan_cards", "summary_of"]

CARD_TOOLS = 8  # tools in one imported card at most: a small model picks well among few
SENTENCE_CHARS = 140  # of one tool's description in a summary
NAME_WEIGHT = 3
RELATED = 0.05
MAX_GROUPS_PER_CARD = 3  # groups at most: this times the cards the tools need at least

# verbs say what a tool does, not which things: a card's id names the things
VERBS = frozenset((
    "get", "list", "set", "create", "update", "delete", "add", "remove", "search", "find",
    "read", "write", "fetch", "put", "post", "make", "new", "edit", "run", "query", "show",
    "move", "send", "cancel", "close", "open", "mark", "change", "complete",
))  # fmt: skip
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
Vector = dict[str, float]


@dataclass(frozen=True)
class CardPlan:
    """One card to write: its id, server, tools (names on the server) and whether it writes."""

    id: str
    server: str
    tools: tuple[str, ...]
    writes: bool
    summary: str

    @property
    def qualified(self) -> list[str]:
        """The card's allowlist: `server.tool` for each tool."""
        return [f"{self.server}.{name}" for name in self.tools]


def plan_cards(
    server: str, tools: Sequence[ListedTool], kept: Mapping[str, Sequence[str]] | None = None
) -> list[CardPlan]:
    """Group one server's tools into cards: readers first, then writers."""
    # `kept` (id -> tool names: unedited cards of an earlier import) keep their ids and the
    # tools still there; a new tool joins the most alike that fits: no reshuffle of every card
    about = {t.name: t for t in tools}
    seeds = _seeds(about, kept or {})
    groups: list[tuple[str | None, bool, list[str]]] = []
    for writes in (False, True):
        placed = {n for names in seeds[writes].values() for n in names}
        new = sorted(t.name for t in tools if t.writes == writes and t.name not in placed)
        grouped = _groups(seeds[writes], [about[n] for n in new], about)
        groups += [(card_id, writes, names) for card_id, names in grouped]
    ids = _ids(server, groups)
    return [
        CardPlan(card_id, server, tuple(names), writes,
                 summary_of(server, [about[n] for n in names], writes))
        for card_id, (_, writes, names) in zip(ids, groups, strict=True)
    ]  # fmt: skip


def _seeds(
    about: Mapping[str, ListedTool], kept: Mapping[str, Sequence[str]]
) -> dict[bool, dict[str, list[str]]]:
    """The kept cards' tools still on the server, by kind: a card is of its tools' main kind,
    and a tool that changed kind leaves it."""
    seeds: dict[bool, dict[str, list[str]]] = {False: {}, True: {}}
    for card_id, names in sorted(kept.items()):
        have = [n for n in names if n in about]
        if have:
            writes = 2 * sum(about[n].writes for n in have) >= len(have)
            seeds[writes][card_id] = sorted(n for n in have if about[n].writes == writes)
    return seeds


def summary_of(server: str, tools: Sequence[ListedTool], writes: bool) -> str:
    """A summary from the tools' descriptions, within the schema's length."""
    head = f"{'Reads' if not writes else 'Changes'} through the MCP server {server}: "
    parts = [_sentence(t) for t in tools]
    text = head + "; ".join(parts) + "."
    most = card_schema()["properties"]["summary"]["maxLength"]
    if len(text) <= most:
        return text
    cut = text[: most - 1].rsplit(" ", 1)[0]
    return cut.rstrip(" ;,.") + "…"


def _sentence(tool: ListedTool) -> str:
    """A tool's first sentence (or its name in words), without the closing full stop."""
    text = re.split(r"(?<=[.!?])\s", tool.description, maxsplit=1)[0].strip()
    text = text or _words_of_name(tool.name)
    if len(text) > SENTENCE_CHARS:
        text = text[: SENTENCE_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return text.rstrip(".")


def _words_of_name(name: str) -> str:
    return " ".join(w.lower() for w in re.split(r"[^0-9A-Za-z]+", _CAMEL.sub(" ", name)) if w)


def _groups(
    seeds: Mapping[str, list[str]], new: list[ListedTool], about: Mapping[str, ListedTool]
) -> list[tuple[str | None, list[str]]]:
    """Split one kind of tools into groups of at most CARD_TOOLS related ones: related groups
    merge first, then, while there are too many groups, the most alike that fit."""
    total = len(new) + sum(map(len, seeds.values()))
    if not seeds and total <= CARD_TOOLS:
        return [(None, [t.name for t in new])] if new else []
    groups = _Groups(seeds, new, about)
    most = 1 if total <= CARD_TOOLS else MAX_GROUPS_PER_CARD * math.ceil(total / CARD_TOOLS)
    while groups.merge(RELATED) or (len(groups.members) > most and groups.merge(-1.0)):
        pass
    return sorted(
        ((groups.fixed.get(i), sorted(names)) for i, names in groups.members.items()),
        key=lambda group: group[1],
    )


class _Groups:
    """Groups of tools being merged, and the pairs that may merge in a heap, most alike first
    (a pair's entry goes stale when one of its groups merges, which pushes the new pairs)."""

    def __init__(
        self, seeds: Mapping[str, list[str]], new: list[ListedTool], about: Mapping[str, ListedTool]
    ) -> None:
        start = [list(names) for names in seeds.values()] + [[t.name] for t in new]
        self.members = dict(enumerate(start))
        self.fixed = dict(enumerate(seeds))  # group -> the kept card's id
        vectors = _vectors([about[n] for names in start for n in names])
        flat = iter(vectors)
        self.sums = {
            i: reduce(_add, [next(flat) for _ in names], Vector())
            for i, names in self.members.items()
        }
        self.norms = {i: _square(v) for i, v in self.sums.items()}
        # (-alike, size, i, j), i < j: the most alike first, then the smaller pair, names' order
        self.pairs: list[tuple[float, int, int, int]] = []
        for i, j in combinations(self.members, 2):  # i < j: the keys ascend
            self._push(i, j)

    def merge(self, least: float) -> bool:
        """Merge the most alike pair that fits in a card and is more alike than `least`."""
        best = self._best()
        if best is None or -best[0] <= least:
            return False
        heapq.heappop(self.pairs)
        _, _, i, j = best
        i, j = (j, i) if j in self.fixed else (i, j)  # the kept card's group stays
        self.members[i] += self.members.pop(j)
        self.sums[i] = _add(self.sums[i], self.sums.pop(j))
        self.norms[i] = _square(self.sums[i])
        del self.norms[j]
        for k in self.members:
            if k != i:
                self._push(i, k)  # the merged group first, as it always was
        return True

    def _push(self, first: int, other: int) -> None:
        """Keep the pair if it may ever merge: it fits in a card (groups only grow), and it does
        not join two kept cards."""
        i, j = min(first, other), max(first, other)
        size = len(self.members[i]) + len(self.members[j])
        if size > CARD_TOOLS or (i in self.fixed and j in self.fixed):
            return
        squares = self.norms[first] * self.norms[other]
        alike = _cosine(self.sums[first], self.sums[other], squares)
        heapq.heappush(self.pairs, (-alike, size, i, j))

    def _best(self) -> tuple[float, int, int, int] | None:
        """The heap's first pair whose groups are as they were when it was pushed."""
        while self.pairs:
            _, size, i, j = self.pairs[0]
            alive = i in self.members and j in self.members
            if alive and len(self.members[i]) + len(self.members[j]) == size:  # neither merged
                return self.pairs[0]
            heapq.heappop(self.pairs)
        return None


def _vectors(tools: list[ListedTool]) -> list[Vector]:
    """Each tool's words, weighted by their rarity here (a name's words NAME_WEIGHT times)."""
    verbs = {stem(v) for v in VERBS}  # what a tool does to things: the things group it
    bags = []
    for tool in tools:
        bag = Counter(tokenize(f"{tool.description} {' '.join(tool.parameters)}"))
        for word in tokenize(_words_of_name(tool.name)):
            bag[word] += NAME_WEIGHT
        bags.append(Counter({w: n for w, n in bag.items() if w not in verbs}))
    seen = Counter(word for bag in bags for word in bag)
    idf = {w: math.log((1 + len(bags)) / (1 + n)) + 1.0 for w, n in seen.items()}
    return [{w: c * idf[w] for w, c in bag.items()} for bag in bags]


def _add(a: Vector, b: Vector) -> Vector:
    return {w: a.get(w, 0.0) + b.get(w, 0.0) for w in a.keys() | b.keys()}


def _square(a: Vector) -> float:
    return sum(v * v for v in a.values())


def _cosine(a: Vector, b: Vector, squares: float) -> float:
    """How alike two vectors are; `squares`: the product of their squared lengths."""
    dot = sum(v * b[w] for w, v in a.items() if w in b)
    norm = math.sqrt(squares)
    return round(dot / norm, 9) if norm else 0.0  # rounded: the same order on every CPU


def _ids(server: str, groups: list[tuple[str | None, bool, list[str]]]) -> list[str]:
    """A kept card's own id; else `server`, `server-write`, with a topic where a kind is split."""
    base = re.sub(r"[^a-z0-9_-]", "-", server.lower())[:40]
    split = Counter(writes for _, writes, _ in groups)
    # words in every tool name of the server tell no group from another
    words = [set(_words_of_name(n).split()) for _, _, names in groups for n in names]
    everywhere = set.intersection(*words) if words else set()
    ids: list[str] = [card_id for card_id, _, _ in groups if card_id]
    longest_id = longest(card_schema()["properties"]["id"]["pattern"])
    for at, (kept, writes, names) in enumerate(groups):
        if kept:
            continue
        topic = f"-{_topic(names, everywhere)}" if split[writes] > 1 else ""
        card_id = (base + topic)[: longest_id - 6] + ("-write" if writes else "")
        taken, n = card_id, 2
        while taken in ids:
            taken, n = f"{card_id}-{n}", n + 1
        ids.insert(at, taken)
    return ids


def _topic(names: list[str], skip: set[str]) -> str:
    words = [w for n in names for w in _words_of_name(n).split() if w not in skip]
    counts = Counter(w for w in words if w not in VERBS) or Counter(words)
    best = sorted(counts.items(), key=lambda wc: (-wc[1], -len(wc[0]), wc[0]))
    return re.sub(r"[^a-z0-9_-]", "", best[0][0])[:20] if best else "tools"
