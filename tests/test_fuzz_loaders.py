"""Fuzz tests: the loaders fail only with their own error, naming the file (and line).

Hypothesis starts from valid files (the rows of the hand-written fixtures) and damages them:
random cells (ids beyond 64 bits, zero-padded, fractional, non-ASCII digits, separators,
quotes, line breaks, NUL), random field counts, a damaged header, random encodings (written
in one, read in another), random compression (also cut short), random line endings, random
bytes overwritten, inserted or cut, or no structure at all. The generic table loader, the
three HetRec loaders and the MovieLens CSV loader then read the result. A load either
succeeds or raises :class:`~tagtorch.errors.DataFormatError` (or a subclass) whose
one-line message starts with the offending file and, where the error has a line, gives it;
anything else (a pandas, numpy, codec or csv traceback, a bare ``ValueError``) fails the
test. Runs are bounded (a few seconds) and reproducible: ``derandomize=True``, no example
database.
"""

from __future__ import annotations

import bz2
import gzip
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_loaders import FIXTURES  # the hand-written fixtures the damage starts from

from tagtorch.data import loaders
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.errors import DataFormatError

FUZZ = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: Characters that stress a delimited reader: separators, quotes, line breaks, NUL,
#: blanks, signs, digits (ASCII and not), and text outside Latin-1.
_TRICKY = "\t,;|\"'\n\r\x00 \x0b+-0123456789eE.x\u0663\u00e9\u00df\u20ac\ufeff\U0001f600"
weird_text = st.text(alphabet=st.sampled_from(_TRICKY) | st.characters(), max_size=8)
weird_ids = st.one_of(
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70).map(str),
    st.integers(min_value=0, max_value=999).map(lambda n: f"{n:05d}"),  # zero-padded
    st.sampled_from(["9223372036854775807", "9223372036854775808", "-9223372036854775808",
                     "-9223372036854775809", "18446744073709551616", "1e3", "7.0", "nan",
                     "inf", "-inf", "", " 7 ", "0", "-1", "+3", "0x1F", "1_000",
                     "2020-01-01T00:00:00Z", "2020-13-45", "\u0663", "\uff13", "12\u00a0"]),
    weird_text,
)
write_encodings = st.sampled_from(["utf-8"] * 6 + ["latin-1", "cp1252", "utf-16", "utf-8-sig"])
MUTATIONS = ("cell", "cell", "cell", "width", "header", "blank", "quote", "sep", "encoding",
             "newline", "bytes", "binary", "compress", "compress", "empty")


def fixture_rows(path: Path, encoding: str = "utf-8") -> tuple[list[str], list[list[str]]]:
    """Header and rows of a fixture file (tab-separated unless it is a .csv)."""
    import csv

    text = path.read_bytes().decode(encoding, errors="replace")
    if path.suffix == ".csv":
        records = list(csv.reader(text.splitlines()))
    else:
        records = [line.split("\t") for line in text.splitlines() if line.strip()]
    return records[0], records[1:]


