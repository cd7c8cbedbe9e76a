"""The estimate a run prints before its first fit, against the time it then takes (issue 72).

Every evaluation run logs ``N fits to run; about X`` before its first fit
(:func:`tagtorch.evaluation.timings.announce`). On a machine that has never run a method, X
comes from ``tagtorch/evaluation/reference_timings.json``: the seconds of one fit of each model
class (fit plus scoring of the test queries) measured on the 2-core build machine by
``benchmarks/reference_timings.py`` from finished run folders, times the points of the run's
tuning grid, scaled linearly to the data's size (tag assignments, or a LETOR set's training
documents).

This script runs documented experiments one after another, each in a fresh process with an
empty timings file (``TAGTORCH_TIMINGS``: no record of this machine, as for a newcomer), reads
the estimate from its log, and prints it beside the measured time:

* ``fits``: the seconds of the fits the run itself records in that file (each fit with its
  scoring: what the estimate estimates), and the ratio estimate / fits (PASS within 2x either
  way);
* ``after the estimate``: the seconds from the estimate's line to the command's end (the fits,
  their metrics and the report: what is left to wait for when the estimate is read);
* ``wall``: the whole command (start-up, loading and candidates included).

The reference's entries for 3Layers on LDA topics and for the hybrid come from MovieLens runs
(``benchmarks/reference_timings.py`` on the folders of the records ``three_layers_lda_movielens``
and ``hybrid_tagrec_movielens``), so the MovieLens row is a consistency check and the Last.fm
rows test the scaling to another data set; every other entry is older than these commands.

Run it alone: the timings are wall seconds on a shared 2-core machine.

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/estimates.py
    python benchmarks/estimates.py --only main_job
    python benchmarks/estimates.py --announce "python -m tagtorch.train +experiment=lda_lastfm"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HYBRID_17 = ("'model=[hybrid_lambdamart,mp,mp_u,mp_r,mp_ur,cf,apr,folkrank,girp,girptm,bll,bll_c,"
             "three_layers,three_lt,three_lt_topic,bll_ac,bll_c_ac]' 'task.seeds=[0]'")
EXPERIMENTS = {
    "main_job": "python -m tagtorch.train",
    "neural_trees_letor": "python -m tagtorch.train +experiment=neural_trees_letor",
    "hybrid_tagrec_movielens": f"python -m tagtorch.train +experiment=posts_movielens {HYBRID_17}",
    "hybrid_tagrec_lastfm": f"python -m tagtorch.train +experiment=posts_lastfm {HYBRID_17}",
    "three_layers_lda_lastfm": "python -m tagtorch.train +experiment=posts_lastfm "
                               "'model=[three_layers,three_layers_lda,bll_c_ac]' 'task.seeds=[0]' "
                               "'task.targets={method: three_layers_lda, baselines: "
                               "[three_layers], measures: [tagrec_mrr@10, mrr@10]}'",
    "lda_lastfm": "python -m tagtorch.train +experiment=lda_lastfm",
}
"""Documented experiments (README, docs pages and their records), by their record's name."""

_ANNOUNCED = re.compile(r"(\d+) fits to run; about (under 1 s|[\d.]+ s|[\d.]+ min)")


def _seconds(text: str) -> float:
    """``42 s`` or ``1.6 min`` (``announce``'s format) in seconds."""
    if text == "under 1 s":
        return 0.5
    value, unit = text.split()
    return float(value) * (60 if unit == "min" else 1)


def _start(command: str, scratch: Path) -> subprocess.Popen[str]:
    """A command started with an empty timings file in ``scratch`` (a newcomer's machine), its
    run folder there and its log on ``stdout``."""
    env = {**os.environ, "TAGTORCH_TIMINGS": str(scratch / "timings.jsonl"),
           "WANDB_MODE": "offline"}
    words = [*shlex.split(command)[3:], "logger=none", f"hydra.run.dir={scratch}/run"]
    return subprocess.Popen([sys.executable, "-m", "tagtorch.train", *words], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def measure(command: str) -> dict[str, float | int | None]:
    """Runs one command with an empty timings file: its estimate, and the seconds of its fits,
    of everything after the estimate was logged and of the whole command."""
    with tempfile.TemporaryDirectory() as scratch:
        timings = Path(scratch) / "timings.jsonl"
        start = time.perf_counter()
        process = _start(command, Path(scratch))
        assert process.stdout is not None
        announced, at, output = None, None, []
        for line in process.stdout:
            output.append(line)
            if announced is None and (announced := _ANNOUNCED.search(line)):
                at = time.perf_counter()
        wall = time.perf_counter() - start
        if process.wait() != 0:
            raise SystemExit(f"{command} failed:\n{''.join(output)[-2000:]}")
        lines = timings.read_text().splitlines() if timings.exists() else []
        fits = sum(json.loads(line)["seconds"] for line in lines)
    return {"n_fits": int(announced.group(1)) if announced else len(lines),
            "estimate": _seconds(announced.group(2)) if announced else None,
            "fits": fits, "after": wall - (at - start) if at else None, "wall": wall}


def announced_only(command: str) -> str:
    """The estimate line a command logs (it is stopped there, before its first fit)."""
    with tempfile.TemporaryDirectory() as scratch:
        process = _start(command, Path(scratch))
        assert process.stdout is not None
        found = "ended before announcing its fits"
        for line in process.stdout:
            if "fits to run" in line:
                found = line.split(" - ", 1)[-1].strip()
                break
        process.kill()
        process.wait()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=list(EXPERIMENTS),
                        default=list(EXPERIMENTS), help="the experiments to run")
    parser.add_argument("--announce", nargs="+", metavar="COMMAND",
                        help="only print the estimate of these commands (stopped before a fit)")
    args = parser.parse_args()
    if args.announce:
        for command in args.announce:
            print(f"{command}\n    {announced_only(command)}", flush=True)
        return
    print("| experiment | fits | estimate s | fits s | estimate / fits | within 2x | "
          "after the estimate s | estimate / after | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.only:
        row = measure(EXPERIMENTS[name])
        estimate, fits = row["estimate"], float(row["fits"] or 0)
        after, wall = float(row["after"] or 0), float(row["wall"] or 0)
        if estimate is None or not fits or not after:
            print(f"| {name} | {row['n_fits']} | none | {fits:.1f} | – | MISS | {after:.1f} | – | "
                  f"{wall:.1f} |", flush=True)
            continue
        verdict = "PASS" if 0.5 <= estimate / fits <= 2.0 else "MISS"
        print(f"| {name} | {row['n_fits']} | {estimate:.0f} | {fits:.1f} | {estimate / fits:.2f} "
              f"| {verdict} | {after:.1f} | {estimate / after:.2f} | {wall:.1f} |", flush=True)


if __name__ == "__main__":
    main()
