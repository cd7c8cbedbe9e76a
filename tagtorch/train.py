"""``python -m tagtorch.train``: the one Hydra entry point for every task and ranker.

Examples:
    python -m tagtorch.train                          # LATRE+wTS on synthetic data
    python -m tagtorch.train +experiment=latre_lastfm # the same on HetRec LastFM-2k
    python -m tagtorch.train data=movielens task=describe
    python -m tagtorch.train logger=csv task.folds=[0]

``train`` (and so Hydra's ``main``) returns the value of the configured ``optimized_metric`` (a
float, as in lightning-hydra-template), so that a sweep (``python -m tagtorch.train -m ...``
with an Optuna sweeper) can optimize it: ``METRIC`` is the first method's mean over the folds
(seeds) of ``METRIC`` in ``results.csv``, ``METHOD/METRIC`` that method's. ``null`` takes the
task's default: the first method's ``ndcg@K`` (K the first of ``task.ks``) for tag
recommendation, the first method's ``val_dcg@10`` for item recommendation and its
``val_{task.tune_metric}`` for resource ranking (scores on held-out training posts: tune on
them, never on test), the first method's ``tagrec_mrr@K`` (K the largest of ``task.ks``, what
the report ranks by) for personalized tags; ``train`` returns None where the default does not
exist (a first method that is not trained, the ``describe`` task). A
configured metric that the run does not report is an error naming the key and the metrics
available. An ``hparams_search`` sweep must optimize a validation metric: the sweeper refuses a
test metric (:func:`check_sweep_metric`, :func:`is_test_metric`) before any trial.
:func:`run_task` returns the task's own result instead (an
:class:`~tagtorch.evaluation.runs.EvaluationResult` for the three evaluation tasks); the
Python API (:mod:`tagtorch.api`: ``tagtorch.evaluate``, ``tagtorch.fit``) runs through it too.

The composed configuration is checked before any work (:mod:`tagtorch.config_checks`, and
``optimized_metric``'s method here). A bad setting, a malformed data file, a missing or
unreadable file ends the run with one line on standard error naming the key or the file, and
exit status 2; other errors keep their traceback (they are bugs to report).
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Any

import hydra
import pandas as pd
import pytorch_lightning as pl
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.utilities.exceptions import SIGTERMException

from tagtorch.cache import describe_caches
from tagtorch.candidates.letor import LetorData
from tagtorch.config_checks import (
    check_config,
    drop_unselected_settings,
    keep_search_method,
    task_kinds,
)
from tagtorch.data.download import user_cache_dir
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.errors import ConfigError, DataCheckError, DataFormatError, UnreadableFileError
from tagtorch.evaluation.provenance import PROVENANCE_FILE, command_line, run_provenance
from tagtorch.evaluation.report import headline_section, is_timing_metric
from tagtorch.evaluation.runs import EvaluationResult, GivenObjects, Task
from tagtorch.storage import atomic_write, write_json
from tagtorch.sweeps import trial_of

log = logging.getLogger(__name__)

#: ``provenance.json``'s command of a run started from Python (its settings: config.yaml)
API_COMMAND = "the Python API (tagtorch.evaluate, tagtorch.fit); its settings: config.yaml"

#: Errors that are the input's fault, not tagtorch's: shown as one line, without a traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (ConfigError, DataFormatError, DataCheckError,
                                                 UnreadableFileError, FileNotFoundError,
                                                 PermissionError, IsADirectoryError)


def user_error(error: BaseException) -> BaseException | None:
    """The input error behind ``error`` (Hydra wraps errors raised while instantiating)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, USER_ERRORS):
            return seen
        if not isinstance(seen, InstantiationException):
            return None
        seen = seen.__cause__
    return None


def _task_kind(cfg: DictConfig) -> str | None:
    """``"tagrec"``, ``"itemrec"`` or ``"resources"``; None for a task without metrics."""
    kinds = task_kinds(cfg)
    return kinds[0] if len(kinds) == 1 else None


