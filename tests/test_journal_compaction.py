"""Issue 52: the journal compacted while a service runs, compactions cut short, edited journals.

References: what the data holds is read back from the folder by a fresh load (not from the
serving object), and counted against the posts sent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import AUTH, serving

from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.text import TextProcessor
from tagtorch.errors import UnreadableFileError
from tagtorch.posts.baselines import MostPopularUserResource
from tagtorch.serving import PostRecommender, Recommender
from tagtorch.serving.journal import BACKUP_FOLDER, COMPACTION_FOLDER, Journal, encode_record


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    processor = TextProcessor(cache=False)
    folksonomy = processor.apply(generate_folksonomy(n_objects=200, seed=5))
    recommender = PostRecommender.fit(folksonomy, processor, MostPopularUserResource(), p=2)
    return recommender.save(tmp_path_factory.mktemp("journal") / "mp_ur")


@pytest.fixture
def folder(artifact, tmp_path):
    return shutil.copytree(artifact, tmp_path / "artifact")


def post(user: str, resource: str = "r-new", tag: str = "Qwxyzzy") -> dict:
    return {"user": user, "object": resource, "tags": [tag], "time": 9}


def journal_lines(folder) -> list[bytes]:
    path = folder / "journal.jsonl"
    return path.read_bytes().splitlines() if path.exists() else []


@pytest.mark.integration  # an end-to-end run (the default run keeps its 8 minutes)
def test_a_running_service_compacts_its_journal(folder):
    """11 requests of 1,000 posts with --compact-after 2000: the journal stays short."""
    with serving(folder, "--apply-interval", "0.05", "--compact-after", "2000",
                 "--max-body", "200000") as url:
        for request in range(11):
            body = {"posts": [post(f"bulk{request}-{i}") for i in range(1000)]}
            answer = httpx.post(f"{url}/v1/posts", json=body, headers=AUTH, timeout=60)
            assert answer.status_code == 200, answer.text
            deadline = time.monotonic() + 60  # each request applied before the next
            while httpx.get(f"{url}/v1/info", timeout=10).json()["pending_posts"]:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        deadline = time.monotonic() + 60  # the last compaction runs after the last pass
        while len(journal_lines(folder)) > 1:
            assert time.monotonic() < deadline, len(journal_lines(folder))
            time.sleep(0.1)
        assert list((folder / BACKUP_FOLDER).glob("journal.compacting-*.jsonl"))
    data_only = shutil.copytree(folder, folder.parent / "data-only")
    (data_only / "journal.jsonl").unlink(missing_ok=True)
    users = set(PostRecommender.load(data_only).users)  # the data alone, no journal
    held = sum(f"bulk{r}-{i}" in users for r in range(11) for i in range(1000))
    assert held >= 10_000, held
    every = set(PostRecommender.load(folder).users)  # the data and the journal
    assert {f"bulk{r}-{i}" for r in range(11) for i in range(1000)} <= every


def test_posts_not_applied_when_the_journal_rotates_stay_in_the_fresh_journal(folder):
    served = PostRecommender.load(folder)
    served.add_posts([{"user": "a", "resource": "r1", "tags": ["Applied"], "time": 1}])
    waiting = encode_record([post("b", "r2", "Waiting")])
    assert served.journal is not None
    served.journal.append(waiting)  # journaled, not applied yet (the queue's pending posts)
    assert served.journal.rotate([waiting])
    assert journal_lines(folder) == [waiting.rstrip()]
    assert served.compact(rotate=False)
    assert journal_lines(folder) == [waiting.rstrip()]  # new posts go on into it
    assert not list(folder.glob("journal.compacting-*"))
    assert len(list((folder / BACKUP_FOLDER).glob("journal.compacting-*"))) == 1
    loaded = PostRecommender.load(folder)
    assert {"a", "b"} <= set(loaded.users)
    (folder / "journal.jsonl").unlink()
    assert "a" in PostRecommender.load(folder).users  # in the data itself


def test_a_crash_after_rotation_replays_the_segments_first(folder):
    served = PostRecommender.load(folder)
    served.add_posts([{"user": "s", "resource": "r1", "tags": ["Segmented"], "time": 1}])
    assert served.journal is not None and served.journal.rotate()
    served.add_posts([{"user": "t", "resource": "r1", "tags": ["Fresh"], "time": 2}])
    # a kill -9 here: the segment is not in the data yet
    assert (folder / "journal.compacting-1.jsonl").exists()
    assert {"s", "t"} <= set(PostRecommender.load(folder).users)
    assert PostRecommender.load(folder).compact()  # the start's compaction takes both
    assert not list(folder.glob("journal.compacting-*"))
    assert {"s", "t"} <= set(PostRecommender.load(folder).users)


def cut_short_compaction(folder, monkeypatch):
    """A compaction that crashes after its copy is ready, with one file moved."""
    served = PostRecommender.load(folder)
    served.add_posts([{"user": "kept", "resource": "r1", "tags": ["Kepttag"], "time": 1}])
    real, calls = os.replace, []

    def crashing(source, target):  # os is one module: every os.replace comes here
        if Path(source).parent.name == COMPACTION_FOLDER and Path(target).parent == folder:
            calls.append(source)
            if len(calls) == 2:  # the first staged file moved, then the crash
                raise OSError(5, "simulated crash")
        real(source, target)

    monkeypatch.setattr("tagtorch.serving.journal.os.replace", crashing)
    with pytest.raises(OSError, match="simulated"):
        served.compact()
    monkeypatch.undo()
    assert (folder / COMPACTION_FOLDER / "READY").exists()


@pytest.mark.integration  # an end-to-end run (the default run keeps its 8 minutes)
def test_a_compaction_cut_short_is_named_by_every_reader_with_its_remedy(folder, monkeypatch):
    cut_short_compaction(folder, monkeypatch)
    with pytest.raises(UnreadableFileError, match=r"compaction .* cut short.*--finish-compaction"):
        Recommender.load(folder)
    recommend = subprocess.run([sys.executable, "-m", "tagtorch.recommend", str(folder),
                                "--user", "kept", "--resource", "r1"],
                               capture_output=True, text=True, timeout=120)
    assert recommend.returncode != 0 and "Traceback" not in recommend.stderr
    assert "--finish-compaction" in recommend.stderr, recommend.stderr
    serve = [sys.executable, "-m", "tagtorch.serve", str(folder)]
    read_only = subprocess.run([*serve, "--read-only", "--port", "1"], capture_output=True,
                               text=True, timeout=120)
    assert read_only.returncode == 2 and "--finish-compaction" in read_only.stderr
    finished = subprocess.run([*serve, "--finish-compaction"], capture_output=True, text=True,
                              timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert not (folder / COMPACTION_FOLDER).exists()
    assert "kept" in PostRecommender.load(folder).users
    assert not journal_lines(folder)


def test_a_hand_edited_record_the_recommender_refuses_names_the_journal_line(folder):
    lines = [json.dumps({"posts": [post("fine")]}),
             json.dumps({"posts": [{**post("edited"), "title": "a text"}]})]
    (folder / "journal.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(UnreadableFileError, match=r"journal\.jsonl:2: .*'title' not taken"):
        PostRecommender.load(folder)


def test_a_whole_last_record_without_its_newline_is_kept(folder):
    (folder / "journal.jsonl").write_text(json.dumps({"posts": [post("unended")]}))
    served = PostRecommender.load(folder)
    assert "unended" in served.users
    served.add_posts([post("next")])
    assert len(journal_lines(folder)) == 2
    assert {"unended", "next"} <= set(PostRecommender.load(folder).users)
    torn = json.dumps({"posts": [post("torn")]})[:-3]  # cut inside the record: left out
    with open(folder / "journal.jsonl", "a") as handle:
        handle.write(torn)
    assert "torn" not in PostRecommender.load(folder).users


def test_a_personalized_post_with_a_text_says_texts_are_not_taken(folder):
    served = PostRecommender.load(folder)
    with pytest.raises(ValueError, match=r"'title' not taken: .*object .* no texts"):
        served.add_posts([{**post("u"), "title": "a text"}])


def test_the_queue_refuses_a_compaction_threshold_below_one(folder):
    from tagtorch.serving.ingest import PostQueue

    with pytest.raises(ValueError, match="compact_after must be >= 1"):
        PostQueue(PostRecommender.load(folder), compact_after=0)


def test_journal_segments_are_read_in_number_order(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    for number, user in ((10, "ten"), (2, "two")):
        (tmp_path / f"journal.compacting-{number}.jsonl").write_bytes(
            encode_record([post(user)]))
    journal.append(encode_record([post("now")]))
    assert [batch[0]["user"] for _, batch in journal.read()] == ["two", "ten", "now"]


def test_a_rotation_whose_folder_sync_fails_leaves_a_readable_journal(tmp_path, monkeypatch):
    """Review: the rename done, the fsync of the folder failing: the next append extended the
    fresh file with NUL bytes up to the old length, and the next start refused the journal."""
    journal = Journal(tmp_path / "journal.jsonl")
    journal.append(encode_record([post("first")]))

    def failing(folder):
        raise OSError(5, "simulated EIO")

    monkeypatch.setattr("tagtorch.serving.journal.sync_folder", failing)
    with pytest.raises(OSError, match="EIO"):
        journal.rotate()
    monkeypatch.undo()
    journal.append(encode_record([post("second")]))
    assert (tmp_path / "journal.jsonl").read_bytes().startswith(b'{"posts"')
    assert [batch[0]["user"] for _, batch in Journal(tmp_path / "journal.jsonl").read()] == [
        "first", "second"]


def test_unapplied_records_are_written_again_in_one_flush(tmp_path, monkeypatch):
    """Review: one fsync per unapplied record under the queue's lock stalled every request."""
    journal = Journal(tmp_path / "journal.jsonl")
    records = [encode_record([post(f"u{i}")]) for i in range(50)]
    for record in records:
        journal.append(record)
    flushes = []
    real = os.fsync
    monkeypatch.setattr("tagtorch.serving.journal.os.fsync",
                        lambda fd: (flushes.append(fd), real(fd)))
    journal.rotate(records[-20:])
    assert len(flushes) <= 3  # the folder, the fresh journal (and its folder entry)
    assert len(journal_lines(tmp_path)) == 20


def test_an_unended_last_line_of_the_wrong_schema_is_an_error_naming_it(folder):
    """Review: whole JSON of the wrong schema without its newline was dropped as a torn tail."""
    (folder / "journal.jsonl").write_text(json.dumps({"posts": [post("fine")]}) + "\n"
                                          + json.dumps({"posts": [{"user": "u"}]}))
    with pytest.raises(UnreadableFileError, match=r"journal\.jsonl:2: not a valid record"):
        PostRecommender.load(folder)


def test_a_new_segment_is_numbered_after_the_highest(tmp_path):
    """Review: with only segment 5 left, the next was numbered 2 and replayed first."""
    (tmp_path / "journal.compacting-5.jsonl").write_bytes(encode_record([post("five")]))
    journal = Journal(tmp_path / "journal.jsonl")
    journal.append(encode_record([post("later")]))
    journal.rotate()
    assert (tmp_path / "journal.compacting-6.jsonl").exists()
    assert [batch[0]["user"] for _, batch in journal.read()] == ["five", "later"]
