"""Batched diversity and novelty metrics of recommended tag lists (Belém et al., xTReD).

The metrics of Belém et al. ("explicit Tag Recommendation Diversifier", xTReD, Section 5.2 and
Section 4.1 for AILD and AIP): explicit, topic-based diversity (alpha-NDCG, ERR-IA, S-recall),
and the implicit diversity and novelty of GP_rnd (AILD, AIP). Every metric scores the top ``k``
of the **whole** recommended list, relevant tags or not: the paper evaluates diversity
"orthogonally to relevance" (Section 5.2), so these functions take no labels.

Inputs (a batch of ``B`` padded candidate lists of width ``L``, as in
:mod:`tagtorch.metrics.functional`):

- ``scores [B, L]`` float, ``mask [B, L]`` bool: ranked by the convention of
  :mod:`tagtorch.metrics.functional`: by score, descending; ties by candidate position;
  padding never ranked. A list shorter than ``k`` is scored on its real candidates;
- ``topics [B, L, Z]`` float in ``[0, 1]``: ``p(z | t)`` of each candidate ``t`` for each of the
  ``Z`` topics (categories), 0 at padding (ignored there anyway);
- ``object_topics [B, Z]`` float: ``p(z | o)``, ``> 0`` exactly on the object's topics ``Z_o``
  (0 elsewhere); rows should sum to 1 over ``Z_o`` (used as given, not renormalized). Topics
  outside ``Z_o`` never count, whatever ``topics`` says;
- ``k`` int ``>= 1`` (the paper: ``k = 5``); ``empty_target_action``: what an object with an
  empty ``Z_o`` (or, for alpha-NDCG, a zero ideal) gets, as in
  :mod:`tagtorch.metrics.functional`: ``"skip"`` (NaN, default: reduce with ``nanmean``),
  ``"neg"`` (0), ``"pos"`` (1), ``"error"`` (``ValueError``).

Each function returns ``[B]`` (float64 if ``topics`` / ``scores`` are float64, else float32).

Readings (the extraction of the paper lost the formulas; tagtorch's readings, with options):

- **alpha-NDCG@k** (Clarke et al., SIGIR 2008), graded by ``p(z | t)``: the gain of the tag at
  rank ``i`` is ``sum_{z in Z_o} w_z p(z | t_i) (1 - alpha)^{c_z}`` with
  ``c_z = sum_{j < i} p(z | t_j)``, discounted by ``log2(i + 1)``. The weights ``w_z`` are 1 on
  ``Z_o`` (``topic_weights="uniform"``, default, as ndeval: alpha-NDCG has no intent
  probabilities) or ``p(z | o)`` (``topic_weights="object"``). The normalizer is the DCG of a
  **greedy ideal** over the list's real candidates: at each of ``k`` steps the candidate of
  largest marginal gain given those already placed, ties by candidate position (ndeval builds
  its ideal greedily over the judged documents in the same way, but breaks ties by the largest
  docno; a tie can change the ideal's value). As with any greedy ideal the value can exceed 1
  in rare cases. ``alpha = 0.5`` as in TREC. A zero ideal (no candidate has
  any weight on ``Z_o``) follows ``empty_target_action``. With binary ``p(z | t)`` this is
  ndeval's alpha-nDCG@k.
- **ERR-IA@k** (Chapelle et al., CIKM 2009; intent-aware):
  ``sum_{z in Z_o} p(z | o) sum_{i <= k} (1 / i) p(z | t_i) prod_{j < i} (1 - p(z | t_j))``,
  not normalized (ndeval's ``ERR-IA``, not ``nERR-IA``). With binary ``p(z | t)`` and uniform
  ``p(z | o)`` it is ndeval's ERR-IA@k run with ``alpha = 1`` (ndeval's cascade keeps
  ``(1 - alpha)`` of the mass per earlier relevant document and divides by
  ``sum_{i <= k} (1 - alpha)^{i - 1} / i``, which is 1 when ``alpha = 1``).
- **S-recall@k** (Zhai et al., SIGIR 2003): the share of ``Z_o`` covered by a top-``k`` tag with
  ``p(z | t) > 0`` (each topic counts once, unweighted). ``soft=True``: the expected share,
  ``mean_{z in Z_o} (1 - prod_{i <= k} (1 - p(z | t_i)))``; both agree on binary ``p(z | t)``.
- **AILD@k** (Belém et al., Section 4.1, after Vargas and Castells): the mean pairwise distance
  of the top ``k``, ``sum_{i < j <= k} dist(t_i, t_j) / K`` with ``K = (k^2 - k) / 2``, where
  ``dist(c, c') = 1 - |O_c & O_c'| / |O_c | O_c'|`` (``O_c``: the training objects (D) tagged
  ``c``; 1 when both are empty; the paper's "relative difference between the sets", read as
  one minus their Jaccard similarity). A list with ``n < k`` real candidates divides by its
  ``n (n - 1) / 2`` pairs (``pairs="present"``, default) or by ``K`` (``pairs="k"``); a list
  with no pair follows ``empty_target_action``.
- **AIP@k** (Section 4.1): the mean over the top-``k`` tags of ``IFF(c) / max IFF`` with
  ``IFF(c) = log((|O| + 1) / (f(c) + 1))``, ``|O|`` the training objects, ``f(c)`` those tagged
  ``c``. ``max IFF`` is ``log(|O| + 1)`` (the IFF of a tag unseen in D, the largest possible)
  unless given (e.g. the largest IFF over the vocabulary). The mean is over the tags present
  in the top ``k`` (a shorter list is averaged over its tags); an empty list follows
  ``empty_target_action``.

Example:
    >>> scores = torch.tensor([[0.9, 0.8, 0.7]])
    >>> mask = torch.ones(1, 3, dtype=torch.bool)
    >>> topics = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])  # p(z | t)
    >>> object_topics = torch.tensor([[0.5, 0.5]])  # p(z | o)
    >>> out = diversity_metrics(scores, mask, topics, object_topics, k=2)
    >>> {key: round(v.item(), 4) for key, v in out.items()}
    {'alpha_ndcg@2': 0.8066, 'err_ia@2': 0.5, 's_recall@2': 0.5}
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Literal

import torch
from torch import Tensor

from tagtorch.metrics.functional import (
    MAX_CUTOFF,
    EmptyTargetAction,
    check_k,
    dcg_discount,
    top_rank_order,
)

__all__ = [
    "DIVERSITY_METRIC_NAMES",
    "aild_at_k",
    "aip_at_k",
    "alpha_ndcg_at_k",
    "candidate_topics",
    "check_topics",
    "diversity_metrics",
    "err_ia_at_k",
    "intra_list_distance",
    "inverse_tag_frequency",
    "jaccard_distance",
    "jaccard_from_counts",
    "ranked_top_k",
    "s_recall_at_k",
    "tag_incidence",
]

DIVERSITY_METRIC_NAMES: tuple[str, ...] = ("alpha_ndcg", "err_ia", "s_recall", "aild", "aip")
"""The families of :func:`diversity_metrics`; result keys are ``NAME@k``."""

TopicWeights = Literal["uniform", "object"]
Pairs = Literal["present", "k"]
_EMPTY_ACTIONS = ("skip", "neg", "pos", "error")


def _check_ranking(scores: Tensor, mask: Tensor) -> None:
    for name, t in (("scores", scores), ("mask", mask)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if scores.ndim != 2 or mask.shape != scores.shape:
        raise ValueError(
            f"scores and mask must have shape [B, L]; got scores {tuple(scores.shape)}, "
            f"mask {tuple(mask.shape)}"
        )
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor, got {mask.dtype}")


def _check_action(action: str) -> None:
    if action not in _EMPTY_ACTIONS:
        raise ValueError(f"empty_target_action must be one of {_EMPTY_ACTIONS}, got {action!r}")


def check_topics(scores: Tensor, mask: Tensor, topics: Tensor, object_topics: Tensor) -> None:
    """Checks a batch's shapes and topic probabilities (ValueError or TypeError naming them).

    ``scores``, ``mask`` ``[B, L]``; ``topics`` p(z | t) ``[B, L, Z]`` in ``[0, 1]`` on real
    candidates; ``object_topics`` p(z | o) ``[B, Z]``, ``>= 0``. Shared with the xTReD
    re-ranker (:mod:`tagtorch.rankers.xtred`).
    """
    _check_ranking(scores, mask)
    for name, t in (("topics", topics), ("object_topics", object_topics)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    b, length = scores.shape
    if topics.ndim != 3 or topics.shape[:2] != (b, length):
        raise ValueError(f"topics must have shape [B, L, Z] = [{b}, {length}, Z], "
                         f"got {tuple(topics.shape)}")
    if object_topics.shape != (b, topics.shape[2]):
        raise ValueError(f"object_topics must have shape [B, Z] = [{b}, {topics.shape[2]}], "
                         f"got {tuple(object_topics.shape)}")
    real = topics[mask]
    if bool(((real < 0) | (real > 1) | torch.isnan(real)).any()):
        raise ValueError("topics (p(z | t)) of real candidates must lie in [0, 1]")
    if bool(((object_topics < 0) | torch.isnan(object_topics)).any()):
        raise ValueError("object_topics (p(z | o)) must be >= 0")


def _dtype(*tensors: Tensor) -> torch.dtype:
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def _empty(values: Tensor, empty: Tensor, action: str, what: str) -> Tensor:
    if action == "error" and bool(empty.any()):
        raise ValueError(f"a list has {what} and empty_target_action='error'")
    fill = {"skip": math.nan, "neg": 0.0, "pos": 1.0, "error": math.nan}[action]
    return torch.where(empty, torch.full_like(values, fill), values)


def ranked_top_k(scores: Tensor, mask: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The top ``k`` of each list in rank order (by score, ties by position, padding last).

    The ranking of :mod:`tagtorch.metrics.functional`, for callers that need the top tags'
    ids (e.g. to compute :func:`jaccard_distance` for :func:`intra_list_distance`).

    Args:
        scores: ``[B, L]`` scores; mask: ``[B, L]`` bool, True for a real candidate.
        mask: see ``scores``.
        k: the cut-off, from 1 to :data:`~tagtorch.metrics.functional.MAX_CUTOFF`.

    Returns:
        ``(index, valid)``, both ``[B, min(k, L)]``: the candidate positions in rank order
        (padding positions last, where a list is shorter than ``k``) and whether each is real.

    Example:
        >>> index, valid = ranked_top_k(torch.tensor([[0.1, 0.5, 0.5]]),
        ...                             torch.tensor([[True, True, False]]), k=3)
        >>> index.tolist(), valid.tolist()
        ([[1, 0, 2]], [[True, True, False]])
    """
    _check_ranking(scores, mask)
    check_k(k, at_most=MAX_CUTOFF)
    if scores.shape[1] == 0:
        empty = torch.zeros(scores.shape[0], 0, dtype=torch.long, device=scores.device)
        return empty, empty.bool()
    index = top_rank_order(scores, mask, k)
    return index, mask.gather(1, index)


