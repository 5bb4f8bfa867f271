"""An MCP server's tools grouped into cards: few tools one card, more a few of related tools.

Read-only tools and tools that write never share a card. A server with more than CARD_TOOLS
of one kind is split by the tools' texts (names and descriptions as stemmed words, weighted by
how rare a word is on that server): the two most alike groups merge while they fit in a card.
Ties go to the smaller pair, then to the names' order, so the same tools give the same cards.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tiny_cli.text import stem, tokenize
from tiny_cli.tools.mcp_listing import ListedTool

__all__ = ["CARD_TOOLS", "CardPlan", "plan_cards", "summary_of"]

CARD_TOOLS = 8  # tools in one imported card at most: a small model picks well among few
SUMMARY_CHARS = 600  # the card schema's maxLength for a summary
SENTENCE_CHARS = 140  # of one tool's description in a summary
NAME_WEIGHT = 3
RELATED = 0.05
MAX_GROUPS_PER_CARD = 3
# the cards a server's tools need at least
ID_CHARS = 63  # the card schema's id pattern allows 63

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


def plan_cards(server: str, tools: Sequence[ListedTool]) -> list[CardPlan]:
    """Group one server's tools into cards: readers first, then writers."""
    about = {t.name: t for t in tools}
    groups: list[tuple[bool, list[str]]] = []
    for writes in (False, True):
        kind = sorted(t.name for t in tools if t.writes == writes)
        groups += [(writes, g) for g in _groups([about[n] for n in kind])]
    ids = _ids(server, groups)
    return [
        CardPlan(
            card_id,
            server,
            tuple(names),
            writes,
            summary_of(server, [about[n] for n in names], writes),
        )
        for card_id, (writes, names) in zip(ids, groups, strict=True)
    ]


def summary_of(server: str, tools: Sequence[ListedTool], writes: bool) -> str:
    """A summary from the tools' descriptions, within the schema's length."""
    head = f"{'Reads' if not writes else 'Changes'} through the MCP server {server}: "
    parts = [_sentence(t) for t in tools]
    text = head + "; ".join(parts) + "."
    if len(text) <= SUMMARY_CHARS:
        return text
    cut = text[: SUMMARY_CHARS - 1].rsplit(" ", 1)[0]
    return cut.rstrip(" ;,.") + "…"


def _sentence(tool: ListedTool) -> str:
    """A tool's first sentence (or its name in words), without the closing full stop."""
    first = (
        re.split(r"(?<=[.!?])\s", tool.description, maxsplit=1)[0].strip()
        if tool.description
        else ""
    )
    text = first or _words_of_name(tool.name)
    text = (
        text if len(text) <= SENTENCE_CHARS else text[: SENTENCE_CHARS - 1].rsplit(" ", 1)[0] + "…"
    )
    return text.rstrip(".")


def _words_of_name(name: str) -> str:
    return " ".join(w.lower() for w in re.split(r"[^0-9A-Za-z]+", _CAMEL.sub(" ", name)) if w)


def _groups(tools: list[ListedTool]) -> list[list[str]]:
    """Split one kind of tools into groups of at most CARD_TOOLS related ones.

    Related groups merge first (most alike first); then, while there are more than
    MAX_GROUPS_PER_CARD times the cards the tools need at least, the most alike that fit.
    """
    if len(tools) <= CARD_TOOLS:
        return [[t.name for t in tools]] if tools else []
    groups = _Groups(tools)
    most = MAX_GROUPS_PER_CARD * math.ceil(len(tools) / CARD_TOOLS)
    while groups.merge(RELATED) or (len(groups.members) > most and groups.merge(-1.0)):
        pass
    return sorted(sorted(names) for names in groups.members.values())


class _Groups:
    """Groups of tools being merged: members, summed word vectors, and how alike pairs are."""

    def __init__(self, tools: list[ListedTool]) -> None:
        self.members = {i: [t.name] for i, t in enumerate(tools)}
        self.sums = dict(enumerate(_vectors(tools)))
        self.near = {(i, j): _cosine(self.sums[i], self.sums[j])
                     for i in self.members for j in self.members if i < j}  # fmt: skip

    def merge(self, least: float) -> bool:
        """Merge the most alike pair that fits in a card and is more alike than `least`."""
        size = self.members
        fits = [(s, -len(size[i]) - len(size[j]), -i, -j) for (i, j), s in self.near.items()
                if s > least and len(size[i]) + len(size[j]) <= CARD_TOOLS]  # fmt: skip
        if not fits:
            return False
        _, _, i, j = max(fits)
        i, j = -i, -j
        self.members[i] += self.members.pop(j)
        self.sums[i] = _add(self.sums[i], self.sums.pop(j))
        self.near = {p: s for p, s in self.near.items() if j not in p and i not in p}
        for k in self.members:
            if k != i:
                self.near[(min(i, k), max(i, k))] = _cosine(self.sums[i], self.sums[k])
        return True


def _vectors(tools: list[ListedTool]) -> list[Vector]:
    """Each tool's words, weighted by their rarity here; a name's words count NAME_WEIGHT
    times (a name says what the tool is about; a description's words wander)."""
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


def _cosine(a: Vector, b: Vector) -> float:
    dot = sum(v * b[w] for w, v in a.items() if w in b)
    norm = math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))
    return round(dot / norm, 9) if norm else 0.0  # rounded: the same order on every CPU


def _ids(server: str, groups: list[tuple[bool, list[str]]]) -> list[str]:
    """`server`, `server-write`; split kinds get the group's own commonest name word."""
    base = re.sub(r"[^a-z0-9_-]", "-", server.lower())[:40]
    split = Counter(writes for writes, _ in groups)
    everywhere = _common_words([n for _, names in groups for n in names])
    ids: list[str] = []
    for writes, names in groups:
        topic = f"-{_topic(names, everywhere)}" if split[writes] > 1 else ""
        card_id = (base + topic)[: ID_CHARS - 6] + ("-write" if writes else "")
        taken, n = card_id, 2
        while taken in ids:
            taken, n = f"{card_id}-{n}", n + 1
        ids.append(taken)
    return ids


def _common_words(names: list[str]) -> set[str]:
    """Words in every tool name of the server: they tell no group from another."""
    sets = [set(_words_of_name(n).split()) for n in names]
    return set.intersection(*sets) if sets else set()


def _topic(names: list[str], skip: set[str]) -> str:
    words = [w for n in names for w in _words_of_name(n).split() if w not in skip]
    counts = Counter(w for w in words if w not in VERBS) or Counter(words)
    best = sorted(counts.items(), key=lambda wc: (-wc[1], -len(wc[0]), wc[0]))
    return re.sub(r"[^a-z0-9_-]", "", best[0][0])[:20] if best else "tools"
