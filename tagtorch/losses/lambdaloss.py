"""LambdaLoss with the NDCG-Loss2++ weighting scheme (Wang et al., CIKM 2018)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from tagtorch.losses._masking import (
    Gain,
    Reduction,
    check_positive,
    lambda_lists,
    pair_mask,
    pairwise_diffs,
    weighted_pair_loss,
)
from tagtorch.metrics.functional import check_k, dcg_discount

__all__ = ["lambdaloss"]


def lambdaloss(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    k: int | None = None,
    sigma: float = 1.0,
    mu: float = 10.0,
    gain: Gain = "linear",
    reduction: Reduction = "mean",
) -> Tensor:
    """LambdaLoss, NDCG-Loss2++ weighting scheme (allRank's ``ndcgLoss2PP_scheme``).

    X. Wang, C. Li, N. Golbandi, M. Bendersky and M. Najork, "The LambdaLoss Framework for
    Ranking Metric Optimization", CIKM 2018. With ``r`` the ranks by the current (detached)
    scores (ties broken by list order), ``D(r) = log2(1 + r)``, ``G = gain / IDCG(@k)``, a pair
    ``(i, j)`` of real candidates with ``label_i > label_j`` costs

        ``-w_ij * log2(sigmoid(sigma (s_i - s_j)))``, with
        ``w_ij = (rho_ij + mu * delta_ij) * |G_i - G_j|``,
        ``rho_ij = |1 / D(r_i) - 1 / D(r_j)|`` (LambdaRank's weight),
        ``delta_ij = |1 / D(|r_i - r_j|) - 1 / D(|r_i - r_j| + 1)|`` (NDCG-Loss2's weight).

    ``log2(sigmoid(x))`` is computed as ``-softplus(-x) / ln 2``, which never takes ``log(0)``
    (allRank clamps the sigmoid at ``1e-10`` instead, which zeroes the gradient of pairs that
    are badly misordered by more than about 23 / sigma).

    Truncation, as in allRank: with ``k``, only pairs where **both** ``i`` and ``j`` are ranked
    in the top ``k`` count, and the IDCG is cut at ``k`` (``rho`` and ``delta`` are not).

    Reduction: the pair losses of a list are averaged over its counted pairs
    (``reduction="mean"``, default, allRank's choice) or summed (``"sum"``, the paper's
    per-query loss), then the lists with at least one counted pair are averaged (allRank's
    ``"mean"`` instead pools the pairs of the whole batch).

    Takes ``scores``, ``labels`` and ``mask`` as described in :mod:`tagtorch.losses`, and ``k``:
    NDCG cut-off, or ``None`` for the whole list; ``sigma``: steepness of the logistic, ``> 0``;
    ``mu``: weight ``>= 0`` of the NDCG-Loss2 term; ``gain``: ``"linear"`` (``label``, the tagtorch
    NDCG) or ``"exp"`` (``2^label - 1``, allRank); ``reduction``: ``"mean"`` or ``"sum"`` over the
    counted pairs of a list.

    Returns:
        ``[]`` mean loss over the lists with a counted pair (dtype and the case of no such list:
        :mod:`tagtorch.losses`).
    """
    check_k(k, optional=True)
    check_positive("sigma", sigma)
    check_positive("mu", mu, allow_zero=True)
    lists = lambda_lists(scores, labels, mask, k, gain)
    rho = pairwise_diffs(dcg_discount(lists.ranks)).abs()
    # delta depends on |r_i - r_j| alone: read from a table of the L possible distances (the
    # distance 0, i == j, is never a counted pair; 1 stands in for it as before)
    width = lists.ranks.shape[-1]
    steps = torch.arange(width + 1, dtype=rho.dtype, device=rho.device).clamp_min(1)
    table = (dcg_discount(steps) - dcg_discount(steps + 1)).abs()  # [L + 1], by distance
    distance = pairwise_diffs(lists.ranks).abs().long()
    weights = (rho + mu * table[distance]) * pairwise_diffs(lists.norm_gains).abs()
    pairs = pair_mask(lists.labels, lists.mask)
    if k is not None:
        top = lists.ranks <= k
        pairs = pairs & top[:, :, None] & top[:, None, :]
    return weighted_pair_loss(weights, lists, pairs, sigma, reduction, divisor=math.log(2.0))
