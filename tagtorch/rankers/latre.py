"""LATRE+wTS (Belém et al., SIGIR 2011), the unsupervised baseline of Canuto et al. (2013).

``LATRE+wTS(c, o, ℓ, α) = α · Sum(c, I_o, ℓ) + (1 - α) · wTS(c, o)`` (Equation 13): association
rules score the co-occurring candidates, the weighted term spread the terms of the object's
text fields. α is tuned on V over a grid by NDCG@k (the paper found 0.95 for LastFM and
MovieLens, 0.9 for the other datasets); a fixed α skips the tuning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.errors import UnreadableFileError
from tagtorch.metrics.functional import ndcg_at_k
from tagtorch.rankers.base import BaseRanker
from tagtorch.storage import read_json, write_json

log = logging.getLogger(__name__)


WEIGHTS_FILE = "weights.json"
"""Name of the file holding the (tuned) α in a saved LATRE+wTS folder."""
TUNING_BATCH = 16384
"""Lists scored at a time while α is tuned (the NDCGs are those of all lists at once)."""


class LatreWTS(BaseRanker):
    """``α · sum_l + (1 - α) · wts``, with α tuned on V.

    ``alpha`` holds the weight in use: the given one, or the tuned one after :meth:`fit`.

    Args:
        alpha: a fixed weight in [0, 1], or None to tune it on the training lists.
        alpha_grid: the values tried when tuning (default: 0, 0.05, ..., 1).
        k: cut-off of the NDCG used for tuning (the paper: 5).
        sum_feature: the Sum feature (``sum_l``: the configured ℓ; ``sum_1``).
        text_feature: the text feature (``wts``).
    """

    alpha: float | None
    k: int
    sum_feature: str
    text_feature: str

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
        self.tune = alpha is None
        self.alpha_grid = (tuple(alpha_grid) if alpha_grid is not None
                           else tuple(i / 20 for i in range(21)))
        self.feature_names_: tuple[str, ...] | None = None

    def _combine(self, batch: CandidateSet, alpha: float) -> torch.Tensor:
        return (alpha * batch.feature(self.sum_feature)
                + (1 - alpha) * batch.feature(self.text_feature))

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Picks the α of the grid with the best mean NDCG@k on ``train`` (first on ties).

        Only records the features when α was given.
        """
        self.feature_names_ = tuple(train.feature_names)
        if not self.tune:
            return self
        best, best_alpha = -1.0, self.alpha_grid[0]
        for alpha in self.alpha_grid:
            # by batches of lists: the sort's temporaries of a million objects' V are GBs
            ndcg = torch.cat([ndcg_at_k(self._combine(part, alpha), part.labels, part.mask,
                                        self.k, n_relevant=part.n_relevant)
                              for part in train.batches(TUNING_BATCH)])
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
        self.check_features(batch)
        return self._combine(batch, self.alpha)

    def is_fitted(self) -> bool:
        """Whether α is set (given, or tuned by :meth:`fit`)."""
        return self.alpha is not None

    def _save_files(self, folder: Path) -> list[str]:
        """Writes α to ``weights.json``."""
        write_json({"alpha": self.alpha}, folder / WEIGHTS_FILE)
        return [WEIGHTS_FILE]

    def _load_files(self, folder: Path, manifest: Mapping[str, Any]) -> None:
        """Reads α from ``weights.json``.

        Raises:
            ValueError: the manifest does not list the file, or it holds no α in [0, 1].
        """
        if WEIGHTS_FILE not in manifest["files"]:
            raise UnreadableFileError(f"{folder / WEIGHTS_FILE}: not listed in the manifest")
        state = read_json(folder / WEIGHTS_FILE)
        alpha = state.get("alpha") if isinstance(state, dict) else None
        if not isinstance(alpha, int | float) or not 0.0 <= alpha <= 1.0:
            raise UnreadableFileError(f"{folder / WEIGHTS_FILE}: expected an alpha in [0, 1]")
        self.alpha = float(alpha)
