"""NeuralNDCG: NDCG through a NeuralSort relaxation of sorting (Pobrotyn and Białobrzeski, 2021)."""

from __future__ import annotations

import torch
from torch import Tensor

from tagtorch.losses._masking import (
    Gain,
    check_positive,
    check_shapes,
    gain_values,
    ideal_dcg_of_gains,
    masked_log_softmax,
    mean_over_lists,
    ndcg_ratio,
    pairwise_diffs,
    position_discount,
    prepare,
    zero_padding,
)
from tagtorch.metrics.functional import check_k

__all__ = ["neural_sort", "neuralndcg_loss", "sinkhorn_scaling"]

_LOG_FLUSH = -60.0
"""Log-weights of the NeuralSort matrix below this are set to exactly 0."""


def neural_sort(scores: Tensor, mask: Tensor, tau: float = 1.0) -> Tensor:
    """NeuralSort relaxation of the sorting permutation of each list's real candidates.

    A. Grover, E. Wang, A. Zweig and S. Ermon, "Stochastic Optimization of Sorting Networks via
    Continuous Relaxations", ICLR 2019, Eq. 4. For a list of ``n`` real candidates, row ``r``
    (rank ``r = 1..n``) is ``softmax(((n + 1 - 2r) s - A_s 1) / tau)`` over the real candidates,
    with ``(A_s 1)_j = sum_k |s_j - s_k|``. Padding is removed before the formula (``n`` counts
    real candidates only, padded columns and rows ``r > n`` are exactly ``0``), so a padded list
    gives the matrix of the unpadded one, wherever its padding lies.

    Args:
        scores: ``[B, L]`` float scores (computed in their dtype).
        mask: ``[B, L]`` bool, ``True`` at real candidates.
        tau: temperature ``> 0``; smaller is closer to the hard permutation matrix.

    Returns:
        ``[B, L, L]`` row-stochastic matrices ``P[b, r - 1, j]``: the weight of candidate ``j``
        at rank ``r``; ``0`` in padded columns and in rows beyond a list's length.

    Example:
        >>> p = neural_sort(torch.tensor([[1.0, 3.0, 9.0]]), torch.tensor([[True, True, False]]))
        >>> [[round(v, 4) for v in row] for row in p[0].tolist()]
        [[0.1192, 0.8808, 0.0], [0.8808, 0.1192, 0.0], [0.0, 0.0, 0.0]]
    """
    check_shapes(scores, mask)
    check_positive("tau", tau)
    s = zero_padding(scores, mask)
    width = s.shape[-1]
    n_real = mask.sum(-1, keepdim=True).to(s.dtype)  # [B, 1]
    rank = torch.arange(1, width + 1, dtype=s.dtype, device=s.device)  # [L]
    spread = zero_padding(pairwise_diffs(s).abs(), mask[:, None, :]).sum(-1)  # [B, L]: (A_s 1)_j
    logits = ((n_real + 1 - 2 * rank)[:, :, None] * s[:, None, :] - spread[:, None, :]) / tau
    cells = (rank[None, :] <= n_real)[:, :, None] & mask[:, None, :]  # [B, rank, candidate]
    log_p = masked_log_softmax(logits, cells)
    # weights below e^-60 (~1e-26) are set to 0: they change nothing, and as subnormal floats
    # in the Sinkhorn scaling that follows they would make the CPU many times slower
    return zero_padding(torch.exp(log_p), cells & (log_p > _LOG_FLUSH))


def sinkhorn_scaling(matrix: Tensor, *, max_iter: int = 50, tol: float = 1e-6) -> Tensor:
    """Sinkhorn scaling of non-negative ``[B, N, N]`` matrices towards doubly stochastic ones.

    R. Sinkhorn, "A Relationship Between Arbitrary Positive Matrices and Doubly Stochastic
    Matrices", Ann. Math. Statist. 35(2), 1964. Alternately normalizes the columns, then the
    rows (allRank's order), at most ``max_iter`` times; a matrix stops changing once all its
    non-zero rows and columns sum to 1 within ``tol``, so each matrix gets the same result as
    if it were scaled alone. All-zero rows and columns (padding) stay zero.

    Args:
        matrix: ``[B, N, N]`` non-negative matrices.
        max_iter: the most column-then-row normalizations, ``>= 0``.
        tol: convergence tolerance on the row and column sums.

    Returns:
        ``[B, N, N]`` scaled matrices.

    Example:
        >>> x = torch.tensor([[[1.0, 1.0, 0.0], [3.0, 1.0, 0.0], [0.0, 0.0, 0.0]]])
        >>> p = sinkhorn_scaling(x)
        >>> [[round(v, 4) for v in row] for row in p[0].tolist()]
        [[0.366, 0.634, 0.0], [0.634, 0.366, 0.0], [0.0, 0.0, 0.0]]
    """
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 0:
        raise ValueError(f"max_iter must be an int >= 0, got {max_iter!r}")
    check_positive("tol", tol, allow_zero=True)
    if matrix.numel() == 0:
        return matrix
    u, v = _sinkhorn_vectors(matrix, max_iter, tol)
    return u[:, :, None] * matrix * v[:, None, :]


