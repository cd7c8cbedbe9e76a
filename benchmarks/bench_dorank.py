"""Benchmark of Do-Rank's training epoch: fast learning against the regular approach (Figure 5).

On the 5-core of HetRec LastFM (``$TAGTORCH_DATA_DIR``; ``--synthetic`` for the generator), with
10%, 25%, 50%, 75% and 100% of the training triples, it prints the seconds of one training epoch
(every UTS set once, forward, backward and an Adam step) for

- **fast** learning: each set's positives ranked against its negatives
  (:func:`tagtorch.itemrec.dorank.smoothed_dcg_fast`, cost ``|positives| x |items|`` per set);
- the **regular** approach: every item ranked against every other item
  (:func:`tagtorch.itemrec.dorank.smoothed_dcg_regular`, ``|items|^2`` per set);
- **PITF** (BPR, one drawn item per positive), for reference;

- **Do-Rank+** (ours, fast learning) and Do-Rank with **sampled** negatives (ours, 256 drawn
  items per set);

side by side, with the ratio regular / fast. The regular approach runs the whole epoch up to
``--regular-full`` of the data (10% by default); above it a regular epoch takes hours on a CPU,
so it is timed on a seeded sample of the epoch's sets (``--regular-sets``) and scaled by the
number of sets (its cost per set does not depend on the other sets); the ``regular timed on``
column says which. On a machine with CUDA, ``--device cuda`` measures the same table on the GPU.

``--scale`` measures training past HetRec instead: a synthetic split with 100,000 users,
200,000 items, 5,000 tags and 10 million triples (``--scale-*`` to change them), each part in
its own process so that its peak resident memory (``ru_maxrss``) is its own:

- ``data``: drawing the triples and building the split (UTS sets, queries);
- ``sampled``: one whole training epoch of Do-Rank with sampled negatives;
- ``triples``: one epoch of the lean loop (``loop="lean"``, :mod:`tagtorch.itemrec.lean`)
  for PITF, for Do-Rank+ with ``--scale-negatives`` draws shared per step (autograd, Adam)
  and for Do-Rank+'s compiled kernel (plain SGD and AdaGrad, ``--scale-kernel-negatives``
  draws per triple: :class:`~tagtorch.itemrec.dorank_plus.SampledDCG`), and beside them
  one epoch of implicit's BPR (the benchmark-only dependency; factors ``--rank``, all threads)
  on the training triples' distinct (user, item) pairs; training samples per second of each
  (a triple for ours, a (user, item) pair for implicit) and the ratio ours / implicit;
- ``fast``: the paper's fast learning (every negative of 200,000 items), timed on a sample of
  the epoch's sets and scaled to the epoch (the output says so);
- ``fast-lean``: the same fast learning under ``loop="lean"`` (its gradient written out,
  :class:`~tagtorch.itemrec.dorank.FastLearning`), on ``--scale-fast-lean-sets`` sets of the
  epoch's seeded order (0: the whole epoch), scaled to the epoch when it is a sample, once for
  each of ``--scale-fast-dtypes`` (float32, and bfloat16 scores and products) in one process;
- ``top-k``: the top 10 items of per-user queries (profile aggregation), in blocks of users,
  timed on a seeded random sample of users and scaled to all users; beside it, implicit's
  ``recommend`` (same rank, items and known items filtered) on the same users, and the ratio
  ours / implicit.

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/bench_dorank.py
    python benchmarks/bench_dorank.py --synthetic --fractions 0.1 0.5 1.0
    python benchmarks/bench_dorank.py --scale
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import torch

from tagtorch.itemrec.base import FactorModel, top_k_queries
from tagtorch.itemrec.data import ItemRecData, item_recommendation_data
from tagtorch.itemrec.dorank import DoRank
from tagtorch.itemrec.dorank_plus import DoRankPlus
from tagtorch.itemrec.pitf import PITF

SCALE_PARTS = ("data", "sampled", "triples", "fast", "fast-lean", "top-k")


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
    model.on_fit_start()  # the sampled negatives' distribution
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


def synthetic_split(n_users: int, n_items: int, n_tags: int, n_triples: int,
                    seed: int = 0) -> ItemRecData:
    """A per-user split of ``n_triples`` drawn (user, item, tag) triples, 80/10/10 by triples.

    Users, items and tags are drawn with Zipf-like weights ``1 / rank^0.8`` (a few very active
    users, popular items and common tags, long tails), duplicates removed.
    """
    rng = np.random.default_rng(seed)

    def draw(n: int) -> np.ndarray:
        weights = 1.0 / np.arange(1, n + 1) ** 0.8
        return rng.choice(n, size=n_triples, p=weights / weights.sum()).astype(np.int64)

    key = (draw(n_users) * n_items + draw(n_items)) * n_tags + draw(n_tags)
    key = np.unique(key)
    triples = np.stack([key // (n_items * n_tags), key // n_tags % n_items, key % n_tags], 1)
    part = rng.random(len(triples))
    return ItemRecData.from_triples(
        "synthetic-scale", n_users, n_items, n_tags, triples[part < 0.8],
        triples[(part >= 0.8) & (part < 0.9)], triples[part >= 0.9], "triples", query="user",
        aggregate="profile")


def scale_part(part: str, args: argparse.Namespace) -> dict[str, float]:
    """Runs one part of ``--scale`` in this process; its seconds and this process's peak RSS."""
    start = time.perf_counter()
    data = synthetic_split(args.scale_users, args.scale_items, args.scale_tags,
                           args.scale_triples)
    out: dict[str, float] = {"data_seconds": time.perf_counter() - start,
                             "triples": float(len(data.train)),
                             "sets": float(len(data.train_sets))}
    device = torch.device(args.device)
    common = {"rank": args.rank, "batch_size": args.scale_batch_size}
    if part == "sampled":
        out["seconds"], out["timed"] = epoch_seconds(
            DoRank(negatives=256, **common), data, device)
    elif part == "triples":
        out.update(triples_seconds(data, args, device))
    elif part == "fast":
        out["seconds"], out["timed"] = epoch_seconds(
            DoRank(**common), data, device, max_sets=args.scale_fast_sets)
    elif part == "fast-lean":
        for dtype in args.scale_fast_dtypes:
            out[f"{dtype}_seconds"], out["timed"] = fast_lean_seconds(data, args, device, dtype)
    elif part == "top-k":
        out.update(top_k_seconds(data, args, device))
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return out


