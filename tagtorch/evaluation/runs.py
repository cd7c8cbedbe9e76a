"""Evaluation run folders: the per-method outcomes, resumption pieces, writing and merging.

Every evaluation task (tag recommendation, item recommendation) ends the same way, here: each
method's evaluation on one fold (or seed) becomes a :class:`MethodOutcome` (its per-object
values, fold means, result rows, TREC run lines and learning curve;
:meth:`MethodOutcome.from_values`), which is kept on disk in ``pieces/`` of the run folder as
soon as it is finished (:class:`RunPieces`), so that a rerun with ``resume`` reuses it, sent
to the metric loggers (:meth:`MethodOutcome.log`), and the outcomes of all folds and methods are
written as one run folder (:func:`write_run`): ``results.csv`` (``method, fold, metric, value``),
``per_object.csv.gz`` (the per-object values behind the paired tests), ``report.md``, a bar
chart of NDCG@k, and the TREC files ``qrels.trec`` and ``run.METHOD.trec``
(:mod:`tagtorch.evaluation.trec`). Every file is written whole or not at all
(:func:`tagtorch.storage.atomic_write`).

A comparison split over several runs (some folds with ``task.folds=[3,4]``, some
methods with a subset of ``model=[...]``, or an interrupted run finished by another) is joined
by :func:`merge_runs` into one folder with the same files, as one run over all those folds and
methods would have written them::

    python -m tagtorch.evaluation.runs OUTPUT RUN [RUN ...] [--title TITLE]

The runs must not evaluate the same method on the same fold twice, must each hold the
``config.yaml`` their run wrote, and must share the data, the candidate features and the
protocol's split settings. Time figures are merged as they are: runs that shared the machine
differently are not equally fast.

Merging never writes into a run: the output folder must be new (or empty) and may not be, hold,
or lie inside one of the runs (compared after resolving symbolic links). The merged folder gets
the first run's ``config.yaml`` with the list of merged runs under ``merged_from``, so that it
can itself be merged again. A run file that cannot be read (garbage, a truncated
``per_object.csv.gz``, missing columns, non-numeric values) is an error naming the file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import re
import shlex
import shutil
import sys
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Protocol

import numpy as np
import pandas as pd
import torch
import yaml
from hydra.utils import instantiate
from omegaconf import OmegaConf

from tagtorch.cache import code_fingerprint
from tagtorch.errors import UnreadableFileError
from tagtorch.evaluation.plots import plot_comparison
from tagtorch.evaluation.provenance import PROVENANCE_FILE, run_provenance
from tagtorch.evaluation.report import Significance, markdown_report
from tagtorch.evaluation.trec import run_file_names
from tagtorch.evaluation.tuning import with_settings
from tagtorch.settings import ModelTask, SignatureSettings
from tagtorch.storage import atomic_write, read_json

__all__ = ["EvaluationResult", "GivenObjects", "MethodOutcome", "MetricLogger", "RunPieces",
           "Task", "merge_runs", "methods_of", "write_run"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvaluationResult:
    """What an evaluation of any task returns: the run folder's tables and report, in memory.

    Tag recommendation (folds), item recommendation and resource ranking (seeds as folds) all
    return it, from :func:`tagtorch.evaluate` and from ``python -m tagtorch.train``.

    Attributes:
        results: ``method, fold, metric, value`` (fold means; timings included): ``results.csv``.
        per_object: ``method, fold, object, metric, value`` for the test queries (``object``:
            the query id of the TREC files): ``per_object.csv.gz``.
        report: the markdown report (``report.md``): mean ± 95% CI, paired tests.
        folder: the run folder holding these files, the figures and the TREC runs (None when
            nothing was written).
    """

    results: pd.DataFrame
    per_object: pd.DataFrame
    report: str
    folder: Path | None = None

    def means(self, metric: str) -> pd.Series:
        """Each method's mean over folds of one metric, in the run's method order.

        Example:
            >>> table = pd.DataFrame({"method": ["a", "a", "b"], "fold": [0, 1, 0],
            ...                       "metric": ["p@1"] * 3, "value": [0.25, 0.75, 1.0]})
            >>> EvaluationResult(table, table.iloc[:0], "").means("p@1").to_dict()
            {'a': 0.5, 'b': 1.0}
        """
        rows = self.results[self.results["metric"] == metric]
        if rows.empty:
            raise KeyError(f"no metric {metric!r} in the results: one of "
                           f"{sorted(set(self.results['metric']))}")
        order = list(dict.fromkeys(rows["method"]))
        return rows.groupby("method", sort=False)["value"].mean().reindex(order)

#: Settings a merged run's folders must share (dotted paths into their ``config.yaml``).
SHARED_SETTINGS = (
    "data", "text", "candidates", "task.n_folds", "task.input_fraction",
    "task.min_tags", "task.sample_size", "task.seed",
    "task.ks", "task.metrics",
)
_RESULT_COLUMNS = ["method", "fold", "metric", "value"]
_OBJECT_COLUMNS = ["method", "fold", "object", "metric", "value"]


DEFAULT_SET = "candidates"
"""The name of a run's main candidate set (``candidates``) among ``candidate_sets``."""


