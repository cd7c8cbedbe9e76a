"""BayesLM: the query likelihood of a Dirichlet-smoothed document language model.

Harvey, Ruthven and Carman (2010) use "a competitive baseline Language Model with Bayesian
smoothing", the non-personalised model of Wang et al. adapted to queries of several tags; the
formula was lost in the extracted text, and we read it as Zhai and Lafferty's (2001) Dirichlet
smoothing::

    P(q | d) = prod_{w in q} (N_wd + mu P(w | C)) / (N_d + mu),   P(w | C) = N_w / N

Scores are the exact log-likelihood, computed sparsely:
``log P(q|d) = sum_{w in q} log(mu P(w|C)) + sum_{w in q, N_wd > 0} log(1 + N_wd / (mu P(w|C)))
- |q| log(N_d + mu)``. ``mu`` is tuned on the validation posts.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from tagtorch.resources.base import TermMatchRanker

__all__ = ["BayesLM"]


class BayesLM(TermMatchRanker):
    """Dirichlet-smoothed query likelihood (Zhai and Lafferty 2001), Harvey et al.'s BayesLM.

    Args:
        mu: the Dirichlet prior's weight, ``> 0``.
        device: where queries are scored.

    Example:
        >>> import math
        >>> from tagtorch.data.ragged import Ragged
        >>> docs = Ragged.from_lists([[0, 0, 1], [1, 2]])
        >>> scores = BayesLM(mu=1.0, device="cpu").fit(docs, 3).score(Ragged.from_lists([[0]]))
        >>> expected = math.log((2 + 1 * 2 / 5) / (3 + 1))  # (N_wd + mu P(w|C)) / (N_d + mu)
        >>> round(scores[0, 0].item() - expected, 9)
        0.0
    """

    mu: float

    def __init__(self, mu: float = 100.0, device: str = "auto") -> None:
        if not mu > 0:
            raise ValueError(f"mu must be > 0, got {mu}")
        super().__init__(device=device)

    def _weights(self, counts: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        word_counts = np.asarray(counts.sum(0)).ravel()
        collection = word_counts / max(word_counts.sum(), 1.0)
        coo = counts.tocoo()
        data = np.log1p(coo.data / (self.mu * collection[coo.col]))
        weights = sp.csr_matrix((data, (coo.row, coo.col)), shape=counts.shape)
        lengths = np.asarray(counts.sum(1)).ravel()
        with np.errstate(divide="ignore"):  # unseen words: -inf, never in a query
            constant = np.log(self.mu * collection)
        return weights, -np.log(lengths + self.mu), constant
