"""Reading a delimited file in chunks (tagtorch/data/loaders/reading.py, read_delimited_chunks).

References: Python's own ``csv`` module reading the same text whole (the records), and line
numbers written by hand where a damaged line was planted. Every chunk size, down to one byte
(a chunk then grows to the next line feed outside quotes), must give the same records and the
same errors as the whole file.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io

import pandas as pd
import pytest

from tagtorch.data.loaders.reading import TableLayout, read_delimited_chunks
from tagtorch.errors import DataFormatError

SIZES = [1, 3, 17, 64, None]
TEXT = ('id;name;note\n1;"a;b";"one\nline two"\n\n2;plain;"say ""hi"""\r\n3;"";x\n'
        '4;"multi\n\nline";"4"\n5;e;f\n')


def records(path, layout, chunk_bytes, **settings) -> list[list[str]]:
    tables = list(read_delimited_chunks(path, layout, chunk_bytes=chunk_bytes, **settings))
    frame = pd.concat([t.frame for t in tables], ignore_index=True)
    return frame.astype(str).to_numpy().tolist()


def csv_records(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text.replace("\r\n", "\n")), delimiter=";"))
    return [row for row in rows[1:] if row]


@pytest.mark.parametrize("chunk_bytes", SIZES)
@pytest.mark.parametrize("wrap", ["plain", "gzip", "bzip2"])
def test_records_equal_pythons_csv_reading_at_every_chunk_size(tmp_path, chunk_bytes, wrap):
    path = tmp_path / "table.csv"
    data = TEXT.encode()
    path.write_bytes({"plain": data, "gzip": gzip.compress(data),
                      "bzip2": bz2.compress(data)}[wrap])
    layout = TableLayout(";", ("id", "name", "note"), quoting=True)
    assert records(path, layout, chunk_bytes) == csv_records(TEXT)


@pytest.mark.parametrize("chunk_bytes", SIZES)
def test_lines_are_the_files_lines_in_every_chunk(tmp_path, chunk_bytes):
    path = tmp_path / "table.tsv"
    path.write_text("a\tb\n1\t2\n\n3\t4\n5\t6\n\n\n7\t8\n")
    layout = TableLayout("\t", ("a", "b"), integer=("a",))
    tables = list(read_delimited_chunks(path, layout, chunk_bytes=chunk_bytes))
    assert [int(x) for t in tables for x in t.lines] == [2, 4, 5, 8]
    assert [int(x) for t in tables for x in t.frame["a"]] == [1, 3, 5, 7]


@pytest.mark.parametrize("chunk_bytes", SIZES)
@pytest.mark.parametrize(("bad", "message", "line"), [
    ("1;2", r"3 semicolon-separated fields as in the header, found 2 field\(s\)", 100),
    ("x;2;3", "an integer in column 'a'", 100),
    # an unclosed quote runs to the end of the file: named there, as when read whole
    ('1;"2;3', "well-formed semicolon-separated text", 151),
])
def test_a_damaged_line_far_down_is_named_by_its_line(tmp_path, chunk_bytes, bad, message,
                                                      line):
    lines = ["a;b;c"] + [f"{i};{i};{i}" for i in range(1, 150)]
    lines.insert(99, bad)  # line 100 of the file's 151
    path = tmp_path / "table.csv"
    path.write_text("\n".join(lines) + "\n")
    layout = TableLayout(";", ("a", "b", "c"), integer=("a",), quoting=True)
    with pytest.raises(DataFormatError, match=message) as caught:
        records(path, layout, chunk_bytes)
    assert caught.value.line == line


@pytest.mark.parametrize("chunk_bytes", SIZES)
def test_an_undecodable_byte_far_down_is_named_by_its_line(tmp_path, chunk_bytes):
    path = tmp_path / "table.csv"
    path.write_bytes(b"a;b\n" + b"1;x\n" * 40 + b"2;\xff\n" + b"3;y\n" * 5)
    with pytest.raises(DataFormatError, match="byte 0xff") as caught:
        records(path, TableLayout(";", ("a", "b")), chunk_bytes)
    assert caught.value.line == 42


@pytest.mark.parametrize("chunk_bytes", SIZES)
def test_blank_lines_before_a_headerless_files_data_are_skipped(tmp_path, chunk_bytes):
    path = tmp_path / "posts.txt"
    path.write_text("\n \n\t\n\n" + "u;r\n" * 3)
    layout = TableLayout(";", ("user", "resource"), names=("user", "resource"))
    assert records(path, layout, chunk_bytes) == [["u", "r"]] * 3


@pytest.mark.parametrize("chunk_bytes", SIZES)
@pytest.mark.parametrize(("text", "names", "allow", "expected"), [
    ("\n \n\n", None, False, "an empty file"),
    ("\n \n\n", ("a", "b"), False, "an empty file"),
    ("a;b\n\n\n", None, False, "expected data rows after the header line, found none"),
    ("\n\n", ("a", "b"), True, "an empty file"),
])
def test_a_file_without_rows_is_refused_whatever_the_chunks(tmp_path, chunk_bytes, text, names,
                                                            allow, expected):
    path = tmp_path / "t.csv"
    path.write_text(text)
    layout = TableLayout(";", ("a", "b"), allow_empty=allow, names=names)
    with pytest.raises(DataFormatError, match=expected):
        records(path, layout, chunk_bytes)


@pytest.mark.parametrize("chunk_bytes", SIZES)
def test_a_header_only_file_gives_one_empty_table_where_allowed(tmp_path, chunk_bytes):
    path = tmp_path / "t.csv"
    path.write_text("a;b\n\n")
    layout = TableLayout(";", ("a", "b"), allow_empty=True)
    tables = list(read_delimited_chunks(path, layout, chunk_bytes=chunk_bytes))
    assert len(tables) == 1 and list(tables[0].frame.columns) == ["a", "b"]
    assert tables[0].frame.empty


def test_a_bomb_is_refused_in_chunks_before_it_is_inflated(tmp_path):
    path = tmp_path / "bomb.dat"
    path.write_bytes(gzip.compress(b"a\tb\n" + b"2\t5\n" * 4_000_000, compresslevel=1))
    chunks = read_delimited_chunks(path, TableLayout("\t", ("a", "b")), chunk_bytes=1 << 16)
    read = 0
    with pytest.raises(DataFormatError, match="inflating to at most"):
        for table in chunks:
            read += len(table.frame)
    assert read < 4_000_000  # refused part way, not after reading the whole stream


def test_reported_bytes_add_up_to_the_decompressed_size(tmp_path):
    path = tmp_path / "t.csv.gz"
    data = b"a;b\n" + b"1;2\n" * 1000
    path.write_bytes(gzip.compress(data))
    seen: list[int] = []
    list(read_delimited_chunks(path, TableLayout(";", ("a", "b")), chunk_bytes=100,
                               on_bytes=seen.append))
    assert sum(seen) == len(data) and len(seen) > 10
