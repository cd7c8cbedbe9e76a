"""LETOR / SVMlight files: our writer against a plain parser, exact round trips, hostile files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.candidates.letor import (
    letor_lists,
    read_letor,
    synthetic_letor_parts,
    write_letor,
    write_synthetic_letor,
)


def random_lists(seed: int = 0) -> CandidateSet:
    """Lists of 1-6 candidates, float32 features with zeros, graded labels 0-4."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 7, size=9)
    rows = np.repeat(np.arange(9), lengths)
    features = rng.random((len(rows), 5)).astype(np.float32)
    features[rng.random(features.shape) < 0.3] = 0.0
    labels = rng.integers(0, 5, size=len(rows)).astype(np.float32)
    relevant = np.bincount(rows, weights=labels > 0, minlength=9).astype(np.int64)
    return CandidateSet.from_flat(
        torch.from_numpy(rng.choice(1000, 9, replace=False)), torch.from_numpy(rows),
        torch.arange(len(rows)), torch.from_numpy(features), torch.from_numpy(labels),
        torch.from_numpy(relevant), ("ts", "tf", "wts", "wtf", "sum"))


def plain_parse(text: str) -> list[tuple[float, int, dict[int, float]]]:
    """``(label, qid, {feature: value})`` per line, comments skipped: the format by hand."""
    out = []
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        label, qid, *pairs = line.split()
        values = {int(k): float(np.float32(v)) for k, v in (p.split(":") for p in pairs)}
        out.append((float(label), int(qid.removeprefix("qid:")), values))
    return out


def test_written_lines_are_the_real_candidates_in_list_order(tmp_path):
    lists = random_lists()
    lines = plain_parse(write_letor(lists, tmp_path / "l.txt").read_text())
    expected = []
    for b in range(len(lists)):
        for slot in range(int(lists.mask[b].sum())):
            features = {j + 1: float(np.float32(v))
                        for j, v in enumerate(lists.features[b, slot].tolist()) if v != 0}
            expected.append((float(lists.labels[b, slot]), int(lists.objects[b]), features))
    assert lines == expected


def test_a_file_round_trips_exactly(tmp_path):
    lists = random_lists(1)
    back = read_letor(write_letor(lists, tmp_path / "l.txt"))
    assert back.feature_names == lists.feature_names
    for name in ("objects", "features", "labels", "mask", "n_relevant"):
        assert torch.equal(getattr(back, name), getattr(lists, name)), name
    again = read_letor(write_letor(back, tmp_path / "again.txt"))
    assert (tmp_path / "again.txt").read_text() == (tmp_path / "l.txt").read_text()
    assert torch.equal(again.features, back.features)


def test_a_benchmark_file_without_header_gets_numbered_features(tmp_path):
    path = tmp_path / "mslr.txt"
    path.write_text("2 qid:10 1:0.5 3:1.5\n0 qid:10 2:1\n1 qid:11 1:2 # doc\n")
    lists = read_letor(path)
    assert lists.feature_names == ("f1", "f2", "f3")
    assert lists.objects.tolist() == [10, 11]
    assert lists.labels.tolist() == [[2.0, 0.0], [1.0, 0.0]]
    assert lists.features[0].tolist() == [[0.5, 0.0, 1.5], [0.0, 1.0, 0.0]]


@pytest.mark.parametrize(("content", "message"), [
    ("1 qid:1 1:1\n0 qid:2 1:1\n1 qid:1 1:2\n", "contiguous"),
    ("-1 qid:1 1:1\n", "line 1: the label -1.0 is not a finite number >= 0"),
    ("1 qid:1 1:1\n1e308 qid:1 1:1\n", "line 2: the label 1e\\+308 is not a finite"),  # inf as f32
    ("1 qid:1 1:1\nnan qid:1 1:1\n", "line 2: the label nan"),
    ("1 qid:1 1:1\n0 qid:1 1:nan\n", "line 2: a feature value is not a finite"),
    ("1 qid:1 1:inf\n", "line 1: a feature value"),
    ("1 qid:1 1:1e308\n", "line 1: a feature value"),
    ("1 qid:1 5000:1\n", "5000 features"),
    ("", "no data line"),
    ("1 qid:99999999999999999999999 1:1\n", "beyond 64 bits"),
    ("1 qid:1 x:y\n", "not a LETOR"),
], ids=["scattered-query", "negative-label", "huge-label", "nan-label", "nan-feature",
        "inf-feature", "huge-feature", "too-many-features", "empty", "huge-qid", "garbage"])
def test_bad_files_are_errors_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as error:
        read_letor(path)
    assert "bad.txt" in str(error.value)


