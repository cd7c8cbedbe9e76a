"""The tag-recommendation evaluation protocol of Canuto et al. (JIDM 2013), Section 5.2.

For every fold: mine rules and statistics from D, build candidate sets for V and T, let each
ranker learn on V, score T, and compute per-object metrics. The run writes ``results.csv``
(``method, fold, metric, value``), ``per_object.csv.gz`` (the per-object values behind the
paired tests), ``report.md`` (mean ± 95% CI over folds, paired tests of every pair of methods
(the ``significance`` setting), recommendation time per stage, and each method's candidate
coverage: test objects with no candidate at all and with no gold tag among their candidates,
``evaluated_objects``, ``no_candidates`` and ``no_gold_candidates`` in ``results.csv``),
the test rankings as TREC run files and the gold tags as
``qrels.trec``, for xTReD and GP_rnd methods the relevance-diversity trade-off on V
(``tradeoff.csv``, ``tradeoff.png``: NDCG@5 against alpha-NDCG@5 as λ goes from 0 to 1, and
GP_rnd's points for its ``α`` values), and a bar chart of
NDCG@k with confidence whiskers (``ndcg@5.png``).

Recommendation time is split into the paper's four stages (Table VII): lazy rule generation
(``rules``: Sum with ℓ = 1 and ℓ), metric computation (``features``: the other metrics),
model application (``model``) and candidate sorting (``sort``), in milliseconds per test
object, plus, for xTReD, its re-ranking (``diversify``, taken out of ``model``). ``ms_*`` are
measured in batched mode (all test objects, in chunks); ``online_ms_*`` in single-object mode,
one object at a time as an online recommender serves it, on the first ``online_objects`` test
objects of each fold (``online_ms_median`` is the median total).

While a run goes, each finished (fold, method) outcome is kept in ``pieces/`` of the output
folder (gzipped JSON, never a pickle; :class:`~tagtorch.evaluation.runs.RunPieces`); with
``resume=True`` a rerun into that folder reuses those whose settings match, so an interrupted
comparison continues where it stopped. A piece that cannot be read is run again, with a warning
naming it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, cast

import numpy as np
import pandas as pd
import torch
from hydra.utils import instantiate
from joblib import Parallel, delayed
from omegaconf import DictConfig
from tqdm.auto import tqdm

from tagtorch.candidates.cache import CandidateCache
from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.candidates.generator import CandidateGenerator, generate_in_tasks
from tagtorch.data.download import user_cache_dir
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries, TagRecFold, tag_recommendation_folds
from tagtorch.data.terms import TermIndex
from tagtorch.devices import resolve_device
from tagtorch.engines import BACKENDS, joblib_engine
from tagtorch.evaluation.plots import plot_tradeoff
from tagtorch.evaluation.report import Significance, markdown_report
from tagtorch.evaluation.runs import (
    DEFAULT_SET,
    EvaluationResult,
    GivenObjects,
    MethodOutcome,
    MetricLogger,
    RunPieces,
    Task,
    methods_of,
    write_run,
)
from tagtorch.evaluation.timings import (
    TimingLog,
    announce,
    data_size,
    reference_key,
    timing_key,
)
from tagtorch.evaluation.trec import qrels_lines, run_file_names, scored_lines
from tagtorch.evaluation.tuning import (
    Grid,
    check_grids,
    choose,
    grid_points,
    mean_metric,
    metric_cutoff,
    setting_text,
    split_tuning,
    with_settings,
    write_tuning,
)
from tagtorch.metrics.diversity import diversity_metrics, tag_incidence
from tagtorch.metrics.functional import ranking_metrics
from tagtorch.progress import progress
from tagtorch.rankers.base import Ranker, fit_ranker
from tagtorch.settings import ModelTask, SignatureSettings
from tagtorch.storage import atomic_write

log = logging.getLogger(__name__)

STAGES = ("rules", "features", "model", "diversify", "sort")
"""Recommendation stages timed per object; ``diversify`` (xTReD's re-ranking) only for methods
that re-rank (their ``diversify_seconds``), taken out of ``model``."""


_TunedSet = tuple[CandidateGenerator, CandidateCache | None, CandidateSet, pd.DataFrame]
"""A candidate set chosen on V: its generator, cache, V candidates and the tuning rows."""


_Timing = tuple[TimingLog, Mapping[str, str], int]
"""This machine's timing records, the timing key of each method (and ``SET_KEY + set``), the
data's size (:mod:`~tagtorch.evaluation.timings`)."""
SET_KEY = "candidates:"
"""Prefixes a candidate set's name among the timing keys (a method may share a set's name)."""
SET_SOURCES = ("topics", "neighbours", "profile_neighbours", "embeddings", "diversity",
               "distances")
"""A candidate generator's settings that add a source or a stage: a set's reference timing is
keyed by its class and those it has on (:func:`~tagtorch.evaluation.timings.reference_key`)."""


class FoldCandidates(NamedTuple):
    """One fold's candidate sets (:meth:`TagRecommendationProtocol.fold_candidates`)."""

    val: CandidateSet  # what the rankers learn on (V)
    test: CandidateSet  # what they are evaluated on (T)
    generator: CandidateGenerator  # the generator fitted on the fold's D that made them


@dataclass
class _PreparedFold:
    """A fold with its fitted candidate generator and the candidate sets of V and T.

    T's set may come later (:meth:`TagRecommendationProtocol._add_test`): in one process every
    method of the fold is fitted first, then V's set is dropped and T's is made, so that the
    two are never held together (at a million objects each is ~3 GB).
    """

    fold: TagRecFold
    generator: CandidateGenerator
    val: CandidateSet | None  # None once every method of the fold is fitted
    test: CandidateSet | None  # None until made
    name: str = DEFAULT_SET  # the candidate set (``candidate_sets`` of the protocol)
    tuning: pd.DataFrame | None = None  # the set's grid on this fold's V (``tune_candidates``)
    cache: CandidateCache | None = None  # where T's set is kept (None: made anew)
    shared: dict[str, float] = field(default_factory=dict)  # figures every method of the fold
    # reports (candidate recall, ...), known once T's set is made
    seconds: float = 0.0  # the preparation's seconds so far (V's set, then T's)


@dataclass(frozen=True)
class _FittedMethod:
    """A method fitted on a fold's V: the ranker, its tuning rows and its seconds."""

    name: str
    ranker: Ranker
    tuning: list[pd.DataFrame]
    fit_seconds: float  # ``fit`` alone
    seconds: float  # tuning and fit


class TagRecommendationProtocol(SignatureSettings):
    """Runs rankers through the 5-fold D/V/T protocol and evaluates them on T.

    Args:
        n_folds: portions and folds (the paper: 5).
        folds: run only these fold indices (default: all).
        input_fraction: share of each V/T object's tags given as input (the paper: 0.5).
        min_tags: minimum distinct tags of an evaluated object (the paper: 2).
        sample_size: sample N eligible objects first (the paper's N; None: all).
        ks: cut-offs of NDCG, P, R and S (the paper: k = 5).
        metrics: metric families (see :func:`tagtorch.metrics.functional.ranking_metrics`).
        batch_size: objects scored per batch.
        device: where rankers score (``"auto"``: CUDA when present).
        seed: seed of the split.
        trec: write ``run.trec`` and ``qrels.trec``.
        online_objects: test objects per fold timed in single-object mode (0: none).
        cache: keep candidate sets on disk, keyed by data, fold and feature configuration.
        cache_dir: the cache folder (default: ``candidates/`` in the user cache folder).
        n_jobs: parallel processes (1: all in this process, with a progress bar; -1: one per
            core): the folds' candidate sets are built in parallel, then every (fold, method)
            pair is fitted and evaluated in parallel. Rankers built on tree libraries use all
            cores themselves; timings measured in parallel share the cores.
        checkpoint_dir: every fitted ranker is saved to
            ``{checkpoint_dir}/{dataset}/{method}/fold{k}`` (a folder with ``manifest.json`` and
            the model files for the tree and neural rankers, one JSON file for the others; the
            ranker class's ``load`` reads it back). None: nothing saved.
        evaluate_on: ``"test"``: rankers learn on V and are evaluated on T (the paper's
            protocol); ``"validation"``: for tuning (hyperparameter sweeps), a seeded
            ``tune_fraction`` of each fold's V objects is held out, the rankers learn on the
            rest of V and are evaluated on the held-out part, and T is never read (no TREC files,
            no single-object timing on T): every figure is then a validation figure.
        tune_fraction: share of V held out with ``evaluate_on="validation"``.
        backend: where the parallel jobs run (:mod:`tagtorch.engines`): ``"processes"`` on
            this machine (with ``n_jobs`` != 1), ``"dask"`` or ``"ray"`` on a cluster (always
            parallel; ``n_jobs``: concurrent jobs, -1 as many as the cluster takes).
        address: the Dask or Ray cluster's address (None: a local cluster for the run).
        task_objects: generate each split's candidates in independent tasks of this many
            objects (:func:`~tagtorch.candidates.generator.generate_in_tasks`), run on the
            ``backend`` like the other jobs: the folds are then prepared one after another,
            each split's tasks in parallel (for millions of objects). The candidate sets equal
            the one-process ones. None: one call per split, folds in parallel.
        resume: reuse the finished (fold, method) outcomes of an interrupted run into the same
            output folder. While a run goes, each outcome is kept in ``pieces/`` there, with
            the method's configuration, the candidate features and the protocol settings; a
            piece whose settings all match is read instead of fitting again. The pieces are
            deleted once the report is written.
        tune: per method, a grid ``{dotted setting: [values]}`` chosen inside each fold on that
            fold's V alone (nested; :mod:`tagtorch.evaluation.tuning`): every point learns on
            V minus a seeded ``tune_fraction`` of it and is scored by ``tune_metric`` on that
            part; the best point then learns on the whole V and is evaluated on T. Needs the
            methods' configurations (``ranker_configs``).
        tune_candidates: per candidate set (``candidates`` or a name of ``candidate_sets``), a
            grid chosen inside each fold by the candidate recall on that fold's V (each point's
            generator fitted on D); the best point builds V's and T's candidates. Needs the
            sets' configurations.
        tune_metric: the validation metric of ``tune`` (a key of
            :func:`~tagtorch.metrics.functional.ranking_metrics`: ``ndcg@5``, ``p@5``, ``mrr``).
        significance: the report's paired tests, ``{test: ttest|wilcoxon|randomization|both,
            n_resamples, seed}`` (:class:`~tagtorch.evaluation.report.Significance`; None: the
            paired t-test).
    """

    n_folds: int
    input_fraction: float
    min_tags: int
    sample_size: int | None
    batch_size: int
    seed: int
    trec: bool
    online_objects: int
    cache: bool
    n_jobs: int
    resume: bool
    evaluate_on: str
    tune_fraction: float
    backend: str
    address: str | None
    task_objects: int | None
    tune_metric: str
    given: GivenObjects = GivenObjects()
    """Ranker objects the Python API hands through (tuning builds its grid points from them)."""

    def __init__(
        self,
        n_folds: int = 5,
        folds: Sequence[int] | None = None,
        input_fraction: float = 0.5,
        min_tags: int = 2,
        sample_size: int | None = None,
        ks: Sequence[int] = (5,),
        metrics: Sequence[str] = ("ndcg", "precision", "recall", "success", "mrr", "map"),
        batch_size: int = 4096,
        device: str = "auto",
        seed: int = 0,
        trec: bool = True,
        online_objects: int = 100,
        cache: bool = False,
        cache_dir: str | None = None,
        n_jobs: int = 1,
        checkpoint_dir: str | Path | None = None,
        resume: bool = False,
        evaluate_on: str = "test",
        tune_fraction: float = 0.25,
        backend: str = "processes",
        address: str | None = None,
        task_objects: int | None = None,
        tune: Mapping[str, Grid] | None = None,
        tune_candidates: Mapping[str, Grid] | None = None,
        tune_metric: str = "ndcg@5",
        significance: Mapping[str, Any] | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if evaluate_on not in ("test", "validation"):
            raise ValueError(f"evaluate_on must be 'test' or 'validation', got {evaluate_on!r}")
        if task_objects is not None and task_objects < 1:
            raise ValueError(f"task_objects must be >= 1, got {task_objects}")
        if not 0.0 < tune_fraction < 1.0:
            raise ValueError(f"tune_fraction must be in (0, 1), got {tune_fraction}")
        self.folds = list(range(n_folds)) if folds is None else list(folds)
        bad = [f for f in self.folds if not 0 <= f < n_folds]
        if bad:
            raise ValueError(f"folds {bad} out of range for n_folds={n_folds}")
        self.ks = tuple(ks)
        self.metrics = tuple(metrics)
        self.device = resolve_device(device)
        self.cache_dir = Path(cache_dir) if cache_dir else user_cache_dir() / "candidates"
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None
        self.tune = check_grids(tune, "tune")
        self.tune_candidates = check_grids(tune_candidates, "tune_candidates")
        metric_cutoff(tune_metric)  # a known metric, or a clear error now
        self.significance = Significance.of(significance)

    def splits(self, folksonomy: Folksonomy) -> list[TagRecFold]:
        """The protocol's folds of a folksonomy."""
        return tag_recommendation_folds(
            folksonomy, n_folds=self.n_folds, input_fraction=self.input_fraction,
            min_tags=self.min_tags, sample_size=self.sample_size, seed=self.seed,
        )

    def evaluate(
        self,
        folksonomy: Folksonomy,
        candidates: CandidateGenerator,
        rankers: Mapping[str, Callable[[], Ranker]],
        output_dir: str | Path | None = None,
        loggers: Sequence[MetricLogger] = (),
        ranker_configs: Mapping[str, Any] | None = None,
        candidate_sets: Mapping[str, CandidateGenerator] | None = None,
        method_candidates: Mapping[str, str] | None = None,
    ) -> EvaluationResult:
        """Evaluates every ranker on every selected fold.

        Args:
            folksonomy: the normalized folksonomy.
            candidates: an unfitted candidate generator (e.g. ``LatreCandidates()``): each
                fold fits an unfitted copy of it (``unfitted()``); its ``config()`` keys the
                candidate cache, and a ``tune_candidates`` grid changes its settings.
            rankers: method name -> factory of a fresh ranker (called once per fold).
            output_dir: where results, report and TREC files go (None: nothing written).
            loggers: Lightning loggers receiving ``{method}/test/{metric}`` per fold.
            ranker_configs: each method's settings (JSON-like), which let an interrupted run
                resume (``resume``); without them (or an output folder) nothing is kept.
            candidate_sets: further unfitted candidate generators by name, beside
                ``candidates`` (e.g. the paper's features and an extended set in one run).
            method_candidates: method -> the name of the candidate set it learns and is
                evaluated on; a method not named uses ``candidates``.

        Raises:
            ValueError: no ranker, or a method names an unknown candidate set.
        """
        if not rankers:
            raise ValueError("no ranker to evaluate")
        sets = {DEFAULT_SET: candidates, **(candidate_sets or {})}
        set_configs = {name: generator.config() for name, generator in sets.items()}
        chosen = dict(method_candidates or {})
        bad = {name: used for name, used in chosen.items()
               if name not in rankers or used not in sets}
        if bad:
            raise ValueError(f"method_candidates {bad} names an unknown method or candidate set "
                             f"(methods: {sorted(rankers)}, sets: {sorted(sets)})")
        uses = {name: chosen.get(name, DEFAULT_SET) for name in rankers}
        out = Path(output_dir) if output_dir is not None else None
        terms = TermIndex.from_folksonomy(folksonomy)
        self._check_tuned(rankers, ranker_configs, sets, set_configs)
        preparers = {used: partial(self._prepare_fold, terms=terms, candidates=sets[used],
                                   cache=self._cache(folksonomy, set_configs[used]),
                                   name=used, tune_with=partial(
                                       self._tune_candidates, folksonomy=folksonomy,
                                       generator=sets[used]))
                     for used in dict.fromkeys(uses.values())}
        folds = [self.splits(folksonomy)[f] for f in self.folds]
        method_features = {name: set_configs[used] for name, used in uses.items()}
        pieces = RunPieces(out / "pieces",
                           self._piece_keys(folksonomy, ranker_configs, method_features)) \
            if out is not None and ranker_configs is not None else None
        done: dict[tuple[int, str], MethodOutcome] = {}
        if pieces is not None and self.resume:
            done = pieces.read_all([fold.fold for fold in folds], list(rankers))
        # every (fold, candidate set) with a method still to run on it
        todo = [(fold, used) for fold in folds for used in preparers
                if any((fold.fold, name) not in done for name in rankers if uses[name] == used)]
        run_methods, set_timing = self._method_runner(folksonomy, [
            (fold.fold, name) for fold in folds for name in rankers
            if (fold.fold, name) not in done], ranker_configs or {}, method_features,
            [used for _, used in todo], set_configs)
        if set_timing is not None:
            preparers = {used: partial(prepare, timing=set_timing)
                         for used, prepare in preparers.items()}
        done.update(self._run_all(todo, preparers, rankers, uses, done, run_methods, pieces))
        for fold in folds:
            outcome = MethodOutcome.merge([done[fold.fold, name] for name in rankers])
            outcome.log(loggers, step=fold.fold)
        notes = side_data_notes(set_configs, uses)
        result = self._report(folksonomy.name, folds, list(rankers), done, out, notes)
        if pieces is not None:
            pieces.clear()
        return result

    def _run_all(self, todo: Sequence[tuple[TagRecFold, str]],
                 preparers: Mapping[str, Callable[..., _PreparedFold]],
                 rankers: Mapping[str, Callable[[], Ranker]], uses: Mapping[str, str],
                 done: Mapping[tuple[int, str], MethodOutcome],
                 run_methods: Callable[..., list[MethodOutcome]],
                 pieces: RunPieces | None) -> dict[tuple[int, str], MethodOutcome]:
        """Prepares each (fold, candidate set) of ``todo`` and runs its methods not ``done``.

        One path for every backend: groups of (fold, set) pairs, each prepared, then its
        methods run, through ``joblib.Parallel``. In this process (``n_jobs=1`` on
        ``processes``) a group is one pair and one job fits all its methods on V, then drops
        V's set, makes T's and tests them (:meth:`_run_methods`), so that one candidate set is
        held at a time, with a progress bar; in parallel (``n_jobs`` > 1 or a cluster) one
        group holds them all: the candidates of each fold (or, with ``task_objects``, each
        split's candidate tasks, one fold after another), then a job per (fold, method) pair.
        """
        serial = self.n_jobs == 1 and self.backend == "processes"
        groups = [[pair] for pair in todo] if serial else [list(todo)]
        ran: dict[tuple[int, str], MethodOutcome] = {}
        with joblib_engine(self.backend, self.address):
            # on a cluster, n_jobs=1 still means "distributed": as many jobs as it takes
            distributed = self.backend != "processes" and self.n_jobs == 1
            parallel = Parallel(n_jobs=-1 if distributed else self.n_jobs)
            for group in tqdm(groups, desc="folds", unit="fold", disable=not serial):
                if self.task_objects is None:
                    prepared = parallel(delayed(preparers[used])(fold, later_test=serial)
                                        for fold, used in group)
                else:
                    prepared = [preparers[used](fold, parallel=parallel, later_test=serial)
                                for fold, used in group]
                jobs = [(ready, [(name, make) for name, make in rankers.items()
                                 if uses[name] == ready.name
                                 and (ready.fold.fold, name) not in done])
                        for ready in prepared]
                if serial:  # T's candidate tasks, if any, run on ``parallel``
                    outcomes = [run_methods(ready, methods, pieces=pieces, parallel=parallel)
                                for ready, methods in jobs]
                else:  # a job per (fold, method)
                    jobs = [(ready, [method]) for ready, methods in jobs for method in methods]
                    outcomes = parallel(delayed(run_methods)(ready, methods, pieces=pieces)
                                        for ready, methods in jobs)
                ran.update({(ready.fold.fold, name): outcome
                            for (ready, methods), job in zip(jobs, outcomes, strict=True)
                            for (name, _), outcome in zip(methods, job, strict=True)})
                del prepared, jobs  # this group's candidate sets, before the next group's
        return ran

    def _report(self, dataset: str, folds: Sequence[TagRecFold], methods: Sequence[str],
                done: Mapping[tuple[int, str], MethodOutcome], out: Path | None,
                notes: Sequence[str]) -> EvaluationResult:
        """The run's result and its folder: results, report, TREC files, tuning, trade-off."""
        whole = MethodOutcome.merge([done[fold.fold, name] for fold in folds for name in methods])
        tuning, whole.curves = split_tuning(whole.curves)
        notes = [*notes, *write_tuning(
            out, tuning, "fold", "its own V (candidate sets: candidate recall; methods: "
            f"{self.tune_metric} on a held-out {self.tune_fraction:g} of V)")]
        result_frame, object_frame = whole.frames()
        title = f"Tag recommendation on {dataset}"
        if self.validating:
            title += (f" (validation: evaluated on a held-out {self.tune_fraction:g} of V, "
                      "T unread)")
        if out is None:
            report = markdown_report(result_frame, object_frame, title=title,
                                     significance=self.significance)
            report += ("\n## Notes\n\n" + "\n\n".join(notes) + "\n") if notes else ""
        elif self.trec and not self.validating:
            qrels = [line for fold in folds
                     for line in qrels_lines(fold.test.objects, fold.test.gold_tags)]
            runs = {file: [line for fold in folds for line in done[fold.fold, name].run_lines[name]]
                    for name, file in run_file_names(list(methods)).items()}
            report = write_run(out, result_frame, object_frame, title, qrels=qrels, runs=runs,
                               notes=notes, significance=self.significance)
        else:
            report = write_run(out, result_frame, object_frame, title, notes=notes,
                               significance=self.significance)
        if out is not None and whole.curves:
            tradeoff = pd.concat(whole.curves, ignore_index=True)
            with atomic_write(out / "tradeoff.csv") as handle:
                tradeoff.to_csv(handle, index=False)
            k = next(c for c in tradeoff.columns if c.startswith("val_ndcg@")).split("@")[1]
            plot_tradeoff(tradeoff, out / "tradeoff.png", x=f"val_alpha_ndcg@{k}",
                          y=f"val_ndcg@{k}")
        return EvaluationResult(result_frame, object_frame, report, out)

    def _prepare_fold(
        self,
        fold: TagRecFold,
        terms: TermIndex,
        candidates: CandidateGenerator,
        cache: CandidateCache | None,
        parallel: Parallel | None = None,
        name: str = DEFAULT_SET,
        tune_with: Callable[..., _TunedSet] | None = None,
        timing: _Timing | None = None,
        later_test: bool = False,
    ) -> _PreparedFold:
        """Mines D and builds the candidate sets of V and T (of V's two parts) for one fold.

        ``candidates`` is the unfitted generator (an unfitted copy is fitted); ``parallel``
        runs the candidate tasks when ``task_objects`` is set (None: one call);
        ``name`` is the candidate set's name in the log and the result; ``tune_with`` chooses
        the set's settings on this fold's V when ``tune_candidates`` names it; with ``timing``,
        its seconds are recorded; with ``later_test``, T's set is left to :meth:`_add_test`
        (when T is not a part of V).
        """
        began = time.perf_counter()
        tuning = None
        if name in self.tune_candidates and tune_with is not None:
            generator, cache, val, tuning = tune_with(fold, terms, name=name, parallel=parallel)
        else:
            generator = candidates.unfitted().fit(fold.train_objects, fold.train_tags, terms)
            val = self._candidates(generator, fold, "val", cache, parallel)
        ready = _PreparedFold(fold, generator, val, None, name, tuning, cache)
        if self.validating:
            ready.val, ready.test = self._split_val(val, fold.fold)
        ready.seconds = time.perf_counter() - began
        if ready.test is not None or not later_test:
            self._add_test(ready, parallel, timing)
        return ready

    def _add_test(self, ready: _PreparedFold, parallel: Parallel | None = None,
                  timing: _Timing | None = None) -> None:
        """Makes T's candidate set of a prepared fold (if not made) and its shared figures.

        The figures: the candidate recall and coverage, and the batched rules and features
        stages per T object (none when T came from the cache or from V: nothing was timed).
        """
        began = time.perf_counter()
        fold, generator = ready.fold, ready.generator
        before = dict(generator.stage_seconds)
        if ready.test is None:
            ready.test = self._candidates(generator, fold, "test", ready.cache, parallel)
        test = ready.test
        spent = {stage: generator.stage_seconds.get(stage, 0.0) - before.get(stage, 0.0)
                 for stage in ("rules", "features")}
        ready.shared = {f"ms_{stage}": 1000 * seconds / max(len(test), 1)
                        for stage, seconds in spent.items() if seconds > 0}
        ready.shared.update(candidate_figures(test))
        log.info("fold %d, %s: D=%d T=%d objects, %.1f candidates per T object, candidate "
                 "recall %.3f", fold.fold, ready.name, len(fold.train_objects), len(test),
                 ready.shared["candidates_per_object"], ready.shared["candidate_recall"])
        ready.seconds += time.perf_counter() - began
        if timing is not None:
            timing[0].record(timing[1][f"{SET_KEY}{ready.name}"], timing[2], ready.seconds)

    def fold_candidates(self, folksonomy: Folksonomy, candidates: CandidateGenerator,
                        fold: int, name: str | None = None) -> FoldCandidates:
        """The candidate sets a fold's rankers learn on (V) and are tested on (T).

        As :meth:`evaluate` builds them, for other tools (:mod:`tagtorch.candidates.letor`,
        ``benchmarks/ablation_extended.py``): ``candidates`` unfitted, fitted on the fold's D.
        With ``name``, a candidate set that ``tune_candidates`` names gets the settings of the
        best candidate recall on the fold's V (the task's candidate cache holds the grid's
        sets); with None (or a name without a grid) ``candidates`` keeps its own settings and
        nothing is cached.
        """
        if fold not in range(len(self.splits(folksonomy))):
            raise ValueError(f"fold must be in 0..{len(self.splits(folksonomy)) - 1}, got {fold}")
        tune_with = None if name is None else partial(
            self._tune_candidates, folksonomy=folksonomy, generator=candidates)
        ready = self._prepare_fold(self.splits(folksonomy)[fold],
                                   TermIndex.from_folksonomy(folksonomy), candidates, None,
                                   name=name or DEFAULT_SET, tune_with=tune_with)
        assert ready.val is not None and ready.test is not None
        return FoldCandidates(ready.val, ready.test, ready.generator)

    def _split_val(self, val: CandidateSet, fold: int) -> tuple[CandidateSet, CandidateSet]:
        """V's two seeded parts: what is learned on, and the held-out ``tune_fraction``."""
        order = np.random.default_rng([self.seed, fold]).permutation(len(val))
        n_tune = max(1, round(self.tune_fraction * len(val)))
        if n_tune >= len(val):
            raise ValueError(f"fold {fold}: {len(val)} V objects cannot be split "
                             f"with tune_fraction={self.tune_fraction}")
        return (val[torch.from_numpy(np.sort(order[n_tune:]))],
                val[torch.from_numpy(np.sort(order[:n_tune]))])

    def _check_tuned(self, rankers: Mapping[str, Any], ranker_configs: Mapping[str, Any] | None,
                     sets: Mapping[str, Any], set_configs: Mapping[str, Any]) -> None:
        """Every grid names a method or set of the run whose configuration is known."""
        for grids, known, configs, what in (
                (self.tune, rankers, ranker_configs or {}, "tune"),
                (self.tune_candidates, sets, set_configs, "tune_candidates")):
            for name in grids:
                if name not in known or configs.get(name) is None:
                    raise ValueError(f"{what}.{name}: no method or candidate set of that name "
                                     f"with a configuration in this run ({sorted(known)})")

    def _tune_candidates(self, fold: TagRecFold, terms: TermIndex, folksonomy: Folksonomy,
                         generator: CandidateGenerator, name: str, parallel: Parallel | None,
                         ) -> _TunedSet:
        """The grid point of the best candidate recall on this fold's V, fitted on D.

        Returns the chosen generator, the cache of its settings, its V candidates and the
        tuning rows.
        """
        rows: list[dict[str, Any]] = []
        best: tuple[CandidateGenerator, CandidateCache | None, CandidateSet] | None = None
        for point in progress(grid_points(self.tune_candidates[name]),
                              f"fold {fold.fold}, {name}: candidate grid", unit="setting"):
            fitted = generator.unfitted(**with_settings(generator.settings(), point)).fit(
                fold.train_objects, fold.train_tags, terms)
            cache = self._cache(folksonomy, fitted.config())
            val = self._candidates(fitted, fold, "val", cache, parallel)
            recall = float(val.labels.sum() / val.n_relevant.sum())
            if not rows or recall > max(row["val_candidate_recall"] for row in rows):
                best = (fitted, cache, val)  # only the best so far stays in memory
            rows.append({"method": name, "fold": fold.fold, "setting": setting_text(point),
                         "val_candidate_recall": recall,
                         "val_candidates_per_object": float(val.mask.sum() / max(len(val), 1))})
        tuning = choose(rows, "val_candidate_recall")
        chosen = tuning[tuning["chosen"]].iloc[0]
        log.info("fold %d, %s: chose %s on V (candidate recall %.4f; %d settings)", fold.fold,
                 name, chosen["setting"], chosen["val_candidate_recall"], len(rows))
        assert best is not None  # a grid has at least one point
        return *best, tuning

    def _tune_ranker(self, ready: _PreparedFold, name: str,
                     config: Mapping[str, Any]) -> tuple[Callable[[], Ranker], pd.DataFrame]:
        """The grid point of the best ``tune_metric`` on V's held-out part, learning on the rest.

        Returns a factory of the chosen ranker (it then learns on the whole V) and the rows.
        """
        assert ready.val is not None
        learn, held_out = self._split_val(ready.val, ready.fold.fold)
        rows = []
        for point in progress(grid_points(self.tune[name]),
                              f"fold {ready.fold.fold}, {name}: grid", unit="setting"):
            ranker = cast(Ranker, self.given.build(name, config, point))
            fit_ranker(ranker, learn, ready.fold.train_tags)
            scores, _ = self._score(ranker, held_out)
            rows.append({"method": name, "fold": ready.fold.fold, "setting": setting_text(point),
                         f"val_{self.tune_metric}": mean_metric(
                             scores, held_out.labels, held_out.mask, held_out.n_relevant,
                             self.tune_metric)})
        tuning = choose(rows, f"val_{self.tune_metric}")
        chosen = grid_points(self.tune[name])[int(np.flatnonzero(tuning["chosen"])[0])]
        log.info("fold %d, %s: chose %s on V's held-out %g (%s)", ready.fold.fold, name,
                 setting_text(chosen), self.tune_fraction, self.tune_metric)
        return partial(self.given.build, name, config, chosen), tuning

    @property
    def validating(self) -> bool:
        """Whether the rankers are evaluated on held-out V instead of T (tuning)."""
        return self.evaluate_on == "validation"

    def _split_settings(self) -> list[Any]:
        """The settings that fix the folds of a folksonomy."""
        return [self.n_folds, self.input_fraction, self.min_tags, self.sample_size, self.seed]

    def _piece_keys(self, folksonomy: Folksonomy, ranker_configs: Mapping[str, Any] | None,
                    candidate_configs: Mapping[str, Any]) -> dict[str, str]:
        """Per method, everything its outcome on a fold depends on, as one JSON string.

        ``candidate_configs``: method -> the settings of its candidate set.
        """
        protocol = [*self._split_settings(), self.ks, self.metrics, self.trec,
                    self.online_objects, self.evaluate_on, self.tune_fraction]
        data = folksonomy.fingerprint()
        return {name: json.dumps({"data": data, "method": config,
                                  "features": candidate_configs.get(name),
                                  "tune": [self.tune.get(name), self.tune_metric,
                                           self.tune_candidates],
                                  "protocol": protocol}, sort_keys=True, default=str)
                for name, config in (ranker_configs or {}).items()}

    def _method_runner(self, folksonomy: Folksonomy, pending: Sequence[tuple[int, str]],
                       configs: Mapping[str, Any], features: Mapping[str, Any],
                       sets: Sequence[str], set_configs: Mapping[str, Any]
                       ) -> tuple[Callable[..., list[MethodOutcome]], _Timing | None]:
        """:meth:`_run_methods` for this run, once the estimate of its fits is logged.

        ``pending``: the (fold, method) fits still to run; ``sets``: the candidate set of each
        (fold, set) still to prepare (its generator fitted on D, its grid tried, V's and T's
        candidates made), counted as fits of the set. A method's timing key is its config,
        candidate features, grid and protocol (not the data: :mod:`~tagtorch.evaluation.timings`);
        its reference key, its model class; a set's, its generator's config and grid. Fits are
        timed only when they run one after another in this process (in parallel they share the
        cores, and a cluster's workers write elsewhere): then the timing of the sets'
        preparation is returned too. The report's online timing is not counted.
        """
        task = type(self).__name__
        protocol = [*self._split_settings(), self.ks, self.metrics, self.online_objects,
                    self.evaluate_on, self.tune_fraction, self.tune_metric, self.tune_candidates]
        keys = {name: timing_key(task, [configs.get(name, name), features.get(name)],
                                 self.tune.get(name), protocol)
                for name in dict.fromkeys(name for _, name in pending)}
        keys.update({f"{SET_KEY}{used}": timing_key(task, ["candidates", set_configs[used]],
                                                    self.tune_candidates.get(used), protocol)
                     for used in sets})
        timings = TimingLog.default()
        announce(timings, [*((keys[name], reference_key(task, configs.get(name)),
                              len(grid_points(self.tune.get(name) or {})))
                             for _, name in pending),
                           *((keys[f"{SET_KEY}{used}"],
                              reference_key(task, set_configs[used], SET_SOURCES),
                              len(grid_points(self.tune_candidates.get(used) or {})))
                             for used in sets)], folksonomy)
        serial = self.n_jobs == 1 and self.backend == "processes"
        timing = (timings, keys, data_size(folksonomy)[0]) if serial else None
        return partial(self._run_methods, checkpoints=self.checkpoint_dir / folksonomy.name
                       if self.checkpoint_dir else None, configs=configs, timing=timing), timing

    def _run_methods(self, ready: _PreparedFold,
                     methods: Sequence[tuple[str, Callable[[], Ranker]]],
                     checkpoints: Path | None = None, pieces: RunPieces | None = None,
                     configs: Mapping[str, Any] | None = None, timing: _Timing | None = None,
                     parallel: Parallel | None = None) -> list[MethodOutcome]:
        """Fits each method on a fold's V, then evaluates it on T (each kept in ``pieces``).

        When T's set is still to make, V's set is dropped once every method is fitted and
        T's is made then (``parallel`` runs its candidate tasks); with ``timing`` (the log,
        each key, the data's size), each method's seconds (tuning, fit and test) are recorded.
        """
        fitted = [self._fit_method(ready, name, make, configs) for name, make in methods]
        if ready.test is None:
            ready.val = None  # no method learns any more: V's set goes before T's is made
            self._add_test(ready, parallel, timing)
        return [self._test_method(ready, method, checkpoints, pieces, timing)
                for method in fitted]

    def _fit_method(self, ready: _PreparedFold, name: str, make: Callable[[], Ranker],
                    configs: Mapping[str, Any] | None) -> _FittedMethod:
        """One ranker fitted on a fold's V.

        Its settings are first chosen there if ``tune`` has a grid for it (``configs``: each
        method's settings).
        """
        began = time.perf_counter()
        assert ready.val is not None, "V's candidate set is dropped once the methods are fitted"
        tuning = [frame for frame in (ready.tuning,) if frame is not None]
        if name in self.tune:
            make, chosen = self._tune_ranker(ready, name, (configs or {})[name])
            tuning.append(chosen)
        ranker = make()
        start = time.perf_counter()
        fit_ranker(ranker, ready.val, ready.fold.train_tags)
        end = time.perf_counter()
        return _FittedMethod(name, ranker, tuning, end - start, end - began)

    def _test_method(self, ready: _PreparedFold, method: _FittedMethod,
                     checkpoints: Path | None, pieces: RunPieces | None,
                     timing: _Timing | None) -> MethodOutcome:
        """A fitted method's evaluation on a fold's T: its outcome, saved and recorded."""
        began = time.perf_counter()
        fold, test, name, ranker = ready.fold, ready.test, method.name, method.ranker
        assert test is not None, "T's candidate set is made before the methods are tested"
        if checkpoints is not None:
            (checkpoints / name).mkdir(parents=True, exist_ok=True)
            ranker.save(checkpoints / name / f"fold{fold.fold}")
        scores, timings = self._score(ranker, test)
        values = ranking_metrics(scores, test.labels, test.mask, n_relevant=test.n_relevant,
                                 ks=self.ks, metrics=self.metrics)
        if test.has_topics:
            values.update(topic_diversity(scores, test, fold.train_tags, self.ks))
        means = {**ready.shared, "fit_seconds": method.fit_seconds, **timings}
        if not self.validating:
            means.update(self._online_timing(ready.generator, ranker, fold.test))
        outcome = MethodOutcome.from_values(
            name, fold.fold, test.objects.numpy(), values, extra=means,
            run_lines=_run_lines(test, scores, name.replace(" ", "_"))
            if self.trec and not self.validating else None,
            curve=_tradeoff(ranker, name, fold.fold))
        outcome.curves += method.tuning
        log.info("fold %d, %s: %s (fit %.1f s)", fold.fold, name,
                 ", ".join(f"{k} {outcome.means[name][k]:.4f}" for k in values),
                 method.fit_seconds)
        if timing is not None:
            timing[0].record(timing[1][name], timing[2],
                             method.seconds + time.perf_counter() - began)
        if pieces is not None:
            pieces.write(fold.fold, name, outcome)
        return outcome

    def _cache(self, folksonomy: Folksonomy,
               candidate_config: Mapping[str, Any]) -> CandidateCache | None:
        if not self.cache:
            return None
        key = {"data": folksonomy.fingerprint(), "features": dict(candidate_config),
               "split": self._split_settings()}
        return CandidateCache(self.cache_dir, key)

    def _candidates(self, generator: CandidateGenerator, fold: TagRecFold, split: str,
                    cache: CandidateCache | None, parallel: Parallel | None) -> CandidateSet:
        queries = fold.val if split == "val" else fold.test

        def generate() -> CandidateSet:
            if self.task_objects is None or parallel is None:
                return generator(queries)
            return generate_in_tasks(generator, queries, self.task_objects, parallel)

        return generate() if cache is None else cache.get(fold.fold, split, generate)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _score(self, ranker: Ranker, test: CandidateSet) -> tuple[torch.Tensor, dict[str, float]]:
        """Scores T in batches; times model application and sorting per object (ms)."""
        model = sort = 0.0
        diversify = getattr(ranker, "diversify_seconds", None)
        scores = []
        with torch.no_grad():
            for batch in test.batches(self.batch_size):
                batch = batch.to(self.device)
                self._sync()
                start = time.perf_counter()
                score = ranker.score(batch).float()
                self._sync()
                middle = time.perf_counter()
                torch.sort(score.masked_fill(~batch.mask, float("-inf")), dim=-1,
                           descending=True, stable=True)
                self._sync()
                model += middle - start
                sort += time.perf_counter() - middle
                scores.append(score.cpu())
        n = max(len(test), 1)
        score = torch.cat(scores) if scores else torch.zeros(test.mask.shape)
        timing = {"ms_model": 1000 * model / n, "ms_sort": 1000 * sort / n}
        if diversify is not None:  # xTReD: its re-ranking is a stage of its own
            spent = getattr(ranker, "diversify_seconds", diversify) - diversify
            timing = {"ms_model": 1000 * (model - spent) / n, "ms_diversify": 1000 * spent / n,
                      "ms_sort": 1000 * sort / n}
        return score, timing

    def _online_timing(self, generator: CandidateGenerator, ranker: Ranker,
                       queries: TagQueries) -> dict[str, float]:
        """Single-object mode: each object alone through rules, features, model and sort."""
        n = min(self.online_objects, len(queries))
        if n == 0:
            return {}
        diversifies = hasattr(ranker, "diversify_seconds")
        totals = {stage: 0.0 for stage in STAGES if stage != "diversify" or diversifies}
        latencies = []
        with torch.no_grad():
            for call, i in enumerate([0, *range(n)]):  # call 0 warms up, is not counted
                before = dict(generator.stage_seconds)
                start = time.perf_counter()
                one = generator(queries.take(np.array([i])))
                one = one.to(self.device)
                middle = time.perf_counter()
                diversify = getattr(ranker, "diversify_seconds", 0.0)
                score = ranker.score(one)
                self._sync()
                sorted_at = time.perf_counter()
                torch.sort(score.masked_fill(~one.mask, float("-inf")), dim=-1,
                           descending=True, stable=True)
                self._sync()
                end = time.perf_counter()
                if call == 0:
                    continue
                for stage in ("rules", "features"):
                    totals[stage] += generator.stage_seconds[stage] - before.get(stage, 0.0)
                spent = getattr(ranker, "diversify_seconds", 0.0) - diversify
                totals["model"] += sorted_at - middle - spent
                if diversifies:
                    totals["diversify"] += spent
                totals["sort"] += end - sorted_at
                latencies.append(end - start)
        timing = {f"online_ms_{stage}": 1000 * value / n for stage, value in totals.items()}
        timing["online_ms_median"] = 1000 * float(np.median(latencies))
        return timing


SIDE_DATA_SOURCES = ("profile_neighbours",)
"""Candidate-set settings that read information beyond the task's input (input tags, text, D)."""


def side_data_notes(set_configs: Mapping[str, Mapping[str, Any] | None],
                    uses: Mapping[str, str]) -> list[str]:
    """The report's warning for each candidate set that reads side data, naming its methods.

    Example:
        >>> side_data_notes({"x": {"profile_neighbours": {"k": 200}}, "candidates": {}},
        ...                 {"rf_x": "x", "wts": "candidates"})[0][:40]
        'SIDE DATA: rf_x learn on candidate set x'
    """
    notes = []
    for name, config in set_configs.items():
        sources = [source for source in SIDE_DATA_SOURCES if (config or {}).get(source)]
        methods = [method for method, used in uses.items() if used == name]
        if sources and methods:
            notes.append(f"SIDE DATA: {', '.join(methods)} learn on candidate set {name}, whose "
                         f"{', '.join(sources)} read the objects' profiles (on Last.fm the "
                         "listeners of user_artists.dat): information beyond the task's input "
                         "(input tags and text), a separate configuration from the paper's task.")
    return notes


def _tradeoff(ranker: Ranker, name: str, fold: int) -> pd.DataFrame | None:
    """A tuned ranker's relevance-diversity trade-off on V, or None if it tuned nothing.

    For each value of its tuned setting (xTReD's ``λ``, GP_rnd's ``α``): NDCG@k, alpha-NDCG@k.
    """
    tuning = getattr(ranker, "tuning_", None)
    if not tuning:
        return None
    k = getattr(ranker, "k", 5)
    frame = pd.DataFrame(tuning, columns=["value", f"val_ndcg@{k}", f"val_alpha_ndcg@{k}"])
    return frame.assign(method=name, seed=fold, setting=getattr(ranker, "tuned_setting", "lam"))


def _run_lines(test: CandidateSet, scores: torch.Tensor, run_name: str) -> list[str]:
    """TREC run lines of every candidate of ``test``, ranked as the metrics rank them.

    Args:
        test: the candidate sets (``B`` objects, ``L`` slots); query ids are the object codes.
        scores: ``[B, L]`` the ranker's scores (:func:`~tagtorch.evaluation.trec.scored_lines`:
            by score, equal scores in candidate order).
        run_name: the run tag.
    """
    return scored_lines(test.objects.cpu().numpy(), scores, test.mask, run_name,
                        test.tags.shape[1], documents=test.tags)


def candidate_figures(test: CandidateSet) -> dict[str, float]:
    """The figures that every method on a candidate set reports.

    ``candidate_recall`` (the share of gold tags among the candidates),
    ``candidates_per_object`` and :func:`candidate_coverage`'s.
    """
    return {"candidate_recall": float(test.labels.sum() / test.n_relevant.sum()),
            "candidates_per_object": float(test.mask.sum() / max(len(test), 1)),
            **candidate_coverage(test)}


def candidate_coverage(test: CandidateSet) -> dict[str, float]:
    """How many evaluated objects a candidate set leaves without a chance.

    Returns:
        ``evaluated_objects`` (the number of lists), ``no_candidates`` (the share of objects
        with no candidate at all) and ``no_gold_candidates`` (the share with no gold tag among
        their candidates, those without candidates included): on these objects every ranker
        scores 0, whatever it learned (:data:`~tagtorch.evaluation.report.COVERAGE_METRICS`).

    Example:
        >>> mask = torch.tensor([[True, True], [False, False], [True, False]])
        >>> labels = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
        >>> test = CandidateSet(torch.arange(3), torch.zeros(3, 2, dtype=torch.long),
        ...                     torch.zeros(3, 2, 0), labels, mask, torch.ones(3).long(), ())
        >>> {key: round(value, 4) for key, value in candidate_coverage(test).items()}
        {'evaluated_objects': 3.0, 'no_candidates': 0.3333, 'no_gold_candidates': 0.6667}
    """
    n = len(test)
    empty = ~test.mask.any(dim=-1)
    no_gold = ~(test.labels.gt(0) & test.mask).any(dim=-1)
    return {"evaluated_objects": float(n),
            "no_candidates": float(empty.sum()) / max(n, 1),
            "no_gold_candidates": float(no_gold.sum()) / max(n, 1)}


def topic_diversity(scores: torch.Tensor, test: CandidateSet, train_tags: Ragged,
                    ks: Sequence[int]) -> dict[str, torch.Tensor]:
    """The diversity metrics of Belém et al. per test object, at each cut-off.

    ``alpha_ndcg@k``, ``err_ia@k``, ``s_recall@k`` (on the candidates' ``tag_topics`` and the
    objects' ``object_topics``), ``aild@k`` (distances between the tags' sets of D objects) and
    ``aip@k`` (``f(c)``: D objects tagged ``c``; ``|O|``: D's objects), on the whole recommended
    list, relevant or not (:mod:`tagtorch.metrics.diversity`). An object with no topic gets
    NaN for the topic metrics (left out of the means).

    Args:
        scores: ``[B, L]`` the method's scores of ``test``.
        test: the candidate lists, with topics.
        train_tags: ragged ``[n_D]`` tag codes of D's objects.
        ks: the cut-offs.
    """
    assert test.tag_topics is not None and test.object_topics is not None
    n_codes = max(int(test.tags.max()) + 1 if test.tags.numel() else 0,
                  int(train_tags.values.max()) + 1 if len(train_tags.values) else 0, 1)
    incidence = tag_incidence(torch.as_tensor(train_tags.values, dtype=torch.long),
                              torch.as_tensor(train_tags.row_ids, dtype=torch.long),
                              n_codes, max(len(train_tags), 1))
    f_c = incidence.crow_indices().diff()  # D objects tagged c
    tags = test.tags.cpu()
    tag_counts = torch.where(test.mask.cpu(), f_c[tags.clamp(min=0)], torch.zeros_like(tags))
    values: dict[str, torch.Tensor] = {}
    for k in ks:
        values.update(diversity_metrics(scores.cpu(), test.mask.cpu(), test.tag_topics.cpu(),
                                        test.object_topics.cpu(), k, tag_ids=tags,
                                        incidence=incidence, tag_counts=tag_counts,
                                        n_objects=max(len(train_tags), 1)))
    return values


def fold_sizes(folksonomy: Folksonomy, protocol: TagRecommendationProtocol) -> pd.DataFrame:
    """Sizes of D, V and T (objects and tag counts) of every fold of the protocol."""
    return pd.DataFrame([{
        "fold": f.fold, "D_objects": len(f.train_objects), "V_objects": len(f.val),
        "T_objects": len(f.test), "V_input_tags": int(f.val.input_tags.lengths.sum()),
        "V_gold_tags": int(f.val.gold_tags.lengths.sum()),
        "T_input_tags": int(f.test.input_tags.lengths.sum()),
        "T_gold_tags": int(f.test.gold_tags.lengths.sum()),
    } for f in protocol.splits(folksonomy)])


class TagRecommendationTask(TagRecommendationProtocol, Task):
    """Evaluates the configured rankers (``model``: method name -> ranker config) by the protocol.

    Its settings are the protocol's (:class:`TagRecommendationProtocol`), under ``task`` as
    every task's are. The first method is the baseline of the significance tests; candidates
    come from ``candidates``, or, for a method named in ``method_candidates`` (method -> set
    name), from that set of ``candidate_sets`` (name -> generator config; e.g. the paper's
    features and the extended set in one run, ``+experiment=extended_lastfm``).
    """

    model_tasks: ClassVar[tuple[ModelTask, ...]] = ("tagrec",)
    """The tasks of the models this task runs (read by the config checks)."""

    def run(self, folksonomy: Folksonomy, cfg: DictConfig, output_dir: Path,
            loggers: Sequence[MetricLogger] = (), *, raw: Any = None,
            given: GivenObjects | None = None) -> EvaluationResult:
        """Runs the protocol; returns its result (the run folder holds the report).

        The arguments are every task's (:meth:`Task.run <tagtorch.evaluation.runs.Task.run>`);
        ``given`` may hold the candidate generator too.
        """
        self.given = given or GivenObjects()
        configs = methods_of(cfg)
        result = self.evaluate(
            folksonomy,
            candidates=cast(CandidateGenerator,
                            self.given.candidates or instantiate(cfg.candidates)),
            rankers={name: partial(self.given.build, name, config)
                     for name, config in configs.items()},
            ranker_configs=configs,
            output_dir=output_dir,
            loggers=loggers,
            candidate_sets={str(name): instantiate(node)
                            for name, node in (cfg.get("candidate_sets") or {}).items()},
            method_candidates={str(k): str(v)  # of the methods this run keeps (search_method)
                               for k, v in (cfg.get("method_candidates") or {}).items()
                               if k in configs},
        )
        return result