def _top_topics(scores: Tensor, mask: Tensor, topics: Tensor, object_topics: Tensor,
                k: int) -> tuple[Tensor, Tensor, Tensor]:
    """``p(z | t)`` of the top ``k`` restricted to ``Z_o``: ``[B, k', Z]``, in_zo ``[B, Z]``."""
    dtype = _dtype(scores, topics, object_topics)
    index, valid = ranked_top_k(scores, mask, k)
    in_zo = object_topics > 0
    top = topics.to(dtype).gather(1, index.unsqueeze(-1).expand(-1, -1, topics.shape[2]))
    top = top * (valid.unsqueeze(-1) & in_zo.unsqueeze(1))
    return top, in_zo, valid


def candidate_topics(tags: Tensor, mask: Tensor, table: Tensor) -> Tensor:
    """``p(z | t)`` of every candidate, ``[B, L, Z]``, gathered from a ``[n, Z]`` table.

    Args:
        tags: ``[B, L]`` candidate codes (``CandidateSet.tags``; ``-1`` at padding).
        mask: ``[B, L]`` bool, True at real candidates.
        table: ``[n, Z]`` ``p(z | t)`` by code (e.g. from
            ``tagtorch.data.categories.topic_given_tag``, as a tensor). A code ``>= n`` (a text
            term never used as a tag in D) gets 0, as does padding.

    Returns:
        ``[B, L, Z]`` in the dtype and on the device of ``table``.

    Example:
        >>> table = torch.tensor([[1.0, 0.0], [0.25, 0.75]])
        >>> candidate_topics(torch.tensor([[1, 5, -1]]), torch.tensor([[True, True, False]]),
        ...                  table).tolist()
        [[[0.25, 0.75], [0.0, 0.0], [0.0, 0.0]]]
    """
    if tags.shape != mask.shape or tags.ndim != 2 or table.ndim != 2:
        raise ValueError("tags and mask must have shape [B, L] and table [n, Z]")
    tags = tags.to(table.device)
    known = mask.to(table.device) & (tags >= 0) & (tags < table.shape[0])
    out = table[torch.where(known, tags, torch.zeros_like(tags))]
    return out * known.unsqueeze(-1).to(table.dtype)


