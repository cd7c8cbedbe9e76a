"""PITF adapted to item recommendation, trained with BPR (Rendle and Schmidt-Thieme, WSDM 2010).

PITF (pairwise interaction tensor factorization) models the user x item x tag tensor by the
pairwise interactions of its modes. For tag recommendation the paper scores
``<U_u, T^U_t> + <I_i, T^I_t>``; for ranking items given ``(u, t)``, as the Do-Rank paper adapts
it, the item is the target mode: ``s(u, i, t) = <U_u, I^U_i> + <T_t, I^T_i>`` (the user-tag term
is constant for a query and drops out). Training is BPR (Rendle et al., UAI 2009): for each
observed ``(u, i, t)``, an item ``j`` that ``u`` did not tag with ``t`` is drawn uniformly, and
``-ln sigmoid(s(u, i, t) - s(u, j, t))`` plus an L2 penalty ``lambda`` on the rows involved is
minimized. Defaults from the Do-Rank paper's tuned PITF: learning rate 0.01, ``r = 128``;
``lambda = 5e-5`` (its exponent was lost in the extraction; PITF's own paper uses 5e-5).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from tagtorch.itemrec.base import FactorModel, in_sets, profile_mass, profile_mix
from tagtorch.itemrec.data import TagProfile

__all__ = ["PITF"]


class PITF(FactorModel):
    """PITF for items (see the module docstring).

    Args:
        **kwargs: :class:`~tagtorch.itemrec.base.FactorModel` settings (defaults here:
            ``rank = 128``, ``regularization = 5e-5``).
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("rank", 128)
        kwargs.setdefault("regularization", 5e-5)
        super().__init__(**kwargs)

    def build(self, n_users: int, n_items: int, n_tags: int) -> None:
        """User, tag and the two item factor matrices."""
        self.user_factors = self._init_factor(n_users)
        self.tag_factors = self._init_factor(n_tags)
        self.item_user_factors = self._init_factor(n_items)
        self.item_tag_factors = self._init_factor(n_items)

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """``[B, n_items]`` ``<U_u, I^U_i> + <T_t, I^T_i>``."""
        device = self.user_factors.device
        return (self.user_factors[users.to(device)] @ self.item_user_factors.T
                + self.tag_factors[tags.to(device)] @ self.item_tag_factors.T)

    def profile_scores(self, users: Tensor, profile: TagProfile) -> Tensor:
        """``[B, n_items]`` ``sum_t P(t | u) s(u, i, t)``: two products per block of users.

        The tag term is linear in ``T_t`` (the profile's mix of tag rows); the user term does
        not depend on the tag and counts ``sum_t P(t | u)`` times (1, or 0 for no profile).
        """
        device = self.user_factors.device
        mass = profile_mass(profile, self.tag_factors)
        return (mass * (self.user_factors[users.to(device)] @ self.item_user_factors.T)
                + profile_mix(profile, self.tag_factors) @ self.item_tag_factors.T)

    def score_items(self, users: Tensor, tags: Tensor, items: Tensor) -> Tensor:
        """``[B, P]`` scores of the items ``[B, P]`` for each set's ``(u, t)``."""
        user_rows, tag_rows = self.user_factors[users], self.tag_factors[tags]
        return ((self.item_user_factors[items] * user_rows[:, None]).sum(-1)
                + (self.item_tag_factors[items] * tag_rows[:, None]).sum(-1))

    def set_loss(self, users: Tensor, tags: Tensor, items: Tensor, item_mask: Tensor) -> Tensor:
        """BPR over each positive and one uniformly drawn item outside the set."""
        n_items = self.item_user_factors.shape[0]
        drawn = torch.randint(n_items, items.shape, device=items.device)
        valid = item_mask & ~in_sets(drawn, items, item_mask)  # a draw inside the set is skipped
        diff = self.score_items(users, tags, items) - self.score_items(users, tags, drawn)
        bpr = torch.nn.functional.softplus(-diff)  # -ln sigmoid(diff)
        penalty = (self.user_factors[users].square().sum(-1)[:, None]
                   + self.tag_factors[tags].square().sum(-1)[:, None]
                   + self.item_user_factors[items].square().sum(-1)
                   + self.item_tag_factors[items].square().sum(-1)
                   + self.item_user_factors[drawn].square().sum(-1)
                   + self.item_tag_factors[drawn].square().sum(-1))
        per_pair = bpr + self.regularization * penalty
        return torch.where(valid, per_pair, 0.0).sum() / valid.sum().clamp_min(1)
