"""BPR-MF: matrix factorization of the user x item matrix trained with BPR.

Bayesian personalized ranking: Rendle, Freudenthaler, Gantner and Schmidt-Thieme, "BPR:
Bayesian personalized ranking from implicit feedback", UAI 2009.

``s(u, i) = <U_u, V_i> + b_i``: a user's score of an item, whatever the query's tag (the plain
collaborative-filtering baseline; its tag-aware relative is PITF,
:mod:`tagtorch.itemrec.pitf`). Training minimizes
``-ln sigmoid(s(u, i) - s(u, j)) + lambda (|U_u|^2 + |V_i|^2 + |V_j|^2 + b_i^2 + b_j^2)`` for an
item ``i`` that ``u`` tagged and an item ``j`` drawn uniformly among those ``u`` never tagged in
training (a draw of a tagged item is skipped), as in the paper, with Adam (the project's
trainer, :class:`~tagtorch.itemrec.base.FactorModel`: early stopping on validation DCG@10).

Deviation (written here as the project's rules ask): the positives come in the batches of
User-Tag-Set sets that every factor model of the project trains on, so a post ``(u, i)`` is
drawn once per tag it carries, where LearnBPR draws ``(u, i)`` pairs uniformly. The test
oracle is ``implicit``'s ``BayesianPersonalizedRanking`` on planted data.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from tagtorch.itemrec.base import FactorModel
from tagtorch.itemrec.data import TagProfile

__all__ = ["BPRMF"]


class BPRMF(FactorModel):
    """BPR-MF on the user x item matrix (see the module docstring).

    Args:
        **kwargs: :class:`~tagtorch.itemrec.base.FactorModel` settings (defaults here:
            ``rank = 64``, ``regularization = 1e-4``).
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("rank", 64)
        kwargs.setdefault("user_aggregate", "profile")
        super().__init__(**kwargs)

    def build(self, n_users: int, n_items: int, n_tags: int) -> None:
        """User and item factors and the item bias."""
        self.user_factors = self._init_factor(n_users)
        self.item_factors = self._init_factor(n_items)
        self.item_bias = nn.Parameter(torch.zeros(n_items))

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """``[B, n_items]`` ``<U_u, V_i> + b_i`` (the tags are not used)."""
        device = self.user_factors.device
        return self.user_factors[users.to(device)] @ self.item_factors.T + self.item_bias

    def profile_scores(self, users: Tensor, profile: TagProfile) -> Tensor:
        """``[B, n_items]`` per-user scores: ``s(u, i)``, which no tag changes."""
        return self.score(users, users)

    def score_items(self, users: Tensor, tags: Tensor, items: Tensor) -> Tensor:
        """``[B, P]`` scores of the items ``[B, P]`` for each set's user."""
        return ((self.item_factors[items] * self.user_factors[users][:, None]).sum(-1)
                + self.item_bias[items])

    def set_loss(self, users: Tensor, tags: Tensor, items: Tensor, item_mask: Tensor) -> Tensor:
        """BPR of each positive against one uniformly drawn item the user never tagged."""
        drawn = torch.randint(self.item_factors.shape[0], items.shape, device=items.device)
        tagged = (self.data.tagged(users, drawn) if self.data is not None
                  else ((drawn[:, :, None] == items[:, None, :])
                        & item_mask[:, None, :]).any(-1))
        valid = item_mask & ~tagged
        diff = self.score_items(users, tags, items) - self.score_items(users, tags, drawn)
        penalty = (self.user_factors[users].square().sum(-1)[:, None]
                   + self.item_factors[items].square().sum(-1) + self.item_bias[items].square()
                   + self.item_factors[drawn].square().sum(-1) + self.item_bias[drawn].square())
        per_pair = nn.functional.softplus(-diff) + self.regularization * penalty
        return torch.where(valid, per_pair, 0.0).sum() / valid.sum().clamp_min(1)
