"""Baselines of tag-based item recommendation: probabilistic CP, a 2-D model and popularity.

- :class:`ProbabilisticCP`, in the spirit of CP-TRPR (Do-Rank paper, Section 3.3: a
  probabilistic ranking method on a CP decomposition): the CP model of Do-Rank fitted as a
  probability of observation, ``P(observed | u, i, t) = sigmoid(s(u, i, t))``, by logistic loss
  on the observed triples (1) and uniformly drawn unobserved ``(u, j, t)`` (0); it treats every
  unobserved entry alike, where Do-Rank's UTS scheme tells negatives from neutrals.
- :class:`TwoDimensional`, in the spirit of CTS (the tensor flattened into a user x item and a
  tag x item matrix): ``s(u, i, t) = (1 - beta) P(i | u) + beta P(i | t)``, each the row of the
  count matrix normalized to sum 1, with additive smoothing ``alpha``.
  For per-user queries its per-user form is ``(1 - beta) P(i | u) + beta sum_t P(t | u)
  P(i | t)`` (``user_aggregate = "profile"``, whatever the task's aggregation): with the post
  split the ``P(i | u)`` term is constant over the ranked items, so it ranks by
  ``sum_t P(t | u) P(i | t)``.
- :class:`TagPopularity`: the items most often tagged with the query's tag (ties broken by the
  items' overall popularity).
- :class:`GlobalPopularity`: the items most often tagged overall, whatever the user and tag
  (the per-user baseline of the paper's protocol).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import torch
from torch import Tensor

from tagtorch.errors import UnreadableFileError
from tagtorch.itemrec.base import in_sets
from tagtorch.itemrec.data import ItemRecData
from tagtorch.itemrec.dorank import CPModel
from tagtorch.settings import ModelTask, SignatureSettings
from tagtorch.storage import load_array_model, save_array_model

__all__ = ["ArrayModel", "GlobalPopularity", "ProbabilisticCP", "TagPopularity", "TwoDimensional"]


class ProbabilisticCP(CPModel):
    """CP factors fitted by logistic loss on observed and drawn unobserved triples.

    Args:
        negatives: unobserved items drawn per set and step.
        **kwargs: :class:`~tagtorch.itemrec.base.FactorModel` settings (the paper's CP-TRPR
            uses ``r = 128``, the default here).
    """

    negatives: int

    def __init__(self, negatives: int = 4, **kwargs: Any) -> None:
        kwargs.setdefault("rank", 128)
        super().__init__(**kwargs)
        if negatives < 1:
            raise ValueError(f"negatives must be >= 1, got {negatives}")

    def set_loss(self, users: Tensor, tags: Tensor, items: Tensor, item_mask: Tensor) -> Tensor:
        """Logistic loss: positives as 1, drawn items outside the set as 0."""
        user_rows, tag_rows = self.user_factors[users], self.tag_factors[tags]
        drawn = torch.randint(self.item_factors.shape[0], (len(users), self.negatives),
                              device=users.device)
        in_set = in_sets(drawn, items, item_mask)
        positive = self.score_items(users, tags, items)
        negative = self.score_items(users, tags, drawn)
        softplus = torch.nn.functional.softplus
        loss = (torch.where(item_mask, softplus(-positive), 0.0).sum(-1)
                + torch.where(in_set, 0.0, softplus(negative)).sum(-1))
        count = item_mask.sum(-1) + (~in_set).sum(-1)
        penalty = (user_rows.square().sum(-1) + tag_rows.square().sum(-1)
                   + torch.where(item_mask, self.item_factors[items].square().sum(-1), 0.0).sum(-1))
        return ((loss + self.regularization * penalty) / count.clamp_min(1)).mean()


class ArrayModel(SignatureSettings):
    """Shared save/load of the models whose state is settings and named arrays (``_arrays``)."""

    task: ClassVar[ModelTask] = "itemrec"
    """The evaluation task these models belong to (read by the config checks)."""
    _arrays: tuple[str, ...] = ()

    def _check_fitted(self) -> None:
        if any(getattr(self, name, None) is None for name in self._arrays):
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit() or load()")

    def save(self, path: str | Path) -> None:
        """Writes the model folder: ``manifest.json`` (class, settings) and ``arrays.npz``."""
        self._check_fitted()
        save_array_model(path, type(self), self.settings(),
                         {name: getattr(self, name) for name in self._arrays})

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a model folder written by :meth:`save` (no pickles: ``allow_pickle=False``).

        Raises:
            UnreadableFileError: naming the file that is missing, altered or unsafe.
        """
        model, arrays, _ = load_array_model(path, cls)
        missing = set(cls._arrays) - set(arrays)
        if missing:
            raise UnreadableFileError(f"{path}: the saved arrays lack {sorted(missing)}")
        for name in cls._arrays:
            setattr(model, name, arrays[name])
        return model


