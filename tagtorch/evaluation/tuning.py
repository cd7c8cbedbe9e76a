"""Settings chosen on validation data inside each fold or seed: grids, their rows and the note.

A grid is ``{setting: [values]}``, a setting a dotted path into a method's (or a candidate
set's) configuration (``neighbours.k``). Its points are the cartesian product of the values, in
the order written; the first point of the best score is chosen (ties keep the earlier point).
Every task that tunes writes its rows to ``tuning.csv`` (``method, fold or seed, setting``
(JSON), the validation score, ``chosen``) and says in ``report.md`` what each fold chose, so a
report records how its settings were chosen. The runners call these from inside a fold or seed
on that fold's or seed's validation data alone: no reported test object is ever read to choose
a setting (issue 35 of the project: tuning on fold 0's V, then reporting fold 1's T, which is
fold 0's V, counted those objects twice).
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import torch
from omegaconf import DictConfig, OmegaConf

from tagtorch.metrics.functional import parse_key, ranking_metrics
from tagtorch.storage import atomic_write

Grid = Mapping[str, Sequence[Any]]
"""``{dotted setting: values}``."""


def check_grids(grids: Mapping[str, Any] | None, what: str) -> dict[str, dict[str, list[Any]]]:
    """The grids as flat ``{dotted setting: values}`` dicts, each setting with values.

    A grid may nest its settings as the configuration does (``{neighbours: {k: [300, 1000]}}``,
    what a Hydra override writes) or name them dotted (``{"neighbours.k": [300, 1000]}``); a
    list is a setting's values. A name whose grid is None or empty is left out (an experiment
    that drops an inherited grid).

    Args:
        grids: name (method or candidate set) -> grid.
        what: the option's name, for the error.

    Raises:
        ValueError: a grid that is not a mapping, or a setting without values.

    Example:
        >>> check_grids({"rf": {"n_estimators": (100, 300), "tree": {"depth": [4]}}}, "tune")
        {'rf': {'n_estimators': [100, 300], 'tree.depth': [4]}}
    """
    if isinstance(grids, DictConfig):  # a Hydra node: interpolations (``${seed}``) resolved
        grids = cast(dict[str, Any], OmegaConf.to_container(grids, resolve=True))
    checked: dict[str, dict[str, list[Any]]] = {}
    for name, grid in (grids or {}).items():
        if grid is None:
            continue
        if not isinstance(grid, Mapping):
            raise ValueError(f"{what}.{name} must map settings to lists of values, got {grid!r}")
        flat = _flatten(grid, f"{what}.{name}")
        if flat:
            checked[str(name)] = flat
    return checked


def _flatten(grid: Mapping[str, Any], where: str, prefix: str = "") -> dict[str, list[Any]]:
    flat: dict[str, list[Any]] = {}
    for setting, values in grid.items():
        dotted = f"{prefix}{setting}"
        if isinstance(values, Mapping):
            flat.update(_flatten(values, where, f"{dotted}."))
        elif isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"{where}.{dotted} must be a non-empty list of values, "
                             f"got {values!r}")
        else:
            flat[dotted] = list(values)
    return flat


_FAMILIES = {"ndcg": "ndcg", "p": "precision", "r": "recall", "s": "success"}


def metric_cutoff(metric: str) -> tuple[str, int]:
    """A validation metric as ``(ranking_metrics family, cut-off)`` (cut-off 1 when it has none).

    Raises:
        ValueError: a name :func:`~tagtorch.metrics.functional.ranking_metrics` does not return.

    Example:
        >>> metric_cutoff("ndcg@5"), metric_cutoff("p@3"), metric_cutoff("mrr")
        (('ndcg', 5), ('precision', 3), ('mrr', 1))
    """
    try:
        family, k = parse_key(metric)  # the one grammar of metric names
    except ValueError:
        family, k = "", None
    if family in _FAMILIES and k is not None:
        return _FAMILIES[family], k
    if family in ("mrr", "map"):
        return metric, 1
    raise ValueError(f"unknown validation metric {metric!r}: use ndcg@K, p@K, r@K, s@K, mrr, "
                     "map, mrr@K or map@K")


def mean_metric(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor,
                n_relevant: torch.Tensor | None, metric: str) -> float:
    """The mean of one metric over the lists (those without a relevant item left out)."""
    family, k = metric_cutoff(metric)
    values = ranking_metrics(scores, labels, mask, n_relevant=n_relevant, ks=(k,),
                             metrics=(family,))
    return float(torch.nanmean(values[metric]).item())


def grid_points(grid: Grid) -> list[dict[str, Any]]:
    """The grid's points in the order written (an empty grid: one empty point).

    Example:
        >>> grid_points({"k": [1, 2], "power": [3]})
        [{'k': 1, 'power': 3}, {'k': 2, 'power': 3}]
    """
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


def with_settings(config: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``config`` with each dotted setting set (missing nodes are created).

    Example:
        >>> with_settings({"a": {"b": 1}, "c": 2}, {"a.b": 5, "d.e": 6})
        {'a': {'b': 5}, 'c': 2, 'd': {'e': 6}}
    """
    updated = copy.deepcopy(dict(config))
    for dotted, value in settings.items():
        *path, last = dotted.split(".")
        node = updated
        for key in path:
            child = node.get(key)
            if child is None:
                child = node[key] = {}
            elif not isinstance(child, dict):
                raise ValueError(f"setting {dotted!r}: {key!r} is not a node of the config")
            node = child
        node[last] = value
    return updated


