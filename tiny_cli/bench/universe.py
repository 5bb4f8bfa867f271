"""Universes: the tool catalogue a bench arm works in at one size, drawn with a fixed seed.

At size K a universe is a set of whole cards whose tools add up to at most K (a task's own card
always fits): the sampled tasks' cards, packed into as few universes as hold them, filled up with
distractor cards drawn with the seed. Every arm of one size works in the task's universe; packing
tasks together gives their all-tools prompts one shared prefix for a server's prompt cache.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["CATALOGUE", "Universe", "sample_tasks", "size_label", "universes"]

CATALOGUE = 0  # the size that stands for "every card", a user's real setting


def size_label(size: int) -> str:
    """A size as `--all-tools-sizes` and the tables write it: `all` for the whole catalogue."""
    return "all" if size == CATALOGUE else str(size)


@dataclass(frozen=True)
class Universe:
    """The cards one arm may see at one size, in prompt order; `tools` is their tool count."""

    size: int
    index: int
    cards: tuple[str, ...]
    tools: int

    @property
    def label(self) -> str:
        """Name the universe in run labels, e.g. `u30.2`, or `all` for the whole catalogue."""
        return "all" if self.size == CATALOGUE else f"u{self.size}.{self.index}"


def universes(
    task_cards: Sequence[str | None],
    tools_of: Mapping[str, int],
    size: int,
    seed: int,
) -> list[Universe]:
    """Return each task's universe at `size` (CATALOGUE: every card), one entry per task.

    `task_cards` are the tasks' expected cards (None: spread over the universes in turn);
    `tools_of` maps every card of the catalogue to its number of tools, in catalogue order.
    """
    if size == CATALOGUE or size >= sum(tools_of.values()):
        whole = Universe(CATALOGUE, 0, tuple(tools_of), sum(tools_of.values()))
        return [whole] * len(task_cards)
    bins = _pack([c for c in dict.fromkeys(task_cards) if c is not None], tools_of, size)
    taken = {card for cards in bins for card in cards}
    spare = [card for card in tools_of if card not in taken]
    built = [_filled(i, cards, spare, tools_of, size, seed) for i, cards in enumerate(bins)]
    return _assign(task_cards, built)


def sample_tasks(ids: Sequence[str], count: int, seed: int) -> list[str]:
    """Draw `count` of `ids` with the seed, kept in their file order (all of them if fewer)."""
    if count >= len(ids):
        return list(ids)
    chosen = set(random.Random(seed).sample(list(ids), count))
    return [i for i in ids if i in chosen]


def _pack(cards: Sequence[str], tools_of: Mapping[str, int], size: int) -> list[list[str]]:
    """Put the tasks' cards into as few universes as hold them, in order (first fit)."""
    bins: list[list[str]] = []
    room: list[int] = []
    for card in cards:
        need = tools_of[card]
        at = next((i for i, left in enumerate(room) if left >= need), None)
        if at is None:
            bins.append([])
            room.append(max(size, need))
            at = len(bins) - 1
        bins[at].append(card)
        room[at] -= need
    return bins or [[]]


def _filled(
    index: int,
    cards: Sequence[str],
    spare: Sequence[str],
    tools_of: Mapping[str, int],
    size: int,
    seed: int,
) -> Universe:
    """Add distractor cards drawn with the seed until the tools reach `size` (never past it)."""
    chosen = list(cards)
    total = sum(tools_of[c] for c in chosen)
    drawn = list(spare)
    random.Random(f"{seed}/{size}/{index}").shuffle(drawn)
    for card in drawn:
        if total + tools_of[card] <= size:
            chosen.append(card)
            total += tools_of[card]
    order = {card: i for i, card in enumerate(tools_of)}  # catalogue order, not task order
    return Universe(size, index, tuple(sorted(chosen, key=order.__getitem__)), total)


def _assign(task_cards: Sequence[str | None], built: Sequence[Universe]) -> list[Universe]:
    """Give each task the universe holding its card; cardless tasks take the universes in turn."""
    home = {card: u for u in built for card in u.cards}
    out, turn = [], 0
    for card in task_cards:
        if card is not None:
            out.append(home[card])
        else:
            out.append(built[turn % len(built)])
            turn += 1
    return out
