"""GP_rnd: the GP ranker for relevant, novel and diverse tags (Belém et al., xTReD paper, Sec. 5).

The second baseline of Belém et al. extends the Genetic Programming ranker
(:class:`~tagtorch.rankers.gp.GPRanker`, Belém et al. SIGIR 2011) in two ways:

- **one more terminal**, the Average Distance to the other Candidates,
  ``ADC(c) = 1 / (n - 1) sum_{c' != c} dist(c, c')`` over the ``n`` real candidates of the
  object's list, with ``dist(c, c') = 1 - |O_c & O_c'| / |O_c | O_c'|`` the Jaccard distance of
  the sets of D objects tagged ``c`` and ``c'`` (1 when both are empty);
- **a fitness that rewards novelty and diversity**: on the training lists (the protocol's V),
  ``(1 - α - β) NDCG@5 + α AIP@5 + β AILD@5`` (``fitness_form="convex"``, default), or
  ``NDCG@5 + α AIP@5 + β AILD@5`` (``"additive"``, the other reading of the garbled text). The
  paper sets ``α = β`` and tunes them on V over ``[0, 0.6]`` (its choices: 0.25 on LastFM,
  0.1 on MovieLens). In the convex form ``α = β > 0.5`` would weigh NDCG negatively (reward
  irrelevant tags), so tagtorch requires ``α + β <= 1`` there and its grids stop at 0.5; the
  additive form takes the paper's whole range.

Readings and deviations (tagtorch's):

- The distances come with the candidate sets (``tag_distance [B, L, L]``, computed by
  :class:`~tagtorch.candidates.latre.LatreCandidates` with ``distances: true``, the
  ``latre_diverse`` candidates) from D's co-occurrence counts. A list with one candidate has
  ``ADC = 0``.
- **AIP@5** in the fitness is the mean ``IFF(c) / max IFF`` over the top 5, with ``IFF`` the
  candidates' ``iff`` feature (``log((|D| + 1) / (f(c) + 1))``, the same definition as the
  metric) and ``max IFF`` the largest ``iff`` among the training candidates (the candidate
  lists do not carry ``|D|``; the metric's ``log(|D| + 1)`` differs from it by a constant
  factor close to 1, which only rescales ``α``). **AILD@5** is the mean pairwise distance of
  the top 5 (:func:`~tagtorch.metrics.diversity.intra_list_distance`). Both are averaged over
  the training lists with one (AIP) or two (AILD) candidates or more; NDCG@5 over the lists
  with a relevant tag, as in the GP fitness.
- **Tuning** (``alpha_grid``): one GP is evolved per grid value (``β = α`` unless ``beta`` is
  set, and ``α = 0`` always, the plain GP fitness, as the reference), each scored on V; the
  ranker keeps the individual of the **largest** ``α`` whose V NDCG@5 is at least
  ``(1 - max_loss)`` times that of ``α = 0``: the relevance rule xTReD's ``λ`` is tuned by
  (:class:`~tagtorch.rankers.xtred.XTReD`). The paper does not say how it tuned ``α``; V is
  also the set the individuals are evolved on, as xTReD's base rankers are fitted on it.
  ``tuning_`` holds ``(α, V NDCG@5, V alpha-NDCG@5)`` per value: the points of the
  trade-off figure.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self

import torch
from torch import Tensor

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.errors import UnreadableFileError
from tagtorch.metrics.diversity import alpha_ndcg_at_k, intra_list_distance
from tagtorch.metrics.functional import ndcg_at_k
from tagtorch.rankers.gp import (
    GPRanker,
    _dcg_at_positions,
    _guard,
    _Lists,
    top_k_positions,
)

__all__ = ["ADC_TERMINAL", "FitnessForm", "GPRndRanker", "average_distance_to_candidates"]

log = logging.getLogger(__name__)

ADC_TERMINAL = "adc"
"""The name of the extra terminal of GP_rnd."""

FitnessForm = Literal["convex", "additive"]
"""``(1 - α - β) NDCG + α AIP + β AILD`` (``"convex"``) or ``NDCG + α AIP + β AILD``."""

IFF_FEATURE = "iff"
"""The feature holding each candidate's IFF (Table I of Canuto et al.)."""


