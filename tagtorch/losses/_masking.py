"""Shared private helpers of :mod:`tagtorch.losses`: input checks, masking, pairs, gains, DCG.

The DCG discount and the ideal order come from :mod:`tagtorch.metrics.functional`, the one
NDCG implementation.

Every helper works on a batch of ``B`` padded candidate lists of width ``L`` with a bool
``mask [B, L]`` that is ``True`` at real candidates.

The one rule that keeps padding out of both the value and the gradient: padded scores and
labels are replaced by ``0`` (:func:`zero_padding`: ``masked_fill``, which also stops their
gradient) *before* any arithmetic (:func:`prepare`), so every later intermediate is finite
whatever garbage (``±inf``, ``NaN``, ``±1e30``) the padding held, and padded or invalid entries
are then dropped the same way, never by multiplying with ``0`` (``0 * inf`` and ``0 / 0`` would
leak ``NaN`` into the backward pass).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from tagtorch.metrics.functional import dcg_discount, ideal_gains, rank_order

Gain = Literal["linear", "exp"]
"""Gain of a relevance label ``y``: ``"linear"`` is ``y``, ``"exp"`` is ``2^y - 1``."""

Reduction = Literal["mean", "sum"]
"""How a pairwise loss reduces the pairs of one list: their mean or their sum."""


class Batch(NamedTuple):
    """Inputs of a loss after :func:`prepare` (compute dtype, padding zeroed)."""

    scores: Tensor  # [B, L] float32/float64, 0 at padding; gradient reaches real entries only
    labels: Tensor  # [B, L] same dtype, 0 at padding
    mask: Tensor  # [B, L] bool


def compute_dtype(scores: Tensor) -> torch.dtype:
    """Internal dtype: float64 for float64 scores, float32 for every other dtype."""
    return torch.float64 if scores.dtype == torch.float64 else torch.float32


def check_shapes(scores: Tensor, mask: Tensor, labels: Tensor | None = None) -> None:
    """Raises on tensors that are not ``[B, L]`` alike or a mask that is not bool."""
    named = [("scores", scores), ("mask", mask)] + ([] if labels is None else [("labels", labels)])
    for name, tensor in named:
        if not isinstance(tensor, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if scores.ndim != 2:
        raise ValueError(f"scores must have shape [B, L], got {tuple(scores.shape)}")
    for name, tensor in named[1:]:
        if tensor.shape != scores.shape:
            raise ValueError(
                f"{name} must have the shape of scores {tuple(scores.shape)}, "
                f"got {tuple(tensor.shape)}"
            )
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor, got {mask.dtype}")


def zero_padding(values: Tensor, mask: Tensor) -> Tensor:
    """``values`` with every padded entry replaced by ``0`` (no gradient reaches padding)."""
    return values.masked_fill(~mask, 0.0)


def prepare(scores: Tensor, labels: Tensor, mask: Tensor) -> Batch:
    """Checks a loss's inputs, casts them to the compute dtype and zeroes their padding.

    Args:
        scores: ``[B, L]`` scores, any float dtype.
        labels: ``[B, L]`` relevance, ``>= 0`` at real candidates (anything at padding).
        mask: ``[B, L]`` bool, ``True`` at real candidates.

    Returns:
        The :class:`Batch` of ``[B, L]`` float32 (float64 for float64 scores) tensors.

    Raises:
        ValueError: on bad shapes, a non-bool mask, or a negative or NaN real label.
    """
    check_shapes(scores, mask, labels)
    dtype = compute_dtype(scores)
    s = zero_padding(scores.to(dtype), mask)
    y = zero_padding(labels.to(device=s.device, dtype=dtype), mask)
    check_labels(y)
    return Batch(s, y, mask)


def check_labels(labels: Tensor) -> None:
    """Raises ValueError on a negative or NaN label (``labels`` with their padding zeroed)."""
    if labels.numel() and not bool(labels.min() >= 0):  # NaN >= 0 is False
        raise ValueError("labels of real candidates must be >= 0 (and not NaN)")


def check_positive(name: str, value: float, allow_zero: bool = False) -> None:
    """Raises ValueError unless ``value`` is a finite number ``> 0`` (``>= 0`` if allowed)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    ok = ok and value == value and abs(value) != float("inf")
    if not ok or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")