def default_metric(cfg: DictConfig) -> str | None:
    """The task's metric to optimize when ``optimized_metric`` is null (None: it has none).

    Tag recommendation: ``ndcg@K`` with K the first of ``task.ks``; personalized tags:
    ``tagrec_mrr@K`` with K the largest of ``task.ks`` (what its report ranks by); item
    recommendation: ``val_dcg@10``, resource ranking ``val_{task.tune_metric}`` (validation
    scores, never a test figure).
    """
    kind = _task_kind(cfg)
    if kind == "tagrec":
        if "ndcg" in list(cfg.task.metrics):  # tag recommendation and LETOR
            return f"ndcg@{cfg.task.ks[0]}"
        return None
    if kind == "resources":
        return f"val_{cfg.task.get('tune_metric', 'mrr@10')}"
    if kind == "posts":  # the metric its report ranks by
        return f"tagrec_mrr@{max(cfg.task.ks)}"
    return "val_dcg@10" if kind == "itemrec" else None


def check_optimized_metric(cfg: DictConfig) -> None:
    """Checks ``optimized_metric`` before any work: its form, its method and its task.

    Raises:
        ConfigError: not a string of the form ``METRIC`` or ``METHOD/METRIC``, a method not in
            ``model``, or a task that reports no metrics (``describe``).
    """
    name = cfg.get("optimized_metric")
    if name is None:
        return
    expected = "null, METRIC or METHOD/METRIC (e.g. ndcg@5 or sum/ndcg@5), a metric of results.csv"
    if not isinstance(name, str) or not name.strip("/") or name.count("/") > 1:
        raise ConfigError("optimized_metric", name, expected)
    kind = _task_kind(cfg)
    if kind not in ("tagrec", "itemrec", "resources"):
        raise ConfigError("optimized_metric", name,
                          f"null: the task {cfg.task.get('_target_')} reports no metrics")
    method, _, metric = name.rpartition("/")
    methods = [str(m) for m in (cfg.get("model") or {})]
    if not metric or (method and method not in methods):
        raise ConfigError("optimized_metric", name,
                          f"{expected}; the methods of this run are {methods}")


def is_test_metric(cfg: DictConfig, metric: str) -> bool:
    """Whether a results metric of this run is measured on the test split.

    Validation metrics are the ``val_*`` scores (item recommendation's ``val_dcg@10``,
    resource ranking's ``val_{tune_metric}``) and, for tag recommendation with
    ``task.evaluate_on=validation``, every metric (T is never read). Timings
    (:func:`~tagtorch.evaluation.report.is_timing_metric`) are no test figures either. Every
    other metric (NDCG, P, MAP, candidate recall, ... of a run that evaluates on T or the test
    posts) is.

    Example:
        >>> task = "tagtorch.evaluation.tag_recommendation.TagRecommendationTask"
        >>> cfg = OmegaConf.create({"task": {"_target_": task, "evaluate_on": "test"}})
        >>> is_test_metric(cfg, "ndcg@5"), is_test_metric(cfg, "fit_seconds")
        (True, False)
        >>> cfg.task.evaluate_on = "validation"
        >>> is_test_metric(cfg, "ndcg@5")
        False
    """
    if metric.startswith("val_") or is_timing_metric(metric):
        return False
    if _task_kind(cfg) == "tagrec":
        return cfg.task.get("evaluate_on", "test") == "test"
    return True


def check_sweep_metric(cfg: DictConfig) -> None:
    """Refuses a sweep's objective that is a test metric (:func:`is_test_metric`).

    Called by the ``tagtorch_optuna`` sweeper on the trials' configuration before any trial:
    hyperparameters chosen on test figures make those figures optimistic.

    Raises:
        ConfigError: naming ``optimized_metric`` (or the task's default it stands for) and the
            validation metric or setting to use instead.
    """
    name = cfg.get("optimized_metric")
    metric = str(name).rpartition("/")[2] if name is not None else default_metric(cfg)
    if metric is None or not is_test_metric(cfg, metric):
        return
    kind = _task_kind(cfg)
    instead = ("set task.evaluate_on=validation (learn on part of V, score the rest)"
               if kind == "tagrec" else f"optimize {default_metric(cfg)} (or null)")
    named = repr(metric) if name is not None else f"null (the task's default, {metric!r})"
    raise ConfigError("optimized_metric", name,
                      f"a validation metric in a sweep: {named} is a test metric; {instead}")


