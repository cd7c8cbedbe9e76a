"""Artifacts and CLI input crafted by someone hostile (issue 33), on real files.

Every file digest a manifest records is recomputed after the crafting, as an attacker who can
write the artifact folder would do (the digests cover the files, not the manifest). Each crafted
file must be refused in one line naming the file, before anything allocates or runs what it
says; the CLI must never print a control character that a terminal would obey.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import shutil
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tagtorch.candidates.letor import read_letor
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor
from tagtorch.errors import UnreadableFileError
from tagtorch.evaluation.score_runs import main as evaluation_main
from tagtorch.itemrec.baselines import TwoDimensional
from tagtorch.rankers.latre import LatreWTS
from tagtorch.serving import ItemRecommender, TagRecommender
from tagtorch.serving import cli as recommend
from tagtorch.storage import file_record, load_arrays

CANDIDATES = {"max_rule_candidates": 50, "device": "cpu"}
CONTROL = [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)] if chr(c) != "\n"]
"""The characters a terminal may obey (C0, DEL, C1), the line break aside."""


# ------------------------------------------------------------------------------ artifacts
@pytest.fixture(scope="module")
def tag_artifact(tmp_path_factory) -> Path:
    """A small tag recommender folder (a LATRE ranker needs no fit: built directly)."""
    processor = TextProcessor(cache=False)
    folksonomy = processor.apply(generate_folksonomy(n_objects=60, seed=5))
    object_tags = folksonomy.object_tags()
    recommender = TagRecommender(processor, TermIndex.from_folksonomy(folksonomy), object_tags,
                                 np.flatnonzero(object_tags.lengths > 0), list(folksonomy.tags),
                                 CANDIDATES, LatreWTS(alpha=0.9),
                                 object_ids=[str(o) for o in folksonomy.objects])
    return recommender.save(tmp_path_factory.mktemp("hostile") / "tags")


@pytest.fixture(scope="module")
def item_artifact(tmp_path_factory) -> Path:
    """A small item recommender folder (the two-dimensional baseline, no training loop)."""
    processor = TextProcessor(cache=False)
    raw = generate_folksonomy(n_objects=400, seed=7)
    titles = {str(o): str(t) for o, t in zip(raw.objects, raw.texts["title"], strict=True)}
    recommender = ItemRecommender.fit(processor.apply(raw), processor, TwoDimensional(),
                                      titles=titles, p=3, val_fraction=0.2, seed=1)
    return recommender.save(tmp_path_factory.mktemp("hostile") / "items")


@pytest.fixture
def tags(tag_artifact, tmp_path) -> Path:
    """A copy of the tag recommender to craft."""
    return Path(shutil.copytree(tag_artifact, tmp_path / "tags"))


@pytest.fixture
def items(item_artifact, tmp_path) -> Path:
    """A copy of the item recommender to craft."""
    return Path(shutil.copytree(item_artifact, tmp_path / "items"))


def edit_manifest(folder: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Changes ``folder/manifest.json`` in place."""
    manifest = json.loads((folder / "manifest.json").read_text())
    edit(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))


def redigest(folder: Path, name: str) -> None:
    """Records ``name``'s new size and digest in the manifest (what an attacker does)."""
    path = folder / name
    record = file_record(path / "manifest.json" if path.is_dir() else path)
    edit_manifest(folder, lambda m: m["files"][name].update(record))


def edit_arrays(folder: Path, edit: Callable[[dict[str, np.ndarray]], None]) -> None:
    """Changes the arrays of ``folder/data.npz`` and its recorded digest."""
    with np.load(folder / "data.npz") as stored:
        arrays = {name: stored[name].copy() for name in stored.files}
    edit(arrays)
    np.savez(folder / "data.npz", **arrays)
    redigest(folder, "data.npz")


