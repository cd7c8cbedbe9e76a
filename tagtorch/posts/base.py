"""The contract of personalized tag recommenders: ``fit(PostData)``, ``score(Posts)``, save, load.

A post ranker learns from a split's training posts and scores every tag for a batch of posts
``(user, resource, time)`` at once: ``[Q, W]`` scores, a sparse matrix (its stored entries are
the candidates) or a dense array (``-inf``: not a candidate), ranked by
:func:`~tagtorch.posts.baselines.recommend`.

TagRec's baselines are statistics of the training posts, fitted in seconds: their saved form is
the settings and those posts (``arrays.npz``, no pickle), and loading fits them again on the
posts, which gives the same scores. A learned method that keeps more state adds its arrays
(:attr:`PostRanker._state`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Self, TypeAlias

import numba
import numpy as np
import scipy.sparse as sp

from tagtorch.candidates.rules import kth_largest
from tagtorch.data.ragged import Ragged
from tagtorch.errors import UnreadableFileError
from tagtorch.posts.data import PostData, Posts
from tagtorch.settings import ModelTask, SignatureSettings
from tagtorch.storage import (
    check_codes,
    check_count,
    check_ragged,
    load_array_model,
    save_array_model,
)

__all__ = ["PostRanker", "PostScores", "recommend", "value_at"]

PostScores: TypeAlias = sp.csr_matrix | np.ndarray
"""``[Q, W]`` tag scores of posts: sparse (stored entries are candidates) or dense (``-inf``:
not a candidate)."""

_MOST = 2**40
"""The largest count a saved model may state (a bound for hostile files)."""
RANKED_ROWS = 1024
"""Rows :func:`recommend` sorts at a time (memory: a few arrays of their stored entries)."""


def value_at(scores: PostScores, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``scores[rows, cols]`` flat: 0 where a sparse one stores nothing or a dense one ``-inf``."""
    if isinstance(scores, np.ndarray):
        values = scores[rows, cols]
        return np.where(np.isfinite(values), values, 0.0)
    if not len(rows):  # scipy returns an empty matrix, not an empty array
        return np.zeros(0)
    return np.asarray(scores[rows, cols], dtype=np.float64).ravel()


def _contenders(scores: np.ndarray, k: int, block: int = 4096) -> sp.csr_matrix:
    """The finite entries of dense ``[Q, T]`` scores that may be among a row's ``k`` best.

    An entry below the row's ``k``-th best finite score never is, whatever the tie keys, so
    only those at least that high are kept (ties at the ``k``-th score included): the sort that
    follows takes ``O(Q k)`` entries instead of all ``Q T``, and the extra memory is one block
    of rows at a time.
    """
    n_rows, width = scores.shape
    rows, cols = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for start in range(0, n_rows, block):
        part = scores[start:start + block]
        finite = np.isfinite(part)
        if width > k:
            kth = np.partition(np.where(finite, part, -np.inf), width - k, axis=1)[:, width - k]
            finite &= part >= kth[:, None]
        r, c = np.nonzero(finite)  # row-major: the CSR order
        rows.append(r + start)
        cols.append(c)
    r, c = np.concatenate(rows), np.concatenate(cols)
    return sp.csr_matrix((scores[r, c], (r, c)), shape=scores.shape)


