"""CP by alternating least squares on the user x item x tag tensor.

CP: Carroll and Chang 1970, Harshman 1970; the ALS of Kolda and Bader, "Tensor decompositions
and applications", SIAM Review 51(3), 2009, the algorithm of ``tensorly.decomposition.parafac``.

The binary tensor ``A`` of the training triples (every unobserved triple a 0) is approximated by
``A_hat = [[U, I, T]]``, ``A_hat[u, i, t] = sum_r U_ur I_ir T_tr``, minimizing
``|A - A_hat|_F^2 + l2_reg (|U|^2 + |I|^2 + |T|^2)``: each sweep solves for one factor with the
others fixed, ``U <- A_(1) (T kr I) (I^T I * T^T T + l2_reg Id)^-1`` (``kr``: Khatri-Rao,
``*``: element-wise), for the three modes in turn, as ``parafac`` does with ``l2_reg``,
``normalize_factors=False``, no line search. The initialization is ``parafac``'s ``"svd"``
(each factor: the leading left singular vectors of its unfolding, random normal columns where
the rank exceeds the mode's size) or ``"random"`` (uniform in [0, 1), seeded). Sweeps stop after
``iterations`` or when the relative reconstruction error changes by less than ``tol``.

The matricized-tensor-times-Khatri-Rao products and the error run on the sparse tensor
(:mod:`tagtorch.itemrec.sparse_tensor`; ``parafac`` needs the dense tensor, 24 GB for LastFM);
the tests check that the factors equal ``parafac``'s from the same initialization on dense
tensors. ``s(u, i, t) = A_hat[u, i, t]``; per-user queries score ``sum_t P(t | u) A_hat[u, i,
t]`` (``user_aggregate="profile"``) or the max over all tags. The Do-Rank paper's CP-based
baselines (its probabilistic CP-TRPR, :class:`~tagtorch.itemrec.baselines.ProbabilisticCP`) and
Do-Rank itself share this model's form and differ in how they fit it.
"""

from __future__ import annotations

import logging
from typing import Any, Self

import torch
from torch import Tensor

from tagtorch.itemrec.data import ItemRecData
from tagtorch.itemrec.sparse_tensor import (
    TensorModel,
    leading_vectors,
    mttkrp,
    tensor_coordinates,
    unfolding_gram,
)

log = logging.getLogger(__name__)

__all__ = ["CPALS", "als_sweep", "svd_init"]


def svd_init(coordinates: Tensor, sizes: tuple[int, int, int], rank: int,
             generator: torch.Generator) -> list[Tensor]:
    """``parafac``'s ``"svd"`` initialization: leading singular vectors, random columns after."""
    factors = []
    for mode, size in enumerate(sizes):
        vectors = leading_vectors(unfolding_gram(coordinates, sizes, mode), rank)
        if vectors.shape[1] < rank:
            extra = torch.randn(size, rank - vectors.shape[1], generator=generator,
                                dtype=vectors.dtype)
            vectors = torch.cat([vectors, extra], 1)
        factors.append(vectors)
    return factors


def als_sweep(coordinates: Tensor, factors: list[Tensor], l2_reg: float) -> list[Tensor]:
    """One ALS sweep over the three modes (in place in ``factors``, also returned)."""
    rank = factors[0].shape[1]
    identity = torch.eye(rank, dtype=factors[0].dtype, device=factors[0].device)
    for mode in range(3):
        gram = identity * l2_reg
        product = torch.ones(rank, rank, dtype=factors[0].dtype, device=factors[0].device)
        for other in range(3):
            if other != mode:
                product = product * (factors[other].T @ factors[other])
        gram = gram + product
        rhs = mttkrp(coordinates, factors, mode)
        factors[mode] = torch.linalg.solve(gram.T, rhs.T).T
    return factors


def relative_error(coordinates: Tensor, factors: list[Tensor]) -> float:
    """``|A - [[factors]]|_F / |A|_F`` of the binary tensor, without forming either."""
    coords = coordinates.to(factors[0].device)
    fitted = (factors[0][coords[:, 0]] * factors[1][coords[:, 1]]
              * factors[2][coords[:, 2]]).sum(1)
    squared_model = ((factors[0].T @ factors[0]) * (factors[1].T @ factors[1])
                     * (factors[2].T @ factors[2])).sum()
    squared = len(coords) - 2 * fitted.sum() + squared_model
    return float(squared.clamp_min(0).sqrt() / max(len(coords), 1) ** 0.5)


class CPALS(TensorModel):
    """CP-ALS (see the module docstring).

    Args:
        rank: ``R``, the rank of the decomposition.
        l2_reg: the ridge term of each least-squares solve (``parafac``'s ``l2_reg``).
        iterations: most ALS sweeps (``parafac``'s ``n_iter_max``).
        tol: stop when the relative error changes by less than this (0: never).
        init: ``"svd"`` or ``"random"``.
        seed: of the random initialization (and of the random columns of ``"svd"``).
        **kwargs: :class:`~tagtorch.itemrec.sparse_tensor.TensorModel` settings
            (``user_aggregate``, ``device``).
    """

    rank: int
    l2_reg: float
    iterations: int
    tol: float
    init: str
    seed: int
    _forwards_kwargs = True
    _arrays = ("user_factors", "item_factors", "tag_factors")

    def __init__(self, rank: int = 64, l2_reg: float = 0.0, iterations: int = 50,
                 tol: float = 1e-6, init: str = "svd", seed: int = 0, **kwargs: Any) -> None:
        if rank < 1 or iterations < 1:
            raise ValueError(f"rank and iterations must be >= 1, got {rank}, {iterations}")
        if l2_reg < 0 or tol < 0:
            raise ValueError(f"l2_reg and tol must be >= 0, got {l2_reg}, {tol}")
        if init not in ("svd", "random"):
            raise ValueError(f"init must be 'svd' or 'random', got {init!r}")
        super().__init__(**kwargs)
        self.errors_: list[float] = []

    def initial_factors(self, coordinates: Tensor, sizes: tuple[int, int, int]) -> list[Tensor]:
        """The starting factors (float64), by ``init``."""
        generator = torch.Generator().manual_seed(self.seed)
        if self.init == "svd":
            return svd_init(coordinates, sizes, self.rank, generator)
        return [torch.rand(size, self.rank, generator=generator, dtype=torch.float64)
                for size in sizes]

    def fit(self, data: ItemRecData) -> Self:
        """ALS sweeps from the initialization until ``iterations`` or ``tol``."""
        coordinates = tensor_coordinates(data.train)
        sizes = (data.n_users, data.n_items, data.n_tags)
        factors = [f.to(self.device) for f in self.initial_factors(coordinates, sizes)]
        self.errors_ = []
        for _ in range(self.iterations):
            factors = als_sweep(coordinates, factors, self.l2_reg)
            self.errors_.append(relative_error(coordinates, factors))
            if self.tol and len(self.errors_) > 1 and \
                    abs(self.errors_[-2] - self.errors_[-1]) < self.tol:
                break
        log.info("CP-ALS rank %d: relative error %.4f after %d sweeps", self.rank,
                 self.errors_[-1], len(self.errors_))
        self.user_factors, self.item_factors, self.tag_factors = (
            f.float().cpu().numpy() for f in factors)
        return self

    def contract(self, user_rows: Tensor, tag_rows: Tensor) -> Tensor:
        """``u * t`` per query: ``[B, R]`` (the CP core is the identity)."""
        return user_rows * tag_rows
