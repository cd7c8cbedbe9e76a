"""Benchmark of Do-Rank's training epoch: fast learning against the regular approach (Figure 5).

On the 5-core of HetRec LastFM (``$TAGTORCH_DATA_DIR``; ``--synthetic`` for the generator), with
10%, 25%, 50%, 75% and 100% of the training triples, it prints the seconds of one training epoch
(every UTS set once, forward, backward and an Adam step) for

- **fast** learning: each set's positives ranked against its negatives
  (:func:`tagtorch.itemrec.dorank.smoothed_dcg_fast`, cost ``|positives| x |items|`` per set);
- the **regular** approach: every item ranked against every other item
  (:func:`tagtorch.itemrec.dorank.smoothed_dcg_regular`, ``|items|^2`` per set);
- **PITF** (BPR, one drawn item per positive), for reference;

side by side, with the ratio regular / fast. A regular epoch over all sets takes hours on a CPU,
so the regular approach is timed on a seeded sample of the epoch's sets (``--regular-sets``)
and scaled by the number of sets (its cost per set does not depend on the other sets); the output
says so. Fast learning and PITF run whole epochs. On a machine with CUDA, ``--device cuda``
measures the same table on the GPU.

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/bench_dorank.py
    python benchmarks/bench_dorank.py --synthetic --fractions 0.1 0.5 1.0
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from tagtorch.itemrec.base import FactorModel
from tagtorch.itemrec.data import ItemRecData, item_recommendation_data
from tagtorch.itemrec.dorank import DoRank
from tagtorch.itemrec.pitf import PITF


def load(args: argparse.Namespace) -> ItemRecData:
    """The 5-core split of LastFM (or of the synthetic generator)."""
    if args.synthetic:
        from tagtorch.data.synthetic import generate_folksonomy

        folksonomy = generate_folksonomy(n_objects=3000, seed=0)
    else:
        from tagtorch.data.loaders.hetrec import load_lastfm

        folksonomy = load_lastfm(os.environ.get("TAGTORCH_DATA_DIR"))
    return item_recommendation_data(folksonomy, p=5, seed=0)


def epoch_seconds(model: FactorModel, data: ItemRecData, device: torch.device,
                  max_sets: int | None = None) -> tuple[float, int]:
    """Seconds of one epoch over the training sets (or ``max_sets`` of them), and sets timed."""
    torch.manual_seed(0)
    model.build(data.n_users, data.n_items, data.n_tags)
    model.data = data
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    sets = data.train_sets
    order = np.random.default_rng(0).permutation(len(sets))
    if max_sets is not None:
        order = order[:max_sets]

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def step(rows: np.ndarray) -> None:
        items, mask = sets.padded(rows)
        loss = model.set_loss(torch.from_numpy(sets.users[rows]).to(device),
                              torch.from_numpy(sets.tags[rows]).to(device),
                              items.to(device), mask.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    step(order[: model.batch_size])  # warm-up, not timed
    sync()
    start = time.perf_counter()
    for begin in range(0, len(order), model.batch_size):
        step(order[begin : begin + model.batch_size])
    sync()
    model.data = None
    return time.perf_counter() - start, len(order)


def main() -> None:
    """Prints the epoch-time table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fractions", type=float, nargs="+",
                        default=[0.1, 0.25, 0.5, 0.75, 1.0])
    parser.add_argument("--regular-sets", type=int, default=64,
                        help="sets timed for the regular approach (scaled to the epoch)")
    parser.add_argument("--rank", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--synthetic", action="store_true", help="synthetic data, no download")
    args = parser.parse_args()
    device = torch.device(args.device)
    full = load(args)
    print(f"torch {torch.__version__} on {device} ({torch.get_num_threads()} CPU threads); "
          f"{full.name} 5-core: {full.n_users} users, {full.n_items} items, {full.n_tags} tags, "
          f"{len(full.train)} training triples; r = {args.rank}, {args.batch_size} sets per step")
    print(f"regular: timed on {args.regular_sets} sets per fraction, scaled to the epoch's "
          f"sets\n")
    header = (f"{'data':>6} {'triples':>8} {'sets':>7} {'fast s/epoch':>13} "
              f"{'regular s/epoch':>16} {'regular/fast':>13} {'PITF s/epoch':>13}")
    print(header)
    print("-" * len(header))
    common = {"rank": args.rank, "batch_size": args.batch_size}
    rows = []
    for fraction in args.fractions:
        data = full.subsample(fraction, seed=0)
        fast, _ = epoch_seconds(DoRank(fast=True, **common), data, device)
        timed, n = epoch_seconds(DoRank(fast=False, **common), data, device, args.regular_sets)
        regular = timed * len(data.train_sets) / n
        pitf, _ = epoch_seconds(PITF(**common), data, device)
        rows.append((fraction, len(data.train), fast))
        print(f"{fraction:>6.0%} {len(data.train):>8} {len(data.train_sets):>7} {fast:>13.2f} "
              f"{regular:>16.1f} {regular / fast:>12.0f}x {pitf:>13.2f}", flush=True)
    if len(rows) > 1:
        triples = np.array([r[1] for r in rows], dtype=float)
        seconds = np.array([r[2] for r in rows])
        slope, intercept = np.polyfit(triples, seconds, 1)
        fit = slope * triples + intercept
        r2 = 1 - ((seconds - fit) ** 2).sum() / max(((seconds - seconds.mean()) ** 2).sum(), 1e-12)
        print(f"\nfast learning against training triples: linear fit R^2 = {r2:.3f} "
              f"({1e6 * slope:.1f} s per million triples)")


if __name__ == "__main__":
    main()
