"""The interface of a candidate source: what the tag-recommendation protocol asks of one."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries
from tagtorch.data.terms import TermIndex

__all__ = ["CandidateGenerator", "check_rule_settings"]


def check_rule_settings(max_antecedent: int, min_support: int, min_confidence: float) -> None:
    """Raises ValueError naming the first rule-mining setting out of range.

    Shared by the batched generator and the reference oracle (the same settings, the same
    messages): ``max_antecedent >= 1``, ``min_support >= 1``, ``min_confidence`` in [0, 1].

    Example:
        >>> check_rule_settings(3, 1, 0.0)  # the paper's settings: accepted
    """
    if max_antecedent < 1:
        raise ValueError(f"max_antecedent must be >= 1, got {max_antecedent}")
    if min_support < 1:
        raise ValueError(f"min_support must be >= 1, got {min_support}")
    if not 0.0 <= min_confidence <= 1.0:
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")


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
