"""Candidate generation: mines D once per fold, then builds candidate sets for V and T."""

from __future__ import annotations

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.candidates.rules import CooccurrenceRules, candidate_lists
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries


class CooccurrenceCandidates:
    """Candidates from one-tag association rules, with the feature ``sum_1`` = Sum(c, I_o, 1).

    This is the co-occurrence *Sum* recommender of Sigurbjörnsson and van Zwol (WWW 2008) as
    written in Equation 1 of Canuto et al. (JIDM 2013) with antecedent size ℓ = 1.

    Args:
        min_support: minimum rule support (D objects holding antecedent and consequent).
        min_confidence: minimum rule confidence.
        max_candidates: keep the best candidates by Sum per object (None: all).
    """

    feature_names = ("sum_1",)

    def __init__(self, min_support: int = 1, min_confidence: float = 0.0,
                 max_candidates: int | None = 100) -> None:
        self.rules = CooccurrenceRules(min_support=min_support, min_confidence=min_confidence)
        self.max_candidates = max_candidates

    def fit(self, train_tags: Ragged, n_tags: int) -> CooccurrenceCandidates:
        """Mines the rules from D's tag sets (ragged ``[n_D]`` tag codes)."""
        self.rules.fit(train_tags, n_tags)
        return self

    def __call__(self, queries: TagQueries) -> CandidateSet:
        """Candidates, features and labels for V or T objects."""
        scores = self.rules.sum_scores(queries.input_tags)
        tags, values = candidate_lists(scores, queries.input_tags, self.max_candidates)
        return CandidateSet.from_ragged(queries.objects, tags, {"sum_1": values},
                                        queries.gold_tags)