def _sinkhorn_vectors(matrix: Tensor, max_iter: int, tol: float) -> tuple[Tensor, Tensor]:
    """The row and column scales ``u, v [B, N]`` of :func:`sinkhorn_scaling`."""
    # The scaled matrix is diag(u) K diag(v): a column normalization sets v = 1 / (K^T u), a row
    # normalization u = 1 / (K v). Iterating on the two [B, N] vectors gives the matrix
    # iteration's result, but each step is two batched vector-matrix products instead of new
    # [B, N, N] matrices, and backpropagation keeps the vectors, not one matrix per step: memory
    # O(B N^2 + max_iter B N), not O(max_iter B N^2). Both products are row vector times matrix
    # (K v as v^T K^T, with K^T made contiguous once): the CPU's batched matrix-vector product
    # is about 15x slower than the vector-matrix one at N = 32. After a row normalization the
    # rows sum to 1 by construction, so convergence is read on the columns only.
    batch = matrix.shape[0]
    dead_rows = (matrix.sum(-1) <= 0).to(matrix.dtype)  # [B, N]: 1 at an all-zero row
    live_cols = matrix.sum(-2) > 0
    dead_cols = (~live_cols).to(matrix.dtype)
    transposed = matrix.transpose(1, 2).contiguous()
    u = torch.ones(matrix.shape[:2], dtype=matrix.dtype, device=matrix.device)
    v = torch.ones_like(u)
    col_sums = matrix.sum(-2)  # K^T u
    done = torch.zeros(batch, dtype=torch.bool, device=matrix.device)
    n_done = 0
    for _ in range(max_iter):
        # 1 / total, with 1 at an all-zero row or column: its scale changes nothing, and 1 keeps
        # its gradient finite (a clamp to a tiny value would give 0 / tiny**2 and NaN)
        new_v = (col_sums + dead_cols).reciprocal()
        new_u = (_vector_times(new_v, transposed) + dead_rows).reciprocal()
        if n_done:  # the lists already done keep their scales
            u = torch.where(done[:, None], u, new_u)
            v = torch.where(done[:, None], v, new_v)
        else:
            u, v = new_u, new_v
        col_sums = _vector_times(u, matrix)
        with torch.no_grad():
            col_err = (v * col_sums - 1).abs().masked_fill(~live_cols, 0.0).amax(-1)
            done = done | (col_err < tol)
            n_done = int(done.sum())
        if n_done == batch:
            break
    return u, v


def _vector_times(vectors: Tensor, matrices: Tensor) -> Tensor:
    """``[B, N]`` products ``x_b^T M_b`` of ``vectors [B, N]`` and ``matrices [B, N, N]``."""
    return torch.bmm(vectors[:, None, :], matrices).squeeze(1)


def neuralndcg_loss(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    tau: float = 1.0,
    k: int | None = None,
    max_iter: int = 50,
    tol: float = 1e-6,
    gain: Gain = "linear",
) -> Tensor:
    """NeuralNDCG: minus the NDCG of the NeuralSort-sorted gains, averaged over lists.

    P. Pobrotyn and R. Białobrzeski, "NeuralNDCG: Direct Optimisation of a Ranking Metric via
    Differentiable Relaxation of Sorting", arXiv:2102.07831, 2021 (deterministic variant, as
    allRank's ``neuralNDCG``). ``P^`` is the :func:`neural_sort` matrix of the scores, made
    doubly stochastic by :func:`sinkhorn_scaling`; ``P^ @ G`` are the quasi-sorted gains and
    the list's NeuralNDCG(@k) is ``sum_{r <= k} (P^ @ G)_r / log2(r + 1) / IDCG(@k)``.

    Padding is exactly out (instead of allRank's very low padded scores): padded candidates
    get no column and their list no extra rank rows of ``P^``, and their gains are ``0``.
    Lists with no relevant real candidate are left out of the mean.

    Takes ``scores``, ``labels`` and ``mask`` as described in :mod:`tagtorch.losses`, and ``tau``:
    NeuralSort temperature, ``> 0``; ``k``: NDCG cut-off (discounts beyond rank ``k`` are ``0``), or
    ``None`` for the whole list; ``max_iter``: the most Sinkhorn iterations; ``tol``: Sinkhorn
    convergence tolerance; ``gain``: ``"linear"`` (``label``, the tagtorch NDCG) or ``"exp"``
    (``2^label - 1``, allRank).

    Returns:
        ``[]`` mean loss (about ``[-1, 0]``) over the lists with a relevant candidate (dtype and the
        case of no such list: :mod:`tagtorch.losses`).
    """
    check_k(k, optional=True)
    s, y, m = prepare(scores, labels, mask)
    gains = gain_values(y, gain)
    soft_perm = sinkhorn_scaling(neural_sort(s, m, tau), max_iter=max_iter, tol=tol)
    sorted_gains = (soft_perm @ gains[:, :, None]).squeeze(-1)  # [B, rank]
    dcg = (sorted_gains * position_discount(s.shape[-1], k, s)).sum(-1)
    ndcg, valid = ndcg_ratio(dcg, ideal_dcg_of_gains(gains, k))
    return -mean_over_lists(ndcg, valid)