def alpha_ndcg_at_k(
    scores: Tensor,
    mask: Tensor,
    topics: Tensor,
    object_topics: Tensor,
    k: int = 5,
    alpha: float = 0.5,
    topic_weights: TopicWeights = "uniform",
    empty_target_action: EmptyTargetAction = "skip",
) -> Tensor:
    """alpha-NDCG@k with gains graded by ``p(z | t)`` and a greedy ideal over the candidates.

    The reading is in the module docstring (Belém et al., Section 5.2; Clarke et al. 2008).

    Args:
        scores: ``[B, L]`` scores; mask: ``[B, L]`` bool.
        mask: see ``scores``.
        topics: ``[B, L, Z]`` ``p(z | t)`` of each candidate.
        object_topics: ``[B, Z]`` ``p(z | o)``; its support is ``Z_o``.
        k: the cut-off, from 1 to :data:`~tagtorch.metrics.functional.MAX_CUTOFF`.
        alpha: redundancy penalty in ``[0, 1]``.
        topic_weights: ``"uniform"`` (each topic of ``Z_o`` weighs 1, as ndeval) or
            ``"object"`` (weighted by ``p(z | o)``).
        empty_target_action: for an empty ``Z_o`` or a zero ideal DCG.

    Returns:
        ``[B]`` alpha-NDCG@k.

    Example:
        >>> topics = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
        >>> value = alpha_ndcg_at_k(torch.tensor([[3.0, 2.0, 1.0]]), torch.ones(1, 3).bool(),
        ...                         topics, torch.tensor([[0.5, 0.5]]), k=2)
        >>> round(value.item(), 4)  # (1 + 0.5 / log2(3)) / (1 + 1 / log2(3))
        0.8066
    """
    check_topics(scores, mask, topics, object_topics)
    check_k(k, at_most=MAX_CUTOFF)
    _check_action(empty_target_action)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    if topic_weights not in ("uniform", "object"):
        raise ValueError(f"topic_weights must be 'uniform' or 'object', got {topic_weights!r}")
    top, in_zo, _ = _top_topics(scores, mask, topics, object_topics, k)
    dtype, device = top.dtype, top.device
    weights = in_zo.to(dtype) if topic_weights == "uniform" else object_topics.to(dtype)
    keep = 1.0 - alpha
    seen = torch.cumsum(top, dim=1) - top  # c_z before each rank
    gains = (weights.unsqueeze(1) * top * torch.pow(torch.as_tensor(keep, dtype=dtype), seen))
    ranks = torch.arange(1, top.shape[1] + 1, dtype=dtype, device=device)
    dcg = (gains.sum(-1) * dcg_discount(ranks)).sum(-1)
    # Greedy ideal over the real candidates: k steps over [B, L, Z].
    b, length, _ = topics.shape
    cand = topics.to(dtype) * (mask.unsqueeze(-1) & in_zo.unsqueeze(1)) * weights.unsqueeze(1)
    raw = topics.to(dtype) * (mask.unsqueeze(-1) & in_zo.unsqueeze(1))
    free = mask.clone()
    covered = torch.zeros(b, topics.shape[2], dtype=dtype, device=device)
    ideal = torch.zeros(b, dtype=dtype, device=device)
    low = torch.full((), -math.inf, dtype=dtype, device=device)
    rows = torch.arange(b, device=device)
    for step in range(min(k, length)):
        gain = (cand * torch.pow(torch.as_tensor(keep, dtype=dtype), covered).unsqueeze(1)).sum(-1)
        pick = torch.where(free, gain, low).argmax(-1)  # first maximum: candidate order
        ok = free[rows, pick]
        ideal = ideal + torch.where(ok, gain[rows, pick], torch.zeros_like(ideal)) / math.log2(
            step + 2)
        covered = covered + raw[rows, pick] * ok.unsqueeze(-1)
        free[rows, pick] = False
    empty = ~in_zo.any(-1) | (ideal <= 0)
    value = dcg / torch.where(ideal > 0, ideal, torch.ones_like(ideal))
    return _empty(value, empty, empty_target_action, "an empty Z_o or a zero ideal")


