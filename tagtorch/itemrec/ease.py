"""EASE^R: the closed-form item x item shallow autoencoder.

Steck, "Embarrassingly shallow autoencoders for sparse data", WWW 2019.

The item x item weights minimize ``|X - X B|_F^2 + lambda |B|_F^2`` subject to ``diag(B) = 0``;
with ``P = (X^T X + lambda I)^-1`` the solution is ``B_ij = -P_ij / P_jj`` (``i != j``) and
``B_jj = 0`` (the paper's Algorithm 1). ``X`` is the binary user x item matrix (the plain form)
or, in the tag-aware form, the user x item matrix with the tag x item matrix stacked under it,
as the collective EASE of Jeunen et al. (RecSys 2020) stacks side information with weight 1
(:mod:`tagtorch.itemrec.item_item`). A query scores ``q B``. The inverse is computed in float64
on ``device``; ``lambda`` is tuned on validation (the paper's values lie between 100 and 1000
on its larger data sets).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from tagtorch.itemrec.item_item import ItemItemModel

__all__ = ["EASE"]


class EASE(ItemItemModel):
    """EASE^R (see the module docstring).

    Args:
        regularization: ``lambda``, added to the Gram matrix's diagonal.
        **kwargs: :class:`~tagtorch.itemrec.item_item.ItemItemModel` settings (``tags``,
            ``tag_weight``, ``device``).

    Example:
        >>> x = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
        >>> b = EASE(regularization=1.0).item_weights(x)
        >>> [round(v, 4) for v in b[0].tolist()]
        [0.0, 0.25, 0.25]
    """

    regularization: float
    _forwards_kwargs = True
    bytes_per_item_pair = 36.0
    """The float64 Gram matrix, LAPACK's copy, its inverse, the weights, then float32."""

    def __init__(self, regularization: float = 250.0, **kwargs: Any) -> None:
        if regularization <= 0:
            raise ValueError(f"regularization must be > 0, got {regularization}")
        super().__init__(**kwargs)

    def item_weights(self, interactions: Tensor) -> Tensor:
        """``B = -P / diag(P)`` with ``P = (X^T X + lambda I)^-1``, zero diagonal."""
        matrix = interactions.double()
        gram = matrix.T @ matrix
        gram.diagonal().add_(self.regularization)
        inverse = torch.linalg.inv(gram)
        weights = -inverse / inverse.diagonal()[None, :]
        weights.fill_diagonal_(0.0)
        return weights.float()
