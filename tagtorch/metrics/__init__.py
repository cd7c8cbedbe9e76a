"""Ranking metrics: batched functions on padded lists and torchmetrics wrappers.

See :mod:`tagtorch.metrics.functional` for the convention (ranking, ties, gains, empty lists).
"""

from tagtorch.metrics.functional import (
    METRIC_NAMES,
    EmptyTargetAction,
    average_precision,
    dcg_at_k,
    dcg_discount,
    ideal_dcg,
    ideal_gains,
    ndcg_at_k,
    precision_at_k,
    ranking_metrics,
    recall_at_k,
    reciprocal_rank,
    success_at_k,
)
from tagtorch.metrics.retrieval import (
    DCG,
    MAP,
    MRR,
    NDCG,
    Precision,
    RankingMetric,
    Recall,
    Success,
)

__all__ = [
    "DCG",
    "MAP",
    "METRIC_NAMES",
    "MRR",
    "NDCG",
    "EmptyTargetAction",
    "Precision",
    "RankingMetric",
    "Recall",
    "Success",
    "average_precision",
    "dcg_at_k",
    "dcg_discount",
    "ideal_dcg",
    "ideal_gains",
    "ndcg_at_k",
    "precision_at_k",
    "ranking_metrics",
    "recall_at_k",
    "reciprocal_rank",
    "success_at_k",
]
