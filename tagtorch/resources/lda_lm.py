"""LDA mixed with the smoothed document language model (ours, after Wei and Croft 2006).

Harvey, Ruthven and Carman (2010) rank by the LDA query likelihood alone
(:class:`~tagtorch.resources.lda.LDARanker`) and contrast their result with Wei and Croft's
(2006) LDA-based document model, which interpolates the topic model with the Dirichlet-smoothed
document model::

    P(w | d) = lam · (N_wd + mu P(w | C)) / (N_d + mu) + (1 - lam) · Σ_z φ_{w|z} θ_{z|d}
    score(d, q) = log P(d) + Σ_{w in q} log P(w | d)

with the same document prior ``P(d)`` as the LDA ranker. On small tag collections such as the
HetRec ones, where the topics are estimated from few tokens per document, the exact term
evidence of the language model and the generalization of the topics complement each other.
This is our extension beside the faithful ranker (method ``lda_lm``); ``lam`` and ``mu`` only
enter the scoring, so tuning them reuses one sampled topic model
(:attr:`~tagtorch.resources.base.ResourceRanker.scoring_settings`).
"""

from __future__ import annotations

from typing import ClassVar, Self

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from tagtorch.data.ragged import Ragged
from tagtorch.resources.base import document_counts
from tagtorch.resources.lda import LDARanker

__all__ = ["LDALanguageModel"]


class LDALanguageModel(LDARanker):
    """LDA interpolated with the Dirichlet-smoothed document model (ours; Wei and Croft 2006).

    Args:
        lam: weight of the document language model, in ``[0, 1]`` (0: the LDA ranker).
        mu: its Dirichlet prior's weight, ``> 0``.
        **the rest**: as :class:`~tagtorch.resources.lda.LDARanker`.
    """

    lam: float
    mu: float

    scoring_settings: ClassVar[tuple[str, ...]] = ("lam", "mu", "prior_weight")

    def __init__(self, lam: float = 0.5, mu: float = 100.0, n_topics: int = 250,
                 alpha: float | None = None, beta: float = 0.1, iterations: int = 300,
                 burn_in: int = 200, sampler: str = "exact", prior_weight: float = 0.5,
                 seed: int = 0, device: str = "auto", progress: bool = True) -> None:
        if not 0.0 <= lam <= 1.0:
            raise ValueError(f"lam must be in [0, 1], got {lam}")
        if not mu > 0:
            raise ValueError(f"mu must be > 0, got {mu}")
        super().__init__(n_topics=n_topics, alpha=alpha, beta=beta, iterations=iterations,
                         burn_in=burn_in, sampler=sampler, prior_weight=prior_weight,
                         seed=seed, device=device, progress=progress)
        self.counts_: sp.csr_matrix | None = None  # [W, D] word counts of the documents

    def fit(self, documents: Ragged, n_words: int) -> Self:
        """Samples the topic model and keeps the documents' word counts."""
        super().fit(documents, n_words)
        self.counts_ = sp.csr_matrix(document_counts(documents, n_words).T)
        return self

    def _word_likelihood(self, words: np.ndarray, theta_t: Tensor, phi_t: Tensor) -> Tensor:
        """``[n, D]`` the mixture ``P(w | d)`` of each word for every document."""
        if self.counts_ is None:
            raise RuntimeError("LDALanguageModel is not fitted")
        counts = torch.as_tensor(self.counts_[words].toarray(), dtype=torch.float32,
                                 device=phi_t.device)
        lengths = torch.as_tensor(np.asarray(self.counts_.sum(0)).ravel(), dtype=torch.float32,
                                  device=phi_t.device)
        collection = torch.as_tensor(np.asarray(self.counts_.sum(1)).ravel()[words]
                                     / max(float(self.counts_.sum()), 1.0),
                                     dtype=torch.float32, device=phi_t.device)
        language = (counts + self.mu * collection[:, None]) / (lengths + self.mu)
        topics = phi_t[torch.as_tensor(words, device=phi_t.device)] @ theta_t
        return self.lam * language + (1.0 - self.lam) * topics

    def _arrays(self) -> dict[str, np.ndarray]:
        arrays = super()._arrays()
        if arrays and self.counts_ is not None:
            c = self.counts_
            arrays |= {"counts_indptr": c.indptr, "counts_indices": c.indices,
                       "counts_data": c.data, "counts_shape": np.asarray(c.shape)}
        return arrays

    def _set_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        super()._set_arrays(arrays)
        shape = tuple(int(v) for v in arrays["counts_shape"])
        self.counts_ = sp.csr_matrix((arrays["counts_data"], arrays["counts_indices"],
                                      arrays["counts_indptr"]), shape=shape)