def edit_vocabulary(folder: Path, edit: Callable[[dict[str, Any]], Any]) -> None:
    """Replaces ``folder/vocabulary.json`` by ``edit(vocabulary)`` and records its digest."""
    vocabulary = json.loads((folder / "vocabulary.json").read_text())
    (folder / "vocabulary.json").write_text(json.dumps(edit(vocabulary)))
    redigest(folder, "vocabulary.json")


def lie_in_header(path: Path, member: str, shape: tuple[int, ...]) -> None:
    """Rewrites an ``.npz`` member's header to declare ``shape``; its data stays as it was."""
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    stream = io.BytesIO(entries[f"{member}.npy"])
    np.lib.format.read_magic(stream)
    _, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                  "fortran_order": fortran, "shape": shape})
    entries[f"{member}.npy"] = header.getvalue() + stream.read()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)


@contextlib.contextmanager
def memory_cap(extra: int = 2 << 30) -> Iterator[None]:
    """At most ``extra`` more bytes of address space (Linux): a file asking for gigabytes fails
    the test quickly instead of swapping the machine."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except OSError:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = pages * os.sysconf("SC_PAGE_SIZE") + extra
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard < 0 else min(limit, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def refused(load: Callable[[Path], Any], folder: Path, pattern: str) -> str:
    """The one-line error of loading ``folder``, checked against ``pattern``."""
    with memory_cap(), pytest.raises(UnreadableFileError, match=pattern) as caught:
        load(folder)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_artifacts_as_written_load(tag_artifact, item_artifact):
    assert TagRecommender.load(tag_artifact).terms.n_tags > 0
    assert ItemRecommender.load(item_artifact).users


# ---------------------------------------------------------------------- the token pattern
@pytest.mark.parametrize("pattern", [r"(a+)+$", r"[^\W_]+|(x+x+)+y", 5, None])
@pytest.mark.parametrize("kind", ["tags", "items"])
def test_a_token_pattern_tagtorch_does_not_write_is_refused(request, kind, pattern):
    """A backtracking pattern in a manifest would cost seconds per title of every request."""
    folder = request.getfixturevalue(kind)
    edit_manifest(folder, lambda m: m["settings"]["processor"].update(token_pattern=pattern))
    loader = TagRecommender.load if kind == "tags" else ItemRecommender.load
    refused(loader, folder, r"manifest\.json: settings\.processor\.token_pattern")


def test_an_artifact_with_another_token_pattern_is_not_written(tmp_path):
    processor = TextProcessor(token_pattern=r"\w+", cache=False)
    recommender = ItemRecommender.fit(processor.apply(generate_folksonomy(n_objects=200, seed=7)),
                                      processor, TwoDimensional(), p=3, seed=1)
    with pytest.raises(ValueError, match="token_pattern"):
        recommender.save(tmp_path / "items")


# --------------------------------------------------------------------- the listed files
@pytest.mark.parametrize("kind", ["tags", "items"])
def test_a_manifest_listing_no_file_is_refused(request, kind):
    """``"files": {}`` would verify nothing: every file the loader reads must be listed."""
    folder = request.getfixturevalue(kind)
    edit_manifest(folder, lambda m: m["files"].pop("data.npz"))
    loader = TagRecommender.load if kind == "tags" else ItemRecommender.load
    refused(loader, folder, r"manifest\.json: .*'data\.npz'")
    edit_manifest(folder, lambda m: m.update(files={}))
    refused(loader, folder, r"manifest\.json: ")


def test_a_model_folder_listing_no_file_is_refused(items):
    edit_manifest(items / "model", lambda m: m.update(files={}))
    redigest(items, "model")
    refused(ItemRecommender.load, items, r"model/manifest\.json: .*'arrays\.npz'")


# ---------------------------------------------------------------------- crafted data.npz
def _set(name: str, position: Any, value: Any) -> Callable[[dict[str, np.ndarray]], None]:
    """An edit that sets ``arrays[name][position] = value``."""
    def edit(arrays: dict[str, np.ndarray]) -> None:
        arrays[name][position] = value
    return edit


def _replace(name: str, change: Callable[[np.ndarray], np.ndarray]
             ) -> Callable[[dict[str, np.ndarray]], None]:
    """An edit that replaces ``arrays[name]`` by ``change(arrays[name])``."""
    def edit(arrays: dict[str, np.ndarray]) -> None:
        arrays[name] = change(arrays[name])
    return edit


def _one_row_short(arrays: dict[str, np.ndarray]) -> None:
    offsets = arrays["field0_offsets"][:-1]
    arrays["field0_offsets"], arrays["field0_values"] = offsets, arrays["field0_values"][
        :offsets[-1]]


TAG_ARRAYS = {
    "a tag code >= n_tags": (_set("tag_values", 0, 10**6), "tag_values"),
    "a tag code that is a text-only term": (None, "tag_values"),  # set in the test
    "a negative tag code": (_set("tag_values", -1, -1), "tag_values"),
    "a term code of 2**31": (_set("field0_values", 0, 2**31 - 1), "field0_values"),
    "float offsets": (_replace("tag_offsets", lambda a: a.astype(np.float64)), "tag_offsets"),
    "2-D offsets": (_replace("tag_offsets", lambda a: a[None]), "tag_offsets"),
    "2-D values": (_replace("field1_values", lambda a: a[:, None]), "field1_values"),
    "offsets not from 0": (_replace("field1_offsets", lambda a: a + 1), "field1_offsets"),
    "decreasing offsets": (_set("tag_offsets", slice(1, -1), 2**31), "tag_offsets"),
    "offsets past the values": (_set("tag_offsets", -1, 10**9), "tag_offsets"),
    "a row short": (_one_row_short, "field0_offsets"),
    "D object out of range": (_set("train_objects", -1, 10**6), "train_objects"),
    "float D objects": (_replace("train_objects", lambda a: a + 0.5), "train_objects"),
}


@pytest.mark.parametrize("case", list(TAG_ARRAYS))
def test_crafted_tag_arrays_are_refused(tags, case):
    edit, key = TAG_ARRAYS[case]
    if edit is None:
        n_tags = json.loads((tags / "vocabulary.json").read_text())["n_tags"]
        edit = _set("tag_values", 0, n_tags)
    edit_arrays(tags, edit)
    refused(TagRecommender.load, tags, rf"data\.npz: {key}")


def _drop(key: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda v: {k: value for k, value in v.items() if k != key}


TAG_VOCABULARY = {
    "a short display": (lambda v: v | {"display": v["display"][:-1]}, "display"),
    "a number shown as a tag": (lambda v: v | {"display": [5, *v["display"][1:]]}, "display"),
    "a huge n_tags": (lambda v: v | {"n_tags": 10**12}, "n_tags"),
    "n_tags as text": (lambda v: v | {"n_tags": str(v["n_tags"])}, "n_tags"),
    "a repeated term": (lambda v: v | {"vocabulary": [v["vocabulary"][1], *v["vocabulary"][1:]]},
                        "vocabulary"),
    "one object too few": (lambda v: v | {"objects": v["objects"][:-1]}, "objects|_offsets"),
    "fields as a string": (lambda v: v | {"fields": "title"}, "fields"),
    "no display": (_drop("display"), "display"),
    "a list": (lambda v: [v], "expected a JSON object"),
}


@pytest.mark.parametrize("case", list(TAG_VOCABULARY))
def test_a_crafted_tag_vocabulary_is_refused(tags, case):
    edit, key = TAG_VOCABULARY[case]
    edit_vocabulary(tags, edit)
    refused(TagRecommender.load, tags, rf"(vocabulary\.json|data\.npz): .*({key})")


def _item_triples(change: Callable[[np.ndarray], np.ndarray]
                  ) -> Callable[[dict[str, np.ndarray]], None]:
    return _replace("triples", change)


def _column(column: int, value: int) -> Callable[[np.ndarray], np.ndarray]:
    def change(triples: np.ndarray) -> np.ndarray:
        triples[0, column] = value
        return triples
    return change


ITEM_FILES = {
    "two columns": (_item_triples(lambda t: t[:, :2]), None, r"data\.npz: triples"),
    "float triples": (_item_triples(lambda t: t.astype(np.float32)), None,
                      r"data\.npz: triples"),
    "an item code out of range": (_item_triples(_column(1, 10**6)), None,
                                  r"data\.npz: triples.*item"),
    "a negative user code": (_item_triples(_column(0, -1)), None, r"data\.npz: triples.*user"),
    "a short display": (None, lambda v: v | {"display": v["display"][:-1]},
                        r"vocabulary\.json: .*display"),
    "a short titles list": (None, lambda v: v | {"titles": v["titles"][1:]},
                            r"vocabulary\.json: .*titles"),
    "a repeated user": (None, lambda v: v | {"users": [v["users"][1], *v["users"][1:]]},
                        r"vocabulary\.json: .*users"),
    "a number as an item": (None, lambda v: v | {"items": [7, *v["items"][1:]]},
                            r"vocabulary\.json: .*items"),
    "a user the model lacks": (None, lambda v: v | {"users": [*v["users"], "intruder"]},
                               r"model: .*users"),
}


@pytest.mark.parametrize("case", list(ITEM_FILES))
def test_crafted_item_files_are_refused(items, case):
    arrays, vocabulary, pattern = ITEM_FILES[case]
    if arrays is not None:
        edit_arrays(items, arrays)
    if vocabulary is not None:
        edit_vocabulary(items, vocabulary)
    refused(ItemRecommender.load, items, pattern)


def test_an_array_header_declaring_gigabytes_allocates_nothing(tags):
    """A member's header claims 8 GB: refused from its header, before any allocation."""
    lie_in_header(tags / "data.npz", "tag_values", (2**30,))
    redigest(tags, "data.npz")
    tracemalloc.start()
    try:
        message = refused(TagRecommender.load, tags, r"data\.npz: .*tag_values.*declares")
        assert tracemalloc.get_traced_memory()[1] < 64 << 20, message
    finally:
        tracemalloc.stop()


