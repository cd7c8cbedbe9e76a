import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.metrics.functional import ndcg_at_k
from tagtorch.rankers.base import Ranker
from tagtorch.rankers.trees import (
    MODEL_FILES,
    LambdaMARTRanker,
    MARTRanker,
    RandomForestRanker,
    flatten_lists,
)

CONF = Path(__file__).resolve().parents[1] / "tagtorch" / "conf" / "model"
NAMES = ("signal", "noise_a", "noise_b")

# Small models, one thread: the tests stay fast and leave cores to other work.
SMALL = {
    "rf-sklearn": (RandomForestRanker, {"n_trees": 30, "n_leaves": 16}),
    "rf-lightgbm": (RandomForestRanker, {"n_trees": 30, "n_leaves": 16, "backend": "lightgbm"}),
    "mart-lightgbm": (MARTRanker, {"n_iterations": 60}),
    "mart-xgboost": (MARTRanker, {"n_iterations": 60, "backend": "xgboost"}),
    "lambdamart-lightgbm": (LambdaMARTRanker, {"n_iterations": 60}),
    "lambdamart-xgboost": (LambdaMARTRanker, {"n_iterations": 60, "backend": "xgboost"}),
}


def make(name: str, **overrides):
    cls, kwargs = SMALL[name]
    return cls(**{"n_jobs": 1, **kwargs, **overrides})


EARLY_STOPPING = [name for name in SMALL if name != "rf-sklearn"]