def lean_epoch_seconds(model: FactorModel, data: ItemRecData, device: torch.device) -> float:
    """Seconds of one epoch of the lean loop (no validation), the model freshly built."""
    torch.manual_seed(0)
    model.build(data.n_users, data.n_items, data.n_tags)
    model.data = data
    model.to(device)
    model.on_fit_start()
    train = torch.from_numpy(data.train).to(device)
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(0)).to(device)
    data.tagged(train[:1, 0], train[:1, 1:2])  # the sorted keys, built once
    epochs = model.lean_epochs(data, device)
    epochs.run(order[:1000])  # compiles (or loads) the kernels; not timed
    start = time.perf_counter()
    epochs.run(order)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    model.data = None
    return time.perf_counter() - start


def fast_lean_seconds(data: ItemRecData, args: argparse.Namespace, device: torch.device,
                      dtype: str) -> tuple[float, float]:
    """Seconds of fast learning under ``loop="lean"`` (``fast_dtype=dtype``) over a seeded
    order of sets; sets timed."""
    model = DoRank(rank=args.rank, batch_size=args.scale_batch_size, loop="lean",
                   fast_dtype=dtype)
    torch.manual_seed(0)
    model.build(data.n_users, data.n_items, data.n_tags)
    model.to(device)
    epochs = model.lean_epochs(data, device)
    order = torch.randperm(epochs.units, generator=torch.Generator().manual_seed(0))
    if args.scale_fast_lean_sets:
        order = order[: args.scale_fast_lean_sets]
    start = time.perf_counter()
    epochs.run(order)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, float(len(order))


