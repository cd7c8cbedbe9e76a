"""Check: an interrupted and resumed item-model training equals the uninterrupted one, on a device.

The CPU path is tested (``tests/test_itemrec_resume.py``); this script runs the same check on
any device, CUDA included, where the random state restored at resumption is CUDA's too. For
Do-Rank and PITF on a seeded synthetic folksonomy it trains

1. uninterrupted, ``--epochs`` epochs (early stopping on);
2. interrupted at the start of epoch ``--interrupt-at`` (default: half of (1)'s epochs, which
   early stopping may end before ``--epochs``; an exception in a callback; the last checkpoint
   stays), then resumed by a new model from that checkpoint;

and prints, per model, whether every per-epoch figure and every weight of (2) is bit-identical
to (1). It exits 1 when one is not. ``benchmarks/gpu_table.py`` runs it as its ``resume`` part.

Usage::

    python benchmarks/check_resume.py --device cuda
    python benchmarks/check_resume.py --device cpu --epochs 6 --interrupt-at 3
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import pytorch_lightning as pl
import torch

from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.itemrec.data import item_recommendation_data
from tagtorch.itemrec.dorank import DoRank
from tagtorch.itemrec.pitf import PITF

MODELS = {"dorank": DoRank, "pitf": PITF}


class Interrupt(pl.Callback):
    """Raises at the start of one epoch, as a crash would (the last checkpoint stays)."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_train_epoch_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if trainer.current_epoch == self.epoch:
            raise RuntimeError(f"interrupted at the start of epoch {self.epoch}")


def trainer_factory(device: str, epochs: int, interrupt_at: int | None
                    ) -> Callable[..., pl.Trainer]:
    def make(**kwargs: Any) -> pl.Trainer:
        if interrupt_at is not None:
            kwargs["callbacks"] = [*kwargs.get("callbacks", []), Interrupt(interrupt_at)]
        return pl.Trainer(max_epochs=epochs, accelerator=device, devices=1,
                          enable_progress_bar=False, **kwargs)
    return make


def check(name: str, data: Any, args: argparse.Namespace) -> bool:
    """Whether the resumed training of model ``name`` equals the uninterrupted one."""
    cls = MODELS[name]
    settings = {"rank": args.rank, "patience": 2, "seed": 0,
                "optimizer": functools.partial(torch.optim.Adam, lr=0.05)}
    reference = cls(trainer=trainer_factory(args.device, args.epochs, None), **settings)
    reference.fit(data)
    # by default half-way through the uninterrupted run, which early stopping may end early
    interrupt_at = args.interrupt_at or max(1, len(reference.history_) // 2)
    with tempfile.TemporaryDirectory() as folder:
        first = cls(trainer=trainer_factory(args.device, args.epochs, interrupt_at),
                    checkpoint_dir=folder, **settings)
        try:
            first.fit(data)
        except RuntimeError as error:
            print(f"{name}: {error}")
        resumed = cls(trainer=trainer_factory(args.device, args.epochs, None),
                      checkpoint_dir=folder, **settings)
        resumed.fit(data)
    ours, theirs = resumed.state_dict(), reference.state_dict()
    same_weights = ours.keys() == theirs.keys() and all(
        torch.equal(ours[k].cpu(), theirs[k].cpu()) for k in ours)
    same_history = resumed.history_ == reference.history_
    print(f"{name:<7} device {args.device}: {len(reference.history_)} epochs; per-epoch "
          f"figures identical: {same_history}; weights identical: {same_weights}")
    if len(reference.history_) <= interrupt_at:
        print(f"{name}: the training ended (early stopping) before epoch {interrupt_at}: "
              f"no resumption was checked; lower --interrupt-at")
        return False
    return same_history and same_weights


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--interrupt-at", type=int, default=None,
                        help="the epoch at whose start training is interrupted (default: half "
                        "of the uninterrupted run's epochs, per model)")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--objects", type=int, default=2000)
    args = parser.parse_args()
    folksonomy = generate_folksonomy(n_objects=args.objects, seed=0)
    data = item_recommendation_data(folksonomy, p=1, seed=0, split="triples")
    results = [check(name, data, args) for name in MODELS]
    print("=== summary: resumed == uninterrupted on", args.device, ":",
          "PASS" if all(results) else "FAIL")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