def toy_lists(n_lists: int, seed: int, width: int = 20, min_len: int = 12) -> CandidateSet:
    """Lists of 12-20 candidates; relevant iff feature 0 > 0.8 (features 1, 2 are noise)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, width + 1, (n_lists,), generator=g)
    rows = torch.repeat_interleave(torch.arange(n_lists), lengths)
    features = torch.rand(len(rows), len(NAMES), generator=g)
    labels = (features[:, 0] > 0.8).float()
    n_relevant = torch.bincount(rows, weights=labels, minlength=n_lists).long()
    return CandidateSet.from_flat(objects=torch.arange(n_lists), rows=rows,
                                  tags=torch.arange(len(rows)), features=features,
                                  labels=labels, n_relevant=n_relevant, feature_names=NAMES)


@pytest.fixture(scope="module")
def train_lists() -> CandidateSet:
    return toy_lists(200, seed=0)


@pytest.fixture(scope="module")
def test_lists() -> CandidateSet:
    return toy_lists(100, seed=1)


def mean_ndcg(scores: torch.Tensor, lists: CandidateSet, k: int = 5) -> float:
    return float(torch.nanmean(ndcg_at_k(scores, lists.labels, lists.mask, k,
                                         n_relevant=lists.n_relevant)))


def with_garbage_padding(lists: CandidateSet, extra: int = 3) -> CandidateSet:
    """The same lists, widened by ``extra`` slots; every padded slot holds huge features and a
    positive label (a model that saw them would learn something else)."""
    b, _, f = lists.features.shape
    mask = torch.cat([lists.mask, torch.zeros(b, extra, dtype=torch.bool)], 1)
    features = torch.cat([lists.features, torch.zeros(b, extra, f)], 1)
    labels = torch.cat([lists.labels, torch.zeros(b, extra)], 1)
    tags = torch.cat([lists.tags, torch.full((b, extra), -1)], 1)
    features[~mask] = 1e6 * torch.arange(1, f + 1).float()
    labels[~mask] = 1.0
    return replace(lists, features=features, labels=labels, mask=mask, tags=tags)


@pytest.mark.parametrize("name", list(SMALL))
def test_rankers_learn_the_toy_order(name, train_lists, test_lists):
    ranker = make(name).fit(train_lists)
    assert isinstance(ranker, Ranker)
    scores = ranker.score(test_lists)
    assert scores.shape == test_lists.mask.shape and scores.dtype == torch.float32
    assert torch.isinf(scores[~test_lists.mask]).all()
    assert torch.isfinite(scores[test_lists.mask]).all()
    assert mean_ndcg(scores, test_lists) > 0.9
    # the noise alone ranks far worse: the toy problem is not trivial
    assert mean_ndcg(test_lists.feature("noise_a"), test_lists) < 0.6
    importance = ranker.feature_importance()
    assert max(importance, key=importance.__getitem__) == "signal"


@pytest.mark.parametrize("name", list(SMALL))
def test_save_and_load_give_identical_scores(name, train_lists, test_lists, tmp_path):
    ranker = make(name, seed=3).fit(train_lists)
    ranker.save(tmp_path / name)
    assert sorted(p.name for p in (tmp_path / name).iterdir()) == sorted(
        ["manifest.json", MODEL_FILES[ranker.backend]])
    again = type(ranker).load(tmp_path / name)
    assert again.settings() == ranker.settings()
    torch.testing.assert_close(again.score(test_lists), ranker.score(test_lists))
    loaded_importance = again.feature_importance()
    for feature, value in ranker.feature_importance().items():
        assert loaded_importance[feature] == pytest.approx(value, rel=1e-9)


@pytest.mark.parametrize("name", list(SMALL))
def test_padding_is_ignored_in_training(name, train_lists, test_lists):
    padded = with_garbage_padding(train_lists)
    assert padded.features.shape[1] == train_lists.features.shape[1] + 3
    ranker = make(name).fit(train_lists)
    clean = ranker.score(test_lists)
    assert torch.equal(make(name).fit(padded).score(test_lists), clean)
    # scoring ignores padding too
    padded_test = with_garbage_padding(test_lists)
    assert torch.equal(ranker.score(padded_test)[padded_test.mask], clean[test_lists.mask])


def test_flatten_lists_keeps_real_candidates_and_group_sizes(train_lists):
    padded = with_garbage_padding(train_lists)
    flat = flatten_lists(padded)
    sizes = train_lists.mask.sum(-1)
    assert flat.group_sizes.tolist() == sizes.tolist()
    assert len(flat.labels) == int(sizes.sum())
    np.testing.assert_array_equal(flat.features, train_lists.features[train_lists.mask].numpy())
    assert flat.features.max() < 1.0  # no padding garbage
    # empty lists form no group
    empty = replace(train_lists[:3], mask=torch.zeros_like(train_lists.mask[:3]))
    mixed = CandidateSet(**{
        k: torch.cat([v, getattr(empty, k)]) if isinstance(v, torch.Tensor) else v
        for k, v in train_lists[:2].state().items()})
    assert flatten_lists(mixed).group_sizes.tolist() == sizes[:2].tolist()


@pytest.mark.parametrize("batch", [8192, 2])
def test_flatten_lists_of_chosen_rows_equals_flattening_their_copy(train_lists, batch,
                                                                  monkeypatch):
    import tagtorch.rankers.trees as trees

    monkeypatch.setattr(trees, "FLATTEN_BATCH", batch)  # 2: the rows read a few at a time
    padded = with_garbage_padding(train_lists)
    rows = np.array([0, 3, 4, 9, len(padded) - 1])
    got = flatten_lists(padded, rows)
    real = train_lists.mask[rows]
    np.testing.assert_array_equal(got.features, train_lists.features[rows][real].numpy())
    np.testing.assert_array_equal(got.labels, train_lists.labels[rows][real].numpy())
    assert got.group_sizes.tolist() == real.sum(-1).tolist()


def test_lambdarank_receives_the_group_sizes(train_lists, monkeypatch):
    import lightgbm as lgb
    import xgboost as xgb

    seen = {}
    lgb_train, xgb_train = lgb.train, xgb.train

    def spy_lgb(params, train_set, *args, **kwargs):
        booster = lgb_train(params, train_set, *args, **kwargs)
        seen["lightgbm"] = (params["objective"], train_set.get_group().tolist())
        seen["lightgbm_truncation"] = params["lambdarank_truncation_level"]
        return booster

    def spy_xgb(params, dtrain, *args, **kwargs):
        seen["xgboost"] = (params["objective"], dtrain.get_group().tolist())
        return xgb_train(params, dtrain, *args, **kwargs)

    monkeypatch.setattr(lgb, "train", spy_lgb)
    monkeypatch.setattr(xgb, "train", spy_xgb)
    padded = with_garbage_padding(train_lists[:20])
    LambdaMARTRanker(n_iterations=2, truncation_level=7, n_jobs=1).fit(padded)
    LambdaMARTRanker(n_iterations=2, backend="xgboost", n_jobs=1).fit(padded)
    sizes = train_lists.mask[:20].sum(-1).tolist()
    assert seen["lightgbm"] == ("lambdarank", sizes)
    assert seen["lightgbm_truncation"] == 7
    assert seen["xgboost"] == ("rank:ndcg", sizes)


@pytest.mark.parametrize("name", EARLY_STOPPING)
def test_early_stopping_on_val(name, train_lists, test_lists, tmp_path):
    rounds = {"n_trees": 300} if name.startswith("rf") else {"n_iterations": 300}
    ranker = make(name, early_stopping_rounds=5, **rounds).fit(train_lists, test_lists)
    assert ranker.best_iteration_ is not None and ranker.best_iteration_ < 300
    ranker.save(tmp_path)
    again = type(ranker).load(tmp_path)
    assert again.best_iteration_ == ranker.best_iteration_
    torch.testing.assert_close(again.score(test_lists), ranker.score(test_lists))
    # without early stopping, val is ignored
    assert make(name).fit(train_lists, test_lists).best_iteration_ is None


def test_table_iii_defaults():
    rf, mart, lambdamart = RandomForestRanker(), MARTRanker(), LambdaMARTRanker()
    assert (rf.n_trees, rf.n_leaves, rf.features_per_split(13)) == (300, 1000, 4)
    assert rf.backend == "sklearn"
    for ranker in (mart, lambdamart):
        assert (ranker.n_leaves, ranker.learning_rate, ranker.n_iterations) == (5, 0.1, 1500)
        assert ranker.backend == "lightgbm" and ranker.early_stopping_rounds is None
    assert lambdamart.truncation_level == 10


@pytest.mark.parametrize(("file", "cls"), [("rf", RandomForestRanker), ("mart", MARTRanker),
                                           ("lambdamart", LambdaMARTRanker)])
def test_configs_build_the_rankers_with_table_iii_values(file, cls):
    cfg = OmegaConf.merge({"seed": 7}, {"model": OmegaConf.load(CONF / f"{file}.yaml")})
    assert list(cfg.model) == [file]
    ranker = instantiate(cfg.model[file])
    assert type(ranker) is cls
    assert ranker.seed == 7
    defaults = cls().settings()
    own = ("seed", "max_train_lists")  # the config's cap (ours) is above the paper's V
    assert {k: v for k, v in ranker.settings().items() if k not in own} == {
        k: v for k, v in defaults.items() if k not in own}
    assert ranker.max_train_lists in ((None,) if file == "rf" else (60_000,))
    assert (ranker.max_train_lists or 150_000) >= 150_000 // 5  # the paper's largest V fits


def test_errors(train_lists, tmp_path):
    with pytest.raises(ValueError, match="backend"):
        MARTRanker(backend="sklearn")
    with pytest.raises(ValueError, match="early stopping"):
        RandomForestRanker(early_stopping_rounds=10)
    with pytest.raises(RuntimeError, match="fit"):
        MARTRanker().score(train_lists)
    renamed = replace(train_lists, feature_names=("a", "b", "c"))
    ranker = MARTRanker(n_iterations=2, n_jobs=1).fit(train_lists)
    with pytest.raises(ValueError, match="features"):
        ranker.score(renamed)
    ranker.save(tmp_path)
    with pytest.raises(ValueError, match="MARTRanker"):
        LambdaMARTRanker.load(tmp_path)
    graded = replace(train_lists, labels=train_lists.labels * 0.5)
    with pytest.raises(ValueError, match="integer"):
        LambdaMARTRanker(n_iterations=2, n_jobs=1).fit(graded)
    MARTRanker(n_iterations=2, n_jobs=1).fit(graded)  # regression takes any label
    empty = replace(train_lists, mask=torch.zeros_like(train_lists.mask))
    with pytest.raises(ValueError, match="no real candidate"):
        MARTRanker().fit(empty)


def test_the_forest_grown_in_steps_for_the_progress_bar_is_the_one_step_forest():
    """warm_start steps draw the trees' seeds as one fit does: every node array is equal."""
    from sklearn.ensemble import RandomForestRegressor

    from tagtorch.candidates.candidate_set import CandidateSet
    from tagtorch.rankers.tree_scoring import FlatForest
    from tagtorch.rankers.trees import RandomForestRanker, flatten_lists

    g = torch.Generator().manual_seed(0)
    n = 2000
    lists = CandidateSet.from_flat(
        objects=torch.arange(200), rows=torch.arange(n) // 10, tags=torch.arange(n) % 10,
        features=torch.rand(n, 5, generator=g),
        labels=(torch.rand(n, generator=g) < 0.3).float(), n_relevant=torch.full((200,), 4),
        feature_names=tuple("abcde"))
    ranker = RandomForestRanker(n_trees=37, n_leaves=15, n_jobs=2, seed=3).fit(lists)
    flat = flatten_lists(lists)
    one_step = RandomForestRegressor(
        n_estimators=37, max_leaf_nodes=15, max_features=ranker.features_per_split(5),
        min_samples_leaf=ranker.min_leaf_size, bootstrap=True, n_jobs=2,
        random_state=3).fit(flat.features, flat.labels)
    ours = next(v for v in vars(ranker).values() if isinstance(v, FlatForest))
    reference = FlatForest.from_sklearn(one_step)
    for name, array in vars(reference).items():
        assert np.array_equal(np.asarray(array), np.asarray(getattr(ours, name))), name


