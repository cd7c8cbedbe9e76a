"""Candidate recall at N per source combination: the recall-at-N curve of the extended candidates.

For HetRec Last.fm (with its listening counts) and MovieLens (with its metadata), from
``$TAGTORCH_DATA_DIR``, on the T objects of the chosen folds of the D/V/T protocol: the share of
gold tags among each object's candidates when at most ``N`` are kept, for ``N`` in ``--ns``.
Each combination is :class:`~tagtorch.candidates.latre.LatreCandidates` with every rule
consequent (``max_rule_candidates=None``) and ``max_candidates=N`` (the budget: text terms,
then reciprocal-rank fusion of the sources). With rules alone, that keeps the text terms and
the best consequents by ``sum_l``, the paper's ordering. Prints one table per dataset and
writes the curve to ``--figure`` (default ``docs/figures/recall_at_n.png``): one line per
combination, dashed for a source alone (its own candidates only, no text terms).

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/bench_candidate_sources.py
    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/bench_candidate_sources.py --folds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

TAG_NEIGHBOURS = {"n_candidates": 300}
LISTENERS = {"n_candidates": 300, "k": 200, "power": 2.0}
EMBEDDINGS = {"n_candidates": 300, "rank": 128}
TOPICS = {"lda": {"n_topics": 100, "iterations": 300, "burn_in": 200, "seed": 0},
          "n_candidates": 300, "infer_iterations": 50, "infer_burn_in": 25}
ALONE = {"max_rule_candidates": 0, "text_candidates": False}  # a source's own candidates only
COMBINATIONS: dict[str, dict[str, dict[str, Any]]] = {
    "lastfm": {
        "rules + text (paper)": {},
        "rules alone": {"text_candidates": False},
        "tag neighbours alone": {**ALONE, "neighbours": TAG_NEIGHBOURS},
        "listener neighbours alone": {**ALONE, "profile_neighbours": LISTENERS},
        "tag embeddings alone": {**ALONE, "embeddings": EMBEDDINGS},
        "LDA topics alone": {**ALONE, "topics": TOPICS},
        "+ tag neighbours": {"neighbours": TAG_NEIGHBOURS},
        "+ tag and listener neighbours": {"neighbours": TAG_NEIGHBOURS,
                                          "profile_neighbours": LISTENERS},
        "+ both neighbours + embeddings": {"neighbours": TAG_NEIGHBOURS,
                                           "profile_neighbours": LISTENERS,
                                           "embeddings": EMBEDDINGS},
        "+ both neighbours + embeddings + LDA": {"neighbours": TAG_NEIGHBOURS,
                                                 "profile_neighbours": LISTENERS,
                                                 "embeddings": EMBEDDINGS, "topics": TOPICS},
    },
    "movielens": {
        "rules + title (paper)": {"metadata": False},
        "+ metadata text": {},
        "metadata text alone": {"max_rule_candidates": 0},
        "tag neighbours alone": {**ALONE, "neighbours": TAG_NEIGHBOURS},
        "tag embeddings alone": {**ALONE, "embeddings": EMBEDDINGS},
        "LDA topics alone": {**ALONE, "topics": TOPICS},
        "+ metadata + tag neighbours": {"neighbours": TAG_NEIGHBOURS},
        "+ metadata + tag neighbours + embeddings": {"neighbours": TAG_NEIGHBOURS,
                                                     "embeddings": EMBEDDINGS},
        "+ metadata + tag neighbours + embeddings + LDA": {
            "neighbours": TAG_NEIGHBOURS, "embeddings": EMBEDDINGS, "topics": TOPICS},
    },
}


def load(name: str, metadata: bool) -> Any:
    """The processed folksonomy: Last.fm with listening counts, MovieLens with(out) metadata."""
    from tagtorch.data.loaders.hetrec import load_lastfm, load_movielens_2k
    from tagtorch.data.text import TextProcessor

    data_dir = os.environ["TAGTORCH_DATA_DIR"]
    raw = (load_lastfm(data_dir=data_dir, download=False, listening=True) if name == "lastfm"
           else load_movielens_2k(data_dir=data_dir, download=False, metadata=metadata))
    return TextProcessor().apply(raw)


def recall_curve(name: str, settings: dict[str, Any], folds: list[int],
                 ns: list[int], split: str = "test") -> list[float]:
    """Recall at each N, pooled over the folds' T (or V) objects (gold found / gold tags).

    The generator is fitted once per fold; only its budget changes between the N.
    """
    import torch

    from tagtorch.candidates.latre import LatreCandidates
    from tagtorch.data.terms import TermIndex
    from tagtorch.evaluation.tag_recommendation import TagRecommendationProtocol

    settings = dict(settings)
    folksonomy = load(name, settings.pop("metadata", True))
    terms = TermIndex.from_folksonomy(folksonomy)
    splits = TagRecommendationProtocol(device="cpu").splits(folksonomy)
    found = torch.zeros(len(ns))
    total = 0.0
    for f in folds:
        fold = splits[f]
        queries = fold.test if split == "test" else fold.val
        generator = LatreCandidates(device="cpu", **{"max_rule_candidates": None, **settings})
        generator.fit(fold.train_objects, fold.train_tags, terms)
        for i, n in enumerate(ns):
            generator.max_candidates = n
            candidates = generator(queries)
            found[i] += float(candidates.labels.sum())
        total += float(candidates.n_relevant.sum())
    return (found / total).tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, nargs="+", default=[0])
    parser.add_argument("--ns", type=int, nargs="+", default=[25, 50, 100, 200, 300, 500])
    parser.add_argument("--figure", default="docs/figures/recall_at_n.png")
    parser.add_argument("--split", choices=["test", "val"], default="test",
                        help="the objects measured: T, or V (to choose a source's settings)")
    parser.add_argument("--only", nargs="*", default=None, help="datasets (default: both)")
    args = parser.parse_args()
    if "TAGTORCH_DATA_DIR" not in os.environ:
        sys.exit("set TAGTORCH_DATA_DIR to the folder holding the HetRec data")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tagtorch.storage import atomic_write

    datasets = {name: rows for name, rows in COMBINATIONS.items()
                if args.only is None or name in args.only}
    fig, axes = plt.subplots(1, len(datasets), figsize=(7 * len(datasets), 5), squeeze=False)
    for ax, (name, combinations) in zip(axes[0], datasets.items(), strict=True):
        objects = "T" if args.split == "test" else "V"
        print(f"\n{name}, folds {args.folds}: candidate recall at N ({objects} objects)")
        print(f"{'candidates':<48}" + "".join(f"{n:>8}" for n in args.ns))
        for label, settings in combinations.items():
            curve = recall_curve(name, settings, args.folds, args.ns, args.split)
            print(f"{label:<48}" + "".join(f"{r:>8.3f}" for r in curve), flush=True)
            ax.plot(args.ns, curve, marker="o", markersize=3, label=label,
                    linestyle="--" if "alone" in label else "-")
        target = 0.85 if name == "lastfm" else 0.60
        ax.axhline(target, color="grey", linestyle="--", linewidth=1)
        ax.axvline(300, color="grey", linestyle=":", linewidth=1)
        ax.set(title=f"{name}: gold tags among the candidates", xlabel="candidates per object (N)",
               ylabel="candidate recall", xscale="log")
        ax.set_xticks(args.ns, [str(n) for n in args.ns])
        ax.minorticks_off()
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    with atomic_write(args.figure) as partial:  # never through a link at the name
        fig.savefig(partial, dpi=120, format=Path(args.figure).suffix[1:] or "png")
    print(f"\nfigure: {args.figure}")


if __name__ == "__main__":
    main()