def methods_of(cfg: Any) -> dict[str, Any]:
    """The run's methods (``cfg.model``: name -> node) as plain, resolved containers.

    Resolved here, once: worker processes of parallel folds have no Hydra resolvers.

    Raises:
        ValueError: no method is configured.
    """
    configs = {str(name): OmegaConf.to_container(node, resolve=True)
               for name, node in (cfg.model or {}).items()}
    if not configs:
        raise ValueError("no model to evaluate")
    return configs



@dataclass(frozen=True)
class GivenObjects:
    """Unfitted objects the Python API hands to a run as they are, beside their configs.

    :func:`tagtorch.evaluate` and :func:`tagtorch.fit` take model objects and a tag
    recommender's candidate generator. Their configs (``cfg.model.NAME``, ``cfg.candidates``)
    only record the settings (``config.yaml``, the keys of resume pieces); every fit builds its
    model from the object (:meth:`build`: its constructor arguments as given, so a factory stays
    the callable it was), never from the recorded config.

    Attributes:
        models: method name -> an unfitted model.
        candidates: the unfitted candidate generator of ``cfg.candidates`` (None: the config's).
        caller_data: whether the caller handed the data over (the Python API) rather than
            ``cfg.data`` describing it: a cluster's workers then get it from this process.
    """

    models: Mapping[str, SignatureSettings] = field(default_factory=dict)
    candidates: SignatureSettings | None = None
    caller_data: bool = False

    def build(self, name: str, config: Mapping[str, Any],
              settings: Mapping[str, Any] = MappingProxyType({})) -> Any:
        """A new unfitted model of method ``name``, with dotted ``settings`` on top.

        Args:
            name: the method.
            config: its config node (built when no object was given for it).
            settings: what the task sets (a grid point, the seed, a checkpoint folder).
        """
        given = self.models.get(name)
        if given is not None:
            return given.unfitted(**with_settings(given.init_args, settings))
        return instantiate(with_settings(config, settings))

