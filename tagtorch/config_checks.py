"""Checks of a composed configuration, run before any work (``python -m tagtorch.train``).

A bad setting used to fail late (after candidate generation or a model fit) or with a raw
``AttributeError``. :func:`check_config` reads the resolved configuration once and raises a
:class:`ConfigError` whose one-line message names the key, the value and what is allowed.

Settings are checked by their key name wherever they occur in the task, the models, the
candidate features and the data (the ``trainer``, ``optimizer``, ``scheduler`` and ``scorer``
groups are checked where a model uses them, as their copies inside ``model``; unused, they are
not checked):

========================  =====================================================================
key                       allowed
========================  =====================================================================
``ks``                    a non-empty list of integers from 1 to
                          :data:`~tagtorch.metrics.functional.MAX_CUTOFF` (10**9)
``k``                     an integer >= 1, or null where a component allows "the whole list"
``metrics``               a non-empty list of :data:`tagtorch.metrics.METRIC_NAMES`
``batch_size``            an integer >= 1
``lr``                    a finite number > 0
``n_jobs``                a non-zero integer (joblib's convention: -1 is every core)
``device``                ``auto``, ``cpu``, ``cuda`` or ``cuda:N`` (CUDA only with a GPU)
``accelerator``           Lightning's ``auto``, ``cpu``, ``gpu`` or ``cuda`` (GPU only with one)
``seed``                  an integer
``significance``          ``{test: ttest|wilcoxon|randomization|both, n_resamples: int from 1
                          to 10**6, seed: int}`` (a report's paired tests; keys may be left
                          out; :data:`~tagtorch.evaluation.stats.MAX_RESAMPLES`)
``trec``                  true or false
``chunk_bytes``           an integer from 1 to 1 GiB, or null (a data file read whole)
========================  =====================================================================

A node with a ``_target_`` (the task, the data, each method) may hold only settings its class or
function takes (unless it takes ``**kwargs``): another key is an error naming it and the
settings taken, before anything is built.

``task.backend`` (where the protocol's parallel jobs run) must be one of
:data:`tagtorch.engines.BACKENDS`: ``processes``, ``dask`` or ``ray`` (a tree model's
``backend``, its library, is the model's own setting).

Each method's name (a key of ``model``, or of the Python API's ``models``) and a set
``data.name`` are parts of the run's file names: they must follow
:data:`tagtorch.evaluation.trec.NAME_RULE` (no path separator, ``..`` or leading dot).

Each method under ``model`` must suit the task: tag recommendation (``task=tagrec``) takes
rankers of candidate lists (``score(batch)``), item recommendation (``task=itemrec``) takes item
models (``score(users, tags)``); the kind is read from the signature of the class's ``score``.
An xTReD method needs candidates with topics (``candidates.diversity``, e.g.
``candidates=latre_diverse``).
"""

from __future__ import annotations

import inspect
import logging
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import torch
from hydra.utils import get_class, get_object
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import InterpolationResolutionError, MissingMandatoryValue

from tagtorch.data.loaders.reading import CHUNK_BYTES_EXPECTED, check_chunk_bytes
from tagtorch.engines import BACKENDS
from tagtorch.errors import ConfigError
from tagtorch.evaluation.report import SIGNIFICANCE_TESTS, Significance
from tagtorch.evaluation.stats import MAX_RESAMPLES
from tagtorch.evaluation.trec import NAME_RULE, check_name
from tagtorch.metrics.functional import MAX_CUTOFF, METRIC_NAMES, check_k, parse_metric
from tagtorch.settings import MODEL_TASKS, ModelTask

__all__ = ["check_config", "drop_unselected_settings", "model_kind"]

log = logging.getLogger(__name__)

KIND_NAMES = {"tagrec": "a tag ranker", "itemrec": "an item model",
              "resources": "a resource ranker", "posts": "a post ranker"}
"""What a model of each task is called in messages."""

MODEL_CONF = Path(__file__).resolve().parent / "conf" / "model"
"""The shipped model configs, one ``NAME.yaml`` a method."""