def test_a_compressed_array_larger_than_its_file_is_refused(tmp_path):
    """An entry inflating to far more than the file holds (tagtorch stores arrays as they are)."""
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, x=np.zeros(2**23))
    with memory_cap(), pytest.raises(UnreadableFileError, match=r"bomb\.npz: .*'x'"):
        load_arrays(path, ["x"])


# ------------------------------------------------------------------------------- the CLI
def no_control(text: str) -> bool:
    """True when ``text`` holds no character a terminal obeys but line breaks."""
    return not any(c in text for c in CONTROL)


ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b31m\x7f"


def test_the_table_escapes_control_characters_of_posted_tags(tags, capsys):
    vocabulary = json.loads((tags / "vocabulary.json").read_text())
    known = vocabulary["display"][:2]
    edit_vocabulary(tags, lambda v: v | {"display": [ESCAPES + d for d in v["display"]]})
    query = [str(tags), "--tags", ",".join(known), "-k", "3"]
    assert recommend.main(query) == 0
    out = capsys.readouterr().out
    assert no_control(out) and out.count(r"\x1b[2J\x1b]0;owned\x07\x9b31m\x7f") == 3, out
    assert recommend.main([*query, "--json"]) == 0
    out = capsys.readouterr().out
    assert no_control(out) and all(t["tag"].startswith(ESCAPES)
                                   for t in json.loads(out)["tags"])


