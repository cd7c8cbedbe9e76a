"""TagRec's format in and out (tagtorch/data/loaders/tagrec.py).

References: hand-written lines and their expected assignments; the counts of a careful
conversion of the public TagRec samples (../shared/data/README.md: trimmed, lower-cased,
duplicates in a post dropped); Python's own ``urllib.parse.unquote`` for the decoding; and a
hypothesis round trip: any folksonomy written as TagRec files reads back with the same
fingerprint. Damaged files fail with a DataFormatError naming the file and line.
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
from pathlib import Path
from urllib.parse import quote, unquote

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_loaders import FUZZ, check_outcome, weird_text

from tagtorch.data.folksonomy import MISSING_TIME, SOURCE_ORDER, Folksonomy
from tagtorch.data.loaders import tagrec
from tagtorch.data.loaders.reading import decode_percent
from tagtorch.data.loaders.tagrec import (
    given_test_posts,
    last_post_per_user,
    load_tagrec,
    tagrec_posts,
    write_tagrec,
    write_tagrec_split,
)
from tagtorch.errors import DataFormatError

LINES = ['"u1";"r1";"100";"Java, EJB ,java,,c%252b%252b";"networks_0.6893,Social_0.19"',
         '"u2";"r1";"";"ejb";""',
         '"u1";"r2";"200";"x;y";"tagging"']



@pytest.fixture(autouse=True, params=[None, 7], ids=["one-chunk", "7-byte-pieces"])
def _chunks(request, monkeypatch):
    """Every test twice: a file in one chunk, and in 7-byte pieces (a chunk a line or so).

    The expected values are the hand-written ones either way: reading in chunks must change
    nothing, line numbers in errors included.
    """
    if request.param is not None:
        monkeypatch.setitem(globals(), "load_tagrec",
                            functools.partial(tagrec.load_tagrec, chunk_bytes=request.param))


def content(folk: Folksonomy) -> str:
    """The fingerprint without the file's line order (which TagRec-read data keeps)."""
    kept = folk.assignments.drop(columns=[SOURCE_ORDER], errors="ignore")
    bare = folk.untagged_posts.drop(columns=[SOURCE_ORDER], errors="ignore")
    return dataclasses.replace(folk, assignments=kept, untagged_posts=bare).fingerprint()

