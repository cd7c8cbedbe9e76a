"""Unsupervised ranking by one relevance feature, e.g. the co-occurrence baseline *Sum*."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Self

import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.storage import read_json


class FeatureRanker:
    """Ranks candidates by the value of one feature; learns nothing.

    With ``feature="sum_1"`` it is the *Sum* co-occurrence recommender of Sigurbjörnsson and
    van Zwol (WWW 2008), Equation 1 of Canuto et al. (JIDM 2013) with ℓ = 1.

    Args:
        feature: the name of the feature to rank by.
    """

    def __init__(self, feature: str = "sum_1") -> None:
        self.feature = feature

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Checks that the feature exists; there is nothing to learn."""
        train.feature(self.feature)
        return self

    def score(self, batch: CandidateSet) -> torch.Tensor:
        """``[B, L]`` the feature's values."""
        return batch.feature(self.feature)

    def save(self, path: str | Path) -> None:
        """Writes the feature name as JSON."""
        Path(path).write_text(json.dumps({"feature": self.feature}))

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a ranker written by :meth:`save`."""
        return cls(**read_json(path))
