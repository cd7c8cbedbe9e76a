"""Small helpers on torch sparse matrices (CSR from triplets, triplets, batched look-ups)."""

from __future__ import annotations

import warnings

import torch

from tagtorch.data.ragged import Ragged

# torch flags its CSR support as beta on every conversion; the operations used here are stable.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")


def csr(rows: torch.Tensor, cols: torch.Tensor, values: torch.Tensor,
        shape: tuple[int, int]) -> torch.Tensor:
    """A CSR matrix from triplets; duplicate positions are summed."""
    coo = torch.sparse_coo_tensor(torch.stack([rows, cols]), values, shape,
                                  check_invariants=False).coalesce()
    return coo.to_sparse_csr()


def ragged_csr(ragged: Ragged, n_cols: int, device: torch.device,
               values: torch.Tensor | None = None) -> torch.Tensor:
    """``[len(ragged), n_cols]`` CSR with ones (or ``values``, summed) at each row's values."""
    rows = torch.as_tensor(ragged.row_ids, device=device)
    cols = torch.as_tensor(ragged.values, dtype=torch.long, device=device)
    if values is None:
        values = torch.ones(len(cols), dtype=torch.float32, device=device)
    return csr(rows, cols, values, (len(ragged), n_cols))


def triplets(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(rows, cols, values)`` of a CSR matrix's stored entries, row-major."""
    crow = matrix.crow_indices()
    rows = torch.repeat_interleave(torch.arange(len(crow) - 1, device=crow.device),
                                   crow.diff())
    return rows, matrix.col_indices(), matrix.values()


class Lookup:
    """Batched random access to sparse entries by key ``row * n_cols + col``; 0 where absent.

    Args:
        keys: ``[nnz]`` sorted unique keys.
        values: ``[nnz]`` or ``[nnz, k]`` values of the keys.
        n_cols: the number of columns that defines the keys.

    Example:
        >>> m = csr(torch.tensor([0, 1]), torch.tensor([2, 0]), torch.tensor([5.0, 7.0]), (2, 3))
        >>> Lookup.from_csr(m)(torch.tensor([0, 1, 1]), torch.tensor([2, 0, 2])).tolist()
        [5.0, 7.0, 0.0]
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, n_cols: int) -> None:
        self.keys, self.values, self.n_cols = keys, values, n_cols

    @classmethod
    def from_csr(cls, matrix: torch.Tensor) -> Lookup:
        """Indexes a CSR matrix's stored entries."""
        rows, cols, values = triplets(matrix)
        keys = rows * matrix.shape[1] + cols
        keys, order = torch.sort(keys)
        return cls(keys, values[order], matrix.shape[1])

    @classmethod
    def from_ragged(cls, ragged: Ragged, n_cols: int, device: torch.device,
                    values: torch.Tensor | None = None) -> Lookup:
        """Indexes the entries ``(row, value)`` of a ragged array (repeats are summed)."""
        rows = torch.as_tensor(ragged.row_ids, device=device)
        cols = torch.as_tensor(ragged.values, dtype=torch.long, device=device)
        if values is None:
            values = torch.ones(len(cols), device=device)
        keys, sums = sum_by_key(rows * n_cols + cols, values)
        return cls(keys, sums, n_cols)

    def __call__(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """Values at the given positions (``[n]`` each)."""
        shape = (len(rows), *self.values.shape[1:])
        if len(self.keys) == 0:
            return torch.zeros(shape, dtype=self.values.dtype, device=rows.device)
        keys = rows * self.n_cols + cols
        at = torch.searchsorted(self.keys, keys).clamp_(max=len(self.keys) - 1)
        found = self.keys[at] == keys
        out = self.values[at]
        return out * found.reshape(-1, *[1] * (out.dim() - 1)).to(out.dtype)


def sum_by_key(keys: torch.Tensor,
               values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sums ``values`` (``[E]`` or ``[E, k]``) of equal keys: ``(sorted unique keys, sums)``.

    Keys spanning a small range (at most ``max(4 E, 2^16)``) are accumulated in a dense
    buffer, without sorting; others are sorted.

    Example:
        >>> keys, sums = sum_by_key(torch.tensor([7, 3, 7]), torch.tensor([1.0, 2.0, 4.0]))
        >>> keys.tolist(), sums.tolist()
        ([3, 7], [2.0, 5.0])
    """
    if len(keys) == 0:
        return keys, values
    low = keys.min()
    span = int(keys.max() - low) + 1
    if span <= max(4 * len(keys), 1 << 16):
        shifted = keys - low
        present = torch.bincount(shifted, minlength=span) > 0
        sums = torch.zeros((span, *values.shape[1:]), dtype=values.dtype, device=values.device)
        sums.index_add_(0, shifted, values)
        unique = torch.nonzero(present).squeeze(1)
        return unique + low, sums[unique]
    unique, inverse = torch.unique(keys, return_inverse=True)
    sums = torch.zeros((len(unique), *values.shape[1:]), dtype=values.dtype,
                       device=values.device)
    return unique, sums.index_add_(0, inverse, values)
