"""Generic tag-assignment tables (CSV, TSV, Parquet): :func:`load_table`.

Files are read by :mod:`~tagtorch.data.loaders.reading` (compression, encoding, line
numbers, integers: the rules every loader shares).

:func:`load_table` builds a :class:`~tagtorch.data.folksonomy.Folksonomy` from any table with
one row per tag assignment, e.g. an export of a tagging system::

    load_table("bibsonomy.tsv", columns={"user": "user_id", "object": "url_hash", "tag": "tag",
               "timestamp": "date"}, text_columns={"title": "title"})

Its user and object ids are opaque strings by default (``007`` and ``7`` are two users;
surrounding blanks are not part of an id; a Parquet integer column gives the decimal digits);
``integer_ids=True`` reads them as 64-bit integers instead. A Parquet tag column may hold
lists: each tag of the list is one assignment (an empty list none); a list-valued category
column gives one category per element; lists anywhere else are refused.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.loaders.reading import (
    ASSIGNMENT_KEYS,
    COMPRESSED_SUFFIXES,
    RawTable,
    check_encoding,
    decode_percent,
    describe_value,
    first_record,
    is_list,
    read_delimited,
    read_parquet,
    scalar_texts,
    unix_seconds,
)
from tagtorch.data.loaders.tagrec import check_not_tagrec_like
from tagtorch.errors import DataFormatError

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- load_table


def _detect_format(path: Path, format: str) -> str:
    if format != "auto":
        if format not in ("csv", "tsv", "parquet"):
            raise ValueError(f"format must be auto, csv, tsv or parquet, got {format!r}")
        return format
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSED_SUFFIXES:
        suffixes = suffixes[:-1]
    suffix = suffixes[-1] if suffixes else ""
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".csv":
        return "csv"
    if suffix in (".tsv", ".tab", ".dat", ".txt"):
        return "tsv"
    raise ValueError(f"{path}: cannot tell the format from the extension; pass format=")


def _ids(table: RawTable, column: str, integer_ids: bool) -> pd.Series:
    """``[n]`` ids of column ``column``: stripped strings (or Int64), empty values as NA.

    Raises:
        DataFormatError: a list, a boolean, bytes or another non-id value; with
            ``integer_ids``, a value that is not a 64-bit integer.
    """
    if integer_ids:
        return table.optional_integers(column)
    values = table.frame[column]
    if pd.api.types.is_integer_dtype(values.dtype) and not pd.api.types.is_bool_dtype(
            values.dtype):
        return values.astype("string").reset_index(drop=True)
    if pd.api.types.is_float_dtype(values.dtype):  # integers with gaps, as pandas writes them
        return table.optional_integers(column).astype("string")
    if isinstance(values.dtype, pd.CategoricalDtype):
        values = values.astype(object)
    if pd.api.types.is_string_dtype(values.dtype) and not pd.api.types.is_object_dtype(
            values.dtype):
        text = values.astype("string").str.strip().reset_index(drop=True)
        return text.mask(text == "")
    array = values.to_numpy(dtype=object)
    out = np.empty(len(array), dtype=object)
    for position, value in enumerate(array):
        if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
            out[position] = None
        elif isinstance(value, str):
            out[position] = value.strip() or None
        elif isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            out[position] = str(value)
        elif is_list(value):
            raise table.error(position, f"a single id in column {column!r}", describe_value(value))
        else:
            raise table.error(position, f"a text or integer id in column {column!r}",
                              describe_value(value))
    return pd.Series(out, dtype="string")


def _tag_text(value: object) -> str | None:
    """A tag (or category) cell's text, or None if it is empty.

    Raises:
        TypeError: the value is neither text nor an integer.
    """
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return str(value)
    raise TypeError(type(value).__name__)


def _cell_texts(table: RawTable, position: int, value: object, expected: str) -> list[str | None]:
    """The texts of one cell: one for a scalar, one per element for a list."""
    try:
        if is_list(value):
            return [_tag_text(element) for element in value]
        return [_tag_text(value)]
    except TypeError:
        raise table.error(position, expected, describe_value(value)) from None


def _tags(table: RawTable, column: str) -> tuple[pd.Series, np.ndarray]:
    """Tags and, for each, the 0-based row it comes from; list cells give one tag each.

    Raises:
        DataFormatError: a value that is neither a tag (text, an integer) nor a list of tags.
    """
    values = table.frame[column]
    rows = np.arange(len(values))
    if pd.api.types.is_integer_dtype(values.dtype) and not pd.api.types.is_bool_dtype(
            values.dtype):
        return values.astype("string").reset_index(drop=True), rows
    if isinstance(values.dtype, pd.CategoricalDtype):
        values = values.astype(object)
    if pd.api.types.is_string_dtype(values.dtype) and not pd.api.types.is_object_dtype(
            values.dtype):
        return values.astype("string").reset_index(drop=True), rows
    expected = f"a tag or a list of tags in column {column!r}"
    array = values.to_numpy(dtype=object)
    tags: list[str | None] = []
    sources: list[int] = []
    for position, value in enumerate(array):
        texts = _cell_texts(table, position, value, expected)
        tags.extend(texts)
        sources.extend([position] * len(texts))
    return pd.Series(tags, dtype="string"), np.asarray(sources, dtype=np.int64)


def _texts(table: RawTable, column: str) -> pd.Series:
    """A text column as strings (numbers as their digits); lists and bytes are refused."""
    values = table.frame[column]
    if pd.api.types.is_numeric_dtype(values.dtype) or pd.api.types.is_datetime64_any_dtype(
            values.dtype):
        return values.astype("string").reset_index(drop=True)
    return scalar_texts(table, column, f"a text in column {column!r}")


def _category_lists(table: RawTable, column: str, separator: str | None) -> pd.Series:
    """``[n]`` list of non-empty category names per row (split text or a list cell)."""
    values = table.frame[column]
    if pd.api.types.is_numeric_dtype(values.dtype) or not pd.api.types.is_object_dtype(
            values.dtype):
        values = _texts(table, column)
    array = values.to_numpy(dtype=object)
    expected = f"a category or a list of categories in column {column!r}"
    out: list[list[str]] = []
    for position, value in enumerate(array):
        names = _cell_texts(table, position, value, expected)
        if separator is not None and not is_list(value) and names[0] is not None:
            names = list(names[0].split(separator))
        out.append([n.strip() for n in names if n is not None and n.strip() != ""])
    return pd.Series(out, dtype=object)


def _first_per_object(objects: pd.Series, values: pd.Series) -> pd.Series:
    """The first non-empty value of each object, indexed by object id."""
    text = values.astype("string").str.strip()
    keep = (text.notna() & (text != "") & objects.notna()).to_numpy(dtype=bool)
    return text[keep].groupby(objects[keep].to_numpy(), sort=False).first()


def _check_columns(columns: Mapping[str, str]) -> None:
    """Refuses a column mapping without user, object and tag, or with two keys on a column."""
    unknown = set(columns) - set(ASSIGNMENT_KEYS)
    absent = {"user", "object", "tag"} - set(columns)
    if unknown or absent:
        raise ValueError(f"columns must map user, object, tag and optionally timestamp to "
                         f"column names; unknown keys {sorted(unknown)}, missing {sorted(absent)}")
    keys_of: dict[str, list[str]] = {}
    for key, column in columns.items():
        keys_of.setdefault(column, []).append(key)
    for column, keys in keys_of.items():
        if len(keys) > 1:
            raise ValueError(f"columns: {' and '.join(map(repr, keys))} both map to the column "
                             f"{column!r}; expected one column per key")


def _positions(columns: Mapping[str, Any], text_columns: Mapping[str, Any] | None,
               category_column: Any) -> tuple[dict[str, str], dict[str, str], str | None]:
    """Column positions (header-less files) as the names :func:`read_delimited` gives them."""
    def name(value: Any, key: str) -> str:
        if isinstance(value, bool) or not str(value).isdigit():
            raise ValueError(f"{key}: without a header, columns are 0-based positions, got "
                             f"{value!r}")
        return str(int(value))
    return ({key: name(value, f"columns.{key}") for key, value in columns.items()},
            {field: name(value, f"text_columns.{field}")
             for field, value in (text_columns or {}).items()},
            None if category_column is None else name(category_column, "category_column"))


def _split_lists(tags: pd.Series, sources: np.ndarray, sep: str
                 ) -> tuple[pd.Series, np.ndarray]:
    """One tag per element of each ``sep``-joined list (empty elements dropped)."""
    parts = tags.str.split(sep, regex=False)
    lengths = parts.map(lambda p: len(p) if isinstance(p, list) else 1).to_numpy()
    flat = parts.explode().astype("string").str.strip()
    rows = np.repeat(sources, lengths)
    keep = (flat.notna() & (flat != "")).to_numpy(dtype=bool)
    return flat[keep].reset_index(drop=True), rows[keep]


_LIST_CHARACTERS = (",", ";", "|")
_PERCENT = r"%[0-9A-Fa-f]{2}"


def _warn_about_tags(path: Path, tags: pd.Series, list_sep: str | None,
                     url_decode: bool) -> None:
    """Warns when the tags look like unsplit lists or percent-encoded text (over 1%)."""
    text = tags.dropna().astype(str)
    if text.empty:
        return
    if list_sep is None:
        shares = {c: float(text.str.contains(c, regex=False).mean()) for c in _LIST_CHARACTERS}
        sep, share = max(shares.items(), key=lambda item: item[1])
        if share > 0.01:
            log.warning("%s: %.1f%% of the tags hold %r: are they lists? data.list_sep=%r "
                        "splits them (one assignment per element)", path, 100 * share, sep,
                        sep)
    if not url_decode:
        share = float(text.str.contains(_PERCENT, regex=True).mean())
        if share > 0.01:
            log.warning("%s: %.1f%% of the tags look percent-encoded (%%2b, %%252b): "
                        "data.url_decode=true decodes them", path, 100 * share)


def _object_categories(table: RawTable, objects: pd.Series, column: str,
                       separator: str | None) -> pd.DataFrame:
    """``object, category`` pairs: each object's first non-empty category cell, split."""
    lists = _category_lists(table, column, separator)
    keep = (lists.map(len) > 0).to_numpy(dtype=bool) & objects.notna().to_numpy(dtype=bool)
    first = lists[keep].groupby(objects[keep].to_numpy(), sort=False).first()
    pairs = first.explode()
    return pd.DataFrame({"object": pairs.index.to_numpy(),
                         "category": pairs.to_numpy(dtype=object)})


