"""RankSVM, AdaRank and RankBoost: hand-computed rounds, toy problems, padding, save/load."""

import itertools
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.metrics.functional import ndcg_at_k
from tagtorch.rankers.adarank import AdaRank, weak_ranker_ndcg
from tagtorch.rankers.base import Ranker
from tagtorch.rankers.rankboost import RankBoost, quantile_thresholds
from tagtorch.rankers.ranksvm import RankSVM, crucial_pairs

CONF = Path(__file__).resolve().parents[1] / "tagtorch" / "conf" / "model"


def make_set(features, labels, mask, names=("a", "b")) -> CandidateSet:
    features = torch.as_tensor(features, dtype=torch.float32)
    labels = torch.as_tensor(labels, dtype=torch.float32)
    mask = torch.as_tensor(mask, dtype=torch.bool)
    b, length = mask.shape
    tags = torch.where(mask, torch.arange(length).expand(b, -1), -1)
    return CandidateSet(objects=torch.arange(b), tags=tags, features=features, labels=labels,
                        mask=mask, n_relevant=((labels > 0) & mask).sum(-1),
                        feature_names=tuple(names))


def toy(n_lists: int, seed: int, width: int = 20, n_features: int = 4) -> CandidateSet:
    """Relevance from feature 0 (plus a little noise); features 1.. are pure noise.

    Lists hold 12 to 20 candidates; padding is zero.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_lists, width, n_features, generator=g)
    lengths = torch.randint(12, width + 1, (n_lists,), generator=g)
    mask = torch.arange(width) < lengths.unsqueeze(1)
    labels = ((x[..., 0] + 0.1 * torch.randn(n_lists, width, generator=g)) > 1.0).float()
    x = torch.where(mask.unsqueeze(-1), x, 0.0)
    return make_set(x, labels * mask, mask, names=[f"f{i}" for i in range(n_features)])


def with_garbage_padding(lists: CandidateSet, seed: int = 7) -> CandidateSet:
    """The same lists with random features and labels at the padded positions."""
    g = torch.Generator().manual_seed(seed)
    noise = 100 * torch.randn(lists.features.shape, generator=g)
    junk_labels = torch.randint(0, 2, lists.labels.shape, generator=g).float()
    return replace(lists,
                   features=torch.where(lists.mask.unsqueeze(-1), lists.features, noise),
                   labels=torch.where(lists.mask, lists.labels, junk_labels))


def mean_ndcg(ranker, lists: CandidateSet, k: int = 5) -> float:
    return float(torch.nanmean(ndcg_at_k(ranker.score(lists), lists.labels, lists.mask, k)))


TRAIN, TEST = toy(100, seed=0), toy(100, seed=1)


@pytest.fixture(scope="module")
def fitted():
    """The three rankers with the paper's defaults, fitted on the toy training lists."""
    return {"ranksvm": RankSVM().fit(TRAIN), "adarank": AdaRank().fit(TRAIN),
            "rankboost": RankBoost().fit(TRAIN)}


# ----------------------------------------------------------------------------- pairs


def test_crucial_pairs_ignore_padding_and_subsample_per_list():
    labels = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, True, True], [True, True, False, False]])
    rows, i, j = crucial_pairs(labels, mask)
    # list 0: relevant 0, 3 x irrelevant 1, 2; list 1: relevant 1 x irrelevant 0 (2 is padding)
    assert list(zip(rows.tolist(), i.tolist(), j.tolist(), strict=True)) == [
        (0, 0, 1), (0, 0, 2), (0, 3, 1), (0, 3, 2), (1, 1, 0)]
    g = torch.Generator().manual_seed(0)
    rows, i, j = crucial_pairs(labels, mask, max_pairs_per_list=2, generator=g)
    assert torch.bincount(rows).tolist() == [2, 1]
    assert bool((labels[rows, i] > labels[rows, j]).all())


# ----------------------------------------------------------------------------- RankSVM


def test_ranksvm_hand_checkable_weights():
    # Two lists; feature a separates relevant from irrelevant, feature b is symmetric noise.
    # Real values of a and b are all 0 or 1 with mean 1/2 and deviation 1/2, so z = 2x - 1 and
    # the pair differences are d = (2, -2) (list 0) and d = (2, 2) (list 1). The hard margin
    # w · d >= 1 is met with least norm by w = (1/2, 0), with no slack, so it is also the
    # soft-margin optimum for C = 100.
    lists = make_set([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [0.0, 0.0]]],
                     [[1.0, 0.0], [1.0, 0.0]], [[True, True], [True, True]])
    ranker = RankSVM(c=100.0).fit(lists)
    torch.testing.assert_close(ranker.mean_, torch.tensor([0.5, 0.5]))
    torch.testing.assert_close(ranker.std_, torch.tensor([0.5, 0.5]))
    torch.testing.assert_close(ranker.weight_, torch.tensor([0.5, 0.0]), atol=2e-3, rtol=0)
    scores = ranker.score(lists)
    assert bool((scores[:, 0] > scores[:, 1]).all())