class MetricLogger(Protocol):
    """What an evaluation needs of a Lightning logger."""

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Logs scalar metrics."""
        ...


class Task:
    """The one shape of every task (``cfg.task``): what :func:`tagtorch.train.run_task` runs.

    Each task (tag recommendation, item recommendation, resource ranking, personalized tags,
    LETOR, ``fit``, ``describe``) states the kinds of model it runs and is run one way, by
    :meth:`run`; the seeded tasks share one loop (:class:`tagtorch.evaluation.task
    .SeededTask`).
    """

    model_tasks: ClassVar[tuple[ModelTask, ...]] = ()
    """The kinds of model the task runs (the config checks read it; empty: none)."""

    def run(self, data: Any, cfg: Any, output_dir: Path, loggers: Sequence[MetricLogger] = (),
            *, raw: Any = None, given: GivenObjects | None = None) -> Any:
        """Runs the task on ``data`` (its text normalized) and writes ``output_dir``.

        Args:
            data: the folksonomy (its text normalized by ``cfg.text``), or a LETOR dataset.
            cfg: the run's configuration (``cfg.model``: the methods).
            output_dir: the run folder.
            loggers: metric loggers (each fold's or seed's means).
            raw: the data as loaded, before its text was normalized (``task=fit`` shows its
                tags and titles as written; the others leave it).
            given: model objects to build from instead of their configs (the Python API).

        Returns:
            The task's result: an :class:`EvaluationResult` for an evaluation.
        """
        raise NotImplementedError


@dataclass
class MethodOutcome:
    """What one method's evaluation on one fold (or seed) yields; several merge into one.

    Attributes:
        results: rows ``{"method", "fold", "metric", "value"}`` (the fold means).
        per_object: frames with the columns ``object, metric, value, method, fold``
            (``object``: the query's id in the TREC files).
        means: method -> metric -> fold mean (what the loggers receive).
        run_lines: method -> its TREC run lines on this fold.
        curves: frames of per-epoch training records (``epoch, train_loss, ...``, ``method``,
            ``seed``) of the methods that keep a learning curve.
    """

    results: list[dict[str, Any]] = field(default_factory=list)
    per_object: list[pd.DataFrame] = field(default_factory=list)
    means: dict[str, dict[str, float]] = field(default_factory=dict)
    run_lines: dict[str, list[str]] = field(default_factory=dict)
    curves: list[pd.DataFrame] = field(default_factory=list)

    @classmethod
    def from_values(cls, method: str, fold: int, objects: np.ndarray,
                    values: Mapping[str, torch.Tensor], extra: Mapping[str, float] | None = None,
                    run_lines: Sequence[str] | None = None,
                    curve: pd.DataFrame | None = None) -> MethodOutcome:
        """The outcome of per-object metric values.

        Args:
            method: the method's name.
            fold: the fold (or seed).
            objects: ``[N]`` the evaluated queries' ids, as the TREC files name them (tag
                recommendation: object codes; item recommendation: ``u{user}t{tag}`` or
                ``u{user}``; resource ranking: ``q{post key}``), so per-object rows join the
                run files' lines.
            values: metric -> ``[N]`` per-object values (NaN: not counted in the mean).
            extra: further fold figures (timings, training facts), reported after the
                means of ``values`` in their order.
            run_lines: the method's TREC run lines (None: none).
            curve: the method's learning curve (None: none).

        Example:
            >>> out = MethodOutcome.from_values("m", 3, np.array([7, 9]),
            ...     {"p@1": torch.tensor([1.0, 0.0]), "map": torch.tensor([0.5, float("nan")])},
            ...     extra={"fit_seconds": 2.0})
            >>> out.means
            {'m': {'p@1': 0.5, 'map': 0.5, 'fit_seconds': 2.0}}
            >>> out.per_object[0].values.tolist()[:2]
            [[7, 'p@1', 1.0, 'm', 3], [9, 'p@1', 0.0, 'm', 3]]
        """
        frame = pd.DataFrame({k: v.cpu().numpy() for k, v in values.items()})
        frame.insert(0, "object", objects)
        frame = frame.melt(id_vars="object", var_name="metric", value_name="value")
        means = {k: float(torch.nanmean(v).item()) for k, v in values.items()}
        means.update(extra or {})
        return cls(results=[{"method": method, "fold": fold, "metric": k, "value": v}
                            for k, v in means.items()],
                   per_object=[frame.assign(method=method, fold=fold)],
                   means={method: means},
                   run_lines={} if run_lines is None else {method: list(run_lines)},
                   curves=[] if curve is None else [curve])

    @classmethod
    def merge(cls, parts: Sequence[MethodOutcome]) -> MethodOutcome:
        """One outcome of several (in their order)."""
        merged = cls()
        for part in parts:
            merged.results += part.results
            merged.per_object += part.per_object
            merged.means.update(part.means)
            merged.run_lines.update(part.run_lines)
            merged.curves += part.curves
        return merged

    def log(self, loggers: Sequence[MetricLogger], step: int) -> None:
        """Sends each method's means to every logger as ``{method}/test/{metric}`` at ``step``."""
        for name, means in self.means.items():
            for logger in loggers:
                logger.log_metrics({f"{name}/test/{k}": v for k, v in means.items()}, step=step)

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The outcome as the frames ``results`` and ``per_object``.

        Returns:
            ``results`` (``method, fold, metric, value``) and ``per_object`` (``method, fold,
            object, metric, value``).
        """
        results = pd.DataFrame(self.results, columns=_RESULT_COLUMNS)
        per_object = pd.concat(self.per_object, ignore_index=True)[_OBJECT_COLUMNS]
        return results, per_object


class RunPieces:
    """Finished (fold, method) outcomes of a run, on disk, each with its settings key.

    A piece is gzipped JSON (``{unit}{k}.{method}.json.gz``, never a pickle): the key, the
    results, the means, the TREC lines and the per-object frames and learning curves as
    columns with their dtypes, so a resumed run reports exactly the same numbers. A piece
    whose key differs from the method's current one, or that was computed by other code (its
    ``code``: :func:`~tagtorch.cache.code_fingerprint` of the whole package, which includes
    the version), is run again; one that cannot be read is run again with a warning naming it.

    Args:
        folder: the pieces' folder (``pieces/`` of the run folder).
        keys: method -> everything its outcome on a fold depends on (one string: data
            fingerprint, method settings, protocol settings); methods without a key are not
            kept.
        unit: what a piece's number counts (``"fold"``, ``"seed"``).
    """

    def __init__(self, folder: Path, keys: Mapping[str, str], unit: str = "fold") -> None:
        self.folder = folder
        self.keys = dict(keys)
        self.unit = unit
        self.code = code_fingerprint("tagtorch")

    def _path(self, fold: int, name: str) -> Path:
        safe = re.sub(r"[^\w.-]", "_", name)
        return self.folder / f"{self.unit}{fold}.{safe}.json.gz"

    def write(self, fold: int, name: str, outcome: MethodOutcome) -> None:
        """Keeps a finished outcome (atomically: a piece is whole or absent)."""
        if name not in self.keys:  # a method without settings is not kept
            return
        piece = {"key": self.keys[name], "code": self.code, "results": outcome.results,
                 "means": outcome.means, "run_lines": outcome.run_lines,
                 "per_object": [_frame_to_json(frame) for frame in outcome.per_object],
                 "curves": [_frame_to_json(frame) for frame in outcome.curves]}
        text = json.dumps(piece, default=_json_scalar, separators=(",", ":"))
        with atomic_write(self._path(fold, name)) as partial:  # fast gzip: a piece is transient
            partial.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=1))

    def read(self, fold: int, name: str) -> MethodOutcome | None:
        """The kept outcome; None if there is none, it is unreadable, or its settings differ."""
        path = self._path(fold, name)
        if name not in self.keys or not path.is_file():
            return None
        try:
            saved = json.loads(_inflated(path))
            if saved["key"] != self.keys[name]:
                log.info("%s %d, %s: the kept outcome has other settings; running it again",
                         self.unit, fold, name)
                return None
            if saved.get("code") != self.code:
                log.info("%s %d, %s: the kept outcome was computed by other tagtorch code; "
                         "running it again", self.unit, fold, name)
                return None
            return MethodOutcome(results=list(saved["results"]),
                                 per_object=[_frame_from_json(f) for f in saved["per_object"]],
                                 means=dict(saved["means"]), run_lines=dict(saved["run_lines"]),
                                 curves=[_frame_from_json(f) for f in saved["curves"]])
        except Exception as error:  # any unreadable piece is run again
            log.warning("%s: unreadable run piece, running %s %d, %s again (%s: %s)", path,
                        self.unit, fold, name, type(error).__name__, error)
            return None

    def read_all(self, folds: Sequence[int], names: Sequence[str]) -> dict[tuple[int, str],
                                                                         MethodOutcome]:
        """The readable pieces of these folds and methods whose settings match."""
        done = {(fold, name): piece for fold in folds for name in names
                if (piece := self.read(fold, name)) is not None}
        if done:
            log.info("resuming: %d of %d (%s, method) outcomes read from %s", len(done),
                     len(folds) * len(names), self.unit, self.folder)
        return done

    def clear(self) -> None:
        """Deletes the pieces (once the run's report is written)."""
        shutil.rmtree(self.folder, ignore_errors=True)


PIECE_RATIO = 200
"""The most a run piece may inflate (its JSON's bytes per gzip byte; level 1 gives about 5)."""


def _inflated(path: Path) -> bytes:
    """A gzipped piece's bytes, refused past :data:`PIECE_RATIO` times its size.

    A gzip bomb planted in a run folder would otherwise take all memory before it failed to
    parse.

    Raises:
        ValueError: the piece inflates further.
    """
    limit = PIECE_RATIO * path.stat().st_size + 4096
    data = bytearray()
    with gzip.open(path, "rb") as handle:
        while chunk := handle.read(2**20):
            data += chunk
            if len(data) > limit:
                raise ValueError(f"it inflates past {PIECE_RATIO} times its size")
    return bytes(data)


def _json_scalar(value: Any) -> Any:
    """A numpy scalar as the Python number JSON writes (``json.dump``'s ``default``)."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _frame_to_json(frame: pd.DataFrame) -> dict[str, Any]:
    """A frame as JSON-able columns and dtypes (:func:`_frame_from_json` restores it).

    Example:
        >>> frame = pd.DataFrame({"object": [4, 5], "value": np.array([0.5, np.nan], "float32")})
        >>> back = _frame_from_json(json.loads(json.dumps(_frame_to_json(frame))))
        >>> back.dtypes.astype(str).tolist(), back["object"].tolist()
        (['int64', 'float32'], [4, 5])
    """
    return {"columns": {str(c): frame[c].tolist() for c in frame.columns},
            "dtypes": {str(c): str(frame[c].dtype) for c in frame.columns}}


def _frame_from_json(data: Mapping[str, Any]) -> pd.DataFrame:
    """The frame of :func:`_frame_to_json`."""
    return pd.DataFrame({c: pd.Series(values, dtype=data["dtypes"][c])
                         for c, values in data["columns"].items()})


def write_run(output_dir: str | Path, results: pd.DataFrame, per_object: pd.DataFrame,
              title: str, plot_metric: str | None = None, qrels: Sequence[str] | None = None,
              runs: Mapping[str, Sequence[str]] | None = None, notes: Sequence[str] = (),
              average_folds: bool = False,
              significance: Significance | Mapping[str, Any] | None = None) -> str:
    """Writes a run folder: results, per-object values, report, chart and TREC files.

    Every file is written whole or not at all (:func:`tagtorch.storage.atomic_write`). TREC
    files of an earlier run into the same folder (``qrels.trec``, ``run*.trec``) that this run
    does not write are removed, so the folder never mixes two runs' rankings.

    Args:
        output_dir: the run folder (created if missing).
        results: columns ``method, fold, metric, value``.
        per_object: columns ``method, fold, object, metric, value`` (``object``: the query
            id of the TREC run files).
        title: the report's title.
        plot_metric: the metric of the bar chart (``METRIC.png``) and of the report's opening
            table, methods best first (:func:`~tagtorch.evaluation.report.headline_table`);
            default: the ``ndcg@K`` of ``results`` with the largest ``K`` (none without one).
        qrels: the lines of ``qrels.trec`` (None: no file).
        runs: run file name (:func:`~tagtorch.evaluation.trec.run_file_names`) -> its lines
            (None: no run files).
        notes: paragraphs added to the report after its tables (facts of the task's run).
        average_folds: paired tests on each object's mean over the folds
            (:func:`~tagtorch.evaluation.report.significance`).
        significance: the report's paired tests (the task's ``significance`` setting,
            :class:`~tagtorch.evaluation.report.Significance`; None: the paired t-test).

    Returns:
        The markdown report.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if plot_metric is None:  # the deepest NDCG, as the tasks plot it
        cutoffs = [int(m[5:]) for m in dict.fromkeys(results["metric"].astype(str))
                   if re.fullmatch(r"ndcg@\d+", m)]
        plot_metric = f"ndcg@{max(cutoffs)}" if cutoffs else None
    report = markdown_report(results, per_object, title=title, average_folds=average_folds,
                             significance=significance, headline_metric=plot_metric)
    if notes:
        report += "\n## Notes\n\n" + "\n\n".join(notes) + "\n"
    with atomic_write(out / "results.csv") as partial:
        results.to_csv(partial, index=False)
    with atomic_write(out / "per_object.csv.gz") as partial:
        per_object.to_csv(partial, index=False, compression="gzip")
    with atomic_write(out / "report.md") as partial:
        partial.write_text(report)
    trec = {**({"qrels.trec": qrels} if qrels is not None else {}), **(runs or {})}
    for old in [*out.glob("run*.trec"), out / "qrels.trec"]:
        if old.name not in trec:
            old.unlink(missing_ok=True)
    for name, lines in trec.items():
        with atomic_write(out / name) as partial, open(partial, "w") as handle:
            handle.writelines(lines)
    if plot_metric is not None:
        plot_comparison(results, plot_metric, out / f"{plot_metric}.png",
                        title=f"{plot_metric}: {title}")
    return report


def _setting(config: dict, dotted: str) -> object:
    node: object = config
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _check_output(out: Path, runs: Sequence[Path]) -> None:
    """Refuses an output folder that is not new or empty, or that overlaps an input run."""
    target = out.resolve()
    for run in runs:
        source = run.resolve()
        if target == source:
            raise ValueError(f"the merged folder {out} is one of the runs: choose a new folder")
        if source in target.parents:
            raise ValueError(f"the merged folder {out} lies inside the run {run}: choose a "
                             "folder outside every run")
        if target in source.parents:
            raise ValueError(f"the merged folder {out} holds the run {run}: choose a folder "
                             "outside every run")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"the merged folder {out} exists and is not empty: merging writes into "
                         "a new folder (usage: python -m tagtorch.evaluation.runs NEW_FOLDER "
                         "RUN [RUN ...])")


