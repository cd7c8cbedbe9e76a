"""Evaluation of tag-based item recommendation over seeded splits (the Do-Rank protocol).

For each seed: the p-core of the folksonomy is split at random, by posts by default (80% train,
20% test; a part of train held out for early stopping;
:func:`tagtorch.itemrec.data.item_recommendation_data`), every
configured model learns from the training triples, and ranks all items for every test query
``(user, tag)``. Metrics per query: NDCG@k and P@k for k = 1..10 and MAP (linear gain, the
queries' known training items excluded from the ranking). The run writes, like every tagtorch
evaluation, ``results.csv`` (``method, fold, metric, value``, where ``fold`` is the seed),
``per_object.csv.gz`` (per query), ``report.md`` (mean ± 95% CI over the seeds, paired tests of
every pair of methods, Holm-corrected), ``run.METHOD.trec`` (``run.trec`` for a lone method; the
top ``trec_depth`` items per test query of the first seed; query ids ``u{user}t{tag}``),
``qrels.trec`` (the first seed's test queries), the learning curves of
the trained models (``curves.csv``: train and validation DCG@10 per epoch;
``learning_curve.png``), and each fitted model into the checkpoint folder.

Checkpoint layout, per dataset, method and seed, under
``{checkpoint_dir}/itemrec/{dataset}/{method}/seed{k}/``:

- ``model/``: the fitted model (``manifest.json`` with the class, settings and file digests,
  plus ``weights.pt`` of tensors or ``arrays.npz``; see :mod:`tagtorch.storage`);
- ``runs/{key}/``: a factorization model's training state (``last.ckpt``, ``best.ckpt``,
  ``settings.json``), one folder per settings and data (``key`` digests both, see
  :class:`tagtorch.itemrec.base.FactorModel`), from which an interrupted training resumes to
  the result of an uninterrupted one; a run with other settings or data never touches it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.evaluation.plots import plot_learning_curves
from tagtorch.evaluation.protocol import MetricLogger
from tagtorch.evaluation.runs import write_run
from tagtorch.evaluation.trec import run_file_names
from tagtorch.itemrec.base import ItemRanker, score_queries
from tagtorch.itemrec.data import ItemRecData, Queries, item_recommendation_data
from tagtorch.metrics.functional import ranking_metrics

log = logging.getLogger(__name__)

__all__ = ["ItemRecommendationTask"]


class ItemRecommendationTask:
    """Evaluates the configured item rankers (``model``: name -> config) over seeded splits.

    The first method is the reference of the report's significance tests.

    Args:
        seeds: one split (and model initialization) per seed (the paper's figures: 5 seeds).
        p: p-core level.
        test_fraction: share of the core's triples in test.
        val_fraction: share of the training triples held out for early stopping.
        split: ``"posts"`` (the paper's protocol as we read it) or ``"triples"``: the units
            split at random (see :mod:`tagtorch.itemrec.data`).
        ks: cut-offs of NDCG and P.
        metrics: metric families (``ndcg``, ``precision``, ``map``, ...).
        batch_size: queries scored per batch.
        trec_depth: items per query written to the TREC run files (0: no TREC files).
        checkpoint_dir: root folder of the fitted models (None: nothing saved, no resumption).
    """

    def __init__(
        self,
        seeds: Sequence[int] = (0, 1, 2, 3, 4),
        p: int = 5,
        test_fraction: float = 0.2,
        val_fraction: float = 0.25,
        split: str = "posts",
        ks: Sequence[int] = tuple(range(1, 11)),
        metrics: Sequence[str] = ("ndcg", "precision", "map"),
        batch_size: int = 1024,
        trec_depth: int = 100,
        checkpoint_dir: str | Path | None = None,
    ) -> None:
        if not seeds:
            raise ValueError("no seed to evaluate")
        self.seeds = list(seeds)
        self.p = p
        self.test_fraction = test_fraction
        self.val_fraction = val_fraction
        self.split_by = split
        self.ks = tuple(ks)
        self.metrics = tuple(metrics)
        self.batch_size = batch_size
        self.trec_depth = trec_depth
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None

    def split(self, folksonomy: Folksonomy, seed: int) -> ItemRecData:
        """The split of one seed."""
        return item_recommendation_data(folksonomy, p=self.p, test_fraction=self.test_fraction,
                                        val_fraction=self.val_fraction, seed=seed,
                                        split=self.split_by)

    def _make(self, node: Mapping[str, Any], name: str, dataset: str,
              seed: int) -> tuple[ItemRanker, Path | None]:
        """Builds a model; factorization models get the seed and their checkpoint folder."""
        params = dict(node)
        folder = None
        if self.checkpoint_dir is not None:
            folder = self.checkpoint_dir / "itemrec" / dataset / name / f"seed{seed}"
        if "checkpoint_dir" in params:
            params["checkpoint_dir"] = str(folder) if folder is not None else None
        if "seed" in params:
            params["seed"] = seed
        return instantiate(params), folder

    def run(self, folksonomy: Folksonomy, cfg: DictConfig, output_dir: Path,
            loggers: Sequence[MetricLogger] = ()) -> pd.DataFrame:
        """Evaluates every model on every seed; writes and prints the report."""
        models = {str(name): OmegaConf.to_container(node, resolve=True)
                  for name, node in cfg.model.items()}
        if not models:
            raise ValueError("no model to evaluate")
        output_dir.mkdir(parents=True, exist_ok=True)
        for old in output_dir.glob("run*.trec"):
            old.unlink()
        run_files = run_file_names(list(models))
        results: list[dict[str, Any]] = []
        per_query: list[pd.DataFrame] = []
        curves: list[pd.DataFrame] = []
        for seed in tqdm(self.seeds, desc="seeds", unit="seed"):
            data = self.split(folksonomy, seed)
            if seed == self.seeds[0] and self.trec_depth:
                _write_qrels(output_dir / "qrels.trec", data.test_queries)
            for name, node in models.items():
                model, folder = self._make(node, name, folksonomy.name, seed)
                start = time.perf_counter()
                model.fit(data)
                fit_seconds = time.perf_counter() - start
                if folder is not None:
                    model.save(folder / "model")
                run_file = (output_dir / run_files[name]
                            if seed == self.seeds[0] and self.trec_depth else None)
                values, seconds = self._evaluate(model, data, name, run_file)
                frame = pd.DataFrame({k: v.numpy() for k, v in values.items()})
                frame.insert(0, "object", np.arange(len(frame)))
                per_query.append(frame.melt(id_vars="object", var_name="metric",
                                            value_name="value").assign(method=name, fold=seed))
                means = {k: float(torch.nanmean(v)) for k, v in values.items()}
                history = getattr(model, "history_", None)
                if history:
                    curves.append(pd.DataFrame(history).assign(method=name, seed=seed))
                    means["best_epoch"] = float(getattr(model, "best_epoch_", None) or 0)
                    # the early-stopping score: select hyperparameters on it, never on test
                    means["val_dcg@10"] = max(float(h["val_dcg@10"]) for h in history)
                means.update(fit_seconds=fit_seconds, ms_model=1000 * seconds / len(frame))
                for logger in loggers:
                    logger.log_metrics({f"{name}/test/{k}": v for k, v in means.items()},
                                       step=seed)
                log.info("seed %d, %s: %s (fit %.1f s)", seed, name, ", ".join(
                    f"{k} {means[k]:.4f}" for k in ("ndcg@10", "p@10", "map") if k in means),
                    fit_seconds)
                results += [{"method": name, "fold": seed, "metric": k, "value": v}
                            for k, v in means.items()]
        result_frame = pd.DataFrame(results, columns=["method", "fold", "metric", "value"])
        object_frame = pd.concat(per_query, ignore_index=True)[
            ["method", "fold", "object", "metric", "value"]]
        report = write_run(output_dir, result_frame, object_frame, title=(
            f"Tag-based item recommendation on the {self.p}-core of {folksonomy.name} "
            f"({len(self.seeds)} seeds as folds)"),
            plot_metric=f"ndcg@{max(self.ks)}" if "ndcg" in self.metrics else None)
        if curves:
            curve_frame = pd.concat(curves, ignore_index=True)
            curve_frame.to_csv(output_dir / "curves.csv", index=False)
            plot_learning_curves(curve_frame, output_dir / "learning_curve.png")
        print(report)
        return result_frame

    def _evaluate(self, model: ItemRanker, data: ItemRecData, name: str,
                  run_file: Path | None) -> tuple[dict[str, torch.Tensor], float]:
        """Per-query metrics of the test queries, and the seconds spent scoring.

        The top ``trec_depth`` items of each query are appended to ``run_file`` (None: not).
        """
        parts: list[dict[str, torch.Tensor]] = []
        seconds = 0.0
        start = time.perf_counter()
        for rows, scores, labels, mask in score_queries(model, data.test_queries, data.n_items,
                                                        self.batch_size):
            seconds += time.perf_counter() - start
            parts.append(ranking_metrics(scores, labels, mask, ks=self.ks, metrics=self.metrics))
            if run_file is not None:
                with open(run_file, "a") as out:
                    out.writelines(_run_lines(data.test_queries, rows, scores, mask,
                                              self.trec_depth, name))
            start = time.perf_counter()
        return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}, seconds


def _query_id(user: int, tag: int) -> str:
    return f"u{user}t{tag}"


def _run_lines(queries: Queries, rows: np.ndarray, scores: torch.Tensor, mask: torch.Tensor,
               depth: int, name: str) -> list[str]:
    """TREC run lines of the top ``depth`` items of each query (scores as ``depth - rank``)."""
    masked = scores.masked_fill(~mask, -torch.inf)
    depth = min(depth, scores.shape[-1])
    top = torch.topk(masked, depth, dim=-1, sorted=True)
    lines = []
    for row, items, values in zip(rows, top.indices.numpy(), top.values.numpy(), strict=True):
        qid = _query_id(int(queries.users[row]), int(queries.tags[row]))
        lines += [f"{qid} Q0 {item} {rank + 1} {depth - rank} {name}\n"
                  for rank, (item, value) in enumerate(zip(items, values, strict=True))
                  if np.isfinite(value)]
    return lines


def _write_qrels(path: Path, queries: Queries) -> None:
    """``qid 0 item 1`` for every gold item of every query."""
    with open(path, "w") as out:
        for row in range(len(queries)):
            qid = _query_id(int(queries.users[row]), int(queries.tags[row]))
            out.writelines(f"{qid} 0 {item} 1\n" for item in queries.gold[row])
