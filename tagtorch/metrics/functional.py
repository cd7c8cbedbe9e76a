"""Batched ranking metrics on padded candidate lists.

Every function takes a batch of ``B`` padded candidate lists of width ``L``:

- ``scores [B, L]`` float: the ranker's scores (higher = ranked first);
- ``labels [B, L]``: relevance of each candidate, ``>= 0`` (bool, int or float; binary or graded);
- ``mask [B, L]`` bool: ``True`` for a real candidate. Padding is never ranked nor counted,
  whatever its score or label;
- ``n_relevant [B]`` (optional): number of relevant items of each list, **including relevant
  items absent from the candidate list** (candidate generation may miss gold tags). Default:
  the relevant candidates present, ``((labels > 0) & mask).sum(-1)``. A value below the number
  of relevant candidates present raises ``ValueError``. P@k, S@k and RR use it only to tell
  which lists are empty;
- ``k`` int: the cut-off, from 1 to :data:`MAX_CUTOFF`. The work and memory of every metric
  are bounded by the lists, not by ``k``: a cut-off beyond a list's length ranks the whole
  list (P@k still divides by ``k``);
- ``empty_target_action``: what a list with ``n_relevant == 0`` gets (see the convention below).

:func:`dcg_at_k` and :func:`ideal_dcg` take float ``labels`` (the relevance grades, ``>= 0``).
The functions' docstrings name these arguments and describe only what is their own.

and returns one value per list, ``[B]`` float (float64 if ``scores`` is float64, else float32).

Convention (the only one used in tagtorch):

- **Ranking.** Real candidates are ranked by score, descending. Ties are broken by candidate
  order: of two equal scores, the candidate earlier in the list ranks first (stable sort).
  Ranks start at 1.
- **Relevance.** A candidate is relevant when its label is ``> 0``. P@k, R@k, S@k, RR and AP use
  this binary relevance; NDCG uses the label value itself.
- **NDCG@k.** Linear gain (gain = label value), discount ``1 / log2(rank + 1)``:
  ``DCG@k = sum_{rank <= k} label / log2(rank + 1)``. The ideal DCG ranks, descending, the
  list's own labels together with ``n_relevant - (relevant candidates present)`` missing
  relevant items of gain 1 (for labels that are 0 or >= 1, e.g. binary or integer grades, this
  is the list's labels sorted descending followed by the missing items), cut at ``k``.
- **P@k** = relevant in the top ``k`` / ``k`` (divides by ``k`` even when the list is shorter).
- **R@k** = relevant in the top ``k`` / ``n_relevant``.
- **S@k** (success, hit rate) = 1 if any relevant item is in the top ``k``, else 0.
- **RR** = 1 / rank of the first relevant candidate (0 if none in the list, or in the top ``k``
  with a cut-off). Its batch mean is the MRR.
- **AP** (trec_eval) = sum over relevant candidates of the precision at their rank, divided by
  ``n_relevant``; with a cut-off ``k``, only the top ``k`` count and the divisor is
  ``min(k, n_relevant)``. Its batch mean is the MAP.
- **Lists with no relevant item** (``n_relevant == 0``) follow ``empty_target_action`` (the
  names of torchmetrics): ``"skip"`` (default) gives NaN, so reductions **must** use
  ``nanmean`` (the :mod:`tagtorch.metrics.retrieval` wrappers do); ``"neg"`` gives 0, ``"pos"``
  gives 1 and ``"error"`` raises ``ValueError``.

Example:
    >>> scores = torch.tensor([[0.9, 0.8, 0.1], [0.2, 0.7, 0.0]])
    >>> labels = torch.tensor([[1, 0, 1], [0, 0, 0]])
    >>> mask = torch.tensor([[True, True, True], [True, True, False]])
    >>> precision_at_k(scores, labels, mask, k=2).tolist()
    [0.5, nan]
    >>> precision_at_k(scores, labels, mask, k=2, empty_target_action="neg").tolist()
    [0.5, 0.0]
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import torch
from torch import Tensor

__all__ = [
    "MAX_CUTOFF",
    "METRIC_NAMES",
    "TAGREC_FAMILIES",
    "EmptyTargetAction",
    "average_precision",
    "dcg_at_k",
    "dcg_discount",
    "ideal_dcg",
    "ideal_gains",
    "ndcg_at_k",
    "parse_key",
    "parse_metric",
    "precision_at_k",
    "rank_order",
    "ranking_metrics",
    "recall_at_k",
    "reciprocal_rank",
    "success_at_k",
    "top_rank_order",
    "top_ranking_metrics",
]

EmptyTargetAction = Literal["skip", "neg", "pos", "error"]
"""What a list with no relevant item (``n_relevant == 0``) gets: NaN, 0, 1 or an error."""

METRIC_NAMES: tuple[str, ...] = ("ndcg", "precision", "recall", "success", "mrr", "map")
"""Metric names accepted by :func:`ranking_metrics` (``mrr`` and ``map`` also as ``mrr@K``,
``map@K``: with their own cut-off)."""

MAX_CUTOFF = 10**9
"""The largest cut-off ``K`` a metric takes (``ndcg@K``, ``ks``): longer than any list of a run.

