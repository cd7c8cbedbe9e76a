"""Tests for the loaders: hand-written fixtures of every format, malformed files, real data.

The real HetRec files are read from $TAGTORCH_DATA_DIR; those tests skip when it is unset.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tagtorch.data.download import DatasetNotFoundError
from tagtorch.data.folksonomy import MISSING_TIME, Folksonomy
from tagtorch.data.loaders import (
    load_delicious_2k,
    load_lastfm,
    load_movielens_2k,
    load_movielens_csv,
    load_table,
)
from tagtorch.data.loaders.reading import _line_layout, read_delimited
from tagtorch.errors import DataFormatError

FIXTURES = Path(__file__).parent / "fixtures" / "loaders"
MALFORMED = FIXTURES / "malformed"
LASTFM_HEADER = ["userID", "artistID", "tagID", "day", "month", "year"]


def rows(folk: Folksonomy) -> set[tuple[object, object, str, int]]:
    """Assignments decoded back to (raw user, raw object, tag string, timestamp)."""
    a = folk.assignments
    return {
        (folk.users[u].item() if hasattr(folk.users[u], "item") else folk.users[u],
         folk.objects[o].item() if hasattr(folk.objects[o], "item") else folk.objects[o],
         folk.tags[t], int(ts))
        for u, o, t, ts in a[["user", "object", "tag", "timestamp"]].itertuples(index=False)
    }


def titles(folk: Folksonomy) -> dict[object, str]:
    return dict(zip(folk.objects.tolist(), folk.texts["title"], strict=True))


def categories(folk: Folksonomy) -> dict[object, set[str]]:
    out: dict[object, set[str]] = {}
    for o, c in folk.categories.itertuples(index=False):
        out.setdefault(folk.objects[o].item() if hasattr(folk.objects[o], "item")
                       else folk.objects[o], set()).add(folk.category_names[c])
    return out


def copy_folder(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


def assert_error(info: pytest.ExceptionInfo, path: Path, line: int | None, *expected: str) -> None:
    message = str(info.value)
    assert str(path) in message
    if line is not None:
        assert f"line {line}:" in message
        assert info.value.line == line
    for text in expected:
        assert text in message, message


# ---------------------------------------------------------------- HetRec fixtures


def test_lastfm_fixture() -> None:
    folk = load_lastfm(FIXTURES, download=False)
    assert folk.name == "hetrec2011-lastfm-2k"
    # (2, 52, 13) appears twice in the file; the earliest time is kept.
    assert rows(folk) == {
        (2, 52, "rock", 1238536800),  # 1 April 2009, midnight in Madrid (CEST)
        (2, 52, "Hard Rock", 1238536800),
        (2, 63, "rock", 1246399200),
        (3, 52, "rock français", 1222812000),
        (3, 311, "fußball", 1262300400),  # 1 January 2010, midnight in Madrid (CET)
        (3, 99, "Hard Rock", 1262300400),
    }
    assert folk.users.tolist() == [2, 3]
    assert folk.tags.tolist() == ["Hard Rock", "fußball", "rock", "rock français"]
    # Quotes are ordinary characters; a numeric-looking name stays text; 99 has no artist row.
    assert titles(folk) == {52: "Morcheeba", 63: '"Weird Al" Yankovic', 99: "", 311: "311"}
    assert folk.text_fields == ["title"]
    assert len(folk.categories) == 0 and len(folk.category_names) == 0
    assert folk.assignments.dtypes.tolist() == [np.int64] * 4


def test_lastfm_listening_counts_become_profiles() -> None:
    folk = load_lastfm(FIXTURES, download=False, listening=True)
    got = {(int(folk.objects[o]), int(k), float(w))
           for o, k, w in folk.profiles[["object", "key", "weight"]].itertuples(index=False)}
    users = {2: 0, 3: 1, 5: 2}  # key codes: listeners of tagged artists, sorted as strings
    assert got == {(52, users[2], 13883.0), (63, users[2], 11690.0), (52, users[3], 500.0),
                   (311, users[5], 20.0)}  # 707: listened to, never tagged
    assert len(load_lastfm(FIXTURES, download=False).profiles) == 0
    assert folk.fingerprint() != load_lastfm(FIXTURES, download=False).fingerprint()
    kept = folk.select(folk.assignments["object"].to_numpy() == 0)  # artist 52 only
    assert sorted(kept.profiles["weight"].tolist()) == [500.0, 13883.0]


def test_lastfm_path_argument_and_missing_file(tmp_path: Path) -> None:
    folder = copy_folder("hetrec2011-lastfm-2k", tmp_path)
    assert load_lastfm(path=folder).n_assignments == 6
    (folder / "artists.dat").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"artists\.dat"):
        load_lastfm(path=folder)
    with pytest.raises(DatasetNotFoundError, match="download=False"):
        load_lastfm(tmp_path, download=False)


def test_movielens_2k_fixture_timestamps_file() -> None:
    folk = load_movielens_2k(FIXTURES, download=False)
    assert rows(folk) == {
        (75, 353, "police", 1162160415),
        (78, 4223, "a mão de deus", 1176691425),
        (78, 1, "earth", 1224979533),
        (190, 1, "police", 1230764400),
    }
    assert titles(folk) == {1: "Toy story", 353: "The Crow", 4223: "Les misérables"}
    assert folk.category_names.tolist() == ["Action", "Adventure", "Animation", "Children",
                                            "Thriller"]
    assert categories(folk) == {1: {"Adventure", "Animation", "Children"},
                                353: {"Action", "Thriller"}}


def test_movielens_2k_metadata_become_text_fields() -> None:
    folk = load_movielens_2k(FIXTURES, download=False, metadata=True)
    assert folk.text_fields == ["title", "directors", "countries", "genres"]
    texts = folk.texts.set_index(folk.objects)
    assert texts.loc[1].tolist() == ["Toy story", "John Lasseter", "USA",
                                     "Adventure Animation Children"]
    assert texts.loc[4223].tolist() == ["Les misérables", "", "UK Germany", ""]
    assert rows(folk) == rows(load_movielens_2k(FIXTURES, download=False))  # tags unchanged


def test_movielens_2k_date_columns_match_timestamps(tmp_path: Path) -> None:
    folder = copy_folder("hetrec2011-movielens-2k", tmp_path)
    expected = rows(load_movielens_2k(path=folder))
    (folder / "user_taggedmovies-timestamps.dat").unlink()
    # Madrid local time, including 02:05:33 on 26 Oct 2008 (ambiguous: read as summer time).
    assert rows(load_movielens_2k(path=folder)) == expected
    (folder / "user_taggedmovies.dat").unlink()
    with pytest.raises(DatasetNotFoundError,
                       match=r"user_taggedmovies-timestamps\.dat or user_taggedmovies\.dat"):
        load_movielens_2k(path=folder)


def test_delicious_fixture_dates_and_timestamps(tmp_path: Path) -> None:
    folk = load_delicious_2k(FIXTURES, download=False)
    expected = {
        (8, 1, "collection_development", 1289255362),  # the official readme's example
        (8, 1, "library", 1289255362),
        (8, 2, "collection_development", 1289255400),
        (9, 1, "bibliothèque", 1309514400),
    }
    assert rows(folk) == expected
    assert titles(folk) == {
        1: "IFLA - The official website of the International Federation of Library "
           "Associations and Institutions",
        2: '"Library 2.0", a reader',
    }
    folder = copy_folder("hetrec2011-delicious-2k", tmp_path)
    (folder / "user_taggedbookmarks-timestamps.dat").write_text(
        "userID\tbookmarkID\ttagID\ttimestamp\n"
        "8\t1\t1\t1289255362000\n8\t1\t2\t1289255362000\n"
        "8\t2\t1\t1289255400000\n9\t1\t3\t1309514400000\n")
    (folder / "user_taggedbookmarks.dat").write_text("ignored when timestamps exist")
    assert rows(load_delicious_2k(path=folder)) == expected


# ---------------------------------------------------------------- MovieLens CSV


def test_movielens_csv_fixture(tmp_path: Path) -> None:
    folk = load_movielens_csv(path=FIXTURES / "ml-csv")
    assert rows(folk) == {
        (2, 60756, "funny", 1445714994),
        (2, 60756, "Highly quotable", 1445714996),
        (2, 89774, "Tom Hardy, again", 1445715205),
        (7, 48516, "NA", 1169687325),  # "NA" is a tag, not a missing value
        (18, 431, "Al Pacino", 1462138765),
        (18, 99999, "weird", 1462138800),
    }
    assert titles(folk)[48516] == "Departed, The (2006)"
    assert categories(folk) == {431: {"Crime", "Drama"}, 48516: {"Crime", "Drama", "Thriller"},
                                60756: {"Comedy"}, 89774: {"Drama"}}  # 99999: no genres
    assert "(no genres listed)" not in folk.category_names.tolist()
    # The same files as a release folder in a data home.
    shutil.copytree(FIXTURES / "ml-csv", tmp_path / "ml-latest-small")
    again = load_movielens_csv(tmp_path, download=False)
    assert again.name == "ml-latest-small" and rows(again) == rows(folk)
    with pytest.raises(DatasetNotFoundError, match="ml-25m"):
        load_movielens_csv(tmp_path, variant="ml-25m", download=False)


# ---------------------------------------------------------------- generic tables


def test_table_csv_texts_categories_and_times() -> None:
    folk = load_table(
        FIXTURES / "tables" / "assignments.csv",
        columns={"user": "user", "object": "item", "tag": "tag", "timestamp": "time"},
        text_columns={"title": "title"},
        category_column="category",
        category_separator="|",
    )
    assert folk.name == "assignments"
    assert rows(folk) == {
        ("alice", "u1", "python", 1577836800),  # ISO 8601 with Z
        ("bob", "u1", "Python", 1577923200),  # Unix seconds
        ("alice", "u2", "cooking", MISSING_TIME),  # empty
        ("bob", "u2", "cooking", 1578049200),  # ISO 8601 with an offset
    }
    assert titles(folk) == {"u1": "Python docs", "u2": "Recipes, quick"}  # first non-empty
    assert categories(folk) == {"u1": {"programming", "docs"}, "u2": {"food"}}


def test_table_tsv_without_time() -> None:
    folk = load_table(FIXTURES / "tables" / "assignments.tsv",
                      columns={"user": "user_id", "object": "object_id", "tag": "tag"},
                      text_columns={"title": "title"}, name="jazz")
    assert folk.name == "jazz"
    # The row with an empty tag is dropped; ids are opaque strings, even when numeric.
    assert rows(folk) == {("1", "10", "jazz", MISSING_TIME), ("2", "10", "modal", MISSING_TIME),
                          ("1", "11", "jazz", MISSING_TIME)}
    assert titles(folk) == {"10": "Kind of Blue", "11": "A Love Supreme"}


def test_table_parquet(tmp_path: Path) -> None:
    frame = pd.DataFrame({
        "u": [1, 1, 2],
        "o": ["a", "b", "a"],
        "t": ["x", "y", "x"],
        "when": pd.to_datetime(["2020-01-01", "2020-01-02", None]),
        "desc": [None, "B text", "A text"],
        "cats": ["k1;k2", None, "k3"],
        "unused": [0.5, 0.5, 0.5],
    })
    path = tmp_path / "table.parquet"
    frame.to_parquet(path)
    folk = load_table(path, {"user": "u", "object": "o", "tag": "t", "timestamp": "when"},
                      text_columns={"description": "desc"}, category_column="cats",
                      category_separator=";")
    # An integer id column gives the ids' decimal digits, as a text file would.
    assert rows(folk) == {("1", "a", "x", 1577836800), ("1", "b", "y", 1577923200),
                          ("2", "a", "x", MISSING_TIME)}
    assert dict(zip(folk.objects, folk.texts["description"], strict=True)) == {
        "a": "A text", "b": "B text"}
    assert categories(folk) == {"a": {"k1", "k2"}}


def test_table_sep_and_format_override(tmp_path: Path) -> None:
    path = tmp_path / "export.txt"
    path.write_text("u;o;t\n1;2;x\n1;3;y\n")
    folk = load_table(path, {"user": "u", "object": "o", "tag": "t"}, sep=";", format="csv")
    assert rows(folk) == {("1", "2", "x", MISSING_TIME), ("1", "3", "y", MISSING_TIME)}
    with pytest.raises(ValueError, match="format"):
        load_table(tmp_path / "export.json", {"user": "u", "object": "o", "tag": "t"})
    with pytest.raises(ValueError, match="missing"):
        load_table(path, {"user": "u", "object": "o"}, sep=";", format="csv")


def test_table_crlf_bom_blank_lines_and_gzip(tmp_path: Path) -> None:
    import gzip

    text = "\ufeffuser\titem\ttag\r\n1\t2\tx\r\n\r\n1\t3\ty\r\n"
    plain = tmp_path / "windows.tsv"
    plain.write_bytes(text.encode("utf-8"))
    packed = tmp_path / "windows.tsv.gz"
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    columns = {"user": "user", "object": "item", "tag": "tag"}
    for path in (plain, packed):
        folk = load_table(path, columns)
        assert folk.name == "windows"
        assert rows(folk) == {("1", "2", "x", MISSING_TIME), ("1", "3", "y", MISSING_TIME)}


def test_unknown_tag_id_dropped_with_warning(tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    folder = copy_folder("hetrec2011-lastfm-2k", tmp_path)
    with (folder / "user_taggedartists.dat").open("a") as handle:
        handle.write("3\t52\t9999\t1\t1\t2010\n")
    with caplog.at_level(logging.WARNING):
        folk = load_lastfm(path=folder)
    assert folk.n_assignments == 6
    assert "1 rows refer to a tag id that is not in" in caplog.text


# ---------------------------------------------------------------- malformed input


#: A release's file replaced by a malformed one (a fixture of MALFORMED, or text): the loader's
#: error names that file and its line, and says what was expected and what was found.
RELEASE_ERRORS = {
    "missing_column_via_loader": ("hetrec2011-lastfm-2k", load_lastfm, "user_taggedartists.dat",
                                  "missing_column.dat", 1, ("['tagID']", "'tag'", "header")),
    "wrong_field_count_quoted_csv": ("ml-csv", load_movielens_csv, "tags.csv",
                                     "wrong_field_count.csv", 3,
                                     ("4 comma-separated fields", "found 3 field")),
    "invalid_date": ("hetrec2011-lastfm-2k", load_lastfm, "user_taggedartists.dat",
                     "bad_date.dat", 3, ("valid calendar date", "day=31")),
    "duplicate_tag_id": ("hetrec2011-lastfm-2k", load_lastfm, "tags.dat",
                         "duplicate_id_tags.dat", 4,
                         ("unique values in column 'tagID'", "1 again (first on line 2)")),
    "non_integer_timestamp_csv": ("ml-csv", load_movielens_csv, "tags.csv",
                                  "userId,movieId,tag,timestamp\n2,60756,funny,1445714994\n"
                                  "2,60756,odd,yesterday\n", 3,
                                  ("an integer in column 'timestamp'", "'yesterday'")),
}


@pytest.mark.parametrize("case", sorted(RELEASE_ERRORS))
def test_malformed_file_in_a_release(tmp_path: Path, case: str) -> None:
    release, load, file, malformed, line, expected = RELEASE_ERRORS[case]
    folder = copy_folder(release, tmp_path)
    bad = folder / file
    if (MALFORMED / malformed).is_file():
        shutil.copy(MALFORMED / malformed, bad)
    else:
        bad.write_text(malformed)
    with pytest.raises(DataFormatError) as info:
        load(path=folder)
    assert_error(info, bad, line, *expected)


def test_non_integer_id_line_counts_blank_lines() -> None:
    path = MALFORMED / "non_integer.dat"
    with pytest.raises(DataFormatError) as info:
        read_delimited(path, "\t", LASTFM_HEADER, integer=LASTFM_HEADER)
    assert_error(info, path, 4, "an integer in column 'artistID'", "'x52'")


def test_empty_file() -> None:
    path = MALFORMED / "empty.dat"
    with pytest.raises(DataFormatError) as info:
        read_delimited(path, "\t", LASTFM_HEADER)
    assert_error(info, path, 1, "header line", "empty file")


def test_header_only() -> None:
    path = MALFORMED / "header_only.dat"
    with pytest.raises(DataFormatError) as info:
        read_delimited(path, "\t", LASTFM_HEADER)
    assert_error(info, path, 2, "data rows")


@pytest.mark.parametrize(("name", "line", "found"), [
    ("too_many_fields.dat", 4, "found 7 field"),
    ("too_few_fields.dat", 3, "found 5 field"),
])
def test_wrong_field_count(name: str, line: int, found: str) -> None:
    path = MALFORMED / name
    with pytest.raises(DataFormatError) as info:
        read_delimited(path, "\t", LASTFM_HEADER, integer=LASTFM_HEADER)
    assert_error(info, path, line, "6 tab-separated fields", found)


def test_table_errors(tmp_path: Path) -> None:
    columns = {"user": "user", "object": "item", "tag": "tag", "timestamp": "time"}
    path = tmp_path / "bad.csv"
    path.write_text("user,item,tag,time\na,b,c,2020-01-01\na,b,d,not a date\n")
    with pytest.raises(DataFormatError) as info:
        load_table(path, columns)
    assert_error(info, path, 3, "ISO 8601", "'not a date'")
    with pytest.raises(DataFormatError) as info:
        load_table(FIXTURES / "tables" / "assignments.csv", {**columns, "object": "object"})
    assert_error(info, FIXTURES / "tables" / "assignments.csv", 1, "['object']")
    bad_parquet = MALFORMED / "not_parquet.parquet"
    with pytest.raises(DataFormatError) as info:
        load_table(bad_parquet, columns)
    assert_error(info, bad_parquet, None, "a Parquet file")
    pq_path = tmp_path / "cols.parquet"
    pd.DataFrame({"user": [1], "item": [2]}).to_parquet(pq_path)
    with pytest.raises(DataFormatError) as info:
        load_table(pq_path, columns)
    assert_error(info, pq_path, None, "['tag', 'time']")
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_table(tmp_path / "absent.csv", columns)


# ---------------------------------------------------------------- real data

DATA_DIR = os.environ.get("TAGTORCH_DATA_DIR")
real_data = pytest.mark.skipif(
    not DATA_DIR, reason="set TAGTORCH_DATA_DIR to a folder with the HetRec 2011 files")


def real_folder(name: str) -> Path:
    folder = Path(DATA_DIR or "") / name
    if not folder.is_dir():
        pytest.skip(f"{folder} is not there")
    return folder


@real_data
def test_real_lastfm() -> None:
    real_folder("hetrec2011-lastfm-2k")
    start = time.perf_counter()
    folk = load_lastfm(download=False)
    elapsed = time.perf_counter() - start
    assert elapsed < 10
    assert folk.n_assignments == 186_479  # the file has no duplicate (user, artist, tag)
    assert folk.n_users == 1_892
    assert folk.n_objects == 12_523 and folk.n_tags == 9_749
    names = titles(folk)
    assert names[707] == "Metallica" and names[52] == "Morcheeba"
    assert sum(1 for t in names.values() if t == "") == 390  # tagged, not in artists.dat
    tags = set(folk.tags.tolist())
    assert {"rock français", "tropicália", "die Ärzte", "legião urbana"} <= tags  # Latin-1
    assert names[18] == "The Crüxshadows" and names[64] == "Röyksopp"  # UTF-8 names
    assert len(folk.categories) == 0
    times = folk.assignments["timestamp"].to_numpy()
    assert (times != MISSING_TIME).all()
    first = folk.assignments[(folk.users[folk.assignments["user"]] == 2)
                             & (folk.objects[folk.assignments["object"]] == 52)]
    assert set(first["timestamp"]) == {1238536800}  # the readme's 1238536800000 ms


@real_data
def test_real_movielens_2k(tmp_path: Path) -> None:
    folder = real_folder("hetrec2011-movielens-2k")
    folk = load_movielens_2k(download=False)
    assert folk.n_assignments == 47_957  # no duplicate (user, movie, tag) rows
    assert folk.n_users == 2_113
    assert folk.n_objects == 5_908 and folk.n_tags == 9_079
    names = titles(folk)
    assert names[1] == "Toy story"
    assert (folk.texts["title"] != "").all()
    assert len(folk.category_names) == 19  # 20 genres; "Short" is on no tagged movie
    assert {"Drama", "Comedy", "Film-Noir", "IMAX"} <= set(folk.category_names.tolist())
    assert categories(folk)[1] >= {"Adventure", "Animation", "Children", "Comedy"}
    assert "a mão de deus" in set(folk.tags.tolist())  # Latin-1 decoded
    assert "Les misérables" in set(names.values())
    # The date columns, read as Madrid local time, reproduce the timestamps file.
    for name in ("user_taggedmovies.dat", "tags.dat", "movies.dat", "movie_genres.dat"):
        shutil.copy(folder / name, tmp_path / name)
    from_dates = load_movielens_2k(path=tmp_path)
    pd.testing.assert_frame_equal(from_dates.assignments, folk.assignments)


# ---------------------------------------------------------------- issue 14: hardening

COLUMNS = {"user": "user", "object": "item", "tag": "tag"}


def test_table_one_latin1_byte_is_an_error_naming_file_line_and_byte(tmp_path: Path) -> None:
    # UTF-8 file with a single Latin-1 byte on line 3: before, the whole file was read as
    # Latin-1 and "café" on line 2 became "cafÃ©", a second tag.
    path = tmp_path / "mixed.csv"
    path.write_bytes("user,item,tag\nu1,o1,café\n".encode() + b"u2,o1,caf\xe9\n")
    with pytest.raises(DataFormatError) as info:
        load_table(path, COLUMNS)
    assert_error(info, path, 3, "utf-8", "0xe9")


def test_table_encoding_option(tmp_path: Path) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes("user,item,tag\nu1,o1,café\nu2,o1,naïve\n".encode("latin-1"))
    folk = load_table(path, COLUMNS, encoding="latin-1")
    assert folk.tags.tolist() == ["café", "naïve"]
    utf16 = tmp_path / "wide.tsv"
    utf16.write_bytes("user\titem\ttag\nu1\to1\tcafé\n".encode("utf-16"))
    assert load_table(utf16, COLUMNS, encoding="utf-16").tags.tolist() == ["café"]
    with pytest.raises(ValueError, match=r"encoding.*'no-such-codec'"):
        load_table(path, COLUMNS, encoding="no-such-codec")


def test_table_ids_are_opaque_strings(tmp_path: Path) -> None:
    path = tmp_path / "padded.tsv"
    path.write_text("user\titem\ttag\n007\t0123\tx\n7\t123\ty\n 7 \t123\tz\n")
    folk = load_table(path, COLUMNS)
    # 007 and 7 are two users, 0123 and 123 two objects; surrounding blanks are not part of
    # an id.
    assert rows(folk) == {("007", "0123", "x", MISSING_TIME), ("7", "123", "y", MISSING_TIME),
                          ("7", "123", "z", MISSING_TIME)}
    assert folk.n_users == 2 and folk.n_objects == 2


def test_table_integer_ids_option(tmp_path: Path) -> None:
    path = tmp_path / "numbers.tsv"
    path.write_text("user\titem\ttag\n007\t0123\tx\n7\t123\ty\n")
    folk = load_table(path, COLUMNS, integer_ids=True)
    assert rows(folk) == {(7, 123, "x", MISSING_TIME), (7, 123, "y", MISSING_TIME)}
    path.write_text("user\titem\ttag\n7\t123\tx\n7\tabc\ty\n")
    with pytest.raises(DataFormatError) as info:
        load_table(path, COLUMNS, integer_ids=True)
    assert_error(info, path, 3, "an integer in column 'item'", "'abc'")


def test_table_two_keys_on_one_column_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("user,item,tag\nu1,o1,x\n")
    with pytest.raises(ValueError, match=r"'user' and 'object'.*'item'"):
        load_table(path, {"user": "item", "object": "item", "tag": "tag"})


def test_parquet_list_tags_exploded(tmp_path: Path) -> None:
    path = tmp_path / "lists.parquet"
    pd.DataFrame({
        "user": ["u1", "u2", "u3", "u4"],
        "item": ["a", "a", "b", "b"],
        "tag": [["ambient", "chill"], ["ambient"], [], None],
        "genre": [["Electronic", "Downtempo"], None, ["Rock"], None],
    }).to_parquet(path)
    folk = load_table(path, COLUMNS, category_column="genre")
    assert rows(folk) == {("u1", "a", "ambient", MISSING_TIME), ("u1", "a", "chill", MISSING_TIME),
                          ("u2", "a", "ambient", MISSING_TIME)}
    assert "['ambient']" not in folk.tags.tolist()
    assert categories(folk) == {"a": {"Electronic", "Downtempo"}}  # b has no tag left


@pytest.mark.parametrize(("column", "values", "expected"), [
    ("tag", [[["a"]], [["nested"]]], "a tag or a list of tags in column 'tag'"),
    ("tag", [b"x", b"y"], "a tag or a list of tags in column 'tag'"),
    ("tag", [[1.5], [2.5]], "a tag or a list of tags in column 'tag'"),
    ("user", [["u0"], ["u1", "u2"]], "a single id in column 'user'"),
    ("item", [True, False], "a text or integer id in column 'item'"),
])
def test_parquet_non_scalar_values_refused(tmp_path: Path, column: str, values: list[object],
                                           expected: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data: dict[str, list[object]] = {"user": ["u0", "u1"], "item": ["a", "a"], "tag": ["x", "y"]}
    data[column] = values
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({name: pa.array(v) for name, v in data.items()}), path)
    with pytest.raises(DataFormatError) as info:
        load_table(path, COLUMNS)
    message = str(info.value)
    assert message.startswith(f"{path}, row 1: expected {expected}"), message


def test_table_with_no_usable_row_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "blank_tags.tsv"
    path.write_text("user\titem\ttag\nu1\to1\t \nu2\t\tx\n")
    with pytest.raises(DataFormatError) as info:
        load_table(path, COLUMNS)
    assert_error(info, path, None, "a user, an object and a non-empty tag")


@pytest.mark.parametrize("compress", ["gzip", "bz2", "xz"])
def test_compression_detected_from_magic_bytes(tmp_path: Path, compress: str) -> None:
    import bz2
    import gzip
    import lzma

    pack = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[compress]
    path = tmp_path / "posts.csv"  # compressed, but named .csv
    path.write_bytes(pack(b"user,item,tag\nu1,o1,x\nu1,o2,y\n"))
    assert rows(load_table(path, COLUMNS)) == {("u1", "o1", "x", MISSING_TIME),
                                               ("u1", "o2", "y", MISSING_TIME)}


def test_truncated_gzip_and_zip_named_csv(tmp_path: Path) -> None:
    import gzip
    import zipfile

    path = tmp_path / "cut.csv"
    path.write_bytes(gzip.compress(b"user,item,tag\n" + b"u1,o1,x\n" * 1000)[:60])
    with pytest.raises(DataFormatError) as info:
        load_table(path, COLUMNS)
    assert_error(info, path, None, "gzip")
    zipped = tmp_path / "archive.csv"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("posts.csv", "user,item,tag\nu1,o1,x\n")
    with pytest.raises(DataFormatError) as info:
        load_table(zipped, COLUMNS)
    assert_error(info, zipped, None, "zip archive")


def test_hetrec_compressed_file_read(tmp_path: Path) -> None:
    import gzip

    folder = copy_folder("hetrec2011-lastfm-2k", tmp_path)
    tags = folder / "tags.dat"
    tags.write_bytes(gzip.compress(tags.read_bytes()))
    assert load_lastfm(path=folder).n_assignments == 6


@pytest.mark.parametrize("value", ["9223372036854775808", "-9223372036854775809",
                                   "18446744073709551616", "99999999999999999999999"])
def test_hetrec_id_above_int64_names_file_and_line(tmp_path: Path, value: str) -> None:
    folder = copy_folder("hetrec2011-lastfm-2k", tmp_path)
    bad = folder / "user_taggedartists.dat"
    with bad.open("a") as handle:
        handle.write(f"3\t{value}\t15\t1\t1\t2010\n")
    with pytest.raises(DataFormatError) as info:
        load_lastfm(path=folder)
    assert_error(info, bad, 9, "an integer in column 'artistID' within the signed 64-bit range",
                 repr(value))


def test_int64_limits_accepted(tmp_path: Path) -> None:
    folder = copy_folder("hetrec2011-lastfm-2k", tmp_path)
    with (folder / "user_taggedartists.dat").open("a") as handle:
        handle.write("9223372036854775807\t-9223372036854775808\t15\t1\t1\t2010\n")
    folk = load_lastfm(path=folder)
    assert (9223372036854775807, -9223372036854775808, "Hard Rock",
            1262300400) in rows(folk)


def test_non_ascii_digits_are_not_integers(tmp_path: Path) -> None:
    folder = copy_folder("hetrec2011-lastfm-2k", tmp_path)
    bad = folder / "user_taggedartists.dat"
    with bad.open("a") as handle:
        handle.write("3\t\u0663\t15\t1\t1\t2010\n")  # ARABIC-INDIC DIGIT THREE
    with pytest.raises(DataFormatError) as info:
        load_lastfm(path=folder)
    assert_error(info, bad, 9, "integer in column 'artistID'")


def test_movielens_csv_id_above_int64(tmp_path: Path) -> None:
    folder = tmp_path / "release"
    shutil.copytree(FIXTURES / "ml-csv", folder)
    bad = folder / "tags.csv"
    bad.write_text("userId,movieId,tag,timestamp\n2,60756,funny,1445714994\n"
                   "2,9223372036854775808,odd,1445714994\n")
    with pytest.raises(DataFormatError) as info:
        load_movielens_csv(path=folder)
    assert_error(info, bad, 3, "column 'movieId'", "9223372036854775808")


@pytest.mark.parametrize("value", ["inf", "1e400", "99999999999999999999"])
def test_table_timestamp_out_of_range(tmp_path: Path, value: str) -> None:
    path = tmp_path / "times.csv"
    path.write_text(f"user,item,tag,time\nu,o,x,1\nu,o,y,{value}\n")
    with pytest.raises(DataFormatError) as info:
        load_table(path, {**COLUMNS, "timestamp": "time"})
    assert_error(info, path, 3, "column 'time'", value)


def _deny(self: Path, *args: object, **kwargs: object) -> None:
    raise PermissionError(13, "Permission denied", str(self))


@pytest.mark.parametrize("loader", ["table", "parquet", "lastfm", "movielens_csv"])
def test_permission_error_names_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         loader: str) -> None:
    if loader == "table":
        path = tmp_path / "t.csv"
        path.write_text("user,item,tag\nu1,o1,x\n")
        call = partial(load_table, path, COLUMNS)
    elif loader == "parquet":
        path = tmp_path / "t.parquet"
        pd.DataFrame({"user": ["u"], "item": ["o"], "tag": ["x"]}).to_parquet(path)
        call = partial(load_table, path, COLUMNS)
    elif loader == "lastfm":
        folder = copy_folder("hetrec2011-lastfm-2k", tmp_path)
        path = folder / "user_taggedartists.dat"
        call = partial(load_lastfm, path=folder)
    else:
        folder = tmp_path / "release"
        shutil.copytree(FIXTURES / "ml-csv", folder)
        path = folder / "tags.csv"
        call = partial(load_movielens_csv, path=folder)
    real_open = Path.open

    def guarded_open(self: Path, *args: object, **kwargs: object) -> object:
        if self == path:
            _deny(self)
        return real_open(self, *args, **kwargs)

    import builtins

    real_builtin_open = builtins.open

    def guarded_builtin_open(file: object, *args: object, **kwargs: object) -> object:
        if str(file) == str(path):
            _deny(Path(str(file)))
        return real_builtin_open(file, *args, **kwargs)

    monkeypatch.setattr(Path, "open", guarded_open)
    monkeypatch.setattr(builtins, "open", guarded_builtin_open)
    with pytest.raises(PermissionError) as info:
        call()
    message = str(info.value)
    assert message.startswith(str(path)) and "permission denied" in message
    assert "\n" not in message


# ---------------------------------------------------------------- per-file digests (real data)


def _zip_folder(folder: Path, zipped: Path, inner: str,
                changed: dict[str, bytes] | None = None) -> Path:
    import zipfile

    with zipfile.ZipFile(zipped, "w") as zf:
        for file in sorted(folder.iterdir()):
            data = (changed or {}).get(file.name, file.read_bytes())
            zf.writestr(f"{inner}/{file.name}", data)
    return zipped


@real_data
@pytest.mark.parametrize("archive_name", ["LASTFM_2K", "MOVIELENS_2K"])
def test_real_files_match_the_per_file_digests(archive_name: str) -> None:
    import hashlib

    from tagtorch.data.loaders import hetrec

    archive = getattr(hetrec, archive_name)
    folder = real_folder(archive.folder)
    # Every file of the unmodified local copy has its digest, computed independently here.
    assert {p.name for p in folder.iterdir()} == set(archive.file_sha256)
    for name, digest in archive.file_sha256.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name


@real_data
@pytest.mark.parametrize(("archive_name", "file"), [("MOVIELENS_2K", "movies.dat"),
                                                     ("LASTFM_2K", "tags.dat")])
def test_real_archive_tampered_file_caught(tmp_path: Path, archive_name: str,
                                          file: str) -> None:
    import dataclasses

    from tagtorch.data.download import ChecksumError, ensure_archive
    from tagtorch.data.loaders import hetrec

    archive = getattr(hetrec, archive_name)
    folder = real_folder(archive.folder)
    good = _zip_folder(folder, tmp_path / "good.zip", archive.folder)
    # No archive digest: only the per-file digests vouch for the copy.
    local = dataclasses.replace(archive, url=good.as_uri(), sha256=None)
    home = tmp_path / "home"
    assert ensure_archive(local, home, progress=False) == home / archive.folder
    data = bytearray((folder / file).read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit
    bad = _zip_folder(folder, tmp_path / "bad.zip", archive.folder, {file: bytes(data)})
    other = tmp_path / "other"
    with pytest.raises(ChecksumError) as info:
        ensure_archive(dataclasses.replace(local, url=bad.as_uri()), other, progress=False)
    assert file in str(info.value) and archive.file_sha256[file] in str(info.value)
    assert not other.exists()


@pytest.mark.parametrize("value", ["", "soon", "1.5e12"])
def test_hetrec_timestamps_file_non_integer(tmp_path: Path, value: str) -> None:
    # Found by tests/test_fuzz_loaders.py: a bad millisecond value was a raw ValueError.
    folder = copy_folder("hetrec2011-movielens-2k", tmp_path)
    bad = folder / "user_taggedmovies-timestamps.dat"
    bad.write_text(f"userID\tmovieID\ttagID\tunixTimeStamp\n75\t353\t5290\t1162160415000\n"
                   f"78\t4223\t7774\t{value}\n")
    with pytest.raises(DataFormatError) as info:
        load_movielens_2k(path=folder)
    assert_error(info, bad, 3, "an integer in column 'unixTimeStamp'")


@pytest.mark.parametrize(("year", "day"), [("1", "29"), ("2262", "1"), ("99999999999", "1"),
                                           ("2008", "-1")])
def test_hetrec_date_out_of_range(tmp_path: Path, year: str, day: str) -> None:
    # Found by tests/test_fuzz_loaders.py: year 1 was a raw OutOfBoundsDatetime.
    folder = copy_folder("hetrec2011-movielens-2k", tmp_path)
    (folder / "user_taggedmovies-timestamps.dat").unlink()
    bad = folder / "user_taggedmovies.dat"
    bad.write_text("userID\tmovieID\ttagID\tdate_day\tdate_month\tdate_year\tdate_hour\t"
                   "date_minute\tdate_second\n75\t353\t5290\t29\t10\t2006\t23\t20\t15\n"
                   f"78\t1\t1\t{day}\t10\t{year}\t23\t20\t15\n")
    with pytest.raises(DataFormatError) as info:
        load_movielens_2k(path=folder)
    assert_error(info, bad, 3, "a valid calendar date and time", f"date_year={year}")


def test_movielens_csv_gzip_named_csv_and_latin1_byte(tmp_path: Path) -> None:
    import gzip

    folder = tmp_path / "release"
    shutil.copytree(FIXTURES / "ml-csv", folder)
    expected = rows(load_movielens_csv(path=folder))
    tags = folder / "tags.csv"
    original = tags.read_bytes()
    tags.write_bytes(gzip.compress(original))
    assert rows(load_movielens_csv(path=folder)) == expected
    tags.write_bytes(original + b"18,431,Pacino \xe0 la folie,1462138801\n")
    with pytest.raises(DataFormatError) as info:
        load_movielens_csv(path=folder)
    assert_error(info, tags, 8, "utf-8", "0xe0")


def test_movielens_csv_without_a_tag_names_the_file(tmp_path: Path) -> None:
    # Found by tests/test_fuzz_loaders.py: only empty tags was a bare "no tag assignments".
    folder = tmp_path / "release"
    shutil.copytree(FIXTURES / "ml-csv", folder)
    bad = folder / "tags.csv"
    bad.write_text("userId,movieId,tag,timestamp\n0,60756,,1445714994\n2,431, ,1445714995\n")
    with pytest.raises(DataFormatError) as info:
        load_movielens_csv(path=folder)
    assert_error(info, bad, None, "at least one row with a non-empty tag", "none")


def test_undecodable_byte_line_counts_lone_cr_and_plain_gz_read(tmp_path: Path) -> None:
    path = tmp_path / "mac.tsv"
    path.write_bytes(b"user\titem\ttag\ru1\to1\tx\r\nu2\to1\ty\ru3\to1\t\xff\n")
    with pytest.raises(DataFormatError) as info:
        load_table(path, COLUMNS)
    assert_error(info, path, 4, "0xff")
    plain = tmp_path / "plain.tsv.gz"  # not compressed, whatever the name says
    plain.write_bytes(b"user\titem\ttag\ru1\to1\tx\r\nu2\to1\ty\r")
    assert rows(load_table(plain, COLUMNS)) == {("u1", "o1", "x", MISSING_TIME),
                                                ("u2", "o1", "y", MISSING_TIME)}


# ---------------------------------------------------------------- header-less, lists, encoding


def test_a_headerless_table_with_list_valued_tags_reads_like_tagrec(tmp_path, caplog):
    """Positions instead of names, list_sep and url_decode; each against hand-made rows."""
    path = tmp_path / "posts.csv"
    path.write_text('"u1";"r1";"100";"java,EJB,c%252b%252b";"net,web"\n'
                    '"u2";"r2";"";"jazz";""\n')
    columns = {"user": 0, "object": 1, "tag": 3, "timestamp": 2}
    folk = load_table(path, columns, category_column=4, sep=";", header=False,
                         list_sep=",", url_decode=True)
    rows = {(folk.users[u], folk.objects[o], folk.tags[t])
            for u, o, t, _ in folk.assignments.itertuples(index=False)}
    assert rows == {("u1", "r1", "java"), ("u1", "r1", "EJB"), ("u1", "r1", "c++"),
                    ("u2", "r2", "jazz")}
    assert sorted(folk.category_names) == ["net", "web"]
    with caplog.at_level("WARNING"):
        whole = load_table(path, columns, sep=";", header=False)
    assert whole.n_tags == 2  # each list one tag: the trap the warnings name
    assert "data.list_sep=','" in caplog.text and "data.url_decode=true" in caplog.text
    with pytest.raises(ValueError, match="0-based positions"):
        load_table(path, {"user": "user", "object": 1, "tag": 3}, sep=";", header=False)


BIG_FIELD = "x" * (140 * 1024)  # over the csv module's field size limit (128 KiB)


@pytest.mark.parametrize(("text", "options"), [
    (f'user,object,"{BIG_FIELD}"\nu,o,t\n', {}),
    (f'u,o,"{BIG_FIELD}"\n', {"header": False}),
], ids=["header", "headerless"])
def test_a_field_over_128_kib_on_line_1_is_a_located_error(tmp_path: Path, text: str,
                                                           options: dict) -> None:
    """Hostile use, round three: csv's field_size_limit raised a raw _csv.Error."""
    path = tmp_path / "big.csv"
    path.write_text(text)
    columns = {"user": 0, "object": 1, "tag": 2} if options else {
        "user": "user", "object": "object", "tag": "tag"}
    with pytest.raises(DataFormatError, match=rf"^{path}, line 1: expected fields of at most "
                                              r"131,072 characters"):
        load_table(path, columns, **options)


