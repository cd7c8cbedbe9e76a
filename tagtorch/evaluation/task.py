"""The shape of every seeded evaluation task: seeds, resume pieces, TREC files, the report.

Item recommendation, resource ranking and personalized tag recommendation run one loop: one
split per seed; every method fitted on the seed's training data (tuned on its validation data
alone, where the task tunes) and evaluated on its test queries; each finished (seed, method)
outcome kept as a piece of the run folder (:class:`~tagtorch.evaluation.runs.RunPieces`), so
that ``resume=True`` reuses it; the first seed's queries and rankings written as TREC files;
one report with paired tests over the queries. :class:`SeededTask` owns that loop and the
settings every task spells alike (``seeds``, ``resume``, ``significance``, ``trec``; ``tune``
where a task tunes, :func:`tuning_notes`). A task is a subclass that says how a seed splits the
data (:meth:`SeededTask.split_seed`), what the queries of a split are (:meth:`SeededTask.qrels`),
how one method is fitted and scored (:meth:`SeededTask.outcome`) and what its report holds
(:meth:`SeededTask.write`, with :meth:`SeededTask.report` for the common part).

Tag recommendation's folds (:mod:`tagtorch.evaluation.tag_recommendation`) and LETOR's fixed
parts (:mod:`tagtorch.evaluation.letor_task`) have no seeds; they share the run folder, the
report and the ``trec`` switch.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.engines import BACKENDS, joblib_engine
from tagtorch.errors import TooLargeError, UnreadableFileError
from tagtorch.evaluation.report import Significance
from tagtorch.evaluation.runs import (
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
from tagtorch.evaluation.trec import run_file_names
from tagtorch.evaluation.tuning import grid_points, split_tuning, write_tuning
from tagtorch.settings import SignatureSettings

__all__ = ["SeededTask", "WorkerData", "shard_outcome", "tuning_notes"]

log = logging.getLogger(__name__)

Outcomes = Mapping[tuple[int, str], MethodOutcome]
"""Finished outcomes by ``(seed, method)``."""


class SeededTask(SignatureSettings, Task):
    """The run of a seeded task (module docstring); subclasses fill in its steps.

    A subclass's constructor takes ``seeds``, ``resume``, ``significance`` and ``trec`` among
    its settings and calls :meth:`take_shared` with them.
    """

    seeds: list[int]
    resume: bool
    trec: bool
    significance: Significance
    tune: Mapping[str, Any] = MappingProxyType({})
    """Per method, its grid (a task that tunes sets it; the pieces are keyed by it)."""
    given: GivenObjects = GivenObjects()
    """The run's model objects handed through by the Python API (:meth:`run` sets them)."""

    backend: str = "processes"
    address: str | None = None
    refused: dict[str, TooLargeError]
    """The methods of the run that refused before allocating, and why (:meth:`_run_unit`)."""

    def take_shared(self, seeds: Sequence[int], significance: Mapping[str, Any] | None,
                    backend: str = "processes", address: str | None = None) -> None:
        """Checks and keeps the settings every seeded task has.

        ``backend``: where the (seed, method) fits run: ``"processes"`` here, one after
        another; ``"dask"`` or ``"ray"`` on a cluster's workers (:meth:`run`), ``address`` the
        cluster's (None: a local cluster of this machine's cores, started for the run).

        Raises:
            ValueError: no seed, or an unknown backend.
        """
        if not seeds:
            raise ValueError("no seed to evaluate")
        if backend not in BACKENDS:
            raise ValueError(f"task.backend must be one of {BACKENDS}, got {backend!r}")
        self.seeds = list(seeds)
        self.significance = Significance.of(significance)
        self.backend, self.address = backend, address
        self.refused = {}

    # -- what a task says -------------------------------------------------------------------

    def prepare(self, folksonomy: Folksonomy) -> Folksonomy:
        """The data every seed splits (default: the folksonomy as given)."""
        return folksonomy

    def split_seed(self, data: Folksonomy, seed: int, previous: Any,
              models: Mapping[str, Any]) -> Any:
        """The split of one seed (``previous``: the last seed's, None for the first)."""
        raise NotImplementedError

    def split_summary(self, split: Any) -> Mapping[str, Any] | None:
        """What :meth:`write` reports of a seed's split (default: nothing)."""
        return None

    def needs_split(self, seed: int, finished: bool) -> bool:
        """Whether a seed is split: some method is not finished, or its TREC files are due."""
        return not finished or self.writes_trec(seed)

    def qrels(self, split: Any) -> list[str]:
        """The TREC qrels lines of a split's test queries."""
        raise NotImplementedError

    def outcome(self, data: Folksonomy, split: Any, seed: int, name: str,
                node: Mapping[str, Any], done: Outcomes) -> MethodOutcome:
        """One method fitted on a seed's split and evaluated on its test queries."""
        raise NotImplementedError

    def protocol(self) -> list[Any]:
        """The task's settings every outcome depends on (they key the pieces)."""
        raise NotImplementedError

    def write(self, data: Folksonomy, models: Mapping[str, Any], whole: MethodOutcome,
              qrels: list[str] | None, summaries: Mapping[int, Mapping[str, Any]],
              output_dir: Path) -> EvaluationResult:
        """The run folder: the task's own files and :meth:`report`."""
        raise NotImplementedError

    # -- the run ----------------------------------------------------------------------------

    def writes_trec(self, seed: int) -> bool:
        """Whether this seed's queries and rankings go to the TREC files (the first seed's)."""
        return self.trec and seed == self.seeds[0]

    def run(self, folksonomy: Folksonomy, cfg: DictConfig, output_dir: Path,
            loggers: Sequence[MetricLogger] = (), *, raw: Any = None,
            given: GivenObjects | None = None) -> EvaluationResult:
        """Evaluates every method on every seed; writes the run folder and its report.

        The arguments are every task's (:meth:`Task.run <tagtorch.evaluation.runs.Task.run>`).

        With ``backend`` ``dask`` or ``ray``, every unfinished (seed, method) is one job on the
        cluster's workers (:func:`shard_outcome`): each worker reads the data itself from
        ``cfg.data`` (a path every worker sees; data handed over by the Python API is sent from
        here instead), splits the seed and fits and evaluates the method; this process splits
        each seed only for its TREC qrels and report. The results are those of one process.

        Returns:
            The run's results (``fold`` is the seed), per-query values, report and folder.
        """
        self.given = given or GivenObjects()
        self.refused = {}
        models = methods_of(cfg)
        data = self.prepare(folksonomy)
        output_dir.mkdir(parents=True, exist_ok=True)
        pieces = RunPieces(output_dir / "pieces", self.piece_keys(data, models), unit="seed")
        done = pieces.read_all(self.seeds, list(models)) if self.resume else {}
        qrels: list[str] | None = None
        summaries: dict[int, Mapping[str, Any]] = {}
        split = None
        todo: list[tuple[int, str]] = []
        timings, keys = TimingLog.default(), self.timing_keys(models)
        pending = [name for seed in self.seeds for name in models if (seed, name) not in done]
        announce(timings, [(keys[name], reference_key(type(self).__name__, models[name]),
                            len(grid_points(self.tune.get(name) or {})))
                           for name in pending], data)
        bar = tqdm(total=len(self.seeds) * len(models) - len(done), desc="fits", unit="fit")
        for seed in self.seeds:
            if not self.needs_split(seed, all((seed, name) in done for name in models)):
                continue
            split = self.split_seed(data, seed, split, models)
            summary = self.split_summary(split)
            if summary is not None:
                summaries[seed] = summary
            if self.writes_trec(seed):
                qrels = self.qrels(split)
            for name, node in models.items():
                if (seed, name) in done:
                    continue
                if self.backend != "processes":
                    todo.append((seed, name))
                    continue
                bar.set_description(f"seed {seed}, {name}")
                self._run_unit(data, split, (seed, name, node), done, pieces,
                               (timings, keys[name]))
                bar.update(1)
        bar.close()
        for (seed, name), outcome in zip(todo, self._on_cluster(todo, models, cfg, folksonomy),
                                         strict=True):
            done[seed, name] = outcome
            pieces.write(seed, name, outcome)
        models = {name: node for name, node in models.items() if name not in self.refused}
        if not models:
            raise next(iter(self.refused.values()))
        for seed in self.seeds:
            MethodOutcome.merge([done[seed, name] for name in models]).log(loggers, step=seed)
        whole = MethodOutcome.merge([done[seed, name] for seed in self.seeds for name in models])
        result = self.write(data, models, whole, qrels, summaries, output_dir)
        pieces.clear()
        return result

    def _run_unit(self, data: Folksonomy, split: Any, unit: tuple[int, str, Mapping[str, Any]],
                  done: dict[tuple[int, str], MethodOutcome], pieces: RunPieces,
                  timing: tuple[TimingLog, str]) -> None:
        """One (seed, method, config): its outcome kept, written and timed, or its refusal.

        A method that refuses before allocating (:class:`~tagtorch.errors.TooLargeError`, e.g.
        EASE^R's ``items x items`` matrices) leaves the run with one logged line and a note in
        the report; the other methods go on.
        """
        seed, name, node = unit
        if name in self.refused:
            return
        start = time.perf_counter()
        try:
            done[seed, name] = self.outcome(data, split, seed, name, node, done)
        except TooLargeError as refusal:
            self.refused[name] = refusal
            log.warning("seed %d, %s: left out of the run: %s", seed, name, refusal)
            return
        timing[0].record(timing[1], data_size(data)[0], time.perf_counter() - start)
        pieces.write(seed, name, done[seed, name])

    def _on_cluster(self, todo: Sequence[tuple[int, str]], models: Mapping[str, Any],
                    cfg: DictConfig, folksonomy: Folksonomy) -> list[MethodOutcome]:
        """The outcomes of ``todo``'s (seed, method) pairs, one job each on the cluster."""
        if not todo:
            return []
        from joblib import Parallel, delayed

        sent = folksonomy if self.given.caller_data else None
        data_config = OmegaConf.to_container(cfg.data, resolve=True)
        text_config = (OmegaConf.to_container(cfg.text, resolve=True)
                       if cfg.get("text") is not None else None)
        shared = WorkerData(data_config, text_config, sent, folksonomy.fingerprint())
        with joblib_engine(self.backend, self.address):
            return list(Parallel(n_jobs=-1)(
                delayed(shard_outcome)(self, seed, name, models[name], shared)
                for seed, name in todo))

    def timing_keys(self, models: Mapping[str, Any]) -> dict[str, str]:
        """Per method, the key of its fits' seconds (:mod:`~tagtorch.evaluation.timings`)."""
        return {name: timing_key(type(self).__name__, config, self.tune.get(name),
                                 self.protocol())
                for name, config in models.items()}

    def piece_keys(self, data: Folksonomy, models: Mapping[str, Any]) -> dict[str, str]:
        """Per method, everything its outcome on a seed depends on, as one JSON string.

        The seed whose rankings go to the TREC files is part of it: its pieces hold them.
        """
        protocol = [*self.protocol(), self.trec, self.seeds[0] if self.trec else None]
        fingerprint = data.fingerprint()
        return {name: json.dumps({"data": fingerprint, "method": config, "protocol": protocol,
                                  "tune": self.tune.get(name)}, sort_keys=True, default=str)
                for name, config in models.items()}

    def report(self, output_dir: Path, whole: MethodOutcome, models: Mapping[str, Any],
               qrels: list[str] | None, title: str, plot_metric: str | None,
               notes: Sequence[str] = (), average_folds: bool = False) -> EvaluationResult:
        """Writes the results, per-query values, TREC files and report of the run folder."""
        notes = [*notes, *(f"Left out of this run, refused before allocating: `{name}`: {why}"
                           for name, why in self.refused.items())]
        results, per_object = whole.frames()
        runs = ({file: whole.run_lines[name]
                 for name, file in run_file_names(list(models)).items()}
                if self.trec else None)
        text = write_run(output_dir, results, per_object, title=title, plot_metric=plot_metric,
                         qrels=qrels, runs=runs, notes=list(notes), average_folds=average_folds,
                         significance=self.significance)
        return EvaluationResult(results, per_object, text, output_dir)