def _position_names(path: Path, sep: str, encoding: str, required: list[str]
                    ) -> tuple[str, ...]:
    """A header-less file's column names, its positions (``"0"``, ``"1"``, ...).

    Raises:
        DataFormatError: a required position beyond the fields of the first line.
    """
    count = len(first_record(path, sep, encoding))
    beyond = [position for position in required if int(position) >= count]
    if beyond:
        raise DataFormatError(path, f"a field at the 0-based position(s) {beyond} "
                              f"(separator {sep!r})", f"{count} field(s)", line=1)
    return tuple(str(i) for i in range(count))


def _read(path: Path, kind: str, required: list[str], as_text: list[str], sep: str | None,
          encoding: str, header: bool) -> RawTable:
    """The table's columns ``required`` (``as_text`` read as strings from a text file).

    Raises:
        DataFormatError: as :func:`read_delimited`; a failure on line 1 of a file whose first
            line looks like TagRec's (not read with ``;``) is told in TagRec's terms.
    """
    if kind == "parquet":
        return read_parquet(path, required)
    separator = sep if sep is not None else ("," if kind == "csv" else "\t")
    try:
        names = None if header else _position_names(path, separator, encoding, required)
        return read_delimited(path, separator, required, text=as_text, encoding=encoding,
                              quoting=kind == "csv",
                              encoding_setting="data.encoding / encoding=", names=names)
    except DataFormatError as error:
        if error.line == 1 and separator != ";":
            check_not_tagrec_like(path, encoding)
        raise


