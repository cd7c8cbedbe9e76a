"""The resource ranker contract, and the term-matching models every baseline shares.

A resource ranker learns from the training documents, one per object: all the training tags of
all its posts, with repeats (Harvey, Ruthven and Carman 2010, Section 3: "each URL is now
represented by the complete set of tags used to describe it by users"), and scores every object
for a query, the tag set of a post: ``score(queries) -> [B, D]``, higher is better. The
evaluation (:mod:`tagtorch.evaluation.resource_ranking`) ranks only objects with a training
document, breaks equal scores by object code (the candidate order of
:mod:`tagtorch.metrics.functional`) for every method alike, and gives queries only the tags
that occur in training (an unseen tag would score every object alike, or zero them all in a
query likelihood).

The three baselines of the paper are term-matching models of one form,
``score(d, q) = const(q) + sum_{w in q} M[w, d] + |q| * bias[d]`` with a sparse ``M``
(:class:`TermMatchRanker`): ``score`` multiplies a block of queries with ``M`` as a sparse
matrix product, on the CPU or a CUDA device.

A saved resource ranker is a folder (:mod:`tagtorch.storage`): ``manifest.json`` (class,
settings, file digests) and ``arrays.npz``; nothing is ever unpickled.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from tagtorch.data.ragged import Ragged
from tagtorch.devices import resolve_device
from tagtorch.settings import ModelTask, SignatureSettings
from tagtorch.storage import load_array_model, save_array_model

__all__ = ["ResourceRanker", "TermMatchRanker", "document_counts", "seen_constant"]


def document_counts(documents: Ragged, n_words: int) -> sp.csr_matrix:
    """``N [D, W]``: how often each word occurs in each document (float64, CSR).

    Example:
        >>> document_counts(Ragged.from_lists([[2, 0, 2], []]), 3).toarray().tolist()
        [[1.0, 0.0, 2.0], [0.0, 0.0, 0.0]]
    """
    words = documents.values
    if len(words) and (words.min() < 0 or words.max() >= n_words):
        raise ValueError(f"word ids must lie in [0, {n_words})")
    counts = sp.csr_matrix((np.ones(len(words)), (documents.row_ids, words)),
                           shape=(len(documents), n_words))
    counts.sum_duplicates()
    return counts


def seen_constant(counts: sp.csr_matrix) -> np.ndarray:
    """``[W]``: 0 for the words of some document, ``-inf`` for the others (dropped from queries).

    Example:
        >>> seen_constant(sp.csr_matrix(np.array([[1.0, 0.0]]))).tolist()
        [0.0, -inf]
    """
    return np.where(np.asarray(counts.sum(0)).ravel() > 0, 0.0, -np.inf)


class ResourceRanker(SignatureSettings):
    """Base of the resource rankers: settings, fit/score interface, save and load.

    Settings are the constructor's arguments (:class:`~tagtorch.settings.SignatureSettings`:
    ``type(r)(**r.settings())`` is an unfitted copy). A subclass implements :meth:`fit` and
    :meth:`score` and names its fitted arrays in :meth:`_arrays` / :meth:`_set_arrays`.
    """

    task: ClassVar[ModelTask] = "resources"
    """The evaluation task these models belong to (read by the config checks)."""

    scoring_settings: ClassVar[tuple[str, ...]] = ()
    """Settings that only enter :meth:`score`: changing them needs no new :meth:`fit`."""

    def fit(self, documents: Ragged, n_words: int) -> Self:
        """Learns from the training documents (rows of word ids, one per object)."""
        raise NotImplementedError

    def score(self, queries: Ragged) -> Tensor:
        """``[B, D]`` scores of every object for each query (rows of word ids < ``n_words``)."""
        raise NotImplementedError

    def with_scoring(self, **settings: Any) -> Self:
        """This fitted ranker with other :attr:`scoring_settings` (the fitted state is shared).

        Raises:
            ValueError: a setting that is not a scoring setting.
        """
        other = set(settings) - set(self.scoring_settings)
        if other:
            raise ValueError(f"{sorted(other)} are not scoring settings of "
                             f"{type(self).__name__} (those are {self.scoring_settings})")
        copy = type(self)(**(self.settings() | settings))  # checks the values
        copy._set_arrays(self._arrays())
        return copy

    def _arrays(self) -> dict[str, np.ndarray]:
        """The fitted state as named arrays (empty before :meth:`fit`)."""
        raise NotImplementedError

    def _set_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restores the fitted state of :meth:`_arrays`."""
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        """Writes the folder ``path``: ``manifest.json`` and ``arrays.npz``.

        Raises:
            RuntimeError: the ranker is not fitted.
        """
        arrays = self._arrays()
        if not arrays:
            raise RuntimeError(f"{type(self).__name__} is not fitted: nothing to save")
        save_array_model(path, type(self), self.settings(), arrays)

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a ranker written by :meth:`save`; every file is checked against the manifest.

        Raises:
            UnreadableFileError: another class's folder, an altered file or refused settings.
        """
        ranker, arrays, _ = load_array_model(path, cls)
        ranker._set_arrays(arrays)
        return ranker


class TermMatchRanker(ResourceRanker):
    """``score(d, q) = const(q) + sum_{w in q} M[w, d] + |q| * bias[d]`` with a sparse ``M``.

    Subclasses compute ``M`` (:meth:`_weights`), ``bias`` and the per-word constant from the
    document counts; scoring is shared.

    Args:
        device: where queries are scored (``"cpu"``, ``"cuda"``; ``"auto"``: CUDA when present).
    """

    device: str

    def __init__(self, device: str = "auto") -> None:
        self.weights_: sp.csr_matrix | None = None  # M^T [D, W]
        self.bias_: np.ndarray | None = None  # [D]
        self.word_constant_: np.ndarray | None = None  # [W]
        self._cache: tuple[Tensor, Tensor, Tensor] | None = None

    def _weights(self, counts: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        """``(M [D, W], bias [D], word constant [W])`` of the document counts ``N [D, W]``.

        The constant of a word absent from every document is ``-inf``: query words never
        seen in training are dropped by :meth:`score`.
        """
        raise NotImplementedError

    def fit(self, documents: Ragged, n_words: int) -> Self:
        """Computes the model's term weights from the documents' word counts."""
        weights, bias, constant = self._weights(document_counts(documents, n_words))
        self.weights_ = sp.csr_matrix(weights)
        self.bias_, self.word_constant_ = bias, constant
        self._cache = None
        return self

    def _tensors(self) -> tuple[Tensor, Tensor, Tensor]:
        """``M^T`` as a sparse CSR tensor ``[D, W]``, ``bias [D]`` and the constants ``[W]``."""
        if self._cache is None:
            if self.weights_ is None or self.bias_ is None or self.word_constant_ is None:
                raise RuntimeError(f"{type(self).__name__} is not fitted")
            device = resolve_device(self.device)
            m = self.weights_
            with warnings.catch_warnings():  # "sparse CSR support is in beta": it is tested here
                warnings.simplefilter("ignore", UserWarning)
                matrix = torch.sparse_csr_tensor(
                    torch.as_tensor(m.indptr, dtype=torch.long),
                    torch.as_tensor(m.indices, dtype=torch.long),
                    torch.as_tensor(m.data, dtype=torch.float64), size=m.shape,
                    check_invariants=False).to(device)  # built from a valid scipy CSR
            self._cache = (matrix, torch.as_tensor(self.bias_, device=device),
                           torch.as_tensor(self.word_constant_, device=device))
        return self._cache

    def score(self, queries: Ragged) -> Tensor:
        """``[B, D]`` float64 scores (on the ranker's device; rows contiguous).

        Words never seen in training (or outside ``[0, W)``) are dropped from the queries.
        """
        matrix, bias, constant = self._tensors()
        device = matrix.device
        words = torch.as_tensor(queries.values, dtype=torch.long)
        rows = torch.as_tensor(queries.row_ids, dtype=torch.long)
        inside = (words >= 0) & (words < len(constant))
        words, rows = words[inside].to(device), rows[inside].to(device)
        seen = torch.isfinite(constant[words])
        words, rows = words[seen], rows[seen]
        counts = torch.zeros(len(constant), len(queries), dtype=torch.float64, device=device)
        counts.index_put_((words, rows), torch.ones(len(words), dtype=torch.float64,
                                                    device=device), accumulate=True)
        out = torch.sparse.mm(matrix, counts).T.contiguous()  # [B, D]
        if bool(bias.any()):  # BayesLM's; SMatch and BM25 have none
            lengths = torch.bincount(rows, minlength=len(queries)).to(torch.float64)
            out.add_(lengths[:, None] * bias[None, :])
        per_query = torch.zeros(len(queries), dtype=torch.float64, device=device)
        return out.add_(per_query.index_add_(0, rows, constant[words])[:, None])

    def _arrays(self) -> dict[str, np.ndarray]:
        if self.weights_ is None or self.bias_ is None or self.word_constant_ is None:
            return {}
        w = self.weights_
        return {"indptr": w.indptr, "indices": w.indices, "data": w.data,
                "shape": np.asarray(w.shape), "bias": self.bias_,
                "word_constant": self.word_constant_}

    def _set_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        shape = tuple(int(v) for v in arrays["shape"])
        self.weights_ = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]),
                                      shape=shape)
        self.bias_, self.word_constant_ = arrays["bias"], arrays["word_constant"]
        self._cache = None
