"""ApproxNDCG: NDCG with sigmoid-smoothed ranks (Qin, Liu and Li, Information Retrieval 2010)."""

from __future__ import annotations

import torch
from torch import Tensor

from tagtorch.losses._masking import (
    Gain,
    check_positive,
    check_shapes,
    gain_values,
    ideal_dcg_of_gains,
    mean_over_lists,
    ndcg_ratio,
    pairwise_diffs,
    prepare,
    zero_padding,
)
from tagtorch.metrics.functional import dcg_discount

__all__ = ["approx_ranks", "approxndcg_loss"]


def approx_ranks(scores: Tensor, mask: Tensor, alpha: float = 1.0) -> Tensor:
    """Smoothed ranks: ``1 + sum_{j != i, j real} sigmoid(-alpha (s_i - s_j))``.

    The sigmoid relaxation of the position function of Qin, Liu and Li (2010), Eq. 19-20: each
    other real candidate ``j`` counts as ranked before ``i`` with probability
    ``sigmoid(alpha (s_j - s_i))``. As ``alpha`` grows, the ranks tend to the true ranks
    (ties count one half each way).

    Args:
        scores: ``[B, L]`` float scores (computed in their dtype).
        mask: ``[B, L]`` bool, ``True`` at real candidates.
        alpha: temperature of the sigmoid, ``> 0``.

    Returns:
        ``[B, L]`` approximate ranks ``>= 1`` of the real candidates; ``0`` at padding. Padding
        neither gets nor gives gradient.

    Example:
        >>> ranks = approx_ranks(torch.tensor([[3.0, -3.0, 0.0, 9.0]]),
        ...                      torch.tensor([[True, True, True, False]]), alpha=10.0)
        >>> [round(r, 3) for r in ranks[0].tolist()]
        [1.0, 3.0, 2.0, 0.0]
    """
    check_shapes(scores, mask)
    check_positive("alpha", alpha)
    s = zero_padding(scores, mask)
    width = s.shape[-1]
    others = mask[:, None, :] & ~torch.eye(width, dtype=torch.bool, device=s.device)
    ahead = torch.sigmoid(-alpha * pairwise_diffs(s))  # [b, i, j]: j before i
    return zero_padding(1.0 + zero_padding(ahead, others).sum(-1), mask)


def approxndcg_loss(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    alpha: float = 1.0,
    gain: Gain = "linear",
) -> Tensor:
    """ApproxNDCG: minus the NDCG of the smoothed ranks, averaged over lists.

    T. Qin, T.-Y. Liu and H. Li, "A General Approximation Framework for Direct Optimization of
    Information Retrieval Measures", Information Retrieval 13(4), 2010. With the smoothed ranks
    ``r~`` of :func:`approx_ranks`, a list's loss is
    ``-sum_i G_i / log2(1 + r~_i) / IDCG`` (``G``: gains of the real candidates). As in
    allRank's ``approxNDCGLoss`` the default temperature is ``alpha = 1``. Lists with no
    relevant real candidate are left out of the mean.

    Takes ``scores``, ``labels`` and ``mask`` as described in :mod:`tagtorch.losses`, and ``alpha``:
    temperature of the rank sigmoid, ``> 0``; larger is closer to the true NDCG; ``gain``:
    ``"linear"`` (``label``, the tagtorch NDCG) or ``"exp"`` (``2^label - 1``, allRank).

    Returns:
        ``[]`` mean loss (in ``[-1, 0)``) over the lists with a relevant candidate (dtype and the
        case of no such list: :mod:`tagtorch.losses`).
    """
    s, y, m = prepare(scores, labels, mask)
    gains = gain_values(y, gain)
    ranks = torch.where(m, approx_ranks(s, m, alpha), torch.ones_like(s))
    ndcg, valid = ndcg_ratio((gains * dcg_discount(ranks)).sum(-1), ideal_dcg_of_gains(gains))
    return -mean_over_lists(ndcg, valid)
