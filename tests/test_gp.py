import math

import pytest
import torch
from deap import gp

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.metrics.functional import ndcg_at_k
from tagtorch.rankers.base import Ranker
from tagtorch.rankers.gp import (
    GPRanker,
    compile_tree,
    make_primitive_set,
    ndcg_top_k,
    protected_div,
    protected_log,
    tree_to_infix,
)

NAMES = ("f0", "noise1", "noise2", "noise3")


def toy_lists(n_lists: int, seed: int, garbage: float | None = None) -> CandidateSet:
    """Lists of 6..20 candidates; a candidate is relevant when feature 0 > 0.5.

    ``garbage`` fills the padded positions' features (0 by default, as from_flat pads).
    """
    g = torch.Generator().manual_seed(seed)
    width = 20
    lengths = torch.randint(6, width + 1, (n_lists,), generator=g)
    mask = torch.arange(width) < lengths.unsqueeze(-1)
    features = torch.rand(n_lists, width, len(NAMES), generator=g)
    labels = (features[..., 0] > 0.5).float() * mask
    features = torch.where(mask.unsqueeze(-1), features,
                           torch.tensor(0.0 if garbage is None else garbage))
    n_relevant = labels.sum(-1).long() + (torch.rand(n_lists, generator=g) < 0.3)  # some missing
    return CandidateSet(objects=torch.arange(n_lists),
                        tags=torch.where(mask, torch.arange(width), -1),
                        features=features, labels=labels, mask=mask, n_relevant=n_relevant,
                        feature_names=NAMES)


def small(**kwargs) -> GPRanker:
    settings = {"population": 30, "generations": 10, "seed": 1, "progress": False}
    return GPRanker(**(settings | kwargs))


def test_protected_operators():
    a = torch.tensor([1.0, -2.0, 3.0, 4.0, 5.0])
    b = torch.tensor([0.0, -0.0, math.inf, math.nan, 2.0])
    torch.testing.assert_close(protected_div(a, b), torch.tensor([0.0, 0.0, 0.0, 0.0, 2.5]))
    x = torch.tensor([0.0, -1.0, -math.inf, math.nan, 1.0, math.e ** 2])
    torch.testing.assert_close(protected_log(x), torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 2.0]))


def test_compiled_tree_matches_a_hand_written_computation():
    pset = make_primitive_set(NAMES)
    features = torch.rand(3, 5, 4) - 0.3
    f0, n1, n2, n3 = features.unbind(-1)
    cases = {
        "add(mul(f0, 0.25), div(log(noise1), sub(noise2, noise2)))": f0 * 0.25,
        "sub(mul(f0, noise1), log(add(noise2, 0.75)))":
            f0 * n1 - torch.where(n2 + 0.75 > 0, torch.log((n2 + 0.75).clamp(min=1e-30)), 0.0),
        "div(noise3, mul(f0, f0))": n3 / (f0 * f0),
        "0.5": torch.full((3, 5), 0.5),
        "log(0.5)": torch.full((3, 5), math.log(0.5)),
    }
    for text, expected in cases.items():
        tree = gp.PrimitiveTree.from_string(text, pset)
        torch.testing.assert_close(compile_tree(tree, pset)(features), expected)
    tree = gp.PrimitiveTree.from_string("sub(f0, sub(mul(noise1, 0.5), div(noise2, f0)))", pset)
    assert tree_to_infix(tree, pset) == "f0 - (noise1 * 0.5 - noise2 / f0)"


def test_fast_ndcg_equals_the_metric_with_ties_and_padding():
    g = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 4, (50, 12), generator=g).float()  # many ties
    scores[0, 3] = math.nan
    scores[1, :] = math.inf
    labels = torch.randint(0, 3, (50, 12), generator=g).float() * (torch.rand(50, 12) < 0.4)
    mask = torch.arange(12) < torch.randint(1, 13, (50, 1), generator=g)
    n_relevant = ((labels > 0) & mask).sum(-1) + torch.randint(0, 2, (50,), generator=g)
    for k in (1, 5, 20):
        expected = ndcg_at_k(torch.nan_to_num(scores, nan=-math.inf), labels, mask, k,
                             n_relevant=n_relevant)
        actual = ndcg_top_k(scores, labels, mask, k, n_relevant=n_relevant)
        torch.testing.assert_close(actual, expected, equal_nan=True)


def test_gp_learns_the_toy_relevance_and_generalizes():
    ranker = small().fit(toy_lists(60, seed=0))
    assert isinstance(ranker, Ranker)
    assert ranker.fitness is not None and ranker.fitness > 0.8  # missing tags cap the NDCG
    assert len(ranker.history) == 11
    test = toy_lists(40, seed=1)
    test_ndcg = ndcg_at_k(ranker.score(test), test.labels, test.mask, 5)  # present tags only
    assert float(test_ndcg.nanmean()) > 0.9
    assert "f0" in ranker.formula


def test_fitness_is_the_mean_ndcg_on_the_training_lists():
    train = toy_lists(60, seed=0)
    ranker = small(generations=3).fit(train)
    ndcg = ndcg_at_k(ranker.score(train), train.labels, train.mask, 5,
                     n_relevant=train.n_relevant)
    assert ranker.fitness == pytest.approx(float(ndcg.nanmean()), abs=1e-5)


def test_determinism_and_padding_is_ignored():
    first = small().fit(toy_lists(60, seed=0))
    again = small().fit(toy_lists(60, seed=0))
    garbage = small().fit(toy_lists(60, seed=0, garbage=math.nan))
    assert first.expression == again.expression == garbage.expression
    assert first.history == again.history == garbage.history


def test_fitness_sample():
    ranker = small(fitness_sample=20, generations=4).fit(toy_lists(60, seed=0))
    train = toy_lists(60, seed=0)
    ndcg = ndcg_at_k(ranker.score(train), train.labels, train.mask, 5,
                     n_relevant=train.n_relevant)
    assert ranker.fitness == pytest.approx(float(ndcg.nanmean()), abs=1e-5)


def test_save_load_and_feature_order(tmp_path):
    train, test = toy_lists(60, seed=0), toy_lists(20, seed=2)
    ranker = small(generations=3).fit(train)
    ranker.save(tmp_path / "gp")
    again = GPRanker.load(tmp_path / "gp")
    assert again.expression == ranker.expression and again.formula == ranker.formula
    assert again.population == 30 and again.seed == 1
    torch.testing.assert_close(again.score(test), ranker.score(test), rtol=0, atol=0)
    shuffled = CandidateSet(**(test.state() | {"features": test.features.flip(-1),
                                               "feature_names": NAMES[::-1]}))
    with pytest.raises(ValueError, match="differ"):  # never a silent reordering
        ranker.score(shuffled)
    with pytest.raises(ValueError, match="differ"):
        ranker.score(CandidateSet(**(test.state() | {"feature_names": ("a", "b", "c", "d")})))


def test_errors():
    with pytest.raises(RuntimeError, match="not fitted"):
        _ = GPRanker().formula
    with pytest.raises(ValueError, match="crossover_prob"):
        GPRanker(crossover_prob=1.5)
    with pytest.raises(ValueError, match="init_depth"):
        GPRanker(init_depth=(2, 9))
    empty = toy_lists(5, seed=0)
    empty = CandidateSet(**(empty.state() | {"labels": torch.zeros_like(empty.labels),
                                             "n_relevant": torch.zeros_like(empty.n_relevant)}))
    with pytest.raises(ValueError, match="no training list"):
        small().fit(empty)
