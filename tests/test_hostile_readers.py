"""Hostile use, round four (issue 69): the TagRec readers, whole and in chunks, on tricky files.

References: the whole-file reading (``chunk_bytes=None``) for the chunked one, which must read
the same posts or refuse alike at every chunk size; hand-written posts (or a refusal) for each
file of the corpus; Python's ``bytes.splitlines`` for the line breaks; hand-counted line
numbers for the lines over the bound (lowered to a few bytes here) and the stray quotes.
"""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf
from test_fuzz_loaders import FUZZ

from tagtorch.config_checks import check_config
from tagtorch.data.folksonomy import SOURCE_ORDER, Folksonomy
from tagtorch.data.loaders import reading
from tagtorch.data.loaders.reading import TableLayout, first_line, read_delimited_chunks
from tagtorch.data.loaders.tagrec import is_tagrec_file, load_tagrec, tagrec_field_count
from tagtorch.errors import ConfigError, DataFormatError

CHUNKS = [1, 2, 3, 5, 8, 13, 20, 64]
LINE = '"u{0}";"r{0}";"{0}";"t{0}"'
REFUSED = DataFormatError

#: name: (the file's bytes, its (user, resource, tag) rows in file order, or REFUSED)
CORPUS: dict[str, tuple[bytes, list[tuple[str, str, str]] | type[DataFormatError]]] = {
    # issue 69: a literal quote in an unquoted field, then a quoted line break; the whole
    # reading took the quote as a character, the chunked one counted it as an opening quote
    "stray quote, then a quoted break": (
        b'"u1";"r1";"1";"a";"";"";"t"\nu2;r"2;3;b;"";"";"x\ny"\n"u3";"r3";"4";"c";"";"";"z"\n',
        REFUSED),
    "stray quote, then a quoted break in a tag": (
        b'"u1";"r1";"1";"a,b"\nu2;r"2;3;"x\ny"\n"u3";"r3";"4";"c"\n', REFUSED),
    "stray quote alone": (b'u1;r"1;1;a\n', REFUSED),
    "quote after a blank": (b' "u1";"r1";"1";"a"\n', REFUSED),
    "quoted break in a title": (
        b'"u1";"r1";"1";"a";"";"";"Ti\ntle"\n"u2";"r2";"2";"b";"";"";"x"\n',
        [("u1", "r1", "a"), ("u2", "r2", "b")]),
    "quoted CR LF in a title": (
        b'"u1";"r1";"1";"a";"";"";"Ti\r\n\r\ntle"\r\n"u2";"r2";"2";"b";"";"";"x"\r\n',
        [("u1", "r1", "a"), ("u2", "r2", "b")]),
    "doubled quotes and a break": (
        b'"u1";"r1";"1";"a";"";"";"say ""hi""\nthere"\n"u2";"r2";"2";"b";"";"";""\n',
        [("u1", "r1", "a"), ("u2", "r2", "b")]),
    "doubled quote in a tag": (b'"u1";"r1";"1";"a""b,c"\n',
                               [("u1", "r1", 'a"b'), ("u1", "r1", "c")]),
    "text after a closing quote": (b'"u1";"r"1;"1";"a"\n', [("u1", "r1", "a")]),
    "separator inside quotes": (b'"u1";"r;1";"1";"a,b"\n',
                                [("u1", "r;1", "a"), ("u1", "r;1", "b")]),
    "CR LF": (b'"u1";"r1";"1";"a"\r\n"u2";"r2";"2";"b"\r\n', [("u1", "r1", "a"),
                                                             ("u2", "r2", "b")]),
    "lone CR": (b'"u1";"r1";"1";"a"\r"u2";"r2";"2";"b"\r', [("u1", "r1", "a"),
                                                         ("u2", "r2", "b")]),
    "mixed breaks, no final one": (
        b'"u1";"r1";"1";"a"\r\n"u2";"r2";"2";"b"\r"u3";"r3";"3";"c"\n"u4";"r4";"4";"d"',
        [("u1", "r1", "a"), ("u2", "r2", "b"), ("u3", "r3", "c"), ("u4", "r4", "d")]),
    "byte-order mark": (b'\xef\xbb\xbf"u1";"r1";"1";"a"\n"u2";"r2";"2";"b"\n',
                        [("u1", "r1", "a"), ("u2", "r2", "b")]),
    "blank lines": (b'\n\r\n"u1";"r1";"1";"a"\n \t \n\n"u2";"r2";"2";"b"\n\n\n',
                    [("u1", "r1", "a"), ("u2", "r2", "b")]),
    "unquoted fields": (b"u1;r1;1;a,b\nu2;r2;2;c\n",
                        [("u1", "r1", "a"), ("u1", "r1", "b"), ("u2", "r2", "c")]),
    "a trailing separator on every line": (
        b'"u1";"r1";"1";"a";\n"u2";"r2";"2";"b";\n', [("u1", "r1", "a"), ("u2", "r2", "b")]),
    "a trailing separator on one line": (b'"u1";"r1";"1";"a"\n"u2";"r2";"2";"b";\n',
                                         REFUSED),
    "multi-byte characters": (
        '"ü1";"r€";"1";"日本,😀"\n"u2";"r2";"2";"é"\n'.encode(),
        [("ü1", "r€", "日本"), ("ü1", "r€", "😀"), ("u2", "r2", "é")]),
    "an undecodable byte": (b'"u1";"r1";"1";"a"\n"u2";"r\xff";"2";"b"\n', REFUSED),
    "a quote left open": (b'"u1";"r1";"1";"a"\n"u2";"r2;"2";"b"\n"u3";"r3";"3";"c"\n',
                          REFUSED),
    "a NUL": (b'"u1";"r1";"1";"a"\n"u2";"r\x002";"2";"b"\n', REFUSED),
    "blank only": (b"\n \n\r\n", REFUSED),
    # pandas reads a line of one empty quoted field, or of a form feed, as a row padded with
    # empty fields, but takes a chunk's first line for the number of columns: both are refused
    # (cut with 20-byte pieces, the second line starts a chunk that goes on)
    "a line of one empty quoted field": (b'"u1";"r1";"1";"t1"\n""\n"u3";"r3";"3";"t3"\n',
                                         REFUSED),
    "a line of a form feed": (b'"u1";"r1";"1";"t1"\n\x0c\n"u3";"r3";"3";"t3"\n', REFUSED),
    "a first line of a vertical tab": (b'\x0b\n"u1";"r1";"1";"t1"\n', REFUSED),
    # three separators, as many as a record of four fields, but two of them quoted
    "quoted separators in a short record": (b'u;r;1;t\n";"";"; ', REFUSED),
    "gzip with a quoted break": (
        gzip.compress(b'"u1";"r1";"1";"a";"";"";"T\nx"\n"u2";"r2";"2";"b";"";"";"y"\n'),
        [("u1", "r1", "a"), ("u2", "r2", "b")]),
}


