"""The public API (``tagtorch.load/evaluate/fit``) against the command line's own path.

``tagtorch.evaluate`` must give what ``python -m tagtorch.train`` gives for the same settings:
the reference is :func:`tagtorch.train.run_task` on a configuration composed from the
equivalent command-line overrides, as the tests of ``train`` compose it.
"""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
from test_train import compose_cfg

import tagtorch as tt
from tagtorch.evaluation.report import is_timing_metric
from tagtorch.rankers.trees import RandomForestRanker
from tagtorch.train import run_task


def quality(results: pd.DataFrame) -> pd.DataFrame:
    return results[~results["metric"].map(is_timing_metric)].reset_index(drop=True)


@pytest.fixture(scope="module")
def folk():
    return tt.load("synthetic", n_objects=300)


def test_import_is_light_and_names_load_on_use():
    code = ("import sys, tagtorch; assert 'torch' not in sys.modules, 'torch imported'; "
            "tagtorch.evaluate; assert 'torch' in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    with pytest.raises(AttributeError, match="no attribute 'evaluat'"):
        tt.evaluat  # noqa: B018


def test_evaluate_gives_what_the_command_line_gives(folk, tmp_path):
    models = {"latre_wts": "latre_wts", "rf": RandomForestRanker(n_trees=10, n_leaves=7)}
    res = tt.evaluate("tagrec", folk, models=models, folds=[0], output_dir=tmp_path / "api")
    cli = run_task(compose_cfg(tmp_path / "cli", [
        "data.n_objects=300", "model=[latre_wts,rf]", "model.rf.n_trees=10",
        "model.rf.n_leaves=7", "task.folds=[0]"]))
    pd.testing.assert_frame_equal(quality(res.results), quality(cli.results), check_exact=True)
    assert res.folder == tmp_path / "api" and (res.folder / "report.md").read_text() == res.report
    assert list(res.means("ndcg@5").index) == ["latre_wts", "rf"]
    assert set(res.per_object["method"]) == {"latre_wts", "rf"}


def test_a_candidate_generator_is_given_one_way_as_object_mapping_or_name(folk, tmp_path):
    """An unfitted LatreCandidates, its config mapping, and the command line's override agree."""
    from tagtorch.candidates.latre import LatreCandidates

    generator = LatreCandidates(max_rule_candidates=7, device="cpu")
    runs = [tt.evaluate("tagrec", folk, models=["latre_wts"], folds=[0], candidates=given,
                        output_dir=tmp_path / str(i))
            for i, given in enumerate([generator, generator.config()])]
    cli = run_task(compose_cfg(tmp_path / "cli", [
        "data.n_objects=300", "model=[latre_wts]", "task.folds=[0]",
        "candidates.max_rule_candidates=7", "candidates.device=cpu"]))
    default = tt.evaluate("tagrec", folk, models=["latre_wts"], folds=[0], candidates="latre",
                          output_dir=tmp_path / "default")
    for res in runs:
        pd.testing.assert_frame_equal(quality(res.results), quality(cli.results),
                                      check_exact=True)
    per_object = [len(res.per_object) for res in (cli, default)]
    assert per_object[0] == per_object[1]  # the same objects, other candidates:
    assert not quality(default.results).equals(quality(cli.results))  # another result
    with pytest.raises(TypeError, match="candidates: expected a config name"):
        tt.evaluate("tagrec", folk, candidates=3.5, folds=[0])


def test_item_recommendation_returns_the_same_result_type(folk, tmp_path):
    res = tt.evaluate("itemrec", folk, models=["two_dimensional", "global_popularity"], seeds=[0],
                      p=2, output_dir=tmp_path)
    assert isinstance(res, tt.EvaluationResult)
    assert set(res.per_object["method"]) == {"two_dimensional", "global_popularity"}
    assert res.per_object["object"].astype(str).str.startswith("u").all()
    assert 0.0 <= res.means("ndcg@10")["two_dimensional"] <= 1.0


@pytest.mark.parametrize(("call", "message"), [
    (lambda f: tt.evaluate("tagrec", f, models=["latre_wts"], fold=[0]),
     "'fold' is not a setting of task=tagrec: one of .*'folds'"),
    (lambda f: tt.evaluate("bogus", f, models=["latre_wts"]), "task must be one of"),
    (lambda f: tt.evaluate("tagrec", f, models=["no_such_model"]), "cannot compose"),
    (lambda f: tt.evaluate("itemrec", f, models=["latre_wts"], seeds=[0]),
     "model.latre_wts._target_"),
    (lambda f: tt.load("no_such_dataset"),
     "neither a dataset .*synthetic.*, a file nor a LETOR folder"),
])
def test_bad_input_is_refused_with_one_clear_message(folk, call, message):
    with pytest.raises(ValueError, match=message):
        call(folk)


def test_fit_returns_a_recommender_that_reloads_the_same(folk, tmp_path):
    rec = tt.fit(folk, "latre_wts", output_dir=tmp_path)
    assert isinstance(rec, tt.TagRecommender)
    tags = [str(t) for t in folk.tags[:3]]
    folder = rec.save(tmp_path / "copy")
    assert tt.Recommender.load(folder).recommend_tags(tags, k=5) == rec.recommend_tags(tags, k=5)


def test_load_raises_the_loaders_own_error_not_hydras(tmp_path):
    """Issue 52: ``tt.load`` of a bad file raises ``DataFormatError`` naming the line."""
    import tagtorch as tt
    from tagtorch.errors import DataFormatError

    path = tmp_path / "bad.txt"
    path.write_text('"u";"r";"5";"a"\n"u";"r2";"-";"b"\n')
    with pytest.raises(DataFormatError, match=r"bad\.txt, line 2"):
        tt.load(path)


def test_letor_loads_and_evaluates_through_the_api(tmp_path):
    """Issue 53: ``tt.evaluate("letor")`` was refused and ``tt.load("letor", ...)`` a bare
    assert; the folder, or ``"letor"`` with its path, is a LetorData run like the command."""
    import tagtorch as tt
    from tagtorch.candidates.letor import write_synthetic_letor

    folder = write_synthetic_letor(tmp_path / "letor", queries=30, features=5, seed=1)
    data = tt.load(folder)
    assert isinstance(data, tt.LetorData) and data.train.features.shape[-1] == 5
    assert isinstance(tt.load("letor", path=str(folder)), tt.LetorData)
    result = tt.evaluate("letor", folder, models=["lambdamart"], output_dir=tmp_path / "run",
                         overrides=["model.lambdamart.n_iterations=5"])
    assert "lambdamart" in set(result.results.method)
    assert (tmp_path / "run" / "qrels.trec").is_file()
    with pytest.raises(ValueError, match="task must be one of"):
        tt.evaluate("letters", folder)


def test_every_recommender_kind_is_exported():
    import tagtorch as tt
    from tagtorch.serving import PostRecommender

    assert tt.PostRecommender is PostRecommender and "PostRecommender" in tt.__all__


def test_a_model_object_is_handed_through_not_rebuilt_from_a_config(tmp_path):
    """Issue 53: a model object went object -> config -> object, so a setting that is no plain
    value (a lambda factory) was refused; now each fit builds from the object's own arguments.

    The reference is the factory itself: it is called once per fit with the data's feature
    count, which no config can do, and the user's object stays unfitted."""
    from test_neural import cpu_trainer

    import tagtorch as tt
    from tagtorch.candidates.letor import write_synthetic_letor
    from tagtorch.rankers.neural import ListScorer, NeuralRanker

    folder = write_synthetic_letor(tmp_path / "letor", queries=30, features=5, seed=1)
    calls: list[int] = []

    def scorer(n_features: int) -> ListScorer:
        calls.append(n_features)
        return ListScorer(n_features, hidden=(3,))

    ranker = NeuralRanker(scorer=scorer, trainer=cpu_trainer(2), holdout_fraction=0.5)
    result = tt.evaluate("letor", folder, models={"mlp": ranker}, output_dir=tmp_path / "run")
    assert calls == [5] and ranker.scorer is None  # built once, from a copy of the object
    assert set(result.results.method) == {"mlp"}
    config = (tmp_path / "run" / "config.yaml").read_text()
    assert "_target_: tagtorch.rankers.neural.NeuralRanker" in config
    assert "scorer: <function" in config.replace("'", "")  # recorded as its repr


def _bll_c():
    from tagtorch.posts.baselines import BaseLevelLearning

    return BaseLevelLearning(d=0.7, beta=0.5)


def _bm25():
    from tagtorch.resources.bm25 import BM25

    return BM25(k1=2.0, b=0.5, device="cpu")


@pytest.mark.parametrize(("task", "name", "make", "overrides", "settings"), [
    ("posts", "bll_c", _bll_c, ["model.bll_c.d=0.7"], {"seeds": [0]}),
    ("resources", "bm25", _bm25,
     ["model.bm25.k1=2.0", "model.bm25.b=0.5", "model.bm25.device=cpu", "~task.tune.bm25",
      "task.min_user_objects=5"], {"seeds": [0], "min_user_objects": 5}),
])
def test_a_seeded_task_takes_model_objects_as_the_command_line_takes_settings(
        folk, tmp_path, task, name, make, overrides, settings):
    """Issue 53: the seeded tasks build a given object's copy (no config) and give what the
    command line gives for the same settings."""
    res = tt.evaluate(task, folk, models={name: make()}, output_dir=tmp_path / "api",
                      overrides=[o for o in overrides if o.startswith("~")], **settings)
    cli = run_task(compose_cfg(tmp_path / "cli", [
        f"task={task}", "data.n_objects=300", f"model=[{name}]", "task.seeds=[0]", *overrides]))
    pd.testing.assert_frame_equal(quality(res.results), quality(cli.results), check_exact=True)


def test_fit_on_a_letor_dataset_returns_the_fitted_ranker(tmp_path):
    """Issue 53: ``tt.fit`` covers LETOR too: a tag ranker fitted on the train part (vali for
    early stopping), saved, read back by ``load_ranker`` from its manifest's class. The
    reference is the same ranker class fitted directly on the same parts."""
    import torch

    from tagtorch.candidates.letor import write_synthetic_letor
    from tagtorch.rankers.base import load_ranker
    from tagtorch.rankers.trees import LambdaMARTRanker

    folder = write_synthetic_letor(tmp_path / "letor", queries=40, features=5, seed=2)
    data = tt.load(folder)
    fitted = tt.fit(data, LambdaMARTRanker(n_iterations=8, n_leaves=7),
                    output_dir=tmp_path / "out")
    direct = LambdaMARTRanker(n_iterations=8, n_leaves=7).fit(data.train, data.vali)
    assert isinstance(fitted, LambdaMARTRanker)
    assert torch.equal(fitted.score(data.test), direct.score(data.test))
    again = load_ranker(next((tmp_path / "out").glob("*-model")))
    assert torch.equal(again.score(data.test), direct.score(data.test))
    with pytest.raises(ValueError, match="a tag ranker"):
        tt.fit(data, "bm25", output_dir=tmp_path / "bad")


@pytest.mark.parametrize("setting, value, override, reason", [
    ("split", "bogus", "task.split=bogus", "split must be one of"),
    ("seeds", [], "task.seeds=[]", "no seed to evaluate"),
])
def test_a_setting_the_task_refuses_is_one_config_error_on_both_paths(folk, tmp_path, setting,
                                                                      value, override, reason):
    """Issue 69: the API raised Hydra's InstantiationException and the command a traceback."""
    from tagtorch.errors import ConfigError
    from tagtorch.train import build_task, user_error

    with pytest.raises(ConfigError, match=f"^config key task=.*{reason}") as caught:
        build_task(compose_cfg(tmp_path / "cli", ["task=posts", override]))
    assert user_error(caught.value) is caught.value  # the command prints it as one line
    with pytest.raises(ConfigError, match=reason):
        tt.evaluate("posts", folk, models=["mp"], output_dir=tmp_path / "api", **{setting: value})
