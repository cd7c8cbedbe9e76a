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