A larger one is refused in one line, before any work: it would score every list whole, as this
one does (it is a typo, or a number that no tensor index holds)."""

_EMPTY_ACTIONS = ("skip", "neg", "pos", "error")
_KEY_PREFIX = {"ndcg": "ndcg", "precision": "p", "recall": "r", "success": "s"}

TAGREC_FAMILIES: tuple[str, ...] = ("tagrec_recall", "tagrec_precision", "tagrec_f1",
                                    "tagrec_mrr", "tagrec_map", "tagrec_ndcg")
"""TagRec's metrics (personalized tag recommendation, :mod:`tagtorch.posts.metrics`): their own
names, since their formulas differ from ``r``, ``p``, ``mrr``, ``map`` and ``ndcg``."""


class _Ranked(NamedTuple):
    """Candidate lists sorted once, shared by all metrics (internal)."""

    gains: Tensor  # [B, L] label values in rank order, 0 for padding
    rel: Tensor  # [B, L] 1.0 where the candidate at that rank is relevant
    n_relevant: Tensor  # [B] float
    discount: Tensor  # [W] 1 / log2(rank + 1), W >= L
    ranks: Tensor  # [L] float 1..L
    labels: Tensor  # [B, L] label values in candidate order, 0 for padding
    n_missing: Tensor  # [B] long, relevant items absent from the list


def parse_metric(name: str) -> tuple[str, int | None]:
    """A metric name of :func:`ranking_metrics` as ``(family, cut-off)``.

    Raises:
        ValueError: a name that is neither in :data:`METRIC_NAMES` nor ``mrr@K`` / ``map@K``
            with ``K`` from 1 to :data:`MAX_CUTOFF`.

    Example:
        >>> parse_metric("mrr@10"), parse_metric("success")
        (('mrr', 10), ('success', None))
    """
    match = re.fullmatch(r"(mrr|map)@([1-9][0-9]*)", name) if isinstance(name, str) else None
    if match:
        return match.group(1), _cut_off(name, match.group(2))
    if name in METRIC_NAMES:
        return name, None
    raise ValueError(f"unknown metric {name!r:.80}; known: {METRIC_NAMES}, or mrr@K, map@K")


def parse_key(key: str) -> tuple[str, int | None]:
    """A metric key of any task's results as ``(family, cut-off)``: the one grammar of names.

    ``ndcg@K``, ``p@K``, ``r@K``, ``s@K`` (:func:`ranking_metrics`' keys), ``mrr`` and ``map``
    with or without ``@K``, and TagRec's ``tagrec_recall@K``, ``tagrec_precision@K``,
    ``tagrec_f1@K``, ``tagrec_mrr@K``, ``tagrec_map@K``, ``tagrec_ndcg@K``
    (:data:`TAGREC_FAMILIES`). A name means one formula in every task.

    Raises:
        ValueError: any other name, listing the grammar, or a ``K`` above :data:`MAX_CUTOFF`.

    Example:
        >>> parse_key("ndcg@10"), parse_key("map"), parse_key("tagrec_mrr@5")
        (('ndcg', 10), ('map', None), ('tagrec_mrr', 5))
        >>> parse_key("ndcg@123456789012345678901234567890")
        Traceback (most recent call last):
        ...
        ValueError: metric 'ndcg@123456789012345678901234567890': expected a cut-off K from 1 \
to 1000000000, got 123456789012345678901234567890
    """
    cut_required = "|".join(("ndcg", "p", "r", "s", *TAGREC_FAMILIES))
    match = (re.fullmatch(rf"({cut_required})@([1-9][0-9]*)|(mrr|map)(?:@([1-9][0-9]*))?", key)
             if isinstance(key, str) else None)
    if match is None:
        raise ValueError(f"unknown metric {key!r:.80}: ndcg@K, p@K, r@K, s@K, mrr, map, mrr@K, "
                         f"map@K or TagRec's {', '.join(f + '@K' for f in TAGREC_FAMILIES)}")
    family = match.group(1) or match.group(3)
    cut = match.group(2) or match.group(4)
    return family, _cut_off(key, cut) if cut else None


def _cut_off(key: str, digits: str) -> int:
    """The cut-off ``K`` of a metric name (its digits), refused above :data:`MAX_CUTOFF`."""
    if len(digits) > len(str(MAX_CUTOFF)) or int(digits) > MAX_CUTOFF:
        raise ValueError(f"metric {key!r:.80}: expected a cut-off K from 1 to {MAX_CUTOFF}, "
                         f"got {digits:.60}")
    return int(digits)


def check_k(k: Any, name: str = "k", optional: bool = False, at_most: int | None = None
            ) -> None:
    """Refuses a cut-off that is not an integer >= 1 (booleans included); None if ``optional``.

    The one check of a cut-off: metrics, losses and the served recommenders take it. The
    metrics pass ``at_most=MAX_CUTOFF`` (:data:`MAX_CUTOFF`).

    Example:
        >>> check_k(True)
        Traceback (most recent call last):
        ...
        ValueError: k must be an integer >= 1, got True
        >>> check_k(10**30, at_most=MAX_CUTOFF)
        Traceback (most recent call last):
        ...
        ValueError: k must be an integer from 1 to 1000000000, got 1000000000000000000000000000000
    """
    if k is None and optional:
        return
    if (isinstance(k, bool) or not isinstance(k, int) or k < 1
            or (at_most is not None and k > at_most)):
        expected = "an integer >= 1" if at_most is None else f"an integer from 1 to {at_most}"
        raise ValueError(f"{name} must be {expected}{' or None' if optional else ''}, "
                         f"got {k!r:.80}")


def _validate(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    n_relevant: Tensor | None,
    empty_target_action: str,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Checks shapes and values; returns float labels (0 on padding) and long n_relevant."""
    for name, t in (("scores", scores), ("labels", labels), ("mask", mask)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if scores.ndim != 2:
        raise ValueError(f"scores must have shape [B, L], got {tuple(scores.shape)}")
    if labels.shape != scores.shape or mask.shape != scores.shape:
        raise ValueError(
            "scores, labels and mask must all have shape [B, L]; got "
            f"scores {tuple(scores.shape)}, labels {tuple(labels.shape)}, "
            f"mask {tuple(mask.shape)}"
        )
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor, got {mask.dtype}")
    if empty_target_action not in _EMPTY_ACTIONS:
        raise ValueError(
            f"empty_target_action must be one of {_EMPTY_ACTIONS}, got {empty_target_action!r}"
        )
    dtype = torch.float64 if scores.dtype == torch.float64 else torch.float32
    labels_f = torch.where(mask, labels.to(dtype), torch.zeros((), dtype=dtype, device=mask.device))
    if bool((labels_f < 0).any()):
        raise ValueError("labels of real candidates must be >= 0")
    n_present = ((labels_f > 0) & mask).sum(-1)
    if n_relevant is None:
        n_rel = n_present
    else:
        if not isinstance(n_relevant, Tensor):
            raise TypeError(f"n_relevant must be a torch.Tensor, got {type(n_relevant).__name__}")
        if n_relevant.shape != scores.shape[:1]:
            raise ValueError(
                f"n_relevant must have shape [B] = [{scores.shape[0]}], "
                f"got {tuple(n_relevant.shape)}"
            )
        if n_relevant.is_floating_point() and bool((n_relevant != n_relevant.round()).any()):
            raise ValueError("n_relevant must hold whole numbers")
        n_rel = n_relevant.to(device=scores.device, dtype=torch.long)
        if bool((n_rel < n_present).any()):
            raise ValueError(
                "n_relevant is smaller than the number of relevant candidates present in a list"
            )
    if empty_target_action == "error" and bool((n_rel == 0).any()):
        raise ValueError(
            "a list has no relevant item (n_relevant == 0) and empty_target_action='error'"
        )
    return scores, labels_f, n_rel, n_present


def rank_order(scores: Tensor, mask: Tensor) -> Tensor:
    """``[B, L]`` candidate indices in rank order: by score, ties by position, padding last."""
    # Sort by score (descending, stable: ties keep candidate order), then move padding last
    # with a second stable sort, which keeps the order of the real candidates.
    order = torch.sort(scores.detach(), dim=-1, descending=True, stable=True).indices
    real_first = torch.sort(
        mask.gather(-1, order).to(torch.uint8), dim=-1, descending=True, stable=True
    ).indices
    return order.gather(-1, real_first)


def top_rank_order(scores: Tensor, mask: Tensor | None, k: int) -> Tensor:
    """``[B, min(k, L)]``: the first ``k`` columns of :func:`rank_order`, without a full sort.

    ``torch.topk`` finds the top ``k`` of long lists (e.g. every item) much faster than a sort,
    but leaves the order of equal scores unspecified. Its result is put in candidate order
    among equal scores. A list where scores equal to the ``k``-th one fall outside the top
    ``k`` (a tie at the cut: most lists of a term-matching model, whose scores are mostly 0)
    takes the scores above the cut and the first of the equal ones in candidate order
    (:func:`_tied_top`); a list with a NaN, or with fewer than ``k`` finite real scores, is
    ranked by :func:`rank_order`. ``mask=None``: every candidate is real (a caller that has set
    excluded candidates to ``-inf`` itself saves the ``[B, L]`` mask).
    """
    s = scores.detach()
    low = torch.full((), -math.inf, dtype=s.dtype, device=s.device)
    masked = s if mask is None else torch.where(mask, s, low)
    width = min(k, s.shape[-1])
    extra = int(width < s.shape[-1])  # one more score: is there a tie at the cut?
    top = torch.topk(masked, width + extra, dim=-1, sorted=True)
    cut = top.values[:, width - 1]
    plain = (cut > low) & ~torch.isnan(top.values).any(-1)  # topk ranks NaN first
    clean = plain & (top.values[:, width] < cut) if extra else plain
    index = top.indices[:, :width].sort(dim=-1).values
    ranked = masked.gather(-1, index).sort(dim=-1, descending=True, stable=True).indices
    order = index.gather(-1, ranked)
    tied = plain & ~clean
    if bool(tied.any()):
        order[tied] = _tied_top(masked[tied], cut[tied], width)
    if not bool(plain.all()):
        rows = ~plain
        real = torch.ones_like(s[rows], dtype=torch.bool) if mask is None else mask[rows]
        order[rows] = rank_order(s[rows], real)[:, :width]
    return order


def _tied_top(scores: Tensor, cut: Tensor, width: int) -> Tensor:
    """:func:`top_rank_order` of lists whose ``width``-th score ``cut`` recurs below it.

    The scores above the cut, then the first equal ones in candidate order up to ``width``
    (what a stable sort puts first), ranked. They are the ``width`` largest of a key that
    puts every score above the cut first and equal ones by candidate order (``torch.topk``
    again, no sort of the lists).
    """
    length = scores.shape[-1]
    dtype = torch.int32 if 2 * length < 2**31 else torch.int64
    first = torch.arange(length, 0, -1, dtype=dtype, device=scores.device)  # L - position
    none = torch.zeros((), dtype=dtype, device=scores.device)
    key = torch.where(scores > cut[:, None], first + length,
                      torch.where(scores == cut[:, None], first, none))
    index = torch.topk(key, width, dim=-1).indices.sort(dim=-1).values
    ranked = scores.gather(-1, index).sort(dim=-1, descending=True, stable=True).indices
    return index.gather(-1, ranked)


def dcg_discount(ranks: Tensor, k: int | None = None) -> Tensor:
    """DCG discount ``1 / log2(rank + 1)`` of ranks ``>= 1`` (any shape), ``0`` beyond ``k``.

    Args:
        ranks: float ranks, starting at 1 (any shape; the losses pass smoothed ranks).
        k: cut-off: ranks above ``k`` get 0; None: no cut-off.

    Returns:
        The discounts, of the shape and dtype of ``ranks``.

    Example:
        >>> [round(v, 4) for v in dcg_discount(torch.tensor([1.0, 2.0, 3.0]), k=2).tolist()]
        [1.0, 0.6309, 0.0]
    """
    discount = 1.0 / torch.log2(1.0 + ranks)
    if k is None:
        return discount
    return torch.where(ranks <= k, discount, torch.zeros_like(discount))


def ideal_gains(gains: Tensor, n_missing: Tensor | None = None, k: int = 0) -> Tensor:
    """The ideal ranking's gains: ``gains`` sorted descending, with the missing items.

    Args:
        gains: ``[B, L]`` gains, ``>= 0``, 0 at padding.
        n_missing: ``[B]`` relevant items absent from the list (``>= 0``), each of gain 1;
            None: none.
        k: how many missing items at most may count (those beyond rank ``k`` do not matter
            at cut-off ``k``).

    Returns:
        ``[B, L + k]`` (``[B, L]`` without ``n_missing``) gains in ideal rank order.

    Example:
        >>> ideal_gains(torch.tensor([[0.0, 2.0, 1.0]]), torch.tensor([1]), k=2).tolist()
        [[2.0, 1.0, 1.0, 0.0, 0.0]]
    """
    if n_missing is not None:
        ones = torch.arange(k, device=gains.device) < n_missing.unsqueeze(-1)
        gains = torch.cat([gains, ones.to(gains.dtype)], dim=-1)
    return torch.sort(gains, dim=-1, descending=True).values


def ideal_dcg(labels: Tensor, mask: Tensor, k: int, n_relevant: Tensor | None = None) -> Tensor:
    """Ideal DCG@k of each list, the normalizer of :func:`ndcg_at_k` (linear gain).

    The list's own labels with ``n_relevant - (relevant candidates present)`` missing relevant
    items of gain 1, sorted descending, cut at ``k``. Inputs are not validated. The ideal holds
    at most the list's width plus its missing items, whatever ``k`` (further places would have
    gain 0 and add nothing): its work never grows with ``k`` alone.

    Takes ``labels``, ``mask``, ``n_relevant`` as in the module docstring;
    the cut-off ``k >= 1``.

    Returns:
        ``[B]`` ideal DCG@k, in the dtype of ``labels``.

    Example:
        >>> labels = torch.tensor([[1.0, 0.0, 1.0]])
        >>> mask = torch.ones(1, 3, dtype=torch.bool)
        >>> [round(v, 4) for v in ideal_dcg(labels, mask, k=3).tolist()]  # 1 + 1 / log2(3)
        [1.6309]
        >>> [round(v, 4) for v in ideal_dcg(labels, mask, 3, torch.tensor([3])).tolist()]
        [2.1309]
    """
    labels = torch.where(mask, labels, torch.zeros_like(labels))
    present = (labels > 0).sum(-1)
    missing = torch.zeros_like(present) if n_relevant is None else (n_relevant - present).clamp(
        min=0)
    ideal = ideal_gains(labels, missing, _missing_width(missing, k))[:, :k]
    positions = torch.arange(1, ideal.shape[1] + 1, device=labels.device, dtype=labels.dtype)
    return (ideal * dcg_discount(positions)).sum(-1)


def _missing_width(n_missing: Tensor, k: int) -> int:
    """The missing items an ideal ranking at cut-off ``k`` needs: ``min(k, most missed)``.

    The ideal's width, and its memory, never grow with ``k`` alone: beyond the most missing
    items of any list, every further place has gain 0.
    """
    return min(k, int(n_missing.max())) if n_missing.numel() else 0


def dcg_at_k(scores: Tensor, labels: Tensor, mask: Tensor, k: int) -> Tensor:
    """DCG@k of each list, ``sum over rank r <= k of label_r / log2(r + 1)`` (linear gain).

    The convention of this module: real candidates ranked by score, ties by candidate order,
    padding never ranked (a list shorter than ``k`` sums over its real candidates). Inputs are
    not validated.

    Takes ``scores``, ``labels``, ``mask`` as in the module docstring;
    the cut-off ``k >= 1``.

    Returns:
        ``[B]`` DCG@k, in the dtype of ``labels``.

    Example:
        >>> scores = torch.tensor([[0.1, 0.9, 0.5], [0.5, 0.5, 0.5]])
        >>> labels = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
        >>> dcg = dcg_at_k(scores, labels, torch.ones(2, 3, dtype=torch.bool), k=2)
        >>> [round(v, 4) for v in dcg.tolist()]  # ties: candidate order
        [0.6309, 0.6309]
    """
    top = top_rank_order(scores, mask, k)
    gains = labels.gather(1, top) * mask.gather(1, top)
    positions = torch.arange(1, top.shape[1] + 1, device=labels.device, dtype=labels.dtype)
    return (gains * dcg_discount(positions)).sum(-1)


def _rank(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    n_relevant: Tensor | None,
    empty_target_action: str,
    ideal_width: int = 0,
    depth: int | None = None,
) -> _Ranked:
    """Validates inputs and sorts every list once (stable, padding last).

    ``depth``: only the first ``depth`` places are needed (every metric has a cut-off), found
    by :func:`top_rank_order` without sorting whole lists (the same places as a full sort).
    ``ideal_width``: the largest NDCG cut-off; the discounts cover the lists and the missing
    items that cut-off counts (:func:`_missing_width`).
    """
    scores, labels_f, n_rel, n_present = _validate(
        scores, labels, mask, n_relevant, empty_target_action
    )
    if scores.shape[1] == 0:  # one padding column keeps every reduction well defined
        scores = scores.new_zeros((scores.shape[0], 1))
        labels_f = labels_f.new_zeros((labels_f.shape[0], 1))
        mask = mask.new_zeros((mask.shape[0], 1))
    dtype, device = labels_f.dtype, labels_f.device
    length = scores.shape[1]
    order = (top_rank_order(scores, mask, depth) if depth is not None and depth < length
             else rank_order(scores, mask))
    gains = labels_f.gather(-1, order)
    width = length + _missing_width(n_rel - n_present, ideal_width)
    positions = torch.arange(1, width + 1, device=device, dtype=dtype)
    discount = dcg_discount(positions)
    return _Ranked(
        gains=gains,
        rel=(gains > 0).to(dtype),
        n_relevant=n_rel.to(dtype),
        discount=discount,
        ranks=positions[:gains.shape[1]],
        labels=labels_f,
        n_missing=n_rel - n_present,
    )


def _at(prefix: Tensor, k: int) -> Tensor:
    """Value of a cumulative sum ``[B, W]`` after the first ``k`` positions: ``[B]``."""
    return prefix[:, min(k, prefix.shape[1]) - 1]


def _empty(values: Tensor, n_relevant: Tensor, action: str) -> Tensor:
    """Applies ``empty_target_action`` to lists with ``n_relevant == 0``."""
    fill = {"skip": math.nan, "neg": 0.0, "pos": 1.0, "error": math.nan}[action]
    return torch.where(n_relevant == 0, torch.full_like(values, fill), values)


def _ideal_prefix(r: _Ranked, k: int) -> Tensor:
    """Cumulative ideal DCG ``[B, L + k']`` (own labels plus missing items of gain 1).

    ``k' = min(k, most missing items)`` (:func:`_missing_width`): the prefix at any cut-off up
    to ``k`` is that of ``L + k`` places (:func:`_at`), the places beyond holding gain 0.
    """
    ideal = ideal_gains(r.labels, r.n_missing, _missing_width(r.n_missing, k))
    return torch.cumsum(ideal * r.discount[: ideal.shape[1]], dim=-1)


def _ndcg(r: _Ranked, k: int, ideal_prefix: Tensor) -> Tensor:
    dcg = _at(torch.cumsum(r.gains * r.discount[: r.gains.shape[1]], dim=-1), k)
    idcg = _at(ideal_prefix, k)
    return dcg / torch.where(idcg > 0, idcg, torch.ones_like(idcg))


def _hits(r: _Ranked, k: int) -> Tensor:
    return _at(torch.cumsum(r.rel, dim=-1), k)


def _rr(r: _Ranked, k: int | None) -> Tensor:
    inv = r.rel / r.ranks
    if k is not None:
        inv = inv * (r.ranks <= k)
    return inv.amax(dim=-1)


def _ap(r: _Ranked, k: int | None) -> Tensor:
    precision = torch.cumsum(r.rel, dim=-1) / r.ranks
    total = torch.cumsum(r.rel * precision, dim=-1)
    if k is None:
        return total[:, -1] / r.n_relevant
    return _at(total, k) / r.n_relevant.clamp(max=k)


def ndcg_at_k(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    k: int,
    n_relevant: Tensor | None = None,
    empty_target_action: EmptyTargetAction = "skip",
) -> Tensor:
    """Normalized discounted cumulative gain at ``k`` of each list (linear gain).

    The ideal DCG also counts the ``n_relevant - present`` relevant items missing from the
    candidate list, with gain 1 (see the module docstring).

    Takes ``scores``, ``labels``, ``mask``, ``n_relevant``, ``empty_target_action`` as in the
    module docstring; the cut-off ``k``, from 1 to :data:`MAX_CUTOFF`.

    Returns:
        ``[B]`` NDCG@k per list.

    Raises:
        ValueError: on bad shapes, a ``k`` out of range, negative labels, too small
            ``n_relevant``, or an empty list with ``empty_target_action="error"``.

    Example:
        >>> scores = torch.tensor([[0.1, 0.9, 0.5]])
        >>> labels = torch.tensor([[1, 0, 1]])
        >>> mask = torch.ones(1, 3, dtype=torch.bool)
        >>> ndcg = ndcg_at_k(scores, labels, mask, k=3)  # (1/log2(3) + 1/2) / (1 + 1/log2(3))
        >>> [round(v, 4) for v in ndcg.tolist()]
        [0.6934]
        >>> ndcg = ndcg_at_k(scores, labels, mask, k=3, n_relevant=torch.tensor([3]))
        >>> [round(v, 4) for v in ndcg.tolist()]
        [0.5307]
    """
    check_k(k, at_most=MAX_CUTOFF)
    r = _rank(scores, labels, mask, n_relevant, empty_target_action, ideal_width=k)
    return _empty(_ndcg(r, k, _ideal_prefix(r, k)), r.n_relevant, empty_target_action)


def precision_at_k(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    k: int,
    n_relevant: Tensor | None = None,
    empty_target_action: EmptyTargetAction = "skip",
) -> Tensor:
    """Precision at ``k``: relevant candidates in the top ``k``, divided by ``k``.

    The divisor is ``k`` even when the list holds fewer than ``k`` candidates.

    Takes ``scores``, ``labels``, ``mask``, ``n_relevant``, ``empty_target_action`` as in the
    module docstring; the cut-off ``k``, from 1 to :data:`MAX_CUTOFF`.

    Returns:
        ``[B]`` P@k per list.

    Example:
        >>> scores = torch.tensor([[0.3, 0.2, 0.9]])
        >>> labels = torch.tensor([[1, 1, 0]])
        >>> mask = torch.tensor([[True, True, True]])
        >>> precision_at_k(scores, labels, mask, k=2).tolist()
        [0.5]
        >>> [round(v, 4) for v in precision_at_k(scores, labels, mask, k=5).tolist()]  # 2 / 5
        [0.4]
    """
    check_k(k, at_most=MAX_CUTOFF)
    r = _rank(scores, labels, mask, n_relevant, empty_target_action)
    return _empty(_hits(r, k) / k, r.n_relevant, empty_target_action)


def recall_at_k(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    k: int,
    n_relevant: Tensor | None = None,
    empty_target_action: EmptyTargetAction = "skip",
) -> Tensor:
    """Recall at ``k``: relevant candidates in the top ``k``, divided by ``n_relevant``.

    Takes ``scores``, ``labels``, ``mask``, ``n_relevant``, ``empty_target_action`` as in the
    module docstring; the cut-off ``k``, from 1 to :data:`MAX_CUTOFF`.

    Returns:
        ``[B]`` R@k per list.

    Example:
        >>> scores = torch.tensor([[0.3, 0.2, 0.9]])
        >>> labels = torch.tensor([[1, 1, 0]])
        >>> mask = torch.tensor([[True, True, True]])
        >>> recall_at_k(scores, labels, mask, k=2).tolist()
        [0.5]
        >>> recall_at_k(scores, labels, mask, k=3, n_relevant=torch.tensor([4])).tolist()
        [0.5]
    """
    check_k(k, at_most=MAX_CUTOFF)
    r = _rank(scores, labels, mask, n_relevant, empty_target_action)
    return _empty(_hits(r, k) / r.n_relevant, r.n_relevant, empty_target_action)


def success_at_k(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    k: int,
    n_relevant: Tensor | None = None,
    empty_target_action: EmptyTargetAction = "skip",
) -> Tensor:
    """Success (hit rate) at ``k``: 1 if any relevant candidate is in the top ``k``, else 0.

    Takes ``scores``, ``labels``, ``mask``, ``n_relevant``, ``empty_target_action`` as in the
    module docstring; the cut-off ``k``, from 1 to :data:`MAX_CUTOFF`.

    Returns:
        ``[B]`` S@k per list.

    Example:
        >>> scores = torch.tensor([[0.3, 0.2, 0.9]])
        >>> labels = torch.tensor([[0, 1, 0]])
        >>> mask = torch.tensor([[True, True, True]])
        >>> [success_at_k(scores, labels, mask, k=k).tolist() for k in (2, 3)]
        [[0.0], [1.0]]
    """
    check_k(k, at_most=MAX_CUTOFF)
    r = _rank(scores, labels, mask, n_relevant, empty_target_action)
    return _empty((_hits(r, k) > 0).to(r.rel.dtype), r.n_relevant, empty_target_action)


def reciprocal_rank(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    k: int | None = None,
    n_relevant: Tensor | None = None,
    empty_target_action: EmptyTargetAction = "skip",
) -> Tensor:
    """Reciprocal rank of the first relevant candidate (0 if none; the batch mean is the MRR).

    Takes ``scores``, ``labels``, ``mask``, ``n_relevant``, ``empty_target_action`` as in the
    module docstring; the optional cut-off ``k``: a first relevant candidate ranked
    below ``k`` gives 0.

    Returns:
        ``[B]`` reciprocal rank per list.

    Example:
        >>> scores = torch.tensor([[0.3, 0.2, 0.9]])
        >>> labels = torch.tensor([[1, 1, 0]])
        >>> mask = torch.tensor([[True, True, True]])
        >>> [reciprocal_rank(scores, labels, mask, k=k).tolist() for k in (None, 1)]
        [[0.5], [0.0]]
    """
    check_k(k, optional=True, at_most=MAX_CUTOFF)
    r = _rank(scores, labels, mask, n_relevant, empty_target_action)
    return _empty(_rr(r, k), r.n_relevant, empty_target_action)


def average_precision(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    k: int | None = None,
    n_relevant: Tensor | None = None,
    empty_target_action: EmptyTargetAction = "skip",
) -> Tensor:
    """Average precision as trec_eval computes it (the batch mean is the MAP).

    ``AP = sum over relevant candidates of P@(their rank) / n_relevant``; relevant items missing
    from the list contribute 0. With ``k``, only the top ``k`` count and the divisor is
    ``min(k, n_relevant)``.

    Takes ``scores``, ``labels``, ``mask``, ``n_relevant``, ``empty_target_action`` as in the
    module docstring; the optional cut-off ``k``.

    Returns:
        ``[B]`` AP per list.

    Example:
        >>> scores = torch.tensor([[0.9, 0.8, 0.7]])
        >>> labels = torch.tensor([[1, 0, 1]])
        >>> mask = torch.tensor([[True, True, True]])
        >>> [round(v, 4) for v in average_precision(scores, labels, mask).tolist()]  # (1 + 2/3) / 2
        [0.8333]
        >>> ap = average_precision(scores, labels, mask, n_relevant=torch.tensor([4]))
        >>> [round(v, 4) for v in ap.tolist()]
        [0.4167]
    """
    check_k(k, optional=True, at_most=MAX_CUTOFF)
    r = _rank(scores, labels, mask, n_relevant, empty_target_action)
    return _empty(_ap(r, k), r.n_relevant, empty_target_action)


def ranking_metrics(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    n_relevant: Tensor | None = None,
    ks: Sequence[int] = (5,),
    metrics: Sequence[str] = METRIC_NAMES,
    empty_target_action: EmptyTargetAction = "skip",
) -> dict[str, Tensor]:
    """Several metrics at several cut-offs, sorting each list once.

    Keys: ``"ndcg@k"``, ``"p@k"``, ``"r@k"``, ``"s@k"`` for each ``k`` in ``ks`` (for the
    metrics ``"ndcg"``, ``"precision"``, ``"recall"``, ``"success"``), and ``"mrr"`` (reciprocal
    rank) and ``"map"`` (average precision), both without cut-off, or ``"mrr@K"``, ``"map@K"``
    with the cut-off ``K`` of their name (not of ``ks``).

    Takes ``scores``, ``labels``, ``mask``, ``n_relevant``, ``empty_target_action`` as in the
    module docstring; the cut-offs ``ks``, each ``>= 1``; ``metrics``, names among
    :data:`METRIC_NAMES` or ``mrr@K`` / ``map@K`` (:func:`parse_metric`).

    Returns:
        Per-list values ``[B]`` by key, in the order of ``metrics`` then ``ks``.

    Raises:
        ValueError: on an unknown metric name, a bad ``k`` or bad inputs.

    Example:
        >>> scores = torch.tensor([[0.9, 0.8, 0.7]])
        >>> labels = torch.tensor([[1, 0, 1]])
        >>> mask = torch.tensor([[True, True, True]])
        >>> out = ranking_metrics(scores, labels, mask, ks=(1, 3))
        >>> {key: round(v.item(), 4) for key, v in out.items()}  # doctest: +NORMALIZE_WHITESPACE
        {'ndcg@1': 1.0, 'ndcg@3': 0.9197, 'p@1': 1.0, 'p@3': 0.6667, 'r@1': 0.5, 'r@3': 1.0,
         's@1': 1.0, 's@3': 1.0, 'mrr': 1.0, 'map': 0.8333}
        >>> out = ranking_metrics(scores, labels, mask, ks=(1,), metrics=("success", "map@2"))
        >>> {key: round(v.item(), 4) for key, v in out.items()}
        {'s@1': 1.0, 'map@2': 0.5}
    """
    parsed = [parse_metric(m) for m in metrics]
    ks = tuple(ks)
    depth = _depth(parsed, ks)
    k_max = max(ks) if ks and "ndcg" in metrics else 0
    r = _rank(scores, labels, mask, n_relevant, empty_target_action, ideal_width=k_max,
              depth=depth)
    ideal = _ideal_prefix(r, k_max) if k_max else None
    out: dict[str, Tensor] = {}
    for (name, cut), key in zip(parsed, metrics, strict=True):
        if name in ("mrr", "map"):
            value = _rr(r, cut) if name == "mrr" else _ap(r, cut)
            out[key] = _empty(value, r.n_relevant, empty_target_action)
            continue
        for k in ks:
            if name == "ndcg":
                assert ideal is not None
                value = _ndcg(r, k, ideal)
            elif name == "precision":
                value = _hits(r, k) / k
            elif name == "recall":
                value = _hits(r, k) / r.n_relevant
            else:
                value = (_hits(r, k) > 0).to(r.rel.dtype)
            out[f"{_KEY_PREFIX[name]}@{k}"] = _empty(value, r.n_relevant, empty_target_action)
    return out


def _depth(parsed: Sequence[tuple[str, int | None]], ks: tuple[int, ...]) -> int | None:
    """The places that metrics ``parsed`` at cut-offs ``ks`` read (None: whole lists)."""
    for k in ks:
        check_k(k, name="each k in ks", at_most=MAX_CUTOFF)
    cuts = [cut for name, cut in parsed if name in ("mrr", "map")]
    cuts += list(ks) if any(name not in ("mrr", "map") for name, _ in parsed) else []
    return None if None in cuts or not cuts else max(c for c in cuts if c is not None)


def top_ranking_metrics(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    ks: Sequence[int] = (5,),
    metrics: Sequence[str] = METRIC_NAMES,
    empty_target_action: EmptyTargetAction = "skip",
) -> dict[str, Tensor]:
    """:func:`ranking_metrics` of binary labels, reading only each list's top places.

    For long lists (every object or item a candidate) the whole-list work of
    :func:`ranking_metrics` (float labels, checks, prefix sums over ``[B, L]``) is the cost.
    Here :func:`top_rank_order` finds the places the metrics read (the largest cut-off), and
    :func:`ranking_metrics` runs on them with the lists' counts of relevant candidates as
    ``n_relevant``: with binary labels, a relevant candidate below the cut-off enters a metric
    only through that count (recall's denominator, the ideal DCG's ones), so the values are the
    whole lists' (tested against them). Metrics without a cut-off (``mrr``, ``map``) read whole
    lists: then this is :func:`ranking_metrics`.

    Raises:
        ValueError: labels that are not bool, or as :func:`ranking_metrics`.
    """
    if labels.dtype != torch.bool:
        raise ValueError(f"top_ranking_metrics takes bool labels, got {labels.dtype}")
    if labels.shape != scores.shape or mask.shape != scores.shape or scores.ndim != 2:
        return ranking_metrics(scores, labels, mask, ks=ks, metrics=metrics,
                               empty_target_action=empty_target_action)  # its error
    depth = _depth([parse_metric(m) for m in metrics], tuple(ks))
    if depth is None or depth >= scores.shape[1]:
        return ranking_metrics(scores, labels, mask, ks=ks, metrics=metrics,
                               empty_target_action=empty_target_action)
    rows, cols = labels.nonzero(as_tuple=True)  # few: a scan, not a [B, L] sum
    n_relevant = torch.bincount(rows[mask[rows, cols]], minlength=scores.shape[0])
    order = top_rank_order(scores, mask, depth)
    return ranking_metrics(scores.gather(-1, order), labels.gather(-1, order),
                           mask.gather(-1, order), n_relevant, ks=ks, metrics=metrics,
                           empty_target_action=empty_target_action)
