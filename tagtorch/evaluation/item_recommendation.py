"""Evaluation of tag-based item recommendation over seeded splits (the Do-Rank protocol).

For each seed: the p-core of the folksonomy is split at random, by posts by default (80% train,
20% test; a part of train held out for early stopping;
:func:`tagtorch.itemrec.data.item_recommendation_data`), every
configured model learns from the training triples, and ranks all items for every test query:
a ``(user, tag)`` pair (``query="user_tag"``) or a user (``query="user"``, the paper's protocol:
the models' tag-level scores aggregated over tags; :mod:`tagtorch.itemrec.data`). Metrics per
query: NDCG@k and P@k for k = 1..10 and MAP (linear gain, the
queries' known training items excluded from the ranking). The run writes, like every tagtorch
evaluation, ``results.csv`` (``method, fold, metric, value``, where ``fold`` is the seed),
``per_object.csv.gz`` (per query; ``object`` is the query's TREC id), ``report.md`` (mean ±
95% CI over the seeds, paired tests of every pair of methods, Holm-corrected),
``run.METHOD.trec`` (``run.trec`` for a lone method; the top ``trec_depth`` items per test
query of the first seed, ranked as the metrics rank them, equal scores by item code; query ids
``u{user}t{tag}`` or ``u{user}``),
``qrels.trec`` (the first seed's test queries), the learning curves of
the trained models (``curves.csv``: train and validation DCG@10 per epoch;
``learning_curve.png``), and each fitted model into the checkpoint folder
(:func:`tagtorch.evaluation.runs.write_run` writes the run folder, as for tag recommendation).

Resumption works on two levels. Each finished (seed, method) outcome is kept in ``pieces/`` of
the output folder as soon as it is evaluated (gzipped JSON with its settings key: the data's
fingerprint, the method's configuration and the protocol settings;
:class:`~tagtorch.evaluation.runs.RunPieces`); with ``resume=True`` a rerun into that folder
reads the pieces whose settings match instead of fitting those models again (a piece that
cannot be read is run again, with a warning naming it; the pieces are deleted once the report
is written). A training that was interrupted before its outcome was kept resumes from its
``last.ckpt`` (below), whatever ``resume`` says.

Checkpoint layout, per dataset, method and seed, under
``{checkpoint_dir}/itemrec/{dataset}/{method}/seed{k}/``:

- ``model/``: the fitted model (``manifest.json`` with the class, settings and file digests,
  plus ``weights.pt`` of tensors or ``arrays.npz``; see :mod:`tagtorch.storage`);
- ``runs/{key}/``: a factorization model's training state (``last.ckpt``, ``best.ckpt``,
  ``settings.json``), one folder per settings and data (``key`` digests both, see
  :class:`tagtorch.itemrec.base.FactorModel`), from which an interrupted training resumes to
  the result of an uninterrupted one; a run with other settings or data never touches it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.evaluation.plots import plot_learning_curves
from tagtorch.evaluation.runs import EvaluationResult, MethodOutcome
from tagtorch.evaluation.task import Outcomes, SeededTask, tuning_notes
from tagtorch.evaluation.trec import qrels_lines, scored_lines
from tagtorch.evaluation.tuning import (
    Grid,
    check_grids,
    choose,
    grid_points,
    setting_text,
)
from tagtorch.itemrec.base import ItemRanker, mean_dcg_at_10, score_queries
from tagtorch.itemrec.data import ItemRecData, item_recommendation_data
from tagtorch.itemrec.ensemble import ItemEnsemble
from tagtorch.metrics.functional import ranking_metrics
from tagtorch.progress import progress
from tagtorch.settings import ModelTask
from tagtorch.storage import atomic_write

log = logging.getLogger(__name__)

__all__ = ["ItemRecommendationTask"]


class ItemRecommendationTask(SeededTask):
    """Evaluates the configured item rankers (``model``: name -> config) over seeded splits.

    The first method is the reference of the report's significance tests.

    Args:
        seeds: one split (and model initialization) per seed (the paper's figures: 5 seeds).
        p: p-core level.
        test_fraction: share of the core's triples in test.
        val_fraction: share of the training triples held out for early stopping.
        split: ``"posts"`` (the paper's protocol as we read it) or ``"triples"``: the units
            split at random (see :mod:`tagtorch.itemrec.data`).
        query: ``"user_tag"``: a query per test ``(user, tag)`` pair; ``"user"``: a query per
            test user ranking every item the user did not tag in training, the paper's
            protocol (:mod:`tagtorch.itemrec.data`); validation queries are of the same kind.
        aggregate: per-user queries: item scores from tag-level scores by ``"max"`` over all
            tags (the paper's literal reading) or ``"profile"`` (``sum_t P(t | u) s(u, i, t)``).
        ks: cut-offs of NDCG and P.
        metrics: metric families (``ndcg``, ``precision``, ``map``, ...).
        batch_size: queries scored per batch.
        trec: write the first seed's qrels and run files (TREC format).
        trec_depth: items per query written to the TREC run files.
        checkpoint_dir: root folder of the fitted models (None: nothing saved, no resumption
            of interrupted trainings).
        resume: reuse the finished (seed, method) outcomes kept in ``pieces/`` of the output
            folder by an interrupted run into the same folder, when their settings match.
        significance: the report's paired tests, ``{test: ttest|wilcoxon|randomization|both,
            n_resamples, seed}`` (:class:`~tagtorch.evaluation.report.Significance`; None: the
            paired t-test).
        tune: per method, a grid ``{dotted setting: [values]}`` chosen inside each seed on that
            seed's validation queries alone (the held-out ``val_fraction`` of its training
            posts) by the early-stopping score, validation DCG@10: every point is fitted, the
            best model is evaluated on test (:mod:`tagtorch.evaluation.tuning`; the points and
            choices in ``tuning.csv`` and the report). Seeds draw different splits, so a
            setting read on one seed's validation posts, some of them another seed's test
            posts, is never reused across seeds.
        backend: where each (seed, method) is fitted and evaluated: ``processes`` (here) or
            the workers of a ``dask`` or ``ray`` cluster (:meth:`~tagtorch.evaluation.task.
            SeededTask.take_shared`).
        address: that cluster's scheduler (None: a local cluster, started for the run).
    """

    model_tasks: ClassVar[tuple[ModelTask, ...]] = ("itemrec",)
    """The tasks of the models this task runs (read by the config checks)."""

    p: int
    test_fraction: float
    val_fraction: float
    query: str
    aggregate: str
    batch_size: int
    trec_depth: int
    resume: bool

    def __init__(
        self,
        seeds: Sequence[int] = (0, 1, 2, 3, 4),
        p: int = 5,
        test_fraction: float = 0.2,
        val_fraction: float = 0.25,
        split: str = "posts",
        query: str = "user_tag",
        aggregate: str = "max",
        ks: Sequence[int] = tuple(range(1, 11)),
        metrics: Sequence[str] = ("ndcg", "precision", "map"),
        batch_size: int = 1024,
        trec: bool = True,
        trec_depth: int = 100,
        checkpoint_dir: str | Path | None = None,
        resume: bool = False,
        significance: Mapping[str, Any] | None = None,
        tune: Mapping[str, Grid] | None = None,
        backend: str = "processes",
        address: str | None = None,
    ) -> None:
        self.take_shared(seeds, significance, backend, address)
        if trec_depth < 1:
            raise ValueError(f"trec_depth must be >= 1 (trec=false writes no TREC files), got "
                             f"{trec_depth}")
        self.split = split
        self.ks = tuple(ks)
        self.metrics = tuple(metrics)
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None
        self.tune = check_grids(tune, "tune")
        self._kept_fits: dict[str, tuple[ItemRanker, dict[str, Any], dict[str, Any]]] = {}
        """This seed's fits of the methods an ensemble of the run lists as members: ``{name:
        (model, grid, point)}`` (:meth:`ItemEnsemble.reuse`)."""
        self._ensemble_members: set[str] = set()

    def seed_data(self, folksonomy: Folksonomy, seed: int) -> ItemRecData:
        """The split of one seed."""
        return item_recommendation_data(folksonomy, p=self.p, test_fraction=self.test_fraction,
                                        val_fraction=self.val_fraction, seed=seed,
                                        split=self.split, query=self.query,
                                        aggregate=self.aggregate)

    def _make(self, node: Mapping[str, Any], name: str, dataset: str, seed: int,
              point: Mapping[str, Any]) -> tuple[ItemRanker, Path | None]:
        """Builds a model at a grid point; factor models get the seed and a checkpoint folder."""
        changes: dict[str, Any] = dict(point)
        folder = None
        if self.checkpoint_dir is not None:
            folder = self.checkpoint_dir / "itemrec" / dataset / name / f"seed{seed}"
        if "checkpoint_dir" in node:
            changes["checkpoint_dir"] = str(folder) if folder is not None else None
        if "seed" in node:
            changes["seed"] = seed
        return self.given.build(name, node, changes), folder

    def split_seed(self, data: Folksonomy, seed: int, previous: Any,
              models: Mapping[str, Any]) -> ItemRecData:
        """The split of one seed (:meth:`seed_data`); the fits an ensemble may reuse reset."""
        self._kept_fits = {}
        self._ensemble_members = {member for node in models.values()
                                  if str(node.get("_target_", "")).endswith(".ItemEnsemble")
                                  for member in node.get("members", {})}
        return self.seed_data(data, seed)

    def qrels(self, split: ItemRecData) -> list[str]:
        """The test queries' relevant items."""
        queries = split.test_queries
        return qrels_lines(queries.ids(range(len(queries))), queries.gold)

    def outcome(self, data: Folksonomy, split: ItemRecData, seed: int, name: str,
                node: Mapping[str, Any], done: Outcomes) -> MethodOutcome:
        """One model tuned, fitted and evaluated on a seed (:meth:`_run_model`)."""
        return self._run_model(data, split, seed, name, node, self.writes_trec(seed))

    def protocol(self) -> list[Any]:
        """The settings every outcome depends on."""
        return [self.p, self.test_fraction, self.val_fraction, self.split, self.ks,
                self.metrics, self.trec_depth, self.query, self.aggregate]

    def write(self, data: Folksonomy, models: Mapping[str, Any], whole: MethodOutcome,
              qrels: list[str] | None, summaries: Mapping[int, Mapping[str, Any]],
              output_dir: Path) -> EvaluationResult:
        """The report, the tuning table and the learning curves."""
        notes, whole.curves = tuning_notes(
            output_dir, whole, "its own validation posts (the held-out "
            f"{self.val_fraction:g} of its training posts; DCG@10)")
        result = self.report(output_dir, whole, models, qrels, title=(
            f"Tag-based item recommendation on the {self.p}-core of {data.name} "
            f"({len(self.seeds)} seeds as folds)"),
            plot_metric=f"ndcg@{max(self.ks)}" if "ndcg" in self.metrics else None,
            notes=notes)
        if whole.curves:
            curve_frame = pd.concat(whole.curves, ignore_index=True)
            with atomic_write(output_dir / "curves.csv") as partial:
                curve_frame.to_csv(partial, index=False)
            plot_learning_curves(curve_frame, output_dir / "learning_curve.png")
        return result

    def _run_model(self, folksonomy: Folksonomy, data: ItemRecData, seed: int, name: str,
                   node: Mapping[str, Any], write_trec: bool) -> MethodOutcome:
        """One model's fit on a seed's training data and its evaluation on the test queries.

        A method with a ``tune`` grid is fitted once per point; the best by validation DCG@10
        is evaluated.
        """
        rows, best = [], None
        grid = grid_points(self.tune.get(name, {}))
        for point in progress(grid, f"seed {seed}, {name}: grid", unit="setting",
                              enabled=len(grid) > 1):
            model, folder = self._make(node, name, folksonomy.name, seed, point)
            if isinstance(model, ItemEnsemble):
                log.info("seed %d, %s: reuses the run's fits of %s", seed, name,
                         model.reuse(self._kept_fits) or "no member")
            start = time.perf_counter()
            model.fit(data)
            seconds = time.perf_counter() - start
            score = self._validation_score(model, data)
            rows.append({"method": name, "seed": seed, "setting": setting_text(point),
                         "val_dcg@10": score})
            if best is None or score > best[0]:  # the first of equal scores is kept
                best = (score, model, folder, seconds, point)
        assert best is not None  # a grid has at least one point
        _, model, folder, fit_seconds, chosen = best
        if name in self._ensemble_members:  # an ensemble of this run may take it as it is
            self._kept_fits[name] = (model, self.tune.get(name, {}), chosen)
        tuning = choose(rows, "val_dcg@10") if name in self.tune else None
        if folder is not None:
            model.save(folder / "model")
        values, seconds, lines = self._evaluate(model, data, name, write_trec)
        n_queries = len(next(iter(values.values())))
        extra: dict[str, float] = {}
        history = getattr(model, "history_", None)
        curve = None
        if history:
            curve = pd.DataFrame(history).assign(method=name, seed=seed)
            extra["best_epoch"] = float(getattr(model, "best_epoch_", None) or 0)
        # the early-stopping score: select hyperparameters on it, never on test
        extra["val_dcg@10"] = best[0]
        extra.update(fit_seconds=fit_seconds, ms_model=1000 * seconds / n_queries)
        outcome = MethodOutcome.from_values(name, seed, np.asarray(data.test_queries.ids(
            range(n_queries))), values, extra=extra, run_lines=lines, curve=curve)
        outcome.curves += [] if tuning is None else [tuning]
        means = outcome.means[name]
        log.info("seed %d, %s: %s (fit %.1f s)", seed, name, ", ".join(
            f"{k} {means[k]:.4f}" for k in ("ndcg@10", "p@10", "map") if k in means),
            fit_seconds)
        return outcome

    def _validation_score(self, model: ItemRanker, data: ItemRecData) -> float:
        """The early-stopping score, validation DCG@10.

        The best epoch's, or computed for a model without training curve (the count baselines).
        """
        history = getattr(model, "history_", None)
        if history:
            return max(float(h["val_dcg@10"]) for h in history)
        return self._validation_dcg(model, data)

    def _validation_dcg(self, model: ItemRanker, data: ItemRecData) -> float:
        """Mean DCG@10 of the validation queries: what the factor models early-stop on."""
        return mean_dcg_at_10(model, data.val_queries, data.n_items, data.n_tags,
                              self.batch_size)

    def _evaluate(self, model: ItemRanker, data: ItemRecData, name: str, write_trec: bool
                  ) -> tuple[dict[str, torch.Tensor], float, list[str] | None]:
        """Per-query metrics of the test queries, the seconds spent scoring, the run lines.

        With ``write_trec``, the TREC run lines of the top ``trec_depth`` items of each query,
        ranked as the metrics rank them (:func:`~tagtorch.evaluation.trec.scored_lines`; else
        None).
        """
        parts: list[dict[str, torch.Tensor]] = []
        lines: list[str] | None = [] if write_trec else None
        seconds = 0.0
        start = time.perf_counter()
        for rows, scores, labels, mask in score_queries(model, data.test_queries, data.n_items,
                                                        data.n_tags, self.batch_size):
            seconds += time.perf_counter() - start
            parts.append(ranking_metrics(scores, labels, mask, ks=self.ks, metrics=self.metrics))
            if lines is not None:
                lines += scored_lines(data.test_queries.ids(rows), scores, mask, name,
                                      self.trec_depth)
            start = time.perf_counter()
        return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}, seconds, lines

