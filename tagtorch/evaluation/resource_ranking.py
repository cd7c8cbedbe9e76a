"""Resource ranking: objects ranked for a query of tags (Harvey, Ruthven and Carman 2010).

For each seed: the folksonomy, cleaned once as the paper does
(:func:`tagtorch.data.splits.post_filter`), is split per user by time
(:func:`tagtorch.resources.data.resource_ranking_data`: last 10% of each user's posts for test,
the last 10% of the rest for validation); every configured resource ranker learns from the
training documents and ranks every candidate object for each test query. Metrics per query: S@1,
S@5, S@10 and MRR@10, the paper's Table 1 (one relevant object per query, so P@k = S@k / k is
not reported separately). Equal scores are broken by object code for every method.

Tuning: the settings listed for a method in ``tune`` (a grid: ``{method: {setting: [values]}}``)
are chosen on the validation queries by ``tune_metric``, fitting on the training documents; the
chosen model (already fitted on those documents) is then evaluated on test. A grid over settings
that only enter the scoring (a model's ``scoring_settings``, e.g. the mixing weights of
``lda_lm``) fits once and rescores. Every method reports
its validation score (``val_{tune_metric}``), the value to optimize in a sweep. The grid, each
setting's validation score and the choices are written to ``tuning.csv``. Ours, for scale: a
grid scores at most ``tune_queries`` validation queries (a sample drawn with the seed; 5,000 by
default, more than HetRec's splits have), since every query ranks every resource and the
grids repeat that once per setting: at 352k posts tuning on all 30k validation queries took most
of the run.

The run folder holds, like every tagtorch evaluation (:func:`~.runs.write_run`): ``results.csv``,
``per_object.csv.gz`` (per query; ``object`` is the query's TREC id ``q{post key}``, the post
key ``user * n_objects + object``), ``report.md`` (mean ± 95% CI over seeds; paired tests over
queries, each query's values averaged over the seeds, so a query counts once; Holm-corrected),
``run.METHOD.trec`` and ``qrels.trec`` (the first seed's test queries, ranked as the metrics
rank them), plus ``queries.csv`` (per seed:
posts, unanswerable and tagless queries), ``tuning.csv`` and, for topic models, ``curves.csv``
and ``log_likelihood.png`` (the sampler's log-likelihood per token and iteration). Finished
(seed, method) outcomes are kept in ``pieces/`` and reused by a rerun with ``resume=True``
(:class:`~tagtorch.evaluation.runs.RunPieces`); with a ``checkpoint_dir``, each fitted model is
saved to ``{checkpoint_dir}/resources/{dataset}/{method}/seed{k}``.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np
import pandas as pd
import torch

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.splits import post_filter
from tagtorch.errors import DataCheckError
from tagtorch.evaluation.plots import plot_against_setting, plot_learning_curves
from tagtorch.evaluation.runs import (
    EvaluationResult,
    MethodOutcome,
)
from tagtorch.evaluation.task import Outcomes, SeededTask, tuning_notes
from tagtorch.evaluation.trec import qrels_lines, scored_lines
from tagtorch.evaluation.tuning import grid_points
from tagtorch.metrics.functional import top_ranking_metrics
from tagtorch.progress import batch_ranges, progress
from tagtorch.resources.base import ResourceRanker
from tagtorch.resources.data import (
    SPLITS,
    ResourceQueries,
    ResourceSplit,
    resource_ranking_data,
)
from tagtorch.settings import ModelTask
from tagtorch.storage import atomic_write

log = logging.getLogger(__name__)

__all__ = ["ResourceRankingTask"]


class ResourceRankingTask(SeededTask):
    """Evaluates the configured resource rankers (``model``: name -> config) over seeds.

    Args:
        seeds: one split (ties in time) and sampler seed each (the paper's LDA: 5 here).
        test_fraction: share of each user's posts in test (the paper: 0.1).
        val_fraction: share of each user's remaining posts in validation.
        min_object_users: keep objects posted by at least this many users (the paper: > 2).
        min_user_objects: then users with at least this many objects (the paper: > 60).
        min_tag_uses: then tags used at least this many times (the paper: 2).
        ks: cut-offs of S@k.
        metrics: metric names (:func:`~tagtorch.metrics.functional.ranking_metrics`).
        tune: per method, a grid of settings chosen on the validation queries (grids of
            methods that are not run are ignored).
        tune_metric: the validation metric that chooses.
        tune_queries: the most validation queries a grid scores (a seeded sample; None: all).
        batch_size: queries scored per block (memory: ``batch_size x n_objects`` scores).
        trec: write the first seed's qrels and run files (TREC format).
        trec_depth: objects per query in the TREC run files.
        checkpoint_dir: root folder of the fitted models (None: not saved).
        resume: reuse finished (seed, method) outcomes kept in ``pieces/`` of the output folder.
        figure_setting: a model setting (e.g. ``n_topics``): the methods configured with it
            become one line of ``tune_metric`` against it, the others horizontal lines
            (``{tune_metric}_by_{setting}.png``; Harvey et al.'s Figure 1). None: no figure.
        significance: the report's paired tests, ``{test: ttest|wilcoxon|randomization|both,
            n_resamples, seed}`` (:class:`~tagtorch.evaluation.report.Significance`; None: the
            paired t-test).
        backend: where each (seed, method) is fitted and evaluated: ``processes`` (here) or
            the workers of a ``dask`` or ``ray`` cluster (:meth:`~tagtorch.evaluation.task.
            SeededTask.take_shared`).
        address: that cluster's scheduler (None: a local cluster, started for the run).
    """

    model_tasks: ClassVar[tuple[ModelTask, ...]] = ("resources",)
    """The tasks of the models this task runs (read by the config checks)."""

    test_fraction: float
    val_fraction: float
    split: str
    min_object_users: int
    min_user_objects: int
    min_tag_uses: int
    tune_metric: str
    tune_queries: int | None
    batch_size: int
    trec_depth: int
    resume: bool
    figure_setting: str | None

    def __init__(
        self,
        seeds: Sequence[int] = (0, 1, 2, 3, 4),
        test_fraction: float = 0.1,
        val_fraction: float = 0.1,
        split: str = "per_user_time",
        min_object_users: int = 3,
        min_user_objects: int = 61,
        min_tag_uses: int = 2,
        ks: Sequence[int] = (1, 5, 10),
        metrics: Sequence[str] = ("success", "mrr@10"),
        tune: Mapping[str, Mapping[str, Sequence[Any]]] | None = None,
        tune_metric: str = "mrr@10",
        tune_queries: int | None = 5000,
        batch_size: int = 256,
        trec: bool = True,
        trec_depth: int = 100,
        checkpoint_dir: str | Path | None = None,
        resume: bool = False,
        figure_setting: str | None = None,
        significance: Mapping[str, Any] | None = None,
        backend: str = "processes",
        address: str | None = None,
    ) -> None:
        self.take_shared(seeds, significance, backend, address)
        if tune_queries is not None and tune_queries < 1:
            raise ValueError(f"task.tune_queries must be >= 1 or null, got {tune_queries}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if trec_depth < 1:
            raise ValueError(f"trec_depth must be >= 1 (trec=false writes no TREC files), got "
                             f"{trec_depth}")
        self.filters = {"min_object_users": min_object_users,
                        "min_user_objects": min_user_objects, "min_tag_uses": min_tag_uses}
        self.ks = tuple(ks)
        self.metrics = tuple(metrics)
        self.tune = {str(k): {str(s): list(v) for s, v in grid.items()}
                     for k, grid in (tune or {}).items()}
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None

    # -- the run ------------------------------------------------------------------------

    def prepare(self, folksonomy: Folksonomy) -> Folksonomy:
        """The folksonomy filtered as the paper's (``min_*``)."""
        return post_filter(folksonomy, **self.filters)

    def split_seed(self, data: Folksonomy, seed: int, previous: Any,
                   models: Mapping[str, Any]) -> ResourceSplit:
        """One seed's split; the first is checked before any fitting (:meth:`_check_split`)."""
        split = resource_ranking_data(data, self.test_fraction, self.val_fraction, seed,
                                      self.split)
        if self.tune_queries is not None and len(split.val) > self.tune_queries:
            rows = np.sort(np.random.default_rng(seed).choice(len(split.val), self.tune_queries,
                                                              replace=False))
            split = replace(split, val=split.val.take(rows),
                            counts={**split.counts, "val_tuning": self.tune_queries})
        if seed == self.seeds[0]:
            self._check_split(data, split, models)
        return split

    def split_summary(self, split: ResourceSplit) -> Mapping[str, Any]:
        """The split's query counts (``queries.csv``)."""
        return split.counts

    def needs_split(self, seed: int, finished: bool) -> bool:
        """Every seed: each split's query counts are reported."""
        return True

    def qrels(self, split: ResourceSplit) -> list[str]:
        """The test queries' relevant object."""
        return qrels_lines(_query_ids(split.test), [[o] for o in split.test.relevant])

    def outcome(self, data: Folksonomy, split: ResourceSplit, seed: int, name: str,
                node: Mapping[str, Any], done: Outcomes) -> MethodOutcome:
        """One method tuned, fitted and evaluated on a seed (:meth:`_run_method`)."""
        return self._run_method(data, split, seed, name, node)

    def protocol(self) -> list[Any]:
        """The settings every outcome depends on."""
        return [self.test_fraction, self.val_fraction, self.ks, self.metrics, self.tune_metric,
                self.trec_depth, self.tune_queries]

    def write(self, data: Folksonomy, models: Mapping[str, Any], whole: MethodOutcome,
              qrels: list[str] | None, summaries: Mapping[int, Mapping[str, Any]],
              output_dir: Path) -> EvaluationResult:
        """The run folder: results, report, TREC files, query counts, tuning and curves."""
        counts = pd.DataFrame([{"seed": seed, **summaries[seed]} for seed in self.seeds])
        with atomic_write(output_dir / "queries.csv") as partial:
            counts.to_csv(partial, index=False)
        notes, curves = tuning_notes(output_dir, whole, "its validation queries (the last "
                                     f"{self.val_fraction:g} of each user's training posts; "
                                     f"{self.tune_metric})")
        if curves:
            frame = pd.concat(curves, ignore_index=True)
            with atomic_write(output_dir / "curves.csv") as partial:
                frame.to_csv(partial, index=False)
            plot_learning_curves(frame, output_dir / "log_likelihood.png", x="iteration",
                                 series={"train": "log_likelihood"},
                                 ylabel="log-likelihood per token")
        if self.figure_setting is not None:
            values = {name: node[self.figure_setting] for name, node in models.items()
                      if isinstance(node, dict) and self.figure_setting in node}
            plot_against_setting(whole.frames()[0], self.tune_metric, self.figure_setting,
                                 values, output_dir / f"{self.tune_metric}_by_"
                                 f"{self.figure_setting}.png")
        return self.report(
            output_dir, whole, models, qrels,
            title=f"Resource ranking on {data.name} ({len(self.seeds)} seeds as folds)",
            plot_metric=self.tune_metric, notes=[_counts_note(counts), *notes],
            average_folds=True)

    # -- one method on one seed -----------------------------------------------------------

    def _make(self, name: str, node: Mapping[str, Any], seed: int,
              settings: Mapping[str, Any]) -> ResourceRanker:
        changes = {**settings, **({"seed": seed} if "seed" in node else {})}
        return cast(ResourceRanker, self.given.build(name, node, changes))

    def _run_method(self, data: Folksonomy, split: ResourceSplit, seed: int, name: str,
                    node: Mapping[str, Any]) -> MethodOutcome:
        """Tunes (if asked), fits and evaluates one method on one seed's split."""
        grid = self.tune.get(name, {})
        rows = []
        best: tuple[float, ResourceRanker, float, int] | None = None
        start = time.perf_counter()
        fitted: ResourceRanker | None = None  # reused when the grid only changes scoring
        points = grid_points(grid)
        for settings in progress(points, f"seed {seed}, {name}: grid", unit="setting",
                                 enabled=len(points) > 1):
            if fitted is not None and set(settings) <= set(fitted.scoring_settings):
                model = fitted.with_scoring(**settings)
            else:
                fit_start = time.perf_counter()
                model = self._make(name, node, seed, settings).fit(split.documents, split.n_words)
                fitted, fit_seconds = model, time.perf_counter() - fit_start
            score = self._validate(model, split)
            rows.append({"method": name, "seed": seed, "setting": json.dumps(settings),
                         f"val_{self.tune_metric}": score})
            if best is None or score > best[0]:  # the first of equal scores is kept
                best = (score, model, fit_seconds, len(rows) - 1)
        assert best is not None  # product() of an empty grid yields one empty setting
        val_score, model, fit_seconds, chosen = best
        tuning = None
        if grid:
            tuning = pd.DataFrame(rows).assign(chosen=np.arange(len(rows)) == chosen)
            log.info("seed %d, %s: chose %s on validation (%s %.4f); %.1f s for %d settings",
                     seed, name, tuning.loc[tuning["chosen"], "setting"].iloc[0],
                     self.tune_metric, val_score, time.perf_counter() - start, len(rows))
        if self.checkpoint_dir is not None:
            model.save(self.checkpoint_dir / "resources" / data.name / name / f"seed{seed}")
        values, seconds, lines = self._evaluate(model, split, split.test, name,
                                                write_trec=self.writes_trec(seed))
        extra = {f"val_{self.tune_metric}": val_score, "fit_seconds": fit_seconds,
                 "ms_model": 1000 * seconds / max(len(split.test), 1)}
        curves = [frame for frame in (tuning, _sampler_curve(model, name, seed))
                  if frame is not None]
        outcome = MethodOutcome.from_values(name, seed, np.asarray(_query_ids(split.test)),
                                            values, extra=extra, run_lines=lines)
        outcome.curves += curves
        means = outcome.means[name]
        log.info("seed %d, %s: %s", seed, name,
                 ", ".join(f"{k} {means[k]:.4f}" for k in values))
        return outcome

    def _check_split(self, data: Folksonomy, split: ResourceSplit,
                     models: Mapping[str, Any]) -> None:
        """Raises DataCheckError: no test query, or no validation query for a tuned method.

        The advice fits the split in use.
        """
        posts = data.assignments.groupby(["user", "object"]).ngroups
        most = int(data.assignments.groupby("user")["object"].nunique().max())
        per_user = self.split == "per_user_time"
        shape = (f"{posts} posts; the most posts of one user is {most}" if per_user
                 else f"{posts} posts")
        if len(split.test) == 0:
            need = {"per_user_time": f"a user needs >= {math.ceil(1 / self.test_fraction)} "
                                     "posts for one test post",
                    "global_time": f"{self.test_fraction:g} of {posts} posts",
                    "given": "the given test posts"}[self.split]
            advice = {"per_user_time": "set task.split=global_time (the last posts of all "
                                       "users) or raise task.test_fraction",
                      "global_time": "raise task.test_fraction",
                      "given": "give test posts whose resources are also posted in "
                               "training, or set task.split=global_time"}[self.split]
            raise DataCheckError(data.name, f"no test query whose resource is also in "
                                 f"training ({need}; {shape}; counts {split.counts})", advice)
        tuned = sorted(name for name in models if self.tune.get(name))
        if tuned and len(split.val) == 0:
            raise DataCheckError(
                data.name, f"no validation query to tune {', '.join(tuned)} on ({shape}; "
                f"counts {split.counts})",
                "set task.split=global_time, raise task.val_fraction, or tune nothing "
                "(task.tune={})" if per_user else "raise task.val_fraction or tune nothing "
                "(task.tune={})")

    def _validate(self, model: ResourceRanker, split: ResourceSplit) -> float:
        """The mean of ``tune_metric`` over the validation queries."""
        values, _, _ = self._evaluate(model, split, split.val, "", write_trec=False,
                                      metrics=(self.tune_metric,))
        return float(torch.nanmean(values[self.tune_metric]).item())

    def _evaluate(self, model: ResourceRanker, split: ResourceSplit, queries: ResourceQueries,
                  name: str, write_trec: bool, metrics: Sequence[str] | None = None
                  ) -> tuple[dict[str, torch.Tensor], float, list[str] | None]:
        """Per-query metrics, the seconds spent scoring and (with ``write_trec``) run lines."""
        parts: list[dict[str, torch.Tensor]] = []
        lines: list[str] | None = [] if write_trec else None
        candidates = torch.as_tensor(split.candidates)
        seconds = 0.0
        for first, stop in batch_ranges(len(queries), self.batch_size,
                                        f"{name or type(model).__name__}: queries"):
            block = queries.take(np.arange(first, stop))
            start = time.perf_counter()
            scores = model.score(block.words).cpu()
            seconds += time.perf_counter() - start
            labels = torch.zeros(scores.shape, dtype=torch.bool)
            labels[torch.arange(len(block)), torch.as_tensor(block.relevant)] = True
            mask = candidates.expand_as(scores)
            parts.append(top_ranking_metrics(scores, labels, mask, ks=self.ks,
                                             metrics=metrics or self.metrics))
            if lines is not None:
                lines += scored_lines(_query_ids(block), scores, mask, name, self.trec_depth)
        values = {k: torch.cat([p[k] for p in parts]) for k in parts[0]} if parts else {}
        return values, seconds, lines


def _query_ids(queries: ResourceQueries) -> list[str]:
    """The queries' ids in the TREC files and ``per_object.csv.gz``: ``q{post key}``."""
    return [f"q{int(i)}" for i in queries.ids]


def _sampler_curve(model: ResourceRanker, name: str, seed: int) -> pd.DataFrame | None:
    """A topic model's log-likelihood per token and iteration (None for other models)."""
    history = getattr(getattr(model, "model_", None), "log_likelihood_", None)
    if not history:
        return None
    return pd.DataFrame({"iteration": np.arange(1, len(history) + 1),
                         "log_likelihood": np.asarray(history, dtype=float),
                         "method": name, "seed": seed})


def _counts_note(counts: pd.DataFrame) -> str:
    """The report's paragraph on the queries (answerable, left out, tagless)."""
    first = counts.iloc[0]
    return (f"Queries (seed {int(first['seed'])}): {int(first['test_posts'])} test posts, of which "
            f"{int(first['test_unanswerable'])} are left out because their object has no "
            f"training post; {int(first['test_tagless'])} answerable ones have no tag seen in "
            f"training. {int(first['candidates'])} candidate objects, "
            f"{int(first['train_posts'])} training and {int(first['val_posts'])} validation "
            "posts. Every seed's counts: queries.csv.")