def average_distance_to_candidates(distance: Tensor, mask: Tensor, chunk_size: int = 512
                                   ) -> Tensor:
    """``ADC(c)``: each candidate's mean distance to the other real candidates of its list.

    Args:
        distance: ``[B, L, L]`` pairwise distances (any float dtype; values at padding
            ignored).
        mask: ``[B, L]`` bool, True at real candidates.
        chunk_size: lists converted to float32 at once.

    Returns:
        ``[B, L]`` float32, 0 at padding and in lists with one candidate.

    Example:
        >>> d = torch.tensor([[[0.0, 0.5, 1.0], [0.5, 0.0, 0.2], [1.0, 0.2, 0.0]]])
        >>> adc = average_distance_to_candidates(d, torch.tensor([[True, True, False]]))
        >>> [round(v, 4) for v in adc[0].tolist()]
        [0.5, 0.5, 0.0]
    """
    if distance.ndim != 3 or distance.shape[1:] != (mask.shape[1],) * 2 \
            or distance.shape[0] != mask.shape[0]:
        raise ValueError(f"distance must have shape [B, L, L] matching mask {tuple(mask.shape)}"
                         f", got {tuple(distance.shape)}")
    out = torch.zeros(mask.shape, dtype=torch.float32, device=distance.device)
    length = mask.shape[1]
    eye = torch.eye(length, dtype=torch.bool, device=distance.device)
    for lo in range(0, mask.shape[0], chunk_size):
        real = mask[lo:lo + chunk_size]
        pairs = real.unsqueeze(2) & real.unsqueeze(1) & ~eye
        d = distance[lo:lo + chunk_size].float()
        total = torch.where(pairs, d, torch.zeros_like(d)).sum(-1)
        others = (real.sum(-1, keepdim=True) - 1).clamp(min=1).float()
        out[lo:lo + chunk_size] = torch.where(real, total / others, torch.zeros_like(total))
    return out


class _DiverseLists(_Lists):
    """Training lists for the GP_rnd fitness: NDCG@k, AIP@k and AILD@k of each individual."""

    def __init__(self, lists: CandidateSet, k: int, terminals: Tensor, weights: tuple[float,
                 float, float], max_iff: float) -> None:
        keep = lists.mask.any(-1)
        super().__init__(lists, k, terminals, keep=keep)
        assert lists.tag_distance is not None
        self.useful = self.useful[keep]
        self.distance = lists.tag_distance[keep]
        iff = lists.feature(IFF_FEATURE)[keep].float() / max_iff
        self.iff = torch.where(self.mask, iff, torch.zeros_like(iff))
        self.weights = weights

    def fitness(self, function: Callable[[Tensor], Tensor]) -> float:
        """``w_ndcg NDCG@k + w_aip AIP@k + w_aild AILD@k`` of a compiled tree (means over lists)."""
        scores = function(self.columns).expand(self.mask.shape)
        positions, real = top_k_positions(_guard(scores, self.mask), self.k)
        dcg = _dcg_at_positions(positions, real, self.labels)
        ndcg = torch.where(self.idcg > 0, dcg / self.idcg.clamp(min=1e-12), torch.zeros_like(dcg))
        ndcg_mean = float(ndcg[self.useful].sum()) / self.n_counted if self.n_counted else 0.0
        n = real.sum(-1)
        aip = (self.iff.gather(1, positions) * real).sum(-1) / n.clamp(min=1)
        rows = torch.arange(len(positions), device=positions.device).unsqueeze(1)
        top = self.distance[rows, positions]  # [B, k, L]
        top = top.gather(2, positions.unsqueeze(1).expand(-1, positions.shape[1], -1))
        aild = intra_list_distance(top.float(), real)  # NaN for fewer than two tags
        w_ndcg, w_aip, w_aild = self.weights
        return (w_ndcg * ndcg_mean + w_aip * _mean(aip[n > 0])
                + w_aild * _mean(aild[~torch.isnan(aild)]))


