"""``apr`` and ``folkrank`` against lists that TagRec's own Java code produced.

The expected lists come from running TagRec's classes (github.com/learning-layers/TagRec, the
loop of ``processing/FolkRankCalculator.java``: ``WikipediaFactReader``,
``FactReaderFactPreprocessor``, ``FolkRankAlgorithm``, ``ItemWithWeight.getTopK(…, 10, 0)``) on
:func:`small_split` written as TagRec's CSV (the training posts, then the test posts, each
post's tag codes in order), read back as tag codes. The split has test posts whose resource is
not in the graph and ties at the tenth place, so both of TagRec's odd parts (module docstring
of :mod:`tagtorch.posts.folkrank`) decide some of the lists.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.posts.base import recommend
from tagtorch.posts.data import PostData, personalized_split
from tagtorch.posts.folkrank import FolkRank, tagrec_left_out


def small_split(seed: int = 5, n: int = 150) -> PostData:
    """``n`` random posts of 1 to 5 Zipf tags, 30 users, 100 resources; last posts held out."""
    rng = np.random.default_rng(seed)
    post = np.repeat(np.arange(n), rng.integers(1, 6, n))
    frame = pd.DataFrame({"user": rng.integers(0, 30, n)[post].astype(str),
                          "object": rng.integers(0, 100, n)[post].astype(str),
                          "tag": rng.zipf(1.5, len(post)).clip(1, 80).astype(str),
                          "timestamp": rng.integers(0, 10_000, n)[post]})
    return personalized_split(Folksonomy.from_frame(frame), p=1)


TAGREC_FR = [
    [0, 7, 12, 19, 6, 29, 21, 36, 35, 22],
    [1, 9, 34, 37, 36, 39, 11, 4, 40, 8],
    [11, 9, 8, 4, 39, 21, 34, 5, 22, 30],
    [0, 38, 15, 20, 29, 6, 36, 21, 19, 22],
    [30, 22, 2, 25, 27, 24, 6, 34, 29, 18],
    [12, 41, 22, 25, 35, 9, 19, 40, 30, 24],
    [13, 7, 12, 32, 19, 35, 5, 26, 6, 28],
    [4, 35, 32, 34, 22, 30, 27, 24, 6, 26],
    [41, 40, 28, 7, 16, 26, 12, 32, 6, 22],
    [19, 0, 10, 26, 15, 5, 7, 12, 6, 22],
    [9, 41, 4, 11, 40, 8, 34, 12, 22, 24],
    [40, 22, 30, 27, 24, 29, 6, 34, 16, 18],
    [11, 9, 4, 39, 8, 34, 27, 24, 13, 32],
    [35, 21, 22, 30, 6, 27, 24, 34, 29, 28],
    [22, 30, 25, 27, 24, 6, 34, 29, 18, 28],
    [19, 18, 37, 25, 2, 27, 24, 9, 0, 22],
    [19, 32, 9, 0, 41, 35, 1, 22, 7, 30],
    [9, 23, 35, 32, 3, 39, 22, 30, 27, 24],
    [40, 22, 25, 26, 0, 35, 9, 16, 34, 30],
    [32, 10, 25, 35, 15, 22, 30, 23, 27, 24],
    [0, 1, 19, 39, 41, 28, 22, 30, 32, 24],
    [26, 5, 40, 3, 13, 9, 35, 22, 19, 30],
    [2, 19, 22, 27, 24, 30, 6, 34, 18, 29],
    [0, 26, 5, 41, 25, 29, 6, 36, 21, 12],
    [35, 0, 18, 19, 8, 22, 9, 27, 24, 30],
    [29, 36, 6, 21, 41, 22, 27, 24, 30, 28],
    [2, 19, 3, 39, 22, 27, 24, 36, 30, 6],
    [40, 9, 22, 30, 27, 24, 6, 29, 34, 18],
    [27, 24, 41, 18, 34, 22, 30, 6, 29, 28],
]

TAGREC_APR = [
    [0, 9, 19, 40, 26, 35, 32, 41, 7, 39],
    [0, 9, 19, 40, 26, 1, 32, 39, 35, 41],
    [0, 9, 19, 40, 26, 11, 32, 35, 39, 41],
    [0, 9, 19, 40, 26, 32, 15, 38, 35, 41],
    [0, 9, 19, 40, 26, 32, 35, 41, 39, 2],
    [0, 9, 19, 40, 26, 41, 35, 32, 12, 25],
    [0, 9, 19, 26, 40, 32, 35, 13, 7, 12],
    [0, 9, 19, 26, 40, 32, 35, 4, 41, 39],
    [0, 9, 40, 19, 26, 41, 32, 35, 39, 7],
    [0, 19, 9, 40, 26, 32, 35, 41, 39, 5],
    [0, 9, 40, 19, 26, 41, 32, 4, 35, 8],
    [0, 40, 9, 19, 26, 32, 35, 41, 39, 1],
    [0, 9, 19, 40, 26, 11, 32, 39, 35, 4],
    [0, 9, 19, 26, 40, 35, 32, 41, 39, 1],
    [0, 9, 19, 40, 26, 32, 35, 41, 39, 1],
    [0, 9, 19, 40, 26, 32, 35, 18, 41, 2],
    [0, 9, 19, 40, 26, 32, 35, 41, 39, 1],
    [0, 9, 19, 40, 26, 32, 35, 39, 23, 41],
    [0, 9, 40, 19, 26, 35, 32, 41, 25, 39],
    [0, 9, 19, 32, 40, 26, 35, 10, 25, 41],
    [0, 9, 19, 40, 26, 32, 35, 41, 39, 1],
    [0, 9, 19, 40, 26, 32, 35, 5, 41, 39],
    [0, 19, 9, 40, 2, 26, 32, 35, 41, 39],
    [0, 9, 19, 26, 40, 32, 41, 35, 5, 39],
    [0, 9, 19, 40, 35, 26, 32, 41, 39, 18],
    [0, 9, 40, 19, 26, 32, 41, 35, 36, 39],
    [0, 9, 19, 40, 26, 2, 39, 32, 3, 35],
    [0, 9, 40, 19, 26, 32, 35, 41, 39, 1],
    [0, 9, 19, 40, 26, 32, 41, 35, 39, 24],
]


@pytest.mark.parametrize("solver", ["per_post", "by_tag"])
@pytest.mark.parametrize(("adapted", "expected"), [(False, TAGREC_FR), (True, TAGREC_APR)])
def test_the_lists_equal_tagrecs_java_output(adapted, expected, solver):
    data = small_split()
    model = FolkRank(adapted=adapted, solver=solver).fit(data)
    assert model.top_tags(data.test, 10).tolist() == expected
    # the odd parts matter: plain later-first ties, or 1/|R| for an absent resource, differ
    for variant in (FolkRank(adapted=adapted, top_k=0),
                    FolkRank(adapted=adapted, renormalize=True)):
        assert variant.fit(data).top_tags(data.test, 10).tolist() != expected


def get_top_k(weights: list[float], k: int) -> list[int]:
    """``ItemWithWeight.getTopK``, transcribed: a set by weight, then the higher item, first."""
    chosen: list[int] = []
    floor = -100.0
    for item, weight in enumerate(weights):
        if weight > floor:
            chosen.append(item)
            chosen.sort(key=lambda i: (-weights[i], -i))
            if len(chosen) > k:
                chosen.pop()
                floor = weights[chosen[-1]]
    return chosen


@pytest.mark.parametrize("k", [1, 3, 5, 11, 12, 15])
def test_tie_keys_give_get_top_ks_lists(k):
    weights = np.random.default_rng(k).integers(0, 4, (400, 12)).astype(np.float64)  # ties
    keys = np.arange(12) - 12 * tagrec_left_out(weights, k)
    got = recommend(weights, k, keys).tolist()
    expected = [get_top_k(row, k) for row in weights.tolist()]
    assert got == [e + [-1] * (k - len(e)) for e in expected]


def test_an_absent_resource_still_counts_in_the_random_surfers_norm():
    data = small_split()
    tagrec, renormalized = (FolkRank(max_iterations=1, renormalize=r).fit(data)
                            for r in (False, True))
    assert tagrec.gamma_ == 0.3  # TagRec's literal, not 1 - 0.7
    absent = np.array([-1])
    user = tagrec.node_of_[1][data.test.users[:1]]
    one, two = (m._spread(user, absent, 1)[:, 0] for m in (tagrec, renormalized))
    start = tagrec.sizes_[:2].sum()
    n_resources = tagrec.sizes_[2]
    # one iteration from the same weights: only γ · p_R differs, 1/(2|R|) against 1/|R|
    np.testing.assert_allclose(one[start:] - two[start:], -0.3 / (2 * n_resources), rtol=1e-12)
    np.testing.assert_array_equal(one[:start], two[:start])
