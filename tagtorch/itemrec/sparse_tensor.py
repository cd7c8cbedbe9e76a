"""The user x item x tag tensor of the training triples, kept sparse, and its tensor algebra.

What HOSVD and CP-ALS need of it.

The tensor ``A`` is binary: ``A[u, i, t] = 1`` for each training triple. Dense, it does not fit
in memory at the data sets' sizes (LastFM's 5-core: 981 x 3,496 x 1,745 values, 24 GB in
float32), which is what ``tensorly``'s decompositions take under its PyTorch backend, so the
operations that touch ``A`` run on its coordinates here: the Gram matrix of a mode's unfolding
(:func:`unfolding_gram`, for the leading singular vectors of HOSVD and of the SVD
initialization of CP), the matricized tensor times Khatri-Rao product (:func:`mttkrp`, for
ALS) and the Tucker core ``A x_1 U1^T x_2 U2^T x_3 U3^T`` (:func:`tucker_core`). Everything that
involves only the small factors and cores is ``tensorly``'s (PyTorch backend):
:func:`tensorly_backend` runs such a block with it. The tests compare every function here with
``tensorly`` and ``numpy`` on dense tensors.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import ClassVar

import numpy as np
import scipy.sparse
import tensorly as tl
import torch
from torch import Tensor

from tagtorch.itemrec.base import profile_mix
from tagtorch.itemrec.baselines import ArrayModel
from tagtorch.itemrec.data import AGGREGATES, TagProfile
from tagtorch.settings import ModelTask

__all__ = ["TensorModel", "leading_vectors", "mttkrp", "tensor_coordinates", "tensorly_backend",
           "tucker_core", "unfolding_gram"]


@contextlib.contextmanager
def tensorly_backend() -> Iterator[None]:
    """Runs the block with ``tensorly``'s PyTorch backend (restored afterwards)."""
    with tl.backend_context("pytorch"):
        yield


def tensor_coordinates(triples: np.ndarray) -> Tensor:
    """``[N, 3]`` int64 coordinates of the distinct ``(user, item, tag)`` triples (sorted)."""
    return torch.from_numpy(np.unique(np.asarray(triples, dtype=np.int64), axis=0))


def _unfolding(coordinates: Tensor, sizes: Sequence[int], mode: int) -> scipy.sparse.csr_matrix:
    """The mode-``mode`` unfolding of the binary tensor, ``[sizes[mode], prod(other sizes)]``."""
    others = [m for m in range(3) if m != mode]
    coords = coordinates.cpu().numpy()
    columns = coords[:, others[0]] * np.int64(sizes[others[1]]) + coords[:, others[1]]
    n_columns = int(sizes[others[0]]) * int(sizes[others[1]])
    return scipy.sparse.csr_matrix((np.ones(len(coords)), (coords[:, mode], columns)),
                                   shape=(int(sizes[mode]), n_columns))


def unfolding_gram(coordinates: Tensor, sizes: Sequence[int], mode: int) -> Tensor:
    """``A_(mode) A_(mode)^T``, dense float64 ``[sizes[mode], sizes[mode]]``.

    Example:
        >>> coords = torch.tensor([[0, 0, 0], [1, 0, 0], [1, 1, 1]])
        >>> unfolding_gram(coords, (2, 2, 2), 0).tolist()
        [[1.0, 1.0], [1.0, 2.0]]
    """
    unfolded = _unfolding(coordinates, sizes, mode)
    return torch.from_numpy((unfolded @ unfolded.T).toarray())


def leading_vectors(gram: Tensor, k: int) -> Tensor:
    """The ``k`` leading eigenvectors of a Gram matrix (``[n, min(k, n)]``, by eigenvalue).

    They are the leading left singular vectors of the matrix whose Gram it is; each is
    signed so that its largest-magnitude entry is positive (an SVD's sign is arbitrary).
    """
    values, vectors = torch.linalg.eigh(gram)
    order = torch.argsort(values, descending=True, stable=True)[:min(k, len(values))]
    chosen = vectors[:, order]
    largest = chosen.abs().argmax(0)
    signs = torch.sign(chosen[largest, torch.arange(chosen.shape[1])])
    return chosen * torch.where(signs == 0, 1.0, signs).to(chosen.dtype)


