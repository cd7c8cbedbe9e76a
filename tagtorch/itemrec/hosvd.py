"""HOSVD: Tucker tensor reduction of the user x item x tag tensor.

Symeonidis, Nanopoulos and Manolopoulos, "Tag recommendations based on tensor dimensionality
reduction", RecSys 2008; the same authors' "A unified framework for providing recommendations
in social tagging systems based on ternary semantic analysis", IEEE TKDE 22(2), 2010.

The binary tensor ``A`` of the training triples is reduced by the higher-order SVD: for each
mode ``n``, ``U_n`` holds the ``c_n`` leading left singular vectors of the mode-``n``
unfolding ``A_(n)``; the core is ``S = A x_1 U_1^T x_2 U_2^T x_3 U_3^T`` and the reduced tensor
``A_hat = S x_1 U_1 x_2 U_2 x_3 U_3`` scores every triple: ``s(u, i, t) = A_hat[u, i, t]`` (the
papers recommend the tags with the largest ``A_hat[u, i, .]``; ranking items for ``(u, t)``
reads the same tensor along the item mode). The core sizes ``c_1, c_2, c_3`` are tuned (the
papers keep a share of each unfolding's spectrum; here they are chosen on validation DCG@10).

The singular vectors come from the eigenvectors of the unfoldings' Gram matrices, computed on
the sparse tensor (:mod:`tagtorch.itemrec.sparse_tensor`: ``tensorly``'s ``tucker`` needs the
dense tensor, 24 GB for LastFM), which gives the same subspaces as ``tensorly.tucker`` with
``init="svd"`` and no further iterations (the test's oracle, with a plain numpy HOSVD); the
scoring contracts the core with ``tensorly`` (PyTorch backend). A per-user query scores
``sum_t P(t | u) A_hat[u, i, t]`` (``user_aggregate="profile"``) or the max over all tags.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np
import tensorly as tl
import torch
from torch import Tensor

from tagtorch.itemrec.data import ItemRecData
from tagtorch.itemrec.sparse_tensor import (
    TensorModel,
    leading_vectors,
    tensor_coordinates,
    tensorly_backend,
    tucker_core,
    unfolding_gram,
)

__all__ = ["HOSVD"]


class HOSVD(TensorModel):
    """HOSVD tensor reduction (see the module docstring).

    Args:
        user_rank: ``c_1``, singular vectors kept of the user mode.
        item_rank: ``c_2``, of the item mode.
        tag_rank: ``c_3``, of the tag mode.
        **kwargs: :class:`~tagtorch.itemrec.sparse_tensor.TensorModel` settings
            (``user_aggregate``, ``device``).
    """

    user_rank: int
    item_rank: int
    tag_rank: int
    _forwards_kwargs = True
    _arrays = ("core", "user_factors", "item_factors", "tag_factors")

    def __init__(self, user_rank: int = 64, item_rank: int = 64, tag_rank: int = 64,
                 **kwargs: Any) -> None:
        if min(user_rank, item_rank, tag_rank) < 1:
            raise ValueError(f"the core sizes must be >= 1, got {user_rank}, {item_rank}, "
                             f"{tag_rank}")
        super().__init__(**kwargs)
        self.core: np.ndarray | None = None

    def fit(self, data: ItemRecData) -> Self:
        """The leading singular vectors of each unfolding and the core, from the triples."""
        coordinates = tensor_coordinates(data.train)
        sizes = (data.n_users, data.n_items, data.n_tags)
        ranks = (self.user_rank, self.item_rank, self.tag_rank)
        factors = [leading_vectors(unfolding_gram(coordinates, sizes, mode).to(self.device), k)
                   for mode, k in enumerate(ranks)]
        core = tucker_core(coordinates, factors)
        self.core = core.float().cpu().numpy()
        self.user_factors, self.item_factors, self.tag_factors = (
            f.float().cpu().numpy() for f in factors)
        return self

    def contract(self, user_rows: Tensor, tag_rows: Tensor) -> Tensor:
        """``S x_1 u x_3 t`` per query: ``[B, c2]`` (``tensorly.tenalg.mode_dot``)."""
        core = self._factor("core")
        with tensorly_backend():
            by_user = tl.tenalg.mode_dot(core, user_rows, 0)  # [B, c2, c3]
        return torch.einsum("bjc,bc->bj", by_user, tag_rows)