def _read_config(run: Path) -> dict:
    path = run / "config.yaml"
    if not run.is_dir():
        raise FileNotFoundError(f"{run} is not a folder: is it the output folder of an "
                                "evaluation run?")
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: a run is merged only with the settings it "
                                "was run with (the config.yaml its run wrote)")
    try:
        config = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: expected the YAML config of a run, found unreadable text "
                         f"({type(error).__name__})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: expected the YAML config of a run, found a "
                         f"{type(config).__name__}")
    return config


def _check_settings(configs: dict[Path, dict]) -> None:
    if len(configs) < 2:
        return
    (first, reference), *others = configs.items()
    for run, config in others:
        for key in SHARED_SETTINGS:
            if _setting(config, key) != _setting(reference, key):
                raise ValueError(f"runs {first} and {run} differ in {key!r}: "
                                 f"{_setting(reference, key)!r} against {_setting(config, key)!r}")


def _read(run: Path, name: str, columns: list[str]) -> pd.DataFrame:
    path = run / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: is {run} the output folder of an "
                                "evaluation run?")
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, EOFError,
            gzip.BadGzipFile, zlib.error, OSError) as error:
        raise ValueError(f"{path}: expected a CSV table with the columns {columns}, found an "
                         f"unreadable file ({type(error).__name__}: {error})") from None
    missing = set(columns) - set(frame.columns)
    if missing:
        raise ValueError(f"{path} lacks the columns {sorted(missing)}")
    frame = frame[columns]
    numeric = [c for c in ("fold", "value") if c in columns]
    for column in numeric:
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = values.isna() & frame[column].notna()
        if column == "fold":
            bad |= values.isna() | (values % 1 != 0)
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raise ValueError(f"{path}, line {row + 2}: expected "
                             f"{'an integer' if column == 'fold' else 'a number'} in column "
                             f"{column!r}, found {frame[column].iloc[row]!r}")
        frame[column] = values.astype("int64") if column == "fold" else values
    return frame


