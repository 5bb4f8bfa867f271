"""Thinning learned examples: drop the most redundant until a card keeps its cap.

The rule: while more than `keep` remain, find the two remaining examples with the highest
cosine (ties: the pair that comes first in row-major order, as `argmax` over the whole
matrix finds it) and drop the one listed later. Rebuilding and scanning the matrix of the
remaining examples after every drop made this cubic in the examples. Here each example
keeps its nearest neighbours, best last; a drop costs heap pops, and a row is scanned
again (against the remaining rows only, and keeping twice as many) only when every
neighbour it kept has gone. Cosines are computed a block of rows at a time, so memory stays
`BLOCK` rows of the matrix and each row's neighbours, never the whole matrix. A block's
product may round a cosine in its last bit other than the whole matrix's: only two pairs
within that rounding of each other can be told apart otherwise.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

__all__ = ["least_redundant"]

BLOCK = 256  # rows of the cosine matrix held at once: 10 MB at 10,000 examples
NEIGHBOURS = 64  # nearest examples a row keeps at first; past them it is scanned again


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
        n = len(vectors)
        self.vectors = vectors
        self.alive = np.ones(n, dtype=bool)
        self.remaining = n
        self.ids = np.arange(n)  # the rows `rows` holds: a rescan reads only these
        self.rows = vectors
        self.width = np.full(n, NEIGHBOURS)  # doubled at each rescan of a row
        # each row's kept neighbours, best last, and how many of them are still unread
        self.near: list[tuple[np.ndarray, np.ndarray]] = [_NONE] * n
        self.unread = np.zeros(n, dtype=np.int64)
        self.heap: list[tuple[float, int, int]] = []  # (-cosine, row, neighbour)
        for start in range(0, n, BLOCK):
            rows = np.arange(start, min(start + BLOCK, n))
            cosines = vectors[rows] @ vectors.T
            cosines[np.arange(len(rows)), rows] = -np.inf  # no row is its own neighbour
            for offset, row in enumerate(rows):
                self._keep_nearest(int(row), cosines[offset], self.ids)

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
            self.remaining -= 1
            if self.alive[row]:
                self._advance(row)  # `other` went; `row` stays a candidate with its next
            return

    def _advance(self, row: int) -> None:
        """Push `row`'s nearest remaining neighbour, scanning its row again if none is kept."""
        values, ids = self.near[row]
        left = int(self.unread[row])
        while left and not self.alive[ids[left - 1]]:
            left -= 1
        self.unread[row] = left
        if left:
            heapq.heappush(self.heap, (-float(values[left - 1]), row, int(ids[left - 1])))
            return
        if len(self.ids) > 2 * self.remaining:  # most rows gone: scan only what remains
            self.ids = np.flatnonzero(self.alive)
            self.rows = self.vectors[self.ids]
        cosines = (self.vectors[row : row + 1] @ self.rows.T)[0]
        cosines[(self.ids == row) | ~self.alive[self.ids]] = -np.inf
        self.width[row] *= 2  # a row whose neighbours all went keeps more of them
        self._keep_nearest(row, cosines, self.ids)

    def _keep_nearest(self, row: int, cosines: np.ndarray, ids: np.ndarray) -> None:
        """Keep every neighbour above the (width+1)-th best cosine: a complete list.

        Complete above that bound, the list holds every neighbour that ties at its best,
        so the first in order among equals is found as a full scan finds it. `ids`: the
        row each cosine is of, ascending.
        """
        finite = np.isfinite(cosines)
        count, width = int(finite.sum()), int(self.width[row])
        if count > width:
            bound = np.partition(cosines, -(width + 1))[-(width + 1)]
            kept = np.flatnonzero(cosines > bound)
            if kept.size == 0:  # everything ties at the bound: keep the ties
                kept = np.flatnonzero(cosines == bound)
        else:
            kept = np.flatnonzero(finite)
        values, kept = cosines[kept], ids[kept]
        order = np.lexsort((-kept, values))  # ascending: the best (first among equals) last
        self.near[row] = (values[order], kept[order])
        self.unread[row] = len(order)
        if len(order):
            heapq.heappush(self.heap, (-float(values[order[-1]]), row, int(kept[order[-1]])))


_NONE = (np.empty(0), np.empty(0, dtype=np.int64))