#: The config groups whose settings are checked (the others are checked inside ``model``).
CHECKED_GROUPS = ("task", "model", "candidates", "data")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_ks(key: str, value: Any) -> None:
    try:
        if not isinstance(value, list) or not value:
            raise ValueError(value)
        for k in value:
            check_k(k, at_most=MAX_CUTOFF)
    except ValueError:
        raise ConfigError(key, value, f"a non-empty list of integers from 1 to {MAX_CUTOFF} "
                          "(cut-offs), e.g. [5] or [1,5,10]") from None


def _check_k(key: str, value: Any) -> None:
    if value is not None and not (_is_int(value) and value >= 1):
        raise ConfigError(key, value, "an integer >= 1 (or null where the whole list is meant)")


def _check_metrics(key: str, value: Any) -> None:
    try:
        if not isinstance(value, list) or not value:
            raise ValueError(value)
        for name in value:
            parse_metric(name)
    except ValueError:
        raise ConfigError(key, value, f"a non-empty list of metric names from "
                          f"{list(METRIC_NAMES)} (or mrr@K, map@K with K from 1 to "
                          f"{MAX_CUTOFF})") from None


def _check_batch_size(key: str, value: Any) -> None:
    if not (_is_int(value) and value >= 1):
        raise ConfigError(key, value, "an integer >= 1")


def _check_flag(key: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(key, value, "true or false")


def _check_lr(key: str, value: Any) -> None:
    if (not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value)
            or value <= 0):
        raise ConfigError(key, value, "a finite learning rate > 0, e.g. 0.001")


def _check_n_jobs(key: str, value: Any) -> None:
    if not (_is_int(value) and value != 0):
        raise ConfigError(key, value, "a non-zero integer (1: no parallelism, -1: every core)")


def _check_device(key: str, value: Any) -> None:
    if not isinstance(value, str) or not re.fullmatch(r"auto|cpu|cuda(:\d+)?", value):
        raise ConfigError(key, value, "'auto', 'cpu', 'cuda' or 'cuda:N'")
    if value.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(key, value, "'auto' or 'cpu': this machine has no CUDA device")
        index = int(value.split(":")[1]) if ":" in value else 0
        if index >= torch.cuda.device_count():
            raise ConfigError(key, value, f"a CUDA device below {torch.cuda.device_count()}")


def _check_accelerator(key: str, value: Any) -> None:
    if value not in ("auto", "cpu", "gpu", "cuda"):
        raise ConfigError(key, value, "'auto', 'cpu', 'gpu' or 'cuda'")
    if value in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(key, value, "'auto' or 'cpu' (trainer=cpu): this machine has no GPU")


def _check_seed(key: str, value: Any) -> None:
    if not _is_int(value):
        raise ConfigError(key, value, "an integer")


def _check_backend(key: str, value: Any) -> None:
    if value not in BACKENDS:
        raise ConfigError(key, value, f"one of {list(BACKENDS)} (where the parallel jobs run)")


def _check_significance(key: str, value: Any) -> None:
    try:
        if not isinstance(value, dict):
            raise TypeError(f"a mapping, not {type(value).__name__}")
        Significance.of(value)
    except (TypeError, ValueError) as error:
        raise ConfigError(key, value, f"{{test: one of {list(SIGNIFICANCE_TESTS)}, n_resamples: "
                          f"an integer from 1 to {MAX_RESAMPLES}, seed: an integer}} ({error})"
                          ) from None


def _check_name(key: str, name: Any, what: str) -> None:
    """Refuses a name that becomes part of the run's file names (:func:`check_name`)."""
    try:
        check_name(name, what)
    except ValueError:
        raise ConfigError(key, name, f"a {what} name of {NAME_RULE}") from None


def _check_chunk_bytes(key: str, value: Any) -> None:
    try:
        check_chunk_bytes(value, key)
    except ValueError:
        raise ConfigError(key, value, CHUNK_BYTES_EXPECTED) from None


_CHECKS: dict[str, Callable[[str, Any], None]] = {
    "ks": _check_ks,
    "k": _check_k,
    "metrics": _check_metrics,
    "batch_size": _check_batch_size,
    "lr": _check_lr,
    "n_jobs": _check_n_jobs,
    "device": _check_device,
    "accelerator": _check_accelerator,
    "seed": _check_seed,
    "significance": _check_significance,
    "trec": _check_flag,
    "chunk_bytes": _check_chunk_bytes,
}