def test_a_headerless_position_beyond_the_lines_fields_is_a_located_error(tmp_path: Path
                                                                         ) -> None:
    """Hostile use, round three: position 3 of two-field lines was a raw KeyError '3'."""
    path = tmp_path / "short.tsv"
    path.write_text("u\tr\nu2\tr2\n")
    with pytest.raises(DataFormatError, match=rf"^{path}, line 1: expected a field at the "
                                              r"0-based position\(s\) \['3'\].*found 2 field"):
        load_table(path, {"user": 0, "object": 1, "tag": 3}, header=False)


def plain_line_layout(content: str, sep: str) -> tuple[list[int], list[bool]]:
    """Per line (split on ``\\n``, a final empty piece dropped): separators, and blank or not."""
    lines = content.split("\n")
    if lines[-1] == "":
        lines = lines[:-1]
    whitespace = set(" \t\r") - {sep}  # pandas' blanks: a line of \x0b or \x0c is a row
    return [line.count(sep) for line in lines], [set(line) <= whitespace for line in lines]


@pytest.mark.parametrize("sep", [";", ",", "\t", " ", "|", "\u00a7"])
def test_the_line_layout_of_any_text_equals_a_line_by_line_count(sep):
    """The vectorized layout (UTF-8 bytes for an ASCII separator) against a plain loop."""
    rng = np.random.default_rng(0)
    alphabet = [*"ab;,\t \n\r\x0b\x0c|\u00a7\u00e9\u2028\u00a0", "\U0001f600"]
    for _ in range(2000):
        text = "".join(rng.choice(alphabet, size=int(rng.integers(0, 30))))
        counts, blank = _line_layout(text, sep)
        assert (counts.tolist(), blank.tolist()) == plain_line_layout(text, sep), repr(text)


