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

Usage::

    python benchmarks/bench_neural.py
    python benchmarks/bench_neural.py --lengths 32 128 --seconds 1 --losses listnet lambdarank
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import time

import torch

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
                     seconds: float, bf16: bool = False) -> float:
    """Training throughput of one loss at one list width."""
    torch.manual_seed(0)
    n_lists = max(1, n_candidates // width)
    features, labels, mask = random_batch(n_lists, width, device)
    normalizer = FeatureNormalizer(N_FEATURES).to(device).fit(features, mask)
    scorer = ListScorer(N_FEATURES, hidden=(64, 64), dropout=0.1, norm="layer").to(device)
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
    args = parser.parse_args()
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