GRID_KEYS = ("tune", "tune_candidates")
"""Nodes holding grids (``{setting: [values]}``): each value is checked as the setting."""


def _walk(node: Any, prefix: str, grid: bool = False) -> Iterator[tuple[str, str, Any]]:
    """``(dotted key, last key name, value)`` of every setting under ``node``.

    Under a grid node (:data:`GRID_KEYS`), a list is a setting's values: each is yielded as
    the setting itself (``...neighbours.k[1]``, ``k``, 1000).
    """
    if isinstance(node, dict):
        for name, value in node.items():
            key = f"{prefix}.{name}" if prefix else str(name)
            if grid and isinstance(value, list):
                for i, item in enumerate(value):
                    yield f"{key}[{i}]", str(name), item
                continue
            yield key, str(name), value
            yield from _walk(value, key, grid or name in GRID_KEYS)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{prefix}[{i}]", grid)


def _check_keys(key: str, node: Any) -> None:
    """Refuses a setting the ``_target_`` of ``node`` does not take, naming it.

    Hydra would report it only while building the object, in several lines; a callable that
    takes ``**kwargs`` takes every key.
    """
    if not isinstance(node, dict) or not isinstance(node.get("_target_"), str):
        return
    try:
        parameters = inspect.signature(get_object(node["_target_"])).parameters
    except (ImportError, ValueError, TypeError, AttributeError):
        return  # not importable: reported where the object is built (or as a model's class)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    takes = sorted(name for name in parameters if name != "self")
    for name, value in node.items():
        if not str(name).startswith("_") and name not in parameters:
            raise ConfigError(f"{key}.{name}", value, f"a setting {node['_target_']} takes: "
                              f"{', '.join(takes)}")


def _resolved(cfg: DictConfig) -> dict[str, Any]:
    try:
        container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except MissingMandatoryValue as error:
        key = error.full_key or "?"
        raise ConfigError(key, "???", f"a value: set it on the command line ({key}=...)"
                          ) from None
    except InterpolationResolutionError as error:
        raise ConfigError(error.full_key or "?", "${...}",
                          f"an interpolation that resolves ({error.msg})") from None
    assert isinstance(container, dict)
    return {str(key): value for key, value in container.items()}


def _model_kind(key: str, target: Any) -> ModelTask:
    """The task the model class of ``target`` states (:func:`model_kind`)."""
    try:
        cls = get_class(str(target))
    except Exception as error:  # hydra raises ImportError or ValueError, with varying texts
        raise ConfigError(key, target, f"an importable class ({error})") from None
    if getattr(cls, "score", None) is None:
        raise ConfigError(key, target, "a model class with a score method")
    try:
        return model_kind(cls)
    except ValueError:
        raise ConfigError(key, target, "a model class that states its task (task: "
                          f"ClassVar[ModelTask], one of {MODEL_TASKS})") from None


def shipped_models(kinds: Sequence[ModelTask]) -> list[str]:
    """The shipped model configs (``conf/model/NAME.yaml``) whose class serves one of ``kinds``.

    Example:
        >>> "bll_c" in shipped_models(["posts"]), "bll_c" in shipped_models(["tagrec"])
        (True, False)
    """
    names = []
    for path in sorted(MODEL_CONF.glob("*.yaml")):
        loaded = OmegaConf.load(path)
        node = loaded.get(path.stem) if isinstance(loaded, DictConfig) else None
        target = node.get("_target_") if isinstance(node, DictConfig) else None
        try:
            if target is not None and model_kind(get_class(str(target))) in kinds:
                names.append(path.stem)
        except (ImportError, ValueError):
            continue  # a config of an optional extra's class, or of no stated task
    return names


