"""Tag-based item recommendation: split, UTS sets, Do-Rank objective, models, task."""

from __future__ import annotations

import functools
import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
import pytorch_lightning as pl
import tensorly as tl
import torch

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.itemrec.base import ItemRanker, dcg_at_k
from tagtorch.itemrec.baselines import ProbabilisticCP, TagPopularity, TwoDimensional
from tagtorch.itemrec.data import item_recommendation_data
from tagtorch.itemrec.dorank import DoRank, cp_scores, smoothed_dcg_fast, smoothed_dcg_regular
from tagtorch.itemrec.dorank_plus import DoRankPlus
from tagtorch.itemrec.pitf import PITF


def toy_folksonomy(seed: int = 0, n_users: int = 40, n_items: int = 60,
                   n_tags: int = 12) -> Folksonomy:
    """Users like one of 3 item groups; each group has its own tags: a learnable structure."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        group = u % 3
        items = rng.choice(np.arange(group, n_items, 3), size=10, replace=False)
        for i in items:
            for t in rng.choice(np.arange(group, n_tags, 3), size=2, replace=False):
                rows.append((u, int(i), int(t)))
    return Folksonomy.from_frame(pd.DataFrame(rows, columns=["user", "object", "tag"]),
                                 name="toy")


@pytest.fixture(scope="module")
def toy_data():
    # triples: test items are often known to their user, an easier structure for small models
    return item_recommendation_data(toy_folksonomy(), p=1, seed=0, split="triples")


def trainer(epochs: int = 15) -> functools.partial:
    return functools.partial(pl.Trainer, max_epochs=epochs, accelerator="cpu",
                             enable_progress_bar=False)


# ----------------------------------------------------------------------------- data
def test_split_is_a_partition_with_the_requested_shares(toy_data):
    total = len(toy_data.train) + len(toy_data.val) + len(toy_data.test)
    assert len(toy_data.test) == round(0.2 * total)
    assert len(toy_data.val) == round(0.25 * (total - len(toy_data.test)))
    keys = [set(map(tuple, part.tolist()))
            for part in (toy_data.train, toy_data.val, toy_data.test)]
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    again = item_recommendation_data(toy_folksonomy(), p=1, seed=0, split="triples")
    np.testing.assert_array_equal(again.test, toy_data.test)
    other = item_recommendation_data(toy_folksonomy(), p=1, seed=1, split="triples")
    assert not np.array_equal(other.test, toy_data.test)


def test_posts_split_keeps_each_post_on_one_side():
    data = item_recommendation_data(toy_folksonomy(), p=1, seed=3)  # split="posts"
    sides = [{(u, i) for u, i, _ in part.tolist()} for part in (data.train, data.val, data.test)]
    assert not (sides[0] & sides[1]) and not (sides[0] & sides[2]) and not (sides[1] & sides[2])
    n_posts = sum(len(side) for side in sides)
    assert len(sides[2]) == round(0.2 * n_posts)
    assert len(sides[1]) == round(0.25 * (n_posts - len(sides[2])))
    everything = sorted(map(tuple, np.concatenate([data.train, data.val, data.test]).tolist()))
    full = item_recommendation_data(toy_folksonomy(), p=1, seed=3, split="triples")
    assert everything == sorted(map(tuple, np.concatenate([full.train, full.val,
                                                           full.test]).tolist()))
    with pytest.raises(ValueError, match="split must be"):
        item_recommendation_data(toy_folksonomy(), split="users")


def test_uts_sets_and_queries_match_plain_grouping(toy_data):
    sets = defaultdict(set)
    for u, i, t in toy_data.train.tolist():
        sets[(u, t)].add(i)
    got = {(int(u), int(t)): set(toy_data.train_sets.items[k].tolist())
           for k, (u, t) in enumerate(zip(toy_data.train_sets.users, toy_data.train_sets.tags,
                                          strict=True))}
    assert got == dict(sets)
    known = defaultdict(set)
    for u, i, t in np.concatenate([toy_data.train, toy_data.val]).tolist():
        known[(u, t)].add(i)
    gold = defaultdict(set)
    for u, i, t in toy_data.test.tolist():
        gold[(u, t)].add(i)
    q = toy_data.test_queries
    assert len(q) == len(gold)
    for k in range(len(q)):
        key = (int(q.users[k]), int(q.tags[k]))
        assert set(q.gold[k].tolist()) == gold[key]
        assert set(q.known[k].tolist()) == known.get(key, set())
    labels, mask = q.batch(np.arange(len(q)), toy_data.n_items)
    for k in range(len(q)):
        assert set(torch.nonzero(labels[k]).flatten().tolist()) == set(q.gold[k].tolist())
        assert set(torch.nonzero(~mask[k]).flatten().tolist()) == set(q.known[k].tolist())


def assert_known_are_the_users_items(queries, learned: np.ndarray, n_items: int) -> None:
    """Each query's known (masked) items are every item its user has in ``learned``."""
    items_of = defaultdict(set)
    for u, i, _ in learned.tolist():
        items_of[u].add(i)
    assert len(queries) > 0
    labels, mask = queries.batch(np.arange(len(queries)), n_items)
    for k in range(len(queries)):
        expected = items_of[int(queries.users[k])]
        assert set(queries.known[k].tolist()) == expected
        assert set(torch.nonzero(~mask[k]).flatten().tolist()) == expected
        assert not (set(queries.gold[k].tolist()) & expected)  # gold stays rankable
    assert (labels.bool() & mask).sum() == labels.sum()


