"""The rule-mining kernels of tagtorch.candidates.rules against plain per-object loops."""

from collections import Counter
from itertools import combinations

import numpy as np
import pytest

from tagtorch.candidates.reference import ReferenceFeatures
from tagtorch.candidates.rules import RuleIndex
from tagtorch.data.ragged import Ragged

RULE_FEATURES = ("sum_1", "sum_l", "sum_plus", "vote", "vote_plus")
N_TERMS = 30


def random_d(seed: int, n_objects: int = 250) -> list[list[int]]:
    """Tag sets with a few popular tags, so that antecedents of size 3 and 4 have support."""
    rng = np.random.default_rng(seed)
    weights = np.r_[np.full(8, 4.0), np.ones(N_TERMS - 8)]
    return [sorted(rng.choice(N_TERMS, rng.integers(1, 10), replace=False,
                              p=weights / weights.sum()).tolist()) for _ in range(n_objects)]


def random_queries(seed: int, n: int = 40) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [sorted(rng.choice(N_TERMS, rng.integers(1, 13), replace=False).tolist())
            for _ in range(n)]


def fitted(d, **settings) -> RuleIndex:
    # unit stabilities and k_r = 4 match the reference built with the same constants below
    return RuleIndex(**settings).fit(Ragged.from_lists(d), N_TERMS, np.ones(N_TERMS),
                                     np.ones(N_TERMS), k_r=4.0)


def as_dict(rows, cols, feats, row):
    return {int(c): f for c, f in zip(cols[rows == row], feats[rows == row], strict=True)}


@pytest.mark.parametrize("settings", [
    {"max_antecedent": 1},
    {"max_antecedent": 2},
    {"max_antecedent": 3},
    {"max_antecedent": 4},
    {"max_antecedent": 3, "min_support": 3},
    {"max_antecedent": 3, "min_confidence": 0.4},
    {"max_antecedent": 4, "min_support": 2, "min_confidence": 0.25},
])
def test_rule_features_equal_the_plain_reference(settings):
    d, queries = random_d(0), random_queries(1)
    index = fitted(d, **settings)
    rows, cols, feats = index.mine(Ragged.from_lists(queries), Ragged.from_lists(queries),
                                   Ragged.from_lists([[]] * len(queries)), threads=2)
    # unit stabilities: the reference with every f_tag at e^k gives Stab = 1 for all terms
    reference = ReferenceFeatures(d, [{}] * len(d), **settings)
    reference.stab = lambda term, k: 1.0
    for row, query in enumerate(queries):
        expected = reference.candidates(query, {})
        got = as_dict(rows, cols, feats, row)
        assert sorted(got) == sorted(expected), f"consequents of query {row}"
        for c, values in got.items():
            want = [expected[c][name] for name in RULE_FEATURES]
            np.testing.assert_allclose(values, want, rtol=1e-6, atol=1e-6)


def test_one_object_at_a_time_equals_the_batch_and_threads_do_not_change_it():
    d, queries = random_d(2), random_queries(3, n=60)
    index = fitted(d)
    batch = (Ragged.from_lists(queries), Ragged.from_lists(queries),
             Ragged.from_lists([[]] * len(queries)))
    one_thread = index.mine(*batch, threads=1)
    two_threads = index.mine(*batch, threads=2)
    for a, b in zip(one_thread, two_threads, strict=True):
        np.testing.assert_array_equal(a, b)
    for row, query in enumerate(queries):
        rows, cols, feats = index.mine(Ragged.from_lists([query]), Ragged.from_lists([query]),
                                       Ragged.from_lists([[]]))
        mask = one_thread[0] == row
        np.testing.assert_array_equal(cols, one_thread[1][mask])
        np.testing.assert_array_equal(feats, one_thread[2][mask])
        assert (rows == 0).all()


def test_top_k_keeps_the_best_by_sum_l_ties_by_code_plus_the_keep_terms():
    d, queries = random_d(4), random_queries(5)
    index = fitted(d)
    rng = np.random.default_rng(6)
    keep = [sorted(rng.choice(N_TERMS, 4, replace=False).tolist()) for _ in queries]
    args = (Ragged.from_lists(queries), Ragged.from_lists(queries), Ragged.from_lists(keep))
    full = index.mine(*args)
    capped = index.mine(*args, top_k=5)
    for row in range(len(queries)):
        everything = as_dict(*full, row)
        ranked = sorted(everything, key=lambda c: (-everything[c][1], c))
        want = set(ranked[:5]) | (set(keep[row]) & set(everything))
        got = as_dict(*capped, row)
        assert set(got) == want
        for c in got:
            np.testing.assert_array_equal(got[c], everything[c])


def test_repeated_input_tags_count_once():
    d = random_d(7)
    index = fitted(d)
    query, doubled = [1, 2, 5], [5, 1, 2, 1, 5]
    a = index.mine(Ragged.from_lists([query]), Ragged.from_lists([query]),
                   Ragged.from_lists([[]]))
    b = index.mine(Ragged.from_lists([doubled]), Ragged.from_lists([doubled]),
                   Ragged.from_lists([[]]))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y)


def test_pairs_are_the_plain_co_occurrence_counts():
    d = random_d(8)
    x, c, support = fitted(d).pairs(threads=2)
    counts = Counter((a, b) for tags in d for a in tags for b in tags)
    assert dict(zip(zip(x.tolist(), c.tolist(), strict=True), support.tolist(),
                    strict=True)) == dict(counts)


