"""Settings are checked before any work: one line naming the key, the value and what is allowed."""

import subprocess
import sys

import pytest
import torch
from omegaconf import open_dict
from test_train import EXPERIMENTS, ROOT, compose_cfg

from tagtorch.config_checks import check_config, drop_unselected_settings
from tagtorch.errors import ConfigError
from tagtorch.evaluation.trec import check_name, run_file_names

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without a GPU")


@pytest.mark.parametrize("experiment", [None, *EXPERIMENTS])
def test_every_shipped_configuration_passes(tmp_path, experiment):
    overrides = [] if experiment is None else [f"+experiment={experiment}"]
    cfg = compose_cfg(tmp_path, overrides)
    drop_unselected_settings(cfg)  # as a run does first: an inherited method's settings go
    check_config(cfg)


@pytest.mark.parametrize("overrides, key, expected", [
    (["task.ks=[0]"], "task.ks", "integers from 1 to 1000000000"),
    (["task.ks=[1e9]"], "task.ks", "integers from 1 to 1000000000"),  # Hydra's float
    (["task.ks=[5,1000000001]"], "task.ks", "integers from 1 to 1000000000"),
    (["task.ks=[123456789012345678901234567890]"], "task.ks", "integers from 1 to 1000000000"),
    (["task.metrics=[ndcg,mrr@10000000000]"], "task.metrics", "K from 1 to 1000000000"),
    (["task.ks=[]"], "task.ks", "non-empty list"),
    (["task.ks=5"], "task.ks", "list of integers"),
    (["task.metrics=[ndcg,bleu]"], "task.metrics", "metric names"),
    (["model.latre_wts.k=0"], "model.latre_wts.k", "integer >= 1"),
    (["model.latre_wts.k=2.5"], "model.latre_wts.k", "integer >= 1"),
    (["task.batch_size=0"], "task.batch_size", "integer >= 1"),
    (["task.batch_size=many"], "task.batch_size", "integer >= 1"),
    (["task.device=tpu"], "task.device", "'auto', 'cpu', 'cuda'"),
    (["task.n_jobs=0"], "task.n_jobs", "non-zero integer"),
    (["model=rf", "model.rf.n_jobs=two"], "model.rf.n_jobs", "non-zero integer"),
    (["model=lambdarank", "optimizer.lr=-0.1"], "model.lambdarank.optimizer.lr", "lr"),
    (["model=lambdarank", "optimizer.lr=0"], "model.lambdarank.optimizer.lr", "> 0"),
    (["model=lambdarank", "optimizer.lr=nan"], "model.lambdarank.optimizer.lr", "finite"),
    (["task=itemrec", "model=dorank", "model.dorank.optimizer.lr=-1"],
     "model.dorank.optimizer.lr", "> 0"),
    (["task=itemrec", "model=dorank", "task.ks=[0,10]"], "task.ks", "integers from 1 to"),
    (["task=itemrec", "model=dorank", "task.batch_size=-5"], "task.batch_size", ">= 1"),
    (["model=dorank"], "model.dorank._target_", "a tag ranker"),
    (["task=itemrec", "model=latre_wts"], "model.latre_wts._target_", "an item model"),
    (["task=resources", "model=latre_wts"], "model.latre_wts._target_", "a resource ranker"),
    (["model.latre_wts._target_=tagtorch.itemrec.base.ItemRanker"], "model.latre_wts._target_",
     "states its task"),
    (["model=bm25"], "model.bm25._target_", "a tag ranker"),
    (["task=posts", "model=bm25"], "model.bm25._target_", "a post ranker"),
    (["task=posts", "model=bm25"], "model.bm25._target_",
     "task=posts, one of apr, apr_local, bll, bll_ac, bll_c"),
    # issue 72: targets naming a method the run does not fit are refused before any fit
    (["task=posts", "model=[bll_c,folkrank]", "+task.targets={method: hybrid_lambdamart, "
      "baselines: [bll_c]}"], "task.targets.method",
     "one of the chosen methods ['bll_c', 'folkrank']"),
    (["task=posts", "model=[bll_c,mp]", "+task.targets={method: mp, baselines: [cf]}"],
     "task.targets.baselines", "at least one of the chosen methods ['bll_c', 'mp']"),
    (["task=resources", "model=bm25", "task.metrics=[mrr@0]"], "task.metrics", "mrr@K"),
    (["task=itemrec", "model=[dorank,lambdamart]"], "model.lambdamart._target_",
     "an item model"),
    (["data=tabular"], "data.path", "a value"),
    (["seed=abc"], "seed", "an integer"),
    (["task.backend=bogus"], "task.backend", "['processes', 'dask', 'ray']"),
    (["model=xtred_rf"], "candidates.diversity", "candidates=latre_diverse"),
    (["+experiment=extended_lastfm", "method_candidates.rf_extended=extnded"],
     "method_candidates.rf_extended", "a name of candidate_sets ['extended']"),
    (["task.significance.test=permutation"], "task.significance",
     "randomization"),
    (["task=itemrec", "model=dorank", "task.significance.n_resamples=0"],
     "task.significance", "n_resamples: an integer from 1 to 1000000"),
    (["task=itemrec", "model=dorank", "task.significance.n_resamples=1000000000000"],
     "task.significance", "n_resamples must be an integer from 1 to 1000000, got 1000000000000"),
    (["task=posts", "model=bll", "task.significance.n_resamples=1e4"],
     "task.significance", "n_resamples must be an integer from 1 to 1000000, got 10000.0"),
    (["data=tagrec", "data.path=x.txt", "data.name=../x"], "data.name",
     "a dataset name of 1 to 100 ASCII letters"),
    (["task=resources", "model=bm25", "+task.significance.alpha=0.05"], "task.significance",
     "alpha"),
])
def test_bad_settings_are_named_before_any_work(tmp_path, overrides, key, expected):
    cfg = compose_cfg(tmp_path, overrides)
    with pytest.raises(ConfigError) as info:
        check_config(cfg)
    message = str(info.value)
    assert message.startswith(f"config key {key}="), message
    assert expected in message
    assert "\n" not in message


