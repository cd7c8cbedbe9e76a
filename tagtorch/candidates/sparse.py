"""Small helpers on torch sparse matrices (CSR products, triplets, batched look-ups)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import scipy.sparse as sp
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


def spmm(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Triplets ``(rows, cols, values)`` of the product of two CSR matrices.

    Rows come in ascending order; the columns within a row in no particular order.

    On CUDA the product is torch's (cuSPARSE). On the CPU it is SciPy's, on zero-copy views of
    the same arrays: torch's CPU CSR-by-CSR product leaks memory (about 8 bytes per output
    entry and call in torch 2.13, gigabytes over the chunks of a fold) and its COO product is
    several times slower.

    Example:
        >>> a = csr(torch.tensor([0, 1]), torch.tensor([1, 0]), torch.tensor([2.0, 3.0]), (2, 2))
        >>> rows, cols, values = spmm(a, a)
        >>> rows.tolist(), cols.tolist(), values.tolist()
        ([0, 1], [0, 1], [6.0, 6.0])
    """
    if a.device.type != "cpu":
        return triplets(torch.sparse.mm(a, b))
    product = _scipy(a) @ _scipy(b)
    rows = np.repeat(np.arange(product.shape[0]), np.diff(product.indptr))
    return (torch.from_numpy(rows), torch.from_numpy(product.indices.astype(np.int64)),
            torch.from_numpy(product.data))


def _scipy(matrix: torch.Tensor) -> sp.csr_matrix:
    """A SciPy view of a CPU CSR tensor."""
    return sp.csr_matrix((matrix.values().numpy(), matrix.col_indices().numpy(),
                          matrix.crow_indices().numpy()), shape=tuple(matrix.shape))


def sorted_csr(rows: torch.Tensor, cols: torch.Tensor, values: torch.Tensor,
               shape: tuple[int, int]) -> torch.Tensor:
    """A CSR matrix from triplets already in row-major order without duplicates (no sort).

    Example:
        >>> m = sorted_csr(torch.tensor([0, 0, 2]), torch.tensor([1, 3, 0]),
        ...                torch.tensor([1.0, 2.0, 3.0]), (3, 4))
        >>> m.to_dense().tolist()
        [[0.0, 1.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0]]
    """
    crow = torch.zeros(shape[0] + 1, dtype=torch.long, device=rows.device)
    crow[1:] = torch.cumsum(torch.bincount(rows, minlength=shape[0]), 0)
    return torch.sparse_csr_tensor(crow, cols, values, shape, check_invariants=False)


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


def gather_rows(crow: torch.Tensor, picked: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Entries of the picked rows of a CSR structure, without a sparse product.

    Args:
        crow: ``[n_rows + 1]`` row pointers.
        picked: ``[p]`` row indices (repeats allowed).

    Returns:
        ``(which, position)``: for every gathered entry, the index into ``picked`` it came
        from and its position in the matrix's column/value arrays.

    Example:
        >>> gather_rows(torch.tensor([0, 2, 2, 5]), torch.tensor([2, 0]))
        (tensor([0, 0, 0, 1, 1]), tensor([2, 3, 4, 0, 1]))
    """
    start = crow[picked]
    length = crow[picked + 1] - start
    which = torch.repeat_interleave(torch.arange(len(picked), device=crow.device), length)
    offset = torch.cumsum(length, 0) - length
    position = torch.arange(len(which), device=crow.device) - offset[which] + start[which]
    return which, position


def segment_rank(rows: torch.Tensor, primary: torch.Tensor, secondary: torch.Tensor,
                 descending: bool = True) -> torch.Tensor:
    """0-based rank of each entry within its row by ``primary`` (then ``secondary`` ascending).

    Args:
        rows: ``[n]`` row of each entry (any order).
        primary: ``[n]`` main sort key.
        secondary: ``[n]`` tie-break key, ascending.
        descending: sort ``primary`` descending.
    """
    order = torch.argsort(secondary, stable=True)
    order = order[torch.argsort(primary[order], descending=descending, stable=True)]
    order = order[torch.argsort(rows[order], stable=True)]
    sorted_rows = rows[order]
    starts = torch.searchsorted(sorted_rows, sorted_rows, right=False)
    rank = torch.empty_like(rows)
    rank[order] = torch.arange(len(rows), device=rows.device) - starts
    return rank


def combinations_of_rows(tags: Ragged, size: int) -> tuple[np.ndarray, np.ndarray]:
    """All ``size``-subsets of every row, vectorized per distinct row length.

    Returns:
        ``(owner [n], members [n, size])``: the row of each subset and its values (ascending
        when the rows are).
    """
    owners, members = [], []
    lengths = tags.lengths
    for m in np.unique(lengths[lengths >= size]):
        rows = np.flatnonzero(lengths == m)
        combos = _combinations(int(m), size)
        index = tags.offsets[rows][:, None, None] + combos[None, :, :]
        owners.append(np.repeat(rows, len(combos)))
        members.append(tags.values[index].reshape(-1, size))
    if not owners:
        return np.zeros(0, dtype=np.int64), np.zeros((0, size), dtype=np.int64)
    return np.concatenate(owners), np.concatenate(members)


_COMBINATIONS: dict[tuple[int, int], np.ndarray] = {}


def _combinations(m: int, size: int) -> np.ndarray:
    """``[C(m, size), size]`` index combinations (cached)."""
    key = (m, size)
    if key not in _COMBINATIONS:
        flat = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(m), size)),
                           dtype=np.int64)
        _COMBINATIONS[key] = flat.reshape(-1, size)
    return _COMBINATIONS[key]
