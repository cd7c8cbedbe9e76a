"""Ranking losses for padded candidate lists, one pure function per loss (allRank-style).

Every loss has the signature ``fn(scores, labels, mask, *, <keyword parameters>) -> Tensor``:

- ``scores [B, L]``: scores of ``B`` padded lists of width ``L``, any float dtype (computed in
  float32, or float64 for float64 scores);
- ``labels [B, L]``: relevance ``>= 0`` of each candidate, binary or graded;
- ``mask [B, L]`` bool: ``True`` at real candidates. Padding never influences the value nor the
  gradient, whatever score (even ``±inf`` or ``NaN``) or label it holds;

and returns a scalar, float32 (float64 for float64 scores): the mean over the lists that can
contribute. A list with no relevant real candidate, or for a pairwise loss no pair with
different labels, contributes nothing; when no list does, the result is a zero that is still
attached to the graph (``backward()`` works and gives zero gradients), never NaN.

Losses (:data:`LOSSES` maps these names to the functions):

- ``"listnet"``: :func:`listnet_loss`, ListNet (Cao et al., ICML 2007);
- ``"ranknet"``: :func:`ranknet_loss`, RankNet (Burges et al., ICML 2005);
- ``"lambdarank"``: :func:`lambdarank_loss`, LambdaRank (Burges, MSR-TR-2010-82);
- ``"lambdaloss"``: :func:`lambdaloss`, LambdaLoss NDCG-Loss2++ (Wang et al., CIKM 2018);
- ``"approxndcg"``: :func:`approxndcg_loss`, ApproxNDCG (Qin, Liu and Li, IR 2010);
- ``"neuralndcg"``: :func:`neuralndcg_loss`, NeuralNDCG (Pobrotyn and Białobrzeski, 2021).

Example (the padding's huge score and its label change nothing):
    >>> import torch
    >>> scores = torch.tensor([[2.0, 0.0, 1.0, 4e30], [0.5, 1.5, -1.0, 0.0]])
    >>> labels = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 2.0, 0.0]])
    >>> mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
    >>> for name, loss in LOSSES.items():
    ...     print(f"{name:10} {float(loss(scores, labels, mask)):.4f}")
    listnet    1.6452
    ranknet    0.7209
    lambdarank 0.5738
    lambdaloss 1.6330
    approxndcg -0.7161
    neuralndcg -0.7968
    >>> round(float(lambdarank_loss(scores, labels, mask, k=1)), 4)  # pairs touching the top 1
    0.9935
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from tagtorch.losses.approxndcg import approx_ranks, approxndcg_loss
from tagtorch.losses.lambdaloss import lambdaloss
from tagtorch.losses.lambdarank import lambdarank_loss
from tagtorch.losses.listnet import listnet_loss
from tagtorch.losses.neuralndcg import neural_sort, neuralndcg_loss, sinkhorn_scaling
from tagtorch.losses.ranknet import ranknet_loss

__all__ = [
    "LOSSES",
    "RankingLoss",
    "approx_ranks",
    "approxndcg_loss",
    "get_loss",
    "lambdaloss",
    "lambdarank_loss",
    "listnet_loss",
    "neural_sort",
    "neuralndcg_loss",
    "ranknet_loss",
    "sinkhorn_scaling",
]

RankingLoss = Callable[..., Tensor]
"""A loss ``fn(scores, labels, mask, **params) -> Tensor`` (scalar)."""

LOSSES: dict[str, RankingLoss] = {
    "listnet": listnet_loss,
    "ranknet": ranknet_loss,
    "lambdarank": lambdarank_loss,
    "lambdaloss": lambdaloss,
    "approxndcg": approxndcg_loss,
    "neuralndcg": neuralndcg_loss,
}
"""The ranking losses by name."""


def get_loss(name: str) -> RankingLoss:
    """The loss function registered under ``name`` in :data:`LOSSES`.

    Args:
        name: one of ``"listnet"``, ``"ranknet"``, ``"lambdarank"``, ``"lambdaloss"``,
            ``"approxndcg"``, ``"neuralndcg"``.

    Returns:
        The loss function.

    Raises:
        ValueError: for an unknown name (the message lists the valid ones).

    Example:
        >>> get_loss("listnet") is listnet_loss
        True
        >>> get_loss("softmax")
        Traceback (most recent call last):
        ...
        ValueError: unknown loss 'softmax'; valid names: approxndcg, lambdaloss, lambdarank, listnet, neuralndcg, ranknet
    """  # noqa: E501
    try:
        return LOSSES[name]
    except (KeyError, TypeError):
        valid = ", ".join(sorted(LOSSES))
        raise ValueError(f"unknown loss {name!r}; valid names: {valid}") from None
