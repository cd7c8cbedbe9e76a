"""FolkRank and APR side by side with TagRec's jar on one TagRec file: seconds, ratio, lists.

A synthetic folksonomy of about ``--posts`` posts (``tagtorch.data.synthetic``, the sizes of
``benchmarks/bench_scale.py``) is written as a TagRec file; TagRec makes its 3-core and its
leave-last split (``Pipeline core``, ``SplitDriver l1o``: ``../shared/tagrec-oracle``) and runs
``Pipeline fr``, which computes APR and FolkRank in one run. tagtorch reads TagRec's own split
files and runs ``apr`` and ``folkrank`` (exact: ``solver=auto``) and the local variants of ours
on them. Printed: the file's size, TagRec's wall seconds (its JVM's start included) and its own
clock (``*_TIME.txt``: training and test), tagtorch's fit and scoring seconds of each method,
the ratio, a PASS/MISS line for "at least 10x faster than TagRec's jar", and the largest
difference of TagRec's seven metrics at k = 1..10 between TagRec's files and tagtorch's lists
(0 where the lists agree).

Usage::

    TAGREC_HOME=/path/to/TagRec python benchmarks/bench_tagrec_jar.py --posts 250000

``TAGREC_HOME`` is a TagRec build with the oracle drivers (``classes/``, ``lib/*.jar``). Run it
alone: the times are wall-clock seconds.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tagtorch.data.loaders.tagrec import load_tagrec, write_tagrec
from tagtorch.data.synthetic import generate_folksonomy, scaled_config
from tagtorch.posts.base import PostRanker
from tagtorch.posts.data import PostData, personalized_split
from tagtorch.posts.folkrank import FolkRank
from tagtorch.posts.local_folkrank import LocalFolkRank
from tagtorch.posts.metrics import mean_metrics, post_metrics

COLUMNS = ("tagrec_recall", "tagrec_precision", "tagrec_f1", "tagrec_mrr", "tagrec_map",
           "tagrec_ndcg", "coverage")
"""The first seven columns of TagRec's ``*_metrics_avg.txt`` (one line per k = 1..10)."""
POSTS_PER_OBJECT = 6
"""Posts per object of the generator at these sizes (``bench_scale.POSTS_PER_OBJECT``)."""
TARGET = 10.0
"""Issue 73: the exact FolkRank and APR at least this many times faster than TagRec's jar."""


def run_tagrec(home: Path, folder: Path, posts: int, seed: int) -> dict[str, float]:
    """TagRec's core, split and ``fr`` run in ``folder``: wall seconds and its own clock."""
    classpath = ":".join([str(home / "classes"), *map(str, sorted((home / "lib").glob("*.jar")))])
    for part in ("csv", "results", "metrics"):
        (folder / "data" / part / "ml_core").mkdir(parents=True)
    raw = generate_folksonomy(**scaled_config(max(200, posts // POSTS_PER_OBJECT)), seed=seed)
    path = write_tagrec(raw, folder / "data" / "csv" / "ml_core" / "ml_p3.txt")
    print(f"file: {path.stat().st_size / 2**20:.1f} MiB, {raw.n_assignments:,} assignments",
          flush=True)

    def java(*args: str) -> float:
        start = time.perf_counter()
        subprocess.run(["java", "-Xmx12g", "-cp", classpath, *args], cwd=folder, check=True,
                       capture_output=True, timeout=7200)
        return time.perf_counter() - start

    java("test.Pipeline", "core", "ml", "ml_p3")
    java("SplitDriver", "l1o", "ml_core/ml_p3")
    wall = java("test.Pipeline", "fr", "ml", "ml_p3")
    return {"wall": wall, "own": own_seconds(folder / "data" / "metrics" / "ml_core")}


def own_seconds(folder: Path) -> float:
    """TagRec's own training and test seconds of its ``fr`` run (``*_fr_TIME.txt``, in ms)."""
    files = sorted(folder.glob("*_fr_TIME.txt"))
    if not files:
        return float("nan")
    numbers = re.findall(r"Full (?:training|test) time: ([0-9]+)", files[0].read_text())
    return sum(int(n) for n in numbers) / 1000.0


def tagrec_split(folder: Path) -> PostData:
    """TagRec's own training and test files of the split, read by tagtorch."""
    files = folder / "data" / "csv" / "ml_core"
    train, test = files / "ml_p3_train.txt", files / "ml_p3_test.txt"
    return personalized_split(load_tagrec(train, test_path=test, integer_ids=True), p=1,
                              split="given")


def tagrec_means(folder: Path, stem: str) -> np.ndarray:
    """``[10, 7]`` TagRec's means at k = 1..10."""
    lines = (folder / "data" / "metrics" / "ml_core" / f"{stem}_metrics_avg.txt").read_text()
    rows = [[float(v.replace(",", ".")) for v in line.split(";")[:7]] for line in lines.split()]
    return np.nan_to_num(np.array(rows))


def run_ours(model: PostRanker, data: PostData) -> tuple[float, np.ndarray]:
    """Fit and scoring seconds, and ``[10, 7]`` the metrics of its lists."""
    start = time.perf_counter()
    ranked = model.fit(data).top_tags(data.test, 10)
    seconds = time.perf_counter() - start
    means = mean_metrics(post_metrics(ranked, data.test.tags, range(1, 11)))
    return seconds, np.array([[means[f"{c}@{k}" if c != "coverage" else c] for c in COLUMNS]
                              for k in range(1, 11)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posts", type=int, default=250_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    home = Path(os.environ.get("TAGREC_HOME", ""))
    if not (home / "classes" / "SplitDriver.class").exists():
        print("TAGREC_HOME must name a TagRec build with the oracle drivers", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="tagrec_jar_"))
    tagrec = run_tagrec(home, folder, args.posts, args.seed)
    data = tagrec_split(folder)
    print(f"TagRec's split: {len(data.train):,} training posts, {len(data.test):,} test posts")
    models = {"apr": (FolkRank(adapted=True), "apr"), "folkrank": (FolkRank(), "fr"),
              "apr_local": (LocalFolkRank(adapted=True), "apr"),
              "folkrank_local": (LocalFolkRank(), "fr")}
    seconds = {}
    print("| method | tagtorch s | ms per test post | max metric diff to TagRec's |")
    print("|---|---|---|---|")
    for name, (model, stem) in models.items():
        seconds[name], ours = run_ours(model, data)
        diff = float(np.abs(ours - tagrec_means(folder, stem)).max())
        print(f"| {name} | {seconds[name]:.1f} | {1000 * seconds[name] / len(data.test):.2f} "
              f"| {diff:.2e} |", flush=True)
    exact = seconds["apr"] + seconds["folkrank"]
    local = seconds["apr_local"] + seconds["folkrank_local"]
    print(f"TagRec fr (APR and FolkRank in one run): {tagrec['wall']:.1f} s wall, "
          f"{tagrec['own']:.1f} s its own clock")
    print(f"exact APR + FolkRank: {exact:.1f} s, {tagrec['wall'] / exact:.1f}x TagRec's wall, "
          f"{tagrec['own'] / exact:.1f}x its own clock")
    print(f"local APR + FolkRank: {local:.1f} s, {tagrec['wall'] / local:.1f}x TagRec's wall")
    verdict = "PASS" if tagrec["wall"] / exact >= TARGET else "MISS"
    print(f"{verdict}   exact FolkRank + APR >= {TARGET:.0f}x faster than TagRec's jar: "
          f"{tagrec['wall'] / exact:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