def test_control_characters_in_tags_load_replaced_with_one_warning_and_write_back(
        tmp_path: Path) -> None:
    """Issue 71: MovieLens-20M's tags.csv holds U+008F. Every loader keeps such a file: each
    control character or line separator in a tag becomes U+FFFD, with one warning counting the
    assignments (other odd Unicode, a bidi override or a zero-width space, is data and kept),
    and the folksonomy written as TagRec's file reads back with the same tags."""
    from tagtorch.data.loaders.tagrec import load_tagrec, write_tagrec

    folder = tmp_path / "release"
    shutil.copytree(FIXTURES / "ml-csv", folder)
    odd = {"sci\u008ffi": "sci\ufffdfi", "a\u2028b": "a\ufffdb", "p\u2029q": "p\ufffdq",
           "x\x1b[31m": "x\ufffd[31m", "nel\u0085x": "nel\ufffdx", "del\x7fx": "del\ufffdx",
           "bidi\u202ex": "bidi\u202ex", "zw\u200bx": "zw\u200bx", "sci\u0090fi": "sci\ufffdfi"}
    with (folder / "tags.csv").open("a", encoding="utf-8") as tags:
        tags.writelines(f'18,431,"{tag}",{1462138900 + i}\n' for i, tag in enumerate(odd))
    with pytest.warns(UserWarning, match=r"7 tag assignment\(s\) hold control characters"):
        folk = load_movielens_csv(path=folder)
    assert set(odd.values()) <= set(folk.tags.tolist())
    assert len(folk.tags) == 6 + len(set(odd.values()))  # the two sci-fi tags are one
    with pytest.warns(UserWarning, match="7 tag assignment"):
        table = load_table(folder / "tags.csv", columns={"user": "userId", "object": "movieId",
                                                         "tag": "tag"})
    assert sorted(table.tags) == sorted(folk.tags)
    back = load_tagrec(write_tagrec(folk, tmp_path / "x.txt"), lowercase=False,
                       integer_ids=True)
    assert sorted(back.tags) == sorted(folk.tags)
