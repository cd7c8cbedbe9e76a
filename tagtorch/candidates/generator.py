"""The interface of a candidate source: what the tag-recommendation protocol asks of one."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries
from tagtorch.data.terms import TermIndex

__all__ = ["CandidateGenerator"]


class CandidateGenerator(Protocol):
    """Mines D, then turns V or T queries into candidate sets.

    Attributes:
        stage_seconds: seconds spent so far per recommendation stage (``"rules"``,
            ``"features"``), accumulated over calls; the protocol reads differences to time
            each stage.
    """

    stage_seconds: dict[str, float]

    def fit(self, train_objects: np.ndarray, train_tags: Ragged,
            terms: TermIndex) -> CandidateGenerator:
        """Mines rules and statistics from D (``train_objects [N]`` and their tags)."""
        ...

    def __call__(self, queries: TagQueries) -> CandidateSet:
        """Candidate sets with features and labels, one list per query object."""
        ...
