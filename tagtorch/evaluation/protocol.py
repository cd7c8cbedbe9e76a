"""The tag-recommendation evaluation protocol of Canuto et al. (JIDM 2013), Section 5.2.

For every fold: mine rules and statistics from D, build candidate sets for V and T, let each
ranker learn on V, score T, and compute per-object metrics. The run writes ``results.csv``
(``method, fold, metric, value``), ``per_object.csv.gz`` (the per-object values behind the
paired tests), ``report.md`` (mean ± 95% CI over folds, significance against the first method),
the test rankings as TREC run files and the gold tags as ``qrels.trec``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd
import torch
from tqdm.auto import tqdm

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries, tag_recommendation_folds
from tagtorch.evaluation.report import markdown_report
from tagtorch.evaluation.trec import run_lines, write_qrels
from tagtorch.metrics.functional import ranking_metrics
from tagtorch.rankers.base import Ranker

log = logging.getLogger(__name__)


class CandidateGenerator(Protocol):
    """Mines D, then turns V or T queries into candidate sets."""

    def fit(self, train_tags: Ragged, n_tags: int) -> CandidateGenerator:
        """Mines rules and statistics from D's tag sets."""
        ...

    def __call__(self, queries: TagQueries) -> CandidateSet:
        """Candidate sets with features and labels."""
        ...


