"""Ragged integer arrays (CSR layout): one variable-length row per object, user or query.

A :class:`Ragged` holds ``n`` rows in two flat arrays, ``offsets [n + 1]`` and ``values [nnz]``;
row ``i`` is ``values[offsets[i]:offsets[i + 1]]``. It is the storage for tag sets, input tags,
gold tags and text terms.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Ragged:
    """Rows of varying length stored as offsets and flat values.

    Attributes:
        offsets: ``[n + 1]`` int64, non-decreasing, ``offsets[0] == 0``.
        values: ``[offsets[-1]]`` flat row contents.

    Example:
        >>> r = Ragged.from_lists([[3, 1], [], [2]])
        >>> len(r), r[0].tolist(), r.lengths.tolist()
        (3, [3, 1], [2, 0, 1])
    """

    offsets: np.ndarray
    values: np.ndarray

    def __post_init__(self) -> None:
        if self.offsets.ndim != 1 or len(self.offsets) == 0 or self.offsets[0] != 0:
            raise ValueError("offsets must be a 1-d array starting at 0")
        if self.offsets[-1] != len(self.values):
            raise ValueError(
                f"offsets end at {self.offsets[-1]} but there are {len(self.values)} values"
            )

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]], dtype: type = np.int64) -> Ragged:
        """Builds a ragged array from a list of rows."""
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = (
            np.concatenate([np.asarray(r, dtype=dtype) for r in rows])
            if len(rows) and offsets[-1]
            else np.zeros(0, dtype=dtype)
        )
        return cls(offsets, values)

    @classmethod
    def from_groups(cls, groups: np.ndarray, values: np.ndarray, n_rows: int) -> Ragged:
        """Groups ``values`` by row index ``groups`` (stable: order inside a row is kept).

        Args:
            groups: ``[nnz]`` row index of each value, in ``[0, n_rows)``.
            values: ``[nnz]`` the values.
            n_rows: number of rows (rows without values are empty).
        """
        groups = np.asarray(groups, dtype=np.int64)
        order = np.argsort(groups, kind="stable")
        counts = np.bincount(groups, minlength=n_rows)
        if len(counts) > n_rows:
            raise ValueError(f"row index {groups.max()} out of range for {n_rows} rows")
        offsets = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return cls(offsets, np.asarray(values)[order])

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(len(self)):
            yield self[i]

    @property
    def lengths(self) -> np.ndarray:
        """``[n]`` int64 length of each row."""
        return np.diff(self.offsets)

    @property
    def row_ids(self) -> np.ndarray:
        """``[nnz]`` the row index of every value."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.lengths)

    def _lengths_of(self, rows: np.ndarray) -> np.ndarray:
        """``[len(rows)]`` the lengths of ``rows`` alone (not a pass over every row)."""
        return self.offsets[1:][rows] - self.offsets[:-1][rows]

    def take(self, rows: np.ndarray) -> Ragged:
        """Selects rows (in the given order) as a new ragged array."""
        rows = np.asarray(rows, dtype=np.int64)
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(self._lengths_of(rows), out=offsets[1:])
        return Ragged(offsets, self.values[self.positions(rows)])

    def padded(self, rows: np.ndarray, fill: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(values [b, P], mask [b, P])`` of ``rows``, padded with ``fill`` to the longest.

        Example:
            >>> values, mask = Ragged.from_lists([[5, 6], [], [7]]).padded(np.array([2, 0]))
            >>> values.tolist(), mask.tolist()
            ([[7, 0], [5, 6]], [[True, False], [True, True]])
        """
        lengths = self._lengths_of(np.asarray(rows, dtype=np.int64))
        width = max(int(lengths.max()) if len(lengths) else 0, 1)
        values = np.full((len(lengths), width), fill, dtype=self.values.dtype)
        mask = np.arange(width)[None, :] < lengths[:, None]
        values[mask] = self.values[self.positions(rows)]
        return values, mask

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """Indices into :attr:`values` of the entries of ``rows``, row after row.

        Example:
            >>> Ragged.from_lists([[5, 6], [], [7]]).positions(np.array([2, 0])).tolist()
            [2, 0, 1]
        """
        rows = np.asarray(rows, dtype=np.int64)
        lengths = self._lengths_of(rows)
        firsts = np.cumsum(lengths) - lengths  # where each row starts in the result
        starts = np.repeat(self.offsets[rows] - firsts, lengths)
        return np.arange(int(lengths.sum()), dtype=np.int64) + starts