@st.composite
def damaged_file(draw: st.DrawFn, header: list[str], rows: list[list[str]],
                 integers: set[str], sep: str) -> tuple[bytes, str]:
    """A valid file built from ``rows``, then damaged; returns its bytes and the mutations."""
    chosen = [list(draw(st.sampled_from(rows))) for _ in range(draw(st.integers(1, 5)))]
    names = list(header)
    mutations = draw(st.lists(st.sampled_from(MUTATIONS), max_size=3))
    encoding, ending, compression = "utf-8", "\n", "none"
    for mutation in mutations:
        row = draw(st.integers(0, len(chosen) - 1))
        column = draw(st.integers(0, len(names) - 1)) if names else 0
        if mutation == "cell" and column < len(chosen[row]):
            chosen[row][column] = draw(weird_ids if names and names[column] in integers
                                       else weird_text)
        elif mutation == "width":
            if draw(st.booleans()) and chosen[row]:
                chosen[row].pop()
            else:
                chosen[row].append(draw(weird_text))
        elif mutation == "header" and names:
            names = draw(st.permutations(names))[: draw(st.integers(0, len(names)))]
            if draw(st.booleans()):
                names.append(names[0] if names else "extra")
        elif mutation == "blank":
            chosen.insert(row, [draw(st.sampled_from(["", " ", "\t", "\x0b"]))])
        elif mutation == "quote" and column < len(chosen[row]):
            chosen[row][column] = '"' + draw(weird_text) + draw(st.sampled_from(['"', ""]))
        elif mutation == "sep":
            sep = draw(st.sampled_from(["\t", ",", ";"]))
        elif mutation == "encoding":
            encoding = draw(write_encodings)
        elif mutation == "newline":
            ending = draw(st.sampled_from(["\r\n", "\r"]))
        elif mutation == "compress":
            compression = draw(st.sampled_from(["gzip", "bz2", "cut-gzip"]))
    text = ending.join(sep.join(r) for r in [names, *chosen]) + draw(
        st.sampled_from(["", ending]))
    data = text.encode(encoding, errors="replace")
    if "bytes" in mutations:
        junk = draw(st.binary(min_size=1, max_size=4))
        at = draw(st.integers(0, len(data)))
        data = draw(st.sampled_from([data[:at] + junk + data[at + len(junk):],
                                     data[:at] + junk + data[at:], data[:at]]))
    if "binary" in mutations:
        data = draw(st.binary(max_size=64))
    if "empty" in mutations:
        data = b""
    if compression == "gzip":
        data = gzip.compress(data)
    elif compression == "bz2":
        data = bz2.compress(data)
    elif compression == "cut-gzip":
        packed = gzip.compress(data)
        data = packed[: draw(st.integers(0, len(packed)))]
    return data, ",".join(mutations) or "none"


def check_outcome(load: Callable[[], Folksonomy], files: list[Path]) -> None:
    """Runs ``load``: a Folksonomy, or a DataFormatError naming one of ``files``."""
    try:
        folk = load()
    except DataFormatError as exc:
        event(f"error: expected {exc.expected.split(' in column')[0][:30]}")
        message = str(exc)
        assert exc.path in files, message
        assert message.startswith(f"{exc.path}"), message
        assert "\n" not in message and "Traceback" not in message, message
        assert ": expected " in message, message
        if exc.line is not None:
            assert message.startswith(f"{exc.path}, line {exc.line}: "), message
            assert exc.line >= 1, message
        elif exc.row is not None:
            assert message.startswith(f"{exc.path}, row {exc.row}: "), message
        return
    event("loaded")
    assert isinstance(folk, Folksonomy) and folk.n_assignments >= 1


# ---------------------------------------------------------------- generic tables

TABLE_HEADER = ["user", "item", "tag", "time", "title"]
TABLE_ROWS = [["alice", "o1", "python", "2020-01-01T00:00:00Z", "Python docs"],
              ["007", "0123", "café", "1577923200", ""],
              ["7", "123", "jazz", "", "Kind of Blue"],
              ["bob", "o1", "Python", "1577923200.5", "x"]]


@FUZZ
@given(case=st.sampled_from([(".csv", ","), (".tsv", "\t"), (".txt", "\t")]).flatmap(
           lambda kind: st.tuples(st.just(kind[0]), damaged_file(
               TABLE_HEADER, TABLE_ROWS, {"user", "item", "time"}, kind[1]))),
       encoding=st.sampled_from(["utf-8"] * 4 + ["latin-1", "cp1252", "utf-16"]),
       integer_ids=st.booleans(), with_time=st.booleans(), with_title=st.booleans())
