"""RP3beta: three-step random walks with a popularity penalty.

Paudel, Christoffel, Newell and Bernstein, "Updatable, accurate, diverse, and scalable
recommendations for interactive applications", ACM TiiS 7(1), 2017.

On the bipartite graph of the binary interaction matrix ``X`` (rows: users, and in the tag-aware
form also tags; columns: items), ``P_ui`` is ``X`` with its rows normalized to 1 (a step from a
user or tag to an item) and ``P_iu`` is ``X^T`` with its rows normalized (a step from an item to
its users and tags). Following the paper's RP3beta and its reference implementation in Dacrema
et al.'s evaluation (RecSys 2019): both transition matrices are raised element-wise to the power
``alpha``, ``W = P_iu^alpha P_ui^alpha`` (from an item over a user or tag to an item), each
column ``j`` is divided by ``deg(j)^beta`` (the item's popularity: its number of rows in ``X``),
and each row keeps its ``neighbours`` largest weights. A query scores ``q W``
(:mod:`tagtorch.itemrec.item_item`); with ``q = x_u`` normalized this is the third step of
the walk from the user. In the tag-aware form the walk runs on the tripartite user-item-tag
graph: from an item to its users and its tags, and back to items.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from tagtorch.itemrec.item_item import ItemItemModel, keep_top_k, normalized_rows

__all__ = ["RP3Beta"]


class RP3Beta(ItemItemModel):
    """RP3beta (see the module docstring).

    Args:
        alpha: power of the transition probabilities (1: the plain random walk, P3).
        beta: popularity penalty: the weight into item ``j`` is divided by ``deg(j)^beta``.
        neighbours: weights kept per item (row of ``W``; ``None``: all).
        **kwargs: :class:`~tagtorch.itemrec.item_item.ItemItemModel` settings (``tags``,
            ``tag_weight``, ``device``).

    Example:
        >>> import torch
        >>> x = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
        >>> w = RP3Beta(alpha=1.0, beta=0.0, neighbours=None).item_weights(x)
        >>> [round(v, 4) for v in w[0].tolist()]
        [0.0, 0.25, 0.25]
    """

    alpha: float
    beta: float
    neighbours: int | None
    _forwards_kwargs = True
    bytes_per_item_pair = 45.0
    """float64 products and similarities, the neighbours' sort (values and indices), a mask."""

    def __init__(self, alpha: float = 1.0, beta: float = 0.5, neighbours: int | None = 100,
                 **kwargs: Any) -> None:
        if alpha <= 0:
            raise ValueError(f"alpha must be > 0, got {alpha}")
        if beta < 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        if neighbours is not None and neighbours < 1:
            raise ValueError(f"neighbours must be >= 1 or None, got {neighbours}")
        super().__init__(**kwargs)

    def item_weights(self, interactions: Tensor) -> Tensor:
        """``P_iu^alpha P_ui^alpha``, columns divided by ``deg^beta``, rows' top ``neighbours``."""
        matrix = interactions.double()
        to_item = normalized_rows(matrix).pow(self.alpha)
        to_row = normalized_rows(matrix.T).pow(self.alpha)
        weights = to_row @ to_item
        degree = matrix.sum(0).clamp_min(1.0)
        weights = weights / degree.pow(self.beta)[None, :]
        weights.fill_diagonal_(0.0)
        return keep_top_k(weights, self.neighbours, dim=1).float()