def rows(folk: Folksonomy) -> list[tuple[str, str, str]]:
    """The (user, resource, tag) strings of each assignment, in file order."""
    frame = folk.assignments.sort_values(SOURCE_ORDER)
    return [(str(folk.users[u]), str(folk.objects[o]), str(folk.tags[t]))
            for u, o, t in frame[["user", "object", "tag"]].itertuples(index=False)]


def outcome(path: Path, chunk_bytes: int | None) -> str | type[DataFormatError]:
    """The folksonomy's fingerprint, or DataFormatError (checked to be one line)."""
    try:
        return load_tagrec(path, chunk_bytes=chunk_bytes).fingerprint()
    except DataFormatError as error:
        assert str(error).startswith(str(path)) and "\n" not in str(error)
        return DataFormatError


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_whole_and_chunked_readings_agree_on_tricky_files(tmp_path, name):
    data, expected = CORPUS[name]
    path = tmp_path / "corpus.txt"
    path.write_bytes(data)
    whole = outcome(path, None)
    if expected is REFUSED:
        assert whole is DataFormatError
    else:
        assert whole is not DataFormatError
        assert rows(load_tagrec(path, chunk_bytes=None)) == expected
    for chunk_bytes in CHUNKS:
        assert outcome(path, chunk_bytes) == whole, chunk_bytes


