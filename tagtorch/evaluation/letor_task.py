"""``task=letor``: tag rankers trained and compared on a LETOR dataset (ours).

``python -m tagtorch.train task=letor data=letor data.path=FOLDER "model=[lambdamart,rf,ranknet]"``
reads the dataset's lists (:func:`tagtorch.candidates.letor.load_letor`: MSLR-WEB10K/30K,
Yahoo! LTR, Istella, or tagtorch's own ``python -m tagtorch.export letor``), fits each ranker on
``train`` (``vali`` given to its ``fit`` for early stopping where it has one), scores ``test``
and writes the run folder of the other tasks (:func:`~tagtorch.evaluation.runs.write_run`):
``results.csv``, per-query values, the report with the paired tests of every pair of methods
over the test queries, and TREC files whose qrels keep the graded labels (document ids: the
candidates' positions in their list), so that ranx or trec_eval re-score them.

Metrics: those of :func:`~tagtorch.metrics.functional.ranking_metrics` at ``ks``; NDCG takes the
grade as gain (linear, tagtorch's convention; LightGBM's and RankLib's NDCG use ``2^grade -
1``). A query without a relevant document counts as NaN (left out of the means, as in tag
recommendation). One "fold" (0): a LETOR dataset's folds are its folders (``data.path``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import torch
from omegaconf import DictConfig

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.candidates.letor import LetorData
from tagtorch.evaluation.report import Significance, markdown_report
from tagtorch.evaluation.runs import (
    EvaluationResult,
    GivenObjects,
    MethodOutcome,
    MetricLogger,
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
from tagtorch.evaluation.trec import run_file_names, scored_lines
from tagtorch.metrics.functional import ranking_metrics
from tagtorch.rankers.base import Ranker
from tagtorch.settings import ModelTask

log = logging.getLogger(__name__)

__all__ = ["LetorTask"]


class LetorTask(Task):
    """Fits every configured tag ranker on a LETOR dataset's lists and compares them.

    Args:
        ks: the metrics' cut-offs.
        metrics: names of :func:`~tagtorch.metrics.functional.ranking_metrics`.
        batch_size: test lists scored at once.
        trec: write ``qrels.trec`` and one run file per method.
        significance: the report's paired tests (:class:`~tagtorch.evaluation.report.
            Significance`).

    Raises:
        ValueError: ``batch_size`` is not an integer >= 1, or ``trec`` not a boolean
            (``yes``, ``2`` or ``null`` read as true or false before), naming the key.
    """

    model_tasks: ClassVar[tuple[ModelTask, ...]] = ("tagrec",)

    def __init__(self, ks: Sequence[int] = (5, 10), metrics: Sequence[str] = ("ndcg",),
                 batch_size: int = 4096, trec: bool = True,
                 significance: Mapping[str, Any] | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"task.batch_size must be an integer >= 1, got {batch_size!r}")
        if not isinstance(trec, bool):
            raise ValueError(f"task.trec must be true or false, got {trec!r}")
        self.ks, self.metrics = tuple(ks), tuple(metrics)
        self.batch_size, self.trec = batch_size, trec
        self.significance = Significance.of(significance)

    def run(self, data: LetorData, cfg: DictConfig, output_dir: Path | None,
            loggers: Sequence[MetricLogger] = (), *, raw: Any = None,
            given: GivenObjects | None = None) -> EvaluationResult:
        """Runs every method of ``cfg.model`` on ``data``; returns (and writes) the result.

        The arguments are every task's (:meth:`Task.run <tagtorch.evaluation.runs.Task.run>`);
        without ``output_dir`` nothing is written.
        """
        if not isinstance(data, LetorData):
            raise TypeError("task=letor reads a LETOR dataset: data=letor data.path=FOLDER")
        configs = methods_of(cfg)
        given = given or GivenObjects()
        timings, size = TimingLog.default(), data_size(data)[0]
        keys = {name: timing_key(type(self).__name__, config, None,
                                 [self.ks, self.metrics, self.batch_size, self.trec])
                for name, config in configs.items()}
        announce(timings, [(keys[name], reference_key(type(self).__name__, config), 1)
                           for name, config in configs.items()], data)
        outcomes = []
        for name, config in configs.items():
            start = time.perf_counter()
            outcomes.append(self.evaluate(name, partial(given.build, name, config), data))
            timings.record(keys[name], size, time.perf_counter() - start)
        whole = MethodOutcome.merge(outcomes)
        whole.log(loggers, step=0)
        results, per_query = whole.frames()
        title = f"Learning to rank on {data.name} (LETOR)"
        if output_dir is None:
            report = markdown_report(results, per_query, title=title,
                                     significance=self.significance)
            return EvaluationResult(results, per_query, report, None)
        qrels = runs = None
        if self.trec:
            qrels = _graded_qrels(data.test)
            runs = {file: list(whole.run_lines[name])
                    for name, file in run_file_names(list(configs)).items()}
        # ranked by the metric a run optimizes by default (tagtorch.train.default_metric)
        headline = f"ndcg@{self.ks[0]}" if "ndcg" in self.metrics else None
        report = write_run(output_dir, results, per_query, title, qrels=qrels, runs=runs,
                           significance=self.significance, plot_metric=headline)
        return EvaluationResult(results, per_query, report, output_dir)

    def evaluate(self, name: str, make: Callable[[], Ranker], data: LetorData) -> MethodOutcome:
        """One method: fit on ``train`` (``vali`` for early stopping), scored on ``test``."""
        ranker: Ranker = make()
        start = time.perf_counter()
        ranker.fit(data.train, data.vali)
        fit_seconds = time.perf_counter() - start
        test = data.test
        start = time.perf_counter()
        with torch.no_grad():
            scores = torch.cat([ranker.score(batch).float().cpu()
                                for batch in test.batches(self.batch_size)]) \
                if len(test) else torch.zeros(test.mask.shape)
        score_ms = 1000 * (time.perf_counter() - start) / max(len(test), 1)
        values = ranking_metrics(scores, test.labels, test.mask, n_relevant=test.n_relevant,
                                 ks=self.ks, metrics=self.metrics)
        lines = scored_lines(test.objects.numpy(), scores, test.mask, name.replace(" ", "_"),
                             test.tags.shape[1], documents=test.tags) if self.trec else None
        outcome = MethodOutcome.from_values(name, 0, test.objects.numpy(), values,
                                            extra={"fit_seconds": fit_seconds,
                                                   "ms_model": score_ms},
                                            run_lines=lines)
        log.info("%s: %s (fit %.1f s)", name, ", ".join(
            f"{k} {v:.4f}" for k, v in outcome.means[name].items()), fit_seconds)
        return outcome


def _graded_qrels(test: CandidateSet) -> list[str]:
    """``qid 0 doc grade`` of every relevant candidate (doc: its position in the list)."""
    rows, slots = (test.mask & (test.labels > 0)).nonzero(as_tuple=True)
    return [f"{int(test.objects[b])} 0 {int(test.tags[b, s])} {float(test.labels[b, s]):g}\n"
            for b, s in zip(rows.tolist(), slots.tolist(), strict=True)]
