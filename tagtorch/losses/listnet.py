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

    Args:
        scores: ``[B, L]`` scores, any float dtype.
        labels: ``[B, L]`` relevance ``>= 0`` (binary or graded).
        mask: ``[B, L]`` bool, ``True`` at real candidates.

    Returns:
        ``[]`` mean loss over the lists with a relevant candidate, float32 (float64 for float64
        scores); a zero still attached to the graph when no list has one.

    Example:
        >>> scores = torch.tensor([[2.0, 0.0, 1.0, 5e30], [0.3, 0.1, 0.0, 0.0]])
        >>> labels = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
        >>> mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
        >>> round(float(listnet_loss(scores, labels, mask)), 4)
        1.0434
    """
    s, y, m = prepare(scores, labels, mask)
    target = torch.exp(masked_log_softmax(y, m))
    per_list = -(target * masked_log_softmax(s, m)).sum(-1)
    return mean_over_lists(per_list, ((y > 0) & m).any(-1))