def test_posts_split_excludes_every_item_the_user_tagged_before():
    data = item_recommendation_data(toy_folksonomy(), p=1, seed=2)  # split="posts"
    assert_known_are_the_users_items(data.val_queries, data.train, data.n_items)
    assert_known_are_the_users_items(data.test_queries, np.concatenate([data.train, data.val]),
                                     data.n_items)
    small = data.subsample(0.5, seed=1)  # a subsample keeps the split's rule
    assert small.split == "posts" and len(small.train) < len(data.train)
    assert_known_are_the_users_items(small.val_queries, small.train, data.n_items)


def test_negative_mask_is_the_items_a_user_never_tagged(toy_data):
    tagged = defaultdict(set)
    for u, i, _ in toy_data.train.tolist():
        tagged[u].add(i)
    users = torch.tensor([0, 5, 7])
    mask = toy_data.negative_mask(users)
    for row, u in enumerate(users.tolist()):
        expected = set(range(toy_data.n_items)) - tagged[u]
        assert set(torch.nonzero(mask[row]).flatten().tolist()) == expected


def test_p_core_and_bad_fractions():
    with pytest.raises(ValueError, match="test_fraction"):
        item_recommendation_data(toy_folksonomy(), test_fraction=1.0)
    core = item_recommendation_data(toy_folksonomy(), p=3, seed=0)
    assert core.n_items <= 60


# ----------------------------------------------------------------------------- objective
def test_cp_scores_match_tensorly_cp_to_tensor():
    g = torch.Generator().manual_seed(0)
    u, v, t = (torch.randn(n, 4, generator=g, dtype=torch.float64) for n in (3, 5, 2))
    dense = torch.from_numpy(tl.cp_to_tensor((np.ones(4), [u.numpy(), v.numpy(), t.numpy()])))
    users, tags = torch.tensor([0, 2, 1, 2]), torch.tensor([1, 0, 1, 1])
    expected = torch.stack([dense[a, :, b] for a, b in zip(users, tags, strict=True)])
    torch.testing.assert_close(cp_scores(u[users], t[tags], v), expected)


def plain_fast(pos, scores, negatives):
    total = 0.0
    for s_i in pos:
        rank = 1 + sum(1 / (1 + math.exp(-(scores[j] - s_i))) for j in negatives)
        total += 1 / math.log2(1 + rank)
    return total


