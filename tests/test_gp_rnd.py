"""GP_rnd (rankers/gp_rnd.py): the ADC terminal and the NDCG + AIP + AILD fitness against plain
per-list computations written here; the tuning of alpha by the relevance rule; save and load."""

from __future__ import annotations

import math
from itertools import combinations

import pytest
import torch
from deap import gp

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.rankers.gp import _build, compile_tree, make_primitive_set
from tagtorch.rankers.gp_rnd import (
    GPRndRanker,
    _DiverseLists,
    average_distance_to_candidates,
)

NAMES = ("f0", "iff", "noise")


def toy_lists(n_lists: int, seed: int, width: int = 12) -> CandidateSet:
    """Lists of 1..width candidates over 30 tags; relevant when f0 > 0.6; random symmetric
    distances (0 on the diagonal, 1 at padding) and two topics."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, width + 1, (n_lists,), generator=g)
    mask = torch.arange(width) < lengths.unsqueeze(-1)
    features = torch.rand(n_lists, width, len(NAMES), generator=g) * mask.unsqueeze(-1)
    features[..., 1] *= 3.0
    labels = (features[..., 0] > 0.6).float() * mask
    n_relevant = labels.sum(-1).long() + (torch.rand(n_lists, generator=g) < 0.3)
    tags = torch.where(mask, torch.randint(0, 30, (n_lists, width), generator=g), -1)
    raw = torch.rand(n_lists, width, width, generator=g)
    distance = (raw + raw.transpose(1, 2)) / 2
    distance = distance * ~torch.eye(width, dtype=torch.bool)
    both = mask.unsqueeze(2) & mask.unsqueeze(1)
    distance = torch.where(both, distance, torch.ones(())).half()
    topics = torch.rand(n_lists, width, 2, generator=g) * mask.unsqueeze(-1)
    return CandidateSet(objects=torch.arange(n_lists), tags=tags, features=features,
                        labels=labels, mask=mask, n_relevant=n_relevant, feature_names=NAMES,
                        tag_topics=topics, object_topics=torch.full((n_lists, 2), 0.5),
                        tag_distance=distance)


def small(**kwargs) -> GPRndRanker:
    settings = {"population": 20, "generations": 4, "seed": 1, "progress": False}
    return GPRndRanker(**(settings | kwargs))


def test_adc_is_the_mean_distance_to_the_other_candidates():
    lists = toy_lists(20, seed=0)
    adc = average_distance_to_candidates(lists.tag_distance, lists.mask, chunk_size=7)
    for b in range(len(lists)):
        real = [i for i in range(lists.mask.shape[1]) if lists.mask[b, i]]
        for i in range(lists.mask.shape[1]):
            if i not in real or len(real) == 1:
                assert float(adc[b, i]) == 0.0
                continue
            others = [float(lists.tag_distance[b, i, j]) for j in real if j != i]
            assert float(adc[b, i]) == pytest.approx(sum(others) / len(others), abs=1e-5)


def plain_fitness(lists: CandidateSet, scores: torch.Tensor, weights: tuple[float, ...],
                  k: int = 5) -> float:
    """The fitness one list at a time: NDCG@k over the lists with a relevant tag (missing
    ones in the ideal), AIP@k over lists with a candidate, AILD@k over lists with two."""
    iff_all = lists.features[..., 1][lists.mask]
    max_iff = float(iff_all.max())
    ndcgs, aips, ailds = [], [], []
    for b in range(len(lists)):
        real = [i for i in range(lists.mask.shape[1]) if lists.mask[b, i]]
        order = sorted(real, key=lambda i: (-float(scores[b, i]), i))[:k]
        if int(lists.n_relevant[b]) > 0:
            dcg = sum(float(lists.labels[b, i]) / math.log2(r + 2) for r, i in enumerate(order))
            ideal = sum(1 / math.log2(r + 2) for r in range(min(k, int(lists.n_relevant[b]))))
            ndcgs.append(dcg / ideal)
        if order:
            aips.append(sum(float(lists.features[b, i, 1]) / max_iff for i in order) / len(order))
        if len(order) >= 2:
            pairs = list(combinations(order, 2))
            ailds.append(sum(float(lists.tag_distance[b, i, j]) for i, j in pairs) / len(pairs))
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    return weights[0] * mean(ndcgs) + weights[1] * mean(aips) + weights[2] * mean(ailds)


@pytest.mark.parametrize("form", ["convex", "additive"])
def test_fitness_matches_a_plain_per_list_computation(form):
    lists = toy_lists(40, seed=1)
    ranker = GPRndRanker(progress=False)
    ranker.feature_names_ = NAMES
    pset = make_primitive_set(ranker.terminal_names())
    terminals = ranker.terminals(lists)
    weights = GPRndRanker._weights(0.2, 0.3, form)
    assert weights == ((0.5, 0.2, 0.3) if form == "convex" else (1.0, 0.2, 0.3))
    max_iff = float(lists.features[..., 1][lists.mask].max())
    prepared = _DiverseLists(lists, 5, terminals, weights, max_iff)
    for expression in ("f0", "adc", "sub(noise, mul(adc, 0.5))", "add(iff, f0)"):
        tree = gp.PrimitiveTree.from_string(expression, pset)
        scores = compile_tree(tree, pset)(terminals)
        got = prepared.fitness(_build(tree, pset))
        assert got == pytest.approx(plain_fitness(lists, scores, weights), abs=1e-5), expression


def test_tuning_keeps_the_largest_alpha_within_the_relevance_rule_and_save_load(tmp_path):
    train, test = toy_lists(60, seed=2), toy_lists(30, seed=3)
    ranker = small(alpha_grid=[0.2, 0.4]).fit(train)
    alphas = [row[0] for row in ranker.tuning_]
    assert alphas == [0.0, 0.2, 0.4]
    reference = ranker.tuning_[0][1]
    allowed = [a for a, ndcg, _ in ranker.tuning_[1:] if ndcg >= 0.97 * reference - 1e-12]
    assert ranker.alpha_ == (max(allowed) if allowed else 0.0)
    assert all(0.0 <= row[2] <= 1.0 for row in ranker.tuning_)  # alpha-NDCG from the topics
    ranker.save(tmp_path / "m")
    again = GPRndRanker.load(tmp_path / "m")
    assert again.alpha_ == ranker.alpha_ and again.tuning_ == ranker.tuning_
    assert torch.equal(again.score(test), ranker.score(test))


def test_alpha_zero_convex_fitness_is_the_ndcg_fitness():
    lists = toy_lists(30, seed=4)
    ranker = small(alpha=0.0).fit(lists)
    assert ranker.alpha_ == 0.0 and ranker.tuning_ == []
    scores = ranker.score(lists)
    assert ranker.fitness == pytest.approx(plain_fitness(lists, scores, (1.0, 0.0, 0.0)),
                                           abs=1e-5)


def test_errors():
    lists = toy_lists(10, seed=5)
    with pytest.raises(ValueError, match="tag_distance"):
        small().fit(CandidateSet(**(lists.state() | {"tag_distance": None})))
    with pytest.raises(ValueError, match="iff"):
        small().fit(CandidateSet(**(lists.state() | {"feature_names": ("f0", "x", "noise")})))
    with pytest.raises(ValueError, match="alpha \\+ beta"):
        GPRndRanker(alpha=0.6)
    with pytest.raises(ValueError, match=">= 0"):
        GPRndRanker(alpha=-0.1, fitness_form="additive")
    with pytest.raises(ValueError, match="fitness_form"):
        GPRndRanker(fitness_form="other")
    fitted = small(alpha=0.1).fit(lists)
    with pytest.raises(ValueError, match="tag_distance"):
        fitted.score(CandidateSet(**(lists.state() | {"tag_distance": None})))