def test_posts_are_split_trimmed_lower_cased_decoded_and_deduplicated(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("\n".join(LINES) + "\n")
    folk = load_tagrec(path)
    rows = {(folk.users[u], folk.objects[o], folk.tags[t], s)
            for u, o, t, s in folk.assignments[["user", "object", "tag", "timestamp"]
                                               ].itertuples(index=False)}
    # each assignment's place in the file, line by line (c++ and ejb of line 1, ...)
    assert folk.assignments[SOURCE_ORDER].is_unique
    assert rows == {("u1", "r1", "java", 100), ("u1", "r1", "ejb", 100),
                    ("u1", "r1", "c++", 100), ("u2", "r1", "ejb", MISSING_TIME),
                    ("u1", "r2", "x;y", 200)}
    cats = {(folk.objects[o], folk.category_names[c], w)
            for o, c, w in folk.categories.itertuples(index=False)}
    assert {(o, c) for o, c, _ in cats} == {("r1", "networks"), ("r1", "social"),
                                           ("r2", "tagging")}
    weights = {c: w for _, c, w in cats}
    assert weights["networks"] == 0.6893 and np.isnan(weights["tagging"])
    kept = load_tagrec(path, url_decode=False, lowercase=False)
    assert {"Java", "c%252b%252b"} <= set(kept.tags)


@pytest.mark.parametrize("text", ["c%252b%252b", "%2525", "a%2Cb", "100%", "%zz", "%e9",
                                  "caf%C3%A9", "plain"])
def test_decoding_repeats_python_unquote_until_nothing_changes(text):
    expected = text
    while True:
        try:
            step = unquote(expected, errors="strict")
        except UnicodeDecodeError:
            break
        if step == expected:
            break
        expected = step
    assert decode_percent(text) == expected


@pytest.mark.parametrize("content, line", [
    ('"u";"r";"1"\n', 1),                                # 3 fields
    ('"u";"r";"1";"a";""\n"u";"r";"1";"a"\n', 2),        # another width
    ('"u";"r";"yesterday";"a";""\n', 1),                  # not seconds
    ('"u";"r";"1";"a";""\n"u";"r;"1";"a";""\n', 2),      # a broken quote
])
def test_damaged_files_name_the_file_and_line(tmp_path, content, line):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(DataFormatError) as caught:
        load_tagrec(path)
    assert str(caught.value).startswith(f"{path}, line {line}: expected ")


SAMPLES = {"bib_sample_test": (5488, 21305), "cul_sample_test": (8322, 25795),
           "flickr_sample_test": (9590, 28801)}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_public_samples_load_with_a_careful_conversions_counts(data_dir, name, tmp_path):
    path = data_dir / "tagrec-samples" / f"{name}.txt"
    if not path.is_file():
        pytest.skip(f"{path} is not there")
    # the samples are a megabyte or so: the pieces run cuts them every 4 KiB (hundreds of cuts;
    # 7-byte pieces took 24-43 s a file)
    load = (functools.partial(tagrec.load_tagrec, chunk_bytes=4096)
            if isinstance(load_tagrec, functools.partial) else load_tagrec)
    folk = load(path)
    posts = folk.assignments.groupby(["user", "object", "timestamp"]).ngroups
    assert (posts, folk.n_assignments) == SAMPLES[name]
    assert not any("%" in tag and decode_percent(tag) != tag for tag in folk.tags)
    assert all(tag == tag.strip().lower() for tag in folk.tags)
    write_tagrec(folk, tmp_path / "back.txt")
    assert content(load(tmp_path / "back.txt", name=folk.name)) == content(folk)


def test_a_split_is_written_as_tagrecs_three_files(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("\n".join(LINES) + "\n")
    folk = load_tagrec(path)
    test = last_post_per_user(folk)
    posts = tagrec_posts(folk)
    assert posts.loc[test, "user"].map(lambda u: folk.users[u]).tolist() == ["u1"]
    assert posts.loc[test, "timestamp"].tolist() == [200]  # u1's latest post
    train, test_file, both = write_tagrec_split(folk, tmp_path / "split", "x", test)
    assert [p.name for p in (train, test_file, both)] == ["x_train.txt", "x_test.txt", "x.txt"]
    assert both.read_text() == train.read_text() + test_file.read_text()
    assert len(test_file.read_text().splitlines()) == 1
    assert content(load_tagrec(both, name=folk.name)) == content(folk)


# ---------------------------------------------------------------- round trip, fuzz

_TAG_CHARS = "abcxyz09 ,;\"'é+-_\u00df"
tags = st.text(alphabet=_TAG_CHARS, min_size=1, max_size=6).map(str.strip).filter(bool)
ids = st.text(alphabet="abc0129_-.", min_size=1, max_size=4)


@st.composite
def folksonomies(draw: st.DrawFn) -> Folksonomy:
    rows = draw(st.lists(st.tuples(ids, ids, tags, st.sampled_from([MISSING_TIME, 0, 5, -7,
                                                                       1_300_000_000])),
                         min_size=1, max_size=25))
    frame = pd.DataFrame(rows, columns=["user", "object", "tag", "timestamp"])
    # one time per post: a TagRec line holds one (the writer's is the earliest assignment's)
    frame["timestamp"] = frame.groupby(["user", "object"])["timestamp"].transform("first")
    objects = sorted(set(frame["object"]))
    texts = None
    if draw(st.booleans()):
        texts = pd.DataFrame({"title": [draw(st.text(alphabet=_TAG_CHARS, max_size=5))
                                        for _ in objects]}, index=objects)
    cats = [(o, draw(st.sampled_from(["genre", "net", "y"])),
             draw(st.sampled_from([0.5, 1.0, 0.6893]))) for o in objects if draw(st.booleans())]
    categories = pd.DataFrame(cats, columns=["object", "category", "weight"]) if cats else None
    return Folksonomy.from_frame(frame, texts, categories, name="fuzz")


@settings(FUZZ)
@given(folk=folksonomies())
def test_any_folksonomy_round_trips_through_tagrecs_files(folk):
    with tempfile.TemporaryDirectory() as tmp:
        path = write_tagrec(folk, Path(tmp) / "fuzz.txt")
        back = load_tagrec(path, name="fuzz", lowercase=False)
    assert content(back) == content(folk)


@settings(FUZZ)
@given(cells=st.lists(st.lists(weird_text | st.sampled_from(["1", "", "a,b", "x_0.5"]),
                               min_size=1, max_size=7), min_size=1, max_size=4),
       quoted=st.booleans())
def test_fuzz_tagrec_fails_only_with_a_located_format_error(cells, quoted):
    wrap = (lambda c: '"' + c + '"') if quoted else (lambda c: c)
    text = "\n".join(";".join(wrap(c) for c in row) for row in cells)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.txt"
        path.write_bytes(text.encode("utf-8", errors="replace"))
        check_outcome(lambda: load_tagrec(path), [path])


def test_quote_is_what_the_writer_decodes_back():
    assert decode_percent(quote("a,b;c", safe="")) == "a,b;c"


def _named_posts(folk):
    """Each post as (user id, resource id, earliest time, sorted tag strings), by a plain loop."""
    posts = {}
    for user, obj, tag, stamp in folk.assignments[["user", "object", "tag", "timestamp"]
                                                  ].itertuples(index=False):
        key = (str(folk.users[user]), str(folk.objects[obj]))
        time, tags = posts.get(key, (stamp, set()))
        posts[key] = (min(time, stamp), tags | {str(folk.tags[tag])})
    return {key: (time, sorted(tags)) for key, (time, tags) in posts.items()}


@pytest.mark.integration
def test_the_export_command_writes_files_that_load_back_the_same(tmp_path):
    import subprocess
    import sys

    import tagtorch as tt

    done = subprocess.run([sys.executable, "-m", "tagtorch.export", "tagrec", "synthetic",
                           str(tmp_path), "--name", "synth", "--option", "n_objects=200",
                           "--split", "leave_last"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(tmp_path / f"synth{s}.txt")
                                   for s in ("_train", "_test", "")]
    folk = tt.load("synthetic", n_objects=200)
    back = tt.load(tmp_path / "synth.txt", lowercase=False, integer_ids=True)  # by its look
    # a TagRec line is a post (user, resource) at its earliest time: the posts come back
    assert _named_posts(back) == _named_posts(folk)
    assert back.n_assignments == folk.n_assignments
    bad = subprocess.run([sys.executable, "-m", "tagtorch.export", "tagrec", "nothing",
                          str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.startswith("error: 'nothing' is neither")
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_given_split_is_kept_through_filters_and_written_back(tmp_path):
    """data.test_path marks the test file's posts; they survive select() and round-trip."""
    from tagtorch.data.splits import given_split

    train, test = tmp_path / "x_train.txt", tmp_path / "x_test.txt"
    train.write_text('"u1";"r1";"100";"a,b";""\n"u2";"r2";"110";"a";""\n'
                     '"u3";"r1";"120";"b";""\n')
    test.write_text('"u1";"r2";"200";"a,c";""\n"u3";"r3";"210";"c";""\n')
    folk = load_tagrec(train, test_path=test)
    assert folk.name == "x"
    marked = {(folk.users[u], folk.objects[o]) for u, o in folk.test_posts.itertuples(index=False)}
    assert marked == {("u1", "r2"), ("u3", "r3")}
    split = given_split(folk, val_fraction=0.5)
    a = folk.assignments
    by_part = {part: sorted({(folk.users[u], folk.objects[o])
                             for u, o in a.loc[mask, ["user", "object"]].itertuples(index=False)})
               for part, mask in (("train", split.train), ("val", split.val),
                                  ("test", split.test))}
    assert by_part == {"train": [("u1", "r1"), ("u2", "r2")], "val": [("u3", "r1")],
                       "test": [("u1", "r2"), ("u3", "r3")]}  # val: the latest of 3 others
    kept = folk.select((a["object"] != 2).to_numpy())  # r3 dropped: its test post goes too
    assert {(kept.users[u], kept.objects[o])
            for u, o in kept.test_posts.itertuples(index=False)} == {("u1", "r2")}
    paths = write_tagrec_split(folk, tmp_path / "out", "x", given_test_posts(folk))
    assert content(load_tagrec(paths[0], test_path=paths[1])) == content(folk)
    assert content(load_tagrec(paths[2])) != content(folk)  # no split marked


def test_lines_without_tags_are_kept_as_posts_in_place(tmp_path):
    """Issue 71: TagRec's reader keeps a line whose tag field is empty, and counts and scores
    it; tagtorch keeps it as an untagged post with its time and its place among the lines (a
    tagless line takes one place; a line's tags one each), a test one as a test post, and
    writes it back."""
    train, test = tmp_path / "x_train.txt", tmp_path / "x_test.txt"
    train.write_text('"u1";"r1";"100";"a,b";""\n"u2";"r9";"";"";""\n'
                     '"u3";"r1";"120";" , ";""\n"u2";"r2";"130";"a";""\n')
    test.write_text('"u1";"r2";"200";"";""\n"u4";"r3";"210";"c";""\n')
    folk = load_tagrec(train, test_path=test)
    bare = folk.untagged_posts.assign(user=folk.users[folk.untagged_posts["user"]],
                                      object=folk.objects[folk.untagged_posts["object"]])
    assert bare.sort_values(SOURCE_ORDER).values.tolist() == [
        ["u2", "r9", MISSING_TIME, 2], ["u3", "r1", 120, 3], ["u1", "r2", 200, 5]]
    places = folk.assignments.assign(tag=folk.tags[folk.assignments["tag"]])
    assert sorted(places[["tag", SOURCE_ORDER]].values.tolist()) == [
        ["a", 0], ["a", 4], ["b", 1], ["c", 6]]
    marked = {(folk.users[u], folk.objects[o]) for u, o in folk.test_posts.itertuples(index=False)}
    assert marked == {("u1", "r2"), ("u4", "r3")}
    assert "r9" in folk.objects and len(tagrec_posts(folk)) == 6
    paths = write_tagrec_split(folk, tmp_path / "out", "x", given_test_posts(folk))
    assert '"u1";"r2";"200";"";""' in paths[1].read_text()
    assert content(load_tagrec(paths[0], test_path=paths[1])) == content(folk)
    kept = folk.select((folk.assignments["user"] != 3).to_numpy())  # u4 goes, and u3, r9
    assert kept.users[kept.untagged_posts["user"]].tolist() == ["u1"]  # (no assignment left)


@pytest.mark.parametrize(("field", "expected"), [
    ('"-"', "within 64 bits"), ('"18446744073709551616"', "within 64 bits"),
    ('"9223372036854775808"', "within 64 bits"),  # 2^63: wrapped negative before
], ids=["dash", "two-to-the-64", "two-to-the-63"])
def test_a_timestamp_outside_64_bits_is_an_error_naming_the_line(tmp_path, field, expected):
    path = tmp_path / "t.txt"
    path.write_text('"u";"r";"5";"a"\n"u";"r2";' + field + ';"b"\n')
    with pytest.raises(DataFormatError, match=f"line 2.*{expected}"):
        load_tagrec(path)


def test_an_infinite_category_weight_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text('"u";"r";"5";"a";"net_0.5"\n"u";"r2";"6";"b";"net_1e999"\n')
    with pytest.raises(DataFormatError, match=r"line 2.*finite category weight"):
        load_tagrec(path)


@pytest.mark.parametrize(("tag", "kept"), [
    ("a%00b", "a\ufffdb"), ("x%1b[31m", "x\ufffd[31m"), ("y%E2%80%A8z", "y\ufffdz"),
    ("tab\tinside", "tab\ufffdinside"), ("raw\u2029para", "raw\ufffdpara"),
    ("sci\u008ffi", "sci\ufffdfi")], ids=["nul", "esc", "u2028", "tab", "u2029", "c1"])
def test_a_tag_with_a_control_character_is_kept_with_one_warning(tmp_path, tag, kept):
    """Issue 71: MovieLens-20M's tags hold U+008F, and TagRec reads such files: the file loads,
    each such character becomes U+FFFD, one warning counts the lines (issue 52: raw, they ended
    up in files tagtorch wrote); a file tagtorch writes from them loads back the same."""
    path = tmp_path / "t.txt"
    path.write_text('"u";"r";"5";"fine"\n"u";"r2";"6";"' + tag + ',' + tag + '"\n'
                    '"u2";"r3";"7";"' + tag + '"\n', encoding="utf-8")
    with pytest.warns(UserWarning, match=r"2 line\(s\) hold tags with control characters"):
        folk = load_tagrec(path, lowercase=False)
    assert sorted(folk.tags) == sorted(["fine", kept])
    assert (folk.assignments["tag"] == list(folk.tags).index(kept)).sum() == 2
    again = load_tagrec(write_tagrec(folk, tmp_path / "again.txt"), lowercase=False)
    assert sorted(again.tags) == sorted(folk.tags) and len(again.assignments) == 3


def test_nested_percent_encoding_is_decoded_a_bounded_number_of_times():
    """Issue 52: 200 kB of nested ``%25`` took 69 s (one linear round per level)."""
    from tagtorch.data.loaders.reading import DECODE_ROUNDS

    nested = "%" + "25" * 50_000 + "61"
    assert decode_percent(nested) == "%" + "25" * (50_000 - DECODE_ROUNDS) + "61"
    assert decode_percent("c%252b%252b") == "c++"  # the samples' double encoding still decodes


# Hostile use, round three: a file that looks like TagRec's but is not quite.
BIG_FIELD = "x" * (140 * 1024)  # over the csv module's field size limit (128 KiB)


@pytest.mark.parametrize("line", ['"u1";"r1";"tag1,tag2"',
                                  '"u1";"r1";"1";"a";"";"";"";"";"extra"'], ids=["3", "9"])
def test_a_tagrec_like_first_line_of_the_wrong_width_names_tagrecs_count(tmp_path, line):
    """tt.load sent these to the table reader, which complained of a missing header."""
    import tagtorch as tt

    path = tmp_path / "bib.txt"
    path.write_text(line + '\n"u2";"r2";"t"\n')
    count = line.count(";") + 1
    with pytest.raises(DataFormatError) as caught:
        tt.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path.resolve()}, line 1: expected TagRec's format")
    assert "4 to 8" in message and message.endswith(f"found {count} field(s)")
    assert "\n" not in message


@pytest.mark.parametrize("wrap", ["gzip", "bom"])
def test_a_compressed_or_marked_tagrec_file_is_recognised_by_its_content(tmp_path, wrap):
    """tt.load sniffed the raw first byte: a gzip or BOM-prefixed TagRec file went to tables."""
    import gzip

    import tagtorch as tt

    text = "\n".join(LINES) + "\n"
    path = tmp_path / "bib.txt"
    path.write_bytes(gzip.compress(text.encode()) if wrap == "gzip"
                     else b"\xef\xbb\xbf" + text.encode())
    plain = tmp_path / "plain.txt"
    plain.write_text(text)
    assert content(tt.load(path)) == content(load_tagrec(plain))


@pytest.mark.parametrize("lines", [[f'"u";"r";"1";"{BIG_FIELD}"'],
                                   [f'"u";"r";"1";"a";"{BIG_FIELD}"', '"u";"r2";"1";"b"']],
                         ids=["tags", "categories"])
def test_a_field_over_128_kib_on_line_1_is_an_error_naming_the_line(tmp_path, lines):
    """csv's field_size_limit raised a raw _csv.Error from load_tagrec and tt.load."""
    import tagtorch as tt

    path = tmp_path / "big.txt"
    path.write_text("\n".join(lines) + "\n")
    for load in (load_tagrec, tt.load):
        with pytest.raises(DataFormatError) as caught:
            load(path)
        message = str(caught.value)
        assert ", line 1: expected fields of at most 131,072 characters" in message
        assert str(path.name) in message and "\n" not in message


def plain_tag_rows(lines: list[str]) -> list[tuple[str, str, str]]:
    """``(user, resource, tag)`` in file order, one tag at a time, as TagRec's reader plus ours."""
    rows = []
    for line in lines:
        user, resource, _, tags = (field.strip('"') for field in line.split('";"')[:4])
        seen = set()
        for raw in tags.split(","):
            tag = decode_percent(raw).strip().lower()
            if tag and (user, resource, tag) not in seen:
                seen.add((user, resource, tag))
                rows.append((user, resource, tag))
    return rows


def test_tags_read_once_per_distinct_text_equal_a_tag_by_tag_reading(tmp_path):
    """The reader decodes each distinct raw tag once: the same rows as one tag at a time."""
    rng = np.random.default_rng(4)
    forms = ["Rock", " rock", "r%6Fck", "ROCK ", "c%252b%252b", "C%2B%2B", "", " ", "jazz",
             "Jazz%20", "a%2Cb", "100%", "caf%C3%A9", "CAF%C3%89"]
    lines = [f'"u{rng.integers(5)}";"r{i}";"{i}";"'
             + ",".join(rng.choice(forms, size=rng.integers(1, 6))) + '"' for i in range(300)]
    path = tmp_path / "x.txt"
    path.write_text("\n".join(lines) + "\n")
    folk = load_tagrec(path)
    table = folk.assignments.sort_values(SOURCE_ORDER)
    read = [(folk.users[u], folk.objects[o], folk.tags[t])
            for u, o, t in table[["user", "object", "tag"]].itertuples(index=False)]
    assert read == plain_tag_rows(lines)


def test_a_repeated_bad_tag_counts_each_of_its_lines_once(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text('"u";"r";"5";"fine,ok"\n"u";"r2";"6";"ok"\n"u";"r3";"7";"ok,a%00b,c%01"\n'
                    '"u";"r4";"8";"a%00b"\n')
    with pytest.warns(UserWarning, match=r"2 line\(s\) hold tags") as caught:
        load_tagrec(path)
    assert len(caught) == 1  # one warning, however many pieces the file was read in


def test_a_resources_categories_are_its_first_field_with_text(tmp_path):
    """Fields of whitespace only (Python's, ``\\x1c`` included) are skipped, per resource."""
    path = tmp_path / "c.txt"
    path.write_text('"u1";"r1";"1";"a";" "\n"u2";"r1";"2";"b";"\x1c"\n"u3";"r2";"3";"c";"x_0.5"\n'
                    '"u4";"r1";"4";"d";"Jazz_0.25,pop"\n"u5";"r1";"5";"e";"rock"\n')
    folk = load_tagrec(path)
    rows = {(folk.objects[o], folk.category_names[c], w if w == w else None)
            for o, c, w in folk.categories.itertuples(index=False)}
    assert rows == {("r1", "jazz", 0.25), ("r1", "pop", None), ("r2", "x", 0.5)}
