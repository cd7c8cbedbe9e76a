"""Optuna sweeps: the tagtorch_optuna sweeper, the job side (pruning, time limit), V objectives."""

import itertools
import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import optuna
import pandas as pd
import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.utils import JobStatus
from test_train import compose_cfg

from hydra_plugins.tagtorch_sweeper.sweeper import TagtorchOptunaSweeper, distributions
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.text import TextProcessor
from tagtorch.evaluation.tag_recommendation import TagRecommendationProtocol
from tagtorch.rankers.single_feature import FeatureRanker
from tagtorch.sweeps import TrialTimeoutError, trial_of
from tagtorch.train import check_sweep_metric, train

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "tagtorch" / "conf"
SEARCHES = sorted(p.stem for p in (CONF / "hparams_search").glob("*.yaml"))


@pytest.mark.parametrize("name", SEARCHES)
def test_every_search_composes_with_its_method_and_a_valid_space(name):
    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose("train", overrides=[f"hparams_search={name}"], return_hydra_config=True)
    assert cfg.hydra.sweeper._target_.endswith("TagtorchOptunaSweeper")
    assert cfg.search_method in cfg.model
    space, _ = distributions(dict(cfg.hydra.sweeper.params))
    assert space and all(key.split(".")[0] in cfg for key in space)
    if "evaluate_on" in cfg.task:  # tag recommendation: tuned on V, never on T
        assert cfg.task.evaluate_on == "validation"
    check_sweep_metric(cfg)  # a validation objective: the sweeper accepts it


def test_a_search_in_an_experiment_tunes_its_method_only(tmp_path):
    cfg = compose_cfg(tmp_path, ["+experiment=compare_lastfm", "hparams_search=lambdamart"])
    from tagtorch.config_checks import keep_search_method

    assert len(cfg.model) > 1
    keep_search_method(cfg)
    assert list(cfg.model) == ["lambdamart"]


class Spy(FeatureRanker):
    """A one-feature ranker that records the objects it learns from and scores."""

    seen: ClassVar[dict[str, set[int]]] = {"fit": set(), "score": set()}

    def fit(self, train, val=None):
        Spy.seen["fit"].update(train.objects.tolist())
        return super().fit(train, val)

    def score(self, batch):
        Spy.seen["score"].update(batch.objects.tolist())
        return super().score(batch)


def test_validation_mode_learns_and_scores_on_v_and_never_reads_t():
    folksonomy = TextProcessor(cache=False).apply(generate_folksonomy(n_objects=400, seed=2))
    from tagtorch.candidates.latre import LatreCandidates

    protocol = TagRecommendationProtocol(folds=[0], evaluate_on="validation", tune_fraction=0.25,
                                         online_objects=0, device="cpu")
    Spy.seen = {"fit": set(), "score": set()}
    result = protocol.evaluate(folksonomy, LatreCandidates(max_rule_candidates=30),
                               {"spy": lambda: Spy(feature="sum_1")})
    fold = protocol.splits(folksonomy)[0]
    v, t = set(fold.val.objects.tolist()), set(fold.test.objects.tolist())
    fitted, scored = Spy.seen["fit"], Spy.seen["score"]
    assert scored and fitted and scored <= v and fitted <= v and not (scored & fitted)
    assert not (scored | fitted) & t
    assert len(scored) == round(0.25 * len(v))
    assert "validation" in result.report


