"""RankBoost (Freund, Iyer, Schapire and Singer, JMLR 2003), as in Canuto et al. (JIDM 2013).

RankBoost boosts weak rankers on *crucial pairs* ``(i, j)`` of candidates of the same list
where ``i`` must rank above ``j`` (relevant over irrelevant). Each weak ranker is a feature
and a threshold, ``h(x) = 1 if x_f > θ else 0`` (Freund et al., Section 3.2); the final
ranker is ``H(x) = Σ_t α_t h_t(x)``. Canuto et al. (Section 4.3.7, Table III) run ``i = 700``
rounds for LastFM, 500 for Bibsonomy and 300 for MovieLens, YahooVideo and YouTube.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.errors import UnreadableFileError
from tagtorch.rankers.base import BaseRanker
from tagtorch.rankers.ranksvm import crucial_pairs
from tagtorch.storage import read_json, write_json

log = logging.getLogger(__name__)

__all__ = ["RankBoost", "quantile_thresholds"]

_R_MAX = 1.0 - 1e-9  # |r| is capped here so that α stays finite
_D_MIN = 1e-200  # floor of a pair weight: no subnormal floats (slow on CPUs)


def quantile_thresholds(values: torch.Tensor, n_thresholds: int) -> torch.Tensor:
    """Per-feature thresholds at the quantile levels ``m / (n + 1)``, ``m = 1..n``.

    The lower empirical quantile: with the ``N`` values of a feature sorted ascending
    (``v_0 <= ... <= v_{N-1}``), threshold ``m`` is ``v_⌊m (N - 1) / (n + 1)⌋`` (what
    ``torch.quantile(..., interpolation="lower")`` gives, without its size limit). Thresholds are
    therefore actual feature values, non-decreasing; repeated values (e.g. of sparse features)
    give repeated thresholds.

    Args:
        values: ``[N, F]`` feature values of the real training candidates (``N >= 1``).
        n_thresholds: the number ``n`` of thresholds per feature.

    Returns:
        ``[F, n]`` thresholds, non-decreasing along each row.

    Example:
        >>> cuts = quantile_thresholds(torch.tensor([[0.1], [0.9], [0.5], [0.3], [0.7]]), 2)
        >>> [round(v, 4) for v in cuts[0].tolist()]
        [0.3, 0.5]
    """
    n = values.shape[0]
    levels = torch.arange(1, n_thresholds + 1, dtype=torch.float64) / (n_thresholds + 1)
    index = torch.floor(levels * (n - 1) + 1e-9).long().to(values.device)
    return torch.sort(values, dim=0).values[index].T.contiguous()


ROUNDS_FILE = "rounds.json"
"""Name of the rounds (feature, threshold, r, α) in a saved RankBoost folder."""


class RankBoost(BaseRanker):
    """RankBoost on crucial pairs with ``{0, 1}`` feature-threshold weak rankers.

    The version implemented (Freund et al. 2003, Figure 2 with the weak learner of Section
    3.2 and the third way of choosing α):

    1. Crucial pairs: ``(i, j)`` of real candidates of the same training list with
       ``label_i > label_j``; ``D_1`` is uniform over all pairs of all lists (as in RankLib).
    2. Weak rankers: ``h_{f,θ}(x) = 1 if x_f > θ else 0`` for every feature ``f`` and each of
       its ``n_thresholds`` quantile thresholds (:func:`quantile_thresholds` of the real
       training candidates). Features are used raw: thresholds make them scale-free.
    3. Round ``t``: ``r(h) = Σ_(i,j) D_t(i, j) (h(x_i) - h(x_j))`` for all weak rankers at once
       (through the potential ``π(c) = Σ_j D(c, j) - Σ_i D(i, c)`` bucketed by threshold); choose
       ``h_t`` maximizing ``|r|`` (feature-major order, first on ties);
       ``α_t = ½ ln((1 + r) / (1 - r))`` (negative when ``r < 0``: the weak ranker is used
       reversed); ``D_{t+1}(i, j) ∝ D_t(i, j) exp(α_t (h_t(x_j) - h_t(x_i)))``, normalized,
       then floored at 1e-200 (subnormal floats slow CPUs down by orders of magnitude; the
       floors add at most ``P · 1e-200`` to a total of 1).
    4. ``H(x) = Σ_t α_t h_t(x)``.

    Training stops before ``n_rounds`` when no weak ranker has an edge (``max |r| = 0``: ``D``
    would not change) or when one orders every pair (``|r| = 1``, capped at ``1 - 1e-9`` to
    keep α finite: ``D`` would not change either).

    Args:
        n_rounds: the number of rounds ``i`` (Table III: 700 LastFM, 500 Bibsonomy, 300
            MovieLens, YahooVideo and YouTube).
        n_thresholds: thresholds per feature (quantile levels ``m / (n + 1)``).
    """

    n_rounds: int
    n_thresholds: int

    def __init__(self, n_rounds: int = 700, n_thresholds: int = 16) -> None:
        if n_rounds < 1:
            raise ValueError(f"n_rounds must be >= 1, got {n_rounds}")
        if n_thresholds < 1:
            raise ValueError(f"n_thresholds must be >= 1, got {n_thresholds}")
        self.feature_names_: tuple[str, ...] | None = None
        self.rounds_: list[dict[str, float | int]] = []
        self.pair_weights_: torch.Tensor | None = None
        self._tables: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Runs up to ``n_rounds`` RankBoost rounds on ``train`` (``val`` is not used).

        After fitting, ``rounds_`` lists each round's ``feature``, ``threshold``, ``r`` and
        ``alpha``, and ``pair_weights_`` holds the final ``D`` (``[P]``, pairs in the order of
        :func:`~tagtorch.rankers.ranksvm.crucial_pairs`).

        Raises:
            ValueError: when no list holds two candidates of different labels.
        """
        x = train.features.detach()
        mask = train.mask
        device = x.device
        rows, i, j = crucial_pairs(train.labels, mask)
        if len(rows) == 0:
            raise ValueError("RankBoost needs a list with two candidates of different labels")
        # Flat indices of the real candidates and of the pairs' ends.
        flat = torch.full(mask.shape, -1, dtype=torch.long, device=device)
        flat[mask] = torch.arange(int(mask.sum()), device=device)
        values = x[mask]  # [N, F]
        ci, cj = flat[rows, i], flat[rows, j]
        n_cand, n_feat = values.shape
        thresholds = quantile_thresholds(values, self.n_thresholds)  # [F, T]
        n_thr = self.n_thresholds
        # bucket[c, f] = #{t : θ_{f,t} < x_{c,f}}; then h_{f,t}(c) = 1 iff bucket[c, f] > t.
        bucket = torch.stack([
            torch.searchsorted(thresholds[f], values[:, f].contiguous(), right=False)
            for f in range(n_feat)], dim=1)
        slot = (bucket + torch.arange(n_feat, device=device) * (n_thr + 1)).reshape(-1)
        # The pairs' ends, feature-major ([F, P]). index_select, not advanced indexing, in the
        # loop: the latter is much slower on small tensors when CPU threads are contended.
        bucket_i = bucket.index_select(0, ci).T.contiguous()
        bucket_j = bucket.index_select(0, cj).T.contiguous()
        d = torch.full((len(ci),), 1.0 / len(ci), dtype=torch.float64, device=device)
        self.rounds_ = []
        for _ in range(self.n_rounds):
            potential = torch.zeros(n_cand, dtype=torch.float64, device=device)
            potential.index_add_(0, ci, d).index_add_(0, cj, -d)
            hist = torch.zeros(n_feat * (n_thr + 1), dtype=torch.float64, device=device)
            hist.index_add_(0, slot, potential.repeat_interleave(n_feat))
            hist = hist.reshape(n_feat, n_thr + 1)
            # r[f, t] = Σ_{b > t} hist[f, b]: suffix sums.
            r_all = hist.flip(1).cumsum(1).flip(1)[:, 1:]  # [F, T]
            best = int(torch.argmax(r_all.abs()))
            f, t = divmod(best, n_thr)
            r = float(r_all[f, t])
            if abs(r) <= 1e-15:
                break
            r_capped = max(-_R_MAX, min(_R_MAX, r))
            alpha = 0.5 * math.log((1 + r_capped) / (1 - r_capped))
            self.rounds_.append({"feature": f, "threshold": float(thresholds[f, t]),
                                 "r": r, "alpha": alpha})
            # exp(α (h_j - h_i)) takes three values: index them (no vector exp per round).
            change = (bucket_j[f] > t).long() - (bucket_i[f] > t).long() + 1  # 0, 1, 2
            factor = torch.tensor([math.exp(-alpha), 1.0, math.exp(alpha)],
                                  dtype=d.dtype, device=device)
            d = d * factor.index_select(0, change)
            d = (d / d.sum()).clamp_(min=_D_MIN)
            if abs(r) >= _R_MAX:
                break
        self.feature_names_ = tuple(train.feature_names)
        self.pair_weights_ = d.cpu()
        self._tables = None
        log.info("RankBoost: %d rounds on %d pairs of %d lists", len(self.rounds_), len(ci),
                 len(train))
        return self

    def _compile(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per feature: sorted distinct thresholds ``[U]`` and cumulative α ``[U + 1]``."""
        if self._tables is None:
            tables: list[tuple[torch.Tensor, torch.Tensor]] = []
            for f in range(len(self.feature_names_ or ())):
                summed: dict[float, float] = {}
                for r in self.rounds_:
                    if r["feature"] == f:
                        key = float(r["threshold"])
                        summed[key] = summed.get(key, 0.0) + float(r["alpha"])
                keys = sorted(summed)
                thresholds = torch.tensor(keys, dtype=torch.float32)
                alphas = torch.tensor([summed[v] for v in keys], dtype=torch.float64)
                # x > θ_u exactly for u < searchsorted(θ, x): the score is a prefix sum of α.
                cumulative = torch.cat([torch.zeros(1, dtype=torch.float64), alphas.cumsum(0)])
                tables.append((thresholds, cumulative))
            self._tables = tables
        return self._tables

    @property
    def feature_importance(self) -> dict[str, float]:
        """Sum of ``|α|`` of the rounds that chose each feature."""
        names = self.feature_names_ or ()
        total = dict.fromkeys(names, 0.0)
        for r in self.rounds_:
            total[names[int(r["feature"])]] += abs(float(r["alpha"]))
        return total

    def score(self, batch: CandidateSet) -> torch.Tensor:
        """``[B, L]`` ``H(x) = Σ_t α_t [x_{f_t} > θ_t]`` on the batch's device.

        Computed in float64, returned in the features' dtype; padding is meaningless.
        """
        if self.feature_names_ is None:
            raise RuntimeError("RankBoost is not fitted: call fit() or load()")
        self.check_features(batch)
        x = batch.features
        out = torch.zeros(x.shape[:-1], dtype=torch.float64, device=x.device)
        for f, (theta, cumulative) in enumerate(self._compile()):
            if len(theta) == 0:
                continue
            theta = theta.to(x.device, x.dtype)
            count = torch.searchsorted(theta, x[..., f].contiguous(), right=False)
            step = cumulative.to(x.device).index_select(0, count.reshape(-1))
            out = out + step.reshape(count.shape)
        return out.to(x.dtype)

    def _save_files(self, folder: Path) -> list[str]:
        """Writes the rounds (feature, threshold, r, α) to ``rounds.json``."""
        write_json({"rounds": self.rounds_}, folder / ROUNDS_FILE)
        return [ROUNDS_FILE]

    def _load_files(self, folder: Path, manifest: Mapping[str, Any]) -> None:
        """Reads ``rounds.json``.

        Raises:
            ValueError: the file is not listed or holds no list of rounds (naming it).
        """
        path = folder / ROUNDS_FILE
        state = read_json(path) if ROUNDS_FILE in manifest["files"] else None
        rounds = state.get("rounds") if isinstance(state, dict) else None
        if not isinstance(rounds, list) or not all(
                isinstance(r, dict) and {"feature", "threshold", "alpha"} <= set(r)
                for r in rounds):
            raise UnreadableFileError(f"{path}: expected the list of rounds listed in the "
                                      "manifest")
        self.rounds_ = rounds
        self._tables = None
