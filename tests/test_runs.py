"""Merging evaluation runs: the merged report equals statistics computed directly."""

import re

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from tagtorch.evaluation.report import headline_section
from tagtorch.evaluation.runs import main, merge_runs, write_run

DEFAULT_CONFIG = {"data": {"name": "synthetic"}, "seed": 0}


def fake_run(folder, methods, folds, seed, config=DEFAULT_CONFIG):
    """A run folder as the protocol writes it: results, per-object values, TREC files."""
    rng = np.random.default_rng(seed)
    rows, per_object = [], []
    for method in methods:
        for fold in folds:
            values = rng.random(20)
            per_object += [{"method": method, "fold": fold, "object": fold * 100 + i,
                            "metric": "ndcg@5", "value": v} for i, v in enumerate(values)]
            rows += [{"method": method, "fold": fold, "metric": "ndcg@5", "value": values.mean()},
                     {"method": method, "fold": fold, "metric": "fit_seconds", "value": 1.0}]
    write_run(folder, pd.DataFrame(rows), pd.DataFrame(per_object), title="Tag recommendation")
    qrels = "".join(f"{fold * 100 + i} 0 7 1\n" for fold in folds for i in range(20))
    (folder / "qrels.trec").write_text(qrels)
    for method in methods:  # one method alone writes run.trec, as the protocol does
        name = "run.trec" if len(methods) == 1 else f"run.{method}.trec"
        (folder / name).write_text(
            "".join(f"{fold * 100} Q0 7 1 1 {method}\n" for fold in folds))
    if config is not None:
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return pd.DataFrame(per_object)


def test_merge_of_folds_and_methods_matches_direct_statistics(tmp_path):
    config = {"data": {"name": "x"}, "task": {"n_folds": 5, "n_jobs": 1}}
    a = fake_run(tmp_path / "a", ["base", "gp"], [0, 1, 2], seed=0, config=config)
    b = fake_run(tmp_path / "b", ["base"], [3, 4], seed=1,
                 config={**config, "task": {"n_folds": 5, "n_jobs": 2}})
    report = merge_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "m")
    out = tmp_path / "m"
    assert report == (out / "report.md").read_text()
    assert report.startswith("# Tag recommendation (merged from 2 runs)")
    results = pd.read_csv(out / "results.csv")
    assert sorted(results.query("method == 'base'")["fold"].unique()) == [0, 1, 2, 3, 4]
    assert sorted(results.query("method == 'gp'")["fold"].unique()) == [0, 1, 2]
    # base over 5 folds: the mean of fold means and its t interval, computed here
    base = pd.concat([a, b]).query("method == 'base'").groupby("fold")["value"].mean()
    half = stats.t.ppf(0.975, 4) * base.std(ddof=1) / np.sqrt(5)
    assert f"| base | {base.mean():.4f} ± {half:.4f} |" in report
    # the paired test pairs gp and base on the folds both have
    both = pd.concat([a, b]).query("fold < 3").pivot_table(index="object", columns="method",
                                                           values="value")
    p = stats.ttest_rel(both["base"], both["gp"]).pvalue
    assert f"{p:.2e}" in report
    assert (out / "ndcg@5.png").read_bytes()[:4] == b"\x89PNG"
    # TREC: run lines of every fold, qrels of every query once
    assert len((out / "run.base.trec").read_text().splitlines()) == 5
    assert len((out / "run.gp.trec").read_text().splitlines()) == 3
    assert len((out / "qrels.trec").read_text().splitlines()) == 100


def test_merge_refuses_overlaps_and_different_settings(tmp_path):
    fake_run(tmp_path / "a", ["base"], [0, 1], seed=0, config={"data": {"name": "lastfm"}})
    fake_run(tmp_path / "b", ["base"], [1, 2], seed=1, config={"data": {"name": "lastfm"}})
    fake_run(tmp_path / "c", ["base"], [3], seed=2, config={"data": {"name": "movielens"}})
    with pytest.raises(ValueError, match="'base' on fold 1 is in both"):
        merge_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "m")
    with pytest.raises(ValueError, match="differ in 'data'"):
        merge_runs([tmp_path / "a", tmp_path / "c"], tmp_path / "m")
    with pytest.raises(ValueError, match="one of the runs"):
        merge_runs([tmp_path / "a", tmp_path / "c"], tmp_path / "a")
    (tmp_path / "nothing").mkdir()
    (tmp_path / "nothing" / "config.yaml").write_text("data: {name: lastfm}\n")
    with pytest.raises(FileNotFoundError, match=r"results\.csv is missing"):
        merge_runs([tmp_path / "a", tmp_path / "nothing"], tmp_path / "m")
    with pytest.raises(ValueError, match="no run"):
        merge_runs([], tmp_path / "m")