def choose(rows: Sequence[Mapping[str, Any]], score: str) -> pd.DataFrame:
    """The tuning rows as a frame with ``chosen``: the first row of the highest ``score``.

    Example:
        >>> frame = choose([{"setting": "a", "v": 0.5}, {"setting": "b", "v": 0.7},
        ...                 {"setting": "c", "v": 0.7}], "v")
        >>> frame["chosen"].tolist()
        [False, True, False]
    """
    frame = pd.DataFrame(list(rows))
    values = frame[score].to_numpy(dtype=float)
    best = int(np.nanargmax(values)) if np.isfinite(values).any() else 0
    return frame.assign(chosen=np.arange(len(frame)) == best)


def setting_text(settings: Mapping[str, Any]) -> str:
    """A point of a grid as the JSON of ``tuning.csv``."""
    return json.dumps(dict(settings), sort_keys=True, default=str)


def split_tuning(curves: Sequence[pd.DataFrame]) -> tuple[list[pd.DataFrame],
                                                          list[pd.DataFrame]]:
    """An outcome's frames as ``(tuning rows, other curves)``: tuning rows have ``chosen``."""
    return ([frame for frame in curves if "chosen" in frame.columns],
            [frame for frame in curves if "chosen" not in frame.columns])


def write_tuning(out: Path | None, tuning: Sequence[pd.DataFrame], unit: str,
                 on: str) -> list[str]:
    """``out/tuning.csv`` (every point of every fold or seed) and the report's note on it.

    Args:
        out: the run folder (None: nothing written).
        tuning: the tuning rows (:func:`choose`) of every fold or seed and method.
        unit: ``"fold"`` or ``"seed"``.
        on: what the settings were chosen on, for the note.

    Returns:
        The report's notes: none without tuning rows, else one.
    """
    if not tuning:
        return []
    frame = pd.concat(tuning, ignore_index=True).drop_duplicates(["method", unit, "setting"])
    if out is not None:
        with atomic_write(out / "tuning.csv") as handle:
            frame.to_csv(handle, index=False)
    return [tuning_note(frame, unit, on)]


def tuning_note(tuning: pd.DataFrame, unit: str, on: str) -> str:
    """The report's paragraph on the settings chosen in each fold or seed.

    Args:
        tuning: rows with ``method``, ``unit``, ``setting`` and ``chosen``.
        unit: the column naming the fold or seed (``"fold"``, ``"seed"``).
        on: what the settings were chosen on, for the sentence.
    """
    chosen = tuning[tuning["chosen"]].drop_duplicates(["method", unit])
    parts = [f"{row['method']} {unit} {row[unit]}: {row['setting']}"
             for _, row in chosen.iterrows()]
    return (f"Settings chosen in each {unit} on {on}, never on a reported test object "
            f"(every point: tuning.csv): " + "; ".join(parts) + ".")