def metric_value(results: pd.DataFrame, name: str) -> float:
    """The mean over folds of one metric of a run's results.

    Args:
        results: ``method, fold, metric, value`` (``results.csv``).
        name: ``METRIC`` (the first method's) or ``METHOD/METRIC``.

    Raises:
        ConfigError: naming ``optimized_metric`` and the available metrics, when the results
            hold no such metric.

    Example:
        >>> table = pd.DataFrame({"method": ["a", "a", "b"], "fold": [0, 1, 0],
        ...                       "metric": ["p@1", "p@1", "p@1"], "value": [0.25, 0.75, 1.0]})
        >>> metric_value(table, "p@1"), metric_value(table, "b/p@1")
        (0.5, 1.0)
    """
    method, _, metric = name.rpartition("/")
    methods = list(dict.fromkeys(results["method"]))
    method = method or (methods[0] if methods else "")
    rows = results[(results["method"] == method) & (results["metric"] == metric)]
    if rows.empty:
        available = [f"{m}/{k}" for m, k in
                     results[["method", "metric"]].drop_duplicates().itertuples(index=False)]
        raise ConfigError("optimized_metric", name,
                          f"a metric of this run (METRIC is the first method's, {method!r}): "
                          f"one of {available}")
    return float(rows["value"].mean())


def run_task(cfg: DictConfig, raw: Folksonomy | LetorData | None = None,
             given: GivenObjects | None = None) -> Any:
    """Loads the data, normalizes its text, and runs the configured task.

    Args:
        cfg: the composed configuration (``conf/train.yaml``).
        raw: the folksonomy as loaded, in place of ``cfg.data`` (:func:`tagtorch.evaluate`).
        given: model objects (and a candidate generator) that the task builds from instead of
            their configs, which then only record them (:func:`tagtorch.evaluate`).

    Returns:
        What the task returns: an :class:`~tagtorch.evaluation.runs.EvaluationResult` for the
        three evaluation tasks, the artifact folders for ``fit``, the statistics for
        ``describe``.
    """
    drop_unselected_settings(cfg)
    keep_search_method(cfg)
    check_config(cfg)
    check_optimized_metric(cfg)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    with atomic_write(output_dir / "config.yaml") as partial:
        OmegaConf.save(cfg, partial, resolve=True)
    write_json(run_provenance(command_line() if raw is None else API_COMMAND),
               output_dir / PROVENANCE_FILE)

    if OmegaConf.select(cfg, "text.cache") or OmegaConf.select(cfg, "task.cache"):
        log.info("%s", describe_caches(user_cache_dir()))  # where they live, how large
    if raw is None:
        log.info("loading data: %s", cfg.data._target_)
        raw = instantiate(cfg.data)
    folksonomy = raw
    if cfg.get("text") is not None and isinstance(raw, Folksonomy):  # not a LETOR dataset
        folksonomy = instantiate(cfg.text).apply(raw)
    log.info("%r", folksonomy)

    loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values()]
    params = OmegaConf.to_container(cfg, resolve=True)
    for logger in loggers:
        logger.log_hyperparams(params)

    task = build_task(cfg)
    try:
        return task.run(folksonomy, cfg, output_dir, loggers, raw=raw, given=given)
    finally:
        for logger in loggers:
            logger.finalize("success")
            finish = getattr(getattr(logger, "experiment", None), "finish", None)
            if finish is not None:  # a wandb run: close it so its files are complete
                finish()


