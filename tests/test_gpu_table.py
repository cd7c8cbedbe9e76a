"""benchmarks/gpu_table.py in its CPU dry run, so that the GPU table cannot rot (issue 34)."""

import subprocess
import sys

import pytest
from conftest import ROOT


def dry_run(tmp_path, parts):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_table.py"),
                           "--dry-run", "--out", str(tmp_path), "--parts", parts],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    return (tmp_path / "table.md").read_text()


@pytest.mark.integration
def test_the_quick_parts_run_and_fill_the_table(tmp_path):
    table = dry_run(tmp_path, "lda,losses,resume")  # the others: the slow test below
    for part in ("lda", "losses", "resume"):
        assert f"| {part} | cpu | ok |" in table
        assert f"| {part} | cuda | skipped: dry run (CPU only) |" in table
        assert (tmp_path / "raw" / f"{part}-cpu.txt").read_text()
    assert "listnet" in table and "tokens/s" in table  # each run's own summary block
    assert "resumed == uninterrupted on cpu : PASS" in table


@pytest.mark.integration
def test_the_deep_ranker_sweep_runs_without_ray(tmp_path):
    """hparams_search=tag_context through Hydra's basic launcher: 2 small trials on the CPU."""
    table = dry_run(tmp_path, "sweep-deep")
    assert "| sweep-deep | cpu | ok |" in table
    trials = (tmp_path / "sweep-deep-cpu" / "trials.csv").read_text()
    assert trials.count("COMPLETE") + trials.count("PRUNED") == 2
    rate = next(line for line in table.splitlines() if line.startswith("trials per hour:"))
    assert "(2 trials finished in" in rate
    assert "ray" not in (tmp_path / "raw" / "sweep-deep-cpu.txt").read_text().lower()


@pytest.mark.slow
def test_every_part_runs_in_the_dry_run(tmp_path):
    table = dry_run(tmp_path, "candidates-150k,candidates-1m,lda,losses,item-models,item-scale,"
                              "sweep,sweep-deep,resume")
    assert table.count("| cpu | ok |") == 8 and "top-k" in table
    assert "| candidates-1m | cpu | skipped: dry run" in table
    assert (tmp_path / "sweep-cpu" / "trials.csv").read_text().count("COMPLETE") == 2
    assert "COMPLETE" in table  # the sweep's summary is its trials.csv