class MetricLogger(Protocol):
    """What the protocol needs of a Lightning logger."""

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Logs scalar metrics."""
        ...


@dataclass(frozen=True)
class EvaluationResult:
    """Outcome of a protocol run.

    Attributes:
        results: ``method, fold, metric, value`` (fold means; timings included).
        per_object: ``method, fold, object, metric, value`` for the test objects.
        report: the markdown report.
    """

    results: pd.DataFrame
    per_object: pd.DataFrame
    report: str


class TagRecommendationProtocol:
    """Runs rankers through the 5-fold D/V/T protocol and evaluates them on T.

    Args:
        n_folds: portions and folds (the paper: 5).
        folds: run only these fold indices (default: all).
        input_fraction: share of each V/T object's tags given as input (the paper: 0.5).
        min_tags: minimum distinct tags of an evaluated object (the paper: 2).
        sample_size: sample N eligible objects first (the paper's N; None: all).
        ks: cut-offs of NDCG, P, R and S (the paper: k = 5).
        metrics: metric families (see :func:`tagtorch.metrics.functional.ranking_metrics`).
        batch_size: objects scored per batch.
        device: where rankers score (``"auto"``: CUDA when present).
        seed: seed of the split.
        write_trec: write ``run.trec`` and ``qrels.trec``.
    """

    def __init__(
        self,
        n_folds: int = 5,
        folds: Sequence[int] | None = None,
        input_fraction: float = 0.5,
        min_tags: int = 2,
        sample_size: int | None = None,
        ks: Sequence[int] = (5,),
        metrics: Sequence[str] = ("ndcg", "precision", "recall", "success", "mrr", "map"),
        batch_size: int = 4096,
        device: str = "auto",
        seed: int = 0,
        write_trec: bool = True,
    ) -> None:
        self.n_folds = n_folds
        self.folds = list(range(n_folds)) if folds is None else list(folds)
        bad = [f for f in self.folds if not 0 <= f < n_folds]
        if bad:
            raise ValueError(f"folds {bad} out of range for n_folds={n_folds}")
        self.input_fraction = input_fraction
        self.min_tags = min_tags
        self.sample_size = sample_size
        self.ks = tuple(ks)
        self.metrics = tuple(metrics)
        self.batch_size = batch_size
        self.device = torch.device(
            ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        )
        self.seed = seed
        self.write_trec = write_trec

    def evaluate(
        self,
        folksonomy: Folksonomy,
        candidates: Callable[[], CandidateGenerator],
        rankers: Mapping[str, Callable[[], Ranker]],
        output_dir: str | Path | None = None,
        loggers: Sequence[MetricLogger] = (),
    ) -> EvaluationResult:
        """Evaluates every ranker on every selected fold.

        Args:
            folksonomy: the normalized folksonomy.
            candidates: builds a fresh candidate generator (called once per fold).
            rankers: method name -> factory of a fresh ranker (called once per fold).
            output_dir: where results, report and TREC files go (None: nothing written).
            loggers: Lightning loggers receiving ``{method}/test/{metric}`` per fold.
        """
        if not rankers:
            raise ValueError("no ranker to evaluate")
        out = Path(output_dir) if output_dir is not None else None
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            for name in ["qrels.trec", *self._run_files(rankers).values()]:
                (out / name).unlink(missing_ok=True)
        folds = tag_recommendation_folds(
            folksonomy, n_folds=self.n_folds, input_fraction=self.input_fraction,
            min_tags=self.min_tags, sample_size=self.sample_size, seed=self.seed,
        )
        results: list[dict[str, Any]] = []
        per_object: list[pd.DataFrame] = []
        for fold in tqdm([folds[f] for f in self.folds], desc="folds", unit="fold"):
            start = time.perf_counter()
            generator = candidates().fit(fold.train_tags, folksonomy.n_tags)
            val, test = generator(fold.val), generator(fold.test)
            candidate_seconds = time.perf_counter() - start
            recall = float((test.labels.sum() / test.n_relevant.sum()).item())
            log.info("fold %d: D=%d V=%d T=%d objects, %.1f candidates per T object, "
                     "candidate recall %.3f (%.1fs)", fold.fold, len(fold.train_objects),
                     len(val), len(test), test.mask.sum().item() / max(len(test), 1), recall,
                     candidate_seconds)
            if out is not None and self.write_trec:
                write_qrels(out / "qrels.trec", fold.test.objects, fold.test.gold_tags)
            for name, make in rankers.items():
                values, timings = self._run_ranker(make, val, test, name, out, rankers)
                frame = pd.DataFrame({k: v.cpu().numpy() for k, v in values.items()})
                frame.insert(0, "object", test.objects.numpy())
                frame = frame.melt(id_vars="object", var_name="metric", value_name="value")
                per_object.append(frame.assign(method=name, fold=fold.fold))
                means = {k: float(torch.nanmean(v).item()) for k, v in values.items()}
                means.update(timings, candidate_recall=recall)
                results += [{"method": name, "fold": fold.fold, "metric": k, "value": v}
                            for k, v in means.items()]
                for logger in loggers:
                    logger.log_metrics({f"{name}/test/{k}": v for k, v in means.items()},
                                       step=fold.fold)
        result_frame = pd.DataFrame(results, columns=["method", "fold", "metric", "value"])
        object_frame = pd.concat(per_object, ignore_index=True)[
            ["method", "fold", "object", "metric", "value"]]
        report = markdown_report(
            result_frame, object_frame, title=f"Tag recommendation on {folksonomy.name}")
        if out is not None:
            result_frame.to_csv(out / "results.csv", index=False)
            object_frame.to_csv(out / "per_object.csv.gz", index=False)
            (out / "report.md").write_text(report)
        return EvaluationResult(result_frame, object_frame, report)

    def _run_files(self, rankers: Mapping[str, Any]) -> dict[str, str]:
        """TREC run file of each method: ``run.trec`` alone, or ``run.{method}.trec``."""
        if len(rankers) == 1:
            return {name: "run.trec" for name in rankers}
        return {name: f"run.{name}.trec" for name in rankers}

    def _run_ranker(
        self,
        make: Callable[[], Ranker],
        val: CandidateSet,
        test: CandidateSet,
        name: str,
        out: Path | None,
        rankers: Mapping[str, Any],
    ) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
        """Fits one ranker on V, scores T in batches; returns per-object metrics and timings."""
        ranker = make()
        start = time.perf_counter()
        ranker.fit(val, None)
        fit_seconds = time.perf_counter() - start
        start = time.perf_counter()
        scores = []
        with torch.no_grad():
            for batch in test.batches(self.batch_size):
                scores.append(ranker.score(batch.to(self.device)).float().cpu())
        rank_seconds = time.perf_counter() - start
        score = torch.cat(scores) if scores else torch.zeros(test.mask.shape)
        values = ranking_metrics(score, test.labels, test.mask, n_relevant=test.n_relevant,
                                 ks=self.ks, metrics=self.metrics)
        if out is not None and self.write_trec:
            with open(out / self._run_files(rankers)[name], "a") as run_file:
                run_file.writelines(run_lines(test, score, name.replace(" ", "_")))
        timings = {"fit_seconds": fit_seconds,
                   "rank_ms_per_object": 1000.0 * rank_seconds / max(len(test), 1)}
        return values, timings


def fold_sizes(folksonomy: Folksonomy, protocol: TagRecommendationProtocol) -> pd.DataFrame:
    """Sizes of D, V and T (objects and tag counts) of every fold of the protocol."""
    folds = tag_recommendation_folds(
        folksonomy, n_folds=protocol.n_folds, input_fraction=protocol.input_fraction,
        min_tags=protocol.min_tags, sample_size=protocol.sample_size, seed=protocol.seed,
    )
    return pd.DataFrame([{
        "fold": f.fold, "D_objects": len(f.train_objects), "V_objects": len(f.val),
        "T_objects": len(f.test), "V_input_tags": int(f.val.input_tags.lengths.sum()),
        "V_gold_tags": int(f.val.gold_tags.lengths.sum()),
        "T_input_tags": int(f.test.input_tags.lengths.sum()),
        "T_gold_tags": int(f.test.gold_tags.lengths.sum()),
    } for f in folds])

