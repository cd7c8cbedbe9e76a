"""Scoring any TREC run (``python -m tagtorch.evaluation``): against ranx, and hostile files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tagtorch.evaluation.score_runs import main, query_values
from tagtorch.evaluation.trec import read_qrels, read_run
from tagtorch.metrics.functional import MAX_CUTOFF, parse_key

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


def test_the_report_is_never_written_through_a_link(tmp_path, capsys):
    """Issue 52 (probe): ``--output`` at a planted link replaced the link's target.

    Issue 69: the link is an existing file, refused without ``--overwrite``; with it, the link
    itself is replaced.
    """
    qrels, run_a, _ = random_judgements(2)
    files = [write_trec(tmp_path / "qrels.trec", qrels, False),
             write_trec(tmp_path / "a.trec", run_a, True)]
    victim = tmp_path / "victim.md"
    victim.write_text("keep")
    out = tmp_path / "report.md"
    out.symlink_to(victim)
    args = [*map(str, files), "--metrics", "ndcg@10", "--output", str(out)]
    assert one_line_refusal(capsys, args) == (f"error: --output {out}: {out} exists; expected a "
                                              "new file name, or --overwrite to replace it")
    assert victim.read_text() == "keep" and out.is_symlink()
    main([*args, "--overwrite"])
    printed = capsys.readouterr().out
    assert victim.read_text() == "keep" and not out.is_symlink()
    assert out.read_text() == printed


def one_line_refusal(capsys, args: list[str]) -> str:
    """The command run in-process on ``args``: exit status 2, nothing printed, one error line."""
    with pytest.raises(SystemExit) as done:
        main(args)
    captured = capsys.readouterr()
    assert done.value.code == 2 and captured.out == ""
    assert captured.err.endswith("\n") and captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err
    return captured.err.rstrip("\n")


RANX_AT_HUGE_K = {"ndcg@1000000000": "ndcg@1000000000", "p@1000000000": "precision@1000000000",
                  "r@1000000000": "recall", "s@1000000000": "hit_rate", "mrr@1000000000": "mrr",
                  "map@1000000000": "map"}


def test_a_cut_off_beyond_every_list_scores_the_whole_lists_at_their_cost():
    """Issue 69: ``ndcg@1000000000`` allocated 8 GB (the ideal ranking padded to K places).

    A cut-off beyond every list scores each list whole (ranx at the same K, or without one),
    and NDCG equals its value at the widest list, exactly: the work stops at the lists.
    """
    qrels, _, run = random_judgements(3)
    ours = query_values(qrels, run, list(RANX_AT_HUGE_K))
    for metric, name in RANX_AT_HUGE_K.items():
        want = ranx_values(qrels, run, name)
        got = ours[ours.metric == metric].set_index("object")["value"]
        for query, value in got.items():
            assert value == pytest.approx(want.get(query, 0.0), abs=1e-12), (metric, query)
    widest = max(len(docs) for docs in [*qrels.values(), *run.values()])
    at_width = query_values(qrels, run, [f"ndcg@{widest}"], max_cells=1 << 30)
    at_huge = query_values(qrels, run, [f"ndcg@{MAX_CUTOFF}"], max_cells=1 << 30)
    assert at_huge.value.tolist() == at_width.value.tolist()


@pytest.mark.parametrize(("option", "message"), [
    (["--metrics", "ndcg@123456789012345678901234567890"],
     "error: --metrics: metric 'ndcg@123456789012345678901234567890': expected a cut-off K "
     "from 1 to 1000000000, got 123456789012345678901234567890"),
    (["--metrics", "p@1000000001"], "expected a cut-off K from 1 to 1000000000"),
    (["--metrics", "ndcg@" + "9" * 5000], "expected a cut-off K from 1 to 1000000000"),
    (["--metrics", "tagrec_mrr@5"], "scored by task=posts"),
    (["--resamples", "1000000000000"],
     "error: --resamples must be an integer from 1 to 1000000, got 1000000000000"),
    (["--resamples", "1e12"], "error: argument --resamples: invalid int value: '1e12'"),
    (["--resamples", "0"], "--resamples must be an integer from 1 to 1000000, got 0"),
    (["--confidence", "nan"], "error: --confidence must be a number in (0, 1), e.g. 0.95, got nan"),
    (["--confidence", "1"], "--confidence must be a number in (0, 1)"),
    (["--test", "sign"], "argument --test: invalid choice: 'sign'"),
], ids=["30-digits", "above-max", "5000-digits", "tagrec", "resamples-huge", "resamples-float",
        "resamples-zero", "confidence-nan", "confidence-1", "test"])
def test_bad_options_are_one_line_before_reading_any_file(tmp_path, capsys, option, message):
    """The files do not exist: an option is refused before any of them is read."""
    missing = [str(tmp_path / "no_qrels.trec"), str(tmp_path / "no_run.trec")]
    assert message in one_line_refusal(capsys, [*missing, *option])


def test_an_output_that_is_a_folder_or_exists_is_refused_before_any_work(tmp_path, capsys):
    """Issue 69: ``--output`` at a folder failed with a traceback after the report was printed,
    and an existing report was overwritten without a word."""
    qrels, run_a, _ = random_judgements(4)
    files = [str(write_trec(tmp_path / "qrels.trec", qrels, False)),
             str(write_trec(tmp_path / "a.trec", run_a, True))]
    folder = tmp_path / "reports"
    folder.mkdir()
    assert one_line_refusal(capsys, [*files, "--output", str(folder)]) == (
        f"error: --output {folder}: a folder; expected a file name for the report (its "
        "per-query values go to FILE with .csv)")
    (tmp_path / "values.csv").mkdir()
    assert one_line_refusal(capsys, [*files, "--output", str(tmp_path / "values.md"),
                                     "--overwrite"]).endswith("values.csv is a folder; "
                                                              "expected a file there or none")
    assert one_line_refusal(capsys, [*files, "--output", f"{files[0]}/deeper/report.md"]) == (
        f"error: --output {files[0]}/deeper/report.md: {files[0]} is not a folder; expected a "
        "file name in a folder")
    assert one_line_refusal(capsys, [*files, "--output", str(tmp_path / "report.csv")]) == (
        f"error: --output {tmp_path / 'report.csv'}: expected a report file not named .csv "
        "(its per-query values go to FILE with .csv)")
    report = tmp_path / "report.md"
    main([*files, "--metrics", "ndcg@10", "--output", str(report)])
    first = capsys.readouterr().out
    assert report.read_text() == first and report.with_suffix(".csv").is_file()
    assert one_line_refusal(capsys, [*files, "--metrics", "map", "--output", str(report)]) == (
        f"error: --output {report}: {report} exists; expected a new file name, or --overwrite "
        "to replace it")
    assert report.read_text() == first  # kept
    main([*files, "--metrics", "map", "--output", str(report), "--overwrite"])
    assert report.read_text() == capsys.readouterr().out != first
    assert sorted(p.name for p in tmp_path.iterdir()) == [  # no temporary file left
        "a.trec", "qrels.trec", "report.csv", "report.md", "reports", "values.csv"]
