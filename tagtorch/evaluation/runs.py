"""Evaluation run folders: writing one, and merging several into one report.

A tag-recommendation run writes ``results.csv`` (``method, fold, metric, value``),
``per_object.csv.gz`` (the per-object values behind the paired tests), ``report.md`` and a bar
chart of NDCG@k (:func:`write_run`), plus the TREC files ``qrels.trec`` and
``run.METHOD.trec``. A comparison split over several runs (some folds with
``task.protocol.folds=[3,4]``, some methods with a subset of ``model=[...]``, or an interrupted
run finished by another) is joined by :func:`merge_runs` into one folder with the same files, as
one run over all those folds and methods would have written them::

    python -m tagtorch.evaluation.runs OUTPUT RUN [RUN ...] [--title TITLE]

The runs must not evaluate the same method on the same fold twice, and, where they hold their
``config.yaml``, must share the data, the candidate features and the protocol's split settings.
Time figures are merged as they are: runs that shared the machine differently are not equally
fast.
"""

from __future__ import annotations

import argparse
import re
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


def _check_settings(runs: Sequence[Path]) -> None:
    configs = {run: yaml.safe_load((run / "config.yaml").read_text())
               for run in runs if (run / "config.yaml").is_file()}
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
    frame = pd.read_csv(path)
    missing = set(columns) - set(frame.columns)
    if missing:
        raise ValueError(f"{path} lacks the columns {sorted(missing)}")
    return frame[columns]


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
        output_dir: the merged folder (may not be one of ``runs``).
        title: the report's title; default: the first run's, with "(merged from N runs)".
        methods: keep only these methods, in this order (the first is the baseline of the
            report); default: all, in first-seen order.

    Returns:
        The merged markdown report (also written to ``output_dir/report.md``).

    Raises:
        ValueError: with fewer than one run, an output folder among the runs, a (method, fold)
            pair in two runs, runs whose shared settings (:data:`SHARED_SETTINGS`) differ, or a
            requested method that no run has.
        FileNotFoundError: if a run lacks its results.
    """
    folders = [Path(run) for run in runs]
    out = Path(output_dir)
    if not folders:
        raise ValueError("no run to merge")
    if out.resolve() in {folder.resolve() for folder in folders}:
        raise ValueError(f"the merged folder {out} is one of the runs: choose a new folder")
    _check_settings(folders)
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
    print(merge_runs(args.runs, args.output, title=args.title, methods=args.methods))


if __name__ == "__main__":
    main()