def test_the_item_table_escapes_control_characters(items, capsys):
    edit_vocabulary(items, lambda v: v | {"titles": [ESCAPES + t for t in v["titles"]]})
    user = json.loads((items / "vocabulary.json").read_text())["users"][0]
    assert recommend.main([str(items), "--user", user, "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert no_control(out) and r"\x1b[2J" in out, out
    assert recommend.main([str(items), "--user", "\x1b[2Jnobody"]) == 0
    out = capsys.readouterr().out
    assert no_control(out) and "no recommendation" in out, out


def test_errors_are_one_line_without_control_characters(items, tmp_path, capsys):
    missing = tmp_path / "evil\x1b[2J\n.csv"
    assert recommend.main([str(items), "--csv", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and no_control(err) and r"evil\x1b[2J\x0a.csv" in err, err


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


CSV_FILES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "a folder": (lambda tmp: tmp, "a folder"),
    "/dev/zero": (lambda tmp: Path("/dev/zero"), "not a regular file"),
    "latin-1": (lambda tmp: _write(tmp, "latin.csv", b"user,tag\nu1,rock\nu2,caf\xe9\n"),
                r"line 3: not UTF-8"),
    "a row too long": (lambda tmp: _write(tmp, "long.csv", b"user,tag\nu1,rock\nu2,a,b\n"),
                       r"line 3: 3 fields"),
    "a row too short": (lambda tmp: _write(tmp, "short.csv", b"user,tag\nu1\n"),
                        r"line 2: 1 field"),
    "a repeated column": (lambda tmp: _write(tmp, "twice.csv", b"user,user\nu1,u2\n"),
                          "repeated"),
    "too large": (lambda tmp: _write(tmp, "large.csv", b"user,tag\n" + b"u1,rock\n" * 40),
                  "more than 100 bytes"),
}


@pytest.mark.parametrize("case", list(CSV_FILES))
def test_a_bad_csv_gets_one_line_naming_it(items, tmp_path, capsys, monkeypatch, case):
    make, message = CSV_FILES[case]
    path = make(tmp_path)
    if not path.exists():
        pytest.skip(f"no {path} here")
    monkeypatch.setattr(recommend, "MAX_CSV_BYTES", 100, raising=False)
    with memory_cap():
        assert recommend.main([str(items), "--csv", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}") and err.count("\n") == 1 and message in err, err


@pytest.mark.integration
def test_exports_never_write_through_a_planted_link(tmp_path):
    """Issue 52: links planted at the old fixed temporary name and at the file's own name."""
    import subprocess
    import sys

    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("keep me\n")
    for planted in (".synthetic.txt.tmp", "synthetic_fold0_train.txt",
                    ".synthetic_fold0_test.txt.tmp"):
        (out / planted).symlink_to(victim)
    for args in (["tagrec", "synthetic", str(out)],
                 ["letor", "synthetic", str(out), "--fold", "0"]):
        done = subprocess.run([sys.executable, "-m", "tagtorch.export", *args, "--option",
                               "n_objects=120"], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    assert victim.read_text() == "keep me\n"
    assert not (out / "synthetic_fold0_train.txt").is_symlink()  # the file replaced the link
    assert (out / "synthetic.txt").stat().st_size > 0


def test_export_to_a_file_is_refused_before_any_work(tmp_path):
    """Issue 52: ``OUT`` an existing file gave ``[Errno 17]`` (LETOR: after all candidates)."""
    import subprocess
    import sys

    out = tmp_path / "not-a-folder"
    out.write_text("x")
    for kind in ("tagrec", "letor"):
        done = subprocess.run([sys.executable, "-m", "tagtorch.export", kind, "synthetic",
                               str(out), "--option", "n_objects=60"], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 2
        assert done.stderr.strip() == f"error: {out} exists and is not a folder: name a " \
                                      "folder to write into"


# ------------------------------------------------------------------ lists padded from files
def _skewed_letor(path: Path, long: int = 20_000, short: int = 20_000) -> Path:
    """One query of ``long`` lines, then ``short`` queries of one line: 0.6 MB whose padded
    ``[Q, L, F]`` lists would take 6.8 GB (queries x the longest list)."""
    with path.open("w") as out:
        out.writelines(["1 qid:1 1:0.5\n"] * long)
        out.writelines(f"0 qid:{q} 1:1\n" for q in range(2, short + 2))
    return path


def test_a_letor_file_padded_beyond_its_size_is_refused_before_allocating(tmp_path):
    """Round three: a 0.5 MB LETOR file asked for gigabytes (queries x longest list)."""
    path = _skewed_letor(tmp_path / "skewed.txt")
    with memory_cap(), pytest.raises(ValueError, match=r"20001 queries.*longest 20000 lines.*"
                                                       r"max_list_length") as caught:
        read_letor(path)
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)


def test_max_list_length_keeps_each_querys_first_lines(tmp_path):
    path = _skewed_letor(tmp_path / "skewed.txt")
    with memory_cap():
        lists = read_letor(path, max_list_length=100)
    assert lists.mask.shape == (20_001, 100)
    assert lists.mask.sum().item() == 100 + 20_000
    assert lists.n_relevant[:2].tolist() == [100, 0] and lists.labels[0].sum().item() == 100


def test_a_run_of_one_long_query_is_scored_in_bounded_memory(tmp_path, capsys):
    """Round three: a 0.65 MB run took 6.2 GB in the scorer (4096 queries padded to its one
    long query), a 2 MB one ended in a traceback."""
    qrels, run = tmp_path / "qrels.trec", tmp_path / "run.trec"
    qrels.write_text("".join(f"q{q:04d} 0 d0 1\n" for q in range(4096)))
    run.write_text("".join(f"q0000 Q0 d{d} 1 {d} r\n" for d in range(25_000)))
    out = tmp_path / "report.md"
    with memory_cap(1 << 30):
        evaluation_main([str(qrels), str(run), "--metrics", "ndcg@10", "map", "--output",
                         str(out)])
    values = pd.read_csv(out.with_suffix(".csv"), dtype={"object": str})
    assert len(values) == 2 * 4096 and values.value.sum() == pytest.approx(1 / 25_000)
    assert "Runs scored by tagtorch" in capsys.readouterr().out


# ------------------------------------------------------------- numbers and sizes in data files
def test_a_compressed_data_file_inflating_far_beyond_its_size_is_refused(tmp_path):
    """Round three: a 3 KB bzip2 HetRec file inflated to 45 MB of text and took 1.5 GB."""
    import bz2

    from tagtorch.data.loaders.reading import read_delimited
    from tagtorch.errors import DataFormatError

    path = tmp_path / "user_taggedartists.dat"
    path.write_bytes(bz2.compress(b"userID\tartistID\ttagID\n" + b"2\t5\t1\n" * 4_000_000))
    with memory_cap(1 << 30), pytest.raises(DataFormatError, match=r"inflat") as caught:
        read_delimited(path, "\t", ["userID"], integer=["userID"])
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)


def test_a_compressed_data_file_of_ordinary_ratio_is_read(tmp_path):
    import gzip

    from tagtorch.data.loaders.reading import read_delimited

    path = tmp_path / "tags.dat"
    path.write_bytes(gzip.compress(b"id\tvalue\n" + b"".join(
        b"%d\trock %d\n" % (i, i * 7919 % 1000) for i in range(20_000))))
    assert len(read_delimited(path, "\t", ["id"], integer=["id"]).frame) == 20_000


def test_letor_query_sizes_that_wrap_around_64_bits_are_refused(tmp_path):
    """Round three: four sizes of 2^62 (+3) summed, in int64, to the file's 3 lines."""
    path = tmp_path / "lists.txt"
    path.write_text("1 1:0.5\n0 1:0.2\n1 1:0.1\n")
    Path(f"{path}.query").write_text(f"{2**62}\n{2**62}\n{2**62}\n{2**62 + 3}\n")
    with memory_cap(), pytest.raises(ValueError, match=r"lists\.txt\.query: .*sum to the 3"):
        read_letor(path)


def test_a_json_integer_too_long_to_read_is_an_unreadable_file(tmp_path):
    """Round three: 5000 digits raised Python's bare int-conversion ValueError, no file named."""
    from tagtorch.storage import read_json

    path = tmp_path / "manifest.json"
    path.write_text('{"format": ' + "9" * 5000 + "}")
    with pytest.raises(UnreadableFileError, match=r"manifest\.json: not a readable JSON"):
        read_json(path)


def _movielens_2k(folder: Path, timestamps: str) -> Path:
    """A HetRec MovieLens folder whose timestamps file holds the lines ``timestamps``."""
    folder.mkdir()
    (folder / "user_taggedmovies-timestamps.dat").write_text(
        "userID\tmovieID\ttagID\ttimestamp\n" + timestamps)
    (folder / "user_taggedmovies.dat").write_text("userID\tmovieID\ttagID\tdate_day\n")
    (folder / "tags.dat").write_text("id\tvalue\n1\trock\n")
    (folder / "movies.dat").write_text("id\ttitle\n5\tA\n")
    (folder / "movie_genres.dat").write_text("movieID\tgenre\n5\tDrama\n")
    return folder


@pytest.mark.parametrize("milliseconds", [2**63 - 1, -2**63, -500, 10**18])
def test_hetrec_times_that_are_no_date_are_refused(tmp_path, milliseconds):
    """Round three: 2^63-1 ms was read as the year 292 million; -500 ms as a missing time."""
    from tagtorch.data.loaders.hetrec import load_movielens_2k
    from tagtorch.errors import DataFormatError

    folder = _movielens_2k(tmp_path / "ml", f"1\t5\t1\t1000\n2\t5\t1\t{milliseconds}\n")
    with pytest.raises(DataFormatError, match=r"timestamps\.dat, line 3: .*'timestamp'"):
        load_movielens_2k(path=folder)


@pytest.mark.parametrize("value", ["-1", "9223372036854775807", "-9223372036854775807"])
def test_table_and_tagrec_times_that_are_no_date_are_refused(tmp_path, value):
    """Round three: -1 s was read as a missing time; 2^63-1 s, as a time past year 10^11."""
    from tagtorch.data.loaders import load_tagrec
    from tagtorch.data.loaders.tabular import load_table
    from tagtorch.errors import DataFormatError

    table = tmp_path / "posts.csv"
    table.write_text(f"user,object,tag,timestamp\n1,2,rock,1000\n1,3,pop,{value}\n")
    with pytest.raises(DataFormatError, match=r"posts\.csv, line 3: .*'timestamp'"):
        load_table(table, columns={key: key for key in ("user", "object", "tag", "timestamp")})
    tagrec = tmp_path / "bib.txt"
    tagrec.write_text(f'"1";"2";"1000";"pop"\n"1";"2";"{value}";"rock"\n')
    with pytest.raises(DataFormatError, match=r"bib\.txt, line 2: .*timestamp"):
        load_tagrec(tagrec)


@pytest.mark.parametrize("reader", ["forest", "legacy_forest", "candidate_cache", "text_cache"])
def test_every_npz_reader_refuses_an_entry_inflating_beyond_its_file(tmp_path, reader, caplog):
    """Issue 52 (audit): four readers used np.load directly, so a compressed entry of a small
    file could inflate to any size (here 80 MB from about 80 kB)."""
    import numpy as np

    from tagtorch.candidates.cache import _read
    from tagtorch.rankers.tree_scoring import FlatForest
    from tagtorch.rankers.trees import load_forest

    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, settings=np.zeros(3, np.int64), node_counts=np.zeros(1, np.int64),
                        fields=np.zeros(10_000_000))
    assert path.stat().st_size < 200_000
    if reader == "text_cache":
        from tagtorch.data.synthetic import generate_folksonomy
        from tagtorch.data.text import _read_cache

        assert _read_cache(path, generate_folksonomy(n_objects=20, seed=0)) is None  # rebuilt
        assert "inflates to 80,000,128 bytes" in caplog.text
        return
    read = {"forest": FlatForest.load, "legacy_forest": load_forest,
            "candidate_cache": _read}[reader]
    with pytest.raises(ValueError, match="inflates to 80,000,128 bytes"):
        read(path)