def test_ranksvm_separating_feature_dominates():
    g = torch.Generator().manual_seed(3)
    n, width = 30, 6
    noise = torch.randn(n, width, 2, generator=g)
    labels = torch.zeros(n, width)
    labels[:, :2] = 1.0
    signal = torch.rand(n, width, generator=g) + 2.0 * labels  # relevant: higher in the list
    lists = make_set(torch.cat([signal.unsqueeze(-1), noise], -1), labels,
                     torch.ones(n, width, dtype=torch.bool), names=("signal", "n1", "n2"))
    for loss in ("hinge", "squared_hinge"):
        ranker = RankSVM(loss=loss).fit(lists)
        w = ranker.weight_
        assert w[0] > 0 and w[0] > 5 * w[1:].abs().max(), (loss, w)
        scores = ranker.score(lists)
        assert bool((scores[:, :2].min(1).values > scores[:, 2:].max(1).values).all())


def test_ranksvm_subsampling_is_seeded():
    a = RankSVM(max_pairs_per_list=5, seed=1).fit(TRAIN)
    b = RankSVM(max_pairs_per_list=5, seed=1).fit(TRAIN)
    torch.testing.assert_close(a.weight_, b.weight_, rtol=0, atol=0)
    assert mean_ndcg(a, TEST) > 0.9


# ----------------------------------------------------------------------------- AdaRank


def adarank_hand_lists() -> CandidateSet:
    # Both lists: feature a = (3, 2, 1), feature b = (1, 3, 2).
    # List A: candidate 0 relevant. List B: candidate 1 relevant.
    features = [[[3.0, 1.0], [2.0, 3.0], [1.0, 2.0]]] * 2
    return make_set(features, [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[True] * 3] * 2)


def test_weak_ranker_ndcg_batched():
    lists = adarank_hand_lists()
    g = 1 / math.log2(3)
    expected = torch.tensor([[1.0, 0.5], [g, 1.0]])
    torch.testing.assert_close(weak_ranker_ndcg(lists.features, lists.labels, lists.mask, 3),
                               expected)


def test_adarank_hand_computed_rounds():
    # NDCG@3, one relevant per list, so E = 1 / log2(1 + rank of the relevant), g = 1/log2(3):
    #   E(a, A) = 1 (rank 1),  E(b, A) = 1/log2(4) = 0.5 (rank 3)
    #   E(a, B) = g (rank 2),  E(b, B) = 1 (rank 1)
    # Round 1, P_1 = (1/2, 1/2): weighted E(a) = (1 + g)/2 = 0.81546 > E(b) = 0.75 -> h_1 = a.
    # alpha_1 = 1/2 ln(((1 + 1) + (1 + g)) / ((1 - 1) + (1 - g))) = 1/2 ln((3 + g)/(1 - g))
    #         = 1/2 ln(3.63093/0.36907) = 1.14313.
    # f_1 = alpha_1 a ranks like a: E(f_1) = (1, g), so
    # P_2 = (e^-1, e^-g) / (e^-1 + e^-g) = (0.40877, 0.59123).
    g = 1 / math.log2(3)
    alpha_1 = 0.5 * math.log((3 + g) / (1 - g))
    p_2 = torch.tensor([math.exp(-1), math.exp(-g)], dtype=torch.float64)
    p_2 = p_2 / p_2.sum()
    lists = adarank_hand_lists()
    one = AdaRank(n_iterations=1, k=3, normalization="none").fit(lists)
    assert one.history_[0]["name"] == "a"
    assert one.history_[0]["weighted_ndcg"] == pytest.approx((1 + g) / 2)
    assert one.history_[0]["alpha"] == pytest.approx(alpha_1)
    assert alpha_1 == pytest.approx(1.14313, abs=1e-5)
    torch.testing.assert_close(one.query_weights_, p_2)
    torch.testing.assert_close(p_2.float(), torch.tensor([0.40877, 0.59123]), atol=1e-5, rtol=0)
    # Round 2: a may not repeat, so h_2 = b (weighted E(b) = 0.40877 * 0.5 + 0.59123 = 0.79562),
    # alpha_2 = 1/2 ln((P(A) 1.5 + P(B) 2) / (P(A) 0.5 + P(B) 0)) = 1.08655.
    # f_2 = alpha_1 a + alpha_2 b scores (4.516, 5.546, 3.316) in both lists: the relevant
    # candidate is 2nd in A (E = g) and 1st in B (E = 1), so P_3 = (e^-g, e^-1) / sum.
    alpha_2 = 0.5 * math.log((p_2[0] * 1.5 + p_2[1] * 2) / (p_2[0] * 0.5))
    two = AdaRank(n_iterations=2, k=3, normalization="none").fit(lists)
    assert [h["name"] for h in two.history_] == ["a", "b"]
    assert two.history_[1]["weighted_ndcg"] == pytest.approx(float(p_2[0] * 0.5 + p_2[1]))
    assert two.history_[1]["alpha"] == pytest.approx(float(alpha_2))
    assert float(alpha_2) == pytest.approx(1.08655, abs=1e-5)
    torch.testing.assert_close(two.weight_, torch.tensor([alpha_1, float(alpha_2)],
                                                         dtype=torch.float64))
    torch.testing.assert_close(two.query_weights_, p_2.flip(0))