def mttkrp(coordinates: Tensor, factors: Sequence[Tensor], mode: int) -> Tensor:
    """``A_(mode) (khatri-rao of the other factors)``: ``[sizes[mode], rank]``.

    For the binary tensor, row ``n`` is the sum over the triples with index ``n`` in ``mode``
    of the element-wise product of the other modes' factor rows.
    """
    others = [m for m in range(3) if m != mode]
    device = factors[0].device
    coords = coordinates.to(device)
    rows = factors[others[0]][coords[:, others[0]]] * factors[others[1]][coords[:, others[1]]]
    out = torch.zeros(factors[mode].shape[0], rows.shape[1], dtype=rows.dtype, device=device)
    return out.index_add_(0, coords[:, mode], rows)


def tucker_core(coordinates: Tensor, factors: Sequence[Tensor], chunk: int = 4096) -> Tensor:
    """``A x_1 U1^T x_2 U2^T x_3 U3^T``: ``[c1, c2, c3]``, summed over the triples in chunks."""
    device = factors[0].device
    coords = coordinates.to(device)
    c1, c2, c3 = (f.shape[1] for f in factors)
    core = torch.zeros(c1 * c2, c3, dtype=factors[0].dtype, device=device)
    for start in range(0, len(coords), chunk):
        part = coords[start:start + chunk]
        pairs = (factors[0][part[:, 0]][:, :, None] * factors[1][part[:, 1]][:, None, :])
        core += pairs.reshape(len(part), c1 * c2).T @ factors[2][part[:, 2]]
    return core.reshape(c1, c2, c3)


class TensorModel(ArrayModel):
    """A factorized tensor model: ``s(u, i, t)`` from user, item and tag factor rows.

    Subclasses fit the factors (``user_factors [U, c1]``, ``item_factors [I, c2]``,
    ``tag_factors [T, c3]``, float32 arrays) and contract a batch of user and tag rows into
    ``[B, c2]`` (:meth:`contract`); the item scores are that times ``item_factors^T``. Per-user
    queries under the ``"profile"`` aggregation contract the user's profile-weighted tag row
    ``sum_t P(t | u) T_t`` (the score is linear in the tag row).

    Args:
        user_aggregate: per-user queries' aggregation (``"profile"`` or ``"max"``).
        device: where the model is fitted and scores.
    """

    user_aggregate: str
    device: str
    task: ClassVar[ModelTask] = "itemrec"

    def __init__(self, user_aggregate: str = "profile", device: str = "cpu") -> None:
        if user_aggregate not in AGGREGATES:
            raise ValueError(f"user_aggregate must be one of {AGGREGATES}, got "
                             f"{user_aggregate!r}")
        self.user_factors: np.ndarray | None = None
        self.item_factors: np.ndarray | None = None
        self.tag_factors: np.ndarray | None = None

    def contract(self, user_rows: Tensor, tag_rows: Tensor) -> Tensor:
        """``[B, c2]``: the model's core contracted with user ``[B, c1]`` and tag ``[B, c3]``."""
        raise NotImplementedError

    def _factor(self, name: str) -> Tensor:
        self._check_fitted()
        return torch.from_numpy(getattr(self, name)).to(self.device)

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """``[B, n_items]`` ``s(u, i, t)`` of every item for the ``(user, tag)`` queries."""
        user_rows = self._factor("user_factors")[users.to(self.device)]
        tag_rows = self._factor("tag_factors")[tags.to(self.device)]
        return self.contract(user_rows, tag_rows) @ self._factor("item_factors").T

    def profile_scores(self, users: Tensor, profile: TagProfile) -> Tensor:
        """``[B, n_items]`` ``sum_t P(t | u) s(u, i, t)`` over each user's training tags."""
        tag_rows = profile_mix(profile, self._factor("tag_factors"))
        user_rows = self._factor("user_factors")[users.to(self.device)]
        return self.contract(user_rows, tag_rows) @ self._factor("item_factors").T
