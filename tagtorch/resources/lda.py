"""LDA resource ranking: the query likelihood of an object's topic mixture.

Harvey, Ruthven and Carman (2010), Section 3: a latent Dirichlet allocation model is fitted by
collapsed Gibbs sampling on the objects' tag documents (:class:`tagtorch.topics.LDA`), and
objects are ranked by::

    P(d | q) ∝ P(d) · prod_{w in q} sum_z phi_{w|z} theta_{z|d}
    P(d) = lambda · N_d / N + (1 - lambda) / |D|

"we smooth the document prior by linearly interpolating with a uniform distribution" with
``lambda = 0.5``; ``N_d`` is the document's length in tokens, ``N`` the corpus's and ``|D|`` the
number of documents with at least one token. The product was lost in the extracted text; this
reading is the one the issue and the paper's description ("the product of 2 distinct parts; a
prior on the probability of the resource, P(d) and the probability of the query given the
resource, P(q|d)") agree on. Scores are ``log P(d) + sum_w log(phi_w · theta_d)``, accumulated one
query position at a time, so a block of ``B`` queries needs ``[B, D]`` memory whatever the
query length.
"""

from __future__ import annotations

from typing import ClassVar, Self

import numpy as np
import torch
from torch import Tensor

from tagtorch.data.ragged import Ragged
from tagtorch.devices import resolve_device
from tagtorch.resources.base import ResourceRanker
from tagtorch.topics import LDA

__all__ = ["LDARanker"]


class LDARanker(ResourceRanker):
    """Resources ranked by an LDA model's query likelihood (Harvey et al. 2010).

    Args:
        n_topics: number of topics ``Z`` (the paper: 250).
        alpha: the document-topic prior per topic (None: ``25 / Z``, the paper's
            concentration of 25).
        beta: the topic-word prior (the paper: 0.1).
        iterations: Gibbs sweeps (the paper: 300).
        burn_in: sweeps discarded before averaging (the paper: 200).
        sampler: ``"exact"`` (sequential, CPU) or ``"batched"`` (parallel blocks, any device).
        prior_weight: ``lambda`` of the document prior (the paper: 0.5).
        seed: the sampler's seed.
        device: where the batched sampler runs and queries are scored (``"auto"``: CUDA when
            present).
        progress: show a progress bar over the sweeps.
    """

    n_topics: int
    alpha: float | None
    beta: float
    iterations: int
    burn_in: int
    sampler: str
    prior_weight: float
    seed: int
    device: str
    progress: bool

    scoring_settings: ClassVar[tuple[str, ...]] = ("prior_weight",)

    def __init__(self, n_topics: int = 250, alpha: float | None = None, beta: float = 0.1,
                 iterations: int = 300, burn_in: int = 200, sampler: str = "exact",
                 prior_weight: float = 0.5, seed: int = 0, device: str = "auto",
                 progress: bool = True) -> None:
        if not 0.0 <= prior_weight <= 1.0:
            raise ValueError(f"prior_weight must be in [0, 1], got {prior_weight}")
        self.model_: LDA | None = None
        self.lengths_: np.ndarray | None = None  # [D] document lengths in tokens
        self._cache: tuple[Tensor, Tensor, Tensor] | None = None

    def _make_model(self) -> LDA:
        return LDA(n_topics=self.n_topics, alpha=self.alpha, beta=self.beta,
                   iterations=self.iterations, burn_in=self.burn_in, sampler=self.sampler,
                   device=str(resolve_device(self.device)), seed=self.seed, progress=self.progress)

    def fit(self, documents: Ragged, n_words: int) -> Self:
        """Samples the topic model and keeps the document lengths (for the prior)."""
        self.model_ = self._make_model().fit(documents, n_words)
        self.lengths_ = documents.lengths.astype(np.float64)
        self._cache = None
        return self

    def log_prior(self) -> np.ndarray:
        """``[D]`` ``log P(d)``, ``P(d) = lambda N_d / N + (1 - lambda) / |D|``."""
        if self.lengths_ is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted")
        lengths = self.lengths_
        n_docs = max(int((lengths > 0).sum()), 1)
        return np.log(self.prior_weight * lengths / max(lengths.sum(), 1.0)
                      + (1.0 - self.prior_weight) / n_docs)

    def _tensors(self) -> tuple[Tensor, Tensor, Tensor]:
        """``phi^T [W, Z]``, ``theta^T [Z, D]`` and ``log P(d) [D]`` on the device."""
        if self._cache is None:
            if self.model_ is None:
                raise RuntimeError(f"{type(self).__name__} is not fitted")
            device = resolve_device(self.device)
            self._cache = (torch.as_tensor(self.model_.phi_.T, dtype=torch.float32).to(device),
                           torch.as_tensor(self.model_.theta_.T, dtype=torch.float32).to(device),
                           torch.as_tensor(self.log_prior(), dtype=torch.float32).to(device))
        return self._cache

    def score(self, queries: Ragged) -> Tensor:
        """``[B, D]`` log P(d) + log P(q | d); query words the model never saw are dropped."""
        phi_t, theta_t, log_prior = self._tensors()
        n_words = phi_t.shape[0]
        out = log_prior.expand(len(queries), -1).clone()
        lengths = queries.lengths
        for position in range(int(lengths.max()) if len(queries) else 0):
            rows = np.flatnonzero(lengths > position)
            words = queries.values[queries.offsets[rows] + position]
            keep = words < n_words
            rows, words = rows[keep], words[keep]
            if len(rows) == 0:
                continue
            likelihood = self._word_likelihood(words, theta_t, phi_t)
            out[torch.as_tensor(rows, device=out.device)] += torch.log(likelihood)
        return out

    def _word_likelihood(self, words: np.ndarray, theta_t: Tensor, phi_t: Tensor) -> Tensor:
        """``[n, D]`` ``P(w | d) = Σ_z φ_{w|z} θ_{z|d}`` of each word for every document."""
        return phi_t[torch.as_tensor(words, device=phi_t.device)] @ theta_t

    def _arrays(self) -> dict[str, np.ndarray]:
        if self.model_ is None or self.lengths_ is None:
            return {}
        return {"phi": self.model_.phi_, "theta": self.model_.theta_, "lengths": self.lengths_,
                "log_likelihood": np.asarray(self.model_.log_likelihood_, dtype=np.float64)}

    def _set_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        model = self._make_model()
        model.phi_, model.theta_ = arrays["phi"], arrays["theta"]
        model.log_likelihood_ = [float(v) for v in arrays.get("log_likelihood", ())]
        self.model_, self.lengths_ = model, arrays["lengths"]
        self._cache = None