@NO_GPU
@pytest.mark.parametrize("overrides, key", [
    (["task.device=cuda"], "task.device"),
    (["candidates.device=cuda:0"], "candidates.device"),
    (["model=lambdarank", "trainer=gpu"], "model.lambdarank.trainer.accelerator"),
    (["task=itemrec", "model=pitf", "trainer.accelerator=gpu"], "model.pitf.trainer.accelerator"),
])
def test_cuda_asked_for_without_a_gpu_is_refused(tmp_path, overrides, key):
    with pytest.raises(ConfigError, match=f"config key {key}=.*no (CUDA device|GPU)"):
        check_config(compose_cfg(tmp_path, overrides))


def test_an_unused_gpu_trainer_is_not_an_error(tmp_path):
    """LATRE+wTS trains no network: trainer=gpu is unused there, so it is not checked."""
    check_config(compose_cfg(tmp_path, ["trainer=gpu"]))


def run_cli(tmp_path, *overrides):
    return subprocess.run(
        [sys.executable, "-m", "tagtorch.train", "logger=none", f"hydra.run.dir={tmp_path}",
         *overrides], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_command_line_shows_one_line_and_exits_2_before_loading_data(tmp_path):
    # the data file does not exist: the ks error comes first, so nothing was loaded
    done = run_cli(tmp_path, "data=tabular", f"data.path={tmp_path}/none.tsv",
                   "task.ks=[0,5]")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "error: config key task.ks=[0, 5]: expected" in done.stderr
    assert "loading data" not in done.stderr + done.stdout
    assert not (tmp_path / "config.yaml").exists()


def test_an_unknown_backend_is_one_line_and_exit_2_before_loading_data(tmp_path):
    done = run_cli(tmp_path, "task.backend=bogus")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "error: config key task.backend='bogus': expected one of "
        "['processes', 'dask', 'ray'] (where the parallel jobs run)")
    assert "loading data" not in done.stderr + done.stdout


def test_a_missing_data_file_is_one_line_naming_it(tmp_path):
    done = run_cli(tmp_path, "data=tabular", f"data.path={tmp_path}/none.tsv")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert f"{tmp_path}/none.tsv" in done.stderr.splitlines()[-1]



def test_the_caps_on_heavily_tagged_objects_are_config_settings(tmp_path):
    from hydra.utils import instantiate

    default = instantiate(compose_cfg(tmp_path, []).candidates)
    assert (default.max_antecedent_tags, default.max_train_tags) == (64, 1000)
    cfg = compose_cfg(tmp_path, ["candidates.max_antecedent_tags=null",
                                 "candidates.max_train_tags=null"])
    check_config(cfg)
    off = instantiate(cfg.candidates)
    assert (off.max_antecedent_tags, off.max_train_tags) == (None, None)


