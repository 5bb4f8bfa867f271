"""The card space: card texts embedded, centred on the background, whitened; a card's vectors.

A card is a few vectors, each a reason a task may belong to it: its routing text, one per
capability, the mean of its routing text and examples, and — when it has examples — a kNN
view, the mean of its `knn` best example cosines. Examples a model generated are one more
view of their own: the mean of the task's cosines to all of them (a vector, the mean of
theirs, not scaled to unit length), since any one of them may be off; they join neither
the kNN view nor the mean with the routing text (docs/routing.md, "Examples before anyone
teaches"). Out-of-scope examples live in the same space, as the rival every card must beat.
The whitening is explained in `_whitening`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np

from tiny_cli.routing.embed import same_size

__all__ = [
    "KNN_CHUNK",
    "WITHIN_SHRINKAGE",
    "CardSpace",
    "Nearest",
    "Source",
    "nearest_mean",
    "space_from_parts",
    "space_parts",
    "unit",
]

Source = Literal[
    "summary", "capability", "tool", "summary + examples", "examples (kNN)", "generated examples"
]


@dataclass(frozen=True)
class Nearest:
    """Which of a card's vectors sits nearest a task, and its nearest example."""

    cosine: float
    source: Source
    text: str
    example: str | None
    example_cosine: float | None


# Weight of identity in the within-card covariance, at least: 5-fold cross-validation on
# the MetaTool cards' own texts (not its tasks) scored 0.5-0.8 alike. With fewer texts than
# dimensions the weight rises smoothly towards 1 (see _whitening).
WITHIN_SHRINKAGE = 0.6
CLOSENESS_BLOCK = 512  # texts compared with every text at once by `tiny validate`
# past this many residual cells (texts x dimensions) the thin SVD's copies and workspace grow
# with the texts (3,000 cards with two examples: over 1 GB at 2,048 dimensions); the
# dimensions' Gram matrix, summed in blocks of GRAM_BLOCK texts, stays dim x dim
SVD_MAX_CELLS = 4_000_000
GRAM_BLOCK = 512
KNN_CHUNK = 64  # tasks scored at once by the kNN view: memory is chunk x cards x examples
MIN_SPREAD = 1e-6  # a degenerate within-card spread keeps plain cosine


@dataclass(frozen=True)
class _Vector:
    """One of a card's vectors: whose, from what, and which text."""

    card: int
    source: Source
    text: str


