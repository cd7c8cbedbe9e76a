"""LATRE+wTS (Belém et al., SIGIR 2011), the unsupervised baseline of Canuto et al. (2013).

``LATRE+wTS(c, o, ℓ, α) = α · Sum(c, I_o, ℓ) + (1 - α) · wTS(c, o)`` (Equation 13): association
rules score the co-occurring candidates, the weighted term spread the terms of the object's
text fields. α is tuned on V over a grid by NDCG@k (the paper found 0.95 for LastFM and
MovieLens, 0.9 for the other datasets); a fixed α skips the tuning.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.metrics.functional import ndcg_at_k
from tagtorch.storage import read_json

log = logging.getLogger(__name__)


class LatreWTS:
    """``α · sum_l + (1 - α) · wts``, with α tuned on V.

    Args:
        alpha: a fixed weight in [0, 1], or None to tune it on the training lists.
        alpha_grid: the values tried when tuning (default: 0, 0.05, ..., 1).
        k: cut-off of the NDCG used for tuning (the paper: 5).
        sum_feature: the Sum feature (``sum_l``: the configured ℓ; ``sum_1``).
        text_feature: the text feature (``wts``).
    """

    def __init__(
        self,
        alpha: float | None = None,
        alpha_grid: Sequence[float] | None = None,
        k: int = 5,
        sum_feature: str = "sum_l",
        text_feature: str = "wts",
    ) -> None:
        if alpha is not None and not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        self.alpha = alpha
        self.tune = alpha is None
        self.alpha_grid = (tuple(alpha_grid) if alpha_grid is not None
                           else tuple(i / 20 for i in range(21)))
        self.k = k
        self.sum_feature = sum_feature
        self.text_feature = text_feature

    def _combine(self, batch: CandidateSet, alpha: float) -> torch.Tensor:
        return (alpha * batch.feature(self.sum_feature)
                + (1 - alpha) * batch.feature(self.text_feature))

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Picks the α of the grid with the best mean NDCG@k on ``train`` (first on ties).

        Does nothing when α was given.
        """
        if not self.tune:
            return self
        best, best_alpha = -1.0, self.alpha_grid[0]
        for alpha in self.alpha_grid:
            ndcg = ndcg_at_k(self._combine(train, alpha), train.labels, train.mask, self.k,
                             n_relevant=train.n_relevant)
            value = float(torch.nanmean(ndcg))
            if value > best:
                best, best_alpha = value, alpha
        self.alpha = best_alpha
        log.info("LATRE+wTS: alpha = %.2f (NDCG@%d %.4f on the training lists)",
                 best_alpha, self.k, best)
        return self

    def score(self, batch: CandidateSet) -> torch.Tensor:
        """``[B, L]`` α · Sum + (1 - α) · wTS."""
        if self.alpha is None:
            raise RuntimeError("alpha is not set: call fit() or pass alpha")
        return self._combine(batch, self.alpha)

    def save(self, path: str | Path) -> None:
        """Writes the settings and α as JSON."""
        Path(path).write_text(json.dumps({
            "alpha": self.alpha, "alpha_grid": list(self.alpha_grid), "k": self.k,
            "sum_feature": self.sum_feature, "text_feature": self.text_feature}))

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a ranker written by :meth:`save`."""
        return cls(**read_json(path))
