"""Generic tag-assignment tables (CSV, TSV, Parquet) and the checked reader all loaders share.

:func:`read_delimited` reads a delimited text file with one header line into a DataFrame with
pandas' vectorized parser, after checking what pandas would accept silently or report with
a bare traceback: a missing column, a row with the wrong number of fields, an empty file, a
non-integer id. Each problem raises a :class:`DataFormatError` naming the file, the line and
what was expected.

:func:`load_table` builds a :class:`~tagtorch.data.folksonomy.Folksonomy` from any table with
one row per tag assignment, e.g. an export of a tagging system::

    load_table("bibsonomy.tsv", columns={"user": "user_id", "object": "url_hash", "tag": "tag",
               "timestamp": "date"}, text_columns={"title": "title"})
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import logging
import lzma
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path

import numpy as np
import pandas as pd

from tagtorch.data.folksonomy import MISSING_TIME, Folksonomy
from tagtorch.data.loaders.errors import DataFormatError

log = logging.getLogger(__name__)

_INTEGER = r"[+-]?\d+"
_WHITESPACE = np.frombuffer(b" \t\r\x0b\x0c", dtype=np.uint8)
_COMPRESSED = {".gz": gzip.decompress, ".bz2": bz2.decompress, ".xz": lzma.decompress}
_SEPARATOR_NAMES = {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe", " ": "space"}
ASSIGNMENT_KEYS = ("user", "object", "tag", "timestamp")


@dataclass(frozen=True)
class RawTable:
    """A table read from a file, with the file line (or row) of every frame row.

    Attributes:
        frame: the data, one row per data line (blank lines skipped).
        path: the file it came from.
        lines: ``[len(frame)]`` 1-based file line of each row, or None where lines are not
            meaningful (Parquet) or could not be mapped; messages then give 1-based rows.
    """

    frame: pd.DataFrame
    path: Path
    lines: np.ndarray | None = None

    def error(self, position: int, expected: str, found: str | None = None) -> DataFormatError:
        """A :class:`DataFormatError` located at the frame row ``position`` (0-based)."""
        if self.lines is not None:
            return DataFormatError(self.path, expected, found, line=int(self.lines[position]))
        return DataFormatError(self.path, expected, found, row=position + 1)

    def integers(self, column: str) -> np.ndarray:
        """Column ``column`` as int64, or a :class:`DataFormatError` at its first non-integer.

        Raises:
            DataFormatError: a value is empty, fractional or not a number.
        """
        values = self.frame[column]
        if pd.api.types.is_integer_dtype(values.dtype) and not values.hasnans:
            return values.to_numpy(dtype=np.int64)
        if pd.api.types.is_bool_dtype(values.dtype):
            bad = np.ones(len(values), dtype=bool)
        elif pd.api.types.is_float_dtype(values.dtype):
            array = values.to_numpy(dtype=np.float64, na_value=np.nan)
            bad = ~np.isfinite(array) | (array != np.floor(array))
        else:
            text = values.astype("string").str.strip()
            bad = ~text.str.fullmatch(_INTEGER).fillna(False).to_numpy(dtype=bool)
        if bad.any():
            position = int(np.flatnonzero(bad)[0])
            raise self.error(position, f"an integer in column {column!r}",
                             _describe(values.iloc[position]))
        if pd.api.types.is_float_dtype(values.dtype):
            return values.to_numpy(dtype=np.int64)
        return values.astype("string").str.strip().astype(np.int64).to_numpy()

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


def _describe(value: object) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return "an empty value"
    text = str(value)
    return "an empty value" if text.strip() == "" else repr(text)


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed for ``.gz``, ``.bz2`` and ``.xz`` names."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    raw = path.read_bytes()
    decompress = _COMPRESSED.get(path.suffix.lower())
    if decompress is not None:
        try:
            raw = decompress(raw)
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise DataFormatError(path, f"a {path.suffix} compressed file", str(exc)) from exc
    return raw


def _decode(raw: bytes, path: Path, encoding: str, fallback: str | None) -> str:
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        if fallback is None:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise DataFormatError(path, f"text encoded as {encoding}",
                                  f"the byte {raw[exc.start:exc.start + 1]!r}",
                                  line=line) from exc
        log.info("%s is not valid %s; reading it as %s", path, encoding, fallback)
        text = raw.decode(fallback)
    return text.removeprefix("\ufeff")


def _line_layout(raw: bytes, sep: str) -> tuple[np.ndarray, np.ndarray]:
    """Per physical line: number of separator bytes and whether the line is blank."""
    buf = np.frombuffer(raw, dtype=np.uint8)
    newlines = np.flatnonzero(buf == 0x0A)
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines, [len(buf)]))
    if starts[-1] == len(buf):  # nothing after the final newline
        starts, ends = starts[:-1], ends[:-1]
    separators = np.flatnonzero(buf == ord(sep))
    counts = np.searchsorted(separators, ends) - np.searchsorted(separators, starts)
    whitespace = _WHITESPACE[ord(sep) != _WHITESPACE]
    ink = np.concatenate(([0], np.cumsum(~np.isin(buf, whitespace))))
    blank = (ink[ends] - ink[starts]) == 0
    return counts, blank


def _first_bad_record(text: str, sep: str, n_fields: int) -> tuple[int, int] | None:
    """With CSV quoting: the (line, field count) of the first record of the wrong width."""
    reader = csv.reader(io.StringIO(text), delimiter=sep)
    next(reader, None)
    for record in reader:
        if record and not (len(record) == 1 and record[0].strip() == "") \
                and len(record) != n_fields:
            return reader.line_num, len(record)
    return None


def read_delimited(
    path: str | Path,
    sep: str,
    required: Sequence[str],
    *,
    optional: Sequence[str] = (),
    integer: Sequence[str] = (),
    text: Sequence[str] = (),
    encoding: str = "utf-8",
    fallback_encoding: str | None = "latin-1",
    quoting: bool = False,
    allow_empty: bool = False,
) -> RawTable:
    """Reads a delimited text file with one header line, checking its layout.

    Args:
        path: the file (``.gz``/``.bz2``/``.xz`` are decompressed).
        sep: the one-character field separator.
        required: columns that must be in the header.
        optional: further columns to read when present.
        integer: columns (among those read) that must hold integers.
        text: columns read as strings (ids or titles that merely look numeric stay text).
        encoding: the file's encoding.
        fallback_encoding: encoding used (with a log line) when the file is not valid
            ``encoding``; None makes undecodable bytes an error.
        quoting: honour CSV double quotes (fields with separators or line breaks); without
            it quotes are ordinary characters, as in the HetRec ``.dat`` files.
        allow_empty: accept a file with a header and no data rows.

    Returns:
        The table with only the required and present optional columns, in header order.

    Raises:
        FileNotFoundError: the file does not exist.
        DataFormatError: empty file, missing column, a line with the wrong number of
            fields, a non-integer in an integer column, or a parser error.
    """
    path = Path(path)
    if len(sep) != 1:
        raise ValueError(f"the separator must be one character, got {sep!r}")
    raw = _read_bytes(path)
    content = _decode(raw, path, encoding, fallback_encoding)
    sep_name = _SEPARATOR_NAMES.get(sep, repr(sep))
    if content.strip() == "":
        raise DataFormatError(path, f"a header line with the columns {list(required)}",
                              "an empty file", line=1)
    header_line = content.split("\n", 1)[0].rstrip("\r")
    if quoting:
        header = next(csv.reader([header_line], delimiter=sep), [])
    else:
        header = header_line.split(sep)
    header = [name.strip() for name in header]
    missing = [name for name in required if name not in header]
    if missing:
        hints = []
        for name in missing:
            close = get_close_matches(name, header, n=1) or [
                h for h in header if h.lower() == name.lower()]
            if close:
                hints.append(f"{name!r} (did you mean {close[0]!r}?)")
        found = f"the header {header}"
        if hints:
            found += "; " + ", ".join(hints)
        raise DataFormatError(
            path, f"the column(s) {missing} in a {sep_name}-separated header", found, line=1)

    # Field counts per line, vectorized over the bytes of the decoded text.
    counts, blank = _line_layout(content.encode("utf-8"), sep)
    n_fields = len(header)
    data_lines = np.flatnonzero(~blank[1:]) + 2  # 1-based line numbers, header excluded
    wrong = counts[data_lines - 1] != n_fields - 1
    if wrong.any():
        bad: tuple[int, int] | None
        if quoting and '"' in content:
            bad = _first_bad_record(content, sep, n_fields)
        else:
            line = int(data_lines[np.flatnonzero(wrong)[0]])
            bad = (line, int(counts[line - 1]) + 1)
        if bad is not None:
            raise DataFormatError(
                path, f"{n_fields} {sep_name}-separated fields as in the header",
                f"{bad[1]} field(s)", line=bad[0])
    if len(data_lines) == 0 and not allow_empty:
        raise DataFormatError(path, "data rows after the header line", "none", line=2)

    wanted = list(required) + [c for c in optional if c in header and c not in required]
    columns = [c for c in header if c in wanted]
    dtypes = {c: "string" for c in text if c in columns}
    try:
        frame = pd.read_csv(
            io.StringIO(content),
            sep=sep,
            usecols=columns,
            dtype=dtypes,
            keep_default_na=False,
            na_values=[],
            quoting=csv.QUOTE_MINIMAL if quoting else csv.QUOTE_NONE,
            skip_blank_lines=True,
            engine="c",
        )
    except (pd.errors.ParserError, ValueError) as exc:
        message = str(exc)
        match = re.search(r"line (\d+)", message)
        raise DataFormatError(
            path, f"well-formed {sep_name}-separated text", message.strip(),
            line=int(match.group(1)) if match else None) from exc
    lines: np.ndarray | None = data_lines.astype(np.int64)
    if len(frame) != len(data_lines):  # quoted line breaks: rows no longer match lines
        lines = None
    table = RawTable(frame.reset_index(drop=True), path, lines)
    for column in integer:
        if column in frame.columns:
            table.frame[column] = table.integers(column)
    return table


def read_parquet(path: str | Path, required: Sequence[str],
                 optional: Sequence[str] = ()) -> RawTable:
    """Reads the needed columns of a Parquet file, with the same errors as the text reader.

    Raises:
        FileNotFoundError: the file does not exist.
        DataFormatError: not a Parquet file, or a missing column.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise DataFormatError(path, "a Parquet file", "an empty file")
    try:
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
        header = list(schema.names)
        missing = [name for name in required if name not in header]
        if missing:
            raise DataFormatError(path, f"the column(s) {missing}", f"the columns {header}")
        columns = [c for c in header if c in set(required) | set(optional)]
        frame = pd.read_parquet(path, columns=columns)
    except DataFormatError:
        raise
    except Exception as exc:  # pyarrow raises several unrelated types for corrupt files
        raise DataFormatError(path, "a Parquet file", f"{type(exc).__name__}: {exc}") from exc
    return RawTable(frame.reset_index(drop=True), path, None)