def _assignment_tags(table: RawTable, column: str, list_sep: str | None,
                     url_decode: bool) -> tuple[pd.Series, np.ndarray]:
    """The tags (lists split, percent-decoded as asked) and each one's row; warns on traps."""
    tags, sources = _tags(table, column)
    if list_sep:
        tags, sources = _split_lists(tags, sources, list_sep)
    if url_decode:
        tags = tags.map(lambda tag: decode_percent(tag) if isinstance(tag, str) else tag)
    _warn_about_tags(table.path, tags, list_sep, url_decode)
    return tags, sources


def load_table(
    path: str | Path,
    columns: Mapping[str, Any],
    text_columns: Mapping[str, Any] | None = None,
    category_column: Any = None,
    category_separator: str | None = None,
    sep: str | None = None,
    format: str = "auto",
    encoding: str = "utf-8",
    name: str | None = None,
    integer_ids: bool = False,
    header: bool = True,
    list_sep: str | None = None,
    url_decode: bool = False,
) -> Folksonomy:
    """Loads a folksonomy from one table with a row per tag assignment.

    Texts and categories are per object; they are taken from the same table (the first
    non-empty value of each object).

    Args:
        path: CSV, TSV or Parquet file (text files may be gzip, bzip2 or xz compressed,
            whatever their name).
        columns: maps ``user``, ``object``, ``tag`` and optionally ``timestamp`` to the
            file's column names, one column per key. Timestamps may be Unix seconds, ISO
            8601 strings or (in Parquet) datetimes; naive times are UTC. A Parquet tag
            column may hold lists of tags (one assignment per tag).
        text_columns: maps text field names (``title``, ``description``, ...) to columns.
        category_column: column with the object's category (or categories; in Parquet
            also a list of categories).
        category_separator: splits the category column's text into several categories.
        sep: field separator of a text file; by default ``,`` for CSV (with quoting) and
            a tab for TSV (``.tsv``, ``.tab``, ``.dat``, ``.txt``, without quoting).
        format: ``auto`` (from the extension), ``csv``, ``tsv`` or ``parquet``.
        encoding: encoding of a text file (``data.encoding`` in a config); a byte that is
            not valid in it is an error.
        name: dataset name; defaults to the file name without extensions.
        integer_ids: read user and object ids as 64-bit integers (``007`` and ``7`` are
            then one user) instead of opaque strings.
        header: False: a text file without a header line; ``columns``, ``text_columns``
            and ``category_column`` then give 0-based column positions (``{"user": 0,
            "object": 1, "tag": 3}``).
        list_sep: the tag column holds lists joined by this separator (one assignment per
            element); also splits the category column unless ``category_separator`` is set.
        url_decode: decode percent-encoded tags (repeatedly: ``%252b`` is ``+``).

    A warning names ``list_sep`` when more than 1% of the tags hold a ``,``, ``;`` or ``|``
    (lists that were not split), and ``url_decode`` when more than 1% look percent-encoded.

    Returns:
        The raw folksonomy (tags as written in the file).

    Raises:
        FileNotFoundError, PermissionError, OSError: the file cannot be read.
        DataFormatError: the file does not have the columns or the layout expected, or no
            row has a user, an object and a tag.
        ValueError: ``columns`` lacks ``user``, ``object`` or ``tag``, has unknown keys or
            maps two keys to one column; or ``encoding`` is unknown.
    """
    path = Path(path)
    if not header:
        columns, text_columns, category_column = _positions(columns, text_columns,
                                                            category_column)
    _check_columns(columns)
    encoding = check_encoding(encoding)
    text_columns = dict(text_columns or {})
    required = list(dict.fromkeys([*columns.values(), *text_columns.values()]
                                  + ([category_column] if category_column else [])))
    table = _read(path, _detect_format(path, format), required,
                  [columns["tag"], *text_columns.values(),
                   *([category_column] if category_column else [])], sep, encoding, header)
    users = _ids(table, columns["user"], integer_ids)
    objects = _ids(table, columns["object"], integer_ids)
    tags, sources = _assignment_tags(table, columns["tag"], list_sep, url_decode)
    assignments = pd.DataFrame({
        "user": users.iloc[sources].reset_index(drop=True),
        "object": objects.iloc[sources].reset_index(drop=True),
        "tag": tags,
    })
    if "timestamp" in columns:
        assignments["timestamp"] = unix_seconds(table, columns["timestamp"])[sources]
    usable = (assignments["user"].notna() & assignments["object"].notna()
              & assignments["tag"].str.strip().fillna("").ne("")).to_numpy(dtype=bool)
    if not usable.any():
        raise DataFormatError(path, "at least one row with a user, an object and a non-empty "
                              f"tag (columns {columns['user']!r}, {columns['object']!r}, "
                              f"{columns['tag']!r})", "none")
    texts = None
    if text_columns:
        texts = pd.DataFrame({field: _first_per_object(objects, _texts(table, column))
                              for field, column in text_columns.items()})
    categories = None
    if category_column:
        categories = _object_categories(table, objects, category_column,
                                        category_separator or list_sep)
    dataset = name or path.name.split(".")[0] or path.name
    return Folksonomy.from_frame(assignments, texts, categories, name=dataset)
