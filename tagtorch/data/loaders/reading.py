"""The checked reading toolkit every loader shares: delimited text and Parquet tables.

:func:`read_delimited` reads a delimited text file with one header line into a DataFrame with
pandas' vectorized parser, after checking what pandas would accept silently or report with
a bare traceback: a missing column, a row with the wrong number of fields, an empty file, a
non-integer id, an integer outside the 64-bit range, a byte that is not in the file's
encoding. Each problem raises a :class:`DataFormatError` naming the file, the line and what
was expected; a file that cannot be read raises the usual ``OSError`` subclass
(``FileNotFoundError``, ``PermissionError``, ...) with a one-line message naming the path.

Reading rules shared by every loader:

- **Compression** is detected from the content's first bytes (gzip, bzip2, xz), never from
  the name: a gzip file named ``.csv`` is read, a plain file named ``.gz`` too. Zip archives,
  zstd streams and Parquet files given as text are refused with a message naming the file.
- **Encoding**: a file is decoded in one encoding (UTF-8 unless told otherwise; a leading
  byte-order mark is dropped) and a byte that is not valid in it is an error naming the file,
  the line and the byte: there is no silent whole-file fallback to another encoding. A NUL
  character is an error too (binary data, or UTF-16 text read as an 8-bit encoding).
- **Line breaks**: LF, CR LF and a lone CR all end a line (as in pandas and
  text editors); line numbers count from the header, line 1, and include blank lines.
- **Line length**: a line of more than :data:`MAX_LINE_BYTES` (1 MiB; with CSV quoting, the
  line breaks inside a quoted field continue its line) is an error naming it, so that memory
  stays bounded whatever the file (read in chunks or whole alike; a UTF-16 or UTF-32 file is
  read whole and not checked).
- **Quotes** (CSV quoting): a double quote starts a quoted field or is doubled inside one; a
  quote inside an unquoted field (``ab"c``) is an error naming its line, since where records
  end after it would depend on how the file is cut into chunks.
- **Integers** (the ids of the HetRec and MovieLens files, Unix times) are ASCII decimal
  digits with an optional sign and must fit a signed 64-bit integer.
"""

from __future__ import annotations

import bz2
import codecs
import csv
import gzip
import io
import logging
import lzma
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from typing import Any, BinaryIO, NoReturn, TypeGuard
from urllib.parse import unquote

import numpy as np
import pandas as pd

from tagtorch.data.folksonomy import MISSING_TIME
from tagtorch.errors import DataFormatError

log = logging.getLogger(__name__)