def model_kind(cls: type) -> ModelTask:
    """The task a model class serves, as the class states it (``task: ClassVar[ModelTask]``).

    Raises:
        ValueError: the class states no task of :data:`~tagtorch.settings.MODEL_TASKS`.

    Example:
        >>> from tagtorch.rankers.single_feature import FeatureRanker
        >>> model_kind(FeatureRanker)
        'tagrec'
    """
    declared = getattr(cls, "task", None)
    if declared not in MODEL_TASKS:
        raise ValueError(f"{cls.__qualname__} states no task (task: ClassVar[ModelTask], one "
                         f"of {MODEL_TASKS}); got {declared!r}")
    return cast(ModelTask, declared)


def task_kinds(cfg: Any) -> tuple[ModelTask, ...]:
    """The kinds of model the configured task runs, as its class states them (``model_tasks``).

    Example:
        >>> task_kinds({"task": {"_target_": "tagtorch.serving.fit.FitTask"}})
        ('tagrec', 'itemrec', 'posts', 'resources')
        >>> task_kinds({"task": {"_target_": "tagtorch.evaluation.describe.DescribeTask"}})
        ()
    """
    target = (cfg.get("task") or {}).get("_target_")
    if not target:
        return ()
    try:
        cls = get_class(str(target))
    except Exception as error:  # hydra raises ImportError or ValueError, with varying texts
        raise ConfigError("task._target_", target, f"an importable class ({error})") from None
    return tuple(getattr(cls, "model_tasks", ()))


def drop_unselected_settings(cfg: DictConfig) -> list[str]:
    """Removes ``model`` entries that hold settings but no ``_target_``, and names them.

    A selected method always has its ``_target_`` (from ``conf/model/NAME.yaml``); an entry
    without one comes from an experiment that sets a method's settings (``model.dorank.rank``)
    while the command line selects other methods (``model=[global_popularity]``). Such settings
    concern no method of the run: they are dropped with a warning, so that one method of an
    experiment can be run (or swept) alone. An entry that is not a mapping is left for
    :func:`check_config` to refuse.

    Example:
        >>> cfg = OmegaConf.create({"model": {"a": {"_target_": "x.A"}, "b": {"rank": 3}}})
        >>> drop_unselected_settings(cfg), list(cfg.model)
        (['b'], ['a'])
    """
    models = cfg.get("model")
    if not isinstance(models, DictConfig):
        return []
    dropped = [str(name) for name, node in models.items()
               if isinstance(node, DictConfig) and "_target_" not in node]
    if dropped and len(dropped) < len(models):
        with open_dict(cfg):
            for name in dropped:
                log.warning("model.%s: settings of a method this run does not select (no "
                            "_target_); ignored", name)
                del cfg.model[name]
        return dropped
    return []


def keep_search_method(cfg: DictConfig) -> None:
    """Leaves only ``search_method`` (an hparams_search's method) in ``model`` and ``task.tune``.

    A search tunes one method; with an experiment of many (``+experiment=compare_lastfm
    hparams_search=lambdamart``) the others would be fitted in every trial for nothing.

    Raises:
        ConfigError: ``search_method`` names no method of ``model``.

    Example:
        >>> cfg = OmegaConf.create({"search_method": "b", "model": {"a": {}, "b": {}}})
        >>> keep_search_method(cfg); list(cfg.model)
        ['b']
        >>> cfg = OmegaConf.create({"search_method": "b", "model": {"a": {}, "b": {}},
        ...                         "task": {"tune": {"a": {"k": [1, 2]}, "b": {"k": [3]}}}})
        >>> keep_search_method(cfg); OmegaConf.to_container(cfg.task.tune)
        {'b': {'k': [3]}}
        >>> cfg = OmegaConf.create({"search_method": "c", "seed": 1,
        ...                         "model": {"a": {"seed": "${seed}"}, "c": "${model.a}"}})
        >>> keep_search_method(cfg); OmegaConf.to_container(cfg.model, resolve=True)
        {'c': {'seed': 1}}
    """
    method = cfg.get("search_method")
    if method is None:
        return
    models = cfg.get("model") or {}
    if method not in models:
        raise ConfigError("search_method", method, f"one of the methods of this run, "
                          f"{[str(m) for m in models]}")
    with open_dict(cfg):
        if OmegaConf.is_interpolation(cfg.model, method):  # a copy (rf_extended: ${model.rf})
            cfg.model[method] = OmegaConf.to_container(cfg.model[method], resolve=False)
        tune = (cfg.get("task") or {}).get("tune") or {}
        for name in [str(m) for m in models if m != method]:
            del cfg.model[name]
            if name in tune:  # a grid of a method left out (deep_vs_trees' tune.rf)
                del tune[name]


