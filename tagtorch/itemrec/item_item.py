"""The shared form of the item-item baselines (ItemKNN, EASE^R, RP3beta) and their tag-aware forms.

Each of these models learns one item x item weight matrix ``W`` from a binary interaction
matrix ``X`` whose columns are the items, and scores a query by ``q W`` (``q``: the query's
vector over the items). Subclasses compute ``W`` (:meth:`ItemItemModel.item_weights`); the
interaction matrix, the query vectors, the scoring, saving and loading are here.

**Plain form** (``tags = False``): ``X`` is the user x item matrix of the training posts (1 where
the user tagged the item, with any tag), and the query vector of a user is their row ``x_u``.
The query's tag is not used: the model answers a ``(user, tag)`` query with the user's ranking.

**Tag-aware form** (``tags = True``; ours, in the manner of the collective models with side
information, Jeunen, Van Balen and Goethals, "Closed-form models for collaborative filtering with
side-information", RecSys 2020): the tag x item matrix (1 where the tag was given to the item
in training) is stacked under the user x item matrix, so that items are similar when the same
users tagged them or the same tags were given to them. For RP3beta this is its random walk on
the tripartite user-item-tag graph (from an item to its users and tags and back to items). A
query vector adds the query tag's row: ``q = x_u / |x_u|_1 + tag_weight x_t / |x_t|_1``
(``tag_weight`` tuned on validation); a per-user query adds the user's tag profile instead,
``tag_weight sum_t P(t | u) x_t / |x_t|_1`` (which the task's ``"profile"`` aggregation of the
tag-level scores gives, since the score is linear in ``q``).

Every model sets ``W``'s diagonal to 0 (an item does not recommend itself; the items a query
already knows are never ranked, :mod:`tagtorch.itemrec.data`). ``W`` is a dense float32 tensor
(``n_items^2`` values: 49 MB for LastFM's 3,496 items), on the device of ``device``.
"""

from __future__ import annotations

from typing import ClassVar, Self

import numpy as np
import torch
from torch import Tensor

from tagtorch.devices import check_memory
from tagtorch.itemrec.base import profile_mix
from tagtorch.itemrec.baselines import ArrayModel
from tagtorch.itemrec.data import ItemRecData, TagProfile

__all__ = ["ItemItemModel", "interaction_matrix", "keep_top_k", "normalized_rows"]


def interaction_matrix(data: ItemRecData, tags: bool) -> Tensor:
    """``[n_users (+ n_tags), n_items]`` binary float32: user-item rows, tag-item rows under them.

    Example:
        >>> from types import SimpleNamespace
        >>> data = SimpleNamespace(n_users=1, n_items=3, n_tags=2,
        ...                        train=np.array([[0, 2, 1], [0, 2, 0], [0, 1, 1]]))
        >>> interaction_matrix(data, tags=True).tolist()
        [[0.0, 1.0, 1.0], [0.0, 0.0, 1.0], [0.0, 1.0, 1.0]]
    """
    users, items, tag_ids = (torch.from_numpy(np.ascontiguousarray(c)) for c in data.train.T)
    n_rows = data.n_users + (data.n_tags if tags else 0)
    matrix = torch.zeros(n_rows, data.n_items)
    matrix[users, items] = 1.0
    if tags:
        matrix[data.n_users + tag_ids, items] = 1.0
    return matrix


def keep_top_k(weights: Tensor, k: int | None, dim: int) -> Tensor:
    """``weights`` with, along ``dim``, all but the ``k`` largest values of each slice set to 0.

    ``dim = 1`` keeps each row's ``k`` largest, ``dim = 0`` each column's; ``k = None`` (or
    ``k >= size``) keeps all. Ties at the ``k``-th value are broken by position (lowest kept).

    Example:
        >>> keep_top_k(torch.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]]), 1, dim=1).tolist()
        [[3.0, 0.0, 0.0], [0.0, 5.0, 0.0]]
    """
    if k is None or k >= weights.shape[dim]:
        return weights
    order = torch.sort(weights, dim=dim, descending=True, stable=True).indices
    keep = torch.zeros_like(weights, dtype=torch.bool).scatter_(
        dim, order.narrow(dim, 0, k), True)
    return torch.where(keep, weights, torch.zeros((), dtype=weights.dtype))