def test_command_line(tmp_path, capsys):
    fake_run(tmp_path / "a", ["base"], [0], seed=0)
    fake_run(tmp_path / "b", ["base"], [1], seed=1)
    main([str(tmp_path / "m"), str(tmp_path / "a"), str(tmp_path / "b"), "--title", "Both"])
    assert capsys.readouterr().out.startswith("# Both")
    assert len((tmp_path / "m" / "run.trec").read_text().splitlines()) == 2
    assert (tmp_path / "m" / "results.csv").is_file()


def test_merge_keeps_the_requested_methods_in_their_order(tmp_path):
    fake_run(tmp_path / "a", ["base", "rf"], [0, 1], seed=0)
    fake_run(tmp_path / "b", ["rf", "neural"], [2], seed=1)  # rf of b: the requested overlap
    fake_run(tmp_path / "c", ["base", "neural"], [2], seed=2)
    report = merge_runs([tmp_path / "a", tmp_path / "c"], tmp_path / "m",
                        methods=["neural", "base"])
    tables = report.replace(headline_section(report), "")  # the summary, in the run's order
    rows = [line.split(" | ")[0] for line in tables.splitlines() if line.startswith("| ")]
    assert rows[1:3] == ["| neural", "| base"]  # after the header; rf left out
    results = pd.read_csv(tmp_path / "m" / "results.csv")
    assert list(dict.fromkeys(results["method"])) == ["neural", "base"]
    assert not (tmp_path / "m" / "run.rf.trec").exists()
    assert len((tmp_path / "m" / "run.neural.trec").read_text().splitlines()) == 1
    # rf is in a and b on different folds, base only in a: no overlap once rf is dropped
    merge_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "n", methods=["base", "neural"])
    fake_run(tmp_path / "g", ["gp"], [2], seed=3)  # a lone method writes run.trec
    merge_runs([tmp_path / "a", tmp_path / "g"], tmp_path / "p")
    assert len((tmp_path / "p" / "run.gp.trec").read_text().splitlines()) == 1
    with pytest.raises(ValueError, match=r"no run has the methods \['mart'\]"):
        merge_runs([tmp_path / "a"], tmp_path / "o", methods=["base", "mart"])


def snapshot(folder):
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_an_existing_run_given_as_output_is_refused_and_left_intact(tmp_path, capsys):
    """``runs A B`` once took A as the output and replaced its results with B's."""
    fake_run(tmp_path / "a", ["base"], [0], seed=0)
    fake_run(tmp_path / "b", ["base"], [1], seed=1)
    before = snapshot(tmp_path / "a")
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path / "a"), str(tmp_path / "b")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert f"the merged folder {tmp_path / 'a'} exists and is not empty" in error
    assert "Traceback" not in error
    assert snapshot(tmp_path / "a") == before


@pytest.mark.parametrize("where", ["inside", "holds", "symlink", "file"])
def test_outputs_that_overlap_a_run_are_refused(tmp_path, where):
    fake_run(tmp_path / "runs" / "a", ["base"], [0], seed=0)
    fake_run(tmp_path / "b", ["base"], [1], seed=1)
    runs = [tmp_path / "runs" / "a", tmp_path / "b"]
    before = [snapshot(run) for run in runs]
    if where == "inside":
        out, message = tmp_path / "runs" / "a" / "merged", "lies inside the run"
    elif where == "holds":
        out, message = tmp_path / "runs", "holds the run"
    elif where == "symlink":
        out, message = tmp_path / "link", "is one of the runs"
        out.symlink_to(tmp_path / "b", target_is_directory=True)
    else:
        out, message = tmp_path / "merged.txt", "exists and is not empty"
        out.write_text("x")
    with pytest.raises(ValueError, match=message):
        merge_runs(runs, out)
    assert [snapshot(run) for run in runs] == before


def test_an_empty_output_folder_is_accepted_and_gets_the_config(tmp_path):
    fake_run(tmp_path / "a", ["base"], [0], seed=0)
    fake_run(tmp_path / "b", ["base"], [1], seed=1)
    (tmp_path / "m").mkdir()
    merge_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "m")
    config = yaml.safe_load((tmp_path / "m" / "config.yaml").read_text())
    assert config["data"] == DEFAULT_CONFIG["data"]
    assert config["merged_from"] == [str((tmp_path / r).resolve()) for r in ("a", "b")]
    fake_run(tmp_path / "c", ["base"], [2], seed=2)  # a merged run can be merged again
    merge_runs([tmp_path / "m", tmp_path / "c"], tmp_path / "m2")
    assert sorted(pd.read_csv(tmp_path / "m2" / "results.csv")["fold"].unique()) == [0, 1, 2]


