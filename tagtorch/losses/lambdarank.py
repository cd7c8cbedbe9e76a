"""LambdaRank: RankNet pairs weighted by |ΔNDCG| (Burges, MSR-TR-2010-82)."""

from __future__ import annotations

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

__all__ = ["lambdarank_loss"]


def lambdarank_loss(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    k: int | None = None,
    sigma: float = 1.0,
    gain: Gain = "linear",
    reduction: Reduction = "sum",
) -> Tensor:
    """LambdaRank: the RankNet pair loss weighted by the |ΔNDCG(@k)| of swapping the pair.

    C. J. C. Burges, "From RankNet to LambdaRank to LambdaMART: An Overview", Microsoft
    Research Technical Report MSR-TR-2010-82, 2010. Each pair ``(i, j)`` of real candidates with
    ``label_i > label_j`` costs ``|ΔNDCG_ij| * log(1 + exp(-sigma (s_i - s_j)))``, where

        ``|ΔNDCG_ij| = |G_i - G_j| * |d(r_i) - d(r_j)| / IDCG(@k)``

    is the change of the list's NDCG(@k) when ``i`` and ``j`` swap places in the current
    ranking: ``r`` are the ranks by the current (detached) scores, ties broken by list order;
    ``G`` the gains (``label`` or ``2^label - 1``); ``d(r) = 1 / log2(1 + r)``, set to ``0`` for
    ``r > k``. The weights are constants (detached), so the gradient of this loss is the
    LambdaRank gradient ``sum_j lambda_ij``.

    Truncation: with ``k``, only the pairs where **at least one** of ``i``, ``j`` is ranked in
    the top ``k`` count (the others have ``ΔNDCG@k = 0``), and the IDCG is cut at ``k``.

    Reduction: the weighted pair losses of a list are summed (``reduction="sum"``, default, the
    loss whose gradient is the lambda gradient) or averaged over its counted pairs (``"mean"``);
    then the lists with at least one counted pair are averaged.

    Takes ``scores``, ``labels`` and ``mask`` as described in :mod:`tagtorch.losses`, and ``k``:
    NDCG cut-off, or ``None`` for the whole list; ``sigma``: steepness of the logistic, ``> 0``;
    ``gain``: ``"linear"`` (``label``, the tagtorch NDCG) or ``"exp"`` (``2^label - 1``);
    ``reduction``: ``"sum"`` or ``"mean"`` over the counted pairs of a list.

    Returns:
        ``[]`` mean loss over the lists with a counted pair (dtype and the case of no such list:
        :mod:`tagtorch.losses`).
    """
    check_k(k, optional=True)
    check_positive("sigma", sigma)
    lists = lambda_lists(scores, labels, mask, k, gain)
    discounts = dcg_discount(lists.ranks, k)
    weights = pairwise_diffs(lists.norm_gains).abs() * pairwise_diffs(discounts).abs()
    pairs = pair_mask(lists.labels, lists.mask)
    if k is not None:
        top = lists.ranks <= k
        pairs = pairs & (top[:, :, None] | top[:, None, :])
    return weighted_pair_loss(weights, lists, pairs, sigma, reduction)
