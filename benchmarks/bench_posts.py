"""Personalized tag recommendation's methods: seconds per 1,000 test posts and TagRec's metrics.

Issue 38's speed table: every method of ``tagtorch/posts`` (its shipped config) fitted on a
split's training posts and scoring all its test posts in one batch (seconds per 1,000 test
posts, fit included), with TagRec's metrics (``tagtorch.posts.metrics``) beside the time. One
run each; the split is HetRec's p-core with each user's last post held out (TagRec's protocol),
or a synthetic folksonomy. TagRec's Java FolkRank took about 94 s for 2,252 test posts of a
51k-post MovieLens sample on 2 cores (41.7 s per 1,000 posts; the issue's figure), the
reference of the ``folkrank`` row.

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/bench_posts.py --data movielens lastfm
    python benchmarks/bench_posts.py --data synthetic --objects 2000   # no files needed
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import OmegaConf

from tagtorch.api import compose, load
from tagtorch.posts.data import personalized_split
from tagtorch.posts.metrics import mean_metrics, post_metrics

METHODS = ["mp", "mp_u", "mp_r", "mp_ur", "cf", "apr", "folkrank", "girp", "girptm", "bll",
           "bll_c", "lda_posts", "pitf_posts", "hybrid_lambdamart", "hybrid_rf",
           "hybrid_lambdarank"]
"""The shipped configs (``conf/model/NAME.yaml``) of every personalized method."""


def build(name: str, folder: Path, seed: int = 0, **settings: Any) -> Any:
    """The method of ``conf/model/{name}.yaml`` as ``task=posts`` composes it, ``settings``
    replacing its own."""
    cfg = compose([f"model={name}", "task=posts", f"seed={seed}",
                   *(f"model.{name}.{key}={value}" for key, value in settings.items())],
                  folder)
    return instantiate(OmegaConf.to_container(cfg.model[name], resolve=True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=["movielens", "lastfm"])
    parser.add_argument("--p", type=int, default=3, help="the core")
    parser.add_argument("--objects", type=int, default=2000, help="synthetic objects")
    parser.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    parser.add_argument("--lda-iterations", type=int, default=300,
                        help="lda_posts' Gibbs sweeps (TagRec: 2000; the experiments: 300)")
    args = parser.parse_args(argv)
    print(f"{'data':<10} {'method':<7} {'s/1k posts':>10} {'R@5':>7} {'P@5':>7} {'F1@5':>7} "
          f"{'MRR@10':>7} {'MAP@10':>7} {'nDCG@10':>8}")
    with tempfile.TemporaryDirectory() as scratch:  # the composed runs' folder
        for name in args.data:
            _bench(name, args, Path(scratch))


def _bench(name: str, args: argparse.Namespace, scratch: Path) -> None:
    """One data set's rows."""
    folk = load(name, **({"n_objects": args.objects} if name == "synthetic" else {}))
    data = personalized_split(folk, p=args.p)
    print(f"{name}: {len(data.train)} training and {len(data.test)} test posts, "
          f"{data.n_tags} tags ({args.p}-core, each user's last post held out)")
    for label in args.methods:
        settings = {"iterations": args.lda_iterations} if label == "lda_posts" else {}
        method = build(label, scratch, **settings)  # composed before the clock starts
        start = time.perf_counter()
        method.fit(data)
        ranked = method.top_tags(data.test, 10)
        seconds = time.perf_counter() - start
        m = mean_metrics(post_metrics(ranked, data.test.tags, [5, 10]))
        print(f"{name:<10} {label:<7} {1000 * seconds / len(data.test):>10.3f} "
              f"{m['tagrec_recall@5']:>7.4f} {m['tagrec_precision@5']:>7.4f} "
              f"{m['tagrec_f1@5']:>7.4f} {m['tagrec_mrr@10']:>7.4f} {m['tagrec_map@10']:>7.4f} "
              f"{m['tagrec_ndcg@10']:>8.4f}")


if __name__ == "__main__":
    main()