# ---------------------------------------------------------------- conversions


def unix_seconds(table: RawTable, column: str) -> np.ndarray:
    """``[n]`` int64 Unix seconds from a column of seconds, datetimes or ISO 8601 strings.

    Integers are taken as Unix seconds; naive datetimes as UTC; empty values become
    :data:`~tagtorch.data.folksonomy.MISSING_TIME`.

    Raises:
        DataFormatError: a value that is neither a number nor a date.
    """
    values = table.frame[column]
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        stamps = pd.to_datetime(values, utc=True)
        return _stamps_to_seconds(stamps)
    if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values):
        array = values.to_numpy(dtype=np.float64, na_value=np.nan)
        out = np.full(len(array), MISSING_TIME, dtype=np.int64)
        known = np.isfinite(array)
        out[known] = np.floor(array[known]).astype(np.int64)
        return out
    text = values.astype("string").str.strip()
    empty = (text.isna() | (text == "")).to_numpy(dtype=bool)
    numbers = pd.to_numeric(text.where(~empty), errors="coerce")
    out = np.full(len(text), MISSING_TIME, dtype=np.int64)
    numeric = numbers.notna().to_numpy(dtype=bool)
    out[numeric] = np.floor(numbers[numeric].to_numpy(dtype=np.float64)).astype(np.int64)
    rest = ~numeric & ~empty
    if rest.any():
        stamps = pd.to_datetime(text[rest], utc=True, errors="coerce", format="ISO8601")
        bad = stamps.isna().to_numpy(dtype=bool)
        if bad.any():
            position = int(np.flatnonzero(rest)[np.flatnonzero(bad)[0]])
            raise table.error(position,
                              f"a Unix time in seconds or an ISO 8601 date in column {column!r}",
                              _describe(values.iloc[position]))
        out[rest] = _stamps_to_seconds(stamps)
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
        DataFormatError: a row whose fields do not form a valid date.
    """
    parts = pd.DataFrame({unit: table.frame[name].to_numpy() for unit, name in columns.items()})
    stamps = pd.to_datetime(parts, errors="coerce")
    bad = stamps.isna().to_numpy(dtype=bool)
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


# ---------------------------------------------------------------- load_table


def _detect_format(path: Path, format: str) -> str:
    if format != "auto":
        if format not in ("csv", "tsv", "parquet"):
            raise ValueError(f"format must be auto, csv, tsv or parquet, got {format!r}")
        return format
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
    suffix = suffixes[-1] if suffixes else ""
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".csv":
        return "csv"
    if suffix in (".tsv", ".tab", ".dat", ".txt"):
        return "tsv"
    raise ValueError(f"{path}: cannot tell the format from the extension; pass format=")


def _raw_ids(values: pd.Series) -> pd.Series:
    """Ids with empty strings as NA; all-integer text ids become integers."""
    if not (pd.api.types.is_object_dtype(values.dtype)
            or pd.api.types.is_string_dtype(values.dtype)):
        return values
    text = values.astype("string").str.strip()
    text = text.mask(text == "")
    known = text.dropna()
    if len(known) and known.str.fullmatch(_INTEGER).all():
        return pd.to_numeric(text).astype("Int64")
    return text


def _first_per_object(objects: pd.Series, values: pd.Series) -> pd.Series:
    """The first non-empty value of each object, indexed by object id."""
    text = values.astype("string").str.strip()
    keep = (text.notna() & (text != "") & objects.notna()).to_numpy(dtype=bool)
    return text[keep].groupby(objects[keep].to_numpy(), sort=False).first()


def load_table(
    path: str | Path,
    columns: Mapping[str, str],
    text_columns: Mapping[str, str] | None = None,
    category_column: str | None = None,
    category_separator: str | None = None,
    sep: str | None = None,
    format: str = "auto",
    encoding: str = "utf-8",
    name: str | None = None,
) -> Folksonomy:
    """Loads a folksonomy from one table with a row per tag assignment.

    Texts and categories are per object; they are taken from the same table (the first
    non-empty value of each object).

    Args:
        path: CSV, TSV or Parquet file (text files may be ``.gz``/``.bz2``/``.xz``).
        columns: maps ``user``, ``object``, ``tag`` and optionally ``timestamp`` to the
            file's column names. Timestamps may be Unix seconds, ISO 8601 strings or (in
            Parquet) datetimes; naive times are UTC.
        text_columns: maps text field names (``title``, ``description``, ...) to columns.
        category_column: column with the object's category (or categories).
        category_separator: splits the category column into several categories.
        sep: field separator of a text file; by default ``,`` for CSV (with quoting) and
            a tab for TSV (``.tsv``, ``.tab``, ``.dat``, ``.txt``, without quoting).
        format: ``auto`` (from the extension), ``csv``, ``tsv`` or ``parquet``.
        encoding: encoding of a text file.
        name: dataset name; defaults to the file name without extensions.

    Returns:
        The raw folksonomy (tags as written in the file).

    Raises:
        FileNotFoundError: the file does not exist.
        DataFormatError: the file does not have the columns or the layout expected.
        ValueError: ``columns`` lacks ``user``, ``object`` or ``tag`` or has unknown keys.
    """
    path = Path(path)
    unknown = set(columns) - set(ASSIGNMENT_KEYS)
    absent = {"user", "object", "tag"} - set(columns)
    if unknown or absent:
        raise ValueError(f"columns must map user, object, tag and optionally timestamp to "
                         f"column names; unknown keys {sorted(unknown)}, missing {sorted(absent)}")
    text_columns = dict(text_columns or {})
    required = list(dict.fromkeys([*columns.values(), *text_columns.values()]
                                  + ([category_column] if category_column else [])))
    kind = _detect_format(path, format)
    if kind == "parquet":
        table = read_parquet(path, required)
    else:
        separator = sep if sep is not None else ("," if kind == "csv" else "\t")
        as_text = [columns["tag"], *text_columns.values()]
        if category_column:
            as_text.append(category_column)
        table = read_delimited(path, separator, required, text=as_text, encoding=encoding,
                               quoting=kind == "csv")
    frame = table.frame
    assignments = pd.DataFrame({
        "user": _raw_ids(frame[columns["user"]]),
        "object": _raw_ids(frame[columns["object"]]),
        "tag": frame[columns["tag"]].astype("string"),
    })
    if "timestamp" in columns:
        assignments["timestamp"] = unix_seconds(table, columns["timestamp"])
    objects = assignments["object"]
    texts = None
    if text_columns:
        texts = pd.DataFrame({field: _first_per_object(objects, frame[column])
                              for field, column in text_columns.items()})
    categories = None
    if category_column:
        first = _first_per_object(objects, frame[category_column])
        cats = first.str.split(category_separator) if category_separator else first.map(
            lambda value: [value])
        pairs = cats.explode().astype("string").str.strip()
        pairs = pairs[pairs.notna() & (pairs != "")]
        categories = pd.DataFrame({"object": pairs.index.to_numpy(),
                                   "category": pairs.to_numpy(dtype=object)})
    dataset = name or path.name.split(".")[0]
    return Folksonomy.from_frame(assignments, texts, categories, name=dataset)
