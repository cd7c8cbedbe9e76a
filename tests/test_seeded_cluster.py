"""Issue 54: a seeded task's (seed, method) fits sharded over a real local Dask cluster give the
results of one process; each worker reads the data itself from ``cfg.data``."""

from __future__ import annotations

import pandas as pd
import pytest
from test_train import compose_cfg

from tagtorch.evaluation.report import is_timing_metric
from tagtorch.train import run_task

pytest.importorskip("distributed")


def quality(frame: pd.DataFrame) -> pd.DataFrame:
    keep = ~frame["metric"].map(is_timing_metric)
    return frame[keep].sort_values(list(frame.columns[:-1])).reset_index(drop=True)


@pytest.mark.integration
@pytest.mark.parametrize("overrides", [
    ["task=posts", "text=none", "model=[mp_ur,bll_c,folkrank]", "task.seeds=[0,1]",
     "task.split=random"],
    ["task=resources", "text=none", "model=[smatch,bm25]", "task.seeds=[0,1]",
     "task.min_user_objects=5", "~task.tune.bm25"],
])
def test_dask_workers_give_the_one_process_results(tmp_path, overrides):
    common = ["data.n_objects=300", *overrides]
    alone = run_task(compose_cfg(tmp_path / "alone", common))
    cluster = run_task(compose_cfg(tmp_path / "dask", [*common, "task.backend=dask"]))
    pd.testing.assert_frame_equal(quality(cluster.results), quality(alone.results))
    pd.testing.assert_frame_equal(quality(cluster.per_object), quality(alone.per_object))
    assert (tmp_path / "dask" / "qrels.trec").read_text() == \
        (tmp_path / "alone" / "qrels.trec").read_text()
    for run in (tmp_path / "alone").glob("run.*.trec"):
        assert (tmp_path / "dask" / run.name).read_text() == run.read_text()


def _tagrec_file(path, seed: int):
    """A TagRec file of the synthetic generator's posts (``seed`` changes them)."""
    from tagtorch.data.loaders.tagrec import write_tagrec
    from tagtorch.data.synthetic import generate_folksonomy

    write_tagrec(generate_folksonomy(n_objects=300, seed=seed), path)
    return path


def test_a_worker_reading_other_data_than_the_runs_stops_naming_the_file(tmp_path):
    """Issue 69: the data's digest travels with each job (here without a cluster)."""
    from hydra.utils import instantiate

    from tagtorch.errors import UnreadableFileError
    from tagtorch.evaluation.task import WorkerData

    path = _tagrec_file(tmp_path / "posts.txt", seed=1)
    config = {"_target_": "tagtorch.data.loaders.tagrec.load_tagrec", "path": str(path)}
    read = WorkerData(config, None, None, instantiate(config).fingerprint())
    assert read.load().fingerprint() == read.fingerprint
    _tagrec_file(path, seed=2)
    with pytest.raises(UnreadableFileError, match=f"^{path}: a cluster worker read other data"):
        read.load()


@pytest.mark.integration
def test_rewriting_the_data_while_dask_workers_start_fails_the_run(tmp_path, monkeypatch):
    """Issue 69: the file rewritten after this process read it and before the workers do
    (the replay's race, made certain): the run stops instead of mixing two files' figures."""
    from tagtorch.errors import UnreadableFileError
    from tagtorch.evaluation.task import SeededTask

    path = _tagrec_file(tmp_path / "posts.txt", seed=1)
    on_cluster = SeededTask._on_cluster

    def rewritten_first(self, *args, **kwargs):
        _tagrec_file(path, seed=2)
        return on_cluster(self, *args, **kwargs)

    monkeypatch.setattr(SeededTask, "_on_cluster", rewritten_first)
    cfg = compose_cfg(tmp_path / "run", ["task=posts", "text=none", "data=tagrec",
                                         f"data.path={path}", "model=[mp_ur,bll_c]",
                                         "task.seeds=[0]", "task.split=random",
                                         "task.backend=dask"])
    with pytest.raises(UnreadableFileError, match=f"^{path}: a cluster worker read other"):
        run_task(cfg)
    assert not (tmp_path / "run" / "results.csv").exists()


def test_every_input_error_crosses_to_the_run_from_a_worker():
    """A worker's error is pickled back: each class must rebuild from its pickle (they took
    several arguments, and unpickling called them with the message alone)."""
    import pickle

    from tagtorch.errors import (
        ConfigError,
        DataCheckError,
        DataFormatError,
        TooLargeError,
        UnreadableFileError,
    )

    for error in [ConfigError("task.ks", [0], "cut-offs >= 1"),
                  DataFormatError("posts.txt", "4 fields", "3", line=7),
                  DataCheckError("bib", "no test query", "set task.split=random"),
                  TooLargeError("EASE", 2.0**40, 2.0**30, "its matrices", "use PITF"),
                  UnreadableFileError("model/manifest.json: altered")]:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error) and str(back) == str(error)
    assert pickle.loads(pickle.dumps(DataFormatError("a", "b", line=3))).line == 3
