"""Writes tagtorch/evaluation/reference_timings.json from finished run folders.

For each method of each run folder given (any evaluation task: seeds, folds or a LETOR
dataset): its task class and model class (``config.yaml``), the mean over the seeds or folds of
its fit seconds plus its scoring time (``results.csv``: ``fit_seconds``, ``ms_model`` times the
test queries of ``per_object.csv.gz``), the seconds of one fit (an estimate multiplies them by
the points of its own run's tuning grid), at the size of the run's data
(``tagtorch.evaluation.timings.data_size`` of the data loaded again from ``config.yaml``'s
``data`` and ``text``: tag assignments, or a LETOR set's training documents). A later folder's
entry replaces an earlier one's, and the file's own entries are kept unless ``--fresh`` is
given. The estimate every run prints before its first fit
(``tagtorch.evaluation.timings.announce``) reads it for the fits this machine has never timed.
A tag recommendation folder's candidate sets (``candidates`` and each of ``candidate_sets``) are
timed here, not read: each generator fitted on fold 0's D and its V and T candidates made, with
no cache (what a set costs its first run; a grid of ``tune_candidates`` multiplies it), keyed by
its class and sources (``tagtorch.evaluation.tag_recommendation.SET_SOURCES``); ``--sets-only``
records only those. Run it on the reference machine, each run alone. Not counted: the online
timing of the report.

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/reference_timings.py RUN_FOLDER...
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from hydra.utils import instantiate

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.evaluation.tag_recommendation import SET_SOURCES
from tagtorch.evaluation.timings import REFERENCE_FILE, data_size, reference_key
from tagtorch.storage import atomic_write


def set_timings(config: dict[str, Any], data: Folksonomy) -> dict[str, list[float]]:
    """``{"TASK|GENERATOR_CLASS+SOURCES": [data size, seconds of one set]}`` of a tag
    recommendation run's candidate sets, each timed on fold 0 without a cache."""
    task = instantiate(config["task"], cache=False, n_jobs=1)
    name = type(task).__name__
    out = {}
    for node in [config["candidates"], *(config.get("candidate_sets") or {}).values()]:
        generator = instantiate(node)
        began = time.perf_counter()
        task.fold_candidates(data, generator, 0)
        out[reference_key(name, generator.config(), SET_SOURCES)] = [
            data_size(data)[0], round(time.perf_counter() - began, 3)]
    return out


def folder_timings(folder: Path, sets_only: bool = False) -> dict[str, list[float]]:
    """``{"TASK|MODEL_CLASS": [data size, seconds of one fit]}`` of one run folder (and of its
    candidate sets: :func:`set_timings`; only those with ``sets_only``)."""
    config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    data = instantiate(config["data"])
    if config.get("text") and isinstance(data, Folksonomy):
        data = instantiate(config["text"]).apply(data)
    size = data_size(data)[0]
    task = config["task"]["_target_"].rsplit(".", 1)[-1]
    sets = set_timings(config, data) if task == "TagRecommendationTask" else {}
    if sets_only:
        return sets
    results = pd.read_csv(folder / "results.csv")
    per_object = pd.read_csv(folder / "per_object.csv.gz", usecols=["method", "fold", "metric"])
    first = per_object["metric"].iloc[0]
    queries = per_object[per_object["metric"] == first].groupby(["method", "fold"]).size()
    out = {}
    for name, node in config["model"].items():
        rows = results[results["method"] == name].pivot(index="fold", columns="metric",
                                                        values="value")
        if rows.empty or "fit_seconds" not in rows:
            continue
        scoring = rows.get("ms_model", 0.0) * queries[name].reindex(rows.index).fillna(0) / 1000
        seconds = float((rows["fit_seconds"] + scoring).mean())
        out[reference_key(task, node)] = [size, round(seconds, 3)]
    return {**out, **sets}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--fresh", action="store_true", help="drop the file's entries first")
    parser.add_argument("--sets-only", action="store_true",
                        help="record only the tag recommendation folders' candidate sets")
    args = parser.parse_args()
    table: dict[str, list[float]] = {} if args.fresh or not REFERENCE_FILE.is_file() else \
        json.loads(REFERENCE_FILE.read_text(encoding="utf-8"))["timings"]
    for folder in args.folders:
        table.update(folder_timings(folder, args.sets_only))
        print(f"{folder}: {len(table)} model classes so far")
    with atomic_write(REFERENCE_FILE) as partial:
        partial.write_text(json.dumps({
            "machine": f"{platform.machine()}, the 2-core build machine the tables were "
                       "measured on",
            "timings": dict(sorted(table.items()))}, indent=1) + "\n", encoding="utf-8")
    print(f"{REFERENCE_FILE}: {len(table)} model classes")


if __name__ == "__main__":
    main()
