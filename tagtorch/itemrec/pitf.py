"""PITF adapted to item recommendation, trained with BPR (Rendle and Schmidt-Thieme, WSDM 2010).

PITF (pairwise interaction tensor factorization) models the user x item x tag tensor by the
pairwise interactions of its modes. For tag recommendation the paper scores
``<U_u, T^U_t> + <I_i, T^I_t>``; for ranking items given ``(u, t)``, as the Do-Rank paper adapts
it, the item is the target mode: ``s(u, i, t) = <U_u, I^U_i> + <T_t, I^T_i>`` (the user-tag term
is constant for a query and drops out). Training is BPR (Rendle et al., UAI 2009): for each
observed ``(u, i, t)``, an item ``j`` that ``u`` did not tag with ``t`` is drawn uniformly, and
``-ln sigmoid(s(u, i, t) - s(u, j, t))`` plus an L2 penalty ``lambda`` on the rows involved is
minimized (per UTS set with ``loop="lightning"``, per shuffled triple with ``loop="lean"``:
:mod:`tagtorch.itemrec.lean`; the draw is uniform over all items and skipped when it falls
inside the triple's ``(u, t)`` set, as in the set form). Defaults from the Do-Rank paper's
tuned PITF: learning rate 0.01, ``r = 128``; ``lambda = 5e-5`` (its exponent was lost in the
extraction; PITF's own paper uses 5e-5).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numba
import numpy as np
import torch
from torch import Tensor

from tagtorch.itemrec.base import FactorModel, in_sets, profile_mass, profile_mix
from tagtorch.itemrec.data import ItemRecData, TagProfile
from tagtorch.itemrec.lean import LeanEpochs, RowOptimizer

__all__ = ["PITF", "LearnBPR"]


class PITF(FactorModel):
    """PITF for items (see the module docstring).

    ``loop="lean"`` (:mod:`tagtorch.itemrec.lean`) trains by :class:`LearnBPR`, the
    per-triple SGD of the PITF and BPR papers, compiled (the ``optimizer`` setting must then be
    SGD; default lr 0.01).

    Args:
        **kwargs: :class:`~tagtorch.itemrec.base.FactorModel` settings (defaults here:
            ``rank = 128``, ``regularization = 5e-5``).
    """

    trains_lean = True

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
        return self._bpr_loss(
            self.user_factors[users][:, None], self.tag_factors[tags][:, None],
            (self.item_user_factors[items], self.item_tag_factors[items]),
            (self.item_user_factors[drawn], self.item_tag_factors[drawn]), valid)

    def lean_epochs(self, data: ItemRecData, device: torch.device) -> LeanEpochs:
        """``loop="lean"``: LearnBPR's per-triple SGD in a compiled kernel (:class:`LearnBPR`).

        Raises:
            ValueError: for an ``optimizer`` setting other than plain SGD, or a CUDA device.
        """
        if device.type != "cpu":
            raise ValueError("PITF's loop='lean' runs on the CPU (a compiled kernel)")
        optimizer = RowOptimizer.from_setting(
            self.init_args["optimizer"] or functools.partial(torch.optim.SGD, lr=0.01), [])
        if optimizer.adam:
            raise ValueError("PITF with loop='lean' learns by LearnBPR's per-triple SGD: set "
                             "its optimizer to torch.optim.SGD")
        return LearnBPR(self, data, optimizer.lr)

    def _bpr_loss(self, user: Tensor, tag: Tensor, positive: tuple[Tensor, Tensor],
                  drawn: tuple[Tensor, Tensor], valid: Tensor) -> Tensor:
        """Mean over the valid pairs of ``-ln sigmoid(s_i - s_j)`` plus the rows' L2 penalty.

        Args:
            user: user rows, broadcastable to the item rows (``[B, 1, r]`` for sets).
            tag: tag rows, the same.
            positive: the positives' ``(I^U, I^T)`` rows.
            drawn: the drawn items' ``(I^U, I^T)`` rows.
            valid: bool, the pairs that count.
        """
        diff = ((user * (positive[0] - drawn[0])).sum(-1)
                + (tag * (positive[1] - drawn[1])).sum(-1))
        bpr = torch.nn.functional.softplus(-diff)  # -ln sigmoid(diff)
        penalty = user.square().sum(-1) + tag.square().sum(-1)
        for rows in (*positive, *drawn):
            penalty = penalty + rows.square().sum(-1)
        per_pair = bpr + self.regularization * penalty
        return torch.where(valid, per_pair, 0.0).sum() / valid.sum().clamp_min(1)


class LearnBPR:
    """PITF's epochs under ``loop="lean"``: LearnBPR (Rendle et al., UAI 2009) compiled.

    For each triple ``(u, i, t)`` of the epoch's order, an item ``j`` is drawn uniformly (a
    seeded NumPy generator, one array per epoch); a draw inside the ``(u, t)`` set is skipped
    (binary search in the set's sorted items), else one SGD step on the pair's loss of
    :meth:`PITF._bpr_loss` updates the six rows it reads. With more than one Numba thread the
    epoch's triples are split between the threads, which update the shared factors without
    locks (Hogwild, as implicit's BPR): then two runs differ in the last bits;
    ``numba.set_num_threads(1)`` makes a run reproducible.

    Args:
        model: the PITF model (factors built, on the CPU).
        data: the split.
        lr: the SGD learning rate.
    """

    def __init__(self, model: PITF, data: ItemRecData, lr: float) -> None:
        self.model, self.lr, self.n_items = model, lr, data.n_items
        self.train = np.ascontiguousarray(data.train, dtype=np.int64)
        self.units = len(self.train)
        sets = data.train_sets
        keys = sets.users * np.int64(data.n_tags) + sets.tags
        self.set_of = np.searchsorted(keys, self.train[:, 0] * data.n_tags + self.train[:, 2])
        items = sets.items
        self.set_items = np.ascontiguousarray(
            items.values[np.lexsort((items.values, items.row_ids))], dtype=np.int64)
        self.set_start = items.offsets.astype(np.int64)
        self.rng = np.random.default_rng(model.seed)

    def run(self, order: Tensor) -> float:
        """One epoch over ``train[order]``; the mean loss of the pairs it learned from."""
        m = self.model
        drawn = self.rng.integers(0, self.n_items, len(order))
        user, tag, item_user, item_tag = (  # numpy views: the kernel updates the factors
            p.detach().numpy() for p in (m.user_factors, m.tag_factors, m.item_user_factors,
                                         m.item_tag_factors))
        total, count = _learn_bpr(order.cpu().numpy(), self.train, drawn, self.set_of,
                                  self.set_start, self.set_items, user, tag, item_user,
                                  item_tag, self.lr, m.regularization, numba.get_num_threads())
        return total / max(count, 1)


@numba.njit(nogil=True, parallel=True, cache=True)
def _learn_bpr(order: np.ndarray, train: np.ndarray, drawn: np.ndarray, set_of: np.ndarray,
               set_start: np.ndarray, set_items: np.ndarray, user_f: np.ndarray,
               tag_f: np.ndarray, item_user_f: np.ndarray, item_tag_f: np.ndarray, lr: float,
               reg: float, n_chunks: int) -> tuple[float, int]:  # pragma: no cover - compiled
    """SGD on each valid ``(triple, draw)`` pair (:class:`LearnBPR`); ``(loss sum, pairs)``.

    The triples are split into ``n_chunks`` runs, one per thread.
    """
    n, rank = len(order), user_f.shape[1]
    chunk = (n + n_chunks - 1) // n_chunks
    sums, counts = np.zeros(n_chunks), np.zeros(n_chunks, np.int64)
    for c in numba.prange(n_chunks):
        for k in range(c * chunk, min(n, (c + 1) * chunk)):
            row, j = order[k], drawn[k]
            u, i, t = train[row, 0], train[row, 1], train[row, 2]
            lo, hi = set_start[set_of[row]], set_start[set_of[row] + 1]
            at = lo + np.searchsorted(set_items[lo:hi], j)
            if at < hi and set_items[at] == j:
                continue  # j is in the (u, t) set: no pair
            x, norms = 0.0, 0.0
            for f in range(rank):
                x += (user_f[u, f] * (item_user_f[i, f] - item_user_f[j, f])
                      + tag_f[t, f] * (item_tag_f[i, f] - item_tag_f[j, f]))
                norms += (user_f[u, f] ** 2 + tag_f[t, f] ** 2 + item_user_f[i, f] ** 2
                          + item_user_f[j, f] ** 2 + item_tag_f[i, f] ** 2
                          + item_tag_f[j, f] ** 2)
            sums[c] += (math.log1p(math.exp(-x)) if x > -30.0 else -x) + reg * norms
            counts[c] += 1
            z = 1.0 / (1.0 + math.exp(min(x, 80.0)))  # sigmoid(-x): -d(-ln sigmoid x)/dx
            decay = 2.0 * reg
            for f in range(rank):
                uf, tf = user_f[u, f], tag_f[t, f]
                iu, ju, it, jt = (item_user_f[i, f], item_user_f[j, f], item_tag_f[i, f],
                                  item_tag_f[j, f])
                user_f[u, f] = uf + lr * (z * (iu - ju) - decay * uf)
                tag_f[t, f] = tf + lr * (z * (it - jt) - decay * tf)
                item_user_f[i, f] = iu + lr * (z * uf - decay * iu)
                item_user_f[j, f] = ju + lr * (-z * uf - decay * ju)
                item_tag_f[i, f] = it + lr * (z * tf - decay * it)
                item_tag_f[j, f] = jt + lr * (-z * tf - decay * jt)
    return sums.sum(), counts.sum()
