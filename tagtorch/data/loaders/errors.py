"""Errors raised by the loaders when a file does not have the expected layout."""

from __future__ import annotations

from pathlib import Path


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
