"""The headline numbers are traced: run folders record their provenance, docs/provenance.md is
rendered from docs/runs/, and every number of the README's headline table is in its run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tagtorch as tt
from tagtorch.evaluation.provenance import (
    PROVENANCE_FILE,
    TABLE_PARTS,
    chosen_rows,
    curve_rows,
    headline_record,
    paired_rows,
    per_fold_rows,
    provenance_markdown,
    targets_rows,
)
from tagtorch.train import API_COMMAND

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from provenance import (  # noqa: E402
    FIGURE,
    RESULT_PAGES,
    provenance_page,
    traced_blocks,
    tracing_counts,
)

RUNS = {p.stem: json.loads(p.read_text(encoding="utf-8"))
        for p in sorted((ROOT / "docs" / "runs").glob("*.json"))}


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
    from tagtorch.errors import UnreadableFileError

    with pytest.raises(UnreadableFileError, match=r"provenance\.json"):
        headline_record(tmp_path)
