"""Ablation of the extended candidate set: each source and feature group removed in turn.

For an extended-set experiment (``+experiment=extended_lastfm`` or ``extended_movielens``, on
HetRec data under ``$TAGTORCH_DATA_DIR``), on the chosen folds of the D/V/T protocol: the set's
settings are chosen on each fold's own V as the experiment chooses them (``task.tune_candidates``,
by candidate recall), the experiment's ranker (by default ``lambdamart_extended``) learns on V and
is evaluated on T, once with everything (``full``), then

- without one **source** (its candidates and its features; the generator is fitted again with
  the fold's chosen settings less that source): rule consequents (``max_rule_candidates=0``: the
  rules still give every candidate its rule features), text terms, tag neighbours, listener
  neighbours, tag embeddings, LDA topics (each where the fold's set has it);
- without one **feature group** (same candidates, the features left out of V and T): Table I's
  13, the sources' scores (``knn``, ``knn_profile``, ``emb``, ``p_lda``), their reciprocal ranks
  (``rr_*``), agreement and fusion (``agreement``, ``rrf``), and every feature of ours at once.

Each variant is a method of one run folder (``--out``), written as ``python -m tagtorch.train``
writes its own (:func:`tagtorch.evaluation.runs.write_run`: ``results.csv``, the per-object
values, ``report.md`` with the variants best first by NDCG@5 and paired t tests over T's objects
of every pair, Holm-corrected) with ``config.yaml`` and ``provenance.json``, after each fold with
the folds done so far; ``python benchmarks/provenance.py NAME=FOLDER`` records it.

Usage (the folds: the experiment's, or ``'task.folds=[0,1]'``)::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/ablation_extended.py \\
        --experiment extended_lastfm --out outputs/ablation_lastfm
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any

SOURCES = {  # removed source -> the generator settings that remove it
    "no_rule_consequents": {"max_rule_candidates": 0},
    "no_text_terms": {"text_candidates": False},
    "no_tag_neighbours": {"neighbours": None},
    "no_listener_neighbours": {"profile_neighbours": None},
    "no_tag_embeddings": {"embeddings": None},
    "no_lda_topics": {"topics": None},
}
SOURCE_SCORES = ("knn", "knn_profile", "emb", "p_lda")  # the sources' own scores
FULL = "full"


def feature_groups(names: tuple[str, ...]) -> dict[str, list[str]]:
    """Variant name -> the features it leaves out, among ``names`` (empty groups dropped)."""
    from tagtorch.candidates.latre import FEATURE_NAMES

    groups = {
        "no_table1_features": list(FEATURE_NAMES),
        "no_source_scores": [n for n in SOURCE_SCORES if n in names],
        "no_source_ranks": [n for n in names if n.startswith("rr_")],
        "no_agreement_fusion": [n for n in ("agreement", "rrf") if n in names],
        "no_features_of_ours": [n for n in names if n not in FEATURE_NAMES],
    }
    return {name: group for name, group in groups.items() if group}


def compose(experiment: str, overrides: list[str], out: Path) -> Any:
    """The experiment's configuration, composed as ``python -m tagtorch.train`` does."""
    from tagtorch.api import compose as compose_config

    return compose_config([f"+experiment={experiment}", "logger=none",
                           f"paths.output_dir={out}", *overrides])


def ablated_sources(cfg: Any, set_name: str) -> dict[str, dict[str, Any]]:
    """The sources of :data:`SOURCES` that the set has, or that its grid can choose."""
    from omegaconf import OmegaConf

    base = OmegaConf.to_container(cfg.candidate_sets[set_name], resolve=True)
    grid = OmegaConf.to_container(cfg.task.tune_candidates, resolve=True).get(set_name) or {}

    def possible(key: str) -> bool:
        values = grid[key] if isinstance(grid.get(key), list) else [grid.get(key)]
        return base.get(key) not in (None, False, 0) or any(v not in (None, False, 0)
                                                             for v in values)

    return {name: change for name, change in SOURCES.items() if any(map(possible, change))}


def fold_variants(task: Any, folksonomy: Any, cfg: Any, set_name: str, fold: int
                  ) -> dict[str, tuple[Any, Any]]:
    """Variant name -> its (V, T) candidate sets on one fold (a source that the fold's chosen
    settings leave out: the full sets, the same objects)."""
    from hydra.utils import instantiate

    from tagtorch.data.terms import TermIndex

    generator = instantiate(cfg.candidate_sets[set_name])
    val, test, fitted = task.fold_candidates(folksonomy, generator, fold, name=set_name)
    variants = {FULL: (val, test)}
    for name, group in feature_groups(val.feature_names).items():
        variants[name] = (val.without_features(group), test.without_features(group))
    chosen = fitted.settings()
    split = task.splits(folksonomy)[fold]
    terms = TermIndex.from_folksonomy(folksonomy)
    for name, change in ablated_sources(cfg, set_name).items():
        if all(chosen.get(key) in (None, False, 0) for key in change):
            variants[name] = variants[FULL]  # not in this fold's set: nothing to remove
            continue
        without = fitted.unfitted(**change).fit(split.train_objects, split.train_tags, terms)
        variants[name] = (without(split.val), without(split.test))
    return variants


