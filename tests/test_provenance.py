"""The headline numbers are traced: run folders record their provenance, docs/provenance.md is
rendered from docs/runs/, and every number of the README's headline table is in its run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

import tagtorch as tt
from tagtorch.errors import UnreadableFileError
from tagtorch.evaluation.provenance import (
    MAX_TEXT,
    PROVENANCE_FILE,
    TABLE_PARTS,
    check_record,
    chosen_rows,
    curve_rows,
    headline_record,
    paired_rows,
    per_fold_rows,
    provenance_markdown,
    read_records,
    run_provenance,
    targets_rows,
)
from tagtorch.evaluation.report import markdown_report
from tagtorch.train import API_COMMAND

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from provenance import (  # noqa: E402
    FIGURE,
    RESULT_PAGES,
    main,
    provenance_page,
    traced_blocks,
    tracing_counts,
)

RUNS = read_records(ROOT / "docs" / "runs")  # each record checked


def test_the_page_is_rendered_from_its_records():
    assert RUNS, "docs/runs/ holds the records"
    page = (ROOT / "docs" / "provenance.md").read_text(encoding="utf-8")
    assert page == provenance_page(RUNS), "stale: python benchmarks/provenance.py"
    assert page.startswith(provenance_markdown(RUNS))


def test_every_paragraph_with_figures_links_a_run_that_holds_its_figures():
    traced = 0
    for page in RESULT_PAGES:
        for words, names, missing in traced_blocks(
                (ROOT / "docs" / page).read_text(encoding="utf-8"), RUNS):
            assert names, (page, words, "links no run record: record its run or cut it")
            assert all(name in RUNS for name in names), (page, words, names)
            assert not missing, (page, words, names, missing)
            traced += 1
    count, total = tracing_counts(RUNS)
    assert count == total == traced >= 3
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"({count} of {total};" in " ".join(readme.split())  # the README says it


def test_a_figure_its_run_lacks_is_caught():
    text = "LambdaRank 0.4171 ([run](provenance.md#default_job)).\n\nUntraced 0.1234.\n"
    [(_, names, missing), (_, none, untraced)] = traced_blocks(text, RUNS)
    assert names == ["default_job"] and missing == ["0.4171"]
    assert none == [] and untraced == ["0.1234"]


def _headline_rows() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Headline results", 1)[1].split("\n## ", 1)[0]
    return [[cell.strip() for cell in line.strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]


def test_every_headline_number_is_in_the_run_it_names():
    rows = _headline_rows()
    assert len(rows) >= 3
    for result, _, _, runs in rows:
        names = re.findall(r"`(\w+)`", runs)
        assert names and all(name in RUNS for name in names), runs
        tables = "\n".join(line for name in names
                           for line in RUNS[name]["best_first"] + RUNS[name]["metrics"])
        for number in FIGURE.findall(result):  # every 4-digit figure stated
            assert number in tables, (number, names)


@pytest.mark.integration
def test_a_run_folder_records_its_provenance(tmp_path):
    folder = tmp_path / "run"
    tt.evaluate("tagrec", tt.load("synthetic"), models=["latre_wts", "sum"], folds=[0],
                output_dir=folder)
    record = headline_record(folder)
    written = json.loads((folder / PROVENANCE_FILE).read_text(encoding="utf-8"))
    assert record["command"] == written["command"] == API_COMMAND
    assert record["folds"] == [0] and record["correction"] == "Holm"
    assert record["threads"] == torch.get_num_threads()  # the last digits depend on it
    report = (folder / "report.md").read_text(encoding="utf-8")
    assert all(line in report for line in record["best_first"])
    tables = {key for key, value in record.items()  # the check looks figures up in each
              if isinstance(value, list) and value and str(value[0]).startswith(("|", "#"))}
    assert {"best_first", "paired", "per_fold"} <= tables <= set(TABLE_PARTS)
    assert len(record["paired"]) == 3 and record["paired"][2] in report  # one pair, on NDCG@5
    assert record["paired"][2].split("|")[3].strip() == record["best_first"][0].split()[-1]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=False)
    if head.returncode == 0 and (ROOT / ".git").exists():
        assert record["commit"] == head.stdout.strip()


def test_a_record_keeps_the_pair_tests_of_its_headline_metric_and_the_targets(tmp_path):
    report = ("## Best first by ndcg@5\n\n| method | ndcg@5 |\n|---|---|\n| a | 0.5 |\n\n"
              "## Paired ttest of every pair of methods (per-object values)\n\n"
              "| method_a | method_b | metric | mean_difference | p_holm |\n|---|---|---|---|---|\n"
              "| a | b | map | 0.1111 | 1e-3 |\n| a | b | ndcg@5 | 0.2222 | 1e-4 |\n"
              "| a | b | ndcg@50 | 0.3333 | 1e-2 |\n\n"
              "## Notes\n\n| a | b | ndcg@5 | 0.4444 | 1 |\n")
    assert paired_rows(report, "ndcg@5") == [
        "| method_a | method_b | metric | mean_difference | p_holm |", "|---|---|---|---|---|",
        "| a | b | ndcg@5 | 0.2222 | 1e-4 |"]
    assert paired_rows("## Best first by ndcg@5\n", "ndcg@5") == []
    (tmp_path / "targets.csv").write_text(
        "method,baseline,metric,value,p_value,p_holm\nh,mp,mrr@10,0.123456,0.0001,0.0004\n",
        encoding="utf-8")
    assert targets_rows(tmp_path / "targets.csv")[2] == (
        "| h | mp | mrr@10 | 0.1235 | 1.00e-04 | 4.00e-04 |")


def test_a_record_keeps_each_folds_headline_figure_and_the_chosen_settings(tmp_path):
    (tmp_path / "results.csv").write_text(
        "method,fold,metric,value\nrf,0,ndcg@5,0.41234\nrf,1,ndcg@5,0.5\nrf,0,map,0.9\n"
        "sum,0,ndcg@5,0.3\nsum,1,ndcg@5,0.29996\n", encoding="utf-8")
    assert per_fold_rows(tmp_path / "results.csv", "ndcg@5") == [
        "| method | fold 0 | fold 1 |", "|---|---|---|", "| rf | 0.4123 | 0.5 |",
        "| sum | 0.3 | 0.3 |"]
    assert per_fold_rows(tmp_path / "results.csv", "p@5") == []
    assert per_fold_rows(tmp_path / "absent.csv", "ndcg@5") == []
    (tmp_path / "tuning.csv").write_text(
        'method,seed,setting,val_dcg@10,chosen\nea,0,"{""rank"": 8}",0.15881,False\n'
        'ea,0,"{""rank"": 16}",0.16119,True\n', encoding="utf-8")
    assert chosen_rows(tmp_path / "tuning.csv") == [
        "| method | seed | setting | val_dcg@10 |", "|---|---|---|---|",
        '| ea | 0 | {"rank": 16} | 0.1612 |']


def test_a_record_keeps_each_learning_curves_first_best_and_last_epoch(tmp_path):
    (tmp_path / "curves.csv").write_text(  # seed 1's rows out of order; a tie at its best
        "epoch,val_dcg@10,train_dcg@10,method,seed\n0,0.48412,2.2612,de,0\n1,0.4895,2.37251,de,0\n"
        "2,0.47,2.5,de,0\n2,0.3,3.0,de,1\n0,0.5,2.0,de,1\n1,0.5,2.1,de,1\n3,,4.0,de,1\n",
        encoding="utf-8")  # an epoch without validation is left out
    assert curve_rows(tmp_path / "curves.csv") == [
        "| method | seed | first epoch | val_dcg@10 first | train_dcg@10 first | best epoch "
        "| val_dcg@10 best | train_dcg@10 best | last epoch | val_dcg@10 last "
        "| train_dcg@10 last |", "|---|---|---|---|---|---|---|---|---|---|---|",
        "| de | 0 | 0 | 0.4841 | 2.2612 | 1 | 0.4895 | 2.3725 | 2 | 0.47 | 2.5 |",
        "| de | 1 | 0 | 0.5 | 2.0 | 0 | 0.5 | 2.0 | 2 | 0.3 | 3.0 |"]
    (tmp_path / "topics.csv").write_text("iteration,perplexity\n1,900.0\n", encoding="utf-8")
    assert curve_rows(tmp_path / "topics.csv") == []


def test_a_folder_without_provenance_is_refused_by_name(tmp_path):
    with pytest.raises(UnreadableFileError, match=r"provenance\.json"):
        headline_record(tmp_path)


RECORD = {"command": "python -m tagtorch.train", "commit": "abc", "uncommitted_changes": False,
          "tagtorch": "0.1", "started": "now", "threads": 2, "data": "loader", "folds": [0],
          "split": {"n_folds": 5}, "test": "ttest", "correction": "Holm",
          "best_first": ["## Best first by ndcg@5", "", "| method | ndcg@5 |", "|---|---|",
                         "| a | 0.5000 |"], "metrics": [], "paired": []}


def _without(key):
    return {k: v for k, v in RECORD.items() if k != key}


@pytest.mark.parametrize(("record", "message"), [
    ([RECORD], "expected an object, found a list"),
    ("record", "expected an object, found a string"),
    (_without("best_first"), "field 'best_first': missing"),
    (_without("command"), "field 'command': missing"),
    (_without("folds"), "field 'folds' (or 'seeds'): missing"),
    ({**RECORD, "best_first": []}, "field 'best_first': expected the best-first table's lines"),
    ({**RECORD, "best_first": {"a": 1}}, "field 'best_first': expected a list of strings, found "
                                         "an object"),
    ({**RECORD, "best_first": ["## Best first by x", 3]}, "field 'best_first[1]': expected a "
                                                          "string, found a number"),
    ({**RECORD, "metrics": [None]}, "field 'metrics[0]': expected a string, found null"),
    ({**RECORD, "timings": 3}, "field 'timings': expected a list of strings, found a number"),
    ({**RECORD, "timings": ["| method |", None]},
     "field 'timings[1]': expected a string, found null"),
    ({**RECORD, "command": ["python", "-m"]}, "field 'command': expected a string, found a list"),
    ({**RECORD, "commit": 12}, "field 'commit': expected a string or null, found a number"),
    ({**RECORD, "threads": "many"}, "field 'threads': expected an integer >= 0"),
    ({**RECORD, "threads": True}, "field 'threads': expected an integer >= 0"),
    ({**RECORD, "uncommitted_changes": "yes"}, "field 'uncommitted_changes': expected true"),
    ({**RECORD, "split": [5]}, "field 'split': expected an object, found a list"),
    ({**RECORD, "folds": {"a": 1}}, "field 'folds': expected a list of integers or a string"),
    ({**RECORD, "folds": [0, "1"]}, "field 'folds[1]': expected an integer >= 0"),
    ({**RECORD, "merged_from": "a"}, "field 'merged_from': expected a list of the merged runs"),
    ({**RECORD, "merged_from": [3]}, "field 'merged_from[0]': expected an object, found a number"),
    ({**RECORD, "merged_from": [{"commit": "x"}]}, "field 'merged_from[0].folder': missing"),
    ({**RECORD, "merged_from": [{"folder": "f", "command": {}}]},
     "field 'merged_from[0].command': expected a string or null, found an object"),
    ({**RECORD, "command": "x" * (MAX_TEXT + 1)}, "field 'command': a string of 100,001 "
                                                  "characters, more than"),
    ({**RECORD, "best_first": [*RECORD["best_first"], "|" * (MAX_TEXT + 1)]},
     "field 'best_first[5]': a string of 100,001 characters"),
    ({**RECORD, "split": {"k" * (MAX_TEXT + 1): 1}}, "a string of 100,001 characters"),
])
def test_a_malformed_record_is_refused_in_one_line_naming_the_file_and_field(record, message):
    with pytest.raises(UnreadableFileError) as refused:
        check_record(record, "docs/runs/x.json")
    text = str(refused.value)
    assert text.startswith("docs/runs/x.json: ") and message in text, text
    assert "\n" not in text and len(text) < 300  # one line, never the huge value itself


def test_a_records_strings_cannot_add_html_links_or_lines_to_the_page():
    hostile = r"<script>alert(1)</script> [x](javascript:alert(1)) &amp; \[y](z)"
    record = {**RECORD, "tagtorch": hostile, "started": "now\n\n<img src=x>", "test": hostile,
              "folds": hostile, "data": "a`b <b>", "command": "run `x` \n\n<i>",
              "split": {"k": hostile},
              "best_first": [f"## Best first by {hostile}", "", "| method | m |", "|---|---|",
                             f"| {hostile} | 1 |"],
              "paired": ["| a | b |", "|---|---|", f"| {hostile} | 1 |"],
              "timings": ["| method | fit_seconds |", "|---|---|", f"| {hostile} | 1 |"]}
    page = provenance_markdown({"x": check_record(record, "x.json")})
    prose = re.sub(r"(`+) .*? \1|(`+)[^` ].*?\2", "", page)  # code spans show text as it is
    assert not re.search(r"<[a-z/!?]", prose), prose  # no HTML
    assert not re.search(r"(?<!\\)(\\\\)*[\[\]]", prose), prose  # no unescaped bracket: no link
    assert "&amp;amp;" in page and "&lt;script&gt;" in page  # entities shown as text
    assert r"\[x\](javascript:alert(1))" in page and r"\\\[y\](z)" in page
    assert "``a`b <b>``" in page and "- command: ``run `x` <i>``\n" in page  # on its line
    assert "now  &lt;img src=x&gt;" in page  # the line breaks gone: one line of the page


def _folder(tmp_path, provenance=None, config=None, report=None):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / PROVENANCE_FILE).write_text(json.dumps(
        run_provenance("python -m tagtorch.train") if provenance is None else provenance))
    (folder / "config.yaml").write_text(
        "data: {_target_: loader}\ntask: {seeds: [0]}\n" if config is None else config)
    (folder / "report.md").write_text(
        "## Best first by ndcg@5\n\n| rank | method | ndcg@5 |\n|---|---|---|\n| 1 | a | 0.5 |\n"
        if report is None else report)
    return folder


def test_a_record_keeps_the_reports_timing_table_and_one_without_it_is_accepted(tmp_path):
    results = pd.DataFrame(
        [("rf", 0, "ndcg@5", 0.41234), ("rf", 0, "fit_seconds", 2.53241),
         ("rf", 0, "ms_model", 0.99183), ("sum", 0, "ndcg@5", 0.3), ("sum", 0, "fit_seconds", 0.0),
         ("sum", 0, "ms_model", 0.03412)], columns=["method", "fold", "metric", "value"])
    folder = _folder(tmp_path, report=markdown_report(results, title="T",
                                                      headline_metric="ndcg@5"))
    report = (folder / "report.md").read_text(encoding="utf-8")
    section = report.split("\n## Time per test object (ms; fit in seconds)\n", 1)[1]
    expected = [line for line in section.split("\n## ", 1)[0].splitlines()
                if line.startswith("|")]
    assert expected[0] == "| method | fit_seconds | ms_model |" and len(expected) == 4
    record = headline_record(folder)
    assert record["timings"] == expected
    assert not set(expected) & set(record["metrics"])  # the timings are a section of their own
    page = provenance_markdown({"t": check_record(record, "t.json")})
    assert ("\n**Time per test object (ms; fit in seconds)**\n\n" + "\n".join(expected) + "\n"
            in page)
    [(_, names, missing)] = traced_blocks("Fit in 2.5324 s ([run](provenance.md#t)).",
                                          {"t": record})  # a timing figure is traced
    assert names == ["t"] and missing == []
    (tmp_path / "plain").mkdir()
    plain = headline_record(_folder(tmp_path / "plain"))  # a report without timings
    assert "timings" not in plain and "Time per test object" not in provenance_markdown(
        {"p": check_record(plain, "p.json")})
    assert provenance_markdown({"x": RECORD}) == provenance_markdown({"x": {**RECORD,
                                                                            "timings": []}})


PROVENANCE = {"command": "c", "commit": None, "tagtorch": "0.1", "started": "now"}


@pytest.mark.parametrize(("files", "message"), [
    ({"provenance": [1]}, "provenance.json: expected an object, found a list"),
    ({"provenance": {**PROVENANCE, "command": {"a": 1}}},
     "provenance.json: field 'command': expected a string, found an object"),
    ({"provenance": {k: v for k, v in PROVENANCE.items() if k != "tagtorch"}},
     "provenance.json: field 'tagtorch': missing"),
    ({"provenance": {**PROVENANCE, "merged_from": [{"folder": 3}]}},
     "provenance.json: field 'merged_from[0].folder': expected a string, found a number"),
    ({"config": "- 1\n"}, "config.yaml: expected an object, found a list"),
    ({"config": "task: {}\n"}, "config.yaml: field 'data': missing"),
    ({"config": "data: {a: 1}\n"}, "config.yaml: field 'data._target_': expected a string"),
    ({"config": "data: {_target_: x}\ntask: abc\n"},
     "config.yaml: field 'task': expected an object, found a string"),
    ({"config": "data: {_target_: x}\ntask: {significance: [1]}\n"},
     "config.yaml: field 'task.significance': expected an object, found a list"),
    ({"config": "data: {_target_: x}\ntask: {significance: {test: 3}}\n"},
     "config.yaml: field 'task.significance.test': expected a string, found a number"),
    ({"config": "data: {_target_: x}\ntask: {seeds: {a: 1}}\n"},
     "config.yaml: field 'task.seeds': expected a list of integers, a string or null"),
    ({"config": "data: {_target_: x}\ntask: {split: [1]}\n"},
     "config.yaml: field 'task.split': expected a number, a string or null, found a list"),
    ({"config": "data: [\n"}, "config.yaml: not YAML"),
    ({"config": "data: !!python/object/apply:os.system ['echo hi']\n"}, "config.yaml: not YAML"),
    ({"report": "## Best first by ndcg@5\n\nno table\n"}, "report.md: no best-first table"),
])
def test_a_malformed_run_folder_is_refused_in_one_line_naming_the_file(tmp_path, files, message):
    folder = _folder(tmp_path, **files)
    with pytest.raises(UnreadableFileError) as refused:
        headline_record(folder)
    assert str(refused.value).startswith(str(folder)) and message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_the_script_refuses_a_bad_record_or_argument_in_one_line(tmp_path, capsys):
    docs = tmp_path / "docs"
    (docs / "runs").mkdir(parents=True)
    (docs / "runs" / "bad.json").write_text(json.dumps({**RECORD, "command": 3}))
    assert main(["--docs", str(docs)]) == 2
    assert capsys.readouterr().err == (f"error: {docs / 'runs' / 'bad.json'}: field 'command': "
                                       "expected a string, found a number\n")
    (docs / "runs" / "bad.json").unlink()
    (docs / "runs" / "a b.json").write_text(json.dumps(RECORD))
    assert main(["--docs", str(docs)]) == 2
    assert "a record's name is letters, digits, _ and -" in capsys.readouterr().err
    for argv in (["../up=run"], ["nosep"], ["--given", "a/b=c"]):
        with pytest.raises(SystemExit) as stopped:
            main(["--docs", str(docs), *argv])
        assert stopped.value.code == 2
    assert not (tmp_path / "up.json").exists()
    assert capsys.readouterr().err.count("error:") == 3
    assert not (docs / "provenance.md").exists()  # nothing written on a refusal


def test_the_check_mode_writes_nothing_and_says_whether_the_page_is_current(capsys):
    page = ROOT / "docs" / "provenance.md"
    before = page.stat().st_mtime_ns
    assert main(["--check"]) == 0
    assert "current" in capsys.readouterr().out and page.stat().st_mtime_ns == before


def test_a_records_version_names_the_commit_that_ran():
    """Issue 72: records made at three commits all said the installed version (an editable
    install keeps it); in a checkout the version is made at run time from the commit, with
    git's count of commits and ``.dirty`` for uncommitted changes (git itself is the reference)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    record = run_provenance("python -m tagtorch.train")
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    count = subprocess.run(["git", "-C", str(root), "rev-list", "--count", "HEAD"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert record["commit"] == head
    assert record["tagtorch"].split("+")[0].endswith(f".dev{count}")
    assert record["tagtorch"].split("+")[1] == (
        f"g{head[:9]}" + (".dirty" if record["uncommitted_changes"] else ""))


def test_a_recorded_command_leaves_out_where_the_run_went(monkeypatch):
    """Issue 72: records' commands carried ``hydra.run.dir=/a/machine/folder``."""
    from tagtorch.evaluation.provenance import command_line

    monkeypatch.setattr("sys.argv", ["train.py", "task=posts", "hydra.run.dir=/work/x/run",
                                     "model=[a,b]", "hydra.sweep.dir=/tmp/s"])
    assert command_line() == "python -m tagtorch.train task=posts 'model=[a,b]'"


def test_a_recorded_command_names_data_in_the_data_home_relative_to_it(monkeypatch):
    """Issue 72: a record's command named a machine's folder (``/work/shared/data/...``)."""
    from tagtorch.evaluation.provenance import command_line

    monkeypatch.setenv("TAGTORCH_DATA_DIR", "/srv/data/")
    monkeypatch.setattr("sys.argv", ["train.py", "data.path=/srv/data/s/f.txt",
                                     "data.test_path=/srv/database/t.txt", "x=/srv/data"])
    assert command_line() == ("python -m tagtorch.train "
                              "'data.path=${oc.env:TAGTORCH_DATA_DIR}/s/f.txt' "
                              "data.test_path=/srv/database/t.txt x=/srv/data")


def test_no_record_names_a_folder_of_the_machine_that_ran_it():
    """Issue 72: records' commands carried ``hydra.run.dir=/work/exp/...`` and data paths of
    the machine that ran them; a reader's run needs neither (data: the data home, relative)."""
    found = [f"{path.name}: {match}" for path in sorted((ROOT / "docs" / "runs").glob("*.json"))
             for match in re.findall(r"(?:=|\"folder\": \"|--out )(/[\w./-]+)",
                                     path.read_text(encoding="utf-8"))]
    assert not found, found