def err_ia_at_k(
    scores: Tensor,
    mask: Tensor,
    topics: Tensor,
    object_topics: Tensor,
    k: int = 5,
    empty_target_action: EmptyTargetAction = "skip",
) -> Tensor:
    """Intent-aware expected reciprocal rank at ``k``, intents weighted by ``p(z | o)``.

    ``sum_{z in Z_o} p(z | o) sum_{i <= k} (1 / i) p(z | t_i) prod_{j < i} (1 - p(z | t_j))``
    (Belém et al., Section 5.2; Chapelle et al. 2009). Arguments as
    :func:`alpha_ndcg_at_k`.

    Returns:
        ``[B]`` ERR-IA@k (not normalized).

    Example:
        >>> topics = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
        >>> value = err_ia_at_k(torch.tensor([[3.0, 2.0, 1.0]]), torch.ones(1, 3).bool(),
        ...                     topics, torch.tensor([[0.5, 0.5]]), k=3)
        >>> round(value.item(), 4)  # 0.5 * 1 + 0.5 * 1 / 3
        0.6667
    """
    check_topics(scores, mask, topics, object_topics)
    check_k(k, at_most=MAX_CUTOFF)
    _check_action(empty_target_action)
    top, in_zo, _ = _top_topics(scores, mask, topics, object_topics, k)
    # prod_{j < i} (1 - p(z | t_j)): an exclusive product (no division, exact where p = 1)
    survive = torch.cat([torch.ones_like(top[:, :1]), torch.cumprod(1.0 - top, dim=1)[:, :-1]],
                        dim=1)
    ranks = torch.arange(1, top.shape[1] + 1, dtype=top.dtype, device=top.device)
    per_topic = (top * survive / ranks.view(1, -1, 1)).sum(1)  # [B, Z]
    value = (object_topics.to(top.dtype) * in_zo * per_topic).sum(-1)
    return _empty(value, ~in_zo.any(-1), empty_target_action, "an empty Z_o")


