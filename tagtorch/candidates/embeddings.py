"""Tag-embedding candidates: the tags nearest to I_o in a low-rank PPMI space of D (ours).

Beyond Canuto et al. (2013). The tags of D are embedded by a truncated SVD of their positive
pointwise mutual information (PPMI) matrix, after Levy, Goldberg and Dagan (TACL 2015),
"Improving distributional similarity with lessons learned from word embeddings", with the
objects' tag sets as the contexts::

    C(a, b)   = |{d ∈ D : a, b ∈ T_d}|, a ≠ b              (co-occurrence; diagonal 0)
    P(a, b)   = C(a, b) / Σ C,   P(a) = Σ_b C(a, b) / Σ C,
    P_α(b)    = (Σ_a C(a, b))^α / Σ_b' (Σ_a C(a, b'))^α    (context smoothing, α = 0.75)
    PPMI(a,b) = max(0, ln P(a, b) / (P(a) P_α(b)))
    PPMI ≈ U_r Σ_r V_rᵀ,   e_t = (U_r Σ_r^β)_t / ||·||      (β = 0.5, "eigenvalue weighting")
    e_o       = Σ_{x ∈ I_o} e_x / ||·||,   emb(o, t) = max(0, e_o · e_t),   t ∉ I_o

Levy et al.'s defaults are kept (``α = 0.75``, ``β = 0.5``); the SVD is sklearn's randomized
one, seeded. A tag without co-occurrence in D has no vector (score 0), as has an object none of
whose input tags has one. Each object keeps its ``top`` best scores (sparse; a candidate from
another source beyond them gets ``emb = 0``); its ``n_candidates`` best join the candidates.

Only D's tag sets and I_o are read, never a gold tag. On HetRec Last.fm fold 0 the source alone
finds fewer gold tags within 300 than the neighbour objects
(:mod:`tagtorch.candidates.neighbours`; ``docs/extended_candidates.md``).
"""

from __future__ import annotations

from typing import Self

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils.extmath import randomized_svd

from tagtorch.candidates.neighbours import SparseScores, incidence, top_per_row
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries
from tagtorch.data.terms import TermIndex

__all__ = ["EmbeddingTags", "ppmi"]


def ppmi(cooccurrence: sp.csr_matrix, context_power: float = 0.75) -> sp.csr_matrix:
    """The positive PMI of a symmetric co-occurrence count matrix (module docstring).

    Example:
        >>> c = sp.csr_matrix(np.array([[0.0, 2.0, 0.0], [2.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))
        >>> m = ppmi(c, context_power=1.0).toarray()
        >>> bool(m[0, 1] > 0), float(m[0, 2]), bool(np.allclose(m, m.T))
        (True, 0.0, True)
    """
    counts = cooccurrence.tocoo()
    total = counts.sum()
    if total == 0:
        return sp.csr_matrix(counts.shape)
    rows = np.asarray(cooccurrence.sum(1)).ravel() / total
    context = np.asarray(cooccurrence.sum(0)).ravel() ** context_power
    context = context / context.sum()
    pmi = np.log(counts.data / total / (rows[counts.row] * context[counts.col]))
    keep = pmi > 0
    return sp.csr_matrix((pmi[keep], (counts.row[keep], counts.col[keep])), shape=counts.shape)


