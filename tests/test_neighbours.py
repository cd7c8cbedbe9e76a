"""Neighbour-object candidates (ours) against a plain per-object computation with sets."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from tagtorch.candidates.latre import FEATURE_NAMES, LatreCandidates
from tagtorch.candidates.neighbours import NeighbourTags, top_per_row
from tagtorch.data.splits import tag_recommendation_folds
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor


@pytest.fixture(scope="module")
def fold_and_terms():
    folksonomy = TextProcessor(cache=False).apply(generate_folksonomy(n_objects=300, seed=1))
    return tag_recommendation_folds(folksonomy, n_folds=5, seed=0)[0], \
        TermIndex.from_folksonomy(folksonomy)


def plain_scores(train: list[set[int]], query: set[int], k: int, power: float,
                 idf: bool) -> tuple[dict[int, float], bool]:
    """knn(o, t) by the module docstring's formulas, with Python sets; and whether the k-th
    and (k+1)-th neighbours tie (then floating-point rounding may pick either)."""
    df = Counter(t for tags in train for t in tags)
    weight = {t: math.log((len(train) + 1) / (df[t] + 1)) if idf else 1.0 for t in df}

    def norm(tags: set[int]) -> float:
        return math.sqrt(sum(weight.get(t, 0.0) ** 2 for t in tags))

    q = norm(query)
    sims = []
    for d, tags in enumerate(train):
        dot = sum(weight[t] ** 2 for t in tags & query)
        if dot > 0 and q > 0:
            sims.append((dot / (q * norm(tags)), d))
    sims.sort(key=lambda pair: (-pair[0], pair[1]))
    tie = len(sims) > k and math.isclose(sims[k - 1][0], sims[k][0], rel_tol=1e-9)
    votes: Counter[int] = Counter()
    for sim, d in sims[:k]:
        for t in train[d] - query:
            votes[t] += sim ** power
    best = max(votes.values(), default=1.0)
    return {t: v / best for t, v in votes.items()}, tie


@pytest.mark.parametrize(("k", "power", "idf"),
                         [(5, 1.0, True), (20, 3.0, True), (1000, 2.0, False)])
def test_scores_match_a_plain_computation(fold_and_terms, k, power, idf):
    fold, terms = fold_and_terms
    source = NeighbourTags(k=k, power=power, idf=idf).fit(fold.train_objects, fold.train_tags,
                                                          terms)
    scores = source.scores(fold.test.objects, fold.test.input_tags).toarray()
    train = [set(fold.train_tags[i].tolist()) for i in range(len(fold.train_tags))]
    checked = 0
    for i in range(len(fold.test)):
        want, tie = plain_scores(train, set(fold.test.input_tags[i].tolist()), k, power, idf)
        if tie:
            continue
        got = {int(t): float(scores[i, t]) for t in np.nonzero(scores[i])[0]}
        assert got.keys() == want.keys(), i
        for t, value in want.items():
            assert got[t] == pytest.approx(value, rel=1e-9), (i, t)
        checked += 1
    assert checked > len(fold.test) // 2


def test_top_per_row_breaks_ties_by_column():
    m = sp.csr_matrix(np.array([[1.0, 3.0, 3.0, 2.0], [0.0, 0.0, 0.0, 0.0], [4.0, 0, 0, 4.0]]))
    assert top_per_row(m, 2).toarray().tolist() == [[0, 3, 3, 0], [0, 0, 0, 0], [4, 0, 0, 4]]
    assert top_per_row(m, 1).toarray().tolist() == [[0, 3, 0, 0], [0, 0, 0, 0], [4, 0, 0, 0]]


def test_the_generator_adds_the_best_neighbour_tags_and_the_knn_feature(fold_and_terms):
    fold, terms = fold_and_terms
    base = LatreCandidates(device="cpu", chunk_size=64).fit(
        fold.train_objects, fold.train_tags, terms)(fold.test)
    generator = LatreCandidates(device="cpu", chunk_size=64,
                                neighbours={"k": 20, "n_candidates": 10})
    generator.fit(fold.train_objects, fold.train_tags, terms)
    cs = generator(fold.test)
    assert cs.feature_names == (*FEATURE_NAMES, "knn")
    scores = NeighbourTags(k=20).fit(fold.train_objects, fold.train_tags, terms).scores(
        fold.test.objects, fold.test.input_tags).toarray()
    for i in range(len(cs)):
        tags = cs.tags[i][cs.mask[i]].tolist()
        ours = dict(zip(tags, cs.feature("knn")[i][cs.mask[i]].tolist(), strict=True))
        assert set(base.tags[i][base.mask[i]].tolist()) <= set(tags)  # LATRE's stay
        order = sorted(np.nonzero(scores[i])[0], key=lambda t: (-scores[i, t], t))[:10]
        assert set(order) <= set(tags)  # the 10 best neighbour tags join
        for t in tags:  # the feature is the score, 0 for tags no neighbour holds
            assert ours[t] == pytest.approx(float(scores[i, t]), rel=1e-6, abs=1e-7)
        assert not set(tags) & set(fold.test.input_tags[i].tolist())
    assert float(cs.labels.sum()) >= float(base.labels.sum())
    # the 13 features of LATRE's candidates do not move
    for i in range(len(cs)):
        ours = {int(t): cs.features[i, j, :13] for j, t in enumerate(cs.tags[i]) if cs.mask[i, j]}
        for j, t in enumerate(base.tags[i].tolist()):
            if base.mask[i, j]:
                assert torch.equal(ours[t], base.features[i, j]), (i, t)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="neighbours"):
        NeighbourTags(k=0)
    with pytest.raises(ValueError, match="space"):
        NeighbourTags(space="users")
    with pytest.raises(RuntimeError, match="fit"):
        NeighbourTags().scores(np.zeros(0), None)


def test_profile_scores_match_a_plain_computation(with_profiles):
    fold, terms, folksonomy = with_profiles
    k, power = 10, 2.0
    source = NeighbourTags(k=k, power=power, space="profiles").fit(
        fold.train_objects, fold.train_tags, terms)
    scores = source.scores(fold.test.objects, fold.test.input_tags).toarray()
    profile = {o: {} for o in range(folksonomy.n_objects)}
    for o, key, w in folksonomy.profiles[["object", "key", "weight"]].itertuples(index=False):
        profile[int(o)][int(key)] = math.log1p(w)
    train = [profile[int(o)] for o in fold.train_objects]
    df = Counter(key for p in train for key in p)
    idf = {key: math.log((len(train) + 1) / (df[key] + 1)) for key in df}

    def unit(p: dict[int, float]) -> dict[int, float]:
        v = {key: w * idf.get(key, 0.0) for key, w in p.items()}
        norm = math.sqrt(sum(x * x for x in v.values()))
        return {key: x / norm for key, x in v.items()} if norm > 0 else {}

    train_unit = [unit(p) for p in train]
    checked = 0
    for i, o in enumerate(fold.test.objects):
        q = unit(profile[int(o)])
        sims = sorted(((sum(x * d.get(key, 0.0) for key, x in q.items()), j)
                       for j, d in enumerate(train_unit)), key=lambda s: (-s[0], s[1]))
        sims = [s for s in sims if s[0] > 0]
        if len(sims) > k and math.isclose(sims[k - 1][0], sims[k][0], rel_tol=1e-9):
            continue
        given = set(fold.test.input_tags[i].tolist())
        votes: Counter[int] = Counter()
        for sim, j in sims[:k]:
            for t in set(fold.train_tags[j].tolist()) - given:
                votes[t] += sim ** power
        best = max(votes.values(), default=1.0)
        got = {int(t): float(scores[i, t]) for t in np.nonzero(scores[i])[0]}
        assert got.keys() == votes.keys(), i
        for t, v in votes.items():
            assert got[t] == pytest.approx(v / best, rel=1e-9)
        checked += 1
    assert checked > len(fold.test) // 2
    assert not source.scores(fold.test.objects, fold.test.input_tags, known=False).nnz


def test_both_sources_add_their_features_in_order(with_profiles):
    fold, terms, _ = with_profiles
    generator = LatreCandidates(device="cpu", neighbours={"n_candidates": 5},
                                profile_neighbours={"n_candidates": 5})
    cs = generator.fit(fold.train_objects, fold.train_tags, terms)(fold.test)
    assert cs.feature_names[-2:] == ("knn", "knn_profile")
    assert float(cs.feature("knn_profile").max()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="profiles"):
        LatreCandidates(device="cpu", profile_neighbours={}).fit(
            fold.train_objects, fold.train_tags,
            TermIndex(terms.n_tags, terms.vocabulary, terms.fields))


def test_the_budget_keeps_text_terms_then_the_best_fused_ranks(fold_and_terms):
    """Checked against the unbudgeted lists: ranks and fusion recomputed here with sorted()."""
    fold, terms = fold_and_terms
    settings = {"device": "cpu", "chunk_size": 64, "neighbours": {"k": 20, "n_candidates": 30}}
    whole = LatreCandidates(**settings).fit(fold.train_objects, fold.train_tags, terms)(fold.test)
    budget = 12
    cut = LatreCandidates(**settings, max_candidates=budget).fit(
        fold.train_objects, fold.train_tags, terms)(fold.test)
    sum_l, knn, ts = (whole.feature(name) for name in ("sum_l", "knn", "ts"))
    for i in range(len(whole)):
        real = whole.mask[i].nonzero().flatten().tolist()  # in tag-code order
        fused = dict.fromkeys(real, 0.0)
        for score in (sum_l[i], knn[i]):
            ranked = sorted((j for j in real if score[j] > 0), key=lambda j: -float(score[j]))
            for rank, j in enumerate(ranked):
                fused[j] += 1.0 / (60 + rank)
        for j in real:
            fused[j] += float(ts[i, j] > 0)
        best = sorted(real, key=lambda j: -fused[j])[:budget]
        want = {int(whole.tags[i, j]) for j in best}
        got = set(cut.tags[i][cut.mask[i]].tolist())
        assert got == want, i
        features = {int(t): cut.features[i, j] for j, t in enumerate(cut.tags[i]) if cut.mask[i, j]}
        for j in best:  # a kept candidate's features do not depend on the budget
            assert torch.equal(features[int(whole.tags[i, j])], whole.features[i, j])
    assert int(cut.mask.sum(1).max()) <= budget
    with pytest.raises(ValueError, match="max_candidates"):
        LatreCandidates(max_candidates=0)
