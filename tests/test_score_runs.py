"""Scoring any TREC run (``python -m tagtorch.evaluation``): against ranx, and hostile files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tagtorch.evaluation.score_runs import query_values
from tagtorch.evaluation.trec import read_qrels, read_run
from tagtorch.metrics.functional import parse_key

ranx = pytest.importorskip("ranx")

OURS_TO_RANX = {"ndcg@5": "ndcg@5", "ndcg@10": "ndcg@10", "p@5": "precision@5",
                "r@10": "recall@10", "s@5": "hit_rate@5", "map": "map", "mrr": "mrr",
                "map@5": "map@5", "mrr@3": "mrr@3"}


def random_judgements(seed: int = 0) -> tuple[dict, dict, dict]:
    """Graded qrels (some documents never retrieved) and two runs with distinct scores."""
    rng = np.random.default_rng(seed)
    qrels, run_a, run_b = {}, {}, {}
    for q in range(40):
        docs = [f"d{d}" for d in rng.choice(60, size=25, replace=False)]
        grades = rng.choice([0, 0, 1, 2, 3], size=12)
        grades[0] = max(grades[0], 1)  # every query has a relevant document
        qrels[f"q{q}"] = {doc: int(g) for doc, g in zip(docs[:12], grades, strict=True)}
        for run, skip in ((run_a, q % 7 == 3), (run_b, False)):
            if skip:
                continue  # run a lacks some queries: they score 0
            retrieved = rng.choice(docs, size=int(rng.integers(3, 20)), replace=False)
            run[f"q{q}"] = {str(d): float(s) for d, s in zip(retrieved, rng.random(len(retrieved)),
                                                             strict=True)}
    return qrels, run_a, run_b


def ranx_values(qrels: dict, run: dict, metric: str) -> dict[str, float]:
    kept = ranx.Qrels({q: {d: g for d, g in docs.items() if g > 0} for q, docs in qrels.items()})
    scored = ranx.Run({q: dict(docs) for q, docs in run.items()})
    ranx.evaluate(kept, scored, [metric], make_comparable=True, save_results_in_run=True)
    return dict(scored.scores[metric])


def test_per_query_values_equal_ranx():
    qrels, run_a, run_b = random_judgements()
    for run in (run_a, run_b):
        ours = query_values(qrels, run, list(OURS_TO_RANX))
        for metric, name in OURS_TO_RANX.items():
            want = ranx_values(qrels, run, name)
            got = ours[ours.metric == metric].set_index("object")["value"]
            assert set(got.index) == set(qrels)
            for query, value in got.items():
                expected = want.get(query, 0.0)
                if metric == "map@5":  # ours divides by min(5, relevant), ranx by all relevant
                    relevant = sum(g > 0 for g in qrels[query].values())
                    expected *= relevant / min(5, relevant)
                assert value == pytest.approx(expected, abs=1e-9), (metric, query)


def write_trec(path: Path, judgements: dict, run: bool) -> Path:
    with path.open("w") as out:
        for query, docs in judgements.items():
            for rank, (doc, value) in enumerate(sorted(docs.items(), key=lambda kv: -kv[1]), 1):
                out.write(f"{query} Q0 {doc} {rank} {value!r} test\n" if run
                          else f"{query} 0 {doc} {value}\n")
    return path


def test_the_command_reports_and_writes_ranx_equal_values(tmp_path):
    qrels, run_a, run_b = random_judgements(1)
    files = [write_trec(tmp_path / "qrels.trec", qrels, False),
             write_trec(tmp_path / "a.trec", run_a, True),
             write_trec(tmp_path / "b.trec", run_b, True)]
    assert read_qrels(files[0]) == {q: {d: float(g) for d, g in docs.items()}
                                    for q, docs in qrels.items()}
    assert read_run(files[1]) == run_a
    out = tmp_path / "report.md"
    done = subprocess.run([sys.executable, "-m", "tagtorch.evaluation", *map(str, files),
                           "--metrics", "ndcg@10", "map", "--resamples", "500",
                           "--output", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "a.trec" in done.stdout and "b.trec" in done.stdout
    assert "Paired ttest" in done.stdout and "randomization test" in done.stdout
    assert out.read_text() == done.stdout
    values = pd.read_csv(out.with_suffix(".csv"), dtype={"object": str})
    ndcg = values[(values.method == "b.trec") & (values.metric == "ndcg@10")]
    want = ranx_values(qrels, run_b, "ndcg@10")
    for query, value in zip(ndcg.object, ndcg.value, strict=True):
        assert value == pytest.approx(want[query], abs=1e-9)


@pytest.mark.parametrize(("content", "message"), [
    (b"q1 Q0 d1 1 0.5\n", "line 1: expected 6 fields"),
    (b"q1 Q0 d1 1 high run\n", "is not a number"),
    (b"q1 Q0 d1 1 nan run\n", "not a finite number"),
    (b"q1 Q0 d1 1 0.5 run\nq1 Q0 d1 2 0.4 run\n", "twice for query"),
    (b"q1 Q0 \xff\xfe 1 0.5 run\n", "not UTF-8"),
], ids=["fields", "word", "nan", "duplicate", "binary"])
def test_bad_run_files_are_errors_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad.trec"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as error:
        read_run(path)
    assert "bad.trec" in str(error.value)
    done = subprocess.run([sys.executable, "-m", "tagtorch.evaluation", str(path), str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "bad.trec" in done.stderr


def test_files_above_the_size_limit_are_refused_before_reading(tmp_path):
    path = tmp_path / "big.trec"
    path.write_text("q1 0 d1 1\n" * 100)
    with pytest.raises(ValueError, match="more than the 100 allowed"):
        read_qrels(path, max_bytes=100)


def test_metric_names_are_one_grammar_for_every_task():
    assert parse_key("p@5") == ("p", 5) and parse_key("mrr@3") == ("mrr", 3)
    assert parse_key("tagrec_f1@5") == ("tagrec_f1", 5)  # TagRec's: a name of its own
    for bad in ("ndcg", "p@0", "precision@5", "map@x", "tagrec_mrr", "f1@5", "rr@10"):
        with pytest.raises(ValueError, match="unknown metric"):
            parse_key(bad)
    with pytest.raises(ValueError, match="task=posts"):
        query_values({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["tagrec_mrr@5"])


def test_the_report_is_never_written_through_a_link(tmp_path):
    """Issue 52 (probe): ``--output`` at a planted link replaced the link's target."""
    qrels, run_a, _ = random_judgements(2)
    files = [write_trec(tmp_path / "qrels.trec", qrels, False),
             write_trec(tmp_path / "a.trec", run_a, True)]
    victim = tmp_path / "victim.md"
    victim.write_text("keep")
    out = tmp_path / "report.md"
    out.symlink_to(victim)
    done = subprocess.run([sys.executable, "-m", "tagtorch.evaluation", *map(str, files),
                           "--metrics", "ndcg@10", "--output", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert victim.read_text() == "keep" and not out.is_symlink()
    assert out.read_text() == done.stdout
