"""Thinning learned examples: drop the most redundant until a card keeps its cap.

The rule: while more than `keep` remain, find the two remaining examples with the highest
cosine (ties: the pair that comes first in row-major order, as `argmax` over the whole
matrix finds it) and drop the one listed later. Rebuilding and scanning the matrix of the
remaining examples after every drop made this cubic (3,000 examples: 36 s). Here each
example keeps its nearest neighbours, best first; a drop costs a heap pop, and a row is
scanned again only when every neighbour it kept has gone. Cosines are computed a block of
rows at a time, so memory stays `BLOCK` rows of the matrix, never the whole of it.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

__all__ = ["least_redundant"]

BLOCK = 256  # rows of the cosine matrix held at once: 10 MB at 10,000 examples
NEIGHBOURS = 16  # nearest examples each row keeps; a row is scanned again past them


def least_redundant(tasks: Sequence[str], vectors: np.ndarray, keep: int) -> tuple[str, ...]:
    """Keep `keep` of `tasks` (rows of unit `vectors`): drop one of the two closest, repeatedly."""
    n = len(tasks)
    if n <= keep:
        return tuple(tasks)
    thinner = _Thinner(np.asarray(vectors))
    for _ in range(n - keep):
        thinner.drop_one()
    return tuple(task for task, alive in zip(tasks, thinner.alive, strict=True) if alive)


class _Thinner:
    """The remaining examples, each row's nearest ones, and a heap of each row's best."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors
        self.alive = np.ones(len(vectors), dtype=bool)
        self.near: list[list[tuple[float, int]]] = [[] for _ in range(len(vectors))]
        self.heap: list[tuple[float, int, int]] = []  # (-cosine, row, neighbour)
        for start in range(0, len(vectors), BLOCK):
            rows = np.arange(start, min(start + BLOCK, len(vectors)))
            cosines = vectors[rows] @ vectors.T
            cosines[np.arange(len(rows)), rows] = -np.inf  # no row is its own neighbour
            for offset, row in enumerate(rows):
                self._keep_nearest(int(row), cosines[offset])

    def drop_one(self) -> None:
        """Drop the later-listed of the two closest remaining examples."""
        while True:
            _, row, other = heapq.heappop(self.heap)
            if not self.alive[row]:
                continue
            if not self.alive[other]:  # its neighbour went: the next one it kept, or a scan
                self._advance(row)
                continue
            self.alive[max(row, other)] = False
            if self.alive[row]:
                self._advance(row)  # `other` went; `row` stays a candidate with its next
            return

    def _advance(self, row: int) -> None:
        """Push `row`'s nearest remaining neighbour, scanning its row again if none is kept."""
        near = self.near[row]
        while near and not self.alive[near[-1][1]]:
            near.pop()
        if not near:
            cosines = (self.vectors[row : row + 1] @ self.vectors.T)[0]
            cosines[row] = -np.inf
            cosines[~self.alive] = -np.inf
            self._keep_nearest(row, cosines)
            near = self.near[row]
        if near:
            cosine, other = near[-1]
            heapq.heappush(self.heap, (-cosine, row, other))

    def _keep_nearest(self, row: int, cosines: np.ndarray) -> None:
        """Keep every neighbour above the (NEIGHBOURS+1)-th best cosine: a complete list.

        Complete above that bound, the list holds every neighbour that ties at its best,
        so the first in order among equals is found as a full scan finds it.
        """
        finite = np.isfinite(cosines)
        count = int(finite.sum())
        if count == 0:
            self.near[row] = []
            return
        if count > NEIGHBOURS:
            bound = np.partition(cosines, -(NEIGHBOURS + 1))[-(NEIGHBOURS + 1)]
            picked = np.flatnonzero(cosines > bound)
            if picked.size == 0:  # everything ties at the bound: keep the ties
                picked = np.flatnonzero(cosines == bound)
        else:
            picked = np.flatnonzero(finite)
        values = cosines[picked]
        order = np.lexsort((-picked, values))  # ascending: the best (first among equals) last
        self.near[row] = [(float(values[i]), int(picked[i])) for i in order]
        cosine, other = self.near[row][-1]
        heapq.heappush(self.heap, (-cosine, row, other))