def _sparse_contenders(scores: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """The stored entries of canonical CSR scores that may be among a row's ``k`` best.

    As :func:`_contenders` for dense scores: entries below a row's ``k``-th best stored score
    are dropped (ties at it kept), so a source of thousands of entries a row sorts ``O(k)``.
    """
    keep = _contender_entries(scores.indptr, scores.data.astype(np.float64), k)
    if keep.all():
        return scores
    rows = np.repeat(np.arange(scores.shape[0]), np.diff(scores.indptr))
    indptr = np.zeros(scores.shape[0] + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(rows[keep], minlength=scores.shape[0]))
    return sp.csr_matrix((scores.data[keep], scores.indices[keep], indptr), shape=scores.shape)


@numba.njit(nogil=True, cache=True)
def _contender_entries(indptr: np.ndarray, data: np.ndarray, k: int) -> np.ndarray:
    """Per stored entry: whether it is at least its row's ``k``-th best (rows of <= k: all)."""
    keep = np.ones(len(data), dtype=np.bool_)
    for row in range(len(indptr) - 1):
        start, stop = indptr[row], indptr[row + 1]
        if stop - start > k:
            kth = kth_largest(data[start:stop], k)
            for entry in range(start, stop):
                keep[entry] = data[entry] >= kth
    return keep


def recommend(scores: PostScores, k: int = 10, ties: PostScores | None = None) -> np.ndarray:
    """``[Q, k]`` each row's ``k`` best tags, ``-1`` after fewer.

    Sparse scores rank their stored entries; dense ones every finite entry (``-inf``: not a
    candidate). Equal scores: the higher ``ties`` key first (a method's
    :meth:`~tagtorch.posts.base.PostRanker.tie_order`, e.g. TagRec's order), then the lower
    tag code.

    Example:
        >>> recommend(sp.csr_matrix(np.array([[0.0, 0.5, 0.5, 0.9], [0, 0, 0, 0]])), 3)
        array([[ 3,  1,  2],
               [-1, -1, -1]])
        >>> recommend(np.array([[-0.5, -np.inf, 0.0], [1.0, 1.0, 1.0]]), 3)
        array([[ 2,  0, -1],
               [ 0,  1,  2]])
        >>> recommend(np.array([[1.0, 1.0, 1.0]]), 3, ties=np.array([[1, 3, 2]]))
        array([[1, 2, 0]])
    """
    if isinstance(scores, np.ndarray):
        scores = _contenders(scores, k)
    else:
        scores = scores.tocsr()
        if not scores.has_canonical_format:  # summed on a copy: the caller's stays as it was
            scores = scores.copy()
            scores.sum_duplicates()
    out = np.full((scores.shape[0], k), -1, dtype=np.int64)
    for start in range(0, scores.shape[0], RANKED_ROWS):
        part = slice(start, start + RANKED_ROWS)
        out[part] = _ranked(scores[part], k, None if ties is None else ties[part])
    return out


def _ranked(scores: sp.csr_matrix, k: int, ties: PostScores | None) -> np.ndarray:
    """:func:`recommend` of canonical CSR scores, their contenders sorted at once."""
    scores = _sparse_contenders(scores, k)
    rows = np.repeat(np.arange(scores.shape[0]), np.diff(scores.indptr))
    keys = (np.zeros(len(scores.data)) if ties is None
            else value_at(ties, rows, scores.indices))
    order = np.lexsort((scores.indices, -keys, -scores.data, rows))  # by row, score, key, code
    position = np.arange(len(order)) - scores.indptr[rows[order]]
    keep = position < k
    out = np.full((scores.shape[0], k), -1, dtype=np.int64)
    out[rows[order][keep], position[keep]] = scores.indices[order][keep]
    return out


class PostRanker(SignatureSettings):
    """Base of personalized tag recommenders (module docstring)."""

    task: ClassVar[ModelTask] = "posts"
    """The evaluation task these models belong to (read by the config checks)."""

    data_: PostData | None = None
    """The training split, set by :meth:`fit`."""

    def __init__(self) -> None:
        """A method without settings (subclasses with settings declare their own)."""

    def fit(self, data: PostData) -> Self:
        """Learns from ``data.train`` (the test posts are never read)."""
        self.data_ = data
        self._fit(data)
        return self

    @abstractmethod
    def _fit(self, data: PostData) -> None:
        """The method's own fitting."""

    @abstractmethod
    def score(self, posts: Posts) -> PostScores:
        """``[Q, W]`` every tag's score for each post."""

    def tie_order(self, posts: Posts) -> PostScores | None:
        """``[Q, W]`` keys that order equal scores (the higher first), or None: the lower code.

        TagRec's baselines return the order in which TagRec's sort leaves equal scores
        (:func:`~tagtorch.posts.data.first_use`).
        """
        return None

    def top_tags(self, posts: Posts, k: int) -> np.ndarray:
        """``[Q, k]`` each post's ``k`` best tags in rank order, ``-1`` after fewer."""
        return recommend(self.score(posts), k, self.tie_order(posts))

    def save(self, path: str | Path) -> None:
        """Writes ``manifest.json`` (class, settings) and ``arrays.npz`` (the training posts)."""
        if self.data_ is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit() or load()")
        train, data = self.data_.train, self.data_
        save_array_model(path, type(self), self.settings(), {
            "users": train.users, "resources": train.resources, "times": train.times,
            "tag_offsets": train.tags.offsets, "tag_values": train.tags.values,
            "sizes": np.array([data.n_users, data.n_resources, data.n_tags]),
            **({} if train.source_order is None else {"source_order": train.source_order}),
            **({} if train.places is None else {"places": train.places}),
            **self._saved_arrays()})

    def _saved_arrays(self) -> dict[str, np.ndarray]:
        """More arrays :meth:`save` writes: what a method learns from besides the posts."""
        return {}

    def _restore(self, arrays: Mapping[str, np.ndarray], file: Path, n_resources: int) -> None:
        """Reads :meth:`_saved_arrays`'s arrays back (checked) before the model is refitted."""

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a folder written by :meth:`save` and fits the model again on its posts.

        Raises:
            UnreadableFileError: naming the file that is missing, altered or out of range.
        """
        model, arrays, _ = load_array_model(path, cls)
        file = Path(path) / "arrays.npz"
        missing = {"users", "resources", "times", "tag_offsets", "tag_values",
                   "sizes"} - set(arrays)
        if missing:
            raise UnreadableFileError(f"{file}: the saved arrays lack {sorted(missing)}")
        sizes = arrays["sizes"]
        if sizes.shape != (3,) or sizes.dtype.kind not in "iu":
            raise UnreadableFileError(f"{file}: sizes: expected 3 integers")
        n_users, n_resources, n_tags = (check_count(file, name, int(v), _MOST) for name, v in
                                        zip(("n_users", "n_resources", "n_tags"), sizes,
                                            strict=True))
        users = check_codes(file, "users", arrays["users"], n_users)
        resources = check_codes(file, "resources", arrays["resources"], n_resources)
        times = arrays["times"]
        if times.shape != users.shape or times.dtype.kind not in "iu" or \
                resources.shape != users.shape:
            raise UnreadableFileError(f"{file}: users, resources and times must be integer "
                                      "arrays of one length")
        offsets, values = check_ragged(file, "tag", arrays["tag_offsets"],
                                       arrays["tag_values"], len(users), n_tags)
        inside = np.diff(values) > 0  # each post's tags distinct and ascending
        if not inside[np.diff(Ragged(offsets, values).row_ids) == 0].all():
            raise UnreadableFileError(f"{file}: a post's tags must be distinct and ascending")
        order = arrays.get("source_order")
        if order is not None and (order.shape != values.shape or order.dtype.kind not in "iu"
                                  or (len(order) and (order.min() < 0 or order.max() >= _MOST))
                                  or len(np.unique(order)) != len(order)):
            raise UnreadableFileError(f"{file}: source_order must be distinct integers in "
                                      f"[0, {_MOST}), one per tag")
        places = arrays.get("places")
        if places is not None and (places.shape != users.shape or places.dtype.kind not in "iu"
                                   or (len(places) and (places.min() < 0
                                                        or places.max() >= _MOST))):
            raise UnreadableFileError(f"{file}: places must be integers in [0, {_MOST}), one "
                                      "per post")
        train = Posts(users, resources, times.astype(np.int64), Ragged(offsets, values),
                      None if order is None else order.astype(np.int64),
                      None if places is None else places.astype(np.int64))
        empty = train.take(np.zeros(0, dtype=np.int64))
        model._restore(arrays, file, n_resources)
        return model.fit(PostData(train, empty, n_users, n_resources, n_tags, None))
