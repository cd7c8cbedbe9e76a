"""Ablation of the extended candidate set: each source and feature group removed in turn.

For HetRec Last.fm or MovieLens (``$TAGTORCH_DATA_DIR``), with the settings of
``+experiment=extended_lastfm`` / ``extended_movielens`` (its ``candidate_sets.extended`` and
its ranker, by default ``lambdamart_extended``), on the chosen folds of the D/V/T protocol: the
ranker learns on V and is evaluated on T, once with everything, then

- without one **source** (its candidates and its features; the generator is fitted again):
  rule consequents (``max_rule_candidates=0``: the rules still give every candidate its rule
  features), text terms, tag neighbours, listener neighbours, tag embeddings, LDA topics (each
  where the experiment's set has it);
- without one **feature group** (same candidates, the features left out of V and T): Table I's
  13, the sources' scores (``knn``, ``knn_profile``, ``emb``, ``p_lda``), their reciprocal ranks
  (``rr_*``), agreement and fusion (``agreement``, ``rrf``), and every feature of ours at once.

Prints NDCG@5 and candidate recall (mean ± 95% CI over folds) and the difference to the full
set with a paired t test over T's objects (all folds), as a markdown table; ``--out`` also
writes it (with a CSV beside it), after each fold with the folds done so far.

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/ablation_extended.py --dataset lastfm
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

SOURCES = {  # removed source -> the generator settings that remove it
    "rule consequents": {"max_rule_candidates": 0},
    "text terms": {"text_candidates": False},
    "tag neighbours": {"neighbours": None},
    "listener neighbours": {"profile_neighbours": None},
    "tag embeddings": {"embeddings": None},
    "LDA topics": {"topics": None},
}


SOURCE_SCORES = ("knn", "knn_profile", "emb", "p_lda")  # the sources' own scores


def feature_groups(names: tuple[str, ...]) -> dict[str, list[str]]:
    """Removed feature group -> the features it holds among ``names``."""
    from tagtorch.candidates.latre import FEATURE_NAMES

    scores = [n for n in SOURCE_SCORES if n in names]
    groups = {
        "Table I features (13)": list(FEATURE_NAMES),
        f"source scores ({', '.join(scores)})": scores,
        "source ranks (rr_*)": [n for n in names if n.startswith("rr_")],
        "agreement and fusion": [n for n in ("agreement", "rrf") if n in names],
        "all features of ours": [n for n in names if n not in FEATURE_NAMES],
    }
    return {name: group for name, group in groups.items() if group}


def compose(dataset: str) -> Any:
    """The experiment's configuration, composed as ``python -m tagtorch.train`` does."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    conf = Path(__file__).resolve().parents[1] / "tagtorch" / "conf"
    with initialize_config_dir(version_base="1.3", config_dir=str(conf)):
        return hydra_compose("train", overrides=[
            f"+experiment=extended_{dataset}", "logger=none", "paths.output_dir=outputs/ablation"])


def write_table(rows: list[dict[str, Any]], dataset: str, method: str,
                out: str | None) -> str:
    """The markdown table of the folds done so far (written to ``out`` and a CSV beside it)."""
    import numpy as np
    import pandas as pd

    from tagtorch.evaluation.report import interval_cell
    from tagtorch.evaluation.stats import confidence_interval, paired_test

    frame = pd.DataFrame(rows)
    folds = sorted(frame.fold.unique().tolist())
    full_ndcg = np.concatenate(list(frame[frame.variant == "full extended set"].ndcg))
    table = []
    for name, part in frame.groupby("variant", sort=False):
        ndcg = np.concatenate(list(part.ndcg))
        mean, half = confidence_interval([float(x.mean()) for x in part.ndcg])
        recall, recall_half = confidence_interval(part.recall.to_numpy())
        test = paired_test(ndcg, full_ndcg) if name != "full extended set" else None
        table.append({
            "removed": name, "features": int(part.features.iloc[0]),
            "NDCG@5": interval_cell(mean, half),
            "vs full": "" if test is None else f"{test.mean_difference:+.4f}",
            "p (paired t)": "" if test is None else f"{test.p_value:.1e}",
            "recall": interval_cell(recall, recall_half)})
    markdown = pd.DataFrame(table).to_markdown(index=False)
    title = (f"{dataset}, {method}, folds {folds}: NDCG@5 and candidate recall "
             f"(mean ± 95% CI over folds); vs full: paired over T's objects")
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(f"{title}\n\n{markdown}\n")
        pd.DataFrame(table).to_csv(Path(out).with_suffix(".csv"), index=False)
    return f"{title}\n\n{markdown}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=["lastfm", "movielens"], default="lastfm")
    parser.add_argument("--folds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--method", default="lambdamart_extended",
                        help="the experiment's method (a ranker of the extended set)")
    parser.add_argument("--out", default=None, help="write the table here (markdown)")
    args = parser.parse_args()
    if "TAGTORCH_DATA_DIR" not in os.environ:
        sys.exit("set TAGTORCH_DATA_DIR to the folder holding the HetRec data")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
    import numpy as np
    import torch
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from tagtorch.data.terms import TermIndex
    from tagtorch.metrics.functional import ndcg_at_k

    cfg = compose(args.dataset)
    settings = OmegaConf.to_container(cfg.candidate_sets.extended, resolve=True)
    ranker_config = OmegaConf.to_container(cfg.model[args.method], resolve=True)
    folksonomy = instantiate(cfg.text).apply(instantiate(cfg.data))
    terms = TermIndex.from_folksonomy(folksonomy)
    splits = instantiate(cfg.task).splits(folksonomy)
    sources = {name: change for name, change in SOURCES.items()
               if any(settings.get(key) not in (None, False, 0) for key in change)}

    def evaluate(val: Any, test: Any) -> tuple[np.ndarray, float]:
        ranker = instantiate(ranker_config).fit(val, None)
        with torch.no_grad():
            scores = torch.cat([ranker.score(batch).float() for batch in test.batches(4096)])
        ndcg = ndcg_at_k(scores, test.labels, test.mask, 5, n_relevant=test.n_relevant)
        return ndcg.numpy(), float(test.labels.sum() / test.n_relevant.sum())

    rows: list[dict[str, Any]] = []
    for f in args.folds:
        fold = splits[f]
        start = time.perf_counter()
        full = instantiate(settings).fit(fold.train_objects, fold.train_tags, terms)
        val, test = full(fold.val), full(fold.test)
        variants = {"full extended set": (val, test)}
        for group, names in feature_groups(val.feature_names).items():
            variants[f"- {group}"] = (val.without_features(names), test.without_features(names))
        for name, change in sources.items():
            generator = instantiate({**settings, **change}).fit(
                fold.train_objects, fold.train_tags, terms)
            variants[f"- {name}"] = (generator(fold.val), generator(fold.test))
        for name, (v, t) in variants.items():
            ndcg, recall = evaluate(v, t)
            rows.append({"variant": name, "fold": f, "ndcg": ndcg, "recall": recall,
                         "features": len(v.feature_names)})
        print(f"fold {f}: {len(variants)} variants in {time.perf_counter() - start:.0f} s",
              flush=True)
        write_table(rows, args.dataset, args.method, args.out)  # the folds done so far
    print(f"\n{write_table(rows, args.dataset, args.method, args.out)}")


if __name__ == "__main__":
    main()
