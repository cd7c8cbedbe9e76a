"""ListNet: cross-entropy of top-one probabilities (Cao et al., ICML 2007)."""

from __future__ import annotations

import torch
from torch import Tensor

from tagtorch.losses._masking import masked_log_softmax, mean_over_lists, prepare

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
    s, y, m = prepare(scores, labels, mask)
    target = torch.exp(masked_log_softmax(y, m))
    per_list = -(target * masked_log_softmax(s, m)).sum(-1)
    return mean_over_lists(per_list, ((y > 0) & m).any(-1))