def test_adarank_no_weak_ranker_twice_in_a_row():
    ranker = AdaRank(n_iterations=20).fit(TRAIN)
    chosen = [h["weak_ranker"] for h in ranker.history_]
    assert all(a != b for a, b in itertools.pairwise(chosen))
    assert chosen[0] == 0
    repeat = AdaRank(n_iterations=20, no_repeat=False).fit(TRAIN)
    assert {h["weak_ranker"] for h in repeat.history_} == {0}


def test_adarank_variants_learn_the_toy_problem():
    for kwargs in ({"normalization": "zscore"}, {"negative_features": True, "n_iterations": 50}):
        ranker = AdaRank(**kwargs).fit(TRAIN)
        assert mean_ndcg(ranker, TEST) > 0.9, kwargs
    assert set(AdaRank(negative_features=True, n_iterations=2).fit(TRAIN).feature_weights) == {
        "f0", "f1", "f2", "f3", "-f0", "-f1", "-f2", "-f3"}


# ----------------------------------------------------------------------------- RankBoost


def rankboost_hand_lists() -> CandidateSet:
    # List A: 3 candidates, candidate 0 relevant. List B: 2 candidates + 1 padded slot (with
    # garbage features and a relevant label, which must be ignored), candidate 0 relevant.
    features = [[[0.9, 0.3], [0.1, 0.4], [0.5, 0.0]],
                [[0.3, 0.8], [0.7, 0.1], [5.0, -7.0]]]
    return make_set(features, [[1.0, 0.0, 0.0], [1.0, 0.0, 1.0]],
                    [[True, True, True], [True, True, False]])


def test_quantile_thresholds():
    values = torch.tensor([[0.9, 0.3], [0.1, 0.4], [0.5, 0.0], [0.3, 0.8], [0.7, 0.1]])
    # n = 2: levels 1/3, 2/3; N = 5 values: sorted positions floor(4/3) = 1, floor(8/3) = 2.
    torch.testing.assert_close(quantile_thresholds(values, 2),
                               torch.tensor([[0.3, 0.5], [0.1, 0.3]]))


def test_rankboost_hand_computed_rounds():
    # Crucial pairs: A(0,1), A(0,2), B(0,1); D_1 = 1/3 each.
    # Thresholds (quantiles 1/3, 2/3 of the 5 real values): a: 0.3, 0.5; b: 0.1, 0.3.
    # h values (A's three candidates | B's two) and r = sum D (h_i - h_j):
    #   a > 0.3: (1,0,1 | 0,1)  r = (1 + 0 - 1)/3 = 0
    #   a > 0.5: (1,0,0 | 0,1)  r = (1 + 1 - 1)/3 = 1/3
    #   b > 0.1: (1,1,0 | 1,0)  r = (0 + 1 + 1)/3 = 2/3   <- max |r|
    #   b > 0.3: (0,1,0 | 1,0)  r = (-1 + 0 + 1)/3 = 0
    # alpha_1 = 1/2 ln((1 + 2/3)/(1 - 2/3)) = 1/2 ln 5 = 0.80472.
    # D_2 ∝ D_1 exp(alpha (h_j - h_i)): A(0,1): h_j - h_i = 0 -> x1; A(0,2), B(0,1): -1 ->
    # x 5^-1/2. Normalized: (1, 5^-1/2, 5^-1/2)/(1 + 2/sqrt 5) = (0.52786, 0.23607, 0.23607).
    lists = rankboost_hand_lists()
    one = RankBoost(n_rounds=1, n_thresholds=2).fit(lists)
    (round_1,) = one.rounds_
    assert (round_1["feature"], round_1["threshold"]) == (1, pytest.approx(0.1))
    assert round_1["r"] == pytest.approx(2 / 3)
    assert round_1["alpha"] == pytest.approx(0.5 * math.log(5))
    s5 = math.sqrt(5)
    torch.testing.assert_close(one.pair_weights_, torch.tensor(
        [s5 / (s5 + 2), 1 / (s5 + 2), 1 / (s5 + 2)], dtype=torch.float64))
    # Round 2 with D_2 = (u, v, v), u = 0.52786, v = 0.23607:
    #   a > 0.3: u - v = 0.29180;  a > 0.5: u + v - v = u = 0.52786   <- max |r|
    #   b > 0.1: v + v = 0.47214;  b > 0.3: -u + v = -0.29180
    u = s5 / (s5 + 2)
    two = RankBoost(n_rounds=2, n_thresholds=2).fit(lists)
    round_2 = two.rounds_[1]
    assert (round_2["feature"], round_2["threshold"]) == (0, pytest.approx(0.5))
    assert round_2["r"] == pytest.approx(u)
    alpha_2 = 0.5 * math.log((1 + u) / (1 - u))
    assert round_2["alpha"] == pytest.approx(alpha_2)
    # H = alpha_1 [b > 0.1] + alpha_2 [a > 0.5]
    alpha_1 = 0.5 * math.log(5)
    scores = two.score(lists)
    torch.testing.assert_close(scores[0], torch.tensor([alpha_1 + alpha_2, alpha_1, 0.0]))
    torch.testing.assert_close(scores[1, :2], torch.tensor([alpha_1, alpha_2]))


