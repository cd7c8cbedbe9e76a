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
                                      run("posts", 1_000_000, 599.0, folkrank_ms=16.0)])
    assert lines[0].startswith("PASS ") and "599.0" in lines[0]  # measured at 1M
    assert next(line for line in lines if "FolkRank (exact)" in line).startswith("MISS ")
    extrapolated = bench_scale.target_lines([run("posts", 10_000, 1.0),
                                             run("posts", 100_000, 10.0)])
    assert extrapolated[0].startswith("PASS*") and "100.0" in extrapolated[0]  # 10 s x 10
    assert "exponent 1.00" in extrapolated[0]
    assert bench_scale.target_lines([run("posts", 10_000, 1.0)])[0].startswith("SKIP")


def test_two_runs_of_the_same_size_have_no_exponent_and_say_so():
    same = [run("posts", 1061, 1.0), run("posts", 1061, 2.0)]  # two sizes, the same data
    assert "| 1,061 |" in bench_scale.table(same).splitlines()[-1]  # no ZeroDivisionError
    assert bench_scale.exponent_of_stage(*same, "task") != bench_scale.exponent_of_stage(*same,
                                                                                         "task")
    assert bench_scale.target_lines(same)[0].startswith("SKIP ")
    assert "no exponent to extrapolate between 1,061 and 1,061" in bench_scale.target_lines(same)[0]


@pytest.mark.parametrize(("argv", "message"), [
    (["--sizes", "0"], "argument --sizes: a size is an integer in [1, 100,000,000], got '0'"),
    (["--sizes", "-5"], "argument --sizes: a size is an integer in [1, 100,000,000], got '-5'"),
    (["--sizes", "abc"], "argument --sizes: invalid _size value: 'abc'"),
    (["--sizes", "1" + "0" * 30], "a size is an integer in [1, 100,000,000]"),
    (["--sizes"], "argument --sizes: expected at least one argument"),
    (["--tasks"], "argument --tasks: expected at least one argument"),
    (["--tasks", "nosuch"], "argument --tasks: invalid choice: 'nosuch'"),
    (["--seed", "-1"], "argument --seed: a seed is an integer in [0, 2**32), got '-1'"),
    (["--seed", str(2**40)], "a seed is an integer in [0, 2**32)"),
    (["--tasks", "posts", "--sizes", "10", "100"],
     "--sizes 10 and 100 give task posts the same data (200 objects): a growth exponent between "
     "equal sizes is undefined"),
    (["--tasks", "tagrec", "--sizes", "5000", "5000"], "--sizes 5,000 and 5,000 give task tagrec"),
    (["--one", "nosuch", "5"], "--one takes a task of"),
    (["--one", "posts", "abc"], "--one takes a task of"),
    (["--one", "posts", "0"], "--one takes a task of"),
    (["--plot", "{tmp}"], "--plot {tmp}: a file whose suffix names a figure format"),
    (["--plot", "{tmp}/figure.xyz"], "a file whose suffix names a figure format"),
    (["--json", "{tmp}"], "--json {tmp}: cannot append to it (Is a directory)"),
    (["--json", "{tmp}/link.jsonl"], "cannot append to it (Too many levels of symbolic links; "
                                     "a link is refused)"),
])
def test_a_bad_argument_ends_the_script_in_one_line_before_any_run(tmp_path, capsys, argv,
                                                                   message):
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SystemExit) as stopped:
        bench_scale.main([value.format(tmp=tmp_path) for value in argv])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("usage:") and ": error: " in err[-1] and len(err) == 2
    assert message.format(tmp=tmp_path) in err[-1] and "Traceback" not in "".join(err)
    assert not (tmp_path / "elsewhere").exists()


TWO_SIZES = ["--tasks", "posts", "--sizes", "10000", "100000"]


@pytest.mark.parametrize(("argv", "message"), [
    ([*TWO_SIZES, "--models", "nosuch"], "Could not load 'model/nosuch'"),
    ([*TWO_SIZES, "--set", "garbage"], "Error parsing override 'garbage'"),
    ([*TWO_SIZES, "--set", "task.ks=[0]"], "config key task.ks=[0]: expected a non-empty list"),
    (["--one", "posts", "1000", "--models", "nosuch"], "Could not load 'model/nosuch'"),
])
def test_overrides_no_run_could_use_end_the_script_in_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as stopped:
        bench_scale.main(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
