"""Per-user queries of tag-based item recommendation (the Do-Rank paper's protocol): the queries
against plain grouping, the max and profile aggregations against scoring each (user, tag) pair
alone, the 2-D model's per-user form by hand, early stopping on per-user validation queries,
and the task end to end."""

from __future__ import annotations

import functools
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest
import pytorch_lightning as pl
import torch
from test_itemrec import toy_folksonomy

from tagtorch.itemrec.base import query_scores, top_k_queries, user_scores
from tagtorch.itemrec.baselines import GlobalPopularity, TwoDimensional
from tagtorch.itemrec.data import TagProfile, item_recommendation_data
from tagtorch.itemrec.dorank import DoRank


@pytest.fixture(scope="module")
def user_data():
    return item_recommendation_data(toy_folksonomy(), p=1, seed=0, query="user")


def test_per_user_queries_match_plain_grouping(user_data):
    d = user_data
    for queries, evaluated, learned in ((d.test_queries, d.test, np.concatenate([d.train, d.val])),
                                        (d.val_queries, d.val, d.train)):
        gold, known = defaultdict(set), defaultdict(set)
        for u, i, _ in evaluated.tolist():
            gold[u].add(i)
        for u, i, _ in learned.tolist():
            known[u].add(i)
        assert queries.users.tolist() == sorted(gold)
        assert (queries.tags == -1).all() and queries.per_user and queries.aggregate == "max"
        for row, user in enumerate(queries.users.tolist()):
            assert set(queries.gold[row].tolist()) == gold[user]
            assert set(queries.known[row].tolist()) == known[user]
        assert queries.ids([0]) == [f"u{queries.users[0]}"]
    with pytest.raises(ValueError, match="query must be"):
        item_recommendation_data(toy_folksonomy(), query="items")
    with pytest.raises(ValueError, match="aggregate must be"):
        item_recommendation_data(toy_folksonomy(), query="user", aggregate="mean")


def test_tag_profile_is_the_share_of_the_users_training_triples(user_data):
    d = user_data
    profile = TagProfile.from_triples(d.train, d.n_users, d.n_tags)
    for user in (0, 5, 17):
        counts = Counter(t for u, _, t in d.train.tolist() if u == user)
        total = sum(counts.values())
        got = dict(zip(profile.tags[user].tolist(),
                       profile.weights[profile.tags.offsets[user]:profile.tags.offsets[user + 1]],
                       strict=True))
        assert got.keys() == counts.keys()
        for tag, n in counts.items():
            assert got[tag] == pytest.approx(n / total)
    rows = np.array([5, 0])
    part = profile.take(rows)
    assert part.tags[0].tolist() == profile.tags[5].tolist()
    assert part.weights.sum() == pytest.approx(2.0)