def sweep(folder: Path, *extra: str, n_trials: int = 3) -> subprocess.CompletedProcess:
    """The real sweep command on a small synthetic folksonomy, one fold."""
    return subprocess.run(
        [sys.executable, "-m", "tagtorch.train", "-m", "hparams_search=lambdamart",
         "data.n_objects=500", "logger=none", "task.folds=[0]",
         "candidates.max_rule_candidates=30", "model.lambdamart.n_iterations=choice(10,20)",
         f"hydra.sweeper.n_trials={n_trials}", f"hydra.sweep.dir={folder}",
         f"paths.checkpoint_dir={folder}/checkpoints", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.integration
def test_a_sweep_writes_its_outputs_and_resumes_where_it_stopped(tmp_path):
    done = sweep(tmp_path, n_trials=2)
    assert done.returncode == 0, done.stderr[-3000:]
    trials = pd.read_csv(tmp_path / "trials.csv")
    assert list(trials["number"]) == [0, 1] and set(trials["state"]) == {"COMPLETE"}
    best = yaml.safe_load((tmp_path / "best.yaml").read_text())
    assert best["value"] == pytest.approx(trials["value"].max())
    assert "task.evaluate_on=test" in best["rerun_on_test"]
    assert "choice(" not in best["rerun_on_test"]
    for name in ["optimization_history.png", "param_importances.png",
                 "parallel_coordinate.png"]:
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG", name
    # the jobs' own runs were scored on V: their reports say so
    assert "validation" in (tmp_path / "0" / "report.md").read_text()
    again = sweep(tmp_path, n_trials=3)  # a restarted sweep goes on to 3 trials
    assert again.returncode == 0, again.stderr[-3000:]
    trials = pd.read_csv(tmp_path / "trials.csv")
    assert list(trials["number"]) == [0, 1, 2]
    assert (tmp_path / "2" / "results.csv").is_file()  # a new job folder, none overwritten
    first = trials.filter(like="params_").iloc[0].tolist()
    assert trials.filter(like="params_").iloc[2].tolist() != first


@pytest.mark.integration
def test_a_sweep_on_a_test_metric_is_refused_in_one_line_before_any_trial(tmp_path):
    done = sweep(tmp_path, "task.evaluate_on=test", n_trials=1)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "error: config key optimized_metric='lambdamart/ndcg@5': expected a validation metric "
        "in a sweep: 'ndcg@5' is a test metric; set task.evaluate_on=validation "
        "(learn on part of V, score the rest)")
    assert "loading data" not in done.stderr + done.stdout
    assert not (tmp_path / "optuna.db").exists() and not (tmp_path / "0").exists()


@pytest.mark.parametrize("overrides, refused", [
    (["hparams_search=dorank", "optimized_metric=ndcg@10"], "'ndcg@10' is a test metric; "
     "optimize val_dcg@10 (or null)"),
    (["hparams_search=dorank", "optimized_metric=dorank/val_dcg@10"], None),
    (["hparams_search=dorank", "optimized_metric=fit_seconds"], None),
    (["task=resources", "model=bm25", "optimized_metric=s@1"], "optimize val_mrr@10"),
    (["task=resources", "model=bm25"], None),  # null: val_mrr@10
    (["hparams_search=lambdamart", "optimized_metric=null",
      "task.evaluate_on=test"], "null (the task's default, 'ndcg@5') is a test"),
    (["hparams_search=lambdamart", "optimized_metric=lambdamart/candidate_recall"], None),
])
def test_a_sweep_metric_is_a_validation_metric(tmp_path, overrides, refused):
    from tagtorch.errors import ConfigError

    cfg = compose_cfg(tmp_path, overrides)
    if refused is None:
        check_sweep_metric(cfg)
        return
    with pytest.raises(ConfigError, match="expected a validation metric in a sweep") as info:
        check_sweep_metric(cfg)
    assert refused in str(info.value)


@pytest.mark.integration
def test_a_failing_trial_is_recorded_and_the_sweep_goes_on(tmp_path):
    done = sweep(tmp_path, "hydra.sweeper.sampler=grid", "model.lambdamart.n_iterations=10",
                 "model.lambdamart.n_leaves=4", "model.lambdamart.min_leaf_size=1",
                 "model.lambdamart.learning_rate=choice(0.1,-1.0)", n_trials=2)
    assert done.returncode == 0, done.stderr[-3000:]
    trials = pd.read_csv(tmp_path / "trials.csv")
    failed = trials[trials["state"] == "FAIL"]
    assert len(failed) == 1 and len(trials[trials["state"] == "COMPLETE"]) == 1
    assert float(failed["params_model.lambdamart.learning_rate"].iloc[0]) == -1.0
    assert "learning_rate" in failed["user_attrs_failure"].iloc[0]


def study_with(tmp_path: Path, pruner: dict | None = None) -> tuple[optuna.Study, str]:
    """A study as the sweeper makes it: its pruner's settings kept for the jobs."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="s", storage=url, direction="maximize")
    study.set_user_attr("pruner", pruner or {"name": "none"})
    return study, url


def test_a_neural_trial_reports_its_epochs_and_is_pruned(tmp_path):
    """A trial far below a finished one at every epoch is pruned by the median pruner."""
    study, url = study_with(tmp_path, {"name": "median", "n_startup_trials": 1,
                                       "n_warmup_steps": 0})
    study.add_trial(optuna.trial.create_trial(
        value=1.0, intermediate_values={step: 1.0 for step in range(100)}))
    trial = study.ask()
    cfg = compose_cfg(tmp_path, ["model=lambdarank", "data.n_objects=300",
                                 "task.folds=[0]", "trainer.max_epochs=3",
                                 "candidates.max_rule_candidates=30"])
    with pytest.raises(optuna.TrialPruned), trial_of({"storage": url, "study": "s",
                                                      "trial": trial.number}):
        train(cfg)
    reported = study.trials[trial.number].intermediate_values
    assert list(reported) == [0] and reported[0] < 1.0


def test_a_trial_over_its_time_limit_is_stopped(tmp_path):
    study, url = study_with(tmp_path)
    trial = study.ask()
    start = time.monotonic()
    with pytest.raises(TrialTimeoutError, match="time limit"), trial_of(
            {"storage": url, "study": "s", "trial": trial.number, "time_limit": 1}):
        time.sleep(10)
    assert time.monotonic() - start < 5


def outcome(status, value):
    return SimpleNamespace(status=status, return_value=value, _return_value=value)


def test_outcomes_complete_prune_or_fail_trials_with_their_reason(tmp_path):
    study, _ = study_with(tmp_path)
    sweeper = TagtorchOptunaSweeper()
    cases = [(outcome(JobStatus.COMPLETED, 0.5), "COMPLETE", None),
             (outcome(JobStatus.COMPLETED, math.nan), "FAIL", "not a finite"),
             (outcome(JobStatus.COMPLETED, None), "FAIL", "not a finite"),
             (outcome(JobStatus.FAILED, optuna.TrialPruned("low")), "PRUNED", None),
             (outcome(JobStatus.FAILED, MemoryError("out of memory")), "FAIL", "MemoryError")]
    for job, state, reason in cases:
        trial = study.ask()
        sweeper._tell(study, trial, job)
        frozen = study.trials[trial.number]
        assert frozen.state.name == state
        if reason:
            assert reason in frozen.user_attrs["failure"]


def test_a_trial_whose_job_died_is_failed_and_asked_again(tmp_path):
    sweeper = TagtorchOptunaSweeper(heartbeat_seconds=0.5)
    sweeper.sweep_dir = tmp_path
    space, _ = distributions({"x": "interval(0, 1)"})
    study = sweeper.study(space)
    trial = study.ask(space)
    study._storage.record_heartbeat(trial._trial_id)
    time.sleep(2.0)  # no beat for longer than the grace period (3 beats)
    optuna.storages.fail_stale_trials(study)
    states = [t.state.name for t in study.trials]
    assert states == ["FAIL", "WAITING"]
    assert np.isclose(study.trials[1].params["x"], trial.params["x"])  # asked again as it was


@pytest.mark.integration
def test_the_ray_launcher_runs_the_jobs_as_concurrent_ray_tasks(tmp_path):
    """A real local Ray instance of 2 CPUs runs 4 jobs of 1 CPU each, two at a time."""
    app = Path(__file__).parent / "fixtures" / "ray_app" / "app.py"
    process = subprocess.Popen(
        [sys.executable, str(app), "-m", "x=1,2,3,4", "hydra/launcher=tagtorch_ray",
         "hydra.launcher.num_cpus=2", f"hydra.sweep.dir={tmp_path}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    jobs = [json.loads(path.read_text()) for path in tmp_path.glob("*/job.json")]
    assert sorted(job["x"] for job in jobs) == [1, 2, 3, 4]
    assert sorted(job["num"] for job in jobs) == [0, 1, 2, 3]
    assert process.pid not in {job["pid"] for job in jobs}  # Ray workers ran them
    events = sorted([(job["start"], 1) for job in jobs] + [(job["end"], -1) for job in jobs])
    running = list(itertools.accumulate(change for _, change in events))
    assert max(running) == 2, running  # concurrent, within the cluster's 2 CPUs


@pytest.mark.slow
def test_a_sweep_runs_its_trials_on_ray(tmp_path):
    """The real sweep, 2 trials at a time as tasks of a local Ray instance (slow: each Ray
    worker imports tagtorch and compiles the candidate kernels anew)."""
    done = sweep(tmp_path, "hydra/launcher=tagtorch_ray", "hydra.launcher.num_cpus=2",
                 "hydra.sweeper.n_jobs=2", n_trials=2)
    assert done.returncode == 0, done.stderr[-3000:]
    trials = pd.read_csv(tmp_path / "trials.csv")
    assert list(trials["number"]) == [0, 1] and set(trials["state"]) == {"COMPLETE"}
    assert (tmp_path / "best.yaml").is_file()


SWEEP_APP = '''
import json, os, time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig


@hydra.main(version_base="1.3", config_path=".", config_name="config")
def main(cfg):
    folder = Path(HydraConfig.get().runtime.output_dir)
    with open(folder / "job.json", "x") as out:  # "x": a folder written twice fails its trial
        json.dump({"num": HydraConfig.get().job.num, "trial": cfg.sweep.trial,
                   "pid": os.getpid()}, out)
    time.sleep(cfg.sleep)
    return float(cfg.x)


main()
'''

SWEEP_APP_CONFIG = """
defaults:
  - override hydra/sweeper: tagtorch_optuna
  - _self_
x: 0.0
sleep: 1.0
sweep: {storage: null, study: null, trial: null, time_limit: null, heartbeat: null}
hydra:
  sweeper:
    sampler: random
    heartbeat_seconds: 1.0
    params:
      x: interval(0, 1)
"""


def app_sweep(folder: Path, *extra: str) -> list[str]:
    """The command of a sweep of a tiny Hydra app (each job writes ``job.json``, sleeps 1 s)
    with the tagtorch_optuna sweeper: its jobs take a second, not a fold's candidates."""
    app = folder / "app"
    app.mkdir(exist_ok=True)
    (app / "app.py").write_text(SWEEP_APP)
    (app / "config.yaml").write_text(SWEEP_APP_CONFIG)
    return [sys.executable, str(app / "app.py"), "-m", f"hydra.sweep.dir={folder / 'sweep'}",
            *extra]


@pytest.mark.integration
def test_two_sweeps_on_one_new_study_share_it_without_overwriting_a_job(tmp_path):
    """Two sweep processes started at once into one fresh folder (one SQLite study): both
    finish, every trial has its own job folder named by its number, written once."""
    command = app_sweep(tmp_path, "hydra.sweeper.n_trials=6")
    workers = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(2)]
    outputs = [worker.communicate(timeout=120) for worker in workers]
    for worker, (_, stderr) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, stderr[-3000:]
        assert "Traceback" not in stderr, stderr[-3000:]
    study = optuna.load_study(study_name="tagtorch",
                              storage=f"sqlite:///{tmp_path / 'sweep' / 'optuna.db'}")
    numbers = [t.number for t in study.trials]
    assert {t.state.name for t in study.trials} == {"COMPLETE"}, study.trials
    assert 6 <= len(numbers) <= 7  # both may ask when 5 are done
    jobs = {int(path.parent.name): json.loads(path.read_text())
            for path in (tmp_path / "sweep").glob("*/job.json")}
    assert sorted(jobs) == numbers  # one folder per trial, named by the trial's number
    assert all(job["num"] == job["trial"] == number for number, job in jobs.items())
    assert {job["pid"] for job in jobs.values()} == {w.pid for w in workers}  # both worked