@pytest.mark.parametrize("name", ["mart-lightgbm", "lambdamart-xgboost"])
def test_max_train_lists_learns_from_a_seeded_sample_of_whole_lists(name, train_lists,
                                                                     monkeypatch):
    import tagtorch.rankers.trees as trees

    seen: list[trees.FlatLists] = []
    flatten = trees.flatten_lists
    monkeypatch.setattr(trees, "flatten_lists", lambda lists, rows=None:
                        seen.append(flatten(lists, rows)) or seen[-1])
    blocks = {tuple(train_lists.features[b][train_lists.mask[b]].flatten().tolist()): b
              for b in range(len(train_lists))}
    for cap in (None, 500, 37):
        seen.clear()
        make(name, n_iterations=3, max_train_lists=cap).fit(train_lists)
        (data,) = seen
        starts = np.concatenate([[0], np.cumsum(data.group_sizes)])
        lists = [blocks[tuple(data.features[a:b].flatten().tolist())]
                 for a, b in itertools.pairwise(starts)]
        expected = len(train_lists) if cap is None or cap >= len(train_lists) else cap
        assert len(lists) == len(set(lists)) == expected  # whole, distinct lists
        assert lists == sorted(lists)  # in their order
    seen.clear()
    make(name, n_iterations=3, max_train_lists=37).fit(train_lists)
    assert lists == [blocks[tuple(seen[0].features[a:b].flatten().tolist())]
                     for a, b in itertools.pairwise(starts)]  # seeded
    with pytest.raises(ValueError, match="max_train_lists"):
        make(name, max_train_lists=0)