def triples_seconds(data: ItemRecData, args: argparse.Namespace,
                    device: torch.device) -> dict[str, float]:
    """One epoch of the lean loop for PITF and Do-Rank+, and of implicit's BPR."""
    common = {"rank": args.rank, "loop": "lean", "lean_batch_size": args.scale_step}
    out = {"pitf_seconds": lean_epoch_seconds(PITF(**common), data, torch.device("cpu")),
           "plus_seconds": lean_epoch_seconds(
               DoRankPlus(negatives=args.scale_negatives, **common), data, device)}
    for rule in ("SGD", "Adagrad"):  # the compiled kernel (SampledDCG)
        make = functools.partial(getattr(torch.optim, rule), lr=0.01)
        for n in args.scale_kernel_negatives:
            out[f"{rule}{n}_seconds"] = lean_epoch_seconds(
                DoRankPlus(negatives=n, optimizer=make, **common), data, torch.device("cpu"))
    try:
        from implicit.cpu.bpr import BayesianPersonalizedRanking
    except ImportError:
        return out
    import scipy.sparse

    pairs = np.unique(data.train[:, 0] * np.int64(data.n_items) + data.train[:, 1])
    matrix = scipy.sparse.csr_matrix(
        (np.ones(len(pairs), np.float32), (pairs // data.n_items, pairs % data.n_items)),
        shape=(data.n_users, data.n_items))
    reference = BayesianPersonalizedRanking(factors=args.rank, iterations=1, random_state=0)
    begin = time.perf_counter()
    reference.fit(matrix, show_progress=False)
    out["implicit_seconds"] = time.perf_counter() - begin
    out["implicit_samples"] = float(len(pairs))
    return out


def top_k_seconds(data: ItemRecData, args: argparse.Namespace,
                  device: torch.device) -> dict[str, float]:
    """Seconds of the top 10 of a seeded sample of per-user queries: ours, then implicit's.

    Ours: :func:`top_k_queries` of a Do-Rank model (profile aggregation: one product per block
    of users, :meth:`~tagtorch.itemrec.dorank.CPModel.profile_scores`). implicit's
    ``recommend`` gets user vectors of the same rank, the same item factors and the same
    known items to filter (the benchmark-only dependency; skipped where it is absent).
    """
    model = DoRank(rank=args.rank, batch_size=args.scale_batch_size)
    torch.manual_seed(0)
    model.build(data.n_users, data.n_items, data.n_tags)
    model.to(device).eval()
    queries = data.test_queries
    # a seeded random sample: the first users are the most active ones (Zipf weights)
    rows = np.sort(np.random.default_rng(0).permutation(len(queries))
                   [: args.scale_users_scored])
    sample = queries.take(rows)
    begin = time.perf_counter()
    for _ in top_k_queries(model, sample, data.n_items, data.n_tags, k=10,
                           batch_size=args.scale_top_k_block):
        pass
    out = {"seconds": time.perf_counter() - begin, "timed": float(len(rows)),
           "queries": float(len(queries))}
    try:
        from implicit.cpu.bpr import BayesianPersonalizedRanking
    except ImportError:
        return out
    import scipy.sparse

    reference = BayesianPersonalizedRanking(factors=args.rank)
    reference.item_factors = model.item_factors.detach().cpu().numpy()
    reference.user_factors = np.random.default_rng(0).standard_normal(
        (data.n_users, args.rank)).astype(np.float32)
    known = sample.known
    liked = scipy.sparse.csr_matrix(
        (np.ones(len(known.values), np.float32), (known.row_ids, known.values)),
        shape=(len(rows), data.n_items))
    begin = time.perf_counter()
    reference.recommend(sample.users, liked, N=10, filter_already_liked_items=True)
    out["implicit_seconds"] = time.perf_counter() - begin
    return out


def run_scale(args: argparse.Namespace) -> None:
    """Prints the ``--scale`` table, each part measured in a subprocess of its own."""
    print(f"torch {torch.__version__} on {args.device} ({torch.get_num_threads()} CPU threads); "
          f"synthetic: {args.scale_users} users, {args.scale_items} items, {args.scale_tags} "
          f"tags, {args.scale_triples} drawn triples; r = {args.rank}, "
          f"{args.scale_batch_size} sets per step\n")
    header = f"{'part':>8} {'seconds':>10} {'measured on':>28} {'peak RSS GiB':>13}"
    print(header)
    print("-" * len(header))
    passed = [a for a in sys.argv[1:] if a != "--scale"]
    for part in args.scale_parts:
        done = subprocess.run([sys.executable, __file__, "--scale-part", part, *passed],
                              capture_output=True, text=True, check=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        if part == "data":
            seconds, what = r["data_seconds"], (f"{r['triples']:.0f} train triples, "
                                                f"{r['sets']:.0f} sets")
        elif part == "sampled":
            seconds, what = r["seconds"], "the whole epoch"
        elif part == "triples":
            print_triples(r, args)
            continue
        elif part == "fast-lean":
            print_fast_lean(r, args)
            continue
        elif part == "fast":
            seconds = r["seconds"] * r["sets"] / r["timed"]
            what = ("the whole epoch" if r["timed"] == r["sets"]
                    else f"{r['timed']:.0f} sets, scaled")
        else:
            seconds = r["seconds"] * r["queries"] / r["timed"]
            what = f"{r['timed']:.0f} of {r['queries']:.0f} users, scaled"
            if "implicit_seconds" in r:
                implicit = r["implicit_seconds"] * r["queries"] / r["timed"]
                what += f"; implicit {implicit:.1f} s ({seconds / implicit:.2f}x)"
        print(f"{part:>8} {seconds:>10.1f} {what:>28} {r['peak_rss_gib']:>13.2f}", flush=True)


def print_fast_lean(r: dict[str, float], args: argparse.Namespace) -> None:
    """The ``fast-lean`` part's rows: an epoch's seconds for each ``fast_dtype``."""
    timed = "the whole epoch" if r["timed"] == r["sets"] else f"{r['timed']:.0f} sets, scaled"
    for dtype in args.scale_fast_dtypes:
        seconds = r[f"{dtype}_seconds"] * r["sets"] / r["timed"]
        print(f"fast-lean {seconds:>10.1f} {timed:>28} {r['peak_rss_gib']:>13.2f}  {dtype} "
              f"({seconds / 3600:.2f} h an epoch)", flush=True)


def print_triples(r: dict[str, float], args: argparse.Namespace) -> None:
    """The ``triples`` part's rows: seconds and samples per second, and the ratio to implicit."""
    rows = [("PITF", r["pitf_seconds"], r["triples"]),
            (f"Do-Rank+ n={args.scale_negatives}", r["plus_seconds"], r["triples"])]
    rows += [(f"Do-Rank+ kernel {rule} n={n}", r[f"{rule}{n}_seconds"], r["triples"])
             for rule in ("SGD", "Adagrad") for n in args.scale_kernel_negatives]
    if "implicit_seconds" in r:
        rows.append(("implicit BPR", r["implicit_seconds"], r["implicit_samples"]))
    for name, seconds, samples in rows:
        ratio = ""
        if "implicit_seconds" in r:
            ratio = f" ({samples / seconds / (r['implicit_samples'] / r['implicit_seconds']):.2f}x)"
        what = f"{samples / seconds / 1e6:.3f} M samples/s{ratio}"
        print(f"{name[:8]:>8} {seconds:>10.1f} {what:>28} {r['peak_rss_gib']:>13.2f}  {name}",
              flush=True)


def parse_args() -> argparse.Namespace:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fractions", type=float, nargs="+",
                        default=[0.1, 0.25, 0.5, 0.75, 1.0])
    parser.add_argument("--regular-full", type=float, default=0.1,
                        help="fractions up to this one time the regular approach's whole epoch")
    parser.add_argument("--regular-sets", type=int, default=64,
                        help="sets timed for the regular approach above --regular-full "
                             "(scaled to the epoch)")
    parser.add_argument("--regular-batch-size", type=int, default=8,
                        help="sets per regular step (its [B, I, I] block bounds the memory)")
    parser.add_argument("--rank", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--synthetic", action="store_true", help="synthetic data, no download")
    parser.add_argument("--scale", action="store_true", help="the scale table (module docstring)")
    parser.add_argument("--scale-part", choices=SCALE_PARTS, help=argparse.SUPPRESS)
    parser.add_argument("--scale-parts", choices=SCALE_PARTS, nargs="+", default=SCALE_PARTS,
                        help="the parts of --scale to run (default: all)")
    parser.add_argument("--scale-users", type=int, default=100_000)
    parser.add_argument("--scale-items", type=int, default=200_000)
    parser.add_argument("--scale-tags", type=int, default=5_000)
    parser.add_argument("--scale-triples", type=int, default=10_000_000)
    parser.add_argument("--scale-batch-size", type=int, default=512)
    parser.add_argument("--scale-step", type=int, default=8192,
                        help="triples per step of the lean loop (Do-Rank+)")
    parser.add_argument("--scale-negatives", type=int, default=64,
                        help="Do-Rank+'s draws per step in the lean loop")
    parser.add_argument("--scale-kernel-negatives", type=int, nargs="*", default=[1, 4],
                        help="Do-Rank+'s draws per triple in its compiled kernel")
    parser.add_argument("--scale-fast-sets", type=int, default=2048,
                        help="sets timed for the paper's fast learning at scale")
    parser.add_argument("--scale-fast-lean-sets", type=int, default=0,
                        help="sets timed for fast learning under loop='lean' (0: all)")
    parser.add_argument("--scale-fast-dtypes", nargs="+", default=["float32", "bfloat16"],
                        choices=["float32", "bfloat16"],
                        help="fast_dtype of each fast-lean run (one process, the same order)")
    parser.add_argument("--scale-users-scored", type=int, default=4096,
                        help="users whose top-k is timed at scale")
    parser.add_argument("--scale-top-k-block", type=int, default=256,
                        help="users scored at once (a [block, items] score matrix)")
    return parser.parse_args()


def main() -> None:
    """Prints the epoch-time table (or, with ``--scale``, the scale table)."""
    args = parse_args()
    if args.scale_part:
        print(json.dumps(scale_part(args.scale_part, args)))
        return
    if args.scale:
        run_scale(args)
        return
    device = torch.device(args.device)
    full = load(args)
    print(f"torch {torch.__version__} on {device} ({torch.get_num_threads()} CPU threads); "
          f"{full.name} 5-core: {full.n_users} users, {full.n_items} items, {full.n_tags} tags, "
          f"{len(full.train)} training triples; r = {args.rank}, {args.batch_size} sets per step "
          f"({args.regular_batch_size} for the regular approach); s/epoch of every column\n")
    header = (f"{'data':>6} {'triples':>8} {'sets':>7} {'fast':>8} {'regular':>9} "
              f"{'regular timed on':>17} {'regular/fast':>13} {'Do-Rank+':>9} "
              f"{'sampled':>8} {'PITF':>7}")
    print(header)
    print("-" * len(header))
    common = {"rank": args.rank, "batch_size": args.batch_size}
    rows = []
    for fraction in args.fractions:
        data = full.subsample(fraction, seed=0)
        fast, _ = epoch_seconds(DoRank(fast=True, **common), data, device)
        whole = fraction <= args.regular_full
        timed, n = epoch_seconds(DoRank(fast=False, rank=args.rank,
                                        batch_size=args.regular_batch_size), data, device,
                                 None if whole else args.regular_sets)
        regular = timed * len(data.train_sets) / n
        plus, _ = epoch_seconds(DoRankPlus(**common), data, device)
        sampled, _ = epoch_seconds(DoRank(negatives=256, **common), data, device)
        pitf, _ = epoch_seconds(PITF(**common), data, device)
        rows.append((fraction, len(data.train), fast))
        on = "the whole epoch" if whole else f"{n} sets, scaled"
        print(f"{fraction:>6.0%} {len(data.train):>8} {len(data.train_sets):>7} {fast:>8.2f} "
              f"{regular:>9.1f} {on:>17} {regular / fast:>12.0f}x {plus:>9.2f} "
              f"{sampled:>8.2f} {pitf:>7.2f}", flush=True)
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