def _check_distances(lists: CandidateSet) -> None:
    """Raises ValueError when candidate sets lack the ``tag_distance`` GP_rnd needs."""
    if lists.tag_distance is None:
        raise ValueError("GP_rnd needs candidate sets with tag_distance: use "
                         "candidates=latre_diverse (distances: true)")


def _mean(values: Tensor) -> float:
    return float(values.double().mean()) if values.numel() else 0.0


class GPRndRanker(GPRanker):
    """GP_rnd (Belém et al.): GP with the ADC terminal and a novelty and diversity fitness.

    Needs candidate sets with ``tag_distance`` (``candidates=latre_diverse``) and the ``iff``
    feature; see the module docstring for the readings and the tuning of ``α``.

    Args:
        alpha: ``α``, the weight of AIP@k (used when ``alpha_grid`` is None).
        beta: ``β``, the weight of AILD@k; None: ``β = α`` (the paper).
        alpha_grid: ``α`` values tried on V (``α = 0`` is always added); None: ``alpha``.
        fitness_form: ``"convex"`` or ``"additive"`` (module docstring).
        max_loss: the relevance rule's largest relative V NDCG@k loss against ``α = 0``.
        **kwargs: the settings of :class:`~tagtorch.rankers.gp.GPRanker` (population,
            generations, ..., ``k``: the cut-off of the fitness's NDCG, AIP and AILD; ``seed``:
            the same for every grid value).

    Attributes:
        alpha_: the ``α`` in use after :meth:`fit`.
        tuning_: ``[(α, V NDCG@k, V alpha-NDCG@k)]`` per grid value (alpha-NDCG NaN without
            topics); empty without a grid.
    """

    alpha: float
    beta: float | None
    fitness_form: FitnessForm
    max_loss: float

    _forwards_kwargs = True
    tuned_setting = "alpha"
    """The setting ``tuning_`` varies (the trade-off figure labels its points with it)."""

    def __init__(
        self,
        alpha: float = 0.1,
        beta: float | None = None,
        alpha_grid: Sequence[float] | None = None,
        fitness_form: FitnessForm = "convex",
        max_loss: float = 0.03,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if fitness_form not in ("convex", "additive"):
            raise ValueError(f"fitness_form must be 'convex' or 'additive', got {fitness_form!r}")
        if alpha_grid is not None and len(alpha_grid) == 0:
            raise ValueError("alpha_grid must hold at least one value (or be null)")
        for value in [alpha, *(alpha_grid or [])]:
            self._weights(value, beta, fitness_form)  # raises on a bad value
        if not 0.0 <= max_loss < 1.0:
            raise ValueError(f"max_loss must be in [0, 1), got {max_loss!r}")
        self.alpha_grid = None if alpha_grid is None else sorted({float(v) for v in alpha_grid})
        self.alpha_: float | None = None
        self.tuning_: list[tuple[float, float, float]] = []
        self._fitness_weights = (1.0, 0.0, 0.0)
        self._max_iff = 1.0

    @staticmethod
    def _weights(alpha: float, beta: float | None, form: str) -> tuple[float, float, float]:
        """The (NDCG, AIP, AILD) weights of the fitness."""
        beta = alpha if beta is None else beta
        for name, value in (("alpha", alpha), ("beta", beta)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        if form == "additive":
            return 1.0, float(alpha), float(beta)
        if alpha + beta > 1.0:
            raise ValueError(f"the convex fitness needs alpha + beta <= 1, got {alpha} + {beta}")
        return 1.0 - alpha - beta, float(alpha), float(beta)

    # -- terminals and fitness ----------------------------------------------------------------

    def terminal_names(self) -> tuple[str, ...]:
        """The features, then ``adc``."""
        return (*super().terminal_names(), ADC_TERMINAL)

    def terminals(self, batch: CandidateSet) -> Tensor:
        """``[B, L, F + 1]``: the features and ADC (from the batch's ``tag_distance``)."""
        _check_distances(batch)
        assert batch.tag_distance is not None
        adc = average_distance_to_candidates(batch.tag_distance, batch.mask)
        return torch.cat([batch.features, adc.to(batch.features).unsqueeze(-1)], dim=-1)

    def _training_lists(self, lists: CandidateSet) -> _Lists:
        return _DiverseLists(lists, self.k, self.terminals(lists), self._fitness_weights,
                             self._max_iff)

    # -- fit: one evolution per alpha ---------------------------------------------------------

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Evolves GP_rnd on ``train`` (V) for ``alpha`` or each grid value; keeps one tree.

        Raises:
            ValueError: without ``tag_distance`` or the ``iff`` feature, or no relevant tag.
        """
        _check_distances(train)
        if IFF_FEATURE not in train.feature_names:
            raise ValueError(f"GP_rnd's AIP fitness needs the {IFF_FEATURE!r} feature; the "
                             f"features are {train.feature_names}")
        iff = train.feature(IFF_FEATURE)[train.mask]
        top = float(iff.max()) if iff.numel() else 0.0
        self._max_iff = top if math.isfinite(top) and top > 0 else 1.0
        if self.alpha_grid is None:
            self._evolve_with(train, self.alpha)
            self.alpha_, self.tuning_ = float(self.alpha), []
            return self
        trees = {}
        self.tuning_ = []
        for alpha in sorted({0.0, *self.alpha_grid}):
            self._evolve_with(train, alpha)
            assert self._tree is not None
            trees[alpha] = (self._tree, self.fitness, list(self.history))
            self.tuning_.append((alpha, *self._validation(train)))
        reference = self.tuning_[0][1]
        allowed = [alpha for alpha, ndcg, _ in self.tuning_
                   if alpha in self.alpha_grid and ndcg >= (1 - self.max_loss) * reference - 1e-12]
        self.alpha_ = max(allowed) if allowed else 0.0
        tree, self.fitness, self.history = trees[self.alpha_]
        self._set_tree(tree)
        log.info("GP_rnd: alpha %.2f (V NDCG@%d, alpha-NDCG@%d by alpha: %s)", self.alpha_,
                 self.k, self.k, ", ".join(f"{a:g}: {n:.4f}, {d:.4f}"
                                           for a, n, d in self.tuning_))
        return self

    def _evolve_with(self, train: CandidateSet, alpha: float) -> None:
        self._fitness_weights = self._weights(alpha, self.beta, self.fitness_form)
        super().fit(train)

    def _validation(self, train: CandidateSet) -> tuple[float, float]:
        """Mean NDCG@k and alpha-NDCG@k (NaN without topics) of the current tree on ``train``."""
        scores = torch.cat([self.score(batch) for batch in train.batches(4096)])
        ndcg = ndcg_at_k(scores, train.labels, train.mask, self.k, train.n_relevant)
        alpha_ndcg = math.nan
        if train.tag_topics is not None and train.object_topics is not None:
            values = alpha_ndcg_at_k(scores, train.mask, train.tag_topics, train.object_topics,
                                     self.k)
            alpha_ndcg = _mean(values[~torch.isnan(values)])
        return _mean(ndcg[~torch.isnan(ndcg)]), alpha_ndcg

    # -- save / load: GP's tree, alpha and the tuning in the manifest -------------------------

    def _manifest_extras(self) -> dict[str, Any]:
        return {"alpha": self.alpha_, "tuning": [[None if math.isnan(v) else v for v in row]
                                                  for row in self.tuning_]}

    def _load_files(self, folder: Path, manifest: Mapping[str, Any]) -> None:
        super()._load_files(folder, manifest)
        alpha = manifest.get("alpha")
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or alpha < 0:
            raise UnreadableFileError(f"{folder}: manifest has no alpha >= 0 ({alpha!r})")
        self.alpha_ = float(alpha)
        self.tuning_ = [tuple(math.nan if v is None else float(v) for v in row)  # type: ignore
                        for row in manifest.get("tuning", [])]
