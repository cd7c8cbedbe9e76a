"""Do-Rank: CP tensor factorization trained on a smoothed DCG, for tag-based item recommendation.

The Do-Rank paper (DCG optimization for tag-based item recommendation with CP tensor
factorization; ``../shared/papers/003_*.txt``). Its extracted text lost most symbols; this
module implements the following reading, which the text supports:

- **Model** (Section 2.1): CP factorization of the user x item x tag tensor, factor matrices
  ``U [users, r]``, ``V [items, r]``, ``T [tags, r]``; the preference score is
  ``s(u, i, t) = sum_f U[u, f] V[i, f] T[t, f]``. Scores are gathered from factor rows
  (``(U[u] * T[t]) @ V.T`` for all items of a query), never from a dense tensor.
- **Relevance** (Section 2.3, User-Tag-Set scheme, UTS): for an observed ``(u, t)``, items
  ``u`` tagged with ``t`` are positive (``y = 1``), items ``u`` tagged with other tags only are
  neutral (``y = 0``), items ``u`` never tagged are negative (``y = -1``); gains are
  ``2^y - 1`` (1, 0 and -1/2).
- **Smoothed DCG** (Section 2.2, Eq. 4-6): the rank of item ``i`` is approximated by
  ``R_i = 1 + sum_{j != i} sigmoid(s_j - s_i)``, and a set's DCG by
  ``sum_i (2^{y_i} - 1) / log2(1 + R_i)``; the objective is the sum over the sets minus an L2
  penalty ``lambda / 2 (|U_u|^2 + |T_t|^2 + |V_i|^2)`` on the factor rows a set touches, and it is
  maximized by gradient steps (here: the loss ``-objective`` is minimized).
- **Fast learning** (Section 2.3, Eq. 10-11): per set, only the differences between its
  positive items and its negative items enter: ``R_i = 1 + sum_{j negative} sigmoid(s_j -
  s_i)`` for each positive ``i``, and the set's smoothed DCG is ``sum_{i positive} 1 / log2(1
  + R_i)``. The cost per set is ``|positives| x |items|``, so an epoch grows with the observed
  entries; the **regular** approach ranks every item against every other item,
  ``|items|^2`` per set (:func:`smoothed_dcg_regular`, for the benchmark and
  ``fast=False``).
- **Sampled negatives** (ours, ``negatives = n > 0``; the paper ranks against all negatives):
  each set draws ``n`` items ``j`` with probabilities ``q_j`` (uniform, or by popularity with
  ``negative_power``) and estimates ``R_i = 1 + sum_{draws} [j negative] sigmoid(s_j - s_i) /
  (n q_j)``, an unbiased estimate of the sum over all negatives; the smoothed DCG of that
  estimate is slightly biased (``1 / log2`` is convex). It makes an epoch's cost independent of
  the number of items, for catalogues far larger than HetRec's. With ``loop="lean"``
  (:mod:`tagtorch.itemrec.lean`) the ``n`` draws are shared by all the triples of a step (their
  scores are one ``[B, r] x [r, n]`` product); each triple's estimate stays unbiased, the
  triples of a step are no longer independent.
- **Early stopping** (Section 3.2): training stops when the validation DCG@10 stops rising
  (the paper sees the peak within about 15 iterations).

Defaults: learning rate 0.01 (the paper), ``r = 64`` and ``lambda = 1e-4`` (the paper's values
of these were lost in the extraction); Adam replaces plain gradient ascent (configurable:
``optimizer=sgd``). With Adam, lr 0.01 peaks after 1-4 epochs and then overfits; the
experiments use settings tuned on validation DCG@10: ``r = 128``, ``lambda = 3e-4``, 32 sets per
step, lr 0.003 for (user, tag) queries (``dorank_*_usertag``), and ``r = 256``, ``lambda = 1e-4``,
lr 0.001 for per-user queries (``dorank_lastfm``, ``dorank_movielens``), where the validation
DCG@10 stays flat for 5-8 epochs before it rises. A larger ``lambda`` (1e-3 on
LastFM) pulls the factors into the trilinear model's saddle at zero, where every score is equal
and learning stops.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tagtorch.itemrec.base import FactorModel, profile_mix
from tagtorch.itemrec.data import ItemRecData, TagProfile
from tagtorch.itemrec.lean import LeanEpochs, RowOptimizer, RowTake

__all__ = ["CPModel", "DoRank", "FastLearning", "cp_scores", "smoothed_dcg_fast",
           "smoothed_dcg_regular"]

#: fast learning's ``fast_dtype`` values and their torch types
FAST_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def cp_scores(user_rows: Tensor, tag_rows: Tensor, item_factors: Tensor) -> Tensor:
    """CP scores ``[B, I]``: ``s[b, i] = sum_f user_rows[b, f] item_factors[i, f] tag_rows[b, f]``.

    Args:
        user_rows: ``[B, r]`` rows of ``U`` of the queries' users.
        tag_rows: ``[B, r]`` rows of ``T`` of the queries' tags.
        item_factors: ``[I, r]`` the item factor matrix ``V``.

    Example:
        >>> [round(v, 4) for v in cp_scores(torch.ones(1, 2), torch.tensor([[1.0, 2.0]]),
        ...                                 torch.eye(2))[0].tolist()]
        [1.0, 2.0]
    """
    return (user_rows * tag_rows) @ item_factors.T


def smoothed_dcg_fast(positive_scores: Tensor, positive_mask: Tensor, item_scores: Tensor,
                      negative_mask: Tensor, temperature: float = 1.0) -> Tensor:
    """Fast-learning smoothed DCG ``[B]`` of UTS sets: positives ranked against negatives.

    ``sum_{i positive} 1 / log2(1 + R_i)`` with ``R_i = 1 + sum_{j negative}
    sigmoid(s_j - s_i)``. The real positives of the batch are flattened into one
    ``[N_pos, I]`` block, so padding costs nothing and the work is ``N_pos x I``: linear in the
    observed entries, whatever the spread of the set sizes. A float ``negative_mask`` weighs
    each item's term (the importance weights of sampled negatives, :meth:`DoRank.draw_negatives`).

    Args:
        positive_scores: ``[B, P]`` scores of each set's positive items (padded).
        positive_mask: ``[B, P]`` bool, True at real positives.
        item_scores: ``[B, I]`` scores of the items for the set's ``(u, t)``: all items, or
            ``I`` drawn ones.
        negative_mask: ``[B, I]`` bool, True at the set's negatives; or float, each item's
            weight (0 for non-negatives).
        temperature: ``tau`` of the smoothed rank, ``sigmoid((s_j - s_i) / tau)`` (1: the
            paper's; smaller is closer to the true rank, with steeper gradients).

    Example:
        >>> dcg = smoothed_dcg_fast(torch.tensor([[0.0]]), torch.tensor([[True]]),
        ...                         torch.tensor([[0.0, 0.0]]), torch.tensor([[False, True]]))
        >>> [round(v, 4) for v in dcg.tolist()]
        [0.7565]
    """
    sets, slots = positive_mask.nonzero(as_tuple=True)  # the real positives, no padding
    diff = item_scores[sets] - positive_scores[sets, slots][:, None]  # [N_pos, I]: s_j - s_i
    diff = diff / temperature
    if negative_mask.dtype == torch.bool:
        ahead = torch.where(negative_mask[sets], torch.sigmoid(diff), 0.0).sum(-1)
    else:
        ahead = (torch.sigmoid(diff) * negative_mask[sets]).sum(-1)
    gain = 1.0 / torch.log2(2.0 + ahead)  # log2(1 + R_i), R_i = 1 + ahead
    return item_scores.new_zeros(len(item_scores)).index_add(0, sets, gain)


def smoothed_dcg_regular(item_scores: Tensor, gains: Tensor) -> Tensor:
    """Smoothed DCG ``[B]`` over all items: every item ranked against every other item.

    ``sum_i g_i / log2(1 + R_i)`` with ``R_i = 1 + sum_{j != i} sigmoid(s_j - s_i)``; the
    ``[B, I, I]`` differences make it quadratic in the items.

    Args:
        item_scores: ``[B, I]`` scores of all items.
        gains: ``[B, I]`` the items' UTS gains ``2^y - 1`` (1, 0, -1/2).

    Example:
        >>> dcg = smoothed_dcg_regular(torch.tensor([[0.0, 0.0]]), torch.tensor([[1.0, -0.5]]))
        >>> [round(v, 4) for v in dcg.tolist()]
        [0.3782]
    """
    diff = item_scores[:, None, :] - item_scores[:, :, None]  # [B, i, j]: s_j - s_i
    ahead = torch.sigmoid(diff).sum(-1) - 0.5  # the j = i term is sigmoid(0)
    return (gains / torch.log2(2.0 + ahead)).sum(-1)


class CPModel(FactorModel):
    """CP factors ``U [users, r]``, ``V [items, r]``, ``T [tags, r]`` and their scores.

    The base of Do-Rank and of the probabilistic CP baseline; subclasses define the objective
    (:meth:`~tagtorch.itemrec.base.FactorModel.set_loss`).
    """

    def build(self, n_users: int, n_items: int, n_tags: int) -> None:
        """``U``, ``V``, ``T``, normal with ``init_std``."""
        self.user_factors = self._init_factor(n_users)
        self.item_factors = self._init_factor(n_items)
        self.tag_factors = self._init_factor(n_tags)

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """CP scores ``[B, n_items]``."""
        device = self.item_factors.device
        return cp_scores(self.user_factors[users.to(device)], self.tag_factors[tags.to(device)],
                         self.item_factors)

    def profile_scores(self, users: Tensor, profile: TagProfile) -> Tensor:
        """``[B, n_items]`` ``sum_t P(t | u) s(u, i, t)`` in one product per block of users.

        A CP score is linear in the tag's row, so the profile's mix of tag rows gives the
        profile aggregation: ``(U_u * sum_t P(t | u) T_t) @ V.T``, instead of one
        ``[n_items]`` row of scores per (user, tag) pair (:func:`~tagtorch.itemrec.base.
        user_scores`).
        """
        device = self.item_factors.device
        return cp_scores(self.user_factors[users.to(device)],
                         profile_mix(profile, self.tag_factors), self.item_factors)

    def score_items(self, users: Tensor, tags: Tensor, items: Tensor) -> Tensor:
        """CP scores ``[B, P]`` of the items ``[B, P]``."""
        query = self.user_factors[users] * self.tag_factors[tags]  # [B, r]
        return (self.item_factors[items] * query[:, None, :]).sum(-1)


class DoRank(CPModel):
    """Do-Rank (see the module docstring): CP factors trained on a smoothed DCG.

    Args:
        fast: fast learning (positives against negatives); False: the regular approach over
            all items (quadratic in the items; for comparison).
        negatives: 0 (the paper): fast learning ranks each positive against all the set's
            negatives; ``n > 0`` (ours): against ``n`` items drawn per set, an unbiased estimate
            of ``R_i - 1`` (module docstring), so a step costs ``B x (P + n) x r`` whatever the
            number of items.
        negative_power: draws item ``j`` with probability proportional to ``(1 + c_j)^power``
            (``c_j``: its training triples): 0 uniform, 1 by popularity.
        temperature: ``tau`` of fast learning's smoothed rank (:func:`smoothed_dcg_fast`; ours,
            the paper's is 1).
        fast_dtype: ``"float32"`` or ``"bfloat16"`` (ours): the type of fast learning's
            ``sets x items`` scores, its gradient blocks and its three matrix products under
            ``loop="lean"`` (:class:`FastLearning`); sums, the DCG and the factors stay
            float32. bfloat16 halves the memory those passes move and runs the products on
            the CPU's bf16 units (about 1.6x an epoch at 200,000 items on AVX-512 BF16;
            ``docs/library_speed.md``), at 8 bits of mantissa in the scores.
        **kwargs: :class:`~tagtorch.itemrec.base.FactorModel` settings (``rank``,
            ``regularization``, ``optimizer``, ``trainer``, ``batch_size``, ``patience``,
            ``checkpoint_dir``, ...).
    """

    trains_lean = True

    fast: bool
    negatives: int
    negative_power: float
    temperature: float
    fast_dtype: str

    def __init__(self, fast: bool = True, negatives: int = 0, negative_power: float = 0.0,
                 temperature: float = 1.0, fast_dtype: str = "float32", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if fast_dtype not in FAST_DTYPES:
            raise ValueError(f"fast_dtype must be one of {sorted(FAST_DTYPES)}, got "
                             f"{fast_dtype!r}")
        if fast_dtype != "float32" and (self.loop != "lean" or negatives):
            raise ValueError("fast_dtype applies to fast learning's lean loop: needs "
                             "loop='lean' and negatives=0")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if temperature != 1.0 and not fast:
            raise ValueError("temperature applies to fast learning: needs fast=True")
        if negatives < 0:
            raise ValueError(f"negatives must be >= 0, got {negatives}")
        if negatives and not fast:
            raise ValueError("negatives > 0 samples fast learning's negatives: needs fast=True")
        if self.loop == "lean" and not fast:
            raise ValueError("loop='lean' trains by fast learning or sampled negatives: needs "
                             "fast=True")
        self._draw_probabilities: Tensor | None = None

    def on_fit_start(self) -> None:
        """The distribution sampled negatives are drawn from (training item counts)."""
        if self.negatives and self.data is not None:
            counts = np.bincount(self.data.train[:, 1], minlength=self.data.n_items)
            weights = torch.from_numpy(counts + 1.0).pow(self.negative_power)
            self._draw_probabilities = (weights / weights.sum()).float().to(self.device)

    def draw_negatives(self, users: Tensor, shared: bool = False) -> tuple[Tensor, Tensor]:
        """``negatives`` drawn items and their weights ``[B, n]`` (0 at non-negatives).

        Item ``j`` drawn with probability ``q_j`` weighs ``1 / (n q_j)``, so that the weighted
        sum over the draws is an unbiased estimate of the sum over all the set's negatives.
        ``shared=False``: ``n`` draws per set, ``[B, n]``; True: ``n`` draws ``[n]`` (sorted)
        for all the sets of the step (the lean loop, :mod:`tagtorch.itemrec.lean`).
        """
        probabilities = self._draw_probabilities
        if probabilities is None or self.data is None:
            raise RuntimeError("sampled negatives are drawn during fit only")
        n = self.negatives
        drawn = torch.multinomial(probabilities, n if shared else len(users) * n,
                                  replacement=True)
        drawn = drawn.sort().values if shared else drawn.view(len(users), n)
        each = drawn.expand(len(users), n) if shared else drawn
        weights = 1.0 / (n * probabilities[each])
        return drawn, torch.where(self.data.tagged(users, each), 0.0, weights)

    def lean_epochs(self, data: ItemRecData, device: torch.device) -> LeanEpochs:
        """``loop="lean"``: autograd steps of triples, or the paper's fast learning.

        With sampled negatives, :class:`~tagtorch.itemrec.lean.AutogradTriples`; with
        ``negatives = 0``, :class:`FastLearning` (its gradient written out).
        """
        if self.negatives:
            return super().lean_epochs(data, device)
        tables = [self.user_factors, self.item_factors, self.tag_factors]
        return FastLearning(self, data, RowOptimizer.from_setting(self.init_args["optimizer"],
                                                                  tables))

    def triple_loss(self, take: RowTake, users: Tensor, items: Tensor, tags: Tensor) -> Tensor:
        """Minus the mean smoothed DCG of the triples against shared draws, plus L2.

        Each triple ``(u, i, t)`` is one positive of its set: ``R_i`` is estimated over the
        step's shared draws (:meth:`draw_negatives`), and the penalty counts the rows it touches.
        """
        drawn, weights = self.draw_negatives(users, shared=True)
        positive, against, penalty = self.triple_terms(take, users, items, tags, drawn)
        dcg = smoothed_dcg_fast(positive[:, None], torch.ones_like(positive[:, None],
                                                                   dtype=torch.bool),
                                against, weights, self.temperature)
        return (-dcg + 0.5 * self.regularization * penalty).mean()

    def triple_terms(self, take: RowTake, users: Tensor, items: Tensor, tags: Tensor,
                     drawn: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(s(u, i, t) [B], s(u, j, t) [B, n] of the draws, L2 of the rows [B])``."""
        user, tag = take(self.user_factors, users), take(self.tag_factors, tags)
        item, others = take(self.item_factors, items), take(self.item_factors, drawn)
        query = user * tag
        penalty = user.square().sum(-1) + tag.square().sum(-1) + item.square().sum(-1)
        return (query * item).sum(-1), query @ others.T, penalty

    def set_loss(self, users: Tensor, tags: Tensor, items: Tensor, item_mask: Tensor) -> Tensor:
        """Minus the mean smoothed DCG of the sets, plus the L2 penalty of their rows."""
        if self.negatives:
            drawn, weights = self.draw_negatives(users)
            dcg = smoothed_dcg_fast(self.score_items(users, tags, items), item_mask,
                                    self.score_items(users, tags, drawn), weights,
                                    self.temperature)
        else:
            scores = self.score(users, tags)  # [B, I]
            negatives = self.negative_mask(users)
            if self.fast:
                dcg = smoothed_dcg_fast(scores.gather(1, items), item_mask, scores, negatives,
                                        self.temperature)
            else:
                gains = torch.where(negatives, -0.5, 0.0)
                gains = gains.scatter(1, items,
                                      torch.where(item_mask, 1.0, gains.gather(1, items)))
                dcg = smoothed_dcg_regular(scores, gains)
        penalty = self.penalty(users, tags, items, item_mask)
        return (-dcg + 0.5 * self.regularization * penalty).mean()

    def penalty(self, users: Tensor, tags: Tensor, items: Tensor, item_mask: Tensor) -> Tensor:
        """``[B]`` squared norms of the factor rows a set touches.

        ``|U_u|^2 + |T_t|^2`` plus ``|V_i|^2`` summed over the set's positives.
        """
        item_rows = self.item_factors[items]  # [B, P, r]
        return (self.user_factors[users].square().sum(-1) + self.tag_factors[tags].square().sum(-1)
                + torch.where(item_mask, item_rows.square().sum(-1), 0.0).sum(-1))


