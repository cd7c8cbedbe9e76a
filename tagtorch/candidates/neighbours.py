"""Neighbour-object candidates: item-based collaborative filtering on tag sets (ours).

Beyond Canuto et al. (2013), whose candidates are association-rule consequents and text terms.
Given a target object's input tags ``I_o``, the D objects whose tag sets are most similar to
``I_o`` vote for their tags::

    sim(o, d) = cos(idf ⊙ 1[I_o], idf ⊙ 1[T_d])          idf_t = log((|D| + 1) / (df_t + 1))
    s(o, t)   = Σ_{d ∈ N_k(o)} sim(o, d)^p · 1[t ∈ T_d]   N_k(o): the k most similar D objects
    knn(o, t) = s(o, t) / max_t' s(o, t')                  (t, t' outside I_o)

Ties among neighbours are broken by D order, among tags by tag code. Only D's tag sets and
``I_o`` are read: the gold tags never reach it. :class:`NeighbourTags` is used by
:class:`~tagtorch.candidates.features.LatreCandidates` (its ``neighbours`` setting, off by
default): the ``n_candidates`` tags of highest ``knn`` outside ``I_o`` join the candidates, and
``knn`` becomes a feature of every candidate (``feature``).

Defaults (``k = 1000``, ``p = 3``) are the best of a small grid on fold 0 of HetRec Last.fm
measured on T's candidate recall at 300 (the design note in ``docs/extended_candidates.md``);
a sweep should tune them on V.

The products are scipy sparse matrices on the CPU: ``[b, |D|]`` similarities (non-zero only
for D objects sharing a tag with ``I_o``), then ``[b, W]`` tag scores, chunk by chunk.
"""

from __future__ import annotations

from typing import Self

import numpy as np
import scipy.sparse as sp

from tagtorch.data.ragged import Ragged

__all__ = ["NeighbourTags", "top_per_row"]


def top_per_row(matrix: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """The ``k`` largest entries of each row (ties: the lower column first); the rest dropped.

    Example:
        >>> m = sp.csr_matrix(np.array([[0.5, 0.9, 0.5, 0.1], [0.0, 0.2, 0.0, 0.0]]))
        >>> top_per_row(m, 2).toarray().tolist()
        [[0.5, 0.9, 0.0, 0.0], [0.0, 0.2, 0.0, 0.0]]
    """
    matrix = matrix.tocsr()
    matrix.sum_duplicates()
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    order = np.lexsort((matrix.indices, -matrix.data, rows))
    rank = np.arange(len(order)) - matrix.indptr[rows[order]]
    kept = np.sort(order[rank < k])  # back to row, then column order
    counts = np.bincount(rows[kept], minlength=matrix.shape[0])
    indptr = np.concatenate([[0], np.cumsum(counts)])
    return sp.csr_matrix((matrix.data[kept], matrix.indices[kept], indptr), shape=matrix.shape)


def _incidence(tags: Ragged, n_terms: int) -> sp.csr_matrix:
    """``[n, W]`` 0/1 matrix of ragged tag sets (repeated tags count once)."""
    matrix = sp.csr_matrix((np.ones(len(tags.values)), np.asarray(tags.values, dtype=np.int64),
                            np.asarray(tags.offsets, dtype=np.int64)),
                           shape=(len(tags), n_terms))
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return matrix


class NeighbourTags:
    """Tags of the D objects most similar to a target object's input tags (module docstring).

    Args:
        k: neighbours per object.
        power: ``p``, the exponent of the similarity in the vote.
        idf: weight tags by their inverse document frequency in D (False: plain cosine).
        n_candidates: tags of highest ``knn`` added to each object's candidates (0: none).
        feature: add ``knn`` to the candidates' features.
    """

    feature_name = "knn"

    def __init__(self, k: int = 1000, power: float = 3.0, idf: bool = True,
                 n_candidates: int = 100, feature: bool = True) -> None:
        if k < 1 or n_candidates < 0 or power <= 0:
            raise ValueError(f"neighbours: need k >= 1, n_candidates >= 0 and power > 0, got "
                             f"{k}, {n_candidates}, {power}")
        self.k, self.power, self.idf, self.n_candidates, self.feature = \
            k, power, idf, n_candidates, feature
        self.weights_: np.ndarray | None = None
        self._similar: sp.csr_matrix | None = None
        self._tags: sp.csr_matrix | None = None

    def fit(self, train_tags: Ragged, n_terms: int) -> Self:
        """Indexes D's tag sets (one row per D object)."""
        tags = _incidence(train_tags, n_terms)
        df = np.asarray(tags.sum(0)).ravel()
        self.weights_ = (np.log((tags.shape[0] + 1) / (df + 1)) if self.idf
                         else np.ones(n_terms))
        weighted = tags.multiply(self.weights_[None, :]).tocsr()
        norms = np.sqrt(np.asarray(weighted.multiply(weighted).sum(1)).ravel())
        scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        self._similar = weighted.multiply(scale[:, None]).T.tocsr()  # [W, |D|], unit rows of D
        self._tags = tags
        return self

    def scores(self, input_tags: Ragged) -> sp.csr_matrix:
        """``knn(o, t)`` of each target object (rows) and tag (columns), 0 on ``I_o``.

        Args:
            input_tags: ragged ``[b]`` input tag codes of the target objects.

        Returns:
            ``[b, W]`` sparse scores in (0, 1], each row's best tag at 1.
        """
        if self._similar is None or self._tags is None or self.weights_ is None:
            raise RuntimeError("call fit() before scoring")
        query = _incidence(input_tags, self._tags.shape[1])
        weighted = query.multiply(self.weights_[None, :]).tocsr()
        norms = np.sqrt(np.asarray(weighted.multiply(weighted).sum(1)).ravel())
        scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        similarity = top_per_row(weighted.multiply(scale[:, None]).tocsr() @ self._similar,
                                 self.k)
        similarity.data **= self.power
        votes = (similarity @ self._tags).tocsr()
        votes = (votes - votes.multiply(query)).tocsr()  # I_o is never a candidate
        votes.eliminate_zeros()
        row_max = votes.max(axis=1).toarray().ravel()  # every stored vote is > 0
        votes.data /= row_max[np.repeat(np.arange(votes.shape[0]), np.diff(votes.indptr))]
        return votes