def tuning_notes(output_dir: Path, whole: MethodOutcome, on: str
                 ) -> tuple[list[str], list[pd.DataFrame]]:
    """Writes ``tuning.csv`` of a run's grids; the report's notes and the remaining curves.

    Args:
        output_dir: the run folder.
        whole: every outcome of the run (its curves hold the tuning tables).
        on: what the settings were chosen on (the report says it).
    """
    tuning, curves = split_tuning(whole.curves)
    return write_tuning(output_dir, tuning, "seed", on), curves


@dataclass(frozen=True)
class WorkerData:
    """What a cluster job needs to get the run's data, and the digest that data must have.

    Attributes:
        config: ``cfg.data``, instantiated on the worker when ``sent`` is None (the worker
            reads the files itself: a path it sees, or the seeded generator).
        text: ``cfg.text`` (None: no normalization).
        sent: the data as the caller handed it (the Python API), already normalized.
        fingerprint: :meth:`Folksonomy.fingerprint` of the run's normalized data, as this
            process read it: a worker that reads other data (a file rewritten since) stops.
    """

    config: Any
    text: Any
    sent: Folksonomy | None
    fingerprint: str

    def load(self) -> Folksonomy:
        """The run's normalized data on this worker.

        Raises:
            UnreadableFileError: the data read here is not the run's (naming the file).
        """
        if self.sent is not None:
            return self.sent
        raw = instantiate(self.config)
        data = instantiate(self.text).apply(raw) if self.text is not None else raw
        found = data.fingerprint()
        if found != self.fingerprint:
            config = self.config if isinstance(self.config, dict) else {}
            source = config.get("path") or f"cfg.data ({config.get('_target_')})"
            raise UnreadableFileError(
                f"{source}: a cluster worker read other data than the run's "
                f"(fingerprint {found[:12]}, the run's {self.fingerprint[:12]}): the data "
                f"changed after the run read it; keep it unchanged until the run ends")
        return data


def shard_outcome(task: SeededTask, seed: int, name: str, node: Mapping[str, Any],
                  shared: WorkerData) -> MethodOutcome:
    """One (seed, method) job on a worker: the run's data (checked), split, scored.

    Args:
        task: the task (its settings; its given model objects travel with it).
        seed: the seed.
        name: the method.
        node: its config.
        shared: the run's data, or how to read it and the digest it must have.
    """
    prepared = task.prepare(shared.load())
    split = task.split_seed(prepared, seed, None, {name: node})
    return task.outcome(prepared, split, seed, name, node, {})