def test_smoothed_dcg_fast_matches_a_plain_loop():
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(3, 7, generator=g, dtype=torch.float64)
    positives = [[0, 3], [5], [1, 2, 6]]
    negatives = [[1, 2, 4], [0, 1, 2, 3], [0, 4]]
    items = torch.tensor([[0, 3, 0], [5, 0, 0], [1, 2, 6]])
    mask = torch.tensor([[True, True, False], [True, False, False], [True, True, True]])
    neg = torch.zeros(3, 7, dtype=torch.bool)
    for b, row in enumerate(negatives):
        neg[b, row] = True
    got = smoothed_dcg_fast(scores.gather(1, items), mask, scores, neg)
    for b in range(3):
        expected = plain_fast(scores[b, positives[b]].tolist(), scores[b].tolist(), negatives[b])
        assert got[b].item() == pytest.approx(expected, rel=1e-12)


def test_smoothed_dcg_fast_ignores_padding():
    g = torch.Generator().manual_seed(2)
    scores = torch.randn(2, 6, generator=g, dtype=torch.float64)
    neg = torch.rand(2, 6, generator=g) < 0.5
    positive = torch.tensor([[0.3], [-0.2]], dtype=torch.float64)
    base = smoothed_dcg_fast(positive, torch.ones(2, 1, dtype=torch.bool), scores, neg)
    padded = torch.cat([positive, torch.randn(2, 4, generator=g, dtype=torch.float64)], 1)
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[:, 0] = True
    torch.testing.assert_close(smoothed_dcg_fast(padded, mask, scores, neg), base)


def test_smoothed_dcg_regular_matches_a_plain_loop_and_tends_to_dcg():
    scores = torch.tensor([[0.3, -1.0, 2.0, 0.1]], dtype=torch.float64)
    gains = torch.tensor([[1.0, -0.5, 0.0, 1.0]], dtype=torch.float64)
    expected = 0.0
    s = scores[0].tolist()
    for i in range(4):
        rank = 1 + sum(1 / (1 + math.exp(-(s[j] - s[i]))) for j in range(4) if j != i)
        expected += gains[0, i].item() / math.log2(1 + rank)
    assert smoothed_dcg_regular(scores, gains).item() == pytest.approx(expected, rel=1e-12)
    # with well separated scores the smoothed ranks are the true ranks: 3, 4, 1, 2
    sharp = smoothed_dcg_regular(scores * 1000, gains).item()
    true_dcg = 1 / math.log2(4) - 0.5 / math.log2(5) + 1 / math.log2(3)
    assert sharp == pytest.approx(true_dcg, rel=1e-9)


