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

import math
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
import torch
from torch import Tensor, nn

from tagtorch.itemrec.base import profile_mass, profile_mix
from tagtorch.itemrec.data import ItemRecData, TagProfile
from tagtorch.itemrec.dorank import DoRank, cp_scores
from tagtorch.itemrec.lean import LeanEpochs, RowTake

__all__ = ["DoRankPlus", "SampledDCG", "kernel_rule"]


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

        With plain SGD or AdaGrad as the ``optimizer`` setting (:func:`kernel_rule`), on the
        CPU and without the user-item term, the compiled per-triple kernel
        (:class:`SampledDCG`); else autograd steps of
        triples with shared draws (:class:`~tagtorch.itemrec.lean.AutogradTriples`). Do-Rank's
        :class:`~tagtorch.itemrec.dorank.FastLearning` scores CP only.

        Raises:
            ValueError: with ``negatives = 0``.
        """
        if not self.negatives:
            raise ValueError("Do-Rank+ with loop='lean' ranks against sampled negatives: needs "
                             "negatives > 0")
        rule = kernel_rule(self.init_args["optimizer"])
        if rule is not None and device.type == "cpu" and not self.user_item:
            return SampledDCG(self, data, *rule)
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


def kernel_rule(make: Callable[..., torch.optim.Optimizer] | None) -> tuple[float, bool] | None:
    """``(lr, adagrad)`` of an ``optimizer`` setting the compiled kernel runs, or None.

    Plain :class:`torch.optim.SGD` (no momentum or weight decay) or :class:`torch.optim.Adagrad`
    (no learning-rate decay, weight decay or initial accumulator, ``eps`` 1e-10: its update
    exactly, per triple); other settings (Adam, the default) train by autograd steps.

    Example:
        >>> import functools
        >>> kernel_rule(functools.partial(torch.optim.Adagrad, lr=0.1))
        (0.1, True)
        >>> kernel_rule(functools.partial(torch.optim.Adam, lr=0.1)) is None
        True
    """
    if make is None:
        return None
    built = make([nn.Parameter(torch.zeros(1))])
    settings = built.defaults
    if type(built) is torch.optim.SGD and not settings.get("momentum") \
            and not settings.get("weight_decay"):
        return float(settings["lr"]), False
    if type(built) is torch.optim.Adagrad and not settings.get("lr_decay") \
            and not settings.get("weight_decay") \
            and not settings.get("initial_accumulator_value") and settings["eps"] == 1e-10:
        return float(settings["lr"]), True
    return None


class SampledDCG:
    """Do-Rank+'s epochs under ``loop="lean"``, SGD or AdaGrad: a compiled per-triple kernel.

    For each triple ``(u, i, t)`` of the epoch's order, ``negatives`` items ``j`` are drawn
    (a seeded NumPy generator; probabilities ``q_j`` as :meth:`DoRank.draw_negatives`, from the
    training counts to the power ``negative_power``); a draw that ``u`` tagged in training
    weighs 0 (binary search in the user's sorted items), the others ``1 / (n q_j)``. One SGD
    step then lowers the triple's loss of :meth:`DoRank.triple_loss` with those draws,
    ``-1 / log2(2 + sum_j w_j sigmoid((s_j - s_i) / tau)) + lambda / 2 * |rows|^2`` (the rows of
    :meth:`DoRankPlus.triple_terms`' penalty), its gradient written out: every row the triple
    reads, the draws' item, bias and tag-item rows included; or, with ``adagrad``, one step of
    :class:`torch.optim.Adagrad` (per coordinate: ``G += g^2``, ``x -= lr g / (sqrt(G) +
    1e-10)``; a coordinate a triple does not touch has gradient 0 and is left as it is, so the
    per-triple updates are AdaGrad's exactly). The draws are per triple (the autograd loop
    shares a step's draws between its triples). Threads split the order and
    update the shared factors without locks (Hogwild, as PITF's :class:`~tagtorch.itemrec.
    pitf.LearnBPR`); ``numba.set_num_threads(1)`` makes a run reproducible.

    Args:
        model: the Do-Rank+ model (factors built, on the CPU, ``user_item=False``).
        data: the split.
        lr: the learning rate.
        adagrad: AdaGrad's update; False: plain SGD.
    """

    BLOCK = 1 << 20
    """Triples whose draws are made at once (``BLOCK x negatives`` indices in memory)."""

    def __init__(self, model: DoRankPlus, data: ItemRecData, lr: float,
                 adagrad: bool = False) -> None:
        self.model, self.lr, self.adagrad = model, lr, adagrad
        self.sums = [np.zeros(tuple(t.shape) if adagrad else (0,) * t.dim(), np.float32)
                     for t in self.tables()]
        self.train = np.ascontiguousarray(data.train, dtype=np.int64)
        self.units = len(self.train)
        counts = np.bincount(self.train[:, 1], minlength=data.n_items)
        weights = (counts + 1.0) ** model.negative_power
        probabilities = weights / weights.sum()
        self.cumulative = np.cumsum(probabilities)
        self.draw_weight = 1.0 / (model.negatives * probabilities)
        self.user_start = np.asarray(data.user_items.offsets, np.int64)
        self.user_items = np.asarray(data.user_items.values, np.int64)
        self.rng = np.random.default_rng(model.seed)

    def draw(self, n: int) -> np.ndarray:
        """``[n, negatives]`` items drawn with the probabilities ``q``."""
        shape = (n, self.model.negatives)
        if self.model.negative_power == 0:  # uniform: no search
            return self.rng.integers(0, len(self.cumulative), shape)
        drawn = np.searchsorted(self.cumulative, self.rng.random(shape))
        return np.minimum(drawn, len(self.cumulative) - 1)

    def tables(self) -> tuple[Tensor, ...]:
        """The factors the kernel updates: ``U, V, T, b, T', W``."""
        m = self.model
        return (m.user_factors, m.item_factors, m.tag_factors, m.item_bias, m.tag_item_tags,
                m.tag_item_items)

    def run(self, order: Tensor) -> float:
        """One epoch over ``train[order]``; the mean loss of its triples."""
        m = self.model
        rows = tuple(x.detach().numpy() for x in self.tables())  # views: updated in place
        indices = order.cpu().numpy()
        total = 0.0
        for start in range(0, len(indices), self.BLOCK):
            block = np.ascontiguousarray(indices[start:start + self.BLOCK])
            total += _learn_sampled_dcg(block, self.train, self.draw(len(block)),
                                        self.draw_weight, self.user_start, self.user_items,
                                        rows, tuple(self.sums), self.adagrad, self.lr,
                                        m.regularization, m.temperature,
                                        numba.get_num_threads())
        return total / max(len(indices), 1)


@numba.njit(nogil=True, parallel=True, cache=True)
def _learn_sampled_dcg(order: np.ndarray, train: np.ndarray, drawn: np.ndarray,
                       draw_weight: np.ndarray, user_start: np.ndarray, user_items: np.ndarray,
                       rows: tuple[np.ndarray, ...], sums: tuple[np.ndarray, ...], adagrad: bool,
                       lr: float, reg: float, tau: float,
                       n_chunks: int) -> float:  # pragma: no cover - compiled
    """SGD or AdaGrad on each triple of ``order`` against its draws (:class:`SampledDCG`).

    ``rows``: ``U, V, T, b, T', W``; ``sums``: AdaGrad's sums of squares of each (empty for
    SGD). Returns the loss sum.
    """
    n, draws, rank = len(order), drawn.shape[1], rows[0].shape[1]
    chunk = (n + n_chunks - 1) // n_chunks
    losses = np.zeros(n_chunks)
    for c in numba.prange(n_chunks):
        slope, grads = np.empty(draws), np.empty((3, rank))
        for k in range(c * chunk, min(n, (c + 1) * chunk)):
            u, i, t = train[order[k], 0], train[order[k], 1], train[order[k], 2]
            s_i, norms = _score(u, i, t, rows, True)
            ahead = 0.0
            for m in range(draws):
                j, slope[m] = drawn[k, m], 0.0
                at = user_start[u] + np.searchsorted(user_items[user_start[u]:user_start[u + 1]], j)
                if at < user_start[u + 1] and user_items[at] == j:
                    continue  # u tagged j: weight 0
                z = 1.0 / (1.0 + math.exp(-max(min((_score(u, j, t, rows, False)[0] - s_i) / tau,
                                                   80.0), -80.0)))
                ahead += draw_weight[j] * z
                slope[m] = draw_weight[j] * z * (1.0 - z) / tau  # d ahead / d s_j
            log_rank = math.log(2.0 + ahead)
            losses[c] += -math.log(2.0) / log_rank + 0.5 * reg * norms
            outer = math.log(2.0) / ((2.0 + ahead) * log_rank ** 2)  # d loss / d ahead
            grads[:] = 0.0
            for m in range(draws):  # the draws' rows; the query rows' gradients gathered
                if slope[m] != 0.0:
                    _step_draw(u, t, drawn[k, m], outer * slope[m], grads, rows, sums, adagrad,
                               lr)
            _step_triple(u, i, t, -outer * slope.sum(), grads, rows, sums, adagrad, lr, reg)
    return losses.sum()


@numba.njit(nogil=True, cache=True, fastmath=True)
def _score(u: int, i: int, t: int, rows: tuple[np.ndarray, ...],
           with_norms: bool) -> tuple[float, float]:  # pragma: no cover - compiled
    """``s(u, i, t)`` and (``with_norms``) the squared norms of the rows it reads."""
    users, items, tags, bias, tag_items, item_tags = rows
    score, norms = 0.0, 0.0
    for f in range(users.shape[1]):
        score += users[u, f] * tags[t, f] * items[i, f] + tag_items[t, f] * item_tags[i, f]
    if with_norms:
        for f in range(users.shape[1]):
            norms += (users[u, f] ** 2 + tags[t, f] ** 2 + items[i, f] ** 2
                      + tag_items[t, f] ** 2 + item_tags[i, f] ** 2)
    return score + bias[i], norms + bias[i] ** 2


@numba.njit(nogil=True, inline="always")
def _update(table: np.ndarray, sums: np.ndarray, row: int, f: int, grad: float, lr: float,
            adagrad: bool) -> None:  # pragma: no cover - compiled
    """``table[row, f]``'s SGD or AdaGrad step on ``grad``."""
    if adagrad:
        sums[row, f] += grad * grad
        table[row, f] -= lr * grad / (math.sqrt(sums[row, f]) + 1e-10)
    else:
        table[row, f] -= lr * grad


@numba.njit(nogil=True, inline="always")
def _update_bias(bias: np.ndarray, sums: np.ndarray, row: int, grad: float, lr: float,
                 adagrad: bool) -> None:  # pragma: no cover - compiled
    """``bias[row]``'s SGD or AdaGrad step on ``grad``."""
    if adagrad:
        sums[row] += grad * grad
        bias[row] -= lr * grad / (math.sqrt(sums[row]) + 1e-10)
    else:
        bias[row] -= lr * grad


@numba.njit(nogil=True, cache=True, fastmath=True)
def _step_draw(u: int, t: int, j: int, e_j: float, grads: np.ndarray,
               rows: tuple[np.ndarray, ...], sums: tuple[np.ndarray, ...], adagrad: bool,
               lr: float) -> None:  # pragma: no cover - compiled
    """A draw's step (``e_j = d loss / d s_j``).

    Adds its part of the gradients of ``U_u``, ``T_t`` and ``T'_t`` (from the rows before the
    step) to ``grads``.
    """
    users, items, tags, bias, tag_items, item_tags = rows
    for f in range(users.shape[1]):
        uf, tf, tpf, vj = users[u, f], tags[t, f], tag_items[t, f], items[j, f]
        grads[0, f] += e_j * vj * tf
        grads[1, f] += e_j * vj * uf
        grads[2, f] += e_j * item_tags[j, f]
        _update(items, sums[1], j, f, e_j * uf * tf, lr, adagrad)
        _update(item_tags, sums[5], j, f, e_j * tpf, lr, adagrad)
    _update_bias(bias, sums[3], j, e_j, lr, adagrad)


@numba.njit(nogil=True, cache=True, fastmath=True)
def _step_triple(u: int, i: int, t: int, e_i: float, grads: np.ndarray,
                 rows: tuple[np.ndarray, ...], sums: tuple[np.ndarray, ...], adagrad: bool,
                 lr: float, reg: float) -> None:  # pragma: no cover - compiled
    """The positive's and the query's step (``e_i = d loss / d s_i``).

    With the L2 terms and the draws' part of the query's gradients (``grads``).
    """
    users, items, tags, bias, tag_items, item_tags = rows
    for f in range(users.shape[1]):
        uf, tf, vi = users[u, f], tags[t, f], items[i, f]
        tpf, wi = tag_items[t, f], item_tags[i, f]
        _update(users, sums[0], u, f, e_i * vi * tf + grads[0, f] + reg * uf, lr, adagrad)
        _update(tags, sums[2], t, f, e_i * vi * uf + grads[1, f] + reg * tf, lr, adagrad)
        _update(tag_items, sums[4], t, f, e_i * wi + grads[2, f] + reg * tpf, lr, adagrad)
        _update(items, sums[1], i, f, e_i * uf * tf + reg * vi, lr, adagrad)
        _update(item_tags, sums[5], i, f, e_i * tpf + reg * wi, lr, adagrad)
    _update_bias(bias, sums[3], i, e_i + reg * bias[i], lr, adagrad)
