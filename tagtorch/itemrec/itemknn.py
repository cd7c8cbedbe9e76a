"""ItemKNN: item-based nearest neighbours on the interaction matrix, cosine with shrinkage.

The item-based top-N recommender of Deshpande and Karypis ("Item-based top-N recommendation
algorithms", ACM TOIS 22(1), 2004; Sarwar et al., WWW 2001), in the form that Dacrema, Cremonesi
and Jannach use as a baseline ("Are we really making much progress?", RecSys 2019): the
similarity of items ``i`` and ``j`` is the cosine of their columns of the binary interaction
matrix ``X`` with a shrink term ``h`` in the denominator,

    ``sim(i, j) = x_i . x_j / (|x_i| |x_j| + h)``,

each item keeps its ``neighbours`` most similar items (the ``k`` largest of its column of the
similarity: the neighbours that may recommend it), and a query scores ``q W``
(:mod:`tagtorch.itemrec.item_item`: the plain form on the user x item matrix, the tag-aware form
with tag-item rows). ``h = 0`` and ``neighbours = None`` give the plain cosine model of
``implicit``'s ``CosineRecommender`` (the oracle of the tests).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from tagtorch.itemrec.item_item import ItemItemModel, keep_top_k

__all__ = ["ItemKNN"]


class ItemKNN(ItemItemModel):
    """Item-based cosine kNN (see the module docstring).

    Args:
        neighbours: items kept per item (``None``: all).
        shrink: ``h``, added to the norms' product.
        **kwargs: :class:`~tagtorch.itemrec.item_item.ItemItemModel` settings (``tags``,
            ``tag_weight``, ``device``).

    Example:
        >>> import torch
        >>> x = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
        >>> w = ItemKNN(neighbours=None, shrink=0.0).item_weights(x)
        >>> [[round(v, 4) for v in row] for row in w.tolist()]
        [[0.0, 0.7071, 0.7071], [0.7071, 0.0, 0.0], [0.7071, 0.0, 0.0]]
    """

    neighbours: int | None
    shrink: float
    _forwards_kwargs = True
    bytes_per_item_pair = 45.0
    """float64 products and similarities, the neighbours' sort (values and indices), a mask."""

    def __init__(self, neighbours: int | None = 100, shrink: float = 10.0, **kwargs: Any) -> None:
        if neighbours is not None and neighbours < 1:
            raise ValueError(f"neighbours must be >= 1 or None, got {neighbours}")
        if shrink < 0:
            raise ValueError(f"shrink must be >= 0, got {shrink}")
        super().__init__(**kwargs)

    def item_weights(self, interactions: Tensor) -> Tensor:
        """Cosine similarities with shrinkage, each column's ``neighbours`` largest kept."""
        matrix = interactions.double()
        overlap = matrix.T @ matrix
        norms = overlap.diagonal().sqrt()
        similarity = overlap / (norms[:, None] * norms[None, :] + self.shrink).clamp_min(1e-12)
        similarity.fill_diagonal_(0.0)
        return keep_top_k(similarity, self.neighbours, dim=0).float()