@pytest.mark.parametrize("chunk_bytes", [None, 4096])
def test_a_field_over_the_csv_modules_limit_is_read_alike_whole_and_in_chunks(tmp_path,
                                                                              chunk_bytes):
    """The field counts were checked by the csv module, whose 128 KiB limit on a field refused
    the whole file (a quoted separator anywhere made it look) but not its chunks."""
    path = tmp_path / "big.txt"
    path.write_text('"u1";"r1";"1";"a;b";"";"";"t"\n"u2";"r2";"2";"c";"";"";"'
                    + "x" * (140 << 10) + '"\n')
    folk = load_tagrec(path, chunk_bytes=chunk_bytes)
    assert rows(folk) == [("u1", "r1", "a;b"), ("u2", "r2", "c")]
    assert len(folk.texts["title"].iloc[1]) == 140 << 10


TOKENS = ['"', '""', ";", "\n", "\r\n", "\r", ",", " ", "\t", "\x0c", "a", "é", "😀", '";"',
          '"\n"']


@settings(FUZZ, max_examples=10)
@given(lines=st.lists(st.lists(st.sampled_from(TOKENS), max_size=6), min_size=1, max_size=4))
def test_whole_and_chunked_readings_agree_on_random_quoting(lines):
    """Valid lines around random quotes, separators and breaks: the same posts, or both refuse."""
    import tempfile

    text = "\n".join([LINE.format(1), *(LINE.format(2)[:-1] + "".join(tokens) + '"'
                                        for tokens in lines), LINE.format(3)]) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.txt"
        path.write_bytes(text.encode())
        whole = outcome(path, None)
        assert all(outcome(path, size) == whole for size in (1, 4, 16)), repr(text)


@pytest.mark.parametrize("data", [b"", b"a", b"\r", b"\n", b"\r\n", b"a\r\rb\n\r\nc", b"\n\r",
                                  b"x\r\n\r", b"\r\r\n\n"])
def test_line_ends_are_where_bytes_splitlines_cuts(data):
    codes = np.frombuffer(data, dtype=np.uint8)
    expected = list(itertools.accumulate(len(line) for line in data.splitlines(keepends=True)))
    ends = reading._line_ends(codes).tolist()
    assert ends == [end for end in expected if data[end - 1:end] in (b"\n", b"\r")]


# ---------------------------------------------------------------- case 2: a line's length


@pytest.mark.parametrize("chunk_bytes", [None, 1, 7, 32, 1 << 20])
@pytest.mark.parametrize(("text", "line"), [
    (LINE.format(1) + "\n" + '"u2";"r2";"2";"' + "x" * 70, 2),  # no final line break
    (LINE.format(1) + "\n" + '"u2";"r2";"2";"a";"";"";"' + "x\n" * 30 + '"\n', 2),  # quoted
    ("\n".join(LINE.format(i) for i in range(1, 5)) + "\n" + "y" * 65 + "\n", 5),
])
def test_a_line_over_the_bound_is_refused_naming_it(tmp_path, monkeypatch, chunk_bytes, text,
                                                    line):
    monkeypatch.setattr(reading, "MAX_LINE_BYTES", 64)
    path = tmp_path / "long.txt"
    path.write_text(text)
    with pytest.raises(DataFormatError, match="expected lines of at most 64 bytes") as caught:
        load_tagrec(path, chunk_bytes=chunk_bytes)
    assert caught.value.line == line
    assert str(caught.value).startswith(f"{path}, line {line}: ")


@pytest.mark.parametrize("chunk_bytes", [None, 1, 5, 64])
def test_a_line_at_the_bound_is_read(tmp_path, monkeypatch, chunk_bytes):
    monkeypatch.setattr(reading, "MAX_LINE_BYTES", 64)
    long = '"u2";"r2";"2";"' + "x" * 46 + '"\r\n'  # 64 bytes, its CR LF included
    assert len(long) == 64
    path = tmp_path / "edge.txt"
    path.write_text(LINE.format(1) + "\n" + long + LINE.format(3) + "\n", newline="")
    assert len(rows(load_tagrec(path, chunk_bytes=chunk_bytes))) == 3


def test_the_chunked_reading_stops_at_the_bound_not_at_the_line_end(monkeypatch):
    """A line without end (an endless stream) is refused after the bound, not held whole."""
    monkeypatch.setattr(reading, "MAX_LINE_BYTES", 1000)
    read = []

    def endless():
        yield b"a;b\n"
        while True:
            read.append(100)
            yield b"x" * 100

    with pytest.raises(DataFormatError, match="line 2: expected lines of at most 1,000"):
        list(reading._line_chunks(endless(), True, Path("endless.txt")))
    assert sum(read) <= 1100


