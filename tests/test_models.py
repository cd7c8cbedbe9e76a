"""The one model contract, for every shipped config: fit, score, save, load, same scores.

Each ``conf/model/*.yaml`` is composed through Hydra with the task its class suits (read from
its ``task`` class attribute, as :func:`tagtorch.config_checks.model_kind` reads it) and
instantiated; slow settings are shrunk by their key names wherever a config has them (so a new
ranker added with one module and one YAML is covered without touching this file). Tag rankers
fit on small LATRE candidate lists of a synthetic folksonomy, item models on a small item
split of it, resource rankers on the training documents of a small resource-ranking split.
Every ``conf/experiment/*.yaml`` is composed and its models, candidates and (for
the synthetic generator, at a tiny size) data are instantiated. A minimal ranker checks what
:class:`~tagtorch.rankers.base.BaseRanker` gives a new module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hydra.utils import get_class, get_method, instantiate
from omegaconf import DictConfig, ListConfig, open_dict
from test_train import compose_cfg

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.candidates.latre import LatreCandidates
from tagtorch.config_checks import drop_unselected_settings, model_kind
from tagtorch.data.splits import tag_recommendation_folds
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor
from tagtorch.itemrec.data import ItemRecData, item_recommendation_data
from tagtorch.posts.base import recommend
from tagtorch.posts.data import PostData, personalized_split
from tagtorch.rankers.base import BaseRanker
from tagtorch.resources.data import ResourceSplit, resource_ranking_data
from tagtorch.storage import MANIFEST_FILE, read_json, write_json

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "tagtorch" / "conf"
MODELS = sorted((CONF / "model").glob("*.yaml"))
EXPERIMENTS = sorted((CONF / "experiment").glob("*.yaml"))

SMALL: dict[str, Any] = {
    # boosting rounds, trees, generations: a few
    "n_iterations": 3, "n_trees": 3, "n_rounds": 3, "generations": 1, "population": 4,
    "max_iter": 500,
    # factorization rank and threads: small
    "rank": 4, "n_jobs": 1, "num_threads": 1, "progress": False, "max_epochs": 2,
    # topic models: a few topics and sweeps
    "n_topics": 4, "iterations": 6, "burn_in": 3,
}
"""Settings shrunk wherever a model config has them (the rest keep their shipped values)."""

SMALL_TOPICS = {"lda": {"n_topics": 4, "iterations": 10, "burn_in": 5}, "n_candidates": 5}
"""A small topic model, so that rankers of the ``p_lda`` feature (``lda_tags``) are covered."""

TASK_CONFIGS = {"tagrec": "tagrec", "itemrec": "itemrec", "resources": "resources",
                "posts": "posts"}
"""The ``conf/task`` option of each kind of model (:func:`~tagtorch.config_checks.model_kind`)."""

TINY_DATA = {"n_objects": 60, "n_users": 20, "n_tags": 40, "n_topics": 4, "n_categories": 3}
"""Sizes of the synthetic generator where an experiment uses it."""


@pytest.fixture(scope="module")
def folksonomy():
    return TextProcessor(cache=False).apply(generate_folksonomy(n_objects=240, seed=0))


@pytest.fixture(scope="module")
def candidate_lists(folksonomy) -> tuple[CandidateSet, CandidateSet]:
    """V's and T's LATRE candidate lists of fold 0 (short lists; the 13 features and p_lda;
    the categories' topics, which xTReD re-ranks by; the distances of GP_rnd's ADC)."""
    fold = tag_recommendation_folds(folksonomy, n_folds=5, seed=0)[0]
    generator = LatreCandidates(max_rule_candidates=30, device="cpu", topics=SMALL_TOPICS,
                                diversity={"source": "categories"}, distances=True).fit(
        fold.train_objects, fold.train_tags, TermIndex.from_folksonomy(folksonomy))
    return generator(fold.val), generator(fold.test)


@pytest.fixture(scope="module")
def item_split(folksonomy) -> ItemRecData:
    return item_recommendation_data(folksonomy, p=1, seed=0, split="triples")


def build_model(tmp_path: Path, path: Path) -> Any:
    """The model of ``conf/model/<path>`` built through Hydra with :data:`SMALL` settings."""
    overrides = [f"model={path.stem}", "trainer.max_epochs=2", "trainer.accelerator=cpu"]
    cfg = compose_cfg(tmp_path, overrides)
    [node] = cfg.model.values()  # one method per file
    kind = model_kind(get_class(node._target_))  # the task its class suits
    if kind != "tagrec":
        cfg = compose_cfg(tmp_path, [*overrides, f"task={TASK_CONFIGS[kind]}"])
        [node] = cfg.model.values()
    with open_dict(node):
        shrink(node)
    return instantiate(node)


def shrink(node: Any) -> None:
    """Sets the :data:`SMALL` settings wherever ``node`` or a node inside it has them (a
    wrapped base ranker's too)."""
    for key, value in SMALL.items():
        if key in node and not isinstance(node[key], ListConfig):  # a grid's values stay
            node[key] = value
    for key in list(node):
        if isinstance(node[key], DictConfig):
            shrink(node[key])


@pytest.fixture(scope="module")
def resource_split(folksonomy) -> ResourceSplit:
    return resource_ranking_data(folksonomy, test_fraction=0.2, val_fraction=0.1)


@pytest.fixture(scope="module")
def post_split(folksonomy) -> PostData:
    return personalized_split(folksonomy, p=2)


@pytest.mark.parametrize("path", [  # an ensemble fits its four members: end to end
    pytest.param(p, marks=pytest.mark.integration) if p.stem == "dorank_ensemble" else p
    for p in MODELS], ids=[p.stem for p in MODELS])
def test_every_model_config_fits_scores_saves_and_loads(tmp_path, path, candidate_lists,
                                                        item_split, resource_split, post_split):
    model = build_model(tmp_path, path)
    folder = tmp_path / "saved"
    if model_kind(type(model)) == "posts":
        posts = post_split.test
        scores = recommend(model.fit(post_split).score(posts), 10)
        assert scores.shape == (len(posts), 10) and (scores[:, 0] >= 0).any()
        model.save(folder)
        np.testing.assert_array_equal(recommend(type(model).load(folder).score(posts), 10),
                                      scores)
    elif model_kind(type(model)) == "resources":
        queries = resource_split.test.words.take(np.arange(20))
        scores = model.fit(resource_split.documents, resource_split.n_words).score(queries)
        assert scores.shape == (20, len(resource_split.documents))
        model.save(folder)
        again = type(model).load(folder)
        torch.testing.assert_close(again.score(queries), scores, rtol=1e-6, atol=1e-6)
    elif model_kind(type(model)) == "itemrec":
        users = torch.from_numpy(item_split.test[:20, 0])  # (user, item, tag) triples
        tags = torch.from_numpy(item_split.test[:20, 2])
        model.fit(item_split)
        scores = model.score(users, tags)
        model.save(folder)
        again = type(model).load(folder)
        torch.testing.assert_close(again.score(users, tags), scores, rtol=1e-6, atol=1e-6)
    else:
        train, test = candidate_lists
        scores = model.fit(train).score(test)
        assert scores.shape == test.mask.shape
        model.save(folder)
        manifest = read_json(folder / MANIFEST_FILE)
        assert manifest["feature_names"] == list(test.feature_names)
        again = type(model).load(folder)
        assert again.feature_names_ == model.feature_names_
        torch.testing.assert_close(again.score(test), scores, rtol=1e-6, atol=1e-6)
    listed = read_json(folder / MANIFEST_FILE)["files"]
    assert {p.name for p in folder.iterdir()} == {MANIFEST_FILE, *listed}


@pytest.mark.parametrize("path", EXPERIMENTS, ids=[p.stem for p in EXPERIMENTS])
def test_every_experiment_composes_and_instantiates(tmp_path, path):
    cfg = compose_cfg(tmp_path, [f"+experiment={path.stem}"])
    drop_unselected_settings(cfg)  # as a run does: an inherited method's settings go
    task = {"ItemRecommendationTask": "itemrec", "ResourceRankingTask": "resources",
            "PersonalizedTagTask": "posts"}.get(
        cfg.task._target_.rsplit(".", 1)[-1], "tagrec")
    for name, node in cfg.model.items():
        model = instantiate(node)
        assert model_kind(type(model)) == task, name
    if "candidates" in cfg and cfg.task._target_.endswith("TagRecommendationTask"):
        assert isinstance(instantiate(cfg.candidates), LatreCandidates)
    if cfg.data._target_ == "tagtorch.data.synthetic.generate_folksonomy":
        with open_dict(cfg):
            cfg.data.update(TINY_DATA)
        assert len(instantiate(cfg.data).assignments) > 0
    else:  # a real-data loader: importable, not run
        assert callable(get_method(cfg.data._target_))


class _Scaled(BaseRanker):
    """A minimal ranker: one feature times a fitted factor (what a new module would add)."""

    def __init__(self, feature: str = "sum_l", offset: float = 0.0) -> None:
        self.feature = feature
        self.offset = offset
        self.feature_names_: tuple[str, ...] | None = None
        self.factor_: float | None = None

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> _Scaled:
        self.feature_names_ = tuple(train.feature_names)
        self.factor_ = 2.0
        return self

    def score(self, batch: CandidateSet) -> torch.Tensor:
        self.check_features(batch)
        assert self.factor_ is not None
        return self.factor_ * batch.feature(self.feature) + self.offset

    def _save_files(self, folder: Path) -> list[str]:
        write_json({"factor": self.factor_}, folder / "factor.json")
        return ["factor.json"]

    def _load_files(self, folder: Path, manifest: Any) -> None:
        self.factor_ = read_json(folder / "factor.json")["factor"]


class _Shifted(_Scaled):
    def __init__(self, shift: float = 1.0, feature: str = "wts") -> None:
        super().__init__(feature=feature, offset=shift)


def test_the_base_captures_settings_checks_features_and_saves_a_folder(tmp_path,
                                                                       candidate_lists):
    train, test = candidate_lists
    assert _Scaled(offset=0.5).settings() == {"feature": "sum_l", "offset": 0.5}
    # a subclass's settings are its own constructor's, not those it passes on
    assert _Shifted(shift=3.0).settings() == {"shift": 3.0, "feature": "wts"}
    ranker = _Shifted(shift=3.0).fit(train)
    ranker.save(tmp_path / "shifted")
    manifest = read_json(tmp_path / "shifted" / MANIFEST_FILE)
    assert manifest["class"].endswith("_Shifted") and list(manifest["files"]) == ["factor.json"]
    assert manifest["settings"] == {"shift": 3.0, "feature": "wts"}
    again = _Shifted.load(tmp_path / "shifted")
    assert torch.equal(again.score(test), ranker.score(test))
    reordered = CandidateSet(**(test.state() | {"features": test.features.flip(-1),
                                                "feature_names": test.feature_names[::-1]}))
    with pytest.raises(ValueError, match="differ"):  # never a silent reordering
        again.score(reordered)
    with pytest.raises(RuntimeError, match="not fitted"):
        _Scaled().save(tmp_path / "unfitted")
    with pytest.raises(ValueError, match="_Shifted"):
        _Scaled.load(tmp_path / "shifted")
    with pytest.raises(TypeError, match="named constructor arguments"):
        type("Loose", (BaseRanker,), {"__init__": lambda self, **kwargs: None})