def s_recall_at_k(
    scores: Tensor,
    mask: Tensor,
    topics: Tensor,
    object_topics: Tensor,
    k: int = 5,
    soft: bool = False,
    empty_target_action: EmptyTargetAction = "skip",
) -> Tensor:
    """Subtopic recall at ``k``: the share of ``Z_o`` covered by the top ``k`` tags.

    A topic is covered by a tag with ``p(z | t) > 0``; ``soft=True`` counts it with
    probability ``1 - prod_{i <= k} (1 - p(z | t_i))`` (Belém et al., Section 5.2; Zhai et
    al. 2003). Other arguments as :func:`alpha_ndcg_at_k`.

    Returns:
        ``[B]`` S-recall@k.

    Example:
        >>> topics = torch.tensor([[[0.5, 0.0], [0.5, 0.0], [0.0, 1.0]]])
        >>> args = (torch.tensor([[3.0, 2.0, 1.0]]), torch.ones(1, 3).bool(), topics,
        ...         torch.tensor([[0.5, 0.5]]))
        >>> round(s_recall_at_k(*args, k=2).item(), 4), round(
        ...     s_recall_at_k(*args, k=2, soft=True).item(), 4)
        (0.5, 0.375)
    """
    check_topics(scores, mask, topics, object_topics)
    check_k(k, at_most=MAX_CUTOFF)
    _check_action(empty_target_action)
    top, in_zo, _ = _top_topics(scores, mask, topics, object_topics, k)
    covered = 1.0 - torch.prod(1.0 - top, dim=1) if soft else (top > 0).any(1).to(top.dtype)
    n_topics = in_zo.sum(-1)
    value = (covered * in_zo).sum(-1) / n_topics.clamp(min=1).to(top.dtype)
    return _empty(value, n_topics == 0, empty_target_action, "an empty Z_o")


def tag_incidence(tag_ids: Tensor, object_ids: Tensor, n_tags: int, n_objects: int) -> Tensor:
    """The sparse tag-by-object incidence matrix of (tag, object) pairs, duplicates merged.

    Args:
        tag_ids: ``[nnz]`` tag code of each assignment (e.g. D's ``train_tags.values``).
        object_ids: ``[nnz]`` object code (row in D) of each assignment (``train_tags.row_ids``).
        n_tags: number of tag codes; n_objects: number of objects (``|O|``).
        n_objects: see ``n_tags``.

    Returns:
        ``[n_tags, n_objects]`` sparse CSR float32 matrix, 1 where the object has the tag,
        on the inputs' device.

    Example:
        >>> inc = tag_incidence(torch.tensor([0, 0, 1, 0]), torch.tensor([0, 1, 1, 0]), 3, 2)
        >>> inc.to_dense().tolist()
        [[1.0, 1.0], [0.0, 1.0], [0.0, 0.0]]
    """
    tag_ids = torch.as_tensor(tag_ids, dtype=torch.long)
    object_ids = torch.as_tensor(object_ids, dtype=torch.long, device=tag_ids.device)
    if tag_ids.shape != object_ids.shape or tag_ids.ndim != 1:
        raise ValueError("tag_ids and object_ids must be 1-d tensors of the same length")
    if len(tag_ids) and (int(tag_ids.min()) < 0 or int(tag_ids.max()) >= n_tags
                         or int(object_ids.min()) < 0 or int(object_ids.max()) >= n_objects):
        raise ValueError("a tag or object id is out of range")
    key = torch.unique(tag_ids * n_objects + object_ids)  # sorted: by tag, then object
    rows, cols = key // n_objects, key % n_objects
    crow = torch.zeros(n_tags + 1, dtype=torch.long, device=tag_ids.device)
    crow[1:] = torch.cumsum(torch.bincount(rows, minlength=n_tags), 0)
    values = torch.ones(len(key), dtype=torch.float32, device=tag_ids.device)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(crow, cols, values, size=(n_tags, n_objects),
                                       check_invariants=False)