def _row_normalized(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int],
                    alpha: float) -> np.ndarray:
    """Dense count matrix of ``(rows, cols)`` pairs, plus ``alpha``, rows normalized to 1."""
    counts = np.zeros(shape, dtype=np.float32)
    np.add.at(counts, (rows, cols), 1.0)
    counts += alpha
    totals = counts.sum(1, keepdims=True)
    return counts / np.where(totals > 0, totals, 1.0)


class TwoDimensional(ArrayModel):
    """``(1 - beta) P(i | u) + beta P(i | t)`` from the flattened user-item and tag-item counts.

    Args:
        beta: weight of the tag-item matrix.
        alpha: additive smoothing of the counts.

    Example:
        >>> model = TwoDimensional(beta=0.5, alpha=0.0)
        >>> model.user_item = np.array([[1.0, 0.0]], dtype=np.float32)
        >>> model.tag_item = np.array([[0.0, 1.0]], dtype=np.float32)
        >>> [round(v, 4) for v in model.score(torch.tensor([0]), torch.tensor([0]))[0].tolist()]
        [0.5, 0.5]
    """

    beta: float
    alpha: float

    _arrays = ("user_item", "tag_item")
    user_aggregate = "profile"
    """Per-user queries score ``sum_t P(t | u) s(u, i, t)`` (the model's per-user form)."""

    def __init__(self, beta: float = 0.5, alpha: float = 0.01) -> None:
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {beta}")
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        self.user_item: np.ndarray | None = None
        self.tag_item: np.ndarray | None = None

    def fit(self, data: ItemRecData) -> Self:
        """Counts the training triples' user-item and tag-item pairs."""
        users, items, tags = data.train.T
        self.user_item = _row_normalized(users, items, (data.n_users, data.n_items), self.alpha)
        self.tag_item = _row_normalized(tags, items, (data.n_tags, data.n_items), self.alpha)
        return self

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """``[B, n_items]`` mixture of the two normalized rows."""
        self._check_fitted()
        assert self.user_item is not None and self.tag_item is not None
        by_user = torch.from_numpy(self.user_item[users.cpu().numpy()])
        by_tag = torch.from_numpy(self.tag_item[tags.cpu().numpy()])
        return (1 - self.beta) * by_user + self.beta * by_tag


class TagPopularity(ArrayModel):
    """Items ranked by how often they were tagged with the query's tag in training.

    Example:
        >>> model = TagPopularity()
        >>> model.tag_item = np.array([[2.0, 0.0, 2.0]], dtype=np.float32)
        >>> model.item = np.array([1.0, 5.0, 3.0], dtype=np.float32)
        >>> model.score(torch.tensor([7]), torch.tensor([0])).argsort(descending=True).tolist()
        [[2, 0, 1]]
    """

    _arrays = ("tag_item", "item")

    def __init__(self) -> None:
        self.tag_item: np.ndarray | None = None
        self.item: np.ndarray | None = None

    def fit(self, data: ItemRecData) -> Self:
        """Counts the training triples per (tag, item) and per item."""
        _, items, tags = data.train.T
        self.tag_item = np.zeros((data.n_tags, data.n_items), dtype=np.float32)
        np.add.at(self.tag_item, (tags, items), 1.0)
        self.item = np.bincount(items, minlength=data.n_items).astype(np.float32)
        return self

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """``[B, n_items]`` tag-item counts, plus overall popularity as a tie-break below 1."""
        self._check_fitted()
        assert self.tag_item is not None and self.item is not None
        ties = torch.from_numpy(self.item / (self.item.max() + 1.0))
        return torch.from_numpy(self.tag_item[tags.cpu().numpy()]) + ties


class GlobalPopularity(ArrayModel):
    """Items ranked by their number of training triples, for every user and tag.

    Example:
        >>> model = GlobalPopularity()
        >>> model.item = np.array([1.0, 5.0, 3.0], dtype=np.float32)
        >>> model.score(torch.tensor([7, 8]), torch.tensor([0, 1])).argmax(-1).tolist()
        [1, 1]
    """

    _arrays = ("item",)

    def __init__(self) -> None:
        self.item: np.ndarray | None = None

    def fit(self, data: ItemRecData) -> Self:
        """Counts the training triples per item."""
        self.item = np.bincount(data.train[:, 1], minlength=data.n_items).astype(np.float32)
        return self

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """``[B, n_items]``: the items' training counts, the same row for every query."""
        self._check_fitted()
        assert self.item is not None
        return torch.from_numpy(self.item).to(users.device).expand(len(users), -1)