def test_positions_and_entropy_by_hand():
    # x = 0 co-occurs with 1 twice and with 2 and 3 once each, f(0) = 3
    index = fitted([[0, 1], [0, 1, 2], [0, 3]])
    row = slice(index.rule_ptr[0], index.rule_ptr[1])
    assert index.rule_cols[row].tolist() == [1, 2, 3]
    assert index.rule_support[row].tolist() == [2, 1, 1]
    # weights 4 / (4 + p) with p = 1, 2, 3 (ties by code)
    np.testing.assert_allclose(index.rule_weight[row], [4 / 5, 4 / 6, 4 / 7], rtol=1e-6)
    theta = np.array([2, 1, 1]) / 3
    assert index.entropy[0] == pytest.approx(-(theta * np.log(theta)).sum())


def test_an_antecedent_space_too_large_to_index_is_refused():
    d = [list(range(N_TERMS))]
    index = fitted(d, max_antecedent=30)
    tags = Ragged.from_lists([list(range(N_TERMS))] * 1)
    wide = Ragged.from_lists([list(range(100))])
    with pytest.raises(ValueError, match="max_antecedent_tags"):
        index.mine(wide, wide, Ragged.from_lists([[]]))
    rows, _, _ = index.mine(tags, Ragged.from_lists([[0, 1, 2]]), Ragged.from_lists([[]]))
    assert len(rows) == 0  # every tag of D is an input tag: no consequent is left


def test_antecedents_of_size_two_or_more_come_only_from_the_antecedent_tags():
    d, query = random_d(9), list(range(12))
    index = fitted(d, max_antecedent=3)
    few = [0, 1, 2]
    rows, cols, feats = index.mine(Ragged.from_lists([query]), Ragged.from_lists([few]),
                                   Ragged.from_lists([[]]))
    sets = [set(t) for t in d]
    expected: Counter[int] = Counter()
    for size in (2, 3):
        for x in combinations(few, size):
            holding = [t for t in sets if set(x) <= t]
            for c in set().union(*holding) - set(query) if holding else ():
                expected[c] += sum(c in t for t in holding) / len(holding)
    got = as_dict(rows, cols, feats, 0)
    for c, values in got.items():
        assert values[1] - values[0] == pytest.approx(expected.get(c, 0.0))


def test_the_serving_cache_answers_repeats_and_evicts_the_least_recently_used():
    d = random_d(10)
    index = RuleIndex(cache_size=2).fit(Ragged.from_lists(d), N_TERMS, np.ones(N_TERMS),
                                        np.ones(N_TERMS), k_r=4.0)
    plain = fitted(d)

    def ask(index, query, keep=()):
        return index.mine(Ragged.from_lists([query]), Ragged.from_lists([query]),
                          Ragged.from_lists([list(keep)]), top_k=3)

    a, b, c = [1, 2], [3, 4, 5], [0, 6]
    for query in (a, b, a, c, b):  # a b | a hit | c evicts b | b misses again
        for got, want in zip(ask(index, query), ask(plain, query), strict=True):
            np.testing.assert_array_equal(got, want)
    assert (index.cache_hits, index.cache_misses) == (1, 4)
    ask(index, a, keep=[7])  # other keep terms: another request
    assert index.cache_misses == 5
    first = ask(index, b)
    first[2][:] = -1.0  # a caller writing into its result does not reach the cache
    np.testing.assert_array_equal(ask(index, b)[2], ask(plain, b)[2])
    index.mine(Ragged.from_lists([a, b]), Ragged.from_lists([a, b]), Ragged.from_lists([[], []]))
    assert index.cache_hits + index.cache_misses == 8  # batches bypass the cache


def test_cache_size_is_checked():
    with pytest.raises(ValueError, match="cache_size"):
        RuleIndex(cache_size=-1)


def test_top_k_breaks_ties_by_the_lowest_codes():
    # 0 co-occurs once with each of 1..20 and twice with 25: 25 first, then ties by code
    d = [[0, c] for c in range(20, 0, -1)] + [[0, 25], [0, 25]]
    index = fitted(d)
    _, cols, feats = index.mine(Ragged.from_lists([[0]]), Ragged.from_lists([[0]]),
                                Ragged.from_lists([[17]]), top_k=5)
    assert cols.tolist() == [1, 2, 3, 4, 17, 25]
    assert feats[:, 1].tolist() == pytest.approx([1 / 22] * 5 + [2 / 22])


def test_an_index_copied_to_another_process_mines_the_same():
    import pickle  # the transport of joblib's worker processes (in memory, never from disk)

    d, queries = random_d(11), random_queries(12, n=5)
    index = RuleIndex(cache_size=4).fit(Ragged.from_lists(d), N_TERMS, np.ones(N_TERMS),
                                        np.ones(N_TERMS), k_r=4.0)
    batch = (Ragged.from_lists(queries[:1]), Ragged.from_lists(queries[:1]),
             Ragged.from_lists([[]]))
    index.mine(*batch)
    copy = pickle.loads(pickle.dumps(index))
    assert copy.cache_hits == 0 and len(copy._cache) == 0
    for a, b in zip(index.mine(*batch), copy.mine(*batch), strict=True):
        np.testing.assert_array_equal(a, b)


def test_every_compiled_kernel_is_cached_on_disk():
    """numba keeps each kernel in its cache, so processes after the first skip compiling."""
    import importlib

    import numba
    from numba.core.caching import NullCache

    kernels = []
    for name in ("tagtorch.candidates.rules", "tagtorch.rankers.tree_scoring",
                 "tagtorch.topics.gibbs"):
        module = importlib.import_module(name)
        kernels += [value for value in vars(module).values()
                    if isinstance(value, numba.core.registry.CPUDispatcher)]
    assert len(kernels) >= 20
    uncached = [kernel.py_func.__qualname__ for kernel in kernels
                if isinstance(kernel._cache, NullCache)]
    assert uncached == []
