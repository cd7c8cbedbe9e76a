"""torchmetrics wrappers around :mod:`tagtorch.metrics.functional`.

Each metric accumulates, over batches and processes, the sum of the per-list values and the
number of lists counted (``dist_reduce_fx="sum"``); ``compute()`` returns their mean. Lists
with no relevant item follow ``empty_target_action`` as in the functional module: with
``"skip"`` (default) they are left out of both sum and count, so the result is the ``nanmean``
of the per-list values; ``compute()`` is NaN when no list was counted.

Example:
    >>> metric = NDCG(k=2)
    >>> mask = torch.ones(1, 3, dtype=torch.bool)
    >>> metric.update(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[1, 0, 0]]), mask)
    >>> metric.update(torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([[0, 0, 0]]), mask)
    >>> metric.update(torch.tensor([[0.1, 0.9, 0.5]]), torch.tensor([[1, 0, 0]]), mask)
    >>> round(float(metric.compute()), 4)  # mean of 1 and 0; the list without relevant item skipped
    0.5
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor
from torchmetrics import Metric

from tagtorch.metrics.functional import (
    MAX_CUTOFF,
    EmptyTargetAction,
    average_precision,
    check_k,
    dcg_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
    success_at_k,
)

__all__ = ["DCG", "MAP", "MRR", "NDCG", "Precision", "RankingMetric", "Recall", "Success"]


class RankingMetric(Metric):
    """Mean over lists of a per-list ranking metric (base class; use the subclasses).

    Subclasses set ``function``, the functional metric computing per-list values; the
    arguments of :meth:`update` are those of :mod:`tagtorch.metrics.functional`.

    Example (one batch of two lists; ``n_relevant`` counts gold items missing from the lists):
        >>> scores = torch.tensor([[0.3, 0.2, 0.9], [0.1, 0.4, 0.0]])
        >>> labels = torch.tensor([[1, 1, 0], [1, 0, 0]])
        >>> mask = torch.ones(2, 3, dtype=torch.bool)
        >>> for metric in (NDCG(k=3), Precision(k=2), Recall(k=2), Success(k=2), MRR(), MAP()):
        ...     metric.update(scores, labels, mask, n_relevant=torch.tensor([3, 1]))
        ...     print(f"{type(metric).__name__:9} {float(metric.compute()):.4f}")
        NDCG      0.5808
        Precision 0.5000
        Recall    0.6667
        Success   1.0000
        MRR       0.5000
        MAP       0.4444

    Args:
        k: cut-off (required by the ``@k`` metrics, optional for :class:`MRR` and :class:`MAP`).
        empty_target_action: ``"skip"``, ``"neg"``, ``"pos"`` or ``"error"`` for lists with no
            relevant item (see :mod:`tagtorch.metrics.functional`).
        **kwargs: passed to :class:`torchmetrics.Metric`.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False
    requires_k: ClassVar[bool] = True
    function: ClassVar[Callable[..., Tensor]]

    total: Tensor
    count: Tensor

    def __init__(
        self,
        k: int | None = None,
        empty_target_action: EmptyTargetAction = "skip",
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)
        check_k(k, optional=not self.requires_k, at_most=MAX_CUTOFF)
        if empty_target_action not in ("skip", "neg", "pos", "error"):
            raise ValueError(f"unknown empty_target_action {empty_target_action!r}")
        self.k = k
        self.empty_target_action: EmptyTargetAction = empty_target_action
        # float64: the sum of many float32 per-list values loses no precision
        self.add_state("total", torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(
        self, scores: Tensor, labels: Tensor, mask: Tensor, n_relevant: Tensor | None = None
    ) -> None:
        """Adds a batch of lists: ``scores``, ``labels``, ``mask`` ``[B, L]``, ``n_relevant [B]``.

        Shapes and meaning are those of :mod:`tagtorch.metrics.functional`.
        """
        values = self._values(scores.detach(), labels, mask, n_relevant)
        kept = ~torch.isnan(values)
        self.total += values[kept].sum().to(self.total.dtype)
        self.count += kept.sum()

    def _values(
        self, scores: Tensor, labels: Tensor, mask: Tensor, n_relevant: Tensor | None
    ) -> Tensor:
        """Per-list values ``[B]`` (NaN for the lists left out)."""
        return type(self).function(
            scores, labels, mask, self.k, n_relevant, self.empty_target_action
        )

    def compute(self) -> Tensor:
        """Mean of the per-list values seen so far (NaN if none was counted)."""
        return self.total / self.count


class DCG(RankingMetric):
    """Mean DCG@k (:func:`~tagtorch.metrics.functional.dcg_at_k`), over every list.

    Not normalized, so a list with no relevant item counts, with DCG 0 (there is no
    ``empty_target_action``); ``n_relevant`` is ignored.

    Example:
        >>> m = DCG(k=2)
        >>> m.update(torch.tensor([[0.1, 0.9, 0.5]]), torch.tensor([[1.0, 0.0, 1.0]]),
        ...          torch.ones(1, 3, dtype=torch.bool))
        >>> m.update(torch.tensor([[0.1, 0.9]]), torch.tensor([[0.0, 0.0]]),
        ...          torch.ones(1, 2, dtype=torch.bool))
        >>> round(float(m.compute()), 4)  # (1 / log2(3) + 0) / 2
        0.3155
    """

    function = staticmethod(dcg_at_k)

    def __init__(self, k: int, **kwargs: object) -> None:
        super().__init__(k, "neg", **kwargs)

    def _values(
        self, scores: Tensor, labels: Tensor, mask: Tensor, n_relevant: Tensor | None
    ) -> Tensor:
        assert self.k is not None
        return dcg_at_k(scores, labels.to(scores.dtype), mask, self.k)


class NDCG(RankingMetric):
    """Mean NDCG@k (:func:`~tagtorch.metrics.functional.ndcg_at_k`)."""

    function = staticmethod(ndcg_at_k)


class Precision(RankingMetric):
    """Mean P@k (:func:`~tagtorch.metrics.functional.precision_at_k`)."""

    function = staticmethod(precision_at_k)


class Recall(RankingMetric):
    """Mean R@k (:func:`~tagtorch.metrics.functional.recall_at_k`)."""

    function = staticmethod(recall_at_k)


class Success(RankingMetric):
    """Mean S@k, the hit rate (:func:`~tagtorch.metrics.functional.success_at_k`)."""

    function = staticmethod(success_at_k)


class MRR(RankingMetric):
    """Mean reciprocal rank (:func:`~tagtorch.metrics.functional.reciprocal_rank`)."""

    requires_k: ClassVar[bool] = False

    function = staticmethod(reciprocal_rank)


class MAP(RankingMetric):
    """Mean average precision (:func:`~tagtorch.metrics.functional.average_precision`)."""

    requires_k: ClassVar[bool] = False

    function = staticmethod(average_precision)