def build_task(cfg: DictConfig) -> Task:
    """The task of ``cfg.task``; a setting its constructor refuses is one :class:`ConfigError`.

    Hydra wraps what a constructor raises in an ``InstantiationException`` (a traceback from
    the command, an unexpected class from the Python API): an input error inside is raised
    as it is, a ``ValueError`` or ``TypeError`` of the task's settings as a ``ConfigError``
    naming ``task`` and the constructor's reason.

    Raises:
        ConfigError: settings the task refuses, or a ``_target_`` that builds no task.
    """
    target = cfg.task.get("_target_")
    try:
        task = instantiate(cfg.task, _convert_="all")
    except InstantiationException as error:
        cause, inner = user_error(error), error.__cause__
        if cause is not None:
            raise cause from None
        if not isinstance(inner, ValueError | TypeError):
            raise
        reason = (str(inner).strip().splitlines() or [type(inner).__name__])[0]
        raise ConfigError("task", target, f"settings the task accepts ({reason})") from None
    if not isinstance(task, Task):
        raise ConfigError("task._target_", target, "a task (tagtorch.evaluation.runs.Task)")
    return task


def train(cfg: DictConfig) -> float | None:
    """Runs the configured task (:func:`run_task`) and returns its ``optimized_metric``.

    Args:
        cfg: the composed configuration (``conf/train.yaml``).

    Returns:
        The mean over folds (seeds) of ``optimized_metric``, or of the task's default
        (:func:`default_metric`) when it is null; None when that default is not reported.

    Raises:
        ConfigError: ``optimized_metric`` is malformed or names a method of no run (before
            any work), or names a metric the run does not report (after it).
    """
    result = run_task(cfg)
    if isinstance(result, EvaluationResult):
        print(closing_lines(result))  # the command line ends with them; the API returns all
    results = getattr(result, "results", result)
    if not isinstance(results, pd.DataFrame):
        return None
    name = cfg.get("optimized_metric")
    value: float | None
    if name is not None:
        value = metric_value(results, str(name))
    else:
        default = default_metric(cfg)
        try:
            value = metric_value(results, default) if default is not None else None
        except ConfigError:
            log.info("optimized_metric is null and the first method reports no %s: "
                     "nothing to return", default)
            return None
    log.info("optimized_metric %s: %s", name or default, value)
    return value


def closing_lines(result: EvaluationResult) -> str:
    """What the command prints at its end: the report's best-first table and where it lies.

    The table of :func:`~tagtorch.evaluation.report.headline_table` (the whole report when it
    has none, e.g. one method), then the paths of ``report.md`` and of the figure.
    """
    lines = [headline_section(result.report) or result.report.rstrip()]
    if result.folder is not None:
        lines += ["", f"report: {result.folder / 'report.md'}"]
        lines += [f"figure: {figure}" for figure in sorted(result.folder.glob("*@*.png"))]
    return "\n".join(lines)


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    """Hydra entry point; returns ``optimized_metric``'s value (for sweepers).

    The output folder is ``cfg.paths.output_dir``. A job of an Optuna sweep (``cfg.sweep``
    set by the sweeper) runs inside its trial (:func:`tagtorch.sweeps.trial_of`: heartbeat,
    pruning, time limit), and its errors go to the sweeper instead of ending the process.
    """
    log.info("output folder: %s", HydraConfig.get().runtime.output_dir)
    with trial_of(cfg.get("sweep")) as trial:
        try:
            return train(cfg)
        except SIGTERMException:  # Lightning ends a fit on SIGTERM with SystemExit(None): 0
            print("error: stopped by SIGTERM during a fit; no report was written (a seeded "
                  "task continues with task.resume=true)", file=sys.stderr)
            raise SystemExit(128 + signal.SIGTERM) from None
        except Exception as error:
            cause = user_error(error)
            if cause is None or trial is not None:  # a sweep records the trial as failed
                raise
            print(f"error: {cause}", file=sys.stderr)
            raise SystemExit(2) from None


if __name__ == "__main__":
    main()
