"""RankNet: pairwise logistic loss (Burges et al., ICML 2005)."""

from __future__ import annotations

from torch import Tensor

from tagtorch.losses._masking import (
    Reduction,
    check_positive,
    mean_over_lists,
    pair_mask,
    pairwise_logistic,
    prepare,
    reduce_pairs,
)

__all__ = ["ranknet_loss"]


def ranknet_loss(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    sigma: float = 1.0,
    reduction: Reduction = "mean",
) -> Tensor:
    """RankNet pairwise logistic loss.

    C. Burges, T. Shaked, E. Renshaw, A. Lazier, M. Deeds, N. Hamilton and G. Hullender,
    "Learning to Rank using Gradient Descent", ICML 2005. Every pair ``(i, j)`` of real
    candidates with ``label_i > label_j`` costs ``log(1 + exp(-sigma (s_i - s_j)))`` (computed
    with ``softplus``).

    Reduction: the pair losses of a list are averaged (``reduction="mean"``, default) or summed
    (``"sum"``), then the lists that have at least one such pair are averaged; lists without
    one are left out.

    Takes ``scores``, ``labels`` and ``mask`` as described in :mod:`tagtorch.losses`, and ``sigma``:
    steepness of the logistic, ``> 0``; ``reduction``: ``"mean"`` or ``"sum"`` over the pairs of a
    list.

    Returns:
        ``[]`` mean loss over the lists with a pair (dtype and the case of no such list:
        :mod:`tagtorch.losses`).
    """
    check_positive("sigma", sigma)
    s, y, m = prepare(scores, labels, mask)
    per_list, valid = reduce_pairs(pairwise_logistic(s, sigma), pair_mask(y, m), reduction)
    return mean_over_lists(per_list, valid)
