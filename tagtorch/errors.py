"""The errors of a user's input, shown by the commands as one line (layer 0: no tagtorch import).

- :class:`ConfigError`: a setting of the composed configuration is not allowed (the checks of
  :mod:`tagtorch.config_checks`, the cluster addresses of :mod:`tagtorch.engines`);
- :class:`DataFormatError`: a data file does not have the expected layout (the loaders);
- :class:`DataCheckError`: data that cannot support a task as configured (the splits);
- :class:`UnreadableFileError`: a file that cannot be read safely (:mod:`tagtorch.storage`,
  artifacts, journals);
- :class:`TooLargeError`: a model that would not fit in this machine's memory, refused before it
  allocates (:func:`tagtorch.devices.check_memory`).

A missing optional dependency is :class:`tagtorch.extras.MissingExtraError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["ConfigError", "DataCheckError", "DataFormatError", "TooLargeError",
           "UnreadableFileError"]


class ConfigError(ValueError):
    """A setting of the composed configuration is not allowed; the message names the key."""

    def __init__(self, key: str, value: object, expected: str) -> None:
        self.key, self.value, self.expected = key, value, expected
        super().__init__(f"config key {key}={value!r}: expected {expected}")

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        """Pickled by its arguments: raised on a cluster's worker, it reaches the run whole."""
        return type(self), (self.key, self.value, self.expected)


class DataFormatError(ValueError):
    """A data file does not have the expected format.

    The message names the file, the line (or, for Parquet, the row) and what was expected,
    so that a malformed download or a hand-made table can be fixed without a debugger.

    Attributes:
        path: the offending file.
        line: 1-based line number in the file (the header is line 1), if known.
        row: 1-based data row (for formats without lines, such as Parquet), if known.
        expected: what the loader expected to find.
        found: what it found instead, if known.

    Example:
        >>> err = DataFormatError("tags.dat", "an integer in column 'tagID'", "'x'", line=3)
        >>> str(err)
        "tags.dat, line 3: expected an integer in column 'tagID', found 'x'"
    """

    def __init__(
        self,
        path: str | Path,
        expected: str,
        found: str | None = None,
        *,
        line: int | None = None,
        row: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.line = line
        self.row = row
        self.expected = expected
        self.found = found
        location = str(path)
        if line is not None:
            location += f", line {line}"
        elif row is not None:
            location += f", row {row}"
        message = f"{location}: expected {expected}"
        if found is not None:
            message += f", found {found}"
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by its arguments (a worker's error reaches the run whole)."""
        return (_data_format_error, (self.path, self.expected, self.found, self.line, self.row))

    def shifted(self, lines: int) -> DataFormatError:
        """The same error ``lines`` lines further down the file (a chunk's, in its file).

        Example:
            >>> str(DataFormatError("a.txt", "4 fields", "3", line=2).shifted(10))
            'a.txt, line 12: expected 4 fields, found 3'
        """
        return DataFormatError(self.path, self.expected, self.found, row=self.row,
                               line=None if self.line is None else self.line + lines)


class DataCheckError(ValueError):
    """The data cannot support the task as configured.

    Args:
        dataset: the dataset's name.
        problem: what is missing (with the counts that show it).
        advice: the setting(s) that would change it.

    Example:
        >>> str(DataCheckError("bib", "no test query", "set task.split=global_time"))
        'data bib: no test query; set task.split=global_time'
    """

    def __init__(self, dataset: str, problem: str, advice: str) -> None:
        self.dataset, self.problem, self.advice = dataset, problem, advice
        super().__init__(f"data {dataset}: {problem}; {advice}")

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        """Pickled by its arguments (a worker's error reaches the run whole)."""
        return type(self), (self.dataset, self.problem, self.advice)


class UnreadableFileError(ValueError):
    """A file that cannot be read safely (corrupt, foreign or not what its manifest says)."""


class TooLargeError(ValueError):
    """A computation refused before it allocates: it would not fit in this machine's memory.

    Example:
        >>> print(TooLargeError("EASE", 3 * 2**40, 24 * 2**30, "its items x items matrices",
        ...                     "use a factor model"))  # doctest: +NORMALIZE_WHITESPACE
        EASE needs about 3,072.0 GiB for its items x items matrices, more than the 24.0 GiB
        this machine has; use a factor model
    """

    def __init__(self, what: str, needed: float, available: float, reason: str,
                 alternative: str) -> None:
        self.needed, self.available = needed, available
        self._args = (what, needed, available, reason, alternative)
        super().__init__(f"{what} needs about {needed / 2**30:,.1f} GiB for {reason}, more than "
                         f"the {available / 2**30:,.1f} GiB this machine has; {alternative}")

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        """Pickled by its arguments (a worker's error reaches the run whole)."""
        return type(self), self._args


def _data_format_error(path: Path, expected: str, found: str | None, line: int | None,
                       row: int | None) -> DataFormatError:
    """A :class:`DataFormatError` rebuilt from its arguments (its keyword ones included)."""
    return DataFormatError(path, expected, found, line=line, row=row)
