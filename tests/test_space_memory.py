"""The card space's whitening at thousands of cards: dim x dim memory, the same metric.

Issue 30: `tiny validate` of 3,000 cards with two examples each peaked at 1,086 MB, most of
it the thin SVD of every text's residual in float64. Past SVD_MAX_CELLS the whitening sums
the dimensions' Gram matrix block by block (benchmarks/scale.py --examples 2 measures it).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from tiny_cli.routing import space
from tiny_cli.routing.space import SVD_MAX_CELLS, _principal, _whitening


def _texts(count: int, dim: int, cards: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random unit vectors for `count` texts of `cards` cards: (projected, means, labels)."""
    rng = np.random.default_rng(0)
    projected = space.unit(rng.standard_normal((count, dim)).astype(np.float32))
    labels = np.arange(count) % cards
    means = np.stack([projected[labels == i].mean(axis=0) for i in range(cards)])
    return projected, means, labels


def test_the_gram_path_gives_the_svds_values_and_directions() -> None:
    projected, means, labels = _texts(600, 48, 200)
    squares, directions = _principal(projected, means, labels)  # small: the SVD
    gram_squares, gram_directions = _principal(projected, means, labels, max_cells=0)
    assert np.allclose(gram_squares[: len(squares)], squares, rtol=1e-6, atol=1e-6)
    # a direction's sign is arbitrary: compare the projections they make
    assert np.allclose(
        (directions.T * squares) @ directions,
        (gram_directions.T * gram_squares) @ gram_directions,
        atol=1e-6,
    )


@pytest.mark.slow
def test_whitening_thousands_of_texts_never_holds_their_residuals_in_float64() -> None:
    count, dim = 3 * SVD_MAX_CELLS // 256, 256  # past the SVD's limit, as 3,000 cards are
    projected, means, labels = _texts(count, dim, count // 3)
    one_float64_copy = count * dim * 8
    tracemalloc.start()
    try:
        whiten = _whitening(projected, means, labels, dof=count - count // 3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert whiten.shape == (dim, dim) and whiten.dtype == np.float32
    assert peak < one_float64_copy / 4, f"{peak / 2**20:.0f} MB at its peak"
