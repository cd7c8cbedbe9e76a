"""Unsupervised ranking by one relevance feature, e.g. the co-occurrence baseline *Sum*."""

from __future__ import annotations

from typing import Self

import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.rankers.base import BaseRanker


class FeatureRanker(BaseRanker):
    """Ranks candidates by the value of one feature; learns nothing.

    With ``feature="sum_1"`` it is the *Sum* co-occurrence recommender of Sigurbjörnsson and
    van Zwol (WWW 2008), Equation 1 of Canuto et al. (JIDM 2013) with ℓ = 1.

    Args:
        feature: the name of the feature to rank by.
    """

    feature: str

    def __init__(self, feature: str = "sum_1") -> None:
        self.feature_names_: tuple[str, ...] | None = None

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Checks that the feature exists and records the features; there is nothing to learn."""
        train.feature(self.feature)
        self.feature_names_ = tuple(train.feature_names)
        return self

    def score(self, batch: CandidateSet) -> torch.Tensor:
        """``[B, L]`` the feature's values."""
        self.check_features(batch)
        return batch.feature(self.feature)

    def is_fitted(self) -> bool:
        """Always: the ranker learns nothing, so an unfitted one can be saved too."""
        return True
