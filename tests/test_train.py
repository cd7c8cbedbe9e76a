import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from tagtorch.errors import ConfigError
from tagtorch.train import run_task, train

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "tagtorch" / "conf"
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


def compose_cfg(tmp_path: Path, overrides: list[str]):
    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose("train", overrides=["logger=none", *overrides], return_hydra_config=True)
    HydraConfig().set_config(cfg)
    with open_dict(cfg):
        cfg.paths.output_dir = str(tmp_path)
        cfg.paths.checkpoint_dir = str(tmp_path / "checkpoints")
        del cfg.hydra  # as in a real run, where the job config holds no `hydra` node
    return cfg


@pytest.mark.integration
def test_default_job_runs_end_to_end(tmp_path):
    """`python -m tagtorch.train` as a user runs it, with the logger off."""
    done = subprocess.run(
        [sys.executable, "-m", "tagtorch.train", "logger=none",
         f"hydra.run.dir={tmp_path}", f"paths.checkpoint_dir={tmp_path}/checkpoints"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| latre_wts |" in done.stdout
    for name in ["config.yaml", "results.csv", "report.md", "run.trec", "qrels.trec"]:
        assert (tmp_path / name).is_file(), name
    saved = sorted((tmp_path / "checkpoints").glob("*/latre_wts/fold*"))
    assert [p.name for p in saved] == [f"fold{k}" for k in range(5)]
    results = pd.read_csv(tmp_path / "results.csv")
    assert list(results.columns) == ["method", "fold", "metric", "value"]
    assert sorted(results["fold"].unique()) == [0, 1, 2, 3, 4]
    assert not results.duplicated(["method", "fold", "metric"]).any()
    ndcg = results.query("metric == 'ndcg@5'")["value"]
    assert ((ndcg > 0.05) & (ndcg < 1)).all()
    assert "95% confidence interval" in (tmp_path / "report.md").read_text()


def reference_scores(run: Path, qrels: Path, k: int = 5) -> dict[str, float]:
    """Plain re-scoring of the TREC files (trec_eval's conventions, binary relevance)."""
    gold = defaultdict(set)
    for line in qrels.read_text().splitlines():
        q, _, d, rel = line.split()
        if int(rel) > 0:
            gold[q].add(d)
    ranked = defaultdict(list)
    for line in run.read_text().splitlines():
        q, _, d, rank, _score, _ = line.split()
        ranked[q].append((int(rank), d))
    ndcg, precision, recall = [], [], []
    for q, relevant in gold.items():
        docs = [d for _, d in sorted(ranked.get(q, []))][:k]
        hits = [d in relevant for d in docs]
        dcg = sum(1 / math.log2(i + 2) for i, h in enumerate(hits) if h)
        idcg = sum(1 / math.log2(i + 2) for i in range(min(k, len(relevant))))
        ndcg.append(dcg / idcg)
        precision.append(sum(hits) / k)
        recall.append(sum(hits) / len(relevant))
    n = len(gold)
    return {"ndcg@5": sum(ndcg) / n, "p@5": sum(precision) / n, "r@5": sum(recall) / n}


def test_trec_files_rescore_to_the_reported_figures(tmp_path):
    cfg = compose_cfg(tmp_path, ["data.n_objects=600", "task.folds=[0,1]"])
    result = run_task(cfg)
    per_object = result.per_object.pivot_table(index=["fold", "object"], columns="metric",
                                               values="value")
    reference = reference_scores(tmp_path / "run.trec", tmp_path / "qrels.trec")
    for metric, value in reference.items():
        assert per_object[metric].mean() == pytest.approx(value, abs=1e-6)


def test_describe_task_prints_statistics_and_split_sizes(tmp_path, capsys):
    cfg = compose_cfg(tmp_path, ["task=describe", "data.n_objects=500"])
    stats = run_task(cfg)
    out = capsys.readouterr().out
    for word in ["users", "objects", "tags", "assignments", "tags_per_object_mean", "D_objects"]:
        assert word in out
    sizes = {(f["D_objects"], f["V_objects"], f["T_objects"]) for f in stats["folds"]}
    assert len(sizes) == 1
    d, v, t = sizes.pop()
    assert d == 3 * v and v == t
    assert (tmp_path / "describe.json").is_file()


def test_synthetic_experiment_runs(tmp_path):
    cfg = compose_cfg(tmp_path, ["+experiment=synthetic_sum", "data.n_objects=400",
                                 "task.folds=[0]"])
    result = run_task(cfg)
    assert set(result.results["fold"]) == {0}


@pytest.mark.parametrize("experiment", ["lastfm_sum", "movielens_sum"])
def test_real_data_experiment_one_fold(tmp_path, data_dir, experiment):
    cfg = compose_cfg(tmp_path, [f"+experiment={experiment}", f"paths.data_dir={data_dir}",
                                 "task.folds=[0]", "task.trec=false"])
    result = run_task(cfg)
    ndcg = result.results.query("metric == 'ndcg@5'")["value"].iloc[0]
    assert 0.05 < ndcg < 0.9


@pytest.mark.slow
@pytest.mark.parametrize(("experiment", "low", "high"),
                         [("lastfm_sum", 0.30, 0.40), ("movielens_sum", 0.10, 0.20)])
def test_full_sum_experiment_on_real_data(tmp_path, data_dir, experiment, low, high):
    """All five folds; measured NDCG@5: LastFM 0.351 ± 0.010, MovieLens 0.144 ± 0.011."""
    cfg = compose_cfg(tmp_path, [f"+experiment={experiment}", f"paths.data_dir={data_dir}"])
    result = run_task(cfg)
    ndcg = result.results.query("metric == 'ndcg@5'")["value"]
    assert len(ndcg) == 5
    assert low < ndcg.mean() < high


@pytest.mark.integration  # an end-to-end run (the default run keeps its 8 minutes)
def test_folds_and_methods_in_parallel_processes_give_the_same_results(tmp_path):
    settings = ["data.n_objects=300", "task.folds=[0,1]", "model=[latre_wts,sum]",
                "task.online_objects=0", "task.cache=false"]
    serial = run_task(compose_cfg(tmp_path / "serial", settings))
    parallel = run_task(compose_cfg(tmp_path / "parallel", [*settings, "task.n_jobs=2"]))
    assert set(serial.results["method"]) == {"latre_wts", "sum"}
    quality = ~serial.results["metric"].str.contains("ms_|seconds")
    left = serial.results[quality].reset_index(drop=True)
    right = parallel.results[~parallel.results["metric"].str.contains("ms_|seconds")]
    pd.testing.assert_frame_equal(left, right.reset_index(drop=True))
    for name in ["run.latre_wts.trec", "run.sum.trec", "qrels.trec"]:
        assert (tmp_path / "parallel" / name).read_text() == (
            tmp_path / "serial" / name).read_text()


def test_an_interrupted_run_resumes_from_its_finished_pieces(tmp_path, monkeypatch):
    from tagtorch.evaluation import runs, tag_recommendation

    settings = ["data.n_objects=300", "task.folds=[0,1]", "model=[latre_wts,sum]",
                "task.online_objects=0", "task.cache=false"]
    monkeypatch.setattr(runs.RunPieces, "clear", lambda self: None)  # as if interrupted
    first = run_task(compose_cfg(tmp_path, settings))
    pieces = tmp_path / "pieces"
    assert sorted(p.name for p in pieces.iterdir()) == [
        "fold0.latre_wts.json.gz", "fold0.sum.json.gz", "fold1.latre_wts.json.gz",
        "fold1.sum.json.gz"]
    (pieces / "fold1.sum.json.gz").unlink()  # the run stopped before this pair finished
    monkeypatch.undo()
    calls = []
    original = tag_recommendation.TagRecommendationProtocol._fit_method

    def counting(self, ready, name, *args, **kwargs):
        calls.append((ready.fold.fold, name))
        return original(self, ready, name, *args, **kwargs)

    monkeypatch.setattr(tag_recommendation.TagRecommendationProtocol, "_fit_method", counting)
    resumed = run_task(compose_cfg(tmp_path, [*settings, "task.resume=true"]))
    assert calls == [(1, "sum")]
    quality = ~first.results["metric"].str.contains("ms_|seconds")  # timings are measured anew
    pd.testing.assert_frame_equal(first.results[quality], resumed.results[quality])
    assert (tmp_path / "run.sum.trec").read_text().count("\n") > 0
    assert not pieces.exists()  # the report is written: the pieces are gone
    # a piece of other settings is run again
    monkeypatch.setattr(runs.RunPieces, "clear", lambda self: None)
    run_task(compose_cfg(tmp_path, settings))
    calls.clear()
    run_task(compose_cfg(tmp_path, [*settings, "task.resume=true",
                                 "model.sum.feature=sum_l"]))
    assert sorted(calls) == [(0, "sum"), (1, "sum")]
    # and so is every piece of other data
    calls.clear()
    run_task(compose_cfg(tmp_path, [*settings, "task.resume=true", "data.n_objects=301",
                                 "model.sum.feature=sum_l"]))
    assert len(calls) == 4


def test_a_parallel_run_resumes_too(tmp_path, monkeypatch):
    from tagtorch.evaluation import runs

    settings = ["data.n_objects=300", "task.folds=[0,1]", "model=[latre_wts,sum]",
                "task.online_objects=0", "task.cache=false",
                "task.n_jobs=2"]
    monkeypatch.setattr(runs.RunPieces, "clear", lambda self: None)
    first = run_task(compose_cfg(tmp_path, settings))
    for name in ["fold0.sum.json.gz", "fold1.latre_wts.json.gz"]:
        (tmp_path / "pieces" / name).unlink()
    monkeypatch.undo()
    resumed = run_task(compose_cfg(tmp_path, [*settings, "task.resume=true"]))
    quality = ~first.results["metric"].str.contains("ms_|seconds")
    pd.testing.assert_frame_equal(first.results[quality], resumed.results[quality])
    assert not (tmp_path / "pieces").exists()


def test_train_returns_the_optimized_metric(tmp_path):
    """The mean over folds of the configured metric, as in results.csv; the default likewise."""
    settings = ["data.n_objects=300", "task.folds=[0,1]", "model=[latre_wts,sum]",
                "task.online_objects=0", "task.cache=false"]
    value = train(compose_cfg(tmp_path, [*settings, "optimized_metric=sum/map"]))
    results = pd.read_csv(tmp_path / "results.csv")
    maps = results.query("method == 'sum' and metric == 'map'")["value"].tolist()
    assert len(maps) == 2 and value == pytest.approx((maps[0] + maps[1]) / 2, abs=1e-12)
    default = train(compose_cfg(tmp_path, settings))  # null: the first method's ndcg@5
    results = pd.read_csv(tmp_path / "results.csv")
    ndcg = results.query("method == 'latre_wts' and metric == 'ndcg@5'")["value"]
    assert isinstance(default, float) and default == pytest.approx(ndcg.sum() / 2, abs=1e-12)
    with pytest.raises(ConfigError, match=r"optimized_metric='ndcg@7'.*'latre_wts/ndcg@5'"):
        train(compose_cfg(tmp_path, [*settings, "optimized_metric=ndcg@7"]))


def test_a_posts_run_optimizes_the_metric_its_report_ranks_by(tmp_path, caplog):
    """Issue 72: a posts run ended with ``optimized_metric None: None``; its default is the
    first method's ``tagrec_mrr@K`` (K the largest cut-off), the report's ranking metric."""
    cfg = compose_cfg(tmp_path, ["task=posts", "data.n_objects=300", "model=[mp_ur,mp]",
                                 "task.seeds=[0]", "task.p=2"])
    with caplog.at_level("INFO", logger="tagtorch.train"):
        value = train(cfg)
    results = pd.read_csv(tmp_path / "results.csv")
    mrr = results.query("method == 'mp_ur' and metric == 'tagrec_mrr@10'")["value"]
    assert isinstance(value, float) and value == pytest.approx(float(mrr.iloc[0]), abs=1e-12)
    assert f"optimized_metric tagrec_mrr@10: {value}" in caplog.text


@pytest.mark.parametrize("value", ["nope/ndcg@5", "a/b/c", "/"])
def test_a_bad_optimized_metric_fails_before_any_work(tmp_path, value):
    with pytest.raises(ConfigError, match="optimized_metric"):
        train(compose_cfg(tmp_path, ["model=[latre_wts,sum]", f"optimized_metric={value}"]))
    assert not (tmp_path / "config.yaml").exists()
    with pytest.raises(ConfigError, match="reports no metrics"):
        train(compose_cfg(tmp_path, ["task=describe", "optimized_metric=ndcg@5"]))


def test_the_command_line_names_a_bad_optimized_metric(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tagtorch.train", "logger=none", f"hydra.run.dir={tmp_path}",
         "optimized_metric=nope/ndcg@5"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "optimized_metric='nope/ndcg@5'" in done.stderr and "latre_wts" in done.stderr


def test_a_run_that_uses_caches_logs_where_they_live_and_their_size(tmp_path, monkeypatch,
                                                                     caplog):
    root = tmp_path / "xdg" / "tagtorch"
    (root / "text").mkdir(parents=True)
    (root / "text" / ("synthetic-" + "a" * 24 + ".npz")).write_bytes(b"x" * 1500)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with caplog.at_level("INFO", logger="tagtorch.train"):
        run_task(compose_cfg(tmp_path / "a", ["task=describe", "data.n_objects=200"]))
    # as before the run: it writes its own text entry only afterwards
    assert f"caches: {root} (candidates 0 B in 0 entries, text 1.5 kB in 1 entry)" \
        in caplog.messages
    caplog.clear()
    with caplog.at_level("INFO", logger="tagtorch.train"):
        run_task(compose_cfg(tmp_path / "b", ["task=describe", "data.n_objects=200",
                                              "text=none", "task.cache=false"]))
    assert not [m for m in caplog.messages if m.startswith("caches:")]


def test_the_command_ends_with_the_best_first_table_and_the_report_path(tmp_path, capsys):
    cfg = compose_cfg(tmp_path, ["task=itemrec", "text=none", "data.n_objects=300", "task.p=2",
                                 "model=[tag_popularity,global_popularity,two_dimensional]",
                                 "task.seeds=[0,1]"])
    train(cfg)
    out = capsys.readouterr().out.strip().splitlines()
    start = next(i for i, line in enumerate(out) if line.startswith("## Best first by ndcg@10"))
    rows = [line.split(" | ") for line in out[start:] if line.startswith("| ")][1:]
    results = pd.read_csv(tmp_path / "results.csv")
    means = results[results["metric"] == "ndcg@10"].groupby("method")["value"].mean()
    assert [row[1] for row in rows] == list(means.sort_values(ascending=False, kind="stable").index)
    assert out[-2] == f"report: {tmp_path / 'report.md'}"
    assert out[-1] == f"figure: {tmp_path / 'ndcg@10.png'}" and Path(out[-1][8:]).is_file()


@pytest.mark.integration
def test_a_run_stopped_by_sigterm_during_a_fit_exits_with_143_not_0(tmp_path):
    """Lightning ends a fit on SIGTERM with ``SystemExit(None)``: a batch system's stop used to
    leave a run without a report that exited with status 0, as a finished one does."""
    import signal
    import time

    process = subprocess.Popen(
        [sys.executable, "-m", "tagtorch.train", "model=lambdarank", "trainer.max_epochs=500",
         "logger=none", f"hydra.run.dir={tmp_path}", f"paths.checkpoint_dir={tmp_path}/c"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not (tmp_path / "lightning").exists() and time.monotonic() < deadline:
        time.sleep(0.5)  # the first neural fit has started
    time.sleep(3)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr[-2000:]
    assert "stopped by SIGTERM during a fit" in stderr
    assert not (tmp_path / "report.md").exists()
