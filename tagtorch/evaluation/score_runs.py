"""Score any TREC run files with tagtorch's metrics and statistics.

::

    python -m tagtorch.evaluation QRELS RUN [RUN ...] [--metrics ndcg@10 p@10 map] [--test both]

reads a qrels file and run files in the TREC formats (:func:`~tagtorch.evaluation.trec.
read_qrels`, :func:`~tagtorch.evaluation.trec.read_run`; tagtorch's own or any tool's), scores
every run on the queries of the qrels with at least one relevant document, and prints a report
in the form of the tasks' reports: each run's mean with the 95% confidence interval over the
queries, and a paired test of every pair of runs over the queries, Holm-corrected per metric
(the t-test and the randomization test by default; :class:`~tagtorch.evaluation.report.
Significance`). ``--output FILE`` also writes the report and the per-query values
(``FILE`` and ``FILE`` with ``.csv``), atomically and never through a link; a file that exists
is replaced only with ``--overwrite``, and a folder never.

Every option is checked before any file is read, each refusal one line on standard error and
exit status 2: a metric's cut-off ``K`` from 1 to :data:`~tagtorch.metrics.functional.
MAX_CUTOFF` (a ``K`` beyond a query's list costs no more than its list: the metrics' work is
bounded by the lists), ``--resamples`` from 1 to :data:`~tagtorch.evaluation.stats.
MAX_RESAMPLES`, ``--confidence`` in ``(0, 1)``.

How a run is read and scored (trec_eval's and ranx's conventions): a query's documents are
ranked by score, descending, equal scores by document id, descending (trec_eval); the rank
column is not used. A query of the qrels that a run lacks scores 0 on every metric; a run's
queries absent from the qrels are not scored (their number is reported). A document is relevant
when its grade is above 0; negative grades count as 0. NDCG uses the grades as gains (linear,
as trec_eval's ``ndcg_cut`` and ranx's ``ndcg``), with the ideal ranking made of every judged
document of the query, retrieved or not; R@k and AP divide by the query's relevant documents,
retrieved or not. The metric names and definitions are those of
:mod:`tagtorch.metrics.functional`: ``ndcg@K``, ``p@K``, ``r@K``, ``s@K``, ``mrr``, ``map``
(``mrr@K``, ``map@K``). All equal ranx's per query (``tests/test_score_runs.py``) but
``map@K``, which divides by ``min(K, relevant)`` where ranx's ``map@K`` and trec_eval's
``map_cut_K`` divide by all relevant documents — and only for runs without tied scores and
qrels with whole-number grades: ranx orders tied documents its own way (not trec_eval's) and
reads a grade of 0.5 as 0, where tagtorch keeps it as a gain.

Why not ``python -m tagtorch.evaluate``: ``tagtorch.evaluate`` is the Python function
``tt.evaluate``; a module of that name would replace it in every process that imported the
module.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from tagtorch.evaluation.report import (
    Significance,
    paired_test_table,
    summary_table,
    version_line,
)
from tagtorch.evaluation.stats import (
    MAX_RESAMPLES,
    check_confidence,
    check_resamples,
    confidence_interval,
)
from tagtorch.evaluation.trec import read_qrels, read_run
from tagtorch.metrics.functional import dcg_at_k, ideal_dcg, parse_key, ranking_metrics
from tagtorch.storage import atomic_write

__all__ = ["main", "query_values", "runs_report"]

Judgements = Mapping[str, Mapping[str, float]]
"""Query id -> document id -> relevance grade (qrels) or score (run)."""

_FAMILIES = {"p": "precision", "r": "recall", "s": "success"}


def _padded(queries: Sequence[str], qrels: Judgements,
            run: Judgements) -> tuple[torch.Tensor, ...]:
    """``scores, labels, mask, grades, grade_mask`` of the queries, padded.

    ``scores`` are the ranks' reverse (the order read: by score, ties by document id
    descending); ``grades`` are every judged relevant document's grade (the ideal ranking),
    padded to the run's width at least, so that an ideal DCG at any cut-off up to the run's
    lists sums as many places as that cut-off (beyond both widths, the metrics' places stop at
    the lists: :func:`~tagtorch.metrics.functional.ideal_dcg`).
    """
    ranked, judged = [], []
    for query in queries:
        docs = sorted(run.get(query, {}).items(), key=lambda kv: kv[0], reverse=True)
        docs.sort(key=lambda kv: kv[1], reverse=True)  # stable: ties keep id descending
        judgement = qrels[query]
        ranked.append([max(judgement.get(doc, 0.0), 0.0) for doc, _ in docs])
        judged.append([g for g in judgement.values() if g > 0])
    width = max(1, max(len(r) for r in ranked))
    labels = torch.zeros(len(queries), width, dtype=torch.float64)
    mask = torch.zeros(len(queries), width, dtype=torch.bool)
    ideal_width = max(width, max(len(j) for j in judged))
    grades = torch.zeros(len(queries), ideal_width, dtype=torch.float64)
    grade_mask = torch.zeros(len(queries), ideal_width, dtype=torch.bool)
    for b, (row, ideal) in enumerate(zip(ranked, judged, strict=True)):
        labels[b, : len(row)] = torch.tensor(row, dtype=torch.float64)
        mask[b, : len(row)] = True
        grades[b, : len(ideal)] = torch.tensor(ideal, dtype=torch.float64)
        grade_mask[b, : len(ideal)] = True
    scores = torch.arange(width, 0, -1, dtype=torch.float64).expand(len(queries), -1)
    return scores, labels, mask, grades, grade_mask


def _values(metrics: Sequence[str], padded: tuple[torch.Tensor, ...]) -> dict[str, np.ndarray]:
    """Each metric's per-query values (0 where a run retrieved nothing relevant)."""
    scores, labels, mask, grades, grade_mask = padded
    n_relevant = grade_mask.sum(-1)
    out = {}
    for metric in metrics:
        family, cut = parse_key(metric)
        if family == "ndcg":
            assert cut is not None
            value = dcg_at_k(scores, labels, mask, cut) / ideal_dcg(grades, grade_mask, cut)
        elif family in ("mrr", "map"):
            value = ranking_metrics(scores, labels > 0, mask, n_relevant, ks=(),
                                    metrics=(metric,))[metric]
        else:
            assert cut is not None
            value = ranking_metrics(scores, labels > 0, mask, n_relevant, ks=(cut,),
                                    metrics=(_FAMILIES[family],))[metric]
        out[metric] = value.nan_to_num(0.0).numpy()
    return out