def test_dcg_at_k_matches_a_plain_computation():
    scores = torch.tensor([[0.5, 0.9, 0.1, 0.7], [0.2, 0.3, 0.4, 0.1]])
    labels = torch.tensor([[1.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True, True], [True, True, False, True]])
    # row 0 order: 1, 3, 0, 2 -> gains 0, 1, 1, 1; row 1 (item 2 excluded): 1, 0, 3
    expected = [1 / math.log2(3) + 1 / math.log2(4), 1 + 1 / math.log2(3)]
    torch.testing.assert_close(dcg_at_k(scores, labels, mask, k=3),
                               torch.tensor(expected), rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- models
def test_most_popular_and_two_dimensional_match_plain_counts(toy_data):
    users = torch.tensor([0, 3, 8])
    tags = torch.tensor([0, 4, 2])
    counts = defaultdict(float)
    user_counts = defaultdict(float)
    for u, i, t in toy_data.train.tolist():
        counts[(t, i)] += 1
        user_counts[(u, i)] += 1
    pop = TagPopularity().fit(toy_data).score(users, tags)
    two = TwoDimensional(beta=0.3, alpha=0.0).fit(toy_data).score(users, tags)
    for row, (u, t) in enumerate(zip(users.tolist(), tags.tolist(), strict=True)):
        by_tag = np.array([counts[(t, i)] for i in range(toy_data.n_items)])
        by_user = np.array([user_counts[(u, i)] for i in range(toy_data.n_items)])
        np.testing.assert_array_equal(np.floor(pop[row].numpy()), by_tag)
        expected = 0.7 * by_user / by_user.sum() + 0.3 * by_tag / max(by_tag.sum(), 1)
        np.testing.assert_allclose(two[row].numpy(), expected, rtol=1e-5, atol=1e-7)


SMALL = {"rank": 8, "batch_size": 8, "patience": 5, "trainer": trainer(), "seed": 0}


@pytest.mark.parametrize("make", [
    lambda: DoRank(**SMALL),
    lambda: DoRank(fast=False, **SMALL),
    lambda: PITF(**SMALL),
    lambda: ProbabilisticCP(**SMALL),
    lambda: DoRankPlus(**SMALL),
    lambda: DoRankPlus(user_item=True, **SMALL),
    lambda: DoRank(negatives=20, **SMALL),
    lambda: DoRankPlus(negatives=20, negative_power=1.0, **SMALL),
    lambda: PITF(loop="lean", lean_batch_size=64, **SMALL),
    lambda: DoRank(loop="lean", negatives=20, lean_batch_size=64, **SMALL),
    lambda: DoRank(loop="lean", **SMALL),
    lambda: DoRankPlus(loop="lean", negatives=20, user_item=True, lean_batch_size=64,
                       **SMALL),
], ids=["dorank", "dorank-regular", "pitf", "cp", "dorank_plus", "dorank_plus-user_item",
        "dorank-sampled", "dorank_plus-popularity-sampled", "pitf-lean", "dorank-sampled-lean",
        "dorank-fast-lean", "dorank_plus-user_item-lean"])
def test_factor_models_learn_the_toy_structure(toy_data, make):
    model = make()
    assert isinstance(model, ItemRanker)
    model.fit(toy_data)
    curve = [row["val_dcg@10"] for row in model.history_]
    assert max(curve) > curve[0] + 0.05, curve
    q = toy_data.test_queries
    labels, mask = q.batch(np.arange(len(q)), toy_data.n_items)
    learned = dcg_at_k(model.score(torch.from_numpy(q.users), torch.from_numpy(q.tags)),
                       labels, mask).mean()
    chance = dcg_at_k(torch.rand(labels.shape, generator=torch.Generator().manual_seed(0)),
                      labels, mask).mean()
    assert learned > 2 * chance, (learned, chance)


def test_save_load_scores_identically(tmp_path, toy_data):
    users, tags = torch.tensor([0, 1, 2]), torch.tensor([0, 1, 2])
    for model in [DoRank(rank=4, trainer=trainer(2), fast=False),
                  PITF(rank=4, trainer=trainer(2)),
                  ProbabilisticCP(rank=4, trainer=trainer(2), negatives=2),
                  TagPopularity(), TwoDimensional(beta=0.2)]:
        model.fit(toy_data)
        model.save(tmp_path / type(model).__name__)
        loaded = type(model).load(tmp_path / type(model).__name__)
        torch.testing.assert_close(loaded.score(users, tags), model.score(users, tags))
        for name in ("fast", "negatives", "beta"):  # settings come back
            assert getattr(loaded, name, None) == getattr(model, name, None)
    with pytest.raises(RuntimeError, match="not fitted"):
        TagPopularity().score(users, tags)


class _Crash(pl.Callback):
    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_train_epoch_start(self, trainer, module):
        if trainer.current_epoch == self.epoch:
            raise RuntimeError("simulated interruption")


def interrupted_trainer(crash_at: int = 3, epochs: int = 6):
    """A trainer factory of ``epochs`` epochs, interrupted at the start of epoch ``crash_at``."""

    def make(**kwargs) -> pl.Trainer:
        kwargs["callbacks"] = [*kwargs["callbacks"], _Crash(crash_at)]
        return pl.Trainer(max_epochs=epochs, accelerator="cpu", enable_progress_bar=False,
                          **kwargs)

    return make


crashing_trainer = interrupted_trainer()  # 6 epochs, interrupted at the start of epoch 3


def test_training_resumes_from_the_last_checkpoint(tmp_path, toy_data):
    first = DoRank(rank=4, trainer=crashing_trainer, patience=10, checkpoint_dir=tmp_path)
    with pytest.raises(RuntimeError, match="simulated"):
        first.fit(toy_data)
    last = first.run_folder(toy_data) / "last.ckpt"
    assert last.is_file() and last.parent.parent == tmp_path / "runs"
    resumed = DoRank(rank=4, trainer=trainer(6), patience=10, checkpoint_dir=tmp_path)
    resumed.fit(toy_data)
    epochs = [int(row["epoch"]) for row in resumed.history_]
    assert epochs == list(range(6))  # epochs 0-2 from the first run, 3-5 after resuming
    assert [r["val_dcg@10"] for r in resumed.history_[:3]] == [
        r["val_dcg@10"] for r in first.history_[:3]]
    assert not last.exists()  # finished: the next fit starts over


def test_a_run_with_other_settings_keeps_the_interrupted_runs_checkpoint(tmp_path, toy_data,
                                                                          caplog):
    interrupted = DoRank(rank=4, trainer=crashing_trainer, patience=10, checkpoint_dir=tmp_path,
                         regularization=1e-4)
    with pytest.raises(RuntimeError, match="simulated"):
        interrupted.fit(toy_data)
    last = interrupted.run_folder(toy_data) / "last.ckpt"
    content = last.read_bytes()
    other = DoRank(rank=4, trainer=trainer(4), patience=10, checkpoint_dir=tmp_path,
                   regularization=1e-2)
    with caplog.at_level("INFO", logger="tagtorch.itemrec.base"):
        other.fit(toy_data)
    assert "resuming" not in caplog.text and "discarding" not in caplog.text
    assert other.run_folder(toy_data) != last.parent
    assert last.read_bytes() == content  # the interrupted run's state is untouched
    fresh = DoRank(rank=4, trainer=trainer(4), patience=10, regularization=1e-2).fit(toy_data)
    assert [r["val_dcg@10"] for r in other.history_] == pytest.approx(
        [r["val_dcg@10"] for r in fresh.history_])
    caplog.clear()
    with caplog.at_level("INFO", logger="tagtorch.itemrec.base"):  # and it still resumes
        DoRank(rank=4, trainer=trainer(6), patience=10, checkpoint_dir=tmp_path,
               regularization=1e-4).fit(toy_data)
    assert f"resuming from {last}" in caplog.text


def test_a_checkpoint_of_other_data_is_not_resumed(tmp_path, toy_data, caplog):
    interrupted = DoRank(rank=4, trainer=crashing_trainer, patience=10, checkpoint_dir=tmp_path)
    with pytest.raises(RuntimeError, match="simulated"):
        interrupted.fit(toy_data)
    last = interrupted.run_folder(toy_data) / "last.ckpt"
    other_split = item_recommendation_data(toy_folksonomy(), p=1, seed=0)  # posts, same sizes
    assert (other_split.n_users, other_split.n_items) == (toy_data.n_users, toy_data.n_items)
    model = DoRank(rank=4, trainer=trainer(2), patience=10, checkpoint_dir=tmp_path)
    with caplog.at_level("INFO", logger="tagtorch.itemrec.base"):
        model.fit(other_split)
    assert "resuming" not in caplog.text and [h["epoch"] for h in model.history_] == [0, 1]
    assert last.is_file()
    # the same file moved into the other data's folder is refused by its content
    target = model.run_folder(other_split)
    for name in ("last.ckpt", "best.ckpt"):
        (target / name).write_bytes((last.parent / name).read_bytes())
    caplog.clear()
    with caplog.at_level("INFO", logger="tagtorch.itemrec.base"):
        DoRank(rank=4, trainer=trainer(2), patience=10, checkpoint_dir=tmp_path).fit(other_split)
    assert f"{target / 'last.ckpt'}: was trained with other settings or data" in caplog.text
    assert "resuming" not in caplog.text


# ----------------------------------------------------------------------------- task
def run_synthetic_itemrec(tmp_path, overrides: list[str]) -> pd.DataFrame:
    """Runs ``dorank_synthetic`` on 300 objects (2-core) with ``overrides``, into ``tmp_path``."""
    from test_train import compose_cfg

    from tagtorch.train import run_task

    return run_task(compose_cfg(tmp_path, ["+experiment=dorank_synthetic", "data.n_objects=300",
                                           "task.p=2", *overrides])).results


@pytest.mark.integration  # an end-to-end run (the default run keeps its 8 minutes)
def test_item_recommendation_experiment_runs_end_to_end(tmp_path):
    results = run_synthetic_itemrec(tmp_path, ["task.seeds=[0,1]", "trainer.max_epochs=2",
                                               "model.dorank.rank=8", "model.pitf.rank=8",
                                               "model.probabilistic_cp.rank=8"])
    assert set(results["method"]) == {"dorank", "pitf", "probabilistic_cp", "two_dimensional",
                                        "tag_popularity"}
    assert set(results["fold"]) == {0, 1}
    for name in ["results.csv", "report.md", "per_object.csv.gz", "qrels.trec",
                 "run.dorank.trec", "curves.csv", "learning_curve.png", "ndcg@10.png"]:
        assert (tmp_path / name).is_file(), name
    seed1 = tmp_path / "checkpoints" / "itemrec" / "synthetic" / "dorank" / "seed1"
    assert (seed1 / "model" / "manifest.json").is_file()
    assert not list(seed1.glob("runs/*/last.ckpt"))  # finished trainings leave no last.ckpt
    reloaded = DoRank.load(seed1 / "model")
    assert reloaded.sizes is not None and reloaded.history_
    ndcg = results.query("metric == 'ndcg@10'")["value"]
    assert ((ndcg >= 0) & (ndcg <= 1)).all()
    # TREC files: the first seed's queries, each ranked once
    columns = ["query", "q0", "item", "rank", "score", "run"]
    run = pd.read_csv(tmp_path / "run.dorank.trec", sep=" ", header=None, names=columns)
    qrels = pd.read_csv(tmp_path / "qrels.trec", sep=" ", header=None)
    assert set(run["query"]) <= set(qrels[0])
    assert not run.duplicated(["query", "rank"]).any()
    # the early-stopping score, for selecting hyperparameters: the curve's best validation value
    curves = pd.read_csv(tmp_path / "curves.csv")
    best = curves.groupby(["method", "seed"])["val_dcg@10"].max()
    val = results.query("metric == 'val_dcg@10'").set_index(["method", "fold"])["value"]
    assert set(val.index.get_level_values(0)) == set(results["method"])  # count models too
    val = val[val.index.get_level_values(0).isin(set(curves["method"]))]
    assert val.sort_index().to_numpy() == pytest.approx(best.sort_index().to_numpy())


def test_item_models_capture_settings_from_their_signatures():
    from tagtorch.itemrec.baselines import ProbabilisticCP, TagPopularity, TwoDimensional
    from tagtorch.settings import SignatureSettings

    model = ProbabilisticCP(negatives=2, seed=5)
    assert model.init_args["rank"] == 128 and model.init_args["negatives"] == 2
    assert model.init_args["seed"] == 5 and model.init_args["patience"] == 3
    assert type(model)(**model.init_args).init_args == model.init_args
    assert TwoDimensional(beta=0.25).settings() == {"beta": 0.25, "alpha": 0.01}
    assert TagPopularity().settings() == {}
    with pytest.raises(TypeError, match="settings must be named"):
        class _Positional(SignatureSettings):
            def __init__(self, *args: int) -> None:
                pass


def test_tagged_is_the_negative_mask_negated(toy_data):
    users = torch.tensor([0, 3, 3, 7])
    items = torch.randint(toy_data.n_items, (4, 30), generator=torch.Generator().manual_seed(0))
    want = ~toy_data.negative_mask(users).gather(1, items)
    assert torch.equal(toy_data.tagged(users, items), want)
    assert want.any() and not want.all()


def test_smoothed_dcg_fast_temperature_divides_the_score_differences():
    g = torch.Generator().manual_seed(4)
    scores = torch.randn(2, 6, generator=g, dtype=torch.float64)
    neg = torch.rand(2, 6, generator=g) < 0.6
    items = torch.tensor([[0], [3]])
    mask = torch.ones(2, 1, dtype=torch.bool)
    got = smoothed_dcg_fast(scores.gather(1, items), mask, scores, neg, temperature=0.25)
    for b in range(2):
        negatives = [j for j in range(6) if neg[b, j]]
        scaled = (scores[b] / 0.25).tolist()
        expected = plain_fast([scaled[int(items[b, 0])]], scaled, negatives)
        assert got[b].item() == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="temperature"):
        DoRank(temperature=0.0)