def _merge_trec(runs: Sequence[Path], run_methods: Sequence[list[str]],
                methods: list[str]) -> tuple[list[str] | None, dict[str, list[str]]]:
    """The merged TREC files' lines.

    ``run_methods`` are each run's own methods, which name its run files.

    Returns:
        The qrels lines (each query's from its first run; None: no run has qrels) and run file
        name -> lines (the runs' lines of ``methods``, in run order).
    """
    merged = run_file_names(methods)
    run_files: dict[str, list[str]] = {}
    for run, own in zip(runs, run_methods, strict=True):
        for method, name in run_file_names(own).items():
            if method in merged and (run / name).is_file():
                run_files.setdefault(merged[method], []).extend(
                    (run / name).read_text().splitlines(keepends=True))
    qrels = [run / "qrels.trec" for run in runs if (run / "qrels.trec").is_file()]
    if not qrels:
        return None, run_files
    seen: set[str] = set()
    kept: list[str] = []
    for path in qrels:
        lines = path.read_text().splitlines(keepends=True)
        queries = {line.split(maxsplit=1)[0] for line in lines if line.strip()}
        kept += [line for line in lines if line.strip() and line.split(maxsplit=1)[0] not in seen]
        seen |= queries
    return kept, run_files


def merge_runs(runs: Sequence[str | Path], output_dir: str | Path,
               title: str | None = None, methods: Sequence[str] | None = None,
               command: str | None = None) -> str:
    """Joins evaluation runs over different folds or methods into one run folder.

    Args:
        runs: the run folders, each with ``results.csv`` and ``per_object.csv.gz``; methods keep
            their first-seen order.
        output_dir: the merged folder: new or empty, outside every run.
        title: the report's title; default: the first run's, with "(merged from N runs)".
        methods: keep only these methods, in this order (the first is the baseline of the
            report); default: all, in first-seen order.
        command: how the merge was started, for its ``provenance.json`` (which also lists
            each run's own, ``merged_from``); default: this call.

    Returns:
        The merged markdown report (also written to ``output_dir/report.md``).

    Raises:
        ValueError: with fewer than one run, an output folder that is not new or empty or
            that is, holds or lies inside a run, a (method, fold) pair in two runs, runs whose
            shared settings (:data:`SHARED_SETTINGS`) differ, a requested method that no run
            has, or a run file that cannot be read (the message names the file).
        FileNotFoundError: if a run lacks its results or its ``config.yaml``.
    """
    folders = [Path(run) for run in runs]
    out = Path(output_dir)
    if not folders:
        raise ValueError("no run to merge")
    _check_output(out, folders)
    configs = {run: _read_config(run) for run in folders}
    _check_settings(configs)
    results = [_read(run, "results.csv", _RESULT_COLUMNS) for run in folders]
    per_object = [_read(run, "per_object.csv.gz", _OBJECT_COLUMNS) for run in folders]
    run_methods = [list(dict.fromkeys(frame["method"])) for frame in results]
    if methods is not None:
        found = {method for own in run_methods for method in own}
        if missing := [m for m in methods if m not in found]:
            raise ValueError(f"no run has the methods {missing}; they have {sorted(found)}")
        results = [frame[frame["method"].isin(methods)] for frame in results]
        per_object = [frame[frame["method"].isin(methods)] for frame in per_object]
    pairs: dict[tuple[str, int], Path] = {}
    for run, frame in zip(folders, results, strict=True):
        for method, fold in frame[["method", "fold"]].drop_duplicates().itertuples(index=False):
            if (method, fold) in pairs:
                raise ValueError(f"{method!r} on fold {fold} is in both {pairs[method, fold]} "
                                 f"and {run}")
            pairs[method, fold] = run
    title = title or _merged_title(folders)
    out.mkdir(parents=True, exist_ok=True)
    merged = [pd.concat(frames, ignore_index=True) for frames in (results, per_object)]
    if methods is not None:  # the report lists methods in first-seen order
        order = {method: i for i, method in enumerate(methods)}
        merged = [frame.sort_values("method", key=lambda m: m.map(order), kind="stable")
                  for frame in merged]
    qrels, run_files = _merge_trec(folders, run_methods,
                                   list(dict.fromkeys(merged[0]["method"])))
    config = {**configs[folders[0]], "merged_from": [str(run.resolve()) for run in folders]}
    with atomic_write(out / "config.yaml") as partial:
        partial.write_text(yaml.safe_dump(config, sort_keys=False))
    provenance = {**run_provenance(command or f"merge_runs({[str(r) for r in folders]}, "
                                                f"{str(out)!r}, methods={methods!r})"),
                  "merged_from": [_run_provenance_of(run) for run in folders]}
    with atomic_write(out / PROVENANCE_FILE) as partial:
        partial.write_text(json.dumps(provenance, indent=1))
    return write_run(out, merged[0], merged[1], title, qrels=qrels, runs=run_files,
                     notes=run_notes(folders))


