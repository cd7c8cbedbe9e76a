"""``benchmarks/ablation_extended.py``: its full variant against the train command's own run,
its variants against hand-made expectations, and its folder recordable as a run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tagtorch.candidates.latre import FEATURE_NAMES
from tagtorch.evaluation.provenance import headline_record

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["data=synthetic", "data.n_objects=300", "task.folds=[1]", "task.cache=false",
         "model.lambdamart.n_iterations=30"]


def results(folder: Path) -> pd.Series:
    frame = pd.read_csv(folder / "results.csv")
    return frame.set_index(["method", "metric"])["value"]


@pytest.mark.integration
def test_the_full_variant_is_the_experiments_run_and_each_variant_removes_its_part(tmp_path):
    ablation, train = tmp_path / "ablation", tmp_path / "train"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ablation_extended.py"),
                           "--out", str(ablation), *SMALL],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Best first by ndcg@5" in done.stdout
    done = subprocess.run([sys.executable, "-m", "tagtorch.train", "+experiment=extended_lastfm",
                           "search_method=lambdamart_extended", "logger=none",
                           f"hydra.run.dir={train}", *SMALL],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    got, want = results(ablation), results(train)
    for metric in ("ndcg@5", "map", "candidate_recall"):  # the same tuned set, ranker and T
        assert got["full", metric] == pytest.approx(want["lambdamart_extended", metric],
                                                    rel=1e-6), metric
    methods = set(got.index.get_level_values("method"))
    assert {"full", "no_table1_features", "no_features_of_ours", "no_rule_consequents",
            "no_text_terms", "no_tag_neighbours", "no_tag_embeddings"} <= methods
    assert not methods & {"no_listener_neighbours", "no_lda_topics"}  # not in this set
    # leaving features out keeps the candidates; removing a source changes them
    assert got["no_features_of_ours", "candidate_recall"] == got["full", "candidate_recall"]
    assert got["no_text_terms", "candidate_recall"] < got["full", "candidate_recall"]
    report = (ablation / "report.md").read_text()
    assert f"no_features_of_ours {len(FEATURE_NAMES)}," in report  # Table I's 13 are left
    record = headline_record(ablation)
    assert record["command"].startswith("python benchmarks/ablation_extended.py --out ")
    assert record["folds"] == [1] and len(record["per_fold"]) == 2 + len(methods)
