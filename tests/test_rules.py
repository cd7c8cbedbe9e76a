import itertools

import numpy as np
import pytest

from tagtorch.candidates.generator import CooccurrenceCandidates
from tagtorch.candidates.rules import CooccurrenceRules, candidate_lists
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries


def random_sets(rng, n, n_tags, max_len=6):
    return [sorted(rng.choice(n_tags, size=rng.integers(1, max_len), replace=False).tolist())
            for _ in range(n)]


def reference_sum(train, inputs, n_tags, min_support=1, min_confidence=0.0):
    """Plain Python Sum(c, I_o, 1): sum over x in I_o of conf(x -> c), c not in I_o."""
    support = {}
    pairs = {}
    for tags in train:
        for x in tags:
            support[x] = support.get(x, 0) + 1
        for x, c in itertools.permutations(tags, 2):
            pairs[(x, c)] = pairs.get((x, c), 0) + 1
    out = []
    for inp in inputs:
        scores = {}
        for x in inp:
            for c in range(n_tags):
                s = pairs.get((x, c), 0)
                if c in inp or s < min_support or s == 0:
                    continue
                conf = s / support[x]
                if conf < min_confidence:
                    continue
                scores[c] = scores.get(c, 0.0) + conf
        out.append(scores)
    return out


@pytest.mark.parametrize(("min_support", "min_confidence"), [(1, 0.0), (2, 0.0), (1, 0.3)])
def test_sum_scores_match_a_plain_implementation(min_support, min_confidence):
    rng = np.random.default_rng(min_support)
    n_tags = 30
    train = random_sets(rng, 200, n_tags)
    inputs = random_sets(rng, 40, n_tags, max_len=4)
    rules = CooccurrenceRules(min_support, min_confidence).fit(Ragged.from_lists(train), n_tags)
    inp = Ragged.from_lists(inputs)
    tags, values = candidate_lists(rules.sum_scores(inp), inp)
    expected = reference_sum(train, inputs, n_tags, min_support, min_confidence)
    for row_tags, row_values, ref in zip(tags, values, expected, strict=True):
        got = dict(zip(row_tags.tolist(), row_values.tolist(), strict=True))
        assert got.keys() == ref.keys()
        for c in ref:
            assert got[c] == pytest.approx(ref[c])


def test_max_candidates_keeps_the_best_with_ties_by_tag_code():
    import scipy.sparse as sp

    scores = sp.csr_matrix(np.array([[0.5, 0.2, 0.9, 0.2, 0.0], [0.0, 0.0, 0.3, 0.1, 0.3]]))
    tags, values = candidate_lists(scores, Ragged.from_lists([[2], []]), max_candidates=2)
    assert [t.tolist() for t in tags] == [[0, 1], [2, 4]]
    assert [v.tolist() for v in values] == [[0.5, 0.2], [0.3, 0.3]]


def test_candidate_set_labels_and_relevant_counts():
    train = Ragged.from_lists([[0, 1, 2], [0, 1], [1, 3], [2, 3]])
    queries = TagQueries(
        objects=np.array([7, 8]),
        input_tags=Ragged.from_lists([[0], [3]]),
        gold_tags=Ragged.from_lists([[1, 4], [2]]),
    )
    cs = CooccurrenceCandidates(max_candidates=None).fit(train, n_tags=5)(queries)
    # object 7: I = {0}; rules 0->1 (2/2), 0->2 (1/2); gold {1, 4}: tag 4 is never a candidate
    assert cs.tags.tolist() == [[1, 2], [1, 2]]
    assert cs.labels.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert cs.feature("sum_1").tolist() == [[1.0, 0.5], [0.5, 0.5]]
    assert cs.n_relevant.tolist() == [2, 1]
    assert cs.mask.all()
    assert cs.features.shape == (2, 2, 1)
    with pytest.raises(KeyError, match="no feature"):
        cs.feature("wts")
