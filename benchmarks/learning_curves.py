"""Learning curves of the neural tag rankers a run saved: validation NDCG@k per epoch.

A tag-recommendation run saves each fitted ranker under ``checkpoints/DATA/METHOD/foldK``
(``task.checkpoint_dir``); a neural ranker's ``manifest.json`` keeps its validation history (NDCG@k
and loss on the part of V held out for early stopping, per epoch) and its best epoch. This script
draws those curves, one panel per method and a line per fold
(:func:`tagtorch.evaluation.plots.plot_learning_curves`), and prints each fold's best epoch
and epochs run. Read it right after the run: a later run of the same data, method and fold
saves over it. A bad argument ends the script with one line naming it (exit status 2).

Usage::

    python benchmarks/learning_curves.py checkpoints/hetrec2011-lastfm-2k \
        --methods lambdarank,tag_context --out docs/figures/tag_context_curves_lastfm.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from tagtorch.evaluation.plots import plot_learning_curves
from tagtorch.storage import read_json


def curves(folder: Path, methods: list[str]) -> pd.DataFrame:
    """``method, seed (the fold), epoch, val_ndcg, val_loss`` of every saved fold's history."""
    rows = []
    for method in methods:
        for manifest in sorted((folder / method).glob("fold*/manifest.json")):
            fold = int(manifest.parent.name.removeprefix("fold"))
            rows += [{"method": method, "seed": fold, **entry}
                     for entry in read_json(manifest).get("history") or []]
    return pd.DataFrame(rows, columns=["method", "seed", "epoch", "val_ndcg", "val_loss"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", type=Path, help="checkpoints/DATA of a run")
    parser.add_argument("--methods", required=True, help="comma-separated neural methods")
    parser.add_argument("--out", type=Path, required=True, help="the PNG file written")
    args = parser.parse_args(argv)
    methods = args.methods.split(",")
    table = curves(args.checkpoints, methods)
    missing = sorted(set(methods) - set(table["method"]))
    if missing:
        parser.error(f"{args.checkpoints}: no saved history of {missing}")
    for (method, fold), curve in table.groupby(["method", "seed"]):
        best = int(curve.loc[curve["val_ndcg"].idxmax(), "epoch"])
        print(f"{method} fold {fold}: best epoch {best} of {len(curve)} run")
    path = plot_learning_curves(table, args.out, series={"validation": "val_ndcg"},
                                ylabel="NDCG@5, V's held-out part")
    print(f"figure: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
