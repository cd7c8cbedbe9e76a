"""FolkRank and APR at the field's sizes: exact and local, ms per test post, lists compared.

For each size (synthetic posts, the generator of ``benchmarks/bench_scale.py``, 3-core and
leave-last split as ``task=posts`` makes them) and for HetRec Last.fm and MovieLens (where
``TAGTORCH_DATA_DIR`` has them), and for FolkRank and APR each:

- **exact** (``solver=auto``: the tags' columns where the graph has fewer tags than the test
  posts, else each post's own run): fit and scoring seconds, ms per test post;
- **per post** (TagRec's sums, each post its own run) on every ``--every``-th test post: its ms
  per post, and the share of those posts whose top 10 equals the exact run's;
- **local** (ours, ``folkrank_local`` and ``apr_local`` as configured): ms per test post, the
  share of test posts whose top 5 and top 10 equal the exact run's, and the largest difference
  of the TagRec metrics at k = 1, 5 and 10.

Then one PASS/MISS line per target of issue 73 that this script measures.

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/bench_folkrank.py \
        --sizes 100000 350000 1000000

Run it alone: the times are wall-clock seconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from hydra.utils import instantiate
from omegaconf import OmegaConf

import tagtorch as tt
from tagtorch.data.synthetic import generate_folksonomy, scaled_config
from tagtorch.posts.base import PostRanker
from tagtorch.posts.data import PostData, personalized_split
from tagtorch.posts.folkrank import FolkRank
from tagtorch.posts.metrics import mean_metrics, post_metrics

CONF = Path(tt.__file__).parent / "conf" / "model"
POSTS_PER_OBJECT = 6
"""Posts per object of the generator at these sizes (``bench_scale.POSTS_PER_OBJECT``)."""
METHODS = {"folkrank": False, "apr": True}
"""The exact methods (``adapted``); the local ones are ``NAME_local`` in ``conf/model``."""


def synthetic_split(posts: int, seed: int) -> PostData:
    """``task=posts``'s split of the synthetic folksonomy of about ``posts`` posts."""
    raw = generate_folksonomy(**scaled_config(max(200, posts // POSTS_PER_OBJECT)), seed=seed)
    return personalized_split(raw)


def ranked(model: PostRanker, data: PostData, posts: Any = None) -> tuple[np.ndarray, float]:
    """The top 10 of ``posts`` (default: the test posts) and the fit and scoring seconds."""
    posts = data.test if posts is None else posts
    start = time.perf_counter()
    top = model.fit(data).top_tags(posts, 10)
    return top, time.perf_counter() - start


def compare(name: str, data: PostData, every: int) -> list[dict[str, Any]]:
    """One row per method: exact, per-post and local timings and agreements on ``data``."""
    rows = []
    sample = np.arange(0, len(data.test), every)
    for method, adapted in METHODS.items():
        exact, exact_s = ranked(FolkRank(adapted=adapted), data)
        own, own_s = ranked(FolkRank(adapted=adapted, solver="per_post"), data,
                            data.test.take(sample))
        node = OmegaConf.load(CONF / f"{method}_local.yaml")[f"{method}_local"]
        local, local_s = ranked(instantiate(node), data)
        gold = data.test.tags
        theirs = mean_metrics(post_metrics(exact, gold, [1, 5, 10]))
        ours = mean_metrics(post_metrics(local, gold, [1, 5, 10]))
        rows.append({
            "data": name, "method": method, "train": len(data.train), "test": len(data.test),
            "exact_ms": 1000 * exact_s / len(data.test),
            "per_post_ms": 1000 * own_s / len(sample),
            "per_post_same": float((own == exact[sample]).all(1).mean()),
            "local_ms": 1000 * local_s / len(data.test),
            "local_top5": float((local[:, :5] == exact[:, :5]).all(1).mean()),
            "local_top10": float((local == exact).all(1).mean()),
            "metric_diff": max(abs(ours[k] - theirs[k]) for k in theirs),
            "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20})
        print(row_line(rows[-1]), flush=True)
    return rows


def row_line(row: dict[str, Any]) -> str:
    """A markdown table row."""
    return (f"| {row['data']} | {row['method']} | {row['train']:,} / {row['test']:,} | "
            f"{row['exact_ms']:.2f} | {row['per_post_ms']:.2f} | {row['per_post_same']:.4f} | "
            f"{row['local_ms']:.2f} | {row['local_top5']:.4f} | {row['local_top10']:.4f} | "
            f"{row['metric_diff']:.5f} | {row['peak_gb']:.2f} |")


def target_lines(rows: list[dict[str, Any]], largest: str) -> list[str]:
    """Issue 73's targets that this script measures, one PASS/MISS line each."""
    lines = []

    def check(name: str, value: float, ok: bool) -> None:
        lines.append(f"{'PASS' if ok else 'MISS'}   {name}: {value:.4g}")

    for row in rows:
        where = f"{row['method']} on {row['data']}"
        if row["data"] == largest:
            check(f"{where}: exact <= 15 ms per test post", row["exact_ms"],
                  row["exact_ms"] <= 15)
            check(f"{where}: local <= 2 ms per test post", row["local_ms"], row["local_ms"] <= 2)
        check(f"{where}: exact lists = per-post lists (sampled)", row["per_post_same"],
              row["per_post_same"] == 1.0)
        check(f"{where}: local top 5 = exact on >= 99% of test posts", row["local_top5"],
              row["local_top5"] >= 0.99)
        check(f"{where}: local TagRec metrics within 0.002", row["metric_diff"],
              row["metric_diff"] <= 0.002)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 350_000, 1_000_000])
    parser.add_argument("--every", type=int, default=30,
                        help="per-post runs on every EVERY-th test post (default 30)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print("| data | method | train / test posts | exact ms | per-post ms | per-post = exact | "
          "local ms | local top 5 = exact | local top 10 = exact | metric diff | peak GB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    if os.environ.get("TAGTORCH_DATA_DIR"):
        for name in ("lastfm", "movielens"):
            rows += compare(name, personalized_split(tt.load(name)), 1)
    for size in args.sizes:
        rows += compare(f"synthetic {size:,}", synthetic_split(size, args.seed), args.every)
    largest = f"synthetic {max(args.sizes):,}" if args.sizes else ""
    print("\n".join(target_lines(rows, largest)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