def check_reduction(reduction: str) -> None:
    """Raises ValueError unless ``reduction`` is ``"mean"`` or ``"sum"``."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")


def gain_values(labels: Tensor, gain: str) -> Tensor:
    """Gains ``[B, L]`` of labels: ``y`` (``"linear"``) or ``2^y - 1`` (``"exp"``); 0 at 0."""
    if gain == "linear":
        return labels
    if gain == "exp":
        return torch.exp2(labels) - 1
    raise ValueError(f"gain must be 'linear' or 'exp', got {gain!r}")


def position_discount(width: int, k: int | None, like: Tensor) -> Tensor:
    """Discounts ``[width]`` of the positions ``1..width`` (dtype and device of ``like``)."""
    positions = torch.arange(1, width + 1, dtype=like.dtype, device=like.device)
    return dcg_discount(positions, k)


def ideal_dcg_of_gains(gains: Tensor, k: int | None = None) -> Tensor:
    """Ideal DCG(@k) ``[B]`` of gains ``[B, L]`` (``>= 0``, ``0`` at padding).

    The ideal order and the discounts are those of :mod:`tagtorch.metrics.functional`
    (:func:`~tagtorch.metrics.functional.ideal_gains`,
    :func:`~tagtorch.metrics.functional.dcg_discount`). Unlike
    :func:`~tagtorch.metrics.functional.ideal_dcg` (the metrics' normalizer: linear gain, the
    list cut at ``k`` before summing), the gains may be exponential and the sum runs over the
    whole width with zero discounts beyond ``k``: the losses' values keep their rounding.
    """
    return (ideal_gains(gains) * position_discount(gains.shape[-1], k, gains)).sum(-1)


def ndcg_ratio(dcg: Tensor, idcg: Tensor) -> tuple[Tensor, Tensor]:
    """``(dcg / idcg, idcg > 0)`` per list ``[B]``; ``0`` (with a clean gradient) where invalid."""
    valid = idcg > 0
    safe = torch.where(valid, idcg, torch.ones_like(idcg))
    return zero_padding(dcg / safe, valid), valid


def pairwise_diffs(values: Tensor) -> Tensor:
    """``[B, L, L]`` differences ``values[b, i] - values[b, j]`` of ``values [B, L]``."""
    return values[:, :, None] - values[:, None, :]


def pair_mask(labels: Tensor, mask: Tensor) -> Tensor:
    """``[B, L, L]`` bool: ``i`` and ``j`` are real candidates and ``label_i > label_j``."""
    real = mask[:, :, None] & mask[:, None, :]
    return real & (pairwise_diffs(labels) > 0)


def pairwise_logistic(scores: Tensor, sigma: float) -> Tensor:
    """``[B, L, L]`` RankNet pair losses ``log(1 + exp(-sigma (s_i - s_j)))`` (stable softplus)."""
    return F.softplus(-sigma * pairwise_diffs(scores))


def ranks_by_score(scores: Tensor, mask: Tensor) -> Tensor:
    """Ranks ``[B, L]`` (float, from 1) of the real candidates by detached score, descending.

    Ties go to the candidate earlier in the list, as in :mod:`tagtorch.metrics`: the ranks are
    the inverse of :func:`~tagtorch.metrics.functional.rank_order` (two stable sorts, ``O(L log
    L)``, not the ``[B, L, L]`` comparison of every pair). Padding is ranked after every real
    candidate, so a padded position gets a finite placeholder ``>= 1`` that callers must mask
    out.
    """
    order = rank_order(scores.detach(), mask)
    positions = torch.arange(1, scores.shape[-1] + 1, dtype=scores.dtype, device=scores.device)
    ranks = torch.empty(order.shape, dtype=scores.dtype, device=scores.device)
    return ranks.scatter_(-1, order, positions.expand_as(order))


def masked_log_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """Log-softmax over the last dim restricted to ``mask``; ``0`` where ``mask`` is False.

    Masked entries get the most negative finite value (not ``-inf``), so rows with no ``True``
    entry stay finite, and every masked probability is exactly ``0``.
    """
    filled = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
    return zero_padding(torch.log_softmax(filled, dim=-1), mask)


def reduce_pairs(pair_losses: Tensor, pairs: Tensor, reduction: str) -> tuple[Tensor, Tensor]:
    """Reduces the selected pairs of each list.

    Args:
        pair_losses: ``[B, L, L]`` finite losses of all pairs.
        pairs: ``[B, L, L]`` bool, the pairs that count.
        reduction: ``"mean"`` (over the counted pairs of each list) or ``"sum"``.

    Returns:
        ``([B] per-list loss, [B] bool: the list has at least one counted pair)``.
    """
    check_reduction(reduction)
    total = zero_padding(pair_losses, pairs).sum((-2, -1))
    count = pairs.sum((-2, -1))
    if reduction == "mean":
        total = total / count.clamp_min(1).to(total.dtype)
    return total, count > 0


def mean_over_lists(per_list: Tensor, valid: Tensor) -> Tensor:
    """Mean ``[]`` of ``per_list [B]`` over the ``valid [B]`` lists; a graph-attached 0 if none."""
    count = valid.sum().clamp_min(1).to(per_list.dtype)
    return zero_padding(per_list, valid).sum() / count


class LambdaLists(NamedTuple):
    """What the lambda losses (LambdaRank, LambdaLoss) start from: :func:`lambda_lists`."""

    scores: Tensor  # [B, L] compute dtype, 0 at padding
    labels: Tensor  # [B, L]
    mask: Tensor  # [B, L] bool
    ranks: Tensor  # [B, L] ranks by the detached scores, ties by list order
    norm_gains: Tensor  # [B, L] gains divided by the list's IDCG(@k)


def lambda_lists(scores: Tensor, labels: Tensor, mask: Tensor, k: int | None,
                 gain: str) -> LambdaLists:
    """Prepared lists, their current ranks and their gains over IDCG(@k) (``G_i`` of both)."""
    s, y, m = prepare(scores, labels, mask)
    gains = gain_values(y, gain)
    norm_gains, _ = ndcg_ratio(gains, ideal_dcg_of_gains(gains, k)[:, None])
    return LambdaLists(s, y, m, ranks_by_score(s, m), norm_gains)


def weighted_pair_loss(weights: Tensor, lists: LambdaLists, pairs: Tensor, sigma: float,
                       reduction: str, divisor: float | None = None) -> Tensor:
    """Mean over lists of the pairs' logistic losses weighted by the (detached) ``weights``.

    Args:
        weights: ``[B, L, L]`` pair weights; no gradient flows through them.
        lists: the lists of :func:`lambda_lists`.
        pairs: ``[B, L, L]`` bool, the pairs that count.
        sigma: steepness of the logistic.
        reduction: ``"mean"`` or ``"sum"`` over the counted pairs of a list.
        divisor: divides each pair loss (LambdaLoss: ``ln 2``, for base-2 logarithms).

    Returns:
        ``[]`` the mean over the lists with a counted pair (:func:`mean_over_lists`).
    """
    pair_losses = weights.detach() * pairwise_logistic(lists.scores, sigma)
    if divisor is not None:
        pair_losses = pair_losses / divisor
    per_list, valid = reduce_pairs(pair_losses, pairs, reduction)
    return mean_over_lists(per_list, valid)
