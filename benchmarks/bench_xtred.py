"""Benchmark of xTReD's diversification: batched against a plain per-object reference, and its
share of the online time per object.

On fold 0 of the D/V/T protocol of HetRec MovieLens (from ``$TAGTORCH_DATA_DIR``; genres as
topics) or, with ``--synthetic``, a synthetic folksonomy with categories, the candidates of T come
from ``LatreCandidates`` with topics (``diversity={"source": "auto"}``) and are ranked by
LATRE+wTS (α = 0.95). It prints, measured in one run:

1. batched diversification (``xtred_rerank`` over all T lists at once, τ = 25, λ = 1): ms per
   object;
2. the reference: Algorithm 1 written plainly, one object at a time (Python loops over the top
   τ, as in ``tests/test_xtred.py``), on ``--reference-objects`` objects: ms per object, and the
   ratio reference / batched (the orders are checked equal on those objects);
3. single-object (online) mode, ``--online-objects`` objects one at a time: candidates (rules +
   features + topics), model (LATRE+wTS), diversify (``xtred_rerank`` of one list) and sort, in
   ms per object, and the share of diversify in the total.

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/bench_xtred.py
    python benchmarks/bench_xtred.py --synthetic --objects 5000 --threads 1
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np


def reference_order(scores, mask, topics, pzo, lam, tau):
    """Algorithm 1 for one object (plain Python): the new order of candidate positions."""
    real = [i for i in range(len(scores)) if mask[i]]
    base = sorted(real, key=lambda i: (-scores[i], i))
    rank = {t: i + 1 for i, t in enumerate(base)}
    zo = [z for z in range(len(pzo)) if pzo[z] > 0]
    chosen: list[int] = []
    left = base[:tau]
    while left:
        def f(t):
            cover = sum(pzo[z] * topics[t][z] / rank[t]
                        * math.prod(1 - topics[s][z] / rank[s] for s in chosen) for z in zo)
            return (1 - lam) / rank[t] + lam * cover
        best = max(left, key=lambda t: (f(t), -rank[t]))
        chosen.append(best)
        left.remove(best)
    return chosen + base[tau:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument("--objects", type=int, default=5000, help="synthetic objects")
    parser.add_argument("--reference-objects", type=int, default=100)
    parser.add_argument("--online-objects", type=int, default=100)
    parser.add_argument("--tau", type=int, default=25)
    parser.add_argument("--lam", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: torch's; on a shared machine 1 avoids "
                             "spin contention)")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}")

    from tagtorch.candidates.latre import LatreCandidates
    from tagtorch.data.splits import TagQueries, tag_recommendation_folds
    from tagtorch.data.terms import TermIndex
    from tagtorch.data.text import TextProcessor
    from tagtorch.rankers.latre import LatreWTS
    from tagtorch.rankers.xtred import xtred_order, xtred_rerank

    if args.synthetic:
        from tagtorch.data.synthetic import generate_folksonomy

        raw = generate_folksonomy(n_objects=args.objects, seed=0)
    else:
        from tagtorch.data.loaders.hetrec import load_movielens_2k

        raw = load_movielens_2k(os.environ["TAGTORCH_DATA_DIR"], download=False)
    folksonomy = TextProcessor().apply(raw)
    fold = tag_recommendation_folds(folksonomy, n_folds=5, seed=0)[0]
    generator = LatreCandidates(device="cpu", diversity={"source": "auto"}).fit(
        fold.train_objects, fold.train_tags, TermIndex.from_folksonomy(folksonomy))
    test = generator(fold.test)
    ranker = LatreWTS(alpha=0.95)
    base = ranker.score(test)
    width = float(test.mask.sum(1).float().mean())
    print(f"{folksonomy.name}: T = {len(test)} objects, {width:.1f} candidates per object,"
          f" Z = {test.object_topics.shape[1]} topics, tau = {args.tau}, "
          f"lambda = {args.lam}")

    xtred_rerank(base[:8], test.mask[:8], test.tag_topics[:8], test.object_topics[:8],
                 args.lam, args.tau)  # warm-up
    start = time.perf_counter()
    order = xtred_order(base, test.mask, test.tag_topics, test.object_topics, args.lam, args.tau)
    batched = (time.perf_counter() - start) / len(test) * 1000

    rows = np.random.default_rng(0).choice(len(test), min(args.reference_objects, len(test)),
                                           replace=False)
    start = time.perf_counter()
    same = 0
    for b in rows:
        mine = reference_order(base[b].tolist(), test.mask[b].tolist(),
                               test.tag_topics[b].double().tolist(),
                               test.object_topics[b].double().tolist(), args.lam, args.tau)
        same += mine == order[b, : len(mine)].tolist()
    reference = (time.perf_counter() - start) / len(rows) * 1000
    print(f"batched:   {batched:.4f} ms per object")
    print(f"reference: {reference:.4f} ms per object ({len(rows)} objects; same order on "
          f"{same} of {len(rows)})")
    print(f"ratio reference / batched: {reference / batched:.1f}x")

    totals = {"candidates": 0.0, "model": 0.0, "diversify": 0.0, "sort": 0.0}
    n = min(args.online_objects, len(fold.test))
    for call, i in enumerate([0, *range(n)]):
        one_query = TagQueries(fold.test.objects[i : i + 1], fold.test.input_tags.take([i]),
                               fold.test.gold_tags.take([i]))
        t0 = time.perf_counter()
        one = generator(one_query)
        t1 = time.perf_counter()
        score = ranker.score(one)
        t2 = time.perf_counter()
        score = xtred_rerank(score, one.mask, one.tag_topics, one.object_topics, args.lam,
                             args.tau)
        t3 = time.perf_counter()
        torch.sort(score.masked_fill(~one.mask, float("-inf")), dim=-1, descending=True,
                   stable=True)
        t4 = time.perf_counter()
        if call:
            for key, seconds in zip(totals, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                totals[key] += seconds
    whole = sum(totals.values())
    print(f"online, {n} objects one at a time (ms per object): "
          + ", ".join(f"{k} {1000 * v / n:.3f}" for k, v in totals.items())
          + f", total {1000 * whole / n:.3f}")
    print(f"diversify share of the online time: {totals['diversify'] / whole:.1%}")


if __name__ == "__main__":
    main()
