"""``benchmarks/bench_scale.py``'s arithmetic: exponents and the targets' verdicts, by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_scale


def run(task, size, seconds, peak=1.0, folkrank_ms=1.0):
    return {"task": task, "size": size, "posts": size, "assignments": 2 * size,
            "stages": {"generate": 0.0, "text": 0.0, "task": seconds}, "peak_gb": peak,
            "methods": {"folkrank": {"fit_s": 0.0, "ms_per_query": folkrank_ms,
                                     "queries": 10}}}


def test_the_exponent_is_the_log_log_slope():
    small, large = run("posts", 10_000, 10.0), run("posts", 100_000, 1000.0)
    assert bench_scale.exponent(small, large, "total") == pytest.approx(2.0)
    assert bench_scale.exponent(small, large, "peak_gb") == pytest.approx(0.0)


def test_targets_are_measured_at_their_size_or_extrapolated_and_starred():
    lines = bench_scale.target_lines([run("posts", 100_000, 60.0, folkrank_ms=1.0),
                                      run("posts", 1_000_000, 599.0, folkrank_ms=6.0)])
    assert lines[0].startswith("PASS ") and "599.0" in lines[0]  # measured at 1M
    assert next(line for line in lines if "FolkRank" in line).startswith("MISS ")
    extrapolated = bench_scale.target_lines([run("posts", 10_000, 1.0),
                                             run("posts", 100_000, 10.0)])
    assert extrapolated[0].startswith("PASS*") and "100.0" in extrapolated[0]  # 10 s x 10
    assert "exponent 1.00" in extrapolated[0]
    assert bench_scale.target_lines([run("posts", 10_000, 1.0)])[0].startswith("SKIP")