def _chunks(queries: Sequence[str], qrels: Judgements,
            run: Judgements, max_cells: int) -> Iterator[list[str]]:
    """``queries`` in chunks of similar width, so padding them costs little.

    A query's width is its run's documents and its relevant ones; the queries go by width, a
    chunk's widest at most twice its narrowest (its padded cells: at most 4 times its
    documents) and its queries times its widest at most ``max_cells`` (or one query alone).
    """
    widths = {query: len(run.get(query, {})) + sum(g > 0 for g in qrels[query].values())
              for query in queries}
    chunk: list[str] = []
    for query in sorted(queries, key=widths.__getitem__):
        width = widths[query]
        if chunk and (width > 2 * widths[chunk[0]] or (len(chunk) + 1) * width > max_cells):
            yield chunk
            chunk = []
        chunk.append(query)
    if chunk:
        yield chunk


def check_metrics(metrics: Sequence[str]) -> None:
    """Refuses a name that is not a metric of run files.

    The names of :func:`~tagtorch.metrics.functional.parse_key`'s grammar, cut-offs up to
    :data:`~tagtorch.metrics.functional.MAX_CUTOFF`, but TagRec's.

    Raises:
        ValueError: naming the metric and what was expected, in one line.
    """
    for metric in metrics:
        family, _ = parse_key(metric)
        if family.startswith("tagrec_"):
            raise ValueError(f"{metric}: TagRec's metrics are scored by task=posts, not from "
                             "run files")


def query_values(qrels: Judgements, run: Judgements, metrics: Sequence[str],
                 max_cells: int = 1 << 22) -> pd.DataFrame:
    """Per-query values of one run: columns ``object, metric, value``.

    The queries of ``qrels`` with at least one relevant document, sorted by id; they are
    scored a chunk of similar widths at a time (memory: one chunk's padded run and ideal
    ranking, at most ``2 * max_cells`` values or one query's; work: at most 4 times the
    documents of the run and the qrels).

    Example:
        >>> qrels = {"q1": {"a": 1, "b": 0}, "q2": {"c": 2}}
        >>> run = {"q1": {"b": 0.9, "a": 0.5}}
        >>> query_values(qrels, run, ["p@1", "mrr"]).value.tolist()
        [0.0, 0.0, 0.5, 0.0]
    """
    check_metrics(metrics)  # an unknown name fails before any work
    queries = sorted(q for q, docs in qrels.items() if any(g > 0 for g in docs.values()))
    frames = []
    for part in _chunks(queries, qrels, run, max_cells):
        values = _values(metrics, _padded(part, qrels, run))
        frames += [pd.DataFrame({"object": part, "metric": metric, "value": values[metric]})
                   for metric in metrics]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["object", "metric", "value"])
    order = {"metric": {m: i for i, m in enumerate(metrics)},
             "object": {q: i for i, q in enumerate(queries)}}
    return frame.sort_values(["metric", "object"], key=lambda c: c.map(order[str(c.name)]),
                             kind="stable", ignore_index=True)