def _run_provenance_of(run: Path) -> dict[str, Any]:
    """A merged run's ``provenance.json`` (its folder only, for a run older than that file)."""
    try:
        return {"folder": str(run.resolve()),
                **read_json(run / PROVENANCE_FILE, keys=["command", "commit"])}
    except UnreadableFileError:
        return {"folder": str(run.resolve())}


def _merged_title(runs: Sequence[Path]) -> str:
    """The first run's report title, with "(merged from N runs)"."""
    report = runs[0] / "report.md"
    first = report.read_text().splitlines()[0].lstrip("# ") if report.is_file() else "Results"
    return f"{first} (merged from {len(runs)} runs)"


def run_notes(runs: Sequence[Path]) -> list[str]:
    """The paragraphs of the runs' ``## Notes``, each once, in order.

    A merged report keeps what its runs said (how settings were chosen, side data, ...).
    """
    notes: list[str] = []
    for run in runs:
        report = run / "report.md"
        text = report.read_text(encoding="utf-8") if report.is_file() else ""
        _, found, tail = text.partition("\n## Notes\n")
        section = tail.split("\n## ", 1)[0] if found else ""
        notes += [part.strip() for part in section.split("\n\n") if part.strip()]
    return list(dict.fromkeys(notes))


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``python -m tagtorch.evaluation.runs OUTPUT RUN [RUN ...]``."""
    parser = argparse.ArgumentParser(description=(merge_runs.__doc__ or '').splitlines()[0])
    parser.add_argument("output", type=Path, help="the merged run folder")
    parser.add_argument("runs", type=Path, nargs="+", help="run folders to merge")
    parser.add_argument("--title", default=None, help="the merged report's title")
    parser.add_argument("--methods", nargs="+", default=None,
                        help="keep only these methods, in this order (the first is the baseline)")
    args = parser.parse_args(argv)
    try:
        report = merge_runs(args.runs, args.output, title=args.title, methods=args.methods,
                            command=" ".join(["python -m tagtorch.evaluation.runs",
                                              *map(shlex.quote, sys.argv[1:] if argv is None
                                                   else argv)]))
    except (ValueError, FileNotFoundError, PermissionError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    print(report)


if __name__ == "__main__":
    main()