def unusable_storages(tmp_path: Path) -> dict[str, str]:
    """Storage URLs a sweep cannot use, by what is wrong with them."""
    (tmp_path / "text.db").write_text("not a database, " * 100)
    read_only = tmp_path / "read_only"
    read_only.mkdir()
    read_only.chmod(0o555)
    return {"missing folder": "sqlite:////nonexistent/dir/x.db",
            "not SQLite": f"sqlite:///{tmp_path / 'text.db'}",
            "a folder": f"sqlite:///{tmp_path}",
            "unknown dialect": "bogus://x",
            "not a URL": "optuna.db",
            "unwritable folder": "sqlite:////proc/x.db",  # even for root
            "read-only folder": f"sqlite:///{read_only / 'x.db'}"}


@pytest.mark.parametrize("case", ["missing folder", "not SQLite", "a folder", "unknown dialect",
                                  "not a URL", "unwritable folder", "read-only folder"])
def test_an_unusable_storage_is_a_config_error_naming_it(tmp_path, case):
    from tagtorch.errors import ConfigError

    url = unusable_storages(tmp_path)[case]
    if case == "read-only folder" and os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder")
    sweeper = TagtorchOptunaSweeper(storage=url)
    sweeper.sweep_dir = tmp_path / "sweep"
    with pytest.raises(ConfigError) as info:
        sweeper.study(distributions({"x": "interval(0, 1)"})[0])
    message = str(info.value)
    assert message.startswith(f"config key hydra.sweeper.storage={url!r}: expected"), message
    assert "\n" not in message


@pytest.mark.integration
def test_an_unusable_storage_ends_the_sweep_command_in_one_line_with_status_2(tmp_path):
    done = sweep(tmp_path, "hydra.sweeper.storage=bogus://x", n_trials=1)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "error: config key hydra.sweeper.storage='bogus://x': expected an Optuna storage")
    assert "loading data" not in done.stderr + done.stdout


@pytest.mark.integration
def test_the_ray_launcher_names_an_address_where_no_cluster_listens_in_one_line(tmp_path):
    with socket.socket() as probe:  # a port on 127.0.0.1 where nothing listens
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    app = Path(__file__).parent / "fixtures" / "ray_app" / "app.py"
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(app), "-m", "x=1,2", "hydra/launcher=tagtorch_ray",
         f"hydra.launcher.address={address}", "hydra.launcher.connect_timeout=1",
         f"hydra.sweep.dir={tmp_path}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        f"error: config key hydra.launcher.address='{address}': expected the address of a Ray "
        "cluster that answers within 1 s")
    assert time.monotonic() - start < 60
