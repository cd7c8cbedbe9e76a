"""Neighbour-object candidates: item-based collaborative filtering on tag sets (ours).

Beyond Canuto et al. (2013), whose candidates are association-rule consequents and text terms.
Given a target object's input tags ``I_o``, the D objects whose tag sets are most similar to
``I_o`` vote for their tags::

    sim(o, d) = cos(idf ⊙ 1[I_o], idf ⊙ 1[T_d])          idf_t = log((|D| + 1) / (df_t + 1))
    s(o, t)   = Σ_{d ∈ N_k(o)} sim(o, d)^p · 1[t ∈ T_d]   N_k(o): the k most similar D objects
    knn(o, t) = s(o, t) / max_t' s(o, t')                  (t, t' outside I_o)

Ties among neighbours are broken by D order, among tags by tag code. Only D's tag sets and
``I_o`` are read: the gold tags never reach it. :class:`NeighbourTags` is used by
:class:`~tagtorch.candidates.latre.LatreCandidates` (its ``neighbours`` setting, off by
default): the ``n_candidates`` tags of highest ``knn`` outside ``I_o`` join the candidates, and
``knn`` becomes a feature of every candidate (``feature``).

With ``space="profiles"`` (the generator's ``profile_neighbours`` setting, feature
``knn_profile``), the similarity is that of the objects' other interactions instead
(:attr:`~tagtorch.data.folksonomy.Folksonomy.profiles`, e.g. Last.fm's listeners with their
play counts): ``sim(o, d) = cos(w_o, w_d)`` with ``w_{o,u} = log(1 + count) · idf_u`` over the
keys ``u``, and the vote is the same. A target object's profile is object metadata, known
before any tag, like its title; an object without a profile gets no votes.

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
import torch

from tagtorch.candidates.sparse import Lookup
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries
from tagtorch.data.terms import TermIndex

__all__ = ["NeighbourTags", "SparseScores", "incidence", "top_per_row"]


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


def incidence(tags: Ragged, n_terms: int, weights: np.ndarray | None = None
               ) -> sp.csr_matrix:
    """``[n, W]`` matrix of ragged rows: 1 per distinct entry, or the summed ``weights``."""
    matrix = sp.csr_matrix((np.ones(len(tags.values)) if weights is None else weights,
                            np.asarray(tags.values, dtype=np.int64),
                            np.asarray(tags.offsets, dtype=np.int64)),
                           shape=(len(tags), n_terms))
    matrix.sum_duplicates()
    if weights is None:
        matrix.data[:] = 1.0
    return matrix


def _row_ids(matrix: sp.csr_matrix) -> np.ndarray:
    """The row of each stored entry of a CSR matrix."""
    return np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))


def _unit_rows(matrix: sp.csr_matrix, column_weights: np.ndarray) -> sp.csr_matrix:
    """Each column scaled by its weight, then each row by its Euclidean norm.

    Empty rows stay empty. Works on the stored entries, without scipy's broadcasting (one
    object in microseconds).
    """
    out = matrix.copy()
    out.data = out.data * column_weights[out.indices]
    rows = _row_ids(out)
    norms = np.sqrt(np.bincount(rows, weights=out.data ** 2, minlength=out.shape[0]))
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    out.data *= scale[rows]
    return out


class NeighbourTags:
    """Tags of the D objects most similar to a target object (module docstring).

    Args:
        k: neighbours per object.
        power: ``p``, the exponent of the similarity in the vote.
        idf: weight tags (or profile keys) by their inverse document frequency in D (False:
            plain cosine).
        n_candidates: tags of highest score added to each object's candidates (0: none).
        feature: add the score to the candidates' features (``knn`` or ``knn_profile``).
        space: ``"tags"``: similarity of I_o and D's tag sets; ``"profiles"``: of the
            objects' profiles (:attr:`tagtorch.data.terms.TermIndex.profile_keys`).
    """

    def __init__(self, k: int = 1000, power: float = 3.0, idf: bool = True,
                 n_candidates: int = 100, feature: bool = True, space: str = "tags") -> None:
        if k < 1 or n_candidates < 0 or power <= 0:
            raise ValueError(f"neighbours: need k >= 1, n_candidates >= 0 and power > 0, got "
                             f"{k}, {n_candidates}, {power}")
        if space not in ("tags", "profiles"):
            raise ValueError(f"neighbours: space must be 'tags' or 'profiles', got {space!r}")
        self.k, self.power, self.idf, self.n_candidates, self.feature, self.space = \
            k, power, idf, n_candidates, feature, space
        self.weights_: np.ndarray | None = None
        self._similar: sp.csr_matrix | None = None
        self._tags: sp.csr_matrix | None = None
        self._terms: TermIndex | None = None

    @property
    def feature_name(self) -> str:
        """The score's feature name: ``knn`` (tags) or ``knn_profile`` (profiles)."""
        return "knn" if self.space == "tags" else "knn_profile"

    @property
    def name(self) -> str:
        """The source's name (its feature's)."""
        return self.feature_name

    def batch(self, queries: TagQueries, known: bool, device: torch.device) -> SparseScores:
        """The chunk's votes (:meth:`scores`) as a candidate-source batch."""
        return SparseScores(self.scores(queries.objects, queries.input_tags, known=known),
                            self.n_candidates, device)

    def _idf(self, rows: sp.csr_matrix) -> np.ndarray:
        df = np.asarray((rows > 0).sum(0)).ravel()
        return np.log((rows.shape[0] + 1) / (df + 1)) if self.idf else np.ones(rows.shape[1])

    def _vectors(self, objects: np.ndarray, input_tags: Ragged, n_terms: int) -> sp.csr_matrix:
        """The rows compared: 0/1 tag sets, or ``log(1 + count)`` profiles (unweighted)."""
        if self.space == "tags":
            return incidence(input_tags, n_terms)
        terms = self._terms
        if terms is None or terms.profile_keys is None or terms.profile_weights is None:
            raise ValueError("neighbours: space='profiles' needs a folksonomy with profiles "
                             "(e.g. data=lastfm data.listening=true)")
        keys = terms.profile_keys.take(objects)
        weights = np.log1p(terms.profile_weights[terms.profile_keys.positions(objects)])
        return incidence(keys, terms.n_profile_keys, weights)

    def fit(self, train_objects: np.ndarray, train_tags: Ragged, terms: TermIndex) -> Self:
        """Indexes D (one row per D object): its tag sets, and its profiles if compared."""
        self._terms = terms
        self._tags = incidence(train_tags, terms.n_terms)
        compared = self._vectors(np.asarray(train_objects), train_tags, terms.n_terms)
        self.weights_ = self._idf(compared)
        self._similar = _unit_rows(compared, self.weights_).T.tocsr()
        return self

    def scores(self, objects: np.ndarray, input_tags: Ragged,
               known: bool = True) -> sp.csr_matrix:
        """Scores of each target object (rows) and tag (columns), 0 on ``I_o``.

        Args:
            objects: ``[b]`` object codes of the targets (their profiles).
            input_tags: ragged ``[b]`` input tag codes of the targets.
            known: whether ``objects`` are codes of the fitted index; False (new objects, as a
                service posts): no profile is known, so the profile space gives no votes.

        Returns:
            ``[b, W]`` sparse scores in (0, 1], each row's best tag at 1.
        """
        if self._similar is None or self._tags is None or self.weights_ is None:
            raise RuntimeError("call fit() before scoring")
        n_terms = self._tags.shape[1]
        if self.space == "profiles" and not known:
            return sp.csr_matrix((len(input_tags), n_terms))
        query = self._vectors(np.asarray(objects), input_tags, n_terms)
        similarity = top_per_row(_unit_rows(query, self.weights_) @ self._similar, self.k)
        similarity.data **= self.power
        votes = (similarity @ self._tags).tocsr()
        given = incidence(input_tags, n_terms)
        votes.data[np.isin(_row_ids(votes) * n_terms + votes.indices,  # I_o is never a
                           _row_ids(given) * n_terms + given.indices)] = 0.0  # candidate
        votes.eliminate_zeros()
        rows = _row_ids(votes)
        row_max = np.ones(votes.shape[0])  # every stored vote is > 0
        filled = np.diff(votes.indptr) > 0
        row_max[filled] = np.maximum.reduceat(votes.data, votes.indptr[:-1][filled])
        votes.data /= row_max[rows]
        return votes