class RandomCP:
    """s(u, i, t) = sum_f U_uf V_if T_tf with random factors."""

    def __init__(self, n_users: int, n_items: int, n_tags: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.u = torch.randn(n_users, 4, generator=g)
        self.v = torch.randn(n_items, 4, generator=g)
        self.t = torch.randn(n_tags, 4, generator=g)

    def score(self, users, tags):
        return (self.u[users] * self.t[tags]) @ self.v.T


@pytest.mark.parametrize("budget", [1 << 24, 50])
def test_aggregations_match_scoring_each_pair_alone(user_data, budget):
    d = user_data
    model = RandomCP(d.n_users, d.n_items, d.n_tags)
    users = torch.tensor([3, 0, 11])
    profile = TagProfile.from_triples(d.train, d.n_users, d.n_tags).take(users.numpy())
    got_max = user_scores(model, users, profile, "max", d.n_items, d.n_tags, budget=budget)
    got_profile = user_scores(model, users, profile, "profile", d.n_items, d.n_tags,
                              budget=budget)
    for row, user in enumerate(users.tolist()):
        per_tag = [model.score(torch.tensor([user]), torch.tensor([t]))[0]
                   for t in range(d.n_tags)]
        torch.testing.assert_close(got_max[row], torch.stack(per_tag).max(0).values)
        start, end = profile.tags.offsets[row], profile.tags.offsets[row + 1]
        want = sum(float(w) * per_tag[int(t)] for t, w in
                   zip(profile.tags.values[start:end], profile.weights[start:end], strict=True))
        torch.testing.assert_close(got_profile[row], want, atol=1e-5, rtol=1e-5)


def test_two_dimensional_per_user_form_and_global_popularity(user_data):
    d = user_data
    two = TwoDimensional(beta=0.7, alpha=0.0).fit(d)
    rows = np.arange(4)
    q = d.test_queries
    got = query_scores(two, q, rows, d.n_items, d.n_tags)
    for row in rows:
        user = int(q.users[row])
        mine = [(i, t) for u, i, t in d.train.tolist() if u == user]
        by_user = np.bincount([i for i, _ in mine], minlength=d.n_items) / len(mine)
        tag_share = Counter(t for _, t in mine)
        by_tags = np.zeros(d.n_items)
        for tag, n in tag_share.items():
            tagged = [i for _, i, t in d.train.tolist() if t == tag]
            by_tags += n / len(mine) * np.bincount(tagged, minlength=d.n_items) / len(tagged)
        np.testing.assert_allclose(got[row].numpy(), 0.3 * by_user + 0.7 * by_tags, atol=1e-5)
    popular = GlobalPopularity().fit(d)
    scores = query_scores(popular, q, rows, d.n_items, d.n_tags)
    counts = np.bincount(d.train[:, 1], minlength=d.n_items)
    np.testing.assert_allclose(scores.numpy(), np.tile(counts, (len(rows), 1)))


def test_factor_model_early_stops_on_per_user_validation(user_data):
    model = DoRank(rank=8, batch_size=16, patience=2, seed=0, regularization=1e-4,
                   trainer=functools.partial(pl.Trainer, max_epochs=3, accelerator="cpu",
                                             enable_progress_bar=False))
    model.fit(user_data)
    assert len(model.history_) >= 1
    # the logged validation DCG@10 is that of the per-user validation queries, max-aggregated
    q = user_data.val_queries
    rows = np.arange(len(q))
    labels, mask = q.batch(rows, user_data.n_items)
    scores = query_scores(model, q, rows, user_data.n_items, user_data.n_tags)
    from tagtorch.itemrec.base import dcg_at_k
    best = max(h["val_dcg@10"] for h in model.history_)
    assert float(dcg_at_k(scores, labels, mask).mean()) == pytest.approx(best, abs=1e-4)


def test_per_user_task_end_to_end(tmp_path):
    from test_itemrec import run_synthetic_itemrec

    results = run_synthetic_itemrec(tmp_path, [
        "task.seeds=[0]", "trainer.max_epochs=1", "task.query=user",
        "model=[dorank,global_popularity,two_dimensional]", "model.dorank.rank=8"])
    assert set(results["method"]) == {"dorank", "global_popularity", "two_dimensional"}
    per_query = pd.read_csv(tmp_path / "per_object.csv.gz")
    run = pd.read_csv(tmp_path / "run.dorank.trec", sep=" ", header=None)
    assert run[0].str.fullmatch(r"u\d+").all()
    n_users = per_query.query("method == 'dorank'")["object"].nunique()
    assert n_users == run[0].nunique()


def test_count_models_get_the_validation_dcg_the_factor_models_stop_on(user_data):
    from tagtorch.evaluation.item_recommendation import ItemRecommendationTask

    model = TwoDimensional().fit(user_data)
    got = ItemRecommendationTask(batch_size=7)._validation_dcg(model, user_data)
    q = user_data.val_queries
    total = 0.0
    for row in range(len(q)):
        scores = query_scores(model, q, np.array([row]), user_data.n_items, user_data.n_tags)[0]
        known = set(q.known[row].tolist())
        ranked = [i for i in torch.argsort(scores, descending=True, stable=True).tolist()
                  if i not in known][:10]
        gold = set(q.gold[row].tolist())
        total += sum(1 / np.log2(r + 2) for r, i in enumerate(ranked) if i in gold)
    assert got == pytest.approx(total / len(q), abs=1e-5)


def test_top_k_queries_match_a_plain_sort_without_known_items(user_data):
    d = user_data
    model = TwoDimensional().fit(d)
    q = d.test_queries
    seen = []
    for rows, items, scores in top_k_queries(model, q, d.n_items, d.n_tags, k=5, batch_size=7):
        assert items.shape == (len(rows), 5)
        for r, row in enumerate(rows.tolist()):
            known = set(q.known.take([row]).values.tolist())
            full = user_scores(model, torch.tensor([q.users[row]]), q.profile.take([row]), "max",
                               d.n_items, d.n_tags)[0].tolist()
            ranked = sorted((i for i in range(d.n_items) if i not in known),
                            key=lambda i: -full[i])[:5]
            assert scores[r].tolist() == pytest.approx([full[i] for i in ranked])
            assert items[r].tolist() == ranked  # equal scores by item code, as the metrics
            assert [full[i] for i in items[r].tolist()] == pytest.approx(scores[r].tolist())
            assert not known & set(items[r].tolist())
            seen.append(row)
    assert seen == list(range(len(q)))


def test_val_sample_early_stops_on_a_seeded_sample_of_the_validation_queries(user_data):
    from test_itemrec import SMALL

    from tagtorch.itemrec.base import dcg_at_k

    d = user_data
    model = DoRank(val_sample=6, **{**SMALL, "seed": 3}).fit(d)
    rows = np.sort(np.random.default_rng(3).permutation(len(d.val_queries))[:6])
    sample = d.val_queries.take(rows)
    labels, mask = sample.batch(np.arange(6), d.n_items)
    with torch.no_grad():
        scores = query_scores(model, sample, np.arange(6), d.n_items, d.n_tags)
    best = max(h["val_dcg@10"] for h in model.history_)
    assert float(dcg_at_k(scores, labels, mask).mean()) == pytest.approx(best, rel=1e-5)
    with pytest.raises(ValueError, match="val_sample"):
        DoRank(val_sample=0)