def test_fuzz_table(case: tuple[str, tuple[bytes, str]], encoding: str, integer_ids: bool,
                    with_time: bool, with_title: bool) -> None:
    suffix, (data, mutations) = case
    event(f"mutations: {mutations}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"posts{suffix}"
        path.write_bytes(data)
        columns = {"user": "user", "object": "item", "tag": "tag",
                   **({"timestamp": "time"} if with_time else {})}
        check_outcome(lambda: loaders.load_table(
            path, columns, text_columns={"title": "title"} if with_title else None,
            encoding=encoding, integer_ids=integer_ids), [path])


# ---------------------------------------------------------------- HetRec and MovieLens CSV

#: loader, fixture folder, and per file: its encoding and its integer columns.
HETREC: dict[str, tuple[Callable[..., Folksonomy], str, dict[str, tuple[str, set[str]]]]] = {
    "lastfm": (loaders.load_lastfm, "hetrec2011-lastfm-2k", {
        "user_taggedartists.dat": ("utf-8", {"userID", "artistID", "tagID", "day", "month",
                                             "year"}),
        "tags.dat": ("latin-1", {"tagID"}),
        "artists.dat": ("utf-8", {"id"}),
    }),
    "movielens": (loaders.load_movielens_2k, "hetrec2011-movielens-2k", {
        "user_taggedmovies-timestamps.dat": ("utf-8", {"userID", "movieID", "tagID",
                                                       "unixTimeStamp"}),
        "tags.dat": ("latin-1", {"id"}),
        "movies.dat": ("latin-1", {"id"}),
        "movie_genres.dat": ("utf-8", {"movieID"}),
    }),
    "movielens-dates": (loaders.load_movielens_2k, "hetrec2011-movielens-2k", {
        "user_taggedmovies.dat": ("utf-8", {"userID", "movieID", "tagID", "date_day",
                                            "date_month", "date_year", "date_hour",
                                            "date_minute", "date_second"}),
    }),
    "delicious": (loaders.load_delicious_2k, "hetrec2011-delicious-2k", {
        "user_taggedbookmarks.dat": ("utf-8", {"userID", "bookmarkID", "tagID", "day", "month",
                                               "year", "hour", "minute", "second"}),
        "tags.dat": ("utf-8", {"id"}),
        "bookmarks.dat": ("utf-8", {"id"}),
    }),
}


@st.composite
def hetrec_case(draw: st.DrawFn) -> tuple[str, str, bytes, str]:
    name = draw(st.sampled_from(sorted(HETREC)))
    file = draw(st.sampled_from(sorted(HETREC[name][2])))
    encoding, integers = HETREC[name][2][file]
    header, rows = fixture_rows(FIXTURES / HETREC[name][1] / file, encoding)
    data, mutations = draw(damaged_file(header, rows, integers, "\t"))
    return name, file, data, mutations


@settings(FUZZ, max_examples=80)
@given(case=hetrec_case())
def test_fuzz_hetrec(case: tuple[str, str, bytes, str]) -> None:
    name, file, data, mutations = case
    event(f"mutations: {mutations}")
    load, fixture, _ = HETREC[name]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / fixture
        shutil.copytree(FIXTURES / fixture, folder)
        if name == "movielens-dates":
            (folder / "user_taggedmovies-timestamps.dat").unlink()
        (folder / file).write_bytes(data)
        check_outcome(lambda: load(path=folder), sorted(folder.iterdir()))


@settings(FUZZ, max_examples=40)
@given(case=st.sampled_from(["tags.csv", "movies.csv"]).flatmap(lambda file: st.tuples(
    st.just(file), damaged_file(*fixture_rows(FIXTURES / "ml-csv" / file),
                                {"userId", "movieId", "timestamp"}, ","))))
def test_fuzz_movielens_csv(case: tuple[str, tuple[bytes, str]]) -> None:
    file, (data, _) = case
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "release"
        shutil.copytree(FIXTURES / "ml-csv", folder)
        (folder / file).write_bytes(data)
        check_outcome(lambda: loaders.load_movielens_csv(path=folder), sorted(folder.iterdir()))


# ---------------------------------------------------------------- Parquet cell types


@st.composite
def parquet_column(draw: st.DrawFn, n: int, usual: str) -> object:
    """``n`` values of a random type (often ``usual``): scalars, lists, nested lists, bytes."""
    import datetime

    import pyarrow as pa

    def values(element: st.SearchStrategy[object]) -> list[object]:
        if draw(st.integers(0, 3)) > 0:
            return draw(st.lists(element, min_size=n, max_size=n))
        return draw(st.lists(st.none() | element, min_size=n, max_size=n))

    short_text = st.text(alphabet="abc7", min_size=1, max_size=3) | st.text(
        alphabet=_TRICKY + "abc", max_size=5)
    kind = draw(st.sampled_from([usual] * 12 + [
        "string", "int64", "uint64", "float64", "bool", "binary", "timestamp", "list<string>",
        "list<int64>", "list<float64>", "list<list<string>>", "dictionary"]))
    if kind == "string":
        return pa.array(values(short_text), pa.string())
    if kind == "int64":
        return pa.array(values(st.integers(-(2 ** 63), 2 ** 63 - 1)), pa.int64())
    if kind == "uint64":
        return pa.array(values(st.integers(0, 2 ** 64 - 1)), pa.uint64())
    if kind == "float64":
        return pa.array(values(st.floats()), pa.float64())
    if kind == "bool":
        return pa.array(values(st.booleans()), pa.bool_())
    if kind == "binary":
        return pa.array(values(st.binary(max_size=4)), pa.binary())
    if kind == "timestamp":
        return pa.array(values(st.datetimes(min_value=datetime.datetime(1700, 1, 1),
                                            max_value=datetime.datetime(2200, 1, 1))),
                        pa.timestamp("us"))
    if kind == "list<string>":
        return pa.array(values(st.lists(st.none() | short_text, max_size=3)),
                        pa.list_(pa.string()))
    if kind == "list<int64>":
        return pa.array(values(st.lists(st.integers(-5, 5), max_size=3)), pa.list_(pa.int64()))
    if kind == "list<float64>":
        return pa.array(values(st.lists(st.floats(), max_size=3)), pa.list_(pa.float64()))
    if kind == "list<list<string>>":
        return pa.array(values(st.lists(st.lists(short_text, max_size=2), max_size=2)),
                        pa.list_(pa.list_(pa.string())))
    return pa.array(draw(st.lists(st.sampled_from(["a", "b", "007", "7"]), min_size=n,
                                  max_size=n)), pa.string()).dictionary_encode()


@st.composite
def parquet_table(draw: st.DrawFn) -> object:
    import pyarrow as pa

    n = draw(st.integers(1, 4))
    usual = {"user": "string", "item": "int64", "tag": "list<string>", "time": "timestamp",
             "title": "string", "genre": "list<string>"}
    return pa.table({name: draw(parquet_column(n, kind)) for name, kind in usual.items()})


@FUZZ
@given(table=parquet_table(), integer_ids=st.booleans(), with_time=st.booleans(),
       damage=st.sampled_from([None] * 7 + [1]).flatmap(
           lambda flag: st.just(None) if flag is None else st.integers(0, 10_000)))
def test_fuzz_parquet(table: object, integer_ids: bool, with_time: bool,
                      damage: int | None) -> None:
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "posts.parquet"
        pq.write_table(table, path)
        if damage is not None:  # flip one byte
            data = bytearray(path.read_bytes())
            data[damage % len(data)] ^= 0xFF
            path.write_bytes(bytes(data))
        columns = {"user": "user", "object": "item", "tag": "tag",
                   **({"timestamp": "time"} if with_time else {})}
        check_outcome(lambda: loaders.load_table(path, columns, text_columns={"title": "title"},
                                         category_column="genre", category_separator=";",
                                         integer_ids=integer_ids), [path])


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xfe", b"\x1f\x8b", b"PK\x03\x04",
                                  b"user,item,tag\n", b"user,item,tag\n,,\n",
                                  b"user,item,tag\nu,o,\"open quote\n"])
def test_edge_cases_without_hypothesis(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "edge.csv"
    path.write_bytes(data)
    with pytest.raises(DataFormatError) as info:
        loaders.load_table(path, {"user": "user", "object": "item", "tag": "tag"})
    assert str(info.value).startswith(str(path))