def test_a_run_without_its_config_is_refused(tmp_path):
    fake_run(tmp_path / "a", ["base"], [0], seed=0)
    fake_run(tmp_path / "b", ["base"], [1], seed=1, config=None)
    with pytest.raises(FileNotFoundError, match=r"b/config\.yaml is missing"):
        merge_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "m")
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("damage", ["garbage_results", "bad_value", "bad_fold",
                                    "truncated_per_object", "garbage_config"])
def test_unreadable_run_files_are_errors_naming_the_file(tmp_path, damage):
    fake_run(tmp_path / "a", ["base"], [0], seed=0)
    fake_run(tmp_path / "b", ["base"], [1], seed=1)
    b = tmp_path / "b"
    if damage == "garbage_results":
        name = "results.csv"
        (b / name).write_bytes(bytes(range(256)) * 4)
    elif damage == "bad_value":
        name = "results.csv"
        (b / name).write_text("method,fold,metric,value\nbase,1,ndcg@5,0.5\nbase,1,p@5,high\n")
    elif damage == "bad_fold":
        name = "results.csv"
        (b / name).write_text("method,fold,metric,value\nbase,one,ndcg@5,0.5\n")
    elif damage == "truncated_per_object":
        name = "per_object.csv.gz"
        data = (b / name).read_bytes()
        (b / name).write_bytes(data[: len(data) // 2])
    else:
        name = "config.yaml"
        (b / name).write_text("data: [unclosed\n")
    with pytest.raises(ValueError, match=re.escape(str(b / name))):
        merge_runs([tmp_path / "a", b], tmp_path / "m")


def test_merge_keeps_what_the_runs_said_in_their_notes(tmp_path):
    fake_run(tmp_path / "a", ["base"], [0], seed=0)
    fake_run(tmp_path / "b", ["gp"], [0], seed=1)
    for run, said in (("a", ["Settings chosen in fold 0: k 1.", "SIDE DATA: gp."]),
                      ("b", ["SIDE DATA: gp.", "Settings chosen in fold 0: k 3."])):
        report = tmp_path / run / "report.md"
        report.write_text(report.read_text() + "\n## Notes\n\n" + "\n\n".join(said) + "\n")
    merged = merge_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "m")
    notes = merged.split("\n## Notes\n", 1)[1]
    assert [part.strip() for part in notes.split("\n\n") if part.strip()] == [
        "Settings chosen in fold 0: k 1.", "SIDE DATA: gp.", "Settings chosen in fold 0: k 3."]


def test_the_chart_shows_the_deepest_ndcg(tmp_path):
    rows = [(m, 0, f"ndcg@{k}", v) for m, v in (("a", 0.5), ("b", 0.4)) for k in (1, 2, 10)]
    results = pd.DataFrame(rows, columns=["method", "fold", "metric", "value"])
    per_object = results.assign(object="q1")[["method", "fold", "object", "metric", "value"]]
    write_run(tmp_path / "run", results, per_object, title="t")
    assert (tmp_path / "run" / "ndcg@10.png").is_file()
    assert not (tmp_path / "run" / "ndcg@1.png").exists()


def test_a_merged_run_records_its_provenance_and_each_runs(tmp_path, monkeypatch):
    """The merge writes provenance.json: its own command and, per run, that run's (a run older
    than the file by its folder), so that benchmarks/provenance.py can record a merged run."""
    import json

    from tagtorch.evaluation.provenance import headline_record

    config = {"data": {"_target_": "tagtorch.data.synthetic.generate"}, "task": {"folds": [0, 1]}}
    fake_run(tmp_path / "a", ["base"], [0, 1], seed=0, config=config)
    fake_run(tmp_path / "b", ["gp"], [0, 1], seed=1, config=config)
    (tmp_path / "a" / "provenance.json").write_text(json.dumps(
        {"command": "python -m tagtorch.train model=[base]", "commit": "abc"}))
    monkeypatch.chdir(tmp_path)
    main(["m", "a", "b", "--methods", "gp", "base"])
    written = json.loads((tmp_path / "m" / "provenance.json").read_text())
    assert written["command"] == "python -m tagtorch.evaluation.runs m a b --methods gp base"
    assert [run.get("commit") for run in written["merged_from"]] == ["abc", None]
    assert written["merged_from"][1]["folder"] == str((tmp_path / "b").resolve())
    record = headline_record(tmp_path / "m")
    assert record["merged_from"] == written["merged_from"] and record["best_first"]