def runs_report(qrels: Judgements, runs: Mapping[str, Judgements], metrics: Sequence[str],
                significance: Significance | None = None,
                confidence: float = 0.95) -> tuple[str, pd.DataFrame]:
    """The markdown report of ``runs`` (name -> run) and their per-query values.

    Returns:
        ``(report, per_query)``, ``per_query`` with columns ``method, fold, object, metric,
        value`` (``fold`` 0), as the tasks' ``per_object.csv.gz``.
    """
    frames = [query_values(qrels, run, metrics).assign(method=name, fold=0)
              for name, run in runs.items()]
    per_query = pd.concat(frames, ignore_index=True)[["method", "fold", "object", "metric",
                                                      "value"]]
    rows = []
    for (method, metric), group in per_query.groupby(["method", "metric"], sort=False):
        mean, half = confidence_interval(group["value"].to_numpy(), confidence)
        rows.append({"method": method, "metric": metric, "mean": mean, "ci": half,
                     "folds": len(group)})
    n_queries = int(per_query["object"].nunique())
    judged = {q for q, docs in qrels.items() if any(g > 0 for g in docs.values())}
    lines = ["# Runs scored by tagtorch", "",
             f"Mean ± half-width of the {confidence:.0%} confidence interval (t distribution) "
             f"over the {n_queries} queries of the qrels with a relevant document; a query a "
             "run lacks scores 0.", ""]
    for name, run in runs.items():
        unjudged = len(set(run) - judged)
        if unjudged:
            lines.append(f"- `{name}`: {unjudged} of its {len(run)} queries are not scored "
                         "(no relevant document in the qrels).")
    lines += ["", summary_table(pd.DataFrame(rows))]
    if len(runs) > 1:
        settings = significance or Significance(test="both")
        for method in settings.methods:
            lines += ["", *paired_test_table(per_query, method, settings, False)]
    return "\n".join([*lines, "", version_line()]) + "\n", per_query


def _parser() -> argparse.ArgumentParser:
    """The command line (a bad value is an ``ArgumentError``, shown by :func:`main` in one line)."""
    parser = argparse.ArgumentParser(prog="python -m tagtorch.evaluation",
                                     description=__doc__.split("\n")[0], exit_on_error=False)
    parser.add_argument("qrels", type=Path)
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--metrics", nargs="+",
                        default=["ndcg@5", "ndcg@10", "p@5", "p@10", "r@10", "map", "mrr"])
    parser.add_argument("--test", choices=["ttest", "wilcoxon", "randomization", "both"],
                        default="both")
    parser.add_argument("--resamples", type=int, default=10_000,
                        help=f"sign flips drawn by the randomization test (1 to "
                             f"{MAX_RESAMPLES:,})")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--output", type=Path, help="also write the report here (and .csv)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the --output files if they exist")
    return parser


def _check_output(output: Path, overwrite: bool) -> None:
    """Refuses an ``--output`` that is a folder, or under a file, or whose files exist.

    Existing files are taken only with ``overwrite`` (a folder never).

    Raises:
        ValueError: naming the option, the path and what was expected, in one line.
    """
    if output.is_dir():
        raise ValueError(f"--output {output}: a folder; expected a file name for the report "
                         "(its per-query values go to FILE with .csv)")
    if output.suffix == ".csv":
        raise ValueError(f"--output {output}: expected a report file not named .csv (its "
                         "per-query values go to FILE with .csv)")
    above = next((folder for folder in output.parents if folder.exists()), None)
    if above is not None and not above.is_dir():
        raise ValueError(f"--output {output}: {above} is not a folder; expected a file name "
                         "in a folder")
    for path in (output, output.with_suffix(".csv")):
        if path.is_dir():
            raise ValueError(f"--output {output}: {path} is a folder; expected a file there "
                             "or none")
        if not overwrite and (path.exists() or path.is_symlink()):
            raise ValueError(f"--output {output}: {path} exists; expected a new file name, or "
                             "--overwrite to replace it")


def _check_options(args: argparse.Namespace) -> None:
    """Refuses the options' values before any file is read (one line each)."""
    try:
        check_metrics(args.metrics)
    except ValueError as error:
        raise ValueError(f"--metrics: {error}") from None
    check_resamples(args.resamples, "--resamples")
    check_confidence(args.confidence, "--confidence")
    if args.output is not None:
        _check_output(args.output, args.overwrite)


def _write_output(output: Path, report: str, per_query: pd.DataFrame) -> None:
    """Writes the report and the per-query values (:func:`~tagtorch.storage.atomic_write`).

    Atomically: never through a link, never half-written.
    """
    with atomic_write(output) as partial:
        partial.write_text(report, encoding="utf-8")
    with atomic_write(output.with_suffix(".csv")) as partial:
        per_query.to_csv(partial, index=False)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m tagtorch.evaluation QRELS RUN [RUN ...]`` (module docstring).

    Bad input (options, files) ends with one line on standard error and exit status 2.
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        _check_options(args)
        qrels = read_qrels(args.qrels)
        names = [path.name for path in args.runs]
        if len(set(names)) < len(names):
            names = [str(path) for path in args.runs]
        runs = {name: read_run(path) for name, path in zip(names, args.runs, strict=True)}
        report, per_query = runs_report(qrels, runs, args.metrics,
                                        Significance(args.test, args.resamples),
                                        args.confidence)
    except (argparse.ArgumentError, OSError, ValueError) as error:
        parser.exit(2, f"error: {error!s:.500}\n")  # a value echoed back, cut
    print(report, end="")
    if args.output is not None:
        try:
            _write_output(args.output, report, per_query)
        except OSError as error:
            parser.exit(2, f"error: --output {args.output}: cannot be written ({error})\n")