class FastLearning:
    """Do-Rank's fast learning (every negative, as published) under ``loop="lean"``.

    The loss of :meth:`DoRank.set_loss` with ``fast=True, negatives=0`` (the mean over a step's
    UTS sets of minus the smoothed DCG plus half the L2 penalty), its gradient written out
    instead of taped by autograd: per step, the scores ``S = (U_u * T_t) V^T`` of the sets'
    queries against all items (one matrix product), the items each set's user tagged set to
    ``-inf`` (so that they weigh 0: they are no negatives), then, a block of positives ``i`` at a
    time, ``sigma_ij = sigmoid((s_j - s_i) / tau)``, ``R_i = 1 + sum_j sigma_ij`` and the
    gradient ``dL/ds_j = c_i sigma_ij (1 - sigma_ij) / tau`` with
    ``c_i = 1 / (B ln 2 (1 + R_i) log2(1 + R_i)^2)``, ``dL/ds_i = -sum_j dL/ds_j``; two more
    matrix products give the gradients of the queries and of ``V``. A step is ``batch_size``
    sets (the model's setting, as in the Lightning loop); it holds their ``sets x items``
    scores and a ``block x items`` one (``budget`` values), never ``positives x items`` for the
    whole step. Updates: :class:`~tagtorch.itemrec.lean.RowOptimizer` (every row of
    ``V``; the step's rows of ``U`` and ``T``). With the model's ``fast_dtype="bfloat16"``
    (ours) the scores, the blocks, ``dL/dS`` and the three products are bfloat16; the sums over
    items (``R_i``, ``dL/ds_i``), the DCG and the gradients of the factors are float32.

    Args:
        model: the Do-Rank model (factors built).
        data: the split.
        optimizer: the row-wise optimizer of ``U``, ``V`` and ``T``.
        budget: values of a block of positives x items.
    """

    def __init__(self, model: DoRank, data: ItemRecData, optimizer: RowOptimizer,
                 budget: int = 1 << 21) -> None:
        self.model, self.data, self.optimizer = model, data, optimizer
        self.units = len(data.train_sets)
        self.sets_per_step = model.batch_size
        self.block = max(1, budget // max(data.n_items, 1))  # positives per block
        self.dtype = FAST_DTYPES[model.fast_dtype]
        self._buffers: dict[str, Tensor] = {}

    def _buffer(self, name: str, rows: int) -> Tensor:
        """A ``[rows, n_items]`` ``fast_dtype`` buffer kept between steps (no fresh pages)."""
        kept = self._buffers.get(name)
        if kept is None or len(kept) < rows:
            items = self.model.item_factors
            kept = self._buffers[name] = items.new_empty(rows, len(items), dtype=self.dtype)
        return kept[:rows]

    def run(self, order: Tensor) -> float:
        """One epoch over the UTS sets in ``order``; the mean loss of its steps' sets."""
        total, order_np = 0.0, order.cpu().numpy()
        for start in range(0, len(order_np), self.sets_per_step):
            rows = order_np[start : start + self.sets_per_step]
            loss, grads = self.gradients(rows)
            users, tags, d_users, d_items, d_tags = grads
            m = self.model
            self.optimizer.update(m.user_factors, users, d_users)
            self.optimizer.update(m.tag_factors, tags, d_tags)
            self.optimizer.update(m.item_factors, None, d_items)
            total += loss * len(rows)
        return total / max(len(order_np), 1)

    @torch.no_grad()
    def gradients(self, rows: np.ndarray) -> tuple[float, tuple[Tensor, ...]]:
        """The loss of the sets ``rows`` and ``(users, tags, dU rows, dV, dT rows)``."""
        m, sets = self.model, self.data.train_sets
        device = m.item_factors.device
        users = torch.from_numpy(sets.users[rows]).to(device)
        tags = torch.from_numpy(sets.tags[rows]).to(device)
        user_rows, tag_rows, items = m.user_factors[users], m.tag_factors[tags], m.item_factors
        query = user_rows * tag_rows
        query_low, items_low = query.to(self.dtype), items.to(self.dtype)
        scores = torch.mm(query_low, items_low.T, out=self._buffer("scores", len(rows)))
        positives = sets.items.take(rows)
        pos_sets = torch.from_numpy(positives.row_ids).to(device)
        pos_items = torch.from_numpy(np.asarray(positives.values, np.int64)).to(device)
        pos_scores = scores[pos_sets, pos_items]
        known = self.data.user_items.take(sets.users[rows])
        scores[torch.from_numpy(known.row_ids).to(device),
               torch.from_numpy(np.asarray(known.values, np.int64)).to(device)] = -torch.inf
        d_scores, dcg = self._score_gradients(scores, pos_sets, pos_items, pos_scores)
        reg, b = m.regularization, len(rows)
        d_query = (d_scores @ items_low).float()
        d_items = (d_scores.T @ query_low).float()
        d_items.index_add_(0, pos_items, items[pos_items], alpha=reg / b)
        penalty = (user_rows.square().sum() + tag_rows.square().sum()
                   + items[pos_items].square().sum())
        loss = (-dcg + 0.5 * reg * float(penalty)) / b
        return loss, (users, tags, d_query * tag_rows + reg / b * user_rows, d_items,
                      d_query * user_rows + reg / b * tag_rows)

    def _score_gradients(self, scores: Tensor, pos_sets: Tensor, pos_items: Tensor,
                         pos_scores: Tensor) -> tuple[Tensor, float]:
        """``dL/dS [B, I]`` (``S`` with its known items at ``-inf``) and the summed DCG.

        A block of positives at a time, in two buffers allocated once (a block small enough to
        stay in the CPU's cache between its passes).
        """
        tau, b = self.model.temperature, len(scores)
        d_scores = self._buffer("d_scores", b).zero_()
        rows = min(self.block, len(pos_sets))
        sigma, slope = self._buffer("sigma", rows), self._buffer("slope", rows)
        dcg = 0.0
        for start in range(0, len(pos_sets), rows):
            sets = pos_sets[start : start + rows]
            n = len(sets)
            block, block_slope = sigma[:n], slope[:n]
            torch.index_select(scores, 0, sets, out=block)
            block.sub_(pos_scores[start : start + n, None])
            if tau != 1.0:
                block.div_(tau)
            torch.sigmoid(block, out=block)
            ahead = block.sum(1, dtype=torch.float32)  # R_i - 1
            log_rank = torch.log2(2.0 + ahead)
            dcg += float((1.0 / log_rank).sum())
            c = 1.0 / (b * tau * math.log(2.0) * (2.0 + ahead) * log_rank.square())
            # dL/ds_j = c sigma (1 - sigma), in one pass
            torch.ops.aten.sigmoid_backward.grad_input(c.to(self.dtype)[:, None].expand_as(block),
                                                       block, grad_input=block_slope)
            d_scores.index_add_(0, sets, block_slope)
            d_scores.index_put_((sets, pos_items[start : start + n]),
                                -block_slope.sum(1, dtype=torch.float32).to(self.dtype),
                                accumulate=True)
        return d_scores, dcg