def _check_model(name: str, node: Any, kinds: Sequence[ModelTask],
                 container: Mapping[str, Any]) -> None:
    """One chosen method: a config node whose class is a model of the task, its candidates."""
    target = node.get("_target_") if isinstance(node, dict) else None
    if target is None:
        raise ConfigError(f"model.{name}", node, "a config node with a _target_ class")
    if _model_kind(f"model.{name}._target_", target) not in kinds:
        task = "fit" if len(kinds) > 1 else kinds[0]
        raise ConfigError(f"model.{name}._target_", target,
                          f"{' or '.join(KIND_NAMES[kind] for kind in kinds)} for "
                          f"task={task}, one of {', '.join(shipped_models(kinds))}")
    candidates = container.get("candidates") or {}
    chosen = (container.get("method_candidates") or {}).get(name)
    if chosen is not None:
        candidates = (container.get("candidate_sets") or {}).get(chosen)
        if candidates is None:
            raise ConfigError(f"method_candidates.{name}", chosen, "a name of candidate_sets "
                              f"{sorted(container.get('candidate_sets') or {})}")
    if target == "tagtorch.rankers.xtred.XTReD" and not candidates.get("diversity"):
        raise ConfigError("candidates.diversity", candidates.get("diversity"),
                          f"the topics that model.{name} (xTReD) re-ranks by: "
                          "candidates=latre_diverse")


def _check_targets(targets: Any, models: Mapping[str, Any]) -> None:
    """The targets' method and at least one baseline are among the chosen methods.

    Checked before any fit: a run whose targets name a method it does not fit would otherwise
    fit everything and fail when it writes its report.
    """
    if not targets:
        return
    chosen = sorted(models)
    if targets.get("method") not in models:
        raise ConfigError("task.targets.method", targets.get("method"),
                          f"one of the chosen methods {chosen} (or drop task.targets)")
    baselines = list(targets.get("baselines") or [])
    if not any(baseline in models for baseline in baselines):
        raise ConfigError("task.targets.baselines", baselines,
                          f"at least one of the chosen methods {chosen}")


def check_config(cfg: DictConfig) -> None:
    """Checks a composed configuration before any work.

    Args:
        cfg: the composed configuration of ``python -m tagtorch.train``.

    Raises:
        ConfigError: the first setting that is not allowed (see the module docstring).

    Example:
        >>> check_config(OmegaConf.create({"seed": 0, "task": {"ks": [5, 10]}}))
        >>> check_config(OmegaConf.create({"seed": 0, "task": {"ks": [0]}}))
        Traceback (most recent call last):
        ...
        tagtorch.errors.ConfigError: config key task.ks=[0]: expected a non-empty list \
of integers from 1 to 1000000000 (cut-offs), e.g. [5] or [1,5,10]
    """
    container = _resolved(cfg)
    _check_seed("seed", container.get("seed", 0))
    task = container.get("task") or {}
    if "backend" in task:  # where the protocol's jobs run (not a tree model's library)
        _check_backend("task.backend", task["backend"])
    data_name = (container.get("data") or {}).get("name")
    if data_name is not None:  # the checkpoint and recommender folders' names
        _check_name("data.name", data_name, "dataset")
    for group in CHECKED_GROUPS:
        _check_keys(group, container.get(group))
        for key, name, value in _walk(container.get(group), group):
            _check_keys(key, value)
            check = _CHECKS.get(name)
            if check is not None:
                check(key, value)
    kinds = task_kinds(container)
    if not kinds:
        return
    models = container.get("model") or {}
    if not models:
        raise ConfigError("model", models, "at least one method (model=NAME or model=[A,B])")
    for name in models:  # every name (shown as its repr), before a model's other checks
        _check_name("model", name, "method")
    for name, node in models.items():
        _check_model(name, node, kinds, container)
    _check_targets(task.get("targets"), models)
