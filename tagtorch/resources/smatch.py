"""SMatch: the simple term matching of social tagging sites' search.

Harvey, Ruthven and Carman (2010), Section 4: ``score(d, q) = sum_{w in q} N_{w,d}``, the number
of times the query's tags were given to the resource. It has no parameter.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from tagtorch.resources.base import TermMatchRanker, seen_constant

__all__ = ["SMatch"]


class SMatch(TermMatchRanker):
    """``score(d, q) = sum_{w in q} N_{w,d}`` (Harvey et al. 2010).

    Example:
        >>> from tagtorch.data.ragged import Ragged
        >>> docs = Ragged.from_lists([[0, 0, 1], [1, 2]])
        >>> ranker = SMatch(device="cpu").fit(docs, n_words=3)
        >>> ranker.score(Ragged.from_lists([[0, 1], [2]])).tolist()
        [[3.0, 1.0], [0.0, 1.0]]
    """

    def __init__(self, device: str = "auto") -> None:
        super().__init__(device=device)

    def _weights(self, counts: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        return counts, np.zeros(counts.shape[0]), seen_constant(counts)