class CardSpace:
    """Card texts as whitened unit vectors, with each card's reason vectors and kNN index."""

    def __init__(
        self,
        texts: Sequence[Sequence[tuple[str, str]]],
        embedded: np.ndarray,
        centre: np.ndarray,
        knn: int,
        overwrite: bool = False,
    ) -> None:
        """`overwrite`: `embedded` is the caller's to give up, and is centred in place."""
        self.texts = texts
        self.knn = knn
        self.flat = [(i, kind, text) for i, rows in enumerate(texts) for kind, text in rows]
        self._centre = centre
        # scaled in place: each full (texts, dim) copy is 70 MB at 3,000 cards of 2,048 dimensions
        centred = np.subtract(embedded, centre, out=embedded) if overwrite else embedded - centre
        projected = _unit_in_place(centred)
        del embedded, centred
        self.labels = np.array([i for i, _, _ in self.flat])
        means = np.stack([projected[self.labels == i].mean(axis=0) for i in range(len(texts))])
        self._whiten = _whitening(projected, means, self.labels, dof=len(projected) - len(texts))
        del means
        self.text_vectors = _unit_in_place(projected @ self._whiten)
        del projected
        vectors, self._owners = self._reason_vectors()
        self._vectors = np.stack(vectors)
        self._tool_mask = np.array([o.source == "tool" for o in self._owners], dtype=bool)
        self._starts = np.flatnonzero(np.diff([-1, *(o.card for o in self._owners)]))
        self._build_knn()

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """Centre on the background mean, whiten, and rescale to unit length."""
        # a saved space, and another model now: the task's vector never passes the cache
        remedy = "load the one it had, or delete TINY_HOME/cache to embed them again"
        sizes = vectors.shape[-1], self._centre.shape[-1]
        same_size("the embedder", *sizes, "the cards' saved ones", remedy)
        return unit(each_row(unit(vectors - self._centre), self._whiten))

    def semantic(self, projected: np.ndarray) -> np.ndarray:
        """Return (tasks, cards): the best cosine to any of a card's vectors or its kNN view."""
        cosines = each_row(projected, self._vectors.T)
        tools = self._tool_mask
        # each card's vectors are contiguous, its summary first: max within each run
        best = np.maximum.reduceat(np.where(tools, -np.inf, cosines), self._starts, axis=1)
        if self._index.size:
            best = np.maximum(best, self.knn_scores(projected))
        if not tools.any():
            return best
        # a tool view is one more reason, kept apart only to say which tool drove a score;
        # a weighted blend and tool votes ranked worse on BFCL (docs/routing.md, "Tools")
        tool = np.maximum.reduceat(np.where(tools, cosines, -np.inf), self._starts, axis=1)
        return np.maximum(best, tool)

    def knn_scores(self, projected: np.ndarray) -> np.ndarray:
        """Return (tasks, cards): the mean of each card's `knn` best example cosines."""
        out = np.full((len(projected), len(self._starts)), -np.inf, dtype=np.float32)
        if not self._index.size:
            return out
        k = min(self.knn, self._index.shape[1])
        counts = np.minimum(self._counts, k)
        for start in range(0, len(projected), KNN_CHUNK):  # bounded (chunk, cards, examples)
            rows = each_row(projected[start : start + KNN_CHUNK], self._examples.T)
            padded = np.where(self._index >= 0, rows[:, self._index], -np.inf)
            best = -np.partition(-padded, k - 1, axis=2)[:, :, :k]
            best = np.where(np.isfinite(best), best, 0.0).sum(axis=2) / counts
            out[start : start + KNN_CHUNK, self._owner_cards] = best
        return out

    def nearest(self, card: int, query: np.ndarray) -> Nearest:
        """Say which of `card`'s vectors (or its kNN view) is nearest `query`, one task's row."""
        mine = [j for j, o in enumerate(self._owners) if o.card == card]
        best = max(mine, key=lambda j: float(self._vectors[j] @ query))
        owner = self._owners[best]
        cosine, source, text = float(self._vectors[best] @ query), owner.source, owner.text
        if source == "generated examples":  # the group carried the card: name its nearest
            made = self._nearest_text(card, "generated", query)
            text = text if made is None else self.flat[made][2]
        near = self._nearest_text(card, "example", query)
        if near is None:
            return Nearest(cosine, source, text, None, None)
        knn = float(self.knn_scores(query[None, :])[0, card])
        if knn > cosine:  # the kNN view carried the card: name its nearest example
            cosine, source, text = knn, "examples (kNN)", self.flat[near][2]
        return Nearest(
            cosine, source, text, self.flat[near][2], float(self.text_vectors[near] @ query)
        )

    def _nearest_text(self, card: int, kind: str, query: np.ndarray) -> int | None:
        """The row in `flat` of `card`'s text of `kind` nearest `query`; None if it has none."""
        rows = [j for j, (i, k, _) in enumerate(self.flat) if i == card and k == kind]
        return max(rows, key=lambda j: float(self.text_vectors[j] @ query), default=None)

    def closeness(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return, per text: closeness to its own card, to the closest other card, which one."""
        # in blocks: 10,000 cards' 30,000 texts would need a 3.6 GB matrix at once
        vectors, labels = self.text_vectors, self.labels
        starts = np.flatnonzero(np.diff([-1, *labels]))  # each card's texts are contiguous
        sums = np.add.reduceat(vectors, starts, axis=0)
        means = unit(sums)
        sizes = np.diff([*starts, len(vectors)])
        blocks = max(1, -(-len(vectors) // CLOSENESS_BLOCK))
        parts = [
            self._closeness_block(rows, starts, sums, means, sizes)
            for rows in np.array_split(np.arange(len(vectors)), blocks)
        ]
        own, other, nearest = (np.concatenate(p) for p in zip(*parts, strict=True))
        return own, other, nearest

    def _closeness_block(
        self,
        rows: np.ndarray,
        starts: np.ndarray,
        sums: np.ndarray,
        means: np.ndarray,
        sizes: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        vectors, labels = self.text_vectors[rows], self.labels[rows]
        cosines = vectors @ self.text_vectors.T
        cosines[np.arange(len(rows)), rows] = -np.inf  # a text is not evidence for itself
        best_text = np.maximum.reduceat(cosines, starts, axis=1)
        local = np.arange(len(rows))
        leave_one_out = np.sum(vectors * unit(sums[labels] - vectors), axis=1)
        closeness = np.maximum(best_text, vectors @ means.T)
        own = np.maximum(best_text[local, labels], leave_one_out)
        own[sizes[labels] == 1] = np.inf  # a card with one text has nothing to be close to
        closeness[local, labels] = -np.inf
        nearest = closeness.argmax(axis=1)
        return own, closeness[local, nearest], nearest

    def _reason_vectors(self) -> tuple[list[np.ndarray], list[_Vector]]:
        vectors: list[np.ndarray] = []
        owners: list[_Vector] = []
        start = 0
        for i, texts in enumerate(self.texts):
            rows = self.text_vectors[start : start + len(texts)]
            for row, (kind, text) in zip(rows, texts, strict=True):
                if kind not in ("example", "generated"):  # summary, capability or tool
                    vectors.append(row)
                    owners.append(_Vector(i, cast(Source, kind), text))
            examples = [j for j, (kind, _) in enumerate(texts) if kind == "example"]
            if examples:
                vectors.append(unit(rows[[0, *examples]].mean(axis=0)))
                owners.append(_Vector(i, "summary + examples", texts[0][1]))
            generated = [j for j, (kind, _) in enumerate(texts) if kind == "generated"]
            if generated:  # its dot product with a unit task: the mean cosine to them all
                vectors.append(rows[generated].mean(axis=0))
                owners.append(_Vector(i, "generated examples", texts[generated[0]][1]))
            start += len(texts)
        return vectors, owners

    def _build_knn(self) -> None:
        """Index each card's example vectors as a (cards with examples, examples) table."""
        kinds = np.array([kind == "example" for _, kind, _ in self.flat], dtype=bool)
        self._examples = self.text_vectors[kinds]
        owners = self.labels[kinds]
        cards, counts = np.unique(owners, return_counts=True)
        width = int(counts.max()) if len(counts) and self.knn > 0 else 0
        self._index = np.full((len(cards) if width else 0, width), -1, dtype=np.int64)
        for row, card in enumerate(cards if width else ()):
            mine = np.flatnonzero(owners == card)
            self._index[row, : len(mine)] = mine
        self._owner_cards = cards
        self._counts = counts.astype(np.float32)


def nearest_mean(vectors: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """Return each row's mean cosine to its `k` nearest of `vectors` (-inf when there are none)."""
    if not len(vectors):
        return np.full(len(rows), -np.inf, dtype=np.float32)
    cosines = each_row(rows, vectors.T)
    k = min(max(k, 1), cosines.shape[1])
    return -np.partition(-cosines, k - 1, axis=1)[:, :k].mean(axis=1)


def each_row(rows: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """`rows @ matrix`, a row at a time, so a task scores the same in any batch."""
    # BLAS rounds a product by its shape: a row of a batch's product would differ from the
    # row's product alone in the last bits, enough to swap two cards in a near tie
    out = np.empty((len(rows), matrix.shape[1]), dtype=np.result_type(rows, matrix))
    for i, row in enumerate(rows):
        out[i] = row @ matrix
    return out


def _whitening(
    projected: np.ndarray, means: np.ndarray, labels: np.ndarray, dof: int
) -> np.ndarray:
    """Return S^-1/2 of the within-card covariance shrunk towards a multiple of identity.

    The weight of identity is dim / (dim + dof), at least WITHIN_SHRINKAGE: with few texts
    per card (three seed cards) the covariance is mostly noise and the metric stays close to
    plain cosine; with hundreds of cards with examples it is the cross-validated 0.6.
    Computed from the thin SVD of the residuals: with 20 texts that is 20 directions, not a
    384 x 384 eigendecomposition on every `tiny route`.
    """
    count, dim = projected.shape  # the residuals: each text less its card's mean
    if dof <= 0 or not count:  # nothing to learn from: plain cosine
        return np.eye(dim, dtype=np.float32)
    squares, directions = _principal(projected, means, labels)
    variances = squares / count  # the within-card covariance's eigenvalues
    spread = float(variances.sum()) / dim
    if spread <= MIN_SPREAD:
        return np.eye(dim, dtype=np.float32)
    weight = max(WITHIN_SHRINKAGE, dim / (dim + dof))
    floor = weight * spread  # every direction the residuals do not span keeps this variance
    boost = 1 / np.sqrt((1 - weight) * variances + floor) - 1 / np.sqrt(floor)
    whiten = (directions.T * boost) @ directions
    whiten[np.diag_indices(dim)] += 1 / np.sqrt(floor)  # plus identity / sqrt(floor), no copy
    return whiten.astype(np.float32)


def _principal(
    projected: np.ndarray, means: np.ndarray, labels: np.ndarray, max_cells: int = SVD_MAX_CELLS
) -> tuple[np.ndarray, np.ndarray]:
    """Return the squared singular values of the residuals and their directions (as rows)."""
    # past SVD_MAX_CELLS, the eigendecomposition of their Gram matrix summed block by block:
    # the same values and directions in dim x dim memory, the residuals never whole
    count, dim = projected.shape
    if count * dim <= max_cells:
        residuals = (projected - means[labels]).astype(np.float64)
        _, singular, directions = np.linalg.svd(residuals, full_matrices=False)
        return singular**2, directions
    gram = np.zeros((dim, dim))
    for start in range(0, count, GRAM_BLOCK):
        rows = slice(start, start + GRAM_BLOCK)
        block = (projected[rows] - means[labels[rows]]).astype(np.float64)
        gram += block.T @ block
    values, vectors = np.linalg.eigh(gram)  # ascending: largest first, as the SVD gives them
    return np.clip(values[::-1], 0.0, None), vectors[:, ::-1].T


def _unit_in_place(matrix: np.ndarray) -> np.ndarray:
    """`unit` of a float32 matrix no one else holds, without a copy (the same values)."""
    matrix = matrix.astype(np.float32, copy=False)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    matrix /= np.where(norms > 0, norms, 1.0)
    return matrix


def unit(matrix: np.ndarray) -> np.ndarray:
    """Scale each row to unit length (a zero row stays zero)."""
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)


# the arrays a CardSpace is made of, saved and loaded by tiny_cli.routing.state
SPACE_ARRAYS = ("_centre", "labels", "_whiten", "text_vectors", "_vectors", "_starts",
                "_examples", "_index", "_owner_cards", "_counts", "_tool_mask")  # fmt: skip


def space_parts(space: CardSpace) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Return a space's arrays and its plain-JSON rest (texts, owners)."""
    arrays = {name: getattr(space, name) for name in SPACE_ARRAYS}
    meta = {
        "texts": [list(map(list, rows)) for rows in space.texts],
        "owners": [[o.card, o.source, o.text] for o in space._owners],
    }
    return arrays, meta


def space_from_parts(
    arrays: Mapping[str, np.ndarray], knn: int, texts: Callable[[], Mapping[str, Any]]
) -> CardSpace:
    """Rebuild a CardSpace from `space_parts` without embedding or decomposing anything."""
    # `texts()` is called only when a text is needed (an explanation, an overlap): at 10,000
    # cards reading the texts costs more than the rest of a route
    space = _LoadedSpace.__new__(_LoadedSpace)
    space.knn = int(knn)
    space._read_texts = texts
    for name in SPACE_ARRAYS:
        setattr(space, name, np.asarray(arrays[name]))
    return space


class _LoadedSpace(CardSpace):
    """A saved CardSpace whose texts are read on first use."""

    _read_texts: Callable[[], Mapping[str, Any]]

    @functools.cached_property
    def texts(self) -> list[list[tuple[str, str]]]:  # type: ignore[override]
        return [[(kind, text) for kind, text in rows] for rows in self._read_texts()["texts"]]

    @functools.cached_property
    def flat(self) -> list[tuple[int, str, str]]:  # type: ignore[override]
        return [(i, kind, text) for i, rows in enumerate(self.texts) for kind, text in rows]

    @functools.cached_property
    def _owners(self) -> list[_Vector]:  # type: ignore[override]
        return [_Vector(int(c), s, t) for c, s, t in self._read_texts()["owners"]]