def test_a_first_line_over_the_bound_is_refused_and_not_taken_for_tagrec(tmp_path, monkeypatch):
    """The format check holds no more than the bound (here 64 bytes, read 16 at a time)."""
    monkeypatch.setattr(reading, "MAX_LINE_BYTES", 64)
    monkeypatch.setattr(reading, "_FIRST_LINE_PIECE", 16)
    path = tmp_path / "long.txt"
    path.write_text("\n\n" + '"u";"r";"1";"' + "x" * 80 + '"\n')
    with pytest.raises(DataFormatError, match="line 3: expected lines of at most 64 bytes"):
        tagrec_field_count(path)
    assert not is_tagrec_file(path)


# ---------------------------------------------------------------- case 3: the format check


def test_the_format_check_reads_only_up_to_the_first_line(tmp_path, monkeypatch):
    """An undecodable byte far down does not stop the check (it was read whole before)."""
    path = tmp_path / "big.txt"
    path.write_bytes(b"\n" + (LINE.format(1) + "\n").encode() * 20_000 + b'"\xff";"r";"1";"t"\n')
    seen = []
    pieces = reading._byte_pieces
    monkeypatch.setattr(reading, "_byte_pieces",
                        lambda *args: (seen.append(len(p)) or p for p in pieces(*args)))
    assert first_line(path) == (2, LINE.format(1))
    assert tagrec_field_count(path) == 4 and is_tagrec_file(path)
    assert max(seen) == sum(seen) // 3 == 1 << 16  # one 64 KiB piece a check, of 380 KB
    with pytest.raises(DataFormatError, match=r"line 20002: .* found the byte 0xff"):
        load_tagrec(path, chunk_bytes=1 << 16)


def test_the_first_lines_undecodable_byte_is_named_by_its_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"\r\n \n" + b'"u\xff";"r";"1";"t"\n')
    with pytest.raises(DataFormatError, match=r"line 3: expected text encoded as utf-8"):
        first_line(path)


def test_a_utf16_first_line_is_read_as_before(tmp_path):
    path = tmp_path / "wide.txt"
    path.write_bytes(("\n" + LINE.format(1) + "\n").encode("utf-16"))
    assert first_line(path, "utf-16") == (2, LINE.format(1))


# ---------------------------------------------------------------- case 4: chunk_bytes


BAD_CHUNKS = [-5, "abc", 2.5, True, 0, 1 << 40]


@pytest.mark.parametrize("value", BAD_CHUNKS)
def test_a_chunk_size_that_is_not_one_is_refused_naming_it(tmp_path, value):
    path = tmp_path / "ok.txt"
    path.write_text(LINE.format(1) + "\n")
    expected = f"chunk_bytes: expected an integer from 1 to 1,073,741,824 .*, got {value!r}"
    with pytest.raises(ValueError, match=expected):
        load_tagrec(path, chunk_bytes=value)
    with pytest.raises(ValueError, match=expected):
        next(read_delimited_chunks(path, TableLayout(";", ("a",), names=("a",)),
                                   chunk_bytes=value))


@pytest.mark.parametrize("value", BAD_CHUNKS)
def test_the_config_check_refuses_the_same_chunk_sizes(value):
    data = {"_target_": "tagtorch.data.loaders.tagrec.load_tagrec", "path": "x.txt",
            "chunk_bytes": value}
    with pytest.raises(ConfigError) as caught:
        check_config(OmegaConf.create({"seed": 0, "data": data}))
    assert str(caught.value).startswith(f"config key data.chunk_bytes={value!r}: expected an "
                                        "integer from 1 to 1,073,741,824")


@pytest.mark.parametrize("value", [None, 1, 4096])
def test_the_config_check_takes_a_chunk_size(value):
    data = {"_target_": "tagtorch.data.loaders.tagrec.load_tagrec", "path": "x.txt",
            "chunk_bytes": value}
    check_config(OmegaConf.create({"seed": 0, "data": data}))


@pytest.mark.integration
def test_the_command_line_shows_a_bad_chunk_size_in_one_line(tmp_path):
    from test_config_checks import run_cli

    path = tmp_path / "ok.txt"
    path.write_text(LINE.format(1) + "\n")
    done = run_cli(tmp_path, "data=tagrec", f"data.path={path}", "data.chunk_bytes=true")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "error: config key data.chunk_bytes=True: expected an integer from 1")
