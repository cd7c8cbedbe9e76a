"""The interface of the candidate sources beyond the paper's rules and text terms (ours).

Canuto et al. (2013) take candidates from two sources: association-rule consequents of the
input tags and the terms of the object's text. :class:`~tagtorch.candidates.latre.LatreCandidates`
can add further sources, all behind :class:`TagSource`:

- :class:`~tagtorch.candidates.lda_tags.LdaTagSource` (``lda``): TagRec's LDA, ``P(t | o)``;
- :class:`~tagtorch.candidates.neighbours.NeighbourTags` (``knn``, ``knn_profile``): tags of the
  most similar D objects;
- :class:`~tagtorch.candidates.embeddings.EmbeddingTags` (``emb``): tags nearest to the input
  tags in a PPMI-SVD space.

A source is fitted on D; for one chunk of target objects it returns a :class:`SourceBatch`,
which proposes candidate keys (``row * W + tag``: its ``n_candidates`` best tags per object)
and scores any (object, tag) pair of the chunk's final candidates. The generator then puts
every source's score to one use each: a feature (when the source's ``feature`` is on) and a
rank in the one fusion and budget step (:meth:`LatreCandidates._fuse
<tagtorch.candidates.latre.LatreCandidates>`: reciprocal-rank fusion with :data:`RRF_K`).

:class:`~tagtorch.candidates.neighbours.SparseScores` is the batch of the sources whose scores
are a sparse ``[b, W]`` matrix (neighbours, embeddings).
"""

from __future__ import annotations

from typing import Protocol, Self

import numpy as np
import torch

from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries
from tagtorch.data.terms import TermIndex

__all__ = ["RRF_K", "SourceBatch", "TagSource"]

RRF_K = 60.0
"""The constant ``k`` of reciprocal-rank fusion ``Σ_s 1 / (k + rank_s)`` (Cormack, Clarke and
Büttcher 2009, whose value 60 we keep), which orders the candidate budget and gives ``rrf``."""


class SourceBatch(Protocol):
    """One source's view of one chunk of target objects."""

    def keys(self) -> torch.Tensor:
        """``[n]`` the candidate keys ``row * W + tag`` the source proposes (may be empty)."""
        ...

    def scores(self, rows: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        """``[n]`` the source's score of each pair ``(rows[i], tags[i])`` (0: unscored)."""
        ...


class TagSource(Protocol):
    """A candidate source fitted on D (see the module docstring).

    Attributes:
        name: the source's name in the ``rr_*`` features and the fusion (``lda``, ``knn``, ...).
        feature_name: the name of its score as a feature.
        feature: whether its score is a feature of every candidate.
        n_candidates: tags it adds to each object's candidates (0: it only scores).
    """

    feature: bool
    n_candidates: int

    @property
    def name(self) -> str:
        """The source's name in ``rr_*`` and the fusion."""
        ...

    @property
    def feature_name(self) -> str:
        """The name of its score as a feature."""
        ...

    def fit(self, train_objects: np.ndarray, train_tags: Ragged, terms: TermIndex) -> Self:
        """Learns from D (``train_objects`` and their tags)."""
        ...

    def batch(self, queries: TagQueries, known: bool, device: torch.device) -> SourceBatch:
        """The source on one chunk (``known``: the objects are codes of the fitted index)."""
        ...
