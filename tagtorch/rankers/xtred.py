"""xTReD, the explicit Tag Recommendation Diversifier (Belém et al.): its batched greedy core.

xTReD (Algorithm 1 of the paper) re-ranks the top ``τ`` tags of a relevance-driven base ranking
``C_o`` so that they cover the object's topics ``Z_o`` (its categories) early, in the manner of
xQuAD (Santos et al., WWW 2010). Starting from an empty ``S``, it moves to ``S``, one at a time,
the unselected tag of the top ``τ`` that maximizes (Equation 2)

    f(o, t, S) = (1 - λ) p(t | o)
                 + λ sum_{z in Z_o} p(z | o) p(t | o, z) prod_{t' in S} (1 - p(t' | o, z)),

until ``S`` holds ``min(τ, |C_o|)`` tags; ``S`` in selection order is the new head of the
ranking, and the rest of ``C_o`` follows in its base order. ``λ`` trades relevance (``λ = 0``:
the base ranking unchanged) for diversity; the paper's best is ``λ = 1`` with ``τ = 25``.

Readings (the extraction of the paper lost the second half of Equation 2 and the definition of
``p(t | o, z)``; tagtorch's readings, with the alternatives as options):

- ``p(t | o) = 1 / r_t``, ``r_t`` the rank of ``t`` in the base ranking (Section 4.2.2), ranks
  starting at 1, by the convention of :mod:`tagtorch.metrics.functional` (score descending,
  ties by candidate position). Not renormalized over the top ``τ``.
- ``p(t | o, z) = p(t | o) p(z | t)`` (``coverage="joint"``, default): Section 6.1 says this
  probability "is part of the diversity component of Equation (2), representing the probability
  that tag t is related to both topic z and object o", and that it makes xTReD promote relevant
  tags even at ``λ = 1``. ``coverage="topic"`` takes ``p(t | o, z) = p(z | t)`` alone (topic
  coverage without the relevance factor).
- ``p(z | t) = f(z, t) / f(t)`` on the training objects D
  (:func:`tagtorch.data.categories.topic_given_tag`), given here per candidate as
  ``tag_topics``; ``p(z | o)`` is given as ``object_topics``: uniform over ``Z_o`` or
  proportional to the input tags' ``p(z | t)`` (``topic_given_object`` of
  :mod:`tagtorch.data.categories`). An object with an empty ``Z_o`` keeps its base order.
- Ties in ``f`` (e.g. at ``λ = 1``, tags related to no topic of ``Z_o``) go to the better base
  rank. Ties are exact float ties: values equal in exact arithmetic but not after rounding
  (e.g. ``0.6 + 0.4`` against ``0.8 + 0.2`` in float32) are decided by the rounding.
- ``τ`` counts ranking positions: a list with fewer than ``τ`` candidates is permuted whole.

The greedy steps run over all objects at once: ``τ`` steps on ``[B, τ, Z]`` tensors, on the
inputs' device, in float64.

:class:`XTReD` is the method as a ranker: a base ranker built from its config (LATRE+wTS, RF,
GP, any :class:`~tagtorch.rankers.base.BaseRanker`) is fitted on V and its scores are
re-ranked by :func:`xtred_rerank` with the topics the candidate sets carry (``tag_topics``,
``object_topics``: :class:`~tagtorch.candidates.diversity_topics.ObjectTopics`, enabled by
``candidates=latre_diverse``). ``λ`` is fixed, or tuned on V over a grid by the relevance rule
of the paper ("maximize diversity without harming relevance", Section 5.3; Figure 2 shows the
diversity rising with ``λ``): the **largest** ``λ`` of the grid whose mean NDCG@k on V is at
least ``(1 - max_loss)`` times that of ``λ = 0`` (the base ranking), ``max_loss = 3%``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self

import torch
from torch import Tensor

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.errors import UnreadableFileError
from tagtorch.metrics.diversity import alpha_ndcg_at_k, check_topics
from tagtorch.metrics.functional import ndcg_at_k, rank_order
from tagtorch.rankers.base import RANKER_MODULES, BaseRanker
from tagtorch.settings import build_trusted
from tagtorch.storage import plain_json

__all__ = ["Coverage", "XTReD", "xtred_order", "xtred_rerank"]

log = logging.getLogger(__name__)

BASE_FOLDER = "base"
"""The subfolder of a saved :class:`XTReD` holding its saved base ranker."""

Coverage = Literal["joint", "topic"]
"""The reading of ``p(t | o, z)``: ``p(t | o) p(z | t)`` (``"joint"``) or ``p(z | t)``."""


def _check(order_scores: Tensor, mask: Tensor, tag_topics: Tensor, object_topics: Tensor,
           lam: float, tau: int, coverage: str) -> None:
    check_topics(order_scores, mask, tag_topics, object_topics)
    if isinstance(lam, bool) or not isinstance(lam, int | float) or not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be a number in [0, 1], got {lam!r}")
    if isinstance(tau, bool) or not isinstance(tau, int) or tau < 1:
        raise ValueError(f"tau must be an int >= 1, got {tau!r}")
    if coverage not in ("joint", "topic"):
        raise ValueError(f"coverage must be 'joint' or 'topic', got {coverage!r}")


def xtred_order(
    order_scores: Tensor,
    mask: Tensor,
    tag_topics: Tensor,
    object_topics: Tensor,
    lam: float,
    tau: int = 25,
    coverage: Coverage = "joint",
) -> Tensor:
    """The xTReD ranking of each list, as candidate positions (Belém et al., Algorithm 1).

    Args:
        order_scores: ``[B, L]`` the base ranker's scores (only their order matters).
        mask: ``[B, L]`` bool, True for a real candidate.
        tag_topics: ``[B, L, Z]`` ``p(z | t)`` of each candidate, in ``[0, 1]``.
        object_topics: ``[B, Z]`` ``p(z | o)``, 0 outside ``Z_o``.
        lam: ``λ`` in ``[0, 1]``, the weight of diversity.
        tau: ``τ >= 1``, the number of base-ranked positions re-ranked (the paper: 25).
        coverage: the reading of ``p(t | o, z)`` (module docstring).

    Returns:
        ``[B, L]`` long: candidate positions in the new rank order, padding last.

    Raises:
        ValueError: on bad shapes or values.

    Example:
        The paper's example: ``Z_o = {Rock, Pop}``, ``p(z | o) = 1/2``, base order rock,
        indie, pop, 80s; at ``λ = 1`` pop moves up to the second place.

        >>> topics = torch.tensor([[[0.8, 0.2], [0.6, 0.4], [0.1, 0.9], [0.5, 0.5]]])
        >>> scores, mask = torch.tensor([[4.0, 3.0, 2.0, 1.0]]), torch.ones(1, 4).bool()
        >>> xtred_order(scores, mask, topics, torch.tensor([[0.5, 0.5]]), lam=1.0).tolist()
        [[0, 2, 1, 3]]
    """
    _check(order_scores, mask, tag_topics, object_topics, lam, tau, coverage)
    b, length = order_scores.shape
    device = order_scores.device
    if length == 0:
        return torch.zeros(b, 0, dtype=torch.long, device=device)
    base = rank_order(order_scores, mask)  # [B, L]
    width = min(tau, length)
    window = base[:, :width]  # [B, τ']
    real = mask.gather(1, window)  # a prefix of each row: padding is ranked last
    dtype = torch.float64
    relevance = 1.0 / torch.arange(1, width + 1, dtype=dtype, device=device)  # p(t | o)
    topics = tag_topics.to(dtype).gather(
        1, window.unsqueeze(-1).expand(-1, -1, tag_topics.shape[2]))  # p(z | t), [B, τ', Z]
    p_toz = topics * relevance.view(1, -1, 1) if coverage == "joint" else topics
    p_toz = p_toz * real.unsqueeze(-1)
    weights = object_topics.to(dtype).unsqueeze(1)  # p(z | o), 0 outside Z_o
    novelty = torch.ones(b, tag_topics.shape[2], dtype=dtype, device=device)  # prod (1 - p)
    selected = torch.zeros(b, width, dtype=torch.bool, device=device)
    picks = torch.empty(b, width, dtype=torch.long, device=device)
    never = torch.full((), -torch.inf, dtype=dtype, device=device)
    below = torch.full((), -1.0, dtype=dtype, device=device)  # f >= 0 for every real tag
    rows = torch.arange(b, device=device)
    for step in range(width):
        diversity = (weights * p_toz * novelty.unsqueeze(1)).sum(-1)
        f = (1.0 - lam) * relevance + lam * diversity  # [B, τ']
        # Real unselected tags by f; then padding, in order; argmax takes the first maximum,
        # so ties go to the better base rank.
        key = torch.where(selected, never, torch.where(real, f, below))
        pick = key.argmax(-1)
        picks[:, step] = pick
        selected[rows, pick] = True
        novelty = novelty * (1.0 - p_toz[rows, pick])  # p_toz is 0 at padding
    return torch.cat([window.gather(1, picks), base[:, width:]], dim=1)


def xtred_rerank(
    order_scores: Tensor,
    mask: Tensor,
    tag_topics: Tensor,
    object_topics: Tensor,
    lam: float,
    tau: int = 25,
    coverage: Coverage = "joint",
) -> Tensor:
    """Scores whose ranking is the xTReD order of :func:`xtred_order` (Belém et al., Eq. 2).

    Arguments as :func:`xtred_order`.

    Returns:
        ``[B, L]`` float32 scores: ``L - q`` for the candidate at new rank ``q`` (from 0), so
        all distinct and ``>= 1``; 0 at padding. Ranking them by the convention of
        :mod:`tagtorch.metrics.functional` gives the xTReD order.

    Example:
        >>> topics = torch.tensor([[[0.8, 0.2], [0.6, 0.4], [0.1, 0.9], [0.5, 0.5]]])
        >>> scores, mask = torch.tensor([[4.0, 3.0, 2.0, 1.0]]), torch.ones(1, 4).bool()
        >>> xtred_rerank(scores, mask, topics, torch.tensor([[0.5, 0.5]]), lam=1.0).tolist()
        [[4.0, 2.0, 3.0, 1.0]]
    """
    order = xtred_order(order_scores, mask, tag_topics, object_topics, lam, tau, coverage)
    b, length = order.shape
    values = torch.arange(length, 0, -1, dtype=torch.float32, device=order.device).expand(b, -1)
    out = torch.zeros(b, length, dtype=torch.float32, device=order.device)
    out.scatter_(1, order, values)
    return torch.where(mask, out, torch.zeros_like(out))


class XTReD(BaseRanker):
    """xTReD (Belém et al.) around a base ranker: its top ``τ`` re-ranked for topic coverage.

    Scoring needs candidate sets with topics (``candidates=latre_diverse``): a batch without
    them is refused with a ValueError (never silently the base ranking).

    Args:
        base: the base ranker's config (``_target_`` and its settings, a tagtorch ranker built
            by :func:`~tagtorch.settings.build_trusted`: nothing nested is built but its
            factories), e.g. ``{"_target_": "tagtorch.rankers.trees.RandomForestRanker"}``.
        lam: ``λ`` in [0, 1] used when ``lam_grid`` is None (the paper's best: 1).
        tau: ``τ``, the base-ranked positions re-ranked (the paper: 25).
        lam_grid: ``λ`` values tried on V (module docstring); None: ``lam`` is used.
        max_loss: the relevance rule's largest relative NDCG@k loss on V against ``λ = 0``.
        k: the NDCG cut-off of the rule (the paper: 5).
        coverage: the reading of ``p(t | o, z)`` (:func:`xtred_order`).
        batch_size: lists re-ranked at once when tuning.

    Attributes:
        lam_: the ``λ`` in use after :meth:`fit`.
        tuning_: ``[(λ, V NDCG@k, V alpha-NDCG@k)]`` over the grid (empty without tuning):
            the relevance-diversity trade-off on V (the paper's Figure 2).
        diversify_seconds: seconds spent re-ranking in :meth:`score` so far (the base
            ranker's scoring excluded).
    """

    lam: float
    tau: int
    max_loss: float
    k: int
    coverage: Coverage
    batch_size: int

    config_settings = frozenset({"base"})

    tuned_setting = "lam"
    """The setting ``tuning_`` varies (the trade-off figure labels its points with it)."""

    def __init__(self, base: Mapping[str, Any], lam: float = 1.0, tau: int = 25,
                 lam_grid: Sequence[float] | None = None, max_loss: float = 0.03, k: int = 5,
                 coverage: Coverage = "joint", batch_size: int = 4096) -> None:
        self.base = plain_json(base)
        self.base_ranker: BaseRanker = build_trusted(self.base, RANKER_MODULES,
                                                     (BaseRanker,), "base")
        if isinstance(self.base_ranker, XTReD):
            raise ValueError(f"base: {self.base['_target_']!r} is not a BaseRanker to diversify")
        for value in [lam, *(lam_grid or [])]:
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not 0.0 <= value <= 1.0:
                raise ValueError(f"lam and lam_grid values must be numbers in [0, 1], "
                                 f"got {value!r}")
        if lam_grid is not None and len(lam_grid) == 0:
            raise ValueError("lam_grid must hold at least one value (or be null)")
        if isinstance(tau, bool) or not isinstance(tau, int) or tau < 1:
            raise ValueError(f"tau must be an int >= 1, got {tau!r}")
        if not 0.0 <= max_loss < 1.0:
            raise ValueError(f"max_loss must be in [0, 1), got {max_loss!r}")
        if coverage not in ("joint", "topic"):
            raise ValueError(f"coverage must be 'joint' or 'topic', got {coverage!r}")
        self.lam_grid = None if lam_grid is None else [float(v) for v in lam_grid]
        self.lam_: float | None = None
        self.tuning_: list[tuple[float, float, float]] = []
        self.diversify_seconds = 0.0

    @staticmethod
    def _topics(batch: CandidateSet) -> tuple[Tensor, Tensor]:
        if batch.tag_topics is None or batch.object_topics is None:
            raise ValueError("xTReD needs candidate sets with topics (tag_topics, "
                             "object_topics): use candidates=latre_diverse")
        return batch.tag_topics, batch.object_topics

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Fits the base ranker on ``train`` (V), then tunes ``λ`` on it if a grid is given."""
        self._topics(train)
        self.base_ranker.fit(train, val)
        self.feature_names_ = tuple(train.feature_names)
        if self.lam_grid is None:
            self.lam_ = float(self.lam)
            return self
        with torch.no_grad():
            base = torch.cat([self.base_ranker.score(b).float().cpu()
                              for b in train.batches(self.batch_size)])
        tag_topics, object_topics = self._topics(train)

        def mean(values: Tensor) -> float:
            finite = values[~torch.isnan(values)]
            return float(finite.double().mean()) if finite.numel() else 0.0

        def evaluate(lam: float) -> tuple[float, float, float]:
            scores = base if lam == 0 else xtred_rerank(
                base, train.mask, tag_topics, object_topics, lam, self.tau, self.coverage)
            ndcg = ndcg_at_k(scores, train.labels, train.mask, self.k, train.n_relevant)
            alpha = alpha_ndcg_at_k(scores, train.mask, tag_topics, object_topics, self.k)
            return lam, mean(ndcg), mean(alpha)

        reference = evaluate(0.0)[1]
        self.tuning_ = [evaluate(lam) for lam in sorted(set(self.lam_grid))]
        allowed = [lam for lam, value, _ in self.tuning_
                   if value >= (1.0 - self.max_loss) * reference - 1e-12]
        self.lam_ = max(allowed) if allowed else 0.0
        log.info("xTReD: lambda %.2f (V NDCG@%d, alpha-NDCG@%d by lambda: %s)", self.lam_,
                 self.k, self.k, ", ".join(f"{lam:g}: {v:.4f}, {a:.4f}"
                                           for lam, v, a in self.tuning_))
        return self

    def score(self, batch: CandidateSet) -> Tensor:
        """The base ranker's scores of ``batch``, re-ranked by xTReD: ``[B, L]``."""
        self.check_features(batch)
        if self.lam_ is None:
            raise RuntimeError("call fit() before score()")
        tag_topics, object_topics = self._topics(batch)
        base = self.base_ranker.score(batch)
        if base.device.type == "cuda":
            torch.cuda.synchronize(base.device)
        start = time.perf_counter()
        out = xtred_rerank(base, batch.mask, tag_topics.to(base.device),
                           object_topics.to(base.device), self.lam_, self.tau, self.coverage)
        if out.device.type == "cuda":
            torch.cuda.synchronize(out.device)
        self.diversify_seconds += time.perf_counter() - start
        return out

    # -- save / load: the base ranker in a subfolder, λ in the manifest -----------------------

    def is_fitted(self) -> bool:
        """Whether the base ranker is fitted and ``λ`` chosen."""
        return self.feature_names_ is not None and self.lam_ is not None

    def _save_files(self, folder: Path) -> list[str]:
        self.base_ranker.save(folder / BASE_FOLDER)
        return [BASE_FOLDER]

    def _manifest_extras(self) -> dict[str, Any]:
        return {"lam": self.lam_, "tuning": [list(pair) for pair in self.tuning_]}

    def _load_files(self, folder: Path, manifest: Mapping[str, Any]) -> None:
        lam = manifest.get("lam")
        if isinstance(lam, bool) or not isinstance(lam, int | float) or not 0 <= lam <= 1:
            raise UnreadableFileError(f"{folder}: manifest has no lambda in [0, 1] ({lam!r})")
        self.lam_ = float(lam)
        self.tuning_ = [(float(a), float(b), float(c)) for a, b, c in manifest.get("tuning", [])]
        self.base_ranker = type(self.base_ranker).load(folder / BASE_FOLDER)
