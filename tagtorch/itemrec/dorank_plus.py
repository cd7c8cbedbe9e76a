"""Do-Rank+ (ours, not the paper's model): Do-Rank's training with item and tag-item terms.

A pure CP score ``s(u, i, t) = sum_f U_uf V_if T_tf`` can only link an item to a tag through the
user: nothing in it says "item i goes with tag t" for every user, which is what the
tag-popularity baselines know. Do-Rank+ adds to the CP score an item bias ``b_i`` and a
tag-item term ``<T'_t, W_i>`` (optionally a user-item term ``<U'_u, W'_i>``):

    s(u, i, t) = sum_f U_uf V_if T_tf + b_i + <T'_t, W_i> [+ <U'_u, W'_i>],

and trains it exactly as :class:`~tagtorch.itemrec.dorank.DoRank` is trained (smoothed DCG on
the User-Tag-Set sets, fast learning, the same L2 penalty extended to the new rows a set
touches: ``|T'_t|^2`` and, over its positives, ``|W_i|^2 + b_i^2``; with the user-item term
``|U'_u|^2`` and ``|W'_i|^2``). The faithful model stays :class:`DoRank` (``model=dorank``);
this one is ``model=dorank_plus``.

For per-user queries its default aggregation in the experiments is the profile,
``sum_t P(t | u) s(u, i, t)``: on MovieLens seed 0 (validation DCG@10) the max over all tags
falls from 0.380 to 0.101. Tried on that split and not kept, as they did not raise validation
DCG@10 (0.380 at rank 256, lambda 3e-3, lr 0.001): a user-item term (0.26-0.27); a fixed
tag-item count prior ``gamma log(1 + c(t, i) / alpha)`` with a learned ``gamma`` (0.337-0.356);
a "mixture" aggregation ``sum_t P(t | u) softmax_i s(u, i, t)`` (0.285, 0.348 with the count
prior); neutral items as negatives (0.362-0.377); 200 sampled negatives, uniform or by
popularity (``negatives``, ``negative_power``: 0.361-0.364); smoothing temperature 0.3 and 3
(``temperature``: 0.366, 0.217).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from tagtorch.itemrec.base import profile_mass, profile_mix
from tagtorch.itemrec.data import ItemRecData, TagProfile
from tagtorch.itemrec.dorank import DoRank, cp_scores
from tagtorch.itemrec.lean import LeanEpochs, RowTake

__all__ = ["DoRankPlus"]


class DoRankPlus(DoRank):
    """Do-Rank+ (ours; module docstring): CP plus item bias and tag-item (user-item) terms.

    Args:
        user_item: add the user-item term ``<U'_u, W'_i>``.
        **kwargs: :class:`~tagtorch.itemrec.dorank.DoRank` settings (``fast``,
            ``negatives``, ...) and :class:`~tagtorch.itemrec.base.FactorModel` ones (``rank``
            is also the size of the tag-item and user-item factors).
    """

    user_item: bool

    def __init__(self, user_item: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def build(self, n_users: int, n_items: int, n_tags: int) -> None:
        """The CP factors, the item bias (zeros), ``T'``, ``W`` (and ``U'``, ``W'``)."""
        super().build(n_users, n_items, n_tags)
        self.item_bias = nn.Parameter(torch.zeros(n_items))
        self.tag_item_tags = self._init_factor(n_tags)  # T'
        self.tag_item_items = self._init_factor(n_items)  # W
        if self.user_item:
            self.user_item_users = self._init_factor(n_users)  # U'
            self.user_item_items = self._init_factor(n_items)  # W'

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """Scores ``[B, n_items]``: CP, plus ``b_i + <T'_t, W_i>`` (``+ <U'_u, W'_i>``)."""
        device = self.item_factors.device
        users, tags = users.to(device), tags.to(device)
        scores = cp_scores(self.user_factors[users], self.tag_factors[tags], self.item_factors)
        scores = scores + self.item_bias + self.tag_item_tags[tags] @ self.tag_item_items.T
        if self.user_item:
            scores = scores + self.user_item_users[users] @ self.user_item_items.T
        return scores

    def profile_scores(self, users: Tensor, profile: TagProfile) -> Tensor:
        """``[B, n_items]`` ``sum_t P(t | u) s(u, i, t)``: each term by its profile mix.

        The CP and tag-item terms are linear in the tag's rows (their profile mixes); the item
        bias and the user-item term do not depend on the tag and count ``sum_t P(t | u)``
        times (1, or 0 for an empty profile).
        """
        users = users.to(self.item_factors.device)
        mass = profile_mass(profile, self.tag_factors)
        scores = (super().profile_scores(users, profile) + mass * self.item_bias
                  + profile_mix(profile, self.tag_item_tags) @ self.tag_item_items.T)
        if self.user_item:
            scores = scores + mass * (self.user_item_users[users] @ self.user_item_items.T)
        return scores

    def score_items(self, users: Tensor, tags: Tensor, items: Tensor) -> Tensor:
        """Scores ``[B, P]`` of the items ``[B, P]`` (the terms of :meth:`score`)."""
        scores = (super().score_items(users, tags, items) + self.item_bias[items]
                  + (self.tag_item_items[items] * self.tag_item_tags[tags][:, None, :]).sum(-1))
        if self.user_item:
            scores = scores + (self.user_item_items[items]
                               * self.user_item_users[users][:, None, :]).sum(-1)
        return scores

    def penalty(self, users: Tensor, tags: Tensor, items: Tensor, item_mask: Tensor) -> Tensor:
        """Do-Rank's penalty plus the new rows the set touches (module docstring)."""
        positive = item_mask.to(self.item_bias.dtype)
        extra = (self.tag_item_tags[tags].square().sum(-1)
                 + ((self.tag_item_items[items].square().sum(-1)
                     + self.item_bias[items].square()) * positive).sum(-1))
        if self.user_item:
            extra = extra + self.user_item_users[users].square().sum(-1) + (
                self.user_item_items[items].square().sum(-1) * positive).sum(-1)
        return super().penalty(users, tags, items, item_mask) + extra

    def lean_epochs(self, data: ItemRecData, device: torch.device) -> LeanEpochs:
        """``loop="lean"``: triples against sampled negatives.

        Do-Rank's :class:`~tagtorch.itemrec.dorank.FastLearning` scores CP only.

        Raises:
            ValueError: with ``negatives = 0``.
        """
        if not self.negatives:
            raise ValueError("Do-Rank+ with loop='lean' ranks against sampled negatives: needs "
                             "negatives > 0")
        return super().lean_epochs(data, device)

    def triple_terms(self, take: RowTake, users: Tensor, items: Tensor, tags: Tensor,
                     drawn: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Do-Rank's terms plus ``b + <T'_t, W>`` (``+ <U'_u, W'>``) and their rows' L2."""
        positive, against, penalty = super().triple_terms(take, users, items, tags, drawn)
        tag_rows = take(self.tag_item_tags, tags)
        item_rows, item_bias = take(self.tag_item_items, items), take(self.item_bias, items)
        positive = positive + item_bias + (tag_rows * item_rows).sum(-1)
        against = (against + take(self.item_bias, drawn)
                   + tag_rows @ take(self.tag_item_items, drawn).T)
        penalty = (penalty + tag_rows.square().sum(-1) + item_rows.square().sum(-1)
                   + item_bias.square())
        if self.user_item:
            user_rows, user_items = (take(self.user_item_users, users),
                                     take(self.user_item_items, items))
            positive = positive + (user_rows * user_items).sum(-1)
            against = against + user_rows @ take(self.user_item_items, drawn).T
            penalty = penalty + user_rows.square().sum(-1) + user_items.square().sum(-1)
        return positive, against, penalty