class SparseScores:
    """The batch of a source whose scores are a sparse ``[b, W]`` matrix.

    Args:
        scores: ``[b, W]`` the chunk's scores (entries > 0).
        n_candidates: the best tags per row it proposes.
        device: where keys and scores go.

    Example:
        >>> m = sp.csr_matrix(np.array([[0.0, 0.5, 1.0], [0.2, 0.0, 0.0]]))
        >>> batch = SparseScores(m, 1, torch.device("cpu"))
        >>> batch.keys().tolist(), batch.scores(torch.tensor([0, 1]), torch.tensor([1, 1])).tolist()
        ([2, 3], [0.5, 0.0])
    """

    def __init__(self, scores: sp.csr_matrix, n_candidates: int, device: torch.device) -> None:
        scores.sort_indices()
        self.matrix, self.n_candidates, self.device = scores, n_candidates, device

    def _keys_of(self, matrix: sp.csr_matrix) -> torch.Tensor:
        rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
        return torch.as_tensor(rows * matrix.shape[1] + matrix.indices, device=self.device)

    def keys(self) -> torch.Tensor:
        """The keys of each row's ``n_candidates`` best tags."""
        if not self.n_candidates:
            return torch.zeros(0, dtype=torch.long, device=self.device)
        return self._keys_of(top_per_row(self.matrix, self.n_candidates))

    def scores(self, rows: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        """The stored score of each pair (float32; 0 where absent)."""
        values = torch.as_tensor(self.matrix.data, dtype=torch.float32, device=self.device)
        return Lookup(self._keys_of(self.matrix), values, self.matrix.shape[1])(rows, tags)
