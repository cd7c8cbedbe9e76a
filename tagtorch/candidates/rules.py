"""Association rules over tag co-occurrence, and the candidate lists they generate.

A rule ``X -> c`` says that objects tagged with every tag of ``X`` tend to carry ``c``; its
support is the number of training objects (D) whose tag set holds ``X ∪ {c}`` and its confidence
``θ(X -> c) = support(X ∪ {c}) / support(X)``. The co-occurrence baseline *Sum*
(Sigurbjörnsson and van Zwol, WWW 2008; Equation 1 of Canuto et al., JIDM 2013) scores a
candidate by summing the confidences of the rules whose antecedent is a subset of the object's
input tags I_o:

    Sum(c, I_o, ℓ) = Σ_{X ⊆ I_o, |X| ≤ ℓ} θ(X -> c)

This module mines the rules with one-tag antecedents (ℓ = 1) for all input tags of a batch of
objects at once, as one sparse product ``Q @ Θ`` of the ``[n_queries, n_tags]`` input-tag matrix
with the ``[n_tags, n_tags]`` confidence matrix.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from tagtorch.data.ragged import Ragged


class CooccurrenceRules:
    """Association rules ``x -> c`` with one-tag antecedents, mined from D's tag sets.

    Args:
        min_support: minimum number of D objects holding both ``x`` and ``c``.
        min_confidence: minimum confidence ``θ(x -> c)``.

    Example:
        >>> d = Ragged.from_lists([[0, 1], [0, 1, 2], [0, 2]])
        >>> rules = CooccurrenceRules().fit(d, n_tags=3)
        >>> rules.confidence.toarray().round(3).tolist()  # θ(0->1) = 2/3, θ(1->0) = 2/2
        [[0.0, 0.667, 0.667], [1.0, 0.0, 0.5], [1.0, 0.5, 0.0]]
        >>> rules.sum_scores(Ragged.from_lists([[1, 2]])).toarray().round(3).tolist()
        [[2.0, 0.5, 0.5]]
    """

    def __init__(self, min_support: int = 1, min_confidence: float = 0.0) -> None:
        if min_support < 1:
            raise ValueError(f"min_support must be >= 1, got {min_support}")
        if not 0.0 <= min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")
        self.min_support = min_support
        self.min_confidence = min_confidence
        self.confidence: sp.csr_matrix | None = None

    def fit(self, train_tags: Ragged, n_tags: int) -> CooccurrenceRules:
        """Mines the rules from D's tag sets.

        Args:
            train_tags: ragged ``[n_D]`` distinct tag codes of each training object.
            n_tags: size of the tag vocabulary.
        """
        x = train_tags.to_csr(n_tags)
        pair_support = (x.T @ x).tocsr()
        tag_support = pair_support.diagonal()
        pair_support.setdiag(0)
        pair_support.data[pair_support.data < self.min_support] = 0
        pair_support.eliminate_zeros()
        confidence = (sp.diags(1.0 / np.maximum(tag_support, 1)) @ pair_support).tocsr()
        confidence.data[confidence.data < self.min_confidence] = 0
        confidence.eliminate_zeros()
        self.confidence = confidence
        return self

    def sum_scores(self, input_tags: Ragged) -> sp.csr_matrix:
        """``Sum(c, I_o, 1)`` for every object and tag: a sparse ``[n_queries, n_tags]`` matrix.

        Input tags themselves are not removed here; see :func:`candidate_lists`.
        """
        if self.confidence is None:
            raise RuntimeError("call fit() before sum_scores()")
        return (input_tags.to_csr(self.confidence.shape[0]) @ self.confidence).tocsr()


def candidate_lists(
    scores: sp.csr_matrix, input_tags: Ragged, max_candidates: int | None = None
) -> tuple[Ragged, Ragged]:
    """Turns sparse rule scores into per-object candidate lists, input tags excluded.

    Args:
        scores: ``[n_queries, n_tags]`` non-negative scores; a stored entry is a candidate.
        input_tags: ragged ``[n_queries]`` input tags, never candidates.
        max_candidates: keep the best-scoring candidates only (ties: lower tag code first).

    Returns:
        ``(tags, values)``: ragged candidate tag codes (ascending) and their scores.
    """
    scores = scores.tocsr().copy()
    scores.sort_indices()
    rows = np.repeat(np.arange(scores.shape[0]), np.diff(scores.indptr))
    tags, values = scores.indices.astype(np.int64), scores.data
    is_input = input_tags.to_csr(scores.shape[1])[rows, tags].A1 > 0
    keep = (values > 0) & ~is_input
    rows, tags, values = rows[keep], tags[keep], values[keep]
    if max_candidates is not None:
        order = np.lexsort((tags, -values, rows))
        rank = np.arange(len(order)) - np.searchsorted(rows[order], rows[order])
        top = np.sort(order[rank < max_candidates])
        rows, tags, values = rows[top], tags[top], values[top]
    n = scores.shape[0]
    return Ragged.from_groups(rows, tags, n), Ragged.from_groups(rows, values, n)
