"""``posts.base.recommend`` against a plain sort of every row (issue 54: dense scores are cut
to the entries that can reach the top k before sorting; the lists must not change)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from tagtorch.posts.base import recommend


def plain_top(scores: np.ndarray, k: int, ties: np.ndarray | None) -> np.ndarray:
    """Each row's k best finite entries: score, then the higher tie key, then the lower code."""
    out = np.full((scores.shape[0], k), -1, dtype=np.int64)
    for row, values in enumerate(scores):
        keys = ties[row] if ties is not None else np.zeros(len(values))
        ranked = sorted((-v, -keys[c], c) for c, v in enumerate(values) if np.isfinite(v))
        for place, (_, _, code) in enumerate(ranked[:k]):
            out[row, place] = code
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 3, 10, 40])
def test_dense_scores_give_the_plain_sorts_lists(seed, k):
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, size=(37, 30)).astype(np.float64)  # many ties at the k-th
    scores[rng.random(scores.shape) < 0.3] = -np.inf
    scores[3] = -np.inf  # a row without a candidate
    ties = rng.integers(0, 3, size=scores.shape) if seed % 2 else None
    got = recommend(scores, k, ties)
    assert np.array_equal(got, plain_top(scores, k, ties))
    sparse = sp.csr_matrix(np.where(np.isfinite(scores), scores + 1.0, 0.0))
    assert np.array_equal(recommend(sparse, k, ties), plain_top(
        np.where(np.isfinite(scores), scores + 1.0, -np.inf), k, ties))


def test_blocks_of_rows_give_the_same_lists():
    from tagtorch.posts.base import _contenders

    rng = np.random.default_rng(9)
    scores = rng.normal(size=(50, 20)).round(1)
    whole = _contenders(scores, 5, block=4096)
    assert (whole != _contenders(scores, 5, block=7)).nnz == 0
    assert whole.nnz < scores.size and np.array_equal(recommend(scores, 5),
                                                      plain_top(scores, 5, None))
