"""ListNet: cross-entropy of top-one probabilities (Cao et al., ICML 2007)."""

from __future__ import annotations

import torch
from torch import Tensor

from tagtorch.losses._masking import check_labels, check_shapes, compute_dtype

__all__ = ["listnet_loss"]


def listnet_loss(scores: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    """ListNet top-one cross-entropy, averaged over lists.

    Z. Cao, T. Qin, T.-Y. Liu, M.-F. Tsai and H. Li, "Learning to Rank: From Pairwise Approach to
    Listwise Approach", ICML 2007. The top-one probabilities of a list are the softmax of its
    labels (target) and of its scores (model), both over the list's real candidates only; the
    loss of a list is ``-sum_i softmax(labels)_i * log_softmax(scores)_i``, as in allRank's
    ``listNet``. Lists with no relevant real candidate are left out of the mean.

    Takes ``scores``, ``labels`` and ``mask`` as described in :mod:`tagtorch.losses`.

    Returns:
        ``[]`` mean loss over the lists with a relevant candidate (dtype and the case of no such
        list: :mod:`tagtorch.losses`).
    """
    check_shapes(scores, mask, labels)
    padding = ~mask
    dtype = compute_dtype(scores)
    y = labels.to(device=scores.device, dtype=dtype).masked_fill(padding, 0.0)
    check_labels(y)
    valid = (y > 0).any(-1)
    list_weights = valid.to(dtype) / valid.sum().clamp_min(1)  # the mean over valid lists
    # padding filled with half the lowest finite value: it drops out of both softmaxes, its
    # gradient stops at the fill, and log_softmax there stays finite (the lowest value itself
    # minus a large log-sum-exp would round to -inf, and 0 * -inf is NaN)
    fill = torch.finfo(dtype).min / 2
    target = torch.softmax(y.masked_fill(padding, fill), dim=-1)  # exactly 0 at padding
    log_q = torch.log_softmax(scores.to(dtype).masked_fill(padding, fill), dim=-1)
    # the finite targets of a left-out list are weighted 0, so it adds exactly 0 (and the
    # result stays attached to the graph when no list counts)
    return -((target * list_weights[:, None]) * log_q).sum()