def test_files_above_the_size_limit_are_refused(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("1 qid:1 1:1\n" * 50)
    with pytest.raises(ValueError, match="more than the 100 allowed"):
        read_letor(path, max_bytes=100)


@pytest.mark.integration
def test_the_export_command_writes_the_folds_candidate_sets(tmp_path):
    import subprocess
    import sys

    from hydra.utils import instantiate

    from tagtorch.api import compose, load

    done = subprocess.run([sys.executable, "-m", "tagtorch.export", "letor", "synthetic",
                           str(tmp_path), "--option", "n_objects=200", "--fold", "1"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    train = read_letor(tmp_path / "synthetic_fold1_train.txt")
    test = read_letor(tmp_path / "synthetic_fold1_test.txt")
    cfg = compose(["task=tagrec"])
    val, expected_test, _ = instantiate(cfg.task).fold_candidates(
        load("synthetic", n_objects=200), instantiate(cfg.candidates), 1)
    for got, want in ((train, val), (test, expected_test)):
        assert got.feature_names == want.feature_names and len(got.feature_names) == 13
        kept = want.mask.any(1)  # an object without a candidate writes no line
        assert torch.equal(got.objects, want.objects[kept])
        width = got.features.shape[1]
        assert torch.equal(got.features, want.features[kept][:, :width])
        assert torch.equal(got.labels, want.labels[kept][:, :width])
    bad = subprocess.run([sys.executable, "-m", "tagtorch.export", "letor", "synthetic",
                          str(tmp_path), "--option", "n_objects=200", "--fold", "9"],
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "fold must be in" in bad.stderr


@pytest.mark.integration  # an end-to-end run (the default run keeps its 8 minutes)
def test_task_letor_runs_the_report_and_writes_files_ranx_rescores(tmp_path):
    ranx = pytest.importorskip("ranx")
    import pandas as pd

    from tagtorch.api import compose
    from tagtorch.train import run_task

    write_synthetic_letor(tmp_path / "Fold1", queries=40, mean_documents=10)
    out = tmp_path / "run"
    cfg = compose(["task=letor", "data=letor", f"data.path={tmp_path / 'Fold1'}",
                   "model=[lambdamart,ranksvm]", "logger=none"], output_dir=out)
    result = run_task(cfg)
    assert set(result.results["method"]) == {"lambdamart", "ranksvm"}
    assert "Paired ttest" in result.report
    qrels = ranx.Qrels.from_file(str(out / "qrels.trec"), kind="trec")
    grades = {int(v) for docs in qrels.to_dict().values() for v in docs.values()}
    assert grades <= {1, 2, 3, 4} and len(grades) > 1  # graded, as the file's labels
    means = result.results.pivot_table(index="method", columns="metric", values="value")
    for method in ("lambdamart", "ranksvm"):
        run = ranx.Run.from_file(str(out / f"run.{method}.trec"), kind="trec")
        score = ranx.evaluate(qrels, run, "ndcg@5", make_comparable=True)
        assert score == pytest.approx(means.loc[method, "ndcg@5"], abs=1e-6)
    assert pd.read_csv(out / "results.csv").shape[0] == len(result.results)


def test_the_synthetic_dataset_has_the_mslr_layout(tmp_path):
    folder = write_synthetic_letor(tmp_path / "d", queries=20, mean_documents=30, seed=3)
    parts = {name: read_letor(folder / f"{name}.txt") for name in ("train", "vali", "test")}
    assert [len(p) for p in parts.values()] == [20, 5, 10]
    assert all(p.features.shape[-1] == 136 for p in parts.values())
    grades = torch.cat([p.labels[p.mask] for p in parts.values()])
    assert set(grades.unique().tolist()) == {0.0, 1.0, 2.0, 3.0, 4.0}
    assert (grades == 0).float().mean() > 0.4  # skewed towards 0, as MSLR's
    ids = [set(p.objects.tolist()) for p in parts.values()]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])


FIXTURE = __import__("pathlib").Path(__file__).resolve().parent / "fixtures" / "lightgbm_lambdarank"


def test_lightgbms_example_reads_with_its_query_files():
    """LightGBM's own example data: lines without qid, queries from the .query files."""
    data = __import__("tagtorch.candidates.letor", fromlist=["load_letor"]).load_letor(
        FIXTURE, train="rank.train", test="rank.test", vali=None)
    sizes = np.loadtxt(FIXTURE / "rank.train.query", dtype=np.int64)
    assert len(data.train) == len(sizes) == 201 and len(data.test) == 50
    assert data.train.mask.sum(1).tolist() == sizes.tolist()
    assert int(data.train.mask.sum()) == 3005 and int(data.test.mask.sum()) == 768
    first = (FIXTURE / "rank.train").read_text().splitlines()[0].split()
    assert float(data.train.labels[0, 0]) == float(first[0])
    for pair in first[1:4]:
        column, value = pair.split(":")
        assert float(data.train.features[0, 0, int(column) - 1]) == pytest.approx(float(value))


def test_a_query_file_that_does_not_add_up_is_an_error(tmp_path):
    (tmp_path / "d.txt").write_text("1 1:1\n0 1:2\n")
    (tmp_path / "d.txt.query").write_text("3\n")
    with pytest.raises(ValueError, match="sum to the 2"):
        read_letor(tmp_path / "d.txt")


def test_the_synthetic_generator_takes_fewer_than_ten_features(tmp_path):
    """Issue 52: ``features < 10`` crashed in the interaction term; now all features interact."""
    folder = write_synthetic_letor(tmp_path / "small", queries=8, features=3, mean_documents=5)
    train = read_letor(folder / "train.txt")
    assert train.features.shape[-1] == 3 and len(train.objects) == 8
    with pytest.raises(ValueError, match="must be >= 1"):
        write_synthetic_letor(tmp_path / "none", features=0)


@pytest.mark.parametrize(("setting", "value"), [
    ("max_features", float("nan")), ("max_features", 0), ("max_padding", float("nan")),
    ("max_padding", -1.0), ("max_list_length", 0), ("max_bytes", True)])
def test_a_readers_limit_that_is_not_a_number_of_its_kind_is_refused(tmp_path, setting, value):
    """Issue 52 (probe): ``data.max_features=nan`` meant no limit at all."""
    path = tmp_path / "train.txt"
    path.write_text("1 qid:1 1:0.5\n0 qid:1 1:0.1\n")
    with pytest.raises(ValueError, match=f"{setting} must be"):
        read_letor(path, **{setting: value})


def test_rows_in_memory_pad_into_lists_by_hand():
    queries = np.array([5, 5, 9, 7, 7, 7])
    labels = np.array([1, 0, 2, 0, 0, 3])
    features = np.arange(12, dtype=np.float32).reshape(6, 2)
    lists = letor_lists(queries, labels, features)
    assert lists.objects.tolist() == [5, 9, 7]
    assert lists.mask.tolist() == [[True, True, False], [True, False, False], [True] * 3]
    assert lists.labels[lists.mask].tolist() == [1, 0, 2, 0, 0, 3]
    assert lists.features[2, 2].tolist() == [10.0, 11.0]
    assert lists.features[1, 1:].abs().sum() == 0  # padding
    assert lists.n_relevant.tolist() == [1, 1, 1]
    assert tuple(lists.feature_names) == ("1", "2")
    with pytest.raises(ValueError, match="contiguous"):
        letor_lists(np.array([5, 9, 5]), labels[:3], features[:3])
    with pytest.raises(ValueError, match="one row each"):
        letor_lists(queries, labels[:2], features)


def test_the_generators_rows_are_what_its_files_hold(tmp_path):
    write_synthetic_letor(tmp_path, queries=6, features=4, mean_documents=5, seed=2)
    for part, qids, grades, x in synthetic_letor_parts(6, 4, 5, seed=2):
        read = read_letor(tmp_path / f"{part}.txt")
        held = letor_lists(qids, grades, x)
        assert torch.equal(read.objects, held.objects)
        assert torch.equal(read.mask, held.mask)
        assert torch.equal(read.features, held.features)
        assert torch.equal(read.labels, held.labels)


@pytest.mark.integration  # a command-line run (the default run keeps its 8 minutes)
def test_the_readmes_letor_command_runs_as_written_with_lambdamart_by_default(tmp_path):
    """Issue 72: ``python -m tagtorch.train task=letor data=letor data.path=FOLDER`` failed
    (the default model, LATRE+wTS, needs LATRE's features); ``task=letor`` now picks λ-MART,
    and its report ranks by the NDCG it optimizes (it named ndcg@5 and ranked by ndcg@10)."""
    import subprocess
    import sys

    import pandas as pd

    folder = write_synthetic_letor(tmp_path / "Fold1", queries=30, features=12,
                                   mean_documents=8)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    command = "python -m tagtorch.train task=letor data=letor data.path=FOLDER"
    assert f"`{command}`" in readme
    words = command.replace("FOLDER", str(folder)).split()[3:]
    done = subprocess.run([sys.executable, "-m", "tagtorch.train", *words, "logger=none",
                           f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    results = pd.read_csv(tmp_path / "run" / "results.csv")
    assert set(results["method"]) == {"lambdamart"}
    # the report ranks by the metric the run optimizes, and the run's last line names it
    assert "Best first by ndcg@5" in (tmp_path / "run" / "report.md").read_text()
    assert "optimized_metric ndcg@5:" in (done.stdout + done.stderr)
