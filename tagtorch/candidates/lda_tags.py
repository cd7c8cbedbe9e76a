"""Topic-model candidates and the ``p_lda`` feature for tag recommendation (TagRec's LDA).

TagRec's LDA recommender (Kowald, Lacic and Trattner 2014, after Krestel et al. 2009): an LDA
model (:class:`tagtorch.topics.LDA`, Harvey, Ruthven and Carman's sampler and priors) is
fitted on the training objects' tag sets, one document per D object; a target object's topic
mixture ``θ_o`` is inferred from its input tags I_o by fold-in sampling (``φ`` fixed), and
every tag ``t`` is scored by::

    P(t | o) = Σ_z φ_{t|z} θ_{z|o}

:class:`LdaTagSource` offers the two uses :class:`~tagtorch.candidates.latre.LatreCandidates`
makes of it, both off by default so that the paper's 13-feature comparison stays intact (our
extension of Canuto et al. 2013):

- a candidate source: the ``n_candidates`` tags of highest ``P(t | o)`` outside I_o join the
  rule and text candidates (their 13 features are computed like every candidate's);
- a 14th feature ``p_lda`` = ``P(t | o)`` for every candidate.

The fold-in of a chunk of objects is seeded by the model's seed and the chunk's first object
code, so candidate sets do not depend on how many chunks came before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

import numpy as np
import torch

from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries
from tagtorch.data.terms import TermIndex
from tagtorch.topics import LDA

__all__ = ["LdaTagSource", "TopicBatch"]


class LdaTagSource:
    """An LDA model of D's tag sets: ``P(t | o)`` of target objects from their input tags.

    Args:
        lda: the topic model's settings (:class:`tagtorch.topics.LDA`; e.g. ``n_topics``).
        n_candidates: tags of highest ``P(t | o)`` added to each object's candidates (0: none).
        feature: add ``p_lda`` to the candidates' features.
        infer_iterations: fold-in sweeps per object.
        infer_burn_in: fold-in sweeps discarded before averaging.
    """

    name = "lda"
    feature_name = "p_lda"

    def __init__(self, lda: Mapping[str, Any] | None = None, n_candidates: int = 0,
                 feature: bool = True, infer_iterations: int = 50,
                 infer_burn_in: int = 25) -> None:
        if n_candidates < 0:
            raise ValueError(f"n_candidates must be >= 0, got {n_candidates}")
        self.lda = dict(lda or {})
        self.n_candidates = n_candidates
        self.feature = feature
        self.infer_iterations = infer_iterations
        self.infer_burn_in = infer_burn_in
        self.model_: LDA | None = None
        self._phi_t: torch.Tensor | None = None

    def fit(self, train_objects: np.ndarray, train_tags: Ragged, terms: TermIndex) -> Self:
        """Samples the topic model on D's tag sets (one document per D object).

        ``train_objects`` is unused: only the tag sets are read (the
        :class:`~tagtorch.candidates.sources.TagSource` interface).
        """
        self.model_ = LDA(**{"progress": False, **self.lda}).fit(train_tags, terms.n_terms)
        self._phi_t = None
        return self

    def batch(self, queries: TagQueries, known: bool, device: torch.device) -> TopicBatch:
        """The chunk's topic mixtures (fold-in seeded by its first object code)."""
        theta = self.mixtures(queries.input_tags, int(queries.objects[0]), device)
        return TopicBatch(self, theta, self.input_mask(queries.input_tags,
                                                       self._phi(device).shape[0], device))

    def mixtures(self, input_tags: Ragged, first_object: int, device: torch.device
                 ) -> torch.Tensor:
        """``θ [b, Z]`` of target objects from their input tags (fold-in, seeded per chunk)."""
        if self.model_ is None:
            raise RuntimeError("call fit() before inferring topics")
        theta = self.model_.infer(input_tags, iterations=self.infer_iterations,
                                  burn_in=self.infer_burn_in,
                                  seed=int(self.model_.seed) * 1_000_003 + int(first_object))
        return torch.as_tensor(theta, dtype=torch.float32, device=device)

    def _phi(self, device: torch.device) -> torch.Tensor:
        """``φ^T [W, Z]`` on the device."""
        if self._phi_t is None or self._phi_t.device != device:
            assert self.model_ is not None
            self._phi_t = torch.as_tensor(self.model_.phi_.T, dtype=torch.float32, device=device)
        return self._phi_t

    def top_keys(self, theta: torch.Tensor, is_input: torch.Tensor) -> torch.Tensor:
        """Keys ``row * W + t`` of each row's ``n_candidates`` best tags outside its input.

        Args:
            theta: ``[b, Z]`` the rows' topic mixtures.
            is_input: ``[b, W]`` bool, the rows' input tags.
        """
        phi_t = self._phi(theta.device)
        n_words = phi_t.shape[0]
        if self.n_candidates == 0:
            return torch.zeros(0, dtype=torch.long, device=theta.device)
        scores = (theta @ phi_t.T).masked_fill(is_input, -1.0)  # [b, W]
        width = min(self.n_candidates, n_words)
        top = torch.topk(scores, width, dim=-1)
        rows = torch.arange(len(theta), device=theta.device).repeat_interleave(width)
        keep = top.values.reshape(-1) >= 0
        return (rows * n_words + top.indices.reshape(-1))[keep]

    def probability(self, theta: torch.Tensor, rows: torch.Tensor, tags: torch.Tensor
                    ) -> torch.Tensor:
        """``P(t | o)`` of the pairs ``(rows, tags)``: ``[n]``."""
        phi_t = self._phi(theta.device)
        return (theta[rows] * phi_t[tags]).sum(-1)

    @staticmethod
    def input_mask(input_tags: Ragged, n_words: int, device: torch.device) -> torch.Tensor:
        """``[b, W]`` bool: each row's input tags."""
        mask = torch.zeros(len(input_tags), n_words, dtype=torch.bool, device=device)
        mask[torch.as_tensor(input_tags.row_ids, device=device),
             torch.as_tensor(input_tags.values, dtype=torch.long, device=device)] = True
        return mask


class TopicBatch:
    """:class:`LdaTagSource` on one chunk: its mixtures ``θ [b, Z]`` and input tags ``[b, W]``."""

    def __init__(self, source: LdaTagSource, theta: torch.Tensor, is_input: torch.Tensor) -> None:
        self.source, self.theta, self.is_input = source, theta, is_input

    def keys(self) -> torch.Tensor:
        """The keys of each row's ``n_candidates`` best tags outside its input."""
        return self.source.top_keys(self.theta, self.is_input)

    def scores(self, rows: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        """``P(t | o)`` of each pair."""
        return self.source.probability(self.theta, rows, tags)
