"""Evaluation run folders: writing one, and merging several into one report.

A tag-recommendation run writes ``results.csv`` (``method, fold, metric, value``),
``per_object.csv.gz`` (the per-object values behind the paired tests), ``report.md`` and a bar
chart of NDCG@k (:func:`write_run`), plus the TREC files ``qrels.trec`` and
``run.METHOD.trec``. A comparison split over several runs (some folds with
``task.protocol.folds=[3,4]``, some methods with a subset of ``model=[...]``, or an interrupted
run finished by another) is joined by :func:`merge_runs` into one folder with the same files, as
one run over all those folds and methods would have written them::

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
import re
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import yaml

from tagtorch.evaluation.plots import plot_comparison
from tagtorch.evaluation.report import markdown_report
from tagtorch.evaluation.trec import run_file_names

__all__ = ["merge_runs", "write_run"]

#: Settings a merged run's folders must share (dotted paths into their ``config.yaml``).
SHARED_SETTINGS = (
    "data", "text", "features", "task.protocol.n_folds", "task.protocol.input_fraction",
    "task.protocol.min_tags", "task.protocol.sample_size", "task.protocol.seed",
    "task.protocol.ks", "task.protocol.metrics",
)
_RESULT_COLUMNS = ["method", "fold", "metric", "value"]
_OBJECT_COLUMNS = ["method", "fold", "object", "metric", "value"]


def write_run(output_dir: str | Path, results: pd.DataFrame, per_object: pd.DataFrame,
              title: str, plot_metric: str | None = None) -> str:
    """Writes a run's ``results.csv``, ``per_object.csv.gz``, ``report.md`` and NDCG chart.

    Args:
        output_dir: the run folder (created if missing).
        results: columns ``method, fold, metric, value``.
        per_object: columns ``method, fold, object, metric, value``.
        title: the report's title.
        plot_metric: the metric of the bar chart (``METRIC.png``); default: the first
            ``ndcg@K`` of ``results`` (no chart without one).

    Returns:
        The markdown report.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = markdown_report(results, per_object, title=title)
    results.to_csv(out / "results.csv", index=False)
    per_object.to_csv(out / "per_object.csv.gz", index=False)
    (out / "report.md").write_text(report)
    if plot_metric is None:
        plot_metric = next((m for m in dict.fromkeys(results["metric"])
                            if re.fullmatch(r"ndcg@\d+", str(m))), None)
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


def _merge_trec(runs: Sequence[Path], run_methods: Sequence[list[str]], methods: list[str],
                out: Path) -> None:
    """Concatenates the run files of ``methods``; qrels of each query once (its first run).

    ``run_methods`` are each run's own methods, which name its run files.
    """
    merged = run_file_names(methods)
    for name in merged.values():
        (out / name).unlink(missing_ok=True)
    for run, own in zip(runs, run_methods, strict=True):
        for method, name in run_file_names(own).items():
            if method in merged and (run / name).is_file():
                with open(out / merged[method], "a") as run_file:
                    run_file.write((run / name).read_text())
    qrels = [run / "qrels.trec" for run in runs if (run / "qrels.trec").is_file()]
    if not qrels:
        return
    seen: set[str] = set()
    with open(out / "qrels.trec", "w") as qrels_file:
        for path in qrels:
            lines = path.read_text().splitlines(keepends=True)
            queries = {line.split(maxsplit=1)[0] for line in lines if line.strip()}
            qrels_file.writelines(line for line in lines
                                  if line.strip() and line.split(maxsplit=1)[0] not in seen)
            seen |= queries


def merge_runs(runs: Sequence[str | Path], output_dir: str | Path,
               title: str | None = None, methods: Sequence[str] | None = None) -> str:
    """Joins evaluation runs over different folds or methods into one run folder.

    Args:
        runs: the run folders, each with ``results.csv`` and ``per_object.csv.gz``; methods keep
            their first-seen order.
        output_dir: the merged folder: new or empty, outside every run.
        title: the report's title; default: the first run's, with "(merged from N runs)".
        methods: keep only these methods, in this order (the first is the baseline of the
            report); default: all, in first-seen order.

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
    if title is None:
        report = folders[0] / "report.md"
        first = report.read_text().splitlines()[0].lstrip("# ") if report.is_file() else "Results"
        title = f"{first} (merged from {len(folders)} runs)"
    out.mkdir(parents=True, exist_ok=True)
    merged = [pd.concat(frames, ignore_index=True) for frames in (results, per_object)]
    if methods is not None:  # the report lists methods in first-seen order
        order = {method: i for i, method in enumerate(methods)}
        merged = [frame.sort_values("method", key=lambda m: m.map(order), kind="stable")
                  for frame in merged]
    _merge_trec(folders, run_methods, list(dict.fromkeys(merged[0]["method"])), out)
    config = {**configs[folders[0]], "merged_from": [str(run.resolve()) for run in folders]}
    (out / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return write_run(out, merged[0], merged[1], title)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``python -m tagtorch.evaluation.runs OUTPUT RUN [RUN ...]``."""
    parser = argparse.ArgumentParser(description=merge_runs.__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="the merged run folder")
    parser.add_argument("runs", type=Path, nargs="+", help="run folders to merge")
    parser.add_argument("--title", default=None, help="the merged report's title")
    parser.add_argument("--methods", nargs="+", default=None,
                        help="keep only these methods, in this order (the first is the baseline)")
    args = parser.parse_args(argv)
    try:
        report = merge_runs(args.runs, args.output, title=args.title, methods=args.methods)
    except (ValueError, FileNotFoundError, PermissionError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    print(report)


if __name__ == "__main__":
    main()