_INTEGER = r"[+-]?[0-9]+"
_INT64_DIGITS = str(np.iinfo(np.int64).max)  # 9223372036854775807, 19 digits
_TWO_63 = 2.0 ** 63
#: The characters of a blank line (but the separator): those of a line pandas skips (a line of
#: vertical tabs or form feeds is a row to pandas, padded with empty fields).
_WHITESPACE = np.array([ord(c) for c in " \t\r"], dtype=np.uint32)
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")
_SEPARATOR_NAMES = {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe", " ": "space"}
ASSIGNMENT_KEYS = ("user", "object", "tag", "timestamp")
#: The Unix seconds of the dates pandas can hold (years 1677 to 2262), the range of a time.
SECONDS_RANGE = (int(pd.Timestamp.min.ceil("s").timestamp()),
                 int(pd.Timestamp.max.floor("s").timestamp()))
#: Valid range of each date field read by :func:`local_time_seconds` (years: the whole years
#: that pandas' nanosecond timestamps cover).
_DATE_RANGES = {"year": (1678, 2261), "month": (1, 12), "day": (1, 31), "hour": (0, 23),
                "minute": (0, 59), "second": (0, 59)}

#: Compressed formats read transparently: (name, test on the first bytes, decompressing reader).
_Reader = Callable[[BinaryIO], io.BufferedIOBase]
_COMPRESSIONS: tuple[tuple[str, Callable[[bytes], bool], _Reader], ...] = (
    ("gzip", lambda head: head.startswith(b"\x1f\x8b"),
     lambda raw: gzip.GzipFile(fileobj=raw)),
    ("bzip2", lambda head: re.match(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)", head) is not None,
     bz2.BZ2File),
    ("xz", lambda head: head.startswith(b"\xfd7zXZ\x00"), lzma.LZMAFile),
)
MAX_INFLATION = 100
"""The most a compressed data file may inflate, as a multiple of its size (beyond 8 MiB):
tables compress 3 to 20 times; a bomb's thousands would size memory by its header, not its
size. A file of a higher ratio is read once decompressed by hand (plain text is not limited)."""
_INFLATION_FLOOR = 8 << 20
#: Binary formats refused in a text file, by their first bytes.
_REFUSED = (
    (b"PK\x03\x04", "a zip archive (extract the file from it first)"),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file (decompress it first)"),
    (b"PAR1", "a Parquet file (name it .parquet or pass format='parquet')"),
)


@dataclass(frozen=True)
class RawTable:
    """A table read from a file, with the file line (or row) of every frame row.

    Attributes:
        frame: the data, one row per data line (blank lines skipped).
        path: the file it came from.
        lines: ``[len(frame)]`` 1-based file line of each row, or None where lines are not
            meaningful (Parquet) or could not be mapped; messages then give 1-based rows.
        header: every column name of the file, in order (also those not read).
        first_row: the file's data rows before ``frame``'s first (a chunk's table).
    """

    frame: pd.DataFrame
    path: Path
    lines: np.ndarray | None = None
    header: tuple[str, ...] = ()
    first_row: int = 0

    def error(self, position: int, expected: str, found: str | None = None) -> DataFormatError:
        """A :class:`DataFormatError` located at the frame row ``position`` (0-based)."""
        if self.lines is not None:
            return DataFormatError(self.path, expected, found, line=int(self.lines[position]))
        return DataFormatError(self.path, expected, found,
                               row=self.first_row + position + 1)

    def integers(self, column: str) -> np.ndarray:
        """Column ``column`` as int64, or a :class:`DataFormatError` at its first bad value.

        Raises:
            DataFormatError: a value is empty, fractional, not a number or outside the
                signed 64-bit range.
        """
        values = self.optional_integers(column)
        if values.hasnans:
            position = int(np.flatnonzero(values.isna().to_numpy(dtype=bool))[0])
            raise self.error(position, f"an integer in column {column!r}", "an empty value")
        return values.to_numpy(dtype=np.int64)

    def optional_integers(self, column: str) -> pd.Series:
        """Column ``column`` as nullable ``Int64``: empty values are NA, others integers.

        Raises:
            DataFormatError: a non-empty value that is not an integer in the signed 64-bit
                range (fractional numbers, digits other than ASCII ``0-9``, lists, ...).
        """
        values = self.frame[column]
        expected = f"an integer in column {column!r}"
        in_range = f"{expected} within the signed 64-bit range"
        if pd.api.types.is_bool_dtype(values.dtype):
            raise self.error(0, expected, describe_value(values.iloc[0]))
        if pd.api.types.is_integer_dtype(values.dtype):
            if pd.api.types.is_unsigned_integer_dtype(values.dtype):
                too_big = (values > np.iinfo(np.int64).max).fillna(False).to_numpy(dtype=bool)
                if too_big.any():
                    position = int(np.flatnonzero(too_big)[0])
                    raise self.error(position, in_range, describe_value(values.iloc[position]))
            return values.astype("Int64").reset_index(drop=True)
        if pd.api.types.is_float_dtype(values.dtype):
            array = values.to_numpy(dtype=np.float64, na_value=np.nan)
            known = ~np.isnan(array)
            bad = known & (~np.isfinite(array) | (array != np.floor(array))
                           | (np.abs(array) >= _TWO_63))
            if bad.any():
                position = int(np.flatnonzero(bad)[0])
                raise self.error(position, in_range, describe_value(values.iloc[position]))
            out = np.zeros(len(array), dtype=np.int64)
            out[known] = array[known].astype(np.int64)
            return pd.Series(pd.arrays.IntegerArray(out, ~known))
        scalars = scalar_texts(self, column, expected)
        text = scalars.str.strip()
        empty = (text.isna() | (text == "")).to_numpy(dtype=bool)
        digits = text.str.fullmatch(_INTEGER).fillna(False).to_numpy(dtype=bool)
        bad = ~empty & ~digits
        if bad.any():
            position = int(np.flatnonzero(bad)[0])
            raise self.error(position, expected, describe_value(values.iloc[position]))
        magnitude = text.str.lstrip("+-").str.lstrip("0")
        length = magnitude.str.len().fillna(0).to_numpy(dtype=np.int64)
        limit = np.where(text.str.startswith("-").fillna(False).to_numpy(dtype=bool),
                         _INT64_DIGITS[:-1] + "8", _INT64_DIGITS)
        too_long = (length > 19) | ((length == 19) & (magnitude.fillna("").to_numpy(
            dtype=object) > limit))
        bad = ~empty & too_long
        if bad.any():
            position = int(np.flatnonzero(bad)[0])
            raise self.error(position, in_range, describe_value(values.iloc[position]))
        out = np.zeros(len(text), dtype=np.int64)
        if (~empty).any():
            out[~empty] = text[~empty].astype(np.int64).to_numpy()
        return pd.Series(pd.arrays.IntegerArray(out, empty))

    def unique_key(self, column: str, keys: np.ndarray) -> None:
        """Raises a :class:`DataFormatError` at the first repeated value of an id column."""
        repeated = pd.Series(keys).duplicated().to_numpy()
        if repeated.any():
            position = int(np.flatnonzero(repeated)[0])
            first = int(np.flatnonzero(keys == keys[position])[0])
            where = (f"line {self.lines[first]}" if self.lines is not None
                     else f"row {first + 1}")
            value = keys[position]
            value = value.item() if isinstance(value, np.generic) else value
            raise self.error(position, f"unique values in column {column!r}",
                             f"{value!r} again (first on {where})")


def describe_value(value: object) -> str:
    """A short description of a cell's value for an error message ("an empty value", ...)."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return "an empty value"
    if isinstance(value, (list, tuple, np.ndarray)):
        return f"a list {_short(repr(list(value)))}"
    if isinstance(value, (bytes, bytearray)):
        return f"bytes {_short(repr(bytes(value)))}"
    text = str(value)
    return "an empty value" if text.strip() == "" else _short(repr(text))


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_list(value: object) -> TypeGuard[list[Any] | tuple[Any, ...] | np.ndarray]:
    """Whether a cell holds a list (Parquet list columns give lists, tuples or arrays)."""
    return isinstance(value, (list, tuple, np.ndarray))


def scalar_texts(table: RawTable, column: str, expected: str) -> pd.Series:
    """Column ``column`` as a string Series; lists, bytes and other non-text values refused."""
    values = table.frame[column]
    if isinstance(values.dtype, pd.CategoricalDtype):
        values = values.astype(object)
    if pd.api.types.is_string_dtype(values.dtype) and not pd.api.types.is_object_dtype(
            values.dtype):
        return values.astype("string").reset_index(drop=True)
    array = values.to_numpy(dtype=object)
    ok = np.fromiter((v is None or v is pd.NA or isinstance(v, str)
                      or (isinstance(v, float) and np.isnan(v)) for v in array),
                     dtype=bool, count=len(array))
    if not ok.all():
        position = int(np.flatnonzero(~ok)[0])
        raise table.error(position, expected, describe_value(array[position]))
    return pd.Series(array, dtype="string")


def _io_error(path: Path, exc: OSError) -> OSError:
    """The same kind of error with a one-line message that names ``path``."""
    if isinstance(exc, FileNotFoundError):
        error: OSError = FileNotFoundError(f"{path}: no such file")
    elif isinstance(exc, IsADirectoryError):
        error = IsADirectoryError(f"{path}: is a folder, expected a file")
    elif isinstance(exc, PermissionError):
        error = PermissionError(f"{path}: permission denied (the file cannot be read; "
                                "check its permissions)")
    else:
        error = OSError(f"{path}: cannot read the file ({exc.strerror or exc})")
    return error


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed when they start with a gzip, bzip2 or xz header.

    Raises:
        FileNotFoundError, PermissionError, IsADirectoryError, OSError: the file cannot be
            read (the message names it).
        DataFormatError: a broken compressed stream, or a binary format that is not text.
    """
    return b"".join(_byte_pieces(path, None))


def _byte_pieces(path: Path, piece_bytes: int | None) -> Iterator[bytes]:
    """The file's (decompressed) bytes in pieces of ``piece_bytes``, or whole for None.

    Raises: as :func:`_read_bytes`, when the piece that meets the problem is read.
    """
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise _io_error(path, exc) from exc
    with handle:
        head = _read_piece(path, handle, 16)
        handle.seek(0)
        for name, matches, reader in _COMPRESSIONS:
            if matches(head):
                yield from _inflated_pieces(path, reader(handle), name, piece_bytes)
                return
        for magic, what in _REFUSED:
            if head.startswith(magic):
                raise DataFormatError(path, "a text file (plain, gzip, bzip2 or xz)", what)
        if path.suffix.lower() in COMPRESSED_SUFFIXES:
            log.info("%s has no %s header; reading it as plain text", path, path.suffix)
        while piece := _read_piece(path, handle, piece_bytes or -1):
            yield piece


def is_compressed(path: str | Path) -> bool:
    """Whether the file starts with a gzip, bzip2 or xz header (read decompressed)."""
    try:
        with Path(path).open("rb") as handle:
            head = handle.read(16)
    except OSError as exc:
        raise _io_error(Path(path), exc) from exc
    return any(matches(head) for _, matches, _ in _COMPRESSIONS)


def _read_piece(path: Path, handle: BinaryIO, size: int) -> bytes:
    try:
        return handle.read(size)
    except OSError as exc:
        raise _io_error(path, exc) from exc


def _inflated_pieces(path: Path, stream: io.BufferedIOBase, name: str,
                     piece_bytes: int | None) -> Iterator[bytes]:
    """The decompressed bytes, at most :data:`MAX_INFLATION` times the file (or 8 MiB).

    Raises:
        DataFormatError: a broken stream, or one inflating beyond the limit (read no further).
    """
    size = path.stat().st_size
    limit = max(MAX_INFLATION * size, _INFLATION_FLOOR)
    total = 0
    with stream:
        while True:
            try:
                piece = stream.read(piece_bytes or limit + 1)
            except (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError) as exc:
                raise DataFormatError(path, f"a complete {name}-compressed stream",
                                      _short(str(exc) or type(exc).__name__)) from exc
            total += len(piece)
            if total > limit:
                raise DataFormatError(
                    path, f"a {name}-compressed file inflating to at most {MAX_INFLATION} "
                    f"times its {size:,} bytes (or 8 MiB)",
                    f"more than {limit:,} bytes (decompress it by hand to read it)")
            if not piece:
                return
            yield piece


def _line_chunks(pieces: Iterable[bytes], quoting: bool, path: Path) -> Iterator[bytes]:
    """The bytes regrouped into whole lines: each cut after its last line break outside quotes.

    Outside quotes means after an even number of ``"`` (CSV doubles a quote inside a quoted
    field; :func:`_check_quotes` refuses the quotes that would make the count lie), so that a
    quoted line break never splits a record. Pieces without such a line break are held until
    one comes (the quote parity carried over: each piece is scanned for quotes once).

    Raises:
        DataFormatError: the held bytes, one line, grow over :data:`MAX_LINE_BYTES` (a line
            that long, or an unclosed quote), naming the line: memory stays bounded.
    """
    held: list[bytes] = []
    held_bytes, lines, inside = 0, 0, False  # inside: the held bytes end inside quotes
    for piece in _crlf_kept_whole(pieces):
        cut, inside = _last_line_end(piece, quoting, inside)
        if cut:
            chunk = b"".join([*held, piece[:cut]])
            lines += chunk.count(b"\n") + chunk.count(b"\r") - chunk.count(b"\r\n")
            yield chunk
            held, held_bytes = [], 0
        held.append(piece[cut:] if cut else piece)
        held_bytes += len(piece) - cut
        if held_bytes > MAX_LINE_BYTES:
            raise _long_line(path, lines + 1, quoting)
    if held_bytes:
        yield b"".join(held)


def _crlf_kept_whole(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The pieces, a carriage return that ends one moved to the next.

    Whether such a CR is a line break of its own or the first half of CR LF is known only
    with the next byte: no piece but the last ends with one.
    """
    carried = b""
    for piece in pieces:
        piece, carried = carried + piece, b""
        if piece.endswith(b"\r"):
            piece, carried = piece[:-1], b"\r"
        if piece:
            yield piece
    if carried:
        yield carried


def _last_line_end(piece: bytes, quoting: bool, inside: bool) -> tuple[int, bool]:
    """The position after ``piece``'s last line break outside CSV quotes (0 if none).

    Also whether the piece ends inside quotes; ``inside``: it starts inside them.
    """
    if b"\r" not in piece and not (quoting and b'"' in piece):
        return (0 if inside else piece.rfind(b"\n") + 1), inside
    ends, inside = _record_ends(np.frombuffer(piece, dtype=np.uint8), quoting, inside)
    return (int(ends[-1]) if len(ends) else 0), inside


def _record_ends(codes: np.ndarray, quoting: bool,
                 inside: bool = False) -> tuple[np.ndarray, bool]:
    """The positions after the line breaks of ``codes`` outside CSV quotes, and the end's state.

    Without ``quoting`` every line break counts. Also returns whether ``codes`` end inside
    quotes; ``inside``: they start inside.
    """
    ends = _line_ends(codes)
    if not quoting:
        return ends, False
    quotes = np.flatnonzero(codes == 0x22)
    outside = ends[(np.searchsorted(quotes, ends) + inside) % 2 == 0]
    return outside, bool((len(quotes) + inside) % 2)


def _line_ends(codes: np.ndarray) -> np.ndarray:
    """The positions after each line break of the bytes ``codes``: LF, CR LF or a lone CR."""
    feeds = np.flatnonzero(codes == 0x0A)
    returns = np.flatnonzero(codes == 0x0D)
    lone = returns[codes[np.minimum(returns + 1, len(codes) - 1)] != 0x0A]  # or last
    return (np.union1d(feeds, lone) if len(lone) else feeds) + 1


MAX_LINE_BYTES = 1 << 20
"""The most bytes a line of a delimited text file may hold, its line break included (1 MiB;
the line breaks inside a quoted field continue its line). A longer line is refused, naming
it: chunked reading holds a line whole, and pandas took 3 GB to parse a line of 100 MB."""


def _check_line_lengths(raw: bytes, quoting: bool, path: Path) -> None:
    """Refuses the first line of ``raw`` (whole lines of a file) over :data:`MAX_LINE_BYTES`.

    Raises:
        DataFormatError: naming the line (counted from ``raw``'s start).
    """
    if len(raw) <= MAX_LINE_BYTES:
        return
    codes = np.frombuffer(raw, dtype=np.uint8)
    ends, _ = _record_ends(codes, quoting)
    bounds = np.concatenate(([0], ends, [len(codes)]))
    long = np.flatnonzero(np.diff(bounds) > MAX_LINE_BYTES)
    if len(long):
        start = bounds[long[0]]
        line = int(np.searchsorted(_line_ends(codes), start, side="right")) + 1
        raise _long_line(path, line, quoting)


def _long_line(path: Path, line: int, quoting: bool) -> DataFormatError:
    """The error of a line over :data:`MAX_LINE_BYTES`."""
    return DataFormatError(path, f"lines of at most {MAX_LINE_BYTES:,} bytes",
                           "a longer one" + (" (a line break inside quotes continues a "
                                             "line: is a quote left open?)" if quoting else ""),
                           line=line)


def _byte_lines(encoding: str) -> bool:
    """Whether the bytes 0x0A, 0x0D and 0x22 are always LF, CR and ``"`` in ``encoding``.

    True for ASCII-compatible encodings; not for UTF-16 and UTF-32, nor the 7-bit stateful
    ones (ISO-2022, HZ, UTF-7), whose other characters may use these bytes.
    """
    name = codecs.lookup(encoding).name
    return ("\r\n\"".encode(encoding) == b"\r\n\""
            and not name.startswith(("iso2022", "hz", "utf-7")))


def check_encoding(encoding: str, setting: str = "encoding") -> str:
    """The codec's canonical name, or a ValueError naming ``setting`` for an unknown one."""
    try:
        return codecs.lookup(encoding).name
    except (LookupError, TypeError) as exc:
        raise ValueError(f"{setting}: unknown encoding {encoding!r}; expected a Python codec "
                         "name such as 'utf-8', 'latin-1' or 'cp1252'") from exc


def _latin1_fallback(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return error.object[error.start:error.end].decode("latin-1"), error.end


codecs.register_error("tagtorch.latin1", _latin1_fallback)


def _decode(raw: bytes, path: Path, encoding: str, fallback: str | None,
            setting: str | None = None, start: bool = True) -> str:
    """Decodes ``raw``; undecodable bytes are an error, or read as Latin-1 with ``fallback``.

    ``fallback`` may only be ``"latin-1"``: each byte sequence that is not valid in
    ``encoding`` (not the whole file) is then read as Latin-1, with a logged warning.
    ``setting`` names the option that sets the encoding, for the error message; ``start``:
    ``raw`` starts the file (a leading byte-order mark is dropped).
    """
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        before = raw[:exc.start]
        line = before.count(b"\n") + before.count(b"\r") - before.count(b"\r\n") + 1
        if fallback is None:
            byte = raw[exc.start:exc.start + 1]
            found = f"the byte 0x{byte.hex()}" if byte else "the end of the file"
            expected = f"text encoded as {encoding}"
            if setting:
                expected += f" ({setting} sets another)"
            raise DataFormatError(path, expected, found, line=line) from exc
        if codecs.lookup(fallback).name != "iso8859-1":
            raise ValueError(
                f"fallback_encoding must be 'latin-1' or None, got {fallback!r}") from None
        log.warning("%s, line %d: bytes that are not %s; each such byte is read as Latin-1",
                    path, line, encoding)
        text = raw.decode(encoding, errors="tagtorch.latin1")
    return text.removeprefix("\ufeff") if start else text


def _normalize_newlines(text: str) -> str:
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _line_layout(content: str, sep: str) -> tuple[np.ndarray, np.ndarray]:
    """Per physical line: number of separator characters and whether the line is blank.

    On the UTF-8 bytes when the separator is ASCII (newline, separator and whitespace are then
    single bytes that no multi-byte character holds), else on UTF-32 code points; memory a few
    bytes per character (a running sum over the characters took 8 and was the slowest step).
    """
    wide = ord(sep) > 0x7F
    buf = _code_units(content, sep)
    newlines = np.flatnonzero(buf == 0x0A)
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines, [len(buf)]))
    if starts[-1] == len(buf):  # nothing after the final newline
        starts, ends = starts[:-1], ends[:-1]
    separators = np.flatnonzero(buf == ord(sep))
    counts = np.searchsorted(separators, ends) - np.searchsorted(separators, starts)
    whitespace = _WHITESPACE[ord(sep) != _WHITESPACE]
    ink = ~np.isin(buf, whitespace) if wide else np.isin(np.arange(256), whitespace,
                                                          invert=True)[buf]
    ink[newlines] = False
    # line i's characters and its newline, [starts[i], starts[i + 1]): never empty
    blank = ~np.logical_or.reduceat(ink, starts) if len(starts) else np.zeros(0, dtype=bool)
    return counts, blank


def _code_units(content: str, sep: str) -> np.ndarray:
    """The text's UTF-8 bytes, or its UTF-32 code points for a separator outside ASCII.

    Line breaks, quotes, blanks and the separator are then single units that no other
    character's units hold.
    """
    wide = ord(sep) > 0x7F
    return np.frombuffer(content.encode("utf-32-le" if wide else "utf-8"),
                         dtype=np.uint32 if wide else np.uint8)


def _check_quotes(codes: np.ndarray, sep: str, path: Path) -> None:
    """Refuses a ``"`` inside an unquoted field: a quote starts a field or is doubled in one.

    ``codes``: the text's :func:`_code_units`. pandas reads such a quote as a character, but
    the quote parity that cuts chunks (:func:`_record_ends`) would count it: a quoted line
    break after it would end a record in one reading and not in the other. Text after a
    field's closing quote (``"a"b``, read ``ab`` by pandas) keeps the parity right and is left
    to pandas.

    Raises:
        DataFormatError: naming the line of the first such quote and its field.
    """
    openers = np.flatnonzero(codes == 0x22)[::2]  # parity: the quotes that open a field
    before = codes[np.maximum(openers - 1, 0)]
    stray = openers[(openers > 0) & ~np.isin(before, [ord(sep), 0x0A, 0x22])]
    if len(stray):
        limits = np.flatnonzero(np.isin(codes, [ord(sep), 0x0A]))
        at = np.searchsorted(limits, stray[0])
        start = limits[at - 1] + 1 if at else 0
        stop = limits[at] if at < len(limits) else len(codes)
        field = codes[start:stop].tobytes().decode("utf-32-le" if codes.itemsize == 4
                                                   else "utf-8")
        raise DataFormatError(
            path, 'a double quote (") only at the start of a field or doubled inside a quoted '
            "one", f"one inside the unquoted field {_short(repr(field))}",
            line=int(np.count_nonzero(codes[:stray[0]] == 0x0A)) + 1)


def _csv_error_line(text: str, sep: str) -> int | None:
    """With CSV quoting: the line where a strict CSV reader fails (e.g. an unclosed quote)."""
    reader = csv.reader(io.StringIO(text), delimiter=sep, strict=True)
    try:
        for _ in reader:
            pass
    except csv.Error:
        return max(reader.line_num, 1)
    return None


def _first_bad_record(codes: np.ndarray, sep: str, n_fields: int, blank: np.ndarray,
                      has_header: bool = True) -> tuple[int, int] | None:
    """With CSV quoting: the (last line, field count) of the first record of the wrong width.

    ``codes``: the text's :func:`_code_units`, its quotes checked (:func:`_check_quotes`):
    records end at the line breaks outside quotes, fields at the separators outside them (as
    the csv module reads them, without its limit on a field's size). ``blank``: ``[lines]``
    the text's blank lines (:func:`_line_layout`), which are no records (a line ``""`` is
    one, of an empty field). A quote left open is left to pandas' message.
    """
    ends, unclosed = _record_ends(codes, True)
    if not unclosed and (not len(ends) or ends[-1] < len(codes)):  # no final line break
        ends = np.append(ends, len(codes))
    quotes = np.flatnonzero(codes == 0x22)
    seps = np.flatnonzero(codes == ord(sep))
    seps = seps[np.searchsorted(quotes, seps) % 2 == 0]
    fields = np.diff(np.searchsorted(seps, np.concatenate(([0], ends)))) + 1
    last = np.searchsorted(np.flatnonzero(codes == 0x0A), ends - 1)  # 0-based lines
    bad = np.flatnonzero(~blank[last] & (fields != n_fields))
    bad = bad[bad >= int(has_header)]
    return (int(last[bad[0]]) + 1, int(fields[bad[0]])) if len(bad) else None


DECODE_ROUNDS = 8
"""The most rounds of :func:`decode_percent` (each linear in the text: deeper nesting, a
hostile file's, would make decoding quadratic; the public samples nest twice)."""


def decode_percent(text: str) -> str:
    """Percent-decodes ``text`` until nothing changes, at most :data:`DECODE_ROUNDS` times.

    Example:
        >>> decode_percent("c%252b%252b"), decode_percent("100%"), decode_percent("a%2Cb")
        ('c++', '100%', 'a,b')
        >>> decode_percent("%" + "25" * 20 + "61").startswith("%25")  # bounded: 8 rounds
        True
    """
    for _ in range(DECODE_ROUNDS):
        if "%" not in text:
            break
        decoded = unquote(text, errors="strict") if _valid_utf8(text) else text
        if decoded == text:
            break
        text = decoded
    return text


def _valid_utf8(text: str) -> bool:
    try:
        unquote(text, errors="strict")
    except UnicodeDecodeError:
        return False
    return True


_FIRST_LINE_PIECE = 1 << 16
"""The bytes :func:`first_line` reads at a time (64 KiB)."""


def first_line(path: str | Path, encoding: str = "utf-8",
               encoding_setting: str | None = None) -> tuple[int, str]:
    """A text file's first non-blank line, decompressed and decoded, and its 1-based number.

    ``(1, "")`` for a file of blank lines only. The file is read no further than that line
    (in pieces of 64 KiB), except in an encoding whose line breaks are not single bytes
    (UTF-16, UTF-32: read whole, as :func:`read_delimited_chunks` reads them).

    Raises:
        DataFormatError: an undecodable byte up to that line, or a line over
            :data:`MAX_LINE_BYTES` before its end.
    """
    path, encoding = Path(path), check_encoding(encoding)
    if not _byte_lines(encoding):
        content = _normalize_newlines(_decode(_read_bytes(path), path, encoding, None,
                                              encoding_setting))
        return next(((number, line) for number, line in enumerate(content.split("\n"), 1)
                     if line.strip()), (1, ""))
    chunks = _line_chunks(_byte_pieces(path, _FIRST_LINE_PIECE), False, path)
    for number, raw in enumerate((raw for chunk in chunks for raw in chunk.splitlines()), 1):
        if raw.strip():  # not ASCII blanks only
            try:
                line = _decode(raw, path, encoding, None, encoding_setting, start=number == 1)
            except DataFormatError as exc:
                raise exc.shifted(number - 1) from None
            if line.strip():
                return number, line
    return 1, ""


def csv_fields(line: str, sep: str, path: Path, number: int) -> list[str]:
    """The fields of one line, CSV quoting honoured (the csv module's reader).

    Raises:
        DataFormatError: a field over the csv module's size limit (128 KiB) or another
            csv error, naming the file and ``number``, the line's.
    """
    try:
        return next(csv.reader([line], delimiter=sep), [])
    except csv.Error as exc:
        raise DataFormatError(path, _csv_expected(exc), _short(str(exc)), line=number) from exc


def _csv_expected(error: csv.Error) -> str:
    """What the csv module expected, for a message: a field within its size limit, or CSV."""
    if "field limit" in str(error):
        return f"fields of at most {csv.field_size_limit():,} characters"
    return "well-formed CSV"


def first_record(path: str | Path, sep: str, encoding: str = "utf-8",
                 encoding_setting: str | None = None) -> list[str]:
    """The fields of a text file's first non-blank line (CSV quoting honoured); [] if none.

    For formats without a header whose number of fields varies between files (TagRec's).

    Raises:
        DataFormatError: an undecodable byte, or a field over the csv module's size limit.
    """
    number, first = first_line(path, encoding, encoding_setting)
    return csv_fields(first, sep, Path(path), number) if first else []


def read_delimited(
    path: str | Path,
    sep: str,
    required: Sequence[str],
    *,
    optional: Sequence[str] = (),
    integer: Sequence[str] = (),
    text: Sequence[str] = (),
    encoding: str = "utf-8",
    fallback_encoding: str | None = None,
    quoting: bool = False,
    allow_empty: bool = False,
    encoding_setting: str | None = None,
    names: Sequence[str] | None = None,
) -> RawTable:
    """Reads a delimited text file with one header line (or none), checking its layout.

    Args:
        path: the file (gzip, bzip2 and xz content is decompressed, whatever its name).
        sep: the one-character field separator.
        required: columns that must be in the header.
        optional: further columns to read when present.
        integer: columns (among those read) that must hold 64-bit integers.
        text: columns read as strings (ids or titles that merely look numeric stay text).
        encoding: the file's encoding.
        fallback_encoding: None (the default) makes an undecodable byte an error;
            ``"latin-1"`` reads each byte that is not valid ``encoding`` as Latin-1 instead
            (for files of unknown, possibly mixed, encoding), with a logged warning.
        quoting: honour CSV double quotes (fields with separators or line breaks); without
            it quotes are ordinary characters, as in the HetRec ``.dat`` files.
        allow_empty: accept a file with a header and no data rows.
        encoding_setting: the option that sets ``encoding``, named in decoding errors.
        names: the file has no header line: these are its columns' names, by position
            (every line must have this many fields).

    Returns:
        The table with only the required and present optional columns, in header order;
        integer columns hold int64.

    Raises:
        FileNotFoundError, PermissionError, OSError: the file cannot be read.
        DataFormatError: empty file, missing column, a line with the wrong number of
            fields, a non-integer in an integer column, an undecodable byte, or a parser
            error.
        ValueError: ``sep`` or ``encoding`` is not valid.
    """
    layout = TableLayout(sep, tuple(required), tuple(optional), tuple(integer), quoting,
                     allow_empty, None if names is None else tuple(names))
    return next(read_delimited_chunks(path, layout, encoding, fallback_encoding,
                                      encoding_setting, chunk_bytes=None))


CHUNK_BYTES = 32 << 20
"""The bytes of text :func:`read_delimited_chunks` parses at a time (32 MiB: the parsed
chunk's pandas strings take about 8 times that, whatever the file's size)."""
MAX_CHUNK_BYTES = 1 << 30
"""The largest ``chunk_bytes`` (1 GiB: a piece that size is allocated before it is read)."""
CHUNK_BYTES_EXPECTED = (f"an integer from 1 to {MAX_CHUNK_BYTES:,} (the bytes of text parsed "
                        "at a time) or null/None (each file whole)")
"""What ``chunk_bytes`` may be, for the messages of :func:`check_chunk_bytes` and the config
check."""


def check_chunk_bytes(chunk_bytes: object, setting: str = "chunk_bytes") -> int | None:
    """``chunk_bytes`` as an int (or None), or a ValueError naming ``setting``.

    Example:
        >>> check_chunk_bytes(4096), check_chunk_bytes(None)
        (4096, None)
        >>> check_chunk_bytes(True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: chunk_bytes: expected an integer from 1 to 1,073,741,824 ..., got True

    Raises:
        ValueError: a bool, a float, a string, or an integer out of range.
    """
    if chunk_bytes is None:
        return None
    if (isinstance(chunk_bytes, int | np.integer) and not isinstance(chunk_bytes, bool)
            and 1 <= chunk_bytes <= MAX_CHUNK_BYTES):
        return int(chunk_bytes)
    raise ValueError(f"{setting}: expected {CHUNK_BYTES_EXPECTED}, got {chunk_bytes!r}")


@dataclass(frozen=True)
class TableLayout:
    """What :func:`read_delimited_chunks` reads (the arguments of :func:`read_delimited`)."""

    sep: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    integer: tuple[str, ...] = ()
    quoting: bool = False
    allow_empty: bool = False
    names: tuple[str, ...] | None = None


def read_delimited_chunks(path: str | Path, layout: TableLayout, encoding: str = "utf-8",
                          fallback_encoding: str | None = None,
                          encoding_setting: str | None = None,
                          chunk_bytes: int | None = CHUNK_BYTES,
                          on_bytes: Callable[[int], object] | None = None) -> Iterator[RawTable]:
    """:func:`read_delimited`'s table in consecutive pieces of about ``chunk_bytes`` of text.

    Each piece holds whole records (cut after a line break outside CSV quotes) and is checked
    as the whole file is, its errors and :attr:`RawTable.lines` counting the file's lines;
    memory grows with ``chunk_bytes`` and :data:`MAX_LINE_BYTES`, not the file (None: the
    whole file, one table). An encoding in which a line break is not the byte 0x0A or 0x0D
    (UTF-16, UTF-32; see :func:`_byte_lines`) is read whole, its lines not bounded.
    Every table has the file's header columns; pieces without data rows yield nothing,
    except a file without any (one empty table, where ``allow_empty`` accepts it).
    ``on_bytes`` is called with each chunk's (decompressed) size once it is parsed (a bar).

    Raises: as :func:`read_delimited`, when the piece that holds the problem is read; a
        ValueError at once for a ``chunk_bytes`` that is not a size (:func:`check_chunk_bytes`).
    """
    path = Path(path)
    if len(layout.sep) != 1 or layout.sep in "\n\r\"":
        raise ValueError(f"the separator must be one character other than a quote or a line "
                         f"break, got {layout.sep!r}")
    chunk_bytes = check_chunk_bytes(chunk_bytes)
    encoding = check_encoding(encoding)
    byte_lines = _byte_lines(encoding)
    header = None if layout.names is None else list(layout.names)
    lines_before, rows, inked, table = 0, 0, False, None
    pieces = _byte_pieces(path, chunk_bytes if byte_lines else None)
    for raw in _line_chunks(pieces, layout.quoting, path) if byte_lines and chunk_bytes else pieces:
        try:
            if byte_lines:
                _check_line_lengths(raw, layout.quoting, path)
            content = _checked_text(raw, path, encoding, fallback_encoding, encoding_setting,
                                    start=lines_before == 0)
            inked = inked or content.strip() != ""
            has_header = header is None
            if header is None:
                header = _checked_header(content, layout, path)
            table = _chunk_table(content, layout, header, has_header, lines_before, rows, path)
        except DataFormatError as exc:
            if lines_before == 0:
                raise
            raise exc.shifted(lines_before) from None
        lines_before += content.count("\n")
        if on_bytes is not None:
            on_bytes(len(raw))
        for column in layout.integer:
            if column in table.frame.columns:
                table.frame[column] = table.integers(column)
        if len(table.frame):
            rows += len(table.frame)
            yield table
    if rows == 0:
        if table is None or not inked or not layout.allow_empty:
            _refuse_empty(path, layout, inked)
        else:
            yield table


def _checked_text(raw: bytes, path: Path, encoding: str, fallback: str | None,
                  setting: str | None, start: bool) -> str:
    """The decoded text, newlines normalized; a NUL character is a DataFormatError."""
    content = _normalize_newlines(_decode(raw, path, encoding, fallback, setting, start))
    if "\x00" in content:
        line = content.count("\n", 0, content.index("\x00")) + 1
        raise DataFormatError(path, "text without NUL characters", "a NUL character (is this "
                              "a binary file, or text in another encoding?)", line=line)
    return content


def _refuse_empty(path: Path, layout: TableLayout, inked: bool) -> NoReturn:
    """The DataFormatError of a file without data rows (blank, or a header only)."""
    if not inked:
        expected = (f"rows of {len(layout.names)} fields" if layout.names is not None
                    else f"a header line with the columns {list(layout.required)}")
        raise DataFormatError(path, expected, "an empty file", line=1)
    has_header = layout.names is None
    raise DataFormatError(path, "data rows after the header line" if has_header
                          else "data rows", "none", line=1 + int(has_header))


def _chunk_table(content: str, layout: TableLayout, header: list[str], has_header: bool,
                 lines_before: int, rows_before: int, path: Path) -> RawTable:
    """One chunk's table (its lines counted from the chunk's start, then shifted)."""
    data_lines = _checked_field_counts(content, layout, len(header), path, has_header)
    wanted = list(layout.required) + [c for c in layout.optional
                                      if c in header and c not in layout.required]
    columns = [c for c in header if c in wanted]
    if len(data_lines):
        frame = _parse(content, layout.sep, layout.quoting, [header.index(c) for c in columns],
                       path, has_header=has_header)
        frame.columns = columns
    else:
        frame = pd.DataFrame({c: pd.Series([], dtype="string") for c in columns})
    lines: np.ndarray | None = data_lines.astype(np.int64) + lines_before
    if len(frame) != len(data_lines):  # quoted line breaks: rows no longer match lines
        lines = None
    return RawTable(frame.reset_index(drop=True), path, lines, tuple(header), rows_before)


def _checked_header(content: str, layout: TableLayout, path: Path) -> list[str]:
    """The header's column names; a blank file or a missing or repeated column is an error."""
    if content.strip() == "":
        _refuse_empty(path, layout, inked=False)
    sep, quoting, required, optional = (layout.sep, layout.quoting, layout.required,
                                        layout.optional)
    sep_name = _SEPARATOR_NAMES.get(sep, repr(sep))
    header_line = content.split("\n", 1)[0]
    header = csv_fields(header_line, sep, path, 1) if quoting else header_line.split(sep)
    header = [name.strip() for name in header]
    missing = [name for name in required if name not in header]
    if missing:
        hints = []
        for name in missing:
            close = get_close_matches(name, header, n=1) or [
                h for h in header if h.lower() == name.lower()]
            if close:
                hints.append(f"{name!r} (did you mean {close[0]!r}?)")
        found = _short(f"the header {header}", 300)
        if hints:
            found += "; " + ", ".join(hints)
        raise DataFormatError(
            path, f"the column(s) {missing} in a {sep_name}-separated header", found, line=1)
    repeated = [name for name in dict.fromkeys(header) if header.count(name) > 1
                and name in set(required) | set(optional)]
    if repeated:
        raise DataFormatError(path, "each column name once in the header",
                              f"{repeated[0]!r} {header.count(repeated[0])} times", line=1)
    return header


def _checked_field_counts(content: str, layout: TableLayout, n_fields: int, path: Path,
                          has_header: bool) -> np.ndarray:
    """``[rows]`` 1-based lines (the chunk's) of the data rows; a wrong field count is an error."""
    sep, quoting = layout.sep, layout.quoting
    sep_name = _SEPARATOR_NAMES.get(sep, repr(sep))
    codes = _code_units(content, sep) if quoting and '"' in content else None
    if codes is not None:
        _check_quotes(codes, sep, path)
    # Field counts per line, vectorized over the characters of the decoded text.
    counts, blank = _line_layout(content, sep)
    skip = int(has_header)
    data_lines = np.flatnonzero(~blank[skip:]) + skip + 1  # 1-based, header excluded
    bad: tuple[int, int] | None = None
    if codes is not None:  # quoted separators and line breaks: the records' fields
        bad = _first_bad_record(codes, sep, n_fields, blank, has_header)
    else:
        wrong = np.flatnonzero(counts[data_lines - 1] != n_fields - 1)
        if len(wrong):
            line = int(data_lines[wrong[0]])
            bad = (line, int(counts[line - 1]) + 1)
    if bad is not None:
        raise DataFormatError(
            path, f"{n_fields} {sep_name}-separated fields" + (
                " as in the header" if layout.names is None else ""),
            f"{bad[1]} field(s)", line=bad[0])
    return data_lines


def _parse(content: str, sep: str, quoting: bool, usecols: list[int], path: Path,
           has_header: bool = True) -> pd.DataFrame:
    """The columns ``usecols`` of the text as strings (pandas' C parser, no type guessing)."""
    sep_name = _SEPARATOR_NAMES.get(sep, repr(sep))
    # Every column is read as text: pandas' type guesses would wrap integers above 2**63
    # into negatives (uint64) or round long ones (float64); integers are parsed below.
    try:
        frame = pd.read_csv(
            io.StringIO(content),
            sep=sep,
            usecols=usecols,
            header=0 if has_header else None,
            dtype="string",
            keep_default_na=False,
            na_values=[],
            quoting=csv.QUOTE_MINIMAL if quoting else csv.QUOTE_NONE,
            skip_blank_lines=True,
            engine="c",
        )
    except (pd.errors.ParserError, ValueError, csv.Error) as exc:
        message = str(exc).strip().replace("\n", " ")
        match = re.search(r"line (\d+)", message)
        line = int(match.group(1)) if match else None
        if line is None and quoting:
            line = _csv_error_line(content, sep)
        raise DataFormatError(
            path, f"well-formed {sep_name}-separated text", _short(message, 200),
            line=line) from exc
    return frame


def read_parquet(path: str | Path, required: Sequence[str],
                 optional: Sequence[str] = ()) -> RawTable:
    """Reads the needed columns of a Parquet file, with the same errors as the text reader.

    Raises:
        FileNotFoundError, PermissionError, OSError: the file cannot be read.
        DataFormatError: not a Parquet file, or a missing column.
    """
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise _io_error(path, exc) from exc
    with handle:
        if not handle.read(4):
            raise DataFormatError(path, "a Parquet file", "an empty file")
        handle.seek(0)
        try:
            import pyarrow.parquet as pq

            parquet = pq.ParquetFile(handle)
            header = list(parquet.schema_arrow.names)
            missing = [name for name in required if name not in header]
            if missing:
                raise DataFormatError(path, f"the column(s) {missing}",
                                      _short(f"the columns {header}", 300))
            columns = [c for c in header if c in set(required) | set(optional)]
            frame = parquet.read(columns=columns).to_pandas()
        except DataFormatError:
            raise
        except Exception as exc:  # pyarrow raises several unrelated types for corrupt files
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())
            raise DataFormatError(path, "a Parquet file", _short(reason, 200)) from exc
    return RawTable(frame.reset_index(drop=True), path, None, tuple(header))


# ---------------------------------------------------------------- conversions


def check_seconds(table: RawTable, column: str, seconds: np.ndarray,
                  given: np.ndarray) -> np.ndarray:
    """``[n]`` Unix seconds read from ``column``, checked where ``given`` (not empty).

    A time must be a date pandas can hold (:data:`SECONDS_RANGE`, so that no difference of two
    overflows) and not -1 s, :data:`~tagtorch.data.folksonomy.MISSING_TIME`, which marks a
    missing time (a file's -1 s, or -1 to -999 ms, would silently become one).

    Raises:
        DataFormatError: naming the file, the line and the column, at the first other time.
    """
    low, high = SECONDS_RANGE
    bad = given & ((seconds < low) | (seconds > high) | (seconds == MISSING_TIME))
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise table.error(position, f"a time in column {column!r} within the years 1677 to "
                          "2262, other than -1 s (the mark of a missing time)",
                          describe_value(table.frame[column].iloc[position]))
    return seconds


def unix_seconds(table: RawTable, column: str) -> np.ndarray:
    """``[n]`` int64 Unix seconds from a column of seconds, datetimes or ISO 8601 strings.

    Numbers are taken as Unix seconds (fractions floored); naive datetimes as UTC; empty
    values become :data:`~tagtorch.data.folksonomy.MISSING_TIME`.

    Raises:
        DataFormatError: a value that is neither a number nor a date, or a time that
            :func:`check_seconds` refuses.
    """
    given = table.frame[column].astype("string").str.strip().fillna("").ne("")
    return check_seconds(table, column, _seconds(table, column), given.to_numpy(dtype=bool))


def _seconds(table: RawTable, column: str) -> np.ndarray:
    """:func:`unix_seconds` before its range check."""
    values = table.frame[column]
    expected = f"a Unix time in seconds or an ISO 8601 date in column {column!r}"
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        stamps = pd.to_datetime(values, utc=True)
        return _stamps_to_seconds(stamps)
    if pd.api.types.is_bool_dtype(values.dtype):
        raise table.error(0, expected, describe_value(values.iloc[0]))
    if pd.api.types.is_integer_dtype(values.dtype) or pd.api.types.is_float_dtype(values.dtype):
        seconds = table.optional_integers(column) if pd.api.types.is_integer_dtype(
            values.dtype) else None
        if seconds is not None:
            return seconds.fillna(MISSING_TIME).to_numpy(dtype=np.int64)
        return _float_seconds(table, column,
                              values.to_numpy(dtype=np.float64, na_value=np.nan),
                              np.ones(len(values), dtype=bool), expected)
    text = scalar_texts(table, column, expected).str.strip()
    empty = (text.isna() | (text == "")).to_numpy(dtype=bool)
    numbers = pd.to_numeric(text.where(~empty), errors="coerce").to_numpy(
        dtype=np.float64, na_value=np.nan)
    numeric = ~np.isnan(numbers)
    out = _float_seconds(table, column, numbers, numeric, expected)
    rest = ~numeric & ~empty
    if rest.any():
        try:
            stamps = pd.to_datetime(text[rest], utc=True, errors="coerce", format="ISO8601")
        except (ValueError, OverflowError, TypeError):
            stamps = pd.Series([pd.NaT] * int(rest.sum()))
        bad = stamps.isna().to_numpy(dtype=bool)
        if bad.any():
            position = int(np.flatnonzero(rest)[np.flatnonzero(bad)[0]])
            raise table.error(position, expected, describe_value(values.iloc[position]))
        out[rest] = _stamps_to_seconds(stamps)
    return out


def _float_seconds(table: RawTable, column: str, numbers: np.ndarray, use: np.ndarray,
                   expected: str) -> np.ndarray:
    """Floors the finite ``numbers`` where ``use``; NaN is missing; others are an error."""
    out = np.full(len(numbers), MISSING_TIME, dtype=np.int64)
    known = use & ~np.isnan(numbers)
    bad = known & (~np.isfinite(numbers) | (np.abs(numbers) >= _TWO_63))
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise table.error(position, f"{expected}, within the signed 64-bit range",
                          describe_value(table.frame[column].iloc[position]))
    out[known] = np.floor(numbers[known]).astype(np.int64)
    return out


def _stamps_to_seconds(stamps: pd.Series) -> np.ndarray:
    known = stamps.notna().to_numpy(dtype=bool)
    out = np.full(len(stamps), MISSING_TIME, dtype=np.int64)
    epoch = pd.Timestamp(0, tz="UTC")
    seconds = (stamps[known] - epoch) // pd.Timedelta(seconds=1)
    out[known] = seconds.to_numpy(dtype=np.int64)
    return out


def local_time_seconds(table: RawTable, columns: Mapping[str, str], timezone: str) -> np.ndarray:
    """``[n]`` int64 Unix seconds from date columns holding local time in ``timezone``.

    Args:
        table: the table.
        columns: maps ``year``, ``month``, ``day`` and optionally ``hour``, ``minute``,
            ``second`` to integer column names.
        timezone: IANA zone of the local times; ambiguous times at the end of daylight
            saving are read as daylight time, nonexistent ones are shifted forward.

    Raises:
        DataFormatError: a row whose fields do not form a valid date (years 1678 to 2261).
    """
    parts = pd.DataFrame({unit: table.frame[name].to_numpy() for unit, name in columns.items()})
    bad = np.zeros(len(parts), dtype=bool)
    for unit, (low, high) in _DATE_RANGES.items():
        if unit in parts:
            bad |= ((parts[unit] < low) | (parts[unit] > high)).to_numpy(dtype=bool)
    valid = parts.where(pd.Series(~bad, index=parts.index), 1, axis=0)
    try:
        stamps = pd.to_datetime(valid, errors="coerce")
    except (ValueError, OverflowError) as exc:  # pandas refuses some values without coercing
        raise table.error(0, "valid calendar dates and times", _short(str(exc))) from exc
    bad |= stamps.isna().to_numpy(dtype=bool)
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        fields = ", ".join(f"{name}={table.frame[name].iloc[position]}"
                           for name in columns.values())
        raise table.error(position, "a valid calendar date and time", fields)
    local = stamps.dt.tz_localize(timezone, ambiguous=np.ones(len(stamps), dtype=bool),
                                  nonexistent="shift_forward")
    return _stamps_to_seconds(local)


def lookup(keys: pd.Series | np.ndarray, table: RawTable, key: str, value: str,
           what: str) -> pd.Series:
    """Maps ids to a value column of a lookup table with unique ids; unknown ids give NA.

    Logs a warning with the number of rows whose id is not in the table.
    """
    ids = table.frame[key].to_numpy()
    table.unique_key(key, ids)
    mapping = pd.Series(table.frame[value].to_numpy(), index=ids)
    result = pd.Series(np.asarray(keys)).map(mapping)
    unknown = int(result.isna().sum())
    if unknown:
        log.warning("%s: %d rows refer to a %s that is not in %s; they are dropped",
                    table.path.name, unknown, what, table.path)
    return result
