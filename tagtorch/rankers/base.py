"""The one ranker interface every method implements, so one evaluator compares them all.

Saved rankers are written and read through :mod:`tagtorch.storage` (a folder with a JSON
manifest and model files in safe formats, or one JSON file; never a pickle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Self, runtime_checkable

import torch

from tagtorch.candidates.candidate_set import CandidateSet


@runtime_checkable
class Ranker(Protocol):
    """Orders candidate tags: learns on V's candidate sets, scores T's.

    Lightning modules and library wrappers (LightGBM, XGBoost, DEAP, ...) alike implement it;
    wrappers use composition rather than pretending to be torch modules.
    """

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Learns from labelled candidate sets (the protocol's V); ``val`` for early stopping."""
        ...

    def score(self, batch: CandidateSet) -> torch.Tensor:
        """Scores candidates: ``[B, L]`` float, higher is better (padding values are ignored)."""
        ...

    def save(self, path: str | Path) -> None:
        """Writes the fitted model to ``path``."""
        ...

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a model written by :meth:`save`."""
        ...


def check_feature_names(fitted: tuple[str, ...] | None, batch: CandidateSet) -> None:
    """Raises ValueError when a batch's features differ from those a ranker was fitted on.

    Example:
        >>> check_feature_names(None, None)  # not fitted yet: nothing to compare
    """
    if fitted is not None and tuple(batch.feature_names) != tuple(fitted):
        raise ValueError(f"the batch's features {tuple(batch.feature_names)} differ from the "
                         f"fitted features {tuple(fitted)}")