def normalized_rows(matrix: Tensor) -> Tensor:
    """Rows divided by their sums (zero rows stay zero)."""
    return matrix / matrix.sum(1, keepdim=True).clamp_min(torch.finfo(matrix.dtype).tiny)


class ItemItemModel(ArrayModel):
    """An item x item weight matrix ``W`` scoring ``q W`` (see the module docstring).

    Args:
        tags: the tag-aware form (tag-item rows in ``X``, the query tag in ``q``).
        tag_weight: weight of the tag part of ``q`` (tag-aware form only).
        device: where ``W`` is computed and queries are scored (``"cpu"``, ``"cuda"``).
    """

    tags: bool
    tag_weight: float
    device: str

    _arrays: tuple[str, ...] = ("user_items", "tag_items", "weights")
    user_aggregate: ClassVar[str] = "profile"
    """Per-user queries: ``sum_t P(t | u) s(u, i, t)``, the user's query vector with their tag
    profile (the score is linear in ``q``; :func:`tagtorch.itemrec.base.user_scores`)."""

    bytes_per_item_pair: ClassVar[float] = 8.0
    """Bytes of working memory per ``(item, item)`` pair while fitting: ``W`` in float32 and one
    more such matrix (a subclass that needs more says so)."""

    def __init__(self, tags: bool = False, tag_weight: float = 1.0, device: str = "cpu") -> None:
        if tag_weight < 0:
            raise ValueError(f"tag_weight must be >= 0, got {tag_weight}")
        self.user_items: np.ndarray | None = None
        self.tag_items: np.ndarray | None = None
        self.weights: np.ndarray | None = None
        self._dense: tuple[Tensor, Tensor, Tensor] | None = None

    def item_weights(self, interactions: Tensor) -> Tensor:
        """``[n_items, n_items]`` ``W`` from the binary ``X`` (rows: users, then tags)."""
        raise NotImplementedError

    def fit(self, data: ItemRecData) -> Self:
        """Computes ``W`` from the training posts (and their tags, in the tag-aware form).

        Raises:
            TooLargeError: the dense matrices would not fit in memory (before any is made).
        """
        rows = data.n_users + (data.n_tags if self.tags else 0)
        check_memory(4.0 * rows * data.n_items + self.bytes_per_item_pair * data.n_items ** 2,
                     type(self).__name__, f"its dense matrices ({rows:,} rows x "
                     f"{data.n_items:,} items, and {data.n_items:,} x {data.n_items:,} items)",
                     "fewer items (a higher task.p) or a factor model (pitf, dorank_plus, "
                     "two_dimensional), whose memory grows with the items, not their square")
        interactions = interaction_matrix(data, self.tags).to(self.device)
        weights = self.item_weights(interactions)
        weights.fill_diagonal_(0.0)
        interactions = interactions.cpu()
        self.user_items = interactions[:data.n_users].numpy()
        self.tag_items = interactions[data.n_users:].numpy()  # no rows in the plain form
        self.weights = weights.float().cpu().numpy()
        self._dense = None
        return self

    def _tensors(self) -> tuple[Tensor, Tensor, Tensor]:
        """The normalized user and tag rows and ``W``, as tensors on the device (cached)."""
        self._check_fitted()
        if self._dense is None:
            assert self.user_items is not None and self.tag_items is not None
            assert self.weights is not None
            self._dense = (normalized_rows(torch.from_numpy(self.user_items)).to(self.device),
                           normalized_rows(torch.from_numpy(self.tag_items)).to(self.device),
                           torch.from_numpy(self.weights).to(self.device))
        return self._dense

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """``[B, n_items]`` ``q W`` for the ``(user, tag)`` queries."""
        by_user, by_tag, weights = self._tensors()
        query = by_user[users.to(self.device)]
        if self.tags and self.tag_weight > 0:
            query = query + self.tag_weight * by_tag[tags.to(self.device)]
        return query @ weights

    def profile_scores(self, users: Tensor, profile: TagProfile) -> Tensor:
        """``[B, n_items]`` per-user scores: ``q`` with the users' tag profiles, times ``W``.

        Equal to the ``"profile"`` aggregation of :meth:`score` over the users' tags, computed
        once per user instead of once per (user, tag).
        """
        by_user, by_tag, weights = self._tensors()
        query = by_user[users.to(self.device)]
        if self.tags and self.tag_weight > 0:
            query = query + self.tag_weight * profile_mix(profile, by_tag)
        return query @ weights
