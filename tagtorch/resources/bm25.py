"""Okapi BM25 over the objects' tag documents.

Harvey, Ruthven and Carman (2010) compare with "Okapi BM25 - a popular and quite robust
probabilistic retrieval framework" and tune its free parameters; the formula was lost in the
extracted text, so we use the standard form (Robertson and Zaragoza 2009)::

    score(d, q) = sum_{w in q} idf(w) * N_wd (k1 + 1) / (N_wd + k1 (1 - b + b N_d / avgdl))
    idf(w) = log(1 + (|D| - n_w + 0.5) / (n_w + 0.5))

with ``n_w`` the number of documents containing ``w``, ``N_d`` the document's length in tokens,
``avgdl`` the mean length over the non-empty documents and ``|D|`` their number. The ``1 +``
inside the logarithm (as in Lucene) keeps every idf positive, so a very common tag never makes
a match worse than no match. ``k1`` and ``b`` are tuned on the validation posts (start: 1.2 and
0.75).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from tagtorch.resources.base import TermMatchRanker, seen_constant

__all__ = ["BM25"]


class BM25(TermMatchRanker):
    """Okapi BM25 (Robertson and Zaragoza 2009) as a baseline of Harvey et al. (2010).

    Args:
        k1: term frequency saturation, ``>= 0``.
        b: length normalization, in ``[0, 1]``.
        device: where queries are scored.

    Example:
        >>> from tagtorch.data.ragged import Ragged
        >>> docs = Ragged.from_lists([[0, 0, 1], [1, 2]])
        >>> scores = BM25(device="cpu").fit(docs, n_words=3).score(Ragged.from_lists([[0]]))
        >>> [round(v, 4) for v in scores[0].tolist()]
        [0.9023, 0.0]
    """

    k1: float
    b: float

    def __init__(self, k1: float = 1.2, b: float = 0.75, device: str = "auto") -> None:
        if k1 < 0:
            raise ValueError(f"k1 must be >= 0, got {k1}")
        if not 0.0 <= b <= 1.0:
            raise ValueError(f"b must be in [0, 1], got {b}")
        super().__init__(device=device)

    def _weights(self, counts: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        lengths = np.asarray(counts.sum(1)).ravel()
        present = lengths > 0
        n_docs = max(int(present.sum()), 1)
        avgdl = lengths[present].mean() if present.any() else 1.0
        n_w = np.bincount(counts.indices, minlength=counts.shape[1])
        idf = np.log1p((n_docs - n_w + 0.5) / (n_w + 0.5))
        coo = counts.tocoo()
        norm = self.k1 * (1.0 - self.b + self.b * lengths[coo.row] / avgdl)
        data = idf[coo.col] * coo.data * (self.k1 + 1.0) / (coo.data + norm)
        weights = sp.csr_matrix((data, (coo.row, coo.col)), shape=counts.shape)
        return weights, np.zeros(counts.shape[0]), seen_constant(counts)
