"""Benchmark of the neural rankers' training throughput, in lists per second, for every loss.

One training step is what :class:`tagtorch.rankers.neural.NeuralRanker` does per batch: feature
normalization, the default scorer (MLP 13 -> 64 -> 64 -> 1 with layer norm and dropout), the
loss on the padded batch, backward and an AdamW step. Batches are random padded lists of ``F =
13`` heavy-tailed features with 1 to 10% relevant candidates (at least one per list); the
lengths of the real lists vary between ``L / 2`` and ``L``, as candidate lists do.

For each device (the CPU, and CUDA when there is one) and each loss, it prints lists/s at list
widths ``L`` = 32, 128 and 512. A batch holds ``--candidates`` padded slots (default 8,192:
256 lists of 32, 64 of 128, 16 of 512), so every column of the table moves the same amount of
data through the scorer and the quadratic losses show their cost in ``L``. On CUDA the table is
repeated in bf16 mixed precision (``torch.autocast``), as ``trainer=gpu`` trains.

Each cell: 2 warm-up steps, then steps until ``--seconds`` have passed (at least 3).

``--allrank`` prints instead the losses alone against allRank 1.4.3's (``pip install --no-deps
allRank==1.4.3``: :mod:`allrank_oracle`) on the same random scores and labels: milliseconds per
forward + backward of each loss at each width, and allRank's time over ours (``> 1``: tagtorch is
faster), at the settings where the two compute the same loss (``tests/test_losses.py``).

``--attention`` prints the attention scorer's lists/s with dropout on its attention weights (0.1,
as allRank) and without (``attention_dropout: 0``, which lets PyTorch's fused kernel run).

Usage::

    python benchmarks/bench_neural.py
    python benchmarks/bench_neural.py --allrank --seconds 1
    python benchmarks/bench_neural.py --attention --lengths 128 512 1024
    python benchmarks/bench_neural.py --lengths 32 128 --seconds 1 --losses listnet lambdarank
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from allrank_oracle import load_allrank_losses, to_allrank

from tagtorch.losses import LOSSES, get_loss
from tagtorch.rankers.neural import FeatureNormalizer, ListScorer

N_FEATURES = 13


def random_batch(n_lists: int, width: int, device: torch.device,
                 seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(features [B, L, F], labels [B, L], mask [B, L])`` of random padded lists."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(max(width // 2, 1), width + 1, (n_lists,), generator=g)
    mask = torch.arange(width) < lengths[:, None]
    features = torch.exp(2 * torch.randn(n_lists, width, N_FEATURES, generator=g))
    rate = torch.empty(n_lists, 1).uniform_(0.01, 0.1, generator=g)
    labels = (torch.rand(n_lists, width, generator=g) < rate).float()
    labels[:, 0] = 1.0  # every list has a relevant candidate
    labels = labels.masked_fill(~mask, 0.0)
    return features.to(device), labels.to(device), mask.to(device)


def lists_per_second(loss_name: str, width: int, n_candidates: int, device: torch.device,
                     seconds: float, bf16: bool = False, **settings: Any) -> float:
    """Training throughput of one loss at one list width (``settings``: of the ListScorer)."""
    torch.manual_seed(0)
    n_lists = max(1, n_candidates // width)
    features, labels, mask = random_batch(n_lists, width, device)
    normalizer = FeatureNormalizer(N_FEATURES).to(device).fit(features, mask)
    scorer = ListScorer(N_FEATURES, hidden=(64, 64), dropout=0.1, norm="layer",
                        **settings).to(device)
    optimizer = torch.optim.AdamW(scorer.parameters(), lr=1e-3)
    loss_fn = get_loss(loss_name)

    def step() -> None:
        autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if bf16
                    else contextlib.nullcontext())
        with autocast:
            scores = scorer(normalizer(features, mask), mask)
        loss = loss_fn(scores.float(), labels, mask)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(2):
        step()
    sync()
    steps, start = 0, time.perf_counter()
    while steps < 3 or time.perf_counter() - start < seconds:
        step()
        steps += 1
        if steps % 5 == 0:
            sync()
    sync()
    return steps * n_lists / (time.perf_counter() - start)


ALLRANK_SETTINGS = {
    "listnet": ({}, {}),
    "ranknet": ({}, {}),
    "approxndcg": ({"gain": "exp"}, {}),
    "neuralndcg": ({"gain": "exp"}, {}),
    "lambdaloss": ({"gain": "exp"}, {"weighing_scheme": "ndcgLoss2PP_scheme", "reduction": "mean"}),
}
"""tagtorch's and allRank's keyword arguments of each shared loss, as in the benchmark table."""


def paired_milliseconds(ours: Callable[[], torch.Tensor], theirs: Callable[[], torch.Tensor],
                        scores: torch.Tensor, seconds: float) -> tuple[float, float]:
    """Median milliseconds of one forward + backward of each loss (gradient into ``scores``).

    The two are timed in alternating rounds of 5 calls, so that a busy machine slows both alike.
    """
    def round_seconds(loss: Callable[[], torch.Tensor]) -> float:
        start = time.perf_counter()
        for _ in range(5):
            loss().backward()
            scores.grad = None
        return (time.perf_counter() - start) / 5

    for loss in (ours, theirs):  # warm-up
        round_seconds(loss)
    times: tuple[list[float], list[float]] = ([], [])
    while len(times[0]) < 5 or 5 * (sum(times[0]) + sum(times[1])) < seconds:
        times[0].append(round_seconds(ours))
        times[1].append(round_seconds(theirs))
    return 1000 * statistics.median(times[0]), 1000 * statistics.median(times[1])


def allrank_cell(name: str, allrank_loss: Callable[..., torch.Tensor], width: int,
                 n_candidates: int, seconds: float) -> str:
    """``ours / allRank ms (ratio)`` of one shared loss at one list width."""
    our_kwargs, their_kwargs = ALLRANK_SETTINGS[name]
    n_lists = max(1, n_candidates // width)
    _, labels, mask = random_batch(n_lists, width, torch.device("cpu"))
    scores = torch.randn(n_lists, width, requires_grad=True)
    y_pred, y_true = to_allrank(scores, labels, mask)
    ours, ref = paired_milliseconds(
        lambda: get_loss(name)(scores, labels, mask, **our_kwargs),
        lambda: allrank_loss(y_pred, y_true, **their_kwargs), scores, seconds)
    return f"{ours:9.3f} /{ref:9.3f} ({ref / ours:5.2f}x)"


def allrank_table(losses: list[str], lengths: list[int], n_candidates: int,
                  seconds: float) -> None:
    """Prints ms per forward + backward of each shared loss, tagtorch beside allRank."""
    theirs = load_allrank_losses()
    if theirs is None:
        raise SystemExit("allRank is not installed: pip install --no-deps allRank==1.4.3")
    header = f"{'loss':<12}" + "".join(f"{'L=' + str(w) + ' ours/allRank ms (x)':>34}"
                                      for w in lengths)
    print(header + "\n" + "-" * len(header))
    for name in [loss for loss in losses if loss in ALLRANK_SETTINGS]:
        cells = [allrank_cell(name, theirs[name], w, n_candidates, seconds) for w in lengths]
        print(f"{name:<12}" + "".join(f"{c:>34}" for c in cells), flush=True)


def attention_table(lengths: list[int], n_candidates: int, seconds: float) -> None:
    """Prints lists/s of the attention scorer (conf/scorer/attention.yaml: 2 layers of 4 heads)
    with dropout 0.1 on the attention weights and with none, side by side (ListNet loss)."""
    header = f"{'L':>6}{'dropout 0.1':>14}{'dropout 0':>14}{'ratio':>8}"
    print("attention scorer, cpu fp32, ListNet (lists/s)\n" + header + "\n" + "-" * len(header))
    for width in lengths:
        rates = [lists_per_second("listnet", width, n_candidates, torch.device("cpu"), seconds,
                                  attention_layers=2, attention_dropout=rate)
                 for rate in (None, 0.0)]
        print(f"{width:>6}{rates[0]:>14,.1f}{rates[1]:>14,.1f}{rates[1] / rates[0]:>7.1f}x",
              flush=True)


def main() -> None:
    """Prints the lists/s table of every loss, list width and device."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 128, 512])
    parser.add_argument("--losses", nargs="+", default=list(LOSSES), choices=list(LOSSES))
    parser.add_argument("--candidates", type=int, default=8192,
                        help="padded candidate slots per batch (lists = candidates / L)")
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per cell")
    parser.add_argument("--devices", nargs="+", default=None,
                        help="devices to measure (default: cpu, and cuda when available)")
    parser.add_argument("--allrank", action="store_true",
                        help="the losses alone against allRank's, on the CPU")
    parser.add_argument("--attention", action="store_true",
                        help="the attention scorer with and without dropout on its weights")
    args = parser.parse_args()
    if args.attention:
        attention_table(args.lengths, args.candidates, args.seconds)
        return
    if args.allrank:
        print(f"torch {torch.__version__}, {platform.machine()}, {torch.get_num_threads()} CPU "
              f"threads; {args.candidates} padded slots per batch, medians over alternating "
              "rounds of 5 calls\n")
        allrank_table(args.losses, args.lengths, args.candidates, args.seconds)
        return
    devices = args.devices or ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

    print(f"torch {torch.__version__}, {platform.machine()}, {torch.get_num_threads()} CPU "
          f"threads" + (f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""))
    print(f"batch: {args.candidates} padded candidate slots, F = {N_FEATURES}, MLP 64-64 scorer, "
          f"AdamW; {args.seconds:g} s per cell\n")
    for name in devices:
        device = torch.device(name)
        for bf16 in ([False, True] if device.type == "cuda" else [False]):
            label = f"{name}" + (" bf16-mixed" if bf16 else " fp32")
            header = f"{'loss (' + label + ')':<28}" + "".join(
                f"{'L=' + str(w):>12}" for w in args.lengths)
            print(header + "   (lists/s)")
            print("-" * len(header))
            for loss in args.losses:
                row = [lists_per_second(loss, w, args.candidates, device, args.seconds, bf16)
                       for w in args.lengths]
                print(f"{loss:<28}" + "".join(f"{v:>12,.0f}" for v in row), flush=True)
            print()


if __name__ == "__main__":
    main()