def test_an_experiments_settings_of_unselected_methods_are_dropped(tmp_path):
    cfg = compose_cfg(tmp_path, ["+experiment=dorank_movielens", "model=[global_popularity]"])
    assert "dorank" in cfg.model and "_target_" not in cfg.model.dorank
    assert drop_unselected_settings(cfg) == ["dorank", "pitf", "probabilistic_cp", "dorank_plus",
                                            "two_dimensional"]
    assert list(cfg.model) == ["global_popularity"]
    check_config(cfg)
    typo = compose_cfg(tmp_path, ["model=[latre_wts]", "+model.latre_wt={k: 1}"])
    assert drop_unselected_settings(typo) == ["latre_wt"]  # dropped with a warning naming it


@pytest.mark.parametrize("task", ["letor", "tagrec", "posts", "itemrec", "resources"])
def test_a_setting_the_task_does_not_take_is_one_line_naming_it(tmp_path, task):
    """Issue 52: ``+task.bogus=1`` was Hydra's multi-line error from inside instantiation."""
    cfg = compose_cfg(tmp_path, [f"task={task}", "+task.bogus=1"])
    with pytest.raises(ConfigError, match=r"config key task\.bogus=1: expected a setting .*"
                                          r"takes: "):
        check_config(cfg)


@pytest.mark.parametrize("value", ["yes", 2, None])
def test_a_trec_switch_takes_only_true_or_false(tmp_path, value):
    """Issue 52 (probe): ``task.write_trec=yes`` (now ``task.trec``) was read as true."""
    cfg = compose_cfg(tmp_path, ["task=letor"])
    cfg.task.trec = value
    with pytest.raises(ConfigError, match=r"task\.trec=.*expected true or false"):
        check_config(cfg)


@pytest.mark.parametrize("task", sorted(p.stem for p in (ROOT / "tagtorch" / "conf" / "task")
                                        .glob("*.yaml")))
def test_every_task_has_the_one_shape(tmp_path, task):
    """Issue 53: every shipped task is a ``Task`` whose ``run`` takes the same arguments as the
    base's (``run_task`` calls each one way), and states the kinds of model it runs."""
    import inspect

    from hydra.utils import instantiate

    from tagtorch.evaluation.runs import Task
    from tagtorch.settings import MODEL_TASKS

    cfg = compose_cfg(tmp_path, [f"task={task}"] + (["data=letor", "data.path=."]
                                                     if task == "letor" else []))
    made = instantiate(cfg.task, _convert_="all")
    assert isinstance(made, Task)
    names = list(inspect.signature(type(made).run).parameters)
    assert names[-2:] == ["raw", "given"] and len(names) == 7  # self, data, cfg, out, loggers
    assert set(made.model_tasks) <= set(MODEL_TASKS)


@pytest.mark.parametrize("name", ["x/../../../escaped_run", "..", ".hidden", "a\x00b", "a b",
                                  "run\n", "/abs", "a\\b", "caf\u00e9", "-flag", "", "x" * 101])
def test_a_method_name_that_is_not_a_safe_file_name_is_refused_before_any_work(tmp_path, name):
    """Issue 69: a method named ``x/../../../escaped_run`` wrote its TREC file outside the run
    folder (a method's name is part of the run's file and folder names)."""
    cfg = compose_cfg(tmp_path, ["model=[latre_wts]"])
    with open_dict(cfg):
        cfg.model[name] = cfg.model.latre_wts
    with pytest.raises(ConfigError) as info:
        check_config(cfg)
    assert str(info.value) == (f"config key model={name!r}: expected a method name of 1 to 100 "
                               "ASCII letters, digits, '_', '-', '.' or '+', starting with a "
                               "letter, digit or '_', without '..' (it names the run's files)")


def test_safe_method_names_pass():
    for name in ("latre_wts", "rf-2", "lda_z100", "A.b+c", "_x", "x" * 100):
        assert check_name(name) == name
    with pytest.raises(ValueError, match=r"^method 'a/b': expected 1 to 100"):
        run_file_names(["a/b", "c"])


def test_the_python_api_refuses_such_a_name_before_writing_anything(tmp_path):
    """``tt.evaluate(models={name: ...})`` takes the same run, checked first."""
    import tagtorch as tt
    from tagtorch.data.synthetic import generate_folksonomy

    run = tmp_path / "deep" / "run"
    with pytest.raises(ConfigError, match=r"config key model='x/\.\./\.\./escaped_run'"):
        tt.evaluate("tagrec", generate_folksonomy(n_objects=30, seed=0), output_dir=run,
                    models={"x/../../escaped_run": "latre_wts"})
    assert list(tmp_path.rglob("*")) == []  # nothing written, inside the run folder or out
