"""The compiled scorer of LightGBM's trees gives LightGBM's own predictions."""

import lightgbm as lgb
import numpy as np
import pytest
import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.rankers.tree_scoring import FlatForest
from tagtorch.rankers.trees import LambdaMARTRanker


def booster(params, rounds=40, seed=0, nan=0.0, zeros=0.0):
    rng = np.random.default_rng(seed)
    x = rng.random((3000, 6))
    x[rng.random(x.shape) < nan] = np.nan
    x[rng.random(x.shape) < zeros] = 0.0
    y = x[:, 0] + np.nan_to_num(x[:, 1]) * 2 + rng.normal(0, 0.1, len(x))
    data = lgb.Dataset(x, label=y)
    if params.get("objective") == "lambdarank":
        data = lgb.Dataset(x, label=(y > np.nanmedian(y)).astype(int), group=[30] * 100)
    model = lgb.train({"verbose": -1, "num_leaves": 7, "min_data_in_leaf": 1, "seed": seed,
                       **params}, data, rounds)
    test = rng.random((500, 6))
    test[rng.random(test.shape) < 0.15] = np.nan
    test[rng.random(test.shape) < 0.15] = 0.0
    return model, test


@pytest.mark.parametrize("params", [
    {"objective": "lambdarank"},
    {"objective": "regression"},
    {"objective": "regression", "zero_as_missing": True},
    {"objective": "regression", "use_missing": False},
    {"objective": "regression", "boosting": "rf", "bagging_fraction": 0.6, "bagging_freq": 1},
])
def test_the_flat_forest_predicts_as_lightgbm(params):
    model, test = booster(params, nan=0.1, zeros=0.1)
    flat = FlatForest.from_booster(model)
    assert len(flat) == model.num_trees()
    np.testing.assert_allclose(flat.predict(test), model.predict(test), rtol=1e-12, atol=1e-12)


def test_the_first_trees_only_as_num_iteration_asks():
    model, test = booster({"objective": "regression"}, rounds=30)
    np.testing.assert_allclose(FlatForest.from_booster(model, 12).predict(test),
                               model.predict(test, num_iteration=12), rtol=1e-12, atol=1e-12)


def test_categorical_splits_are_refused():
    rng = np.random.default_rng(1)
    x = np.stack([rng.integers(0, 8, 2000), rng.random(2000)], axis=1)
    model = lgb.train({"verbose": -1, "min_data_in_leaf": 1, "min_data_per_group": 1,
                       "cat_smooth": 0}, lgb.Dataset(x, label=(x[:, 0] % 3 == 0) * 1.0,
                                                     categorical_feature=[0]), 10)
    with pytest.raises(ValueError, match="categorical"):
        FlatForest.from_booster(model)


def test_lambdamart_scores_one_list_as_lightgbm_does():
    """The ranker's small-batch path (the online one) against the booster's own predict."""
    rng = np.random.default_rng(2)
    n_lists, length = 40, 25
    features = torch.from_numpy(rng.random((n_lists * length, 4)).astype(np.float32))
    rows = torch.arange(n_lists).repeat_interleave(length)
    labels = (features[:, 0] + 0.3 * torch.rand(len(features)) > 0.9).float()
    lists = CandidateSet.from_flat(
        objects=torch.arange(n_lists), rows=rows, tags=torch.arange(len(rows)) % 50,
        features=features, labels=labels,
        n_relevant=torch.bincount(rows, weights=labels).long(),
        feature_names=[f"f{i}" for i in range(4)])
    ranker = LambdaMARTRanker(n_iterations=60, n_jobs=1, seed=0).fit(lists)
    assert ranker._flat_forest() is not None  # the compiled path is the one measured
    scores = ranker.score(lists)
    flat_rows = lists.features[lists.mask].numpy()
    want = ranker.model_.predict(flat_rows)
    np.testing.assert_allclose(scores[lists.mask].numpy(), want, rtol=1e-6, atol=1e-6)


def _forest_and_rows():
    from sklearn.ensemble import RandomForestRegressor

    rng = np.random.default_rng(0)
    features = rng.normal(size=(400, 6)).astype(np.float64)
    labels = (features[:, 0] + 0.5 * features[:, 1] ** 2 > 0).astype(float)
    forest = RandomForestRegressor(n_estimators=15, max_leaf_nodes=20, random_state=0,
                                   n_jobs=1).fit(features, labels)
    return forest, rng.normal(size=(300, 6))


def test_a_flattened_scikit_learn_forest_scores_as_its_predict():
    forest, rows = _forest_and_rows()
    flat = FlatForest.from_sklearn(forest)
    np.testing.assert_allclose(flat.predict(rows), forest.predict(rows), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(flat.importances, forest.feature_importances_)


def test_a_forest_saved_by_the_release_before_loads_and_scores_the_same(tmp_path):
    """The earlier format was scikit-learn's tree state; it is read without scikit-learn."""
    from tagtorch.rankers.trees import load_forest

    forest, rows = _forest_and_rows()
    states = [tree.tree_.__getstate__() for tree in forest.estimators_]  # the old writer
    nodes = np.concatenate([state["nodes"] for state in states])
    arrays = {f"nodes.{name}": nodes[name] for name in nodes.dtype.names}
    arrays["values"] = np.concatenate([state["values"] for state in states])
    arrays["node_counts"] = np.array([state["node_count"] for state in states])
    arrays["max_depths"] = np.array([state["max_depth"] for state in states])
    np.savez(tmp_path / "forest.npz", **arrays)
    loaded = load_forest(tmp_path / "forest.npz")
    np.testing.assert_allclose(loaded.predict(rows), forest.predict(rows), rtol=0, atol=1e-12)
    saved = tmp_path / "new.npz"
    FlatForest.from_sklearn(forest).save(saved)
    np.testing.assert_array_equal(load_forest(saved).predict(rows), loaded.predict(rows))
