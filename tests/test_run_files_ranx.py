"""Every task's TREC files, re-scored by ranx, give the values the task reported.

Each task runs end to end on small synthetic data with models whose scores tie often (the
co-occurrence Sum of tag recommendation, item popularity, SMatch's tag counts), so the run files
must hold exactly the rankings the metrics scored, and rank-based scores that no TREC tool
re-orders. ranx reads ``qrels.trec`` and each ``run*.trec`` and scores them; its per-query values
must equal ``per_object.csv.gz`` (joined on the query ids) and its means ``results.csv``, for
the metrics whose definitions agree: NDCG@k, P@k, R@k, S@k (ranx's hit rate), MRR@k, and, where
the files hold whole rankings, MRR and MAP (ranx's MAP@k divides by every relevant document,
ours by at most k, so MAP@k is not compared).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import ranx
from omegaconf import OmegaConf
from test_itemrec import toy_folksonomy
from test_train import compose_cfg

from tagtorch.evaluation.item_recommendation import ItemRecommendationTask
from tagtorch.evaluation.trec import run_file_names
from tagtorch.train import run_task

pytestmark = pytest.mark.filterwarnings("ignore:unsafe cast from uint64")  # inside ranx's MAP

_RANX = {"ndcg": "ndcg", "p": "precision", "r": "recall", "s": "hit_rate", "mrr": "mrr"}


def ranx_metric(ours: str, whole: bool) -> str | None:
    """ranx's name of one of our metrics, or None where the two definitions differ.

    Args:
        ours: our metric key (``ndcg@5``, ``p@5``, ``mrr``, ``mrr@10``, ``map``, ...).
        whole: whether the run files hold every ranked document (else a cut-off ranking).
    """
    match = re.fullmatch(r"(ndcg|p|r|s|mrr)@(\d+)", ours)
    if match:
        return f"{_RANX[match.group(1)]}@{match.group(2)}"
    return ours if ours in ("mrr", "map") and whole else None


def check_against_ranx(folder: Path, fold: int, whole: bool) -> int:
    """Compares every method's run file of ``fold`` with ranx; returns the values compared."""
    results = pd.read_csv(folder / "results.csv")
    per_object = pd.read_csv(folder / "per_object.csv.gz", dtype={"object": str})
    methods = list(dict.fromkeys(results["method"]))
    qrels = ranx.Qrels.from_file(str(folder / "qrels.trec"), kind="trec")
    compared = 0
    for method, file in run_file_names(methods).items():
        ours = per_object[(per_object["method"] == method) & (per_object["fold"] == fold)].pivot(
            index="object", columns="metric", values="value")
        run = ranx.Run.from_file(str(folder / file), kind="trec")
        assert set(ours.index) <= set(run.keys()), f"{method}: per_object ids not in {file}"
        assert set(qrels.keys()) <= set(ours.index)
        assert ours.drop(index=list(qrels.keys())).isna().all().all()  # no gold: no value
        pairs = {m: name for m in ours.columns if (name := ranx_metric(m, whole)) is not None}
        assert pairs, "no metric to compare"
        means = ranx.evaluate(qrels, run, list(pairs.values()), make_comparable=True)
        reported = results[(results["method"] == method) & (results["fold"] == fold)]
        reported = reported.set_index("metric")["value"]
        for mine, name in pairs.items():
            theirs = pd.Series(run.scores[name])
            np.testing.assert_allclose(ours.loc[theirs.index, mine], theirs, rtol=0, atol=1e-6,
                                       err_msg=f"{method} {mine} per query")
            assert reported[mine] == pytest.approx(means[name], abs=1e-6), (method, mine)
            compared += len(theirs)
    return compared


@pytest.mark.integration  # an end-to-end run (the default run keeps its 8 minutes)
def test_tag_recommendation_run_files_rescore_with_ranx(tmp_path):
    cfg = compose_cfg(tmp_path, ["data.n_objects=400", "task.folds=[0]",
                                 "model=[sum,latre_wts]", "task.cache=false",
                                 "task.online_objects=0", "text=none"])
    run_task(cfg)
    assert check_against_ranx(tmp_path, fold=0, whole=True) > 0


@pytest.mark.parametrize("query", ["user_tag", "user"])
def test_item_recommendation_run_files_rescore_with_ranx(tmp_path, query):
    models = {"most_popular": {"_target_": "tagtorch.itemrec.baselines.TagPopularity"},
              "popularity": {"_target_": "tagtorch.itemrec.baselines.GlobalPopularity"},
              "two_dimensional": {"_target_": "tagtorch.itemrec.baselines.TwoDimensional"}}
    task = ItemRecommendationTask(seeds=[4, 5], p=1, query=query, ks=(1, 3, 10),
                                  metrics=("ndcg", "precision", "recall", "mrr", "map"),
                                  trec_depth=1000)  # every item: MRR and MAP compare too
    task.run(toy_folksonomy(), OmegaConf.create({"model": models}), tmp_path)
    run = pd.read_csv(tmp_path / "run.most_popular.trec", sep=" ", header=None)
    assert run[0].str.fullmatch(r"u\d+t\d+" if query == "user_tag" else r"u\d+").all()
    assert check_against_ranx(tmp_path, fold=4, whole=True) > 0


def test_resource_ranking_run_files_rescore_with_ranx(tmp_path):
    cfg = compose_cfg(tmp_path, ["+experiment=lda_synthetic", "model=[smatch,bm25]",
                                 "~model.lda_resources", "~model.lda_lm",
                                 "task.seeds=[3]", "data.n_objects=800", "task.trec_depth=20",
                                 "task.metrics=[success,mrr@10,ndcg,precision,recall]"])
    run_task(cfg)
    assert check_against_ranx(tmp_path, fold=3, whole=False) > 0