class EmbeddingTags:
    """Tags nearest to an object's input tags in D's PPMI-SVD space (module docstring).

    Args:
        rank: dimensions ``r`` of the truncated SVD (at most the number of tags minus 1).
        context_power: ``α``, the smoothing exponent of the context counts.
        eigen_power: ``β``, the exponent of the singular values in the tag vectors.
        top: scores kept per object (the rest count as 0).
        n_candidates: tags of highest score added to each object's candidates (0: none).
        feature: add the score ``emb`` to the candidates' features.
        seed: the seed of the randomized SVD.
    """

    name = feature_name = "emb"

    def __init__(self, rank: int = 128, context_power: float = 0.75, eigen_power: float = 0.5,
                 top: int = 1000, n_candidates: int = 100, feature: bool = True,
                 seed: int = 0) -> None:
        if rank < 1 or top < 1 or n_candidates < 0 or context_power <= 0:
            raise ValueError(f"embeddings: need rank >= 1, top >= 1, n_candidates >= 0 and "
                             f"context_power > 0, got {rank}, {top}, {n_candidates}, "
                             f"{context_power}")
        self.rank, self.context_power, self.eigen_power, self.top = \
            rank, context_power, eigen_power, top
        self.n_candidates, self.feature, self.seed = n_candidates, feature, seed
        self.vectors_: np.ndarray | None = None
        self.codes_: np.ndarray | None = None
        self.n_terms_ = 0

    def fit(self, train_objects: np.ndarray, train_tags: Ragged, terms: TermIndex) -> Self:
        """Embeds D's tags (``train_objects`` is unused: only the tag sets are read)."""
        tags = incidence(train_tags, terms.n_terms)
        cooccurrence = (tags.T @ tags).tocsr()
        cooccurrence.setdiag(0)
        cooccurrence.eliminate_zeros()
        matrix = ppmi(cooccurrence, self.context_power)
        used = np.unique(matrix.nonzero()[0])
        vectors = np.zeros((len(used), min(self.rank, max(len(used) - 1, 1))),
                           dtype=np.float32)
        if len(used) > 1:
            u, s, _ = randomized_svd(matrix[used][:, used], vectors.shape[1],
                                     random_state=self.seed)
            vectors[:] = u * s ** self.eigen_power
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        self.codes_ = used.astype(np.int64)  # the tags with a vector, ascending
        self.vectors_ = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        self.n_terms_ = terms.n_terms
        return self

    def batch(self, queries: TagQueries, known: bool, device: torch.device) -> SparseScores:
        """The chunk's scores (:meth:`scores`) as a candidate-source batch."""
        return SparseScores(self.scores(queries.objects, queries.input_tags, known=known),
                            self.n_candidates, device)

    def scores(self, objects: np.ndarray, input_tags: Ragged,
               known: bool = True) -> sp.csr_matrix:
        """``[b, W]`` sparse scores ``emb(o, t)`` in (0, 1], the ``top`` best per row.

        ``objects`` and ``known`` are unused (only I_o is read); they keep the interface of
        :meth:`tagtorch.candidates.neighbours.NeighbourTags.scores`. The products span only
        the tags with a vector (D's co-occurring tags), not the whole vocabulary.
        """
        if self.vectors_ is None:
            raise RuntimeError("call fit() before scoring")
        given = incidence(input_tags, self.n_terms_)[:, self.codes_]  # [b, tags with vectors]
        # the dense product in torch, not numpy: OpenBLAS threads that spin after a call
        # would hold the cores that torch's next parallel operations of the generator wait
        # for (a single object took 12.5 ms instead of 7 on Last.fm)
        vectors = torch.from_numpy(self.vectors_)
        query = torch.nn.functional.normalize(
            torch.from_numpy(np.asarray(given @ self.vectors_, dtype=np.float32)), dim=1)
        dense = (query @ vectors.T).clamp_(min=0.0).numpy()
        dense[given.nonzero()] = 0.0  # I_o is never a candidate
        keep = dense > 0
        if dense.shape[1] > self.top:  # the top scores and their ties, then top_per_row
            kth = -np.partition(-dense, self.top - 1, axis=1)[:, self.top - 1:self.top]
            keep &= dense >= kth
        rows, cols = np.nonzero(keep)
        assert self.codes_ is not None
        scores = sp.csr_matrix((dense[rows, cols].astype(np.float64),
                                (rows, self.codes_[cols])), shape=(len(dense), self.n_terms_))
        return top_per_row(scores, self.top)