def jaccard_distance(tag_ids: Tensor, incidence: Tensor, valid: Tensor | None = None,
                     chunk_size: int = 2048) -> Tensor:
    """Pairwise ``1 - Jaccard`` distance of the object sets of each list's tags.

    ``dist(c, c') = 1 - |O_c & O_c'| / |O_c | O_c'|``, 1 when both sets are empty (Belém et al.,
    Section 4.1). Intersections are counted from the incidence's nonzeros, ``chunk_size`` lists
    at a time (memory: the nonzeros of a chunk's tags, times ``k^2``), on the inputs' device.

    Args:
        tag_ids: ``[B, k]`` tag codes (e.g. of the top ``k`` of :func:`ranked_top_k`).
        incidence: ``[n_tags, n_objects]`` sparse (CSR or COO) or dense 0/1 matrix
            (:func:`tag_incidence`).
        valid: ``[B, k]`` bool, False for padding (an invalid tag has an empty set); None: all.
        chunk_size: lists per step.

    Returns:
        ``[B, k, k]`` float32 distances (the diagonal is 0 for a tag in some object, else 1).

    Example:
        >>> inc = tag_incidence(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 1, 2]), 3, 3)
        >>> d = jaccard_distance(torch.tensor([[0, 1, 2]]), inc)
        >>> [[round(v, 4) for v in row] for row in d[0].tolist()]
        [[0.0, 0.6667, 1.0], [0.6667, 0.0, 1.0], [1.0, 1.0, 1.0]]
    """
    if tag_ids.ndim != 2:
        raise ValueError(f"tag_ids must have shape [B, k], got {tuple(tag_ids.shape)}")
    if incidence.layout not in (torch.sparse_coo, torch.strided, torch.sparse_csr):
        raise ValueError(f"incidence must be a dense, COO or CSR matrix, got {incidence.layout}")
    if incidence.layout != torch.sparse_csr:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            source = incidence.coalesce() if incidence.layout == torch.sparse_coo else incidence
            incidence = source.to_sparse_csr()
    device = tag_ids.device
    crow = incidence.crow_indices().to(device)
    col = incidence.col_indices().to(device)
    n_tags, n_objects = incidence.shape
    b, k = tag_ids.shape
    if valid is None:
        valid = torch.ones_like(tag_ids, dtype=torch.bool)
    ids = torch.where(valid, tag_ids, torch.zeros_like(tag_ids)).long()
    if bool(((ids < 0) | (ids >= n_tags)).any()):
        raise ValueError(f"a tag id is out of range [0, {n_tags})")
    start = crow[ids]
    length = (crow[ids + 1] - start) * valid
    out = torch.empty(b, k, k, dtype=torch.float32, device=device)
    for lo in range(0, b, chunk_size):
        hi = min(b, lo + chunk_size)
        n = hi - lo
        st, ln = start[lo:hi].reshape(-1), length[lo:hi].reshape(-1)
        total = int(ln.sum())
        entry_row = torch.repeat_interleave(torch.arange(n * k, device=device), ln)
        first = torch.cumsum(ln, 0) - ln
        within = torch.arange(total, device=device) - first[entry_row]
        objects = col[st[entry_row] + within]
        lst, pos = entry_row // k, entry_row % k
        uniq, inverse = torch.unique(lst * n_objects + objects, return_inverse=True)
        member = torch.zeros(len(uniq), k, dtype=torch.float32, device=device)
        member[inverse, pos] = 1.0
        inter = torch.zeros(n, k, k, dtype=torch.float32, device=device)
        inter.index_add_(0, uniq // n_objects, member.unsqueeze(2) * member.unsqueeze(1))
        size = ln.view(n, k).to(torch.float32)
        out[lo:hi] = jaccard_from_counts(inter, size.unsqueeze(2), size.unsqueeze(1))
    return out


def jaccard_from_counts(intersection: Tensor, size_a: Tensor, size_b: Tensor) -> Tensor:
    """``1 - |A & B| / |A | B|`` from the set sizes and their intersection, 1 when both are empty.

    The distance of Belém et al. (Section 4.1) between two tags' sets of training objects;
    :func:`jaccard_distance` counts the intersections from an incidence matrix, the candidate
    generator from its co-occurrence counts.

    Args:
        intersection: ``|A & B|``, any shape broadcastable with the sizes.
        size_a: ``|A|``.
        size_b: ``|B|``.

    Returns:
        The broadcast distances, float32 (float64 if any input is float64).

    Example:
        >>> d = jaccard_from_counts(torch.tensor([1, 0, 0]), torch.tensor([2, 1, 0]),
        ...                         torch.tensor([2, 1, 0]))
        >>> [round(v, 4) for v in d.tolist()]
        [0.6667, 1.0, 1.0]
    """
    dtype = _dtype(intersection, size_a, size_b)
    inter = intersection.to(dtype)
    union = size_a.to(dtype) + size_b.to(dtype) - inter
    return torch.where(union > 0, 1.0 - inter / union.clamp(min=1), torch.ones_like(union))


def intra_list_distance(distance: Tensor, valid: Tensor, pairs: Pairs = "present",
                        empty_target_action: EmptyTargetAction = "skip",
                        k: int | None = None) -> Tensor:
    """Mean pairwise distance of each list's (top-k) tags: the AILD of Belém et al.

    Args:
        distance: ``[B, k, k]`` symmetric distances between the list's tags.
        valid: ``[B, k]`` bool, True for a real tag.
        pairs: divide by the real pairs ``n (n - 1) / 2`` (``"present"``) or by
            ``(k^2 - k) / 2`` (``"k"``, the paper's ``K``, penalizing short lists).
        empty_target_action: for a list with fewer than two real tags.
        k: the cut-off in ``K`` (``pairs="k"``); None: the width of ``valid``.

    Returns:
        ``[B]`` the mean distance.

    Example:
        >>> d = torch.tensor([[[0.0, 0.5, 1.0], [0.5, 0.0, 0.0], [1.0, 0.0, 0.0]]])
        >>> round(intra_list_distance(d, torch.tensor([[True, True, True]])).item(), 4)
        0.5
    """
    if distance.ndim != 3 or distance.shape[1:] != (valid.shape[1],) * 2:
        raise ValueError("distance must have shape [B, k, k] matching valid [B, k]")
    if pairs not in ("present", "k"):
        raise ValueError(f"pairs must be 'present' or 'k', got {pairs!r}")
    _check_action(empty_target_action)
    width = valid.shape[1]
    k = width if k is None else k
    both = valid.unsqueeze(2) & valid.unsqueeze(1)
    upper = torch.ones(width, width, dtype=torch.bool, device=valid.device).triu(1)
    dtype = _dtype(distance)
    total = (distance.to(dtype) * (both & upper)).sum((1, 2))
    n = valid.sum(-1)
    present = (n * (n - 1) // 2).to(dtype)
    divisor = present if pairs == "present" else torch.full_like(present, k * (k - 1) / 2)
    value = total / divisor.clamp(min=1)
    return _empty(value, present == 0, empty_target_action, "fewer than two tags")


def aild_at_k(
    scores: Tensor,
    mask: Tensor,
    tag_ids: Tensor,
    incidence: Tensor | Callable[[Tensor, Tensor], Tensor],
    k: int = 5,
    pairs: Pairs = "present",
    empty_target_action: EmptyTargetAction = "skip",
) -> Tensor:
    """Average intra-list distance of the top ``k`` tags (Belém et al., Section 4.1).

    Args:
        scores: ``[B, L]`` scores; mask: ``[B, L]`` bool.
        mask: see ``scores``.
        tag_ids: ``[B, L]`` tag code of each candidate.
        incidence: the tag-by-training-object matrix of :func:`tag_incidence` (distances by
            :func:`jaccard_distance`), or a callable ``(top_tag_ids [B, k], valid [B, k]) ->
            [B, k, k]`` computing another distance.
        k: the cut-off; pairs, empty_target_action: as :func:`intra_list_distance`.
        pairs: see ``k``.
        empty_target_action: see ``k``.

    Returns:
        ``[B]`` AILD@k.

    Example:
        >>> inc = tag_incidence(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 1, 2]), 3, 3)
        >>> value = aild_at_k(torch.tensor([[0.9, 0.8, 0.1]]), torch.ones(1, 3).bool(),
        ...                   torch.tensor([[0, 1, 2]]), inc, k=2)
        >>> round(value.item(), 4)  # 1 - |{1}| / |{0, 1, 2}|
        0.6667
    """
    _check_ranking(scores, mask)
    if tag_ids.shape != scores.shape:
        raise ValueError(f"tag_ids must have shape {tuple(scores.shape)}, "
                         f"got {tuple(tag_ids.shape)}")
    index, valid = ranked_top_k(scores, mask, k)
    top_ids = tag_ids.gather(1, index)
    if callable(incidence) and not isinstance(incidence, Tensor):
        distance = incidence(top_ids, valid)
    else:
        distance = jaccard_distance(top_ids, incidence, valid)
    return intra_list_distance(distance, valid, pairs, empty_target_action, k)


def inverse_tag_frequency(tag_counts: Tensor, n_objects: int) -> Tensor:
    """``IFF(c) = log((|O| + 1) / (f(c) + 1))`` (Belém et al., Section 4.1).

    Args:
        tag_counts: ``f(c)``, the training objects tagged ``c`` (any shape, ``>= 0``).
        n_objects: ``|O|``, the training objects.

    Returns:
        The IFF values (float64 if ``tag_counts`` is float64, else float32).

    Example:
        >>> [round(v, 4) for v in inverse_tag_frequency(torch.tensor([0, 3]), 3).tolist()]
        [1.3863, 0.0]
    """
    counts = tag_counts.to(_dtype(tag_counts))
    return torch.log((n_objects + 1.0) / (counts + 1.0))


def aip_at_k(
    scores: Tensor,
    mask: Tensor,
    tag_counts: Tensor,
    n_objects: int,
    k: int = 5,
    max_iff: float | None = None,
    empty_target_action: EmptyTargetAction = "skip",
) -> Tensor:
    """Average inverse popularity of the top ``k`` tags (Belém et al., Section 4.1).

    The mean of ``IFF(c) / max IFF`` over the real tags in the top ``k``.

    Args:
        scores: ``[B, L]`` scores; mask: ``[B, L]`` bool.
        mask: see ``scores``.
        tag_counts: ``[B, L]`` ``f(c)`` of each candidate: the training objects tagged ``c``.
        n_objects: ``|O|``, the number of training objects.
        k: the cut-off.
        max_iff: the normalizer; None: ``log(|O| + 1)``, the IFF of a tag unseen in training.
        empty_target_action: for a list with no real candidate.

    Returns:
        ``[B]`` AIP@k.

    Example:
        >>> value = aip_at_k(torch.tensor([[0.9, 0.8]]), torch.ones(1, 2).bool(),
        ...                  torch.tensor([[0, 3]]), n_objects=3, k=5)
        >>> round(value.item(), 4)  # (1 + 0) / 2
        0.5
    """
    _check_ranking(scores, mask)
    _check_action(empty_target_action)
    if tag_counts.shape != scores.shape:
        raise ValueError(f"tag_counts must have shape {tuple(scores.shape)}, "
                         f"got {tuple(tag_counts.shape)}")
    if n_objects < 1:
        raise ValueError(f"n_objects must be >= 1, got {n_objects!r}")
    norm = math.log(n_objects + 1.0) if max_iff is None else float(max_iff)
    if not norm > 0:
        raise ValueError(f"max_iff must be > 0, got {max_iff!r}")
    index, valid = ranked_top_k(scores, mask, k)
    iff = inverse_tag_frequency(tag_counts.gather(1, index), n_objects) / norm
    n = valid.sum(-1)
    value = (iff * valid).sum(-1) / n.clamp(min=1)
    return _empty(value, n == 0, empty_target_action, "no candidate")


def diversity_metrics(
    scores: Tensor,
    mask: Tensor,
    topics: Tensor,
    object_topics: Tensor,
    k: int = 5,
    alpha: float = 0.5,
    tag_ids: Tensor | None = None,
    incidence: Tensor | Callable[[Tensor, Tensor], Tensor] | None = None,
    tag_counts: Tensor | None = None,
    n_objects: int | None = None,
    soft_recall: bool = False,
    empty_target_action: EmptyTargetAction = "skip",
) -> dict[str, Tensor]:
    """The diversity metrics of Belém et al. at one cut-off, per list.

    Keys ``alpha_ndcg@k``, ``err_ia@k``, ``s_recall@k`` always; ``aild@k`` when ``tag_ids``
    and ``incidence`` are given; ``aip@k`` when ``tag_counts`` and ``n_objects`` are given.
    Arguments as the single metrics (uniform topic weights in alpha-NDCG, ``pairs="present"``
    in AILD, ``max IFF = log(|O| + 1)`` in AIP).

    Returns:
        ``[B]`` values by key.
    """
    out = {
        f"alpha_ndcg@{k}": alpha_ndcg_at_k(scores, mask, topics, object_topics, k, alpha,
                                           empty_target_action=empty_target_action),
        f"err_ia@{k}": err_ia_at_k(scores, mask, topics, object_topics, k,
                                   empty_target_action=empty_target_action),
        f"s_recall@{k}": s_recall_at_k(scores, mask, topics, object_topics, k, soft_recall,
                                       empty_target_action=empty_target_action),
    }
    if tag_ids is not None and incidence is not None:
        out[f"aild@{k}"] = aild_at_k(scores, mask, tag_ids, incidence, k,
                                     empty_target_action=empty_target_action)
    if tag_counts is not None and n_objects is not None:
        out[f"aip@{k}"] = aip_at_k(scores, mask, tag_counts, n_objects, k,
                                   empty_target_action=empty_target_action)
    return out
