"""Do-Rank+ (ours): its score and penalty against a hand computation from its parameters; the
faithful Do-Rank is untouched by it; save and load."""

from __future__ import annotations

import functools
import math

import pytest
import pytorch_lightning as pl
import torch
from test_itemrec import toy_folksonomy

from tagtorch.itemrec.data import item_recommendation_data
from tagtorch.itemrec.dorank import DoRank
from tagtorch.itemrec.dorank_plus import DoRankPlus


def built(user_item: bool) -> DoRankPlus:
    model = DoRankPlus(rank=3, user_item=user_item, regularization=0.1, seed=0)
    torch.manual_seed(0)
    model.build(4, 5, 6)
    with torch.no_grad():
        model.item_bias.copy_(torch.randn(5))
    return model


@pytest.mark.parametrize("user_item", [False, True])
def test_score_and_penalty_match_a_hand_computation(user_item):
    m = built(user_item)
    users, tags = torch.tensor([1, 3]), torch.tensor([0, 5])
    got = m.score(users, tags)
    for row, (u, t) in enumerate(zip(users.tolist(), tags.tolist(), strict=True)):
        for i in range(5):
            want = sum(float(m.user_factors[u, f] * m.item_factors[i, f] * m.tag_factors[t, f])
                       for f in range(3))
            want += float(m.item_bias[i]) + float(m.tag_item_tags[t] @ m.tag_item_items[i])
            if user_item:
                want += float(m.user_item_users[u] @ m.user_item_items[i])
            assert float(got[row, i]) == pytest.approx(want, abs=1e-5)
    items = torch.tensor([[0, 2], [4, 0]])
    mask = torch.tensor([[True, True], [True, False]])
    penalty = m.penalty(users, tags, items, mask)
    for row, (u, t) in enumerate(zip(users.tolist(), tags.tolist(), strict=True)):
        positives = [int(i) for i, ok in zip(items[row], mask[row], strict=True) if ok]
        want = float(m.user_factors[u].square().sum() + m.tag_factors[t].square().sum()
                     + m.tag_item_tags[t].square().sum())
        for i in positives:
            want += float(m.item_factors[i].square().sum() + m.tag_item_items[i].square().sum()
                          + m.item_bias[i] ** 2)
            if user_item:
                want += float(m.user_item_items[i].square().sum())
        if user_item:
            want += float(m.user_item_users[u].square().sum())
        assert float(penalty[row]) == pytest.approx(want, rel=1e-5)


def test_dorank_keeps_the_pure_cp_score_and_save_load(tmp_path):
    data = item_recommendation_data(toy_folksonomy(), p=1, seed=0, query="user")
    small = {"rank": 4, "batch_size": 16, "seed": 0,
             "trainer": functools.partial(pl.Trainer, max_epochs=2, accelerator="cpu",
                                          enable_progress_bar=False)}
    plain = DoRank(**small)
    plain.build(data.n_users, data.n_items, data.n_tags)
    assert not hasattr(plain, "item_bias")
    model = DoRankPlus(user_item=True, **small).fit(data)
    model.save(tmp_path / "m")
    again = DoRankPlus.load(tmp_path / "m")
    users, tags = torch.tensor([0, 1]), torch.tensor([2, 3])
    torch.testing.assert_close(again.score(users, tags), model.score(users, tags))


def test_its_own_aggregation_of_per_user_queries():
    from tagtorch.itemrec.base import query_scores

    data = item_recommendation_data(toy_folksonomy(), p=1, seed=0, query="user")
    model = built(False)
    model.build(data.n_users, data.n_items, data.n_tags)
    rows = [0, 1]
    plain = query_scores(model, data.test_queries, rows, data.n_items, data.n_tags)  # max
    model.user_aggregate = "profile"
    profile = query_scores(model, data.test_queries, rows, data.n_items, data.n_tags)
    assert not torch.allclose(plain, profile)
    with pytest.raises(ValueError, match="user_aggregate"):
        DoRankPlus(user_aggregate="mean")


@pytest.mark.parametrize("make", [
    lambda: DoRank(rank=3, seed=0), lambda: DoRankPlus(rank=3, user_item=True, seed=0)])
def test_score_items_are_the_dense_scores_gathered(make):
    model = make()
    torch.manual_seed(0)
    model.build(4, 7, 5)
    users, tags = torch.tensor([0, 3, 2]), torch.tensor([4, 1, 1])
    items = torch.tensor([[6, 0], [2, 2], [5, 1]])
    dense = model.score(users, tags)
    want = torch.stack([dense[b, items[b]] for b in range(3)])
    torch.testing.assert_close(model.score_items(users, tags, items), want)


@pytest.mark.parametrize("power", [0.0, 1.0])
def test_sampled_negatives_estimate_the_sum_over_all_negatives(power):
    """Mean over many draws of sum_j w_j sigmoid(s_j - s_i) against the exact sum (plain loop)."""
    data = item_recommendation_data(toy_folksonomy(), p=1, seed=0)
    model = DoRank(rank=3, negatives=50, negative_power=power, seed=0)
    torch.manual_seed(0)
    model.build(data.n_users, data.n_items, data.n_tags)
    model.data = data
    model.on_fit_start()
    users, tags = torch.tensor([0, 5]), torch.tensor([1, 2])
    with torch.no_grad():
        scores = model.score(users, tags)
        s_i = scores[:, 0]
        tagged = [set(data.user_items.take([u]).values.tolist()) for u in users.tolist()]
        exact = [sum(1 / (1 + math.exp(-(float(scores[b, j]) - float(s_i[b]))))
                     for j in range(data.n_items) if j not in tagged[b]) for b in range(2)]
        torch.manual_seed(1)
        estimates = []
        for _ in range(400):
            drawn, weights = model.draw_negatives(users)
            diff = model.score_items(users, tags, drawn) - s_i[:, None]
            estimates.append((torch.sigmoid(diff) * weights).sum(-1))
            assert all(w == 0 for b in range(2) for j, w in zip(drawn[b].tolist(),
                       weights[b].tolist(), strict=True) if j in tagged[b])
    mean = torch.stack(estimates).mean(0)
    for b in range(2):
        assert float(mean[b]) == pytest.approx(exact[b], rel=0.03)


def test_sampled_negatives_need_fast_learning_and_a_count():
    with pytest.raises(ValueError, match="fast"):
        DoRank(fast=False, negatives=5)
    with pytest.raises(ValueError, match="negatives"):
        DoRank(negatives=-1)
    with pytest.raises(RuntimeError, match="during fit"):
        DoRank(negatives=5).draw_negatives(torch.tensor([0]))