def test_rankboost_scores_are_the_sum_of_chosen_weak_rankers():
    ranker = RankBoost(n_rounds=40).fit(TRAIN)
    x = TEST.features
    direct = torch.zeros(x.shape[:2], dtype=torch.float64)
    for r in ranker.rounds_:
        direct += r["alpha"] * (x[..., r["feature"]] > r["threshold"]).double()
    torch.testing.assert_close(ranker.score(TEST), direct.float())
    assert max(ranker.feature_importance, key=ranker.feature_importance.get) == "f0"


# ----------------------------------------------------------------------------- common


@pytest.mark.parametrize("name", ["ranksvm", "adarank", "rankboost"])
def test_toy_problem_held_out_ndcg(fitted, name):
    ranker = fitted[name]
    assert isinstance(ranker, Ranker)
    assert mean_ndcg(ranker, TEST) > 0.9
    scores = ranker.score(TEST)
    assert scores.shape == TEST.labels.shape
    assert scores.device == TEST.features.device
    assert scores.dtype == torch.float32


@pytest.mark.parametrize("name", ["ranksvm", "adarank", "rankboost"])
def test_save_and_load_give_identical_scores(fitted, name, tmp_path):
    ranker = fitted[name]
    path = tmp_path / name
    ranker.save(path)
    again = type(ranker).load(path)
    assert torch.equal(again.score(TEST), ranker.score(TEST))


@pytest.mark.parametrize("make", [
    lambda: RankSVM(max_pairs_per_list=20),
    lambda: AdaRank(n_iterations=30),
    lambda: AdaRank(n_iterations=30, normalization="zscore"),
    lambda: RankBoost(n_rounds=30),
], ids=["ranksvm", "adarank", "adarank-zscore", "rankboost"])
def test_padding_is_ignored_in_fit(make):
    lists = toy(40, seed=5)
    assert not bool(lists.mask.all())
    clean = make().fit(lists)
    dirty = make().fit(with_garbage_padding(lists))
    assert torch.equal(clean.score(TEST), dirty.score(TEST))


def test_errors():
    lists = toy(4, seed=0)
    for ranker in (RankSVM(), AdaRank(), RankBoost()):
        with pytest.raises(RuntimeError, match="fit"):
            ranker.score(lists)
    no_pairs = replace(lists, labels=torch.zeros_like(lists.labels))
    for ranker in (RankSVM(), AdaRank(), RankBoost()):
        with pytest.raises(ValueError, match=r"relevant|labels"):
            ranker.fit(no_pairs)
    renamed = replace(lists, feature_names=("x", "y", "z", "w"))
    for ranker in (RankSVM(), AdaRank(n_iterations=2), RankBoost(n_rounds=2)):
        with pytest.raises(ValueError, match="features"):
            ranker.fit(lists).score(renamed)
    with pytest.raises(ValueError):
        RankSVM(loss="log")
    with pytest.raises(ValueError):
        AdaRank(normalization="minmax")
    with pytest.raises(ValueError):
        RankBoost(n_thresholds=0)


def test_configs_build_the_rankers_with_the_paper_defaults():
    expected = {"ranksvm": (RankSVM, "c", 100.0), "adarank": (AdaRank, "n_iterations", 300),
                "rankboost": (RankBoost, "n_rounds", 700)}
    for name, (cls, attribute, value) in expected.items():
        cfg = OmegaConf.merge({"seed": 0}, {"model": OmegaConf.load(CONF / f"{name}.yaml")})
        ranker = instantiate(cfg.model[name])
        assert isinstance(ranker, cls)
        assert getattr(ranker, attribute) == value