def evaluate(task: Any, ranker_config: dict[str, Any], val: Any, test: Any
             ) -> tuple[Any, dict[str, Any], dict[str, float]]:
    """The ranker learns on ``val`` and is scored on ``test``: T's objects, their metric values
    and the set's figures (candidate recall, size and coverage)."""
    import torch
    from hydra.utils import instantiate

    from tagtorch.evaluation.tag_recommendation import candidate_figures
    from tagtorch.metrics.functional import ranking_metrics

    ranker = instantiate(ranker_config).fit(val, None)
    with torch.no_grad():
        scores = torch.cat([ranker.score(batch).float() for batch in test.batches(4096)])
    values = ranking_metrics(scores, test.labels, test.mask, n_relevant=test.n_relevant,
                             ks=task.ks, metrics=task.metrics)
    return test.objects.numpy(), values, candidate_figures(test)


def fold_note(fold: int, variants: dict[str, tuple[Any, Any]]) -> str:
    """The report's note on one fold: each variant's feature count, and the sources that the
    fold's chosen set did not have (those variants are the full set)."""
    features = ", ".join(f"{name} {len(val.feature_names)}"
                         for name, (val, _) in variants.items())
    same = [name for name, sets in variants.items()
            if name != FULL and sets is variants[FULL]]
    return (f"Fold {fold}: features {features}."
            + (f" Equal to {FULL} (the fold's set has no such source): {', '.join(same)}."
               if same else ""))


def start_run(cfg: Any, out: Path, argv: list[str]) -> None:
    """The run folder's ``config.yaml`` and ``provenance.json``, as the train command writes."""
    from omegaconf import OmegaConf

    from tagtorch.evaluation.provenance import PROVENANCE_FILE, run_provenance
    from tagtorch.storage import atomic_write, write_json

    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "config.yaml") as partial:
        OmegaConf.save(cfg, partial, resolve=True)
    command = " ".join(["python benchmarks/ablation_extended.py", *map(shlex.quote, argv)])
    write_json(run_provenance(command), out / PROVENANCE_FILE)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="extended_lastfm",
                        choices=["extended_lastfm", "extended_movielens"])
    parser.add_argument("--method", default="lambdamart_extended",
                        help="the experiment's method (a ranker of the extended set)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the run folder (default: outputs/ablation_EXPERIMENT)")
    parser.add_argument("overrides", nargs="*",
                        help="further Hydra overrides, e.g. 'task.folds=[0,1]'")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from tagtorch.evaluation.runs import MethodOutcome, write_run

    out = args.out or Path("outputs") / f"ablation_{args.experiment}"
    cfg = compose(args.experiment, args.overrides, out)
    set_name = cfg.method_candidates[args.method]
    ranker_config = OmegaConf.to_container(cfg.model[args.method], resolve=True)
    task = instantiate(cfg.task)
    folksonomy = instantiate(cfg.text).apply(instantiate(cfg.data))
    start_run(cfg, out, argv)
    outcomes: list[Any] = []
    notes: list[str] = []
    for fold in task.folds:
        began = time.perf_counter()
        variants = fold_variants(task, folksonomy, cfg, set_name, fold)
        done: dict[int, Any] = {}  # a variant equal to another is evaluated once
        for name, (val, test) in variants.items():
            if id(val) not in done:
                done[id(val)] = evaluate(task, ranker_config, val, test)
            evaluated = done[id(val)]
            outcomes.append(MethodOutcome.from_values(name, fold, evaluated[0], evaluated[1],
                                                      extra=evaluated[2]))
        notes.append(fold_note(fold, variants))
        results, per_object = MethodOutcome.merge(outcomes).frames()
        report = write_run(out, results, per_object, plot_metric=f"ndcg@{task.ks[0]}",
                           title=f"Ablation of {set_name} ({args.method}), {folksonomy.name}",
                           notes=notes)
        print(f"fold {fold}: {len(variants)} variants in {time.perf_counter() - began:.0f} s",
              flush=True)
    print(report.split("\n## ", 2)[1] if "\n## " in report else report)


if __name__ == "__main__":
    main()
