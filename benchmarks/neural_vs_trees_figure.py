"""The figure of docs/neural_vs_trees.md: quality against fit time, a panel per run.

Reads each ``TITLE=RUN_FOLDER``'s ``results.csv`` (a run of ``+experiment=neural_trees_*`` or
``deep_vs_trees_*``) and draws every method's mean NDCG@5 (``--metric``) against its mean fit
seconds (:func:`tagtorch.evaluation.plots.plot_quality_against_time`). A bad argument or
folder ends the script with one line naming it (exit status 2).

Usage::

    python benchmarks/neural_vs_trees_figure.py "LastFM=RUN1" "MovieLens=RUN2" \
        --out docs/figures/neural_vs_trees.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from tagtorch.evaluation.plots import plot_quality_against_time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="TITLE=RUN_FOLDER of each panel")
    parser.add_argument("--out", type=Path, required=True, help="the PNG file written")
    parser.add_argument("--metric", default="ndcg@5")
    parser.add_argument("--time", default="fit_seconds")
    args = parser.parse_args(argv)
    panels = {}
    for given in args.runs:
        title, _, folder = given.partition("=")
        results = Path(folder) / "results.csv"
        if not title or not results.is_file():
            parser.error(f"{given!r}: expected TITLE=RUN_FOLDER with a results.csv")
        panels[title] = pd.read_csv(results)
    try:
        path = plot_quality_against_time(panels, args.metric, args.out, args.time)
    except ValueError as error:
        parser.error(str(error))
    print(f"figure: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
