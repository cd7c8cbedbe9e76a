"""Issue 52: the journal compacted while a service runs, compactions cut short, edited journals.

References: what the data holds is read back from the folder by a fresh load (not from the
serving object), and counted against the posts sent.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import AUTH, TOKEN, serving

from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.text import TextProcessor
from tagtorch.errors import UnreadableFileError
from tagtorch.posts.baselines import MostPopularUserResource
from tagtorch.recommend import main as recommend_main
from tagtorch.serving import PostRecommender, Recommender
from tagtorch.serving.journal import (
    BACKUP_FOLDER,
    COMPACTION_FOLDER,
    CompactionError,
    Journal,
    JournalWriteError,
    encode_record,
    finish_compaction,
)
from tagtorch.storage import MANIFEST_FILE


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


def cut_short_compaction(folder, monkeypatch, at_manifest=False):
    """A compaction that crashes after its copy is ready, with one file moved.

    ``at_manifest``: every other staged file moved and the old manifest moved to ``backup/``,
    the crash comes before the new manifest is moved in: the folder has no manifest.
    """
    served = PostRecommender.load(folder)
    served.add_posts([{"user": "kept", "resource": "r1", "tags": ["Kepttag"], "time": 1}])
    real, calls = os.replace, []

    def crashing(source, target):  # os is one module: every os.replace comes here
        if Path(source).parent.name == COMPACTION_FOLDER and Path(target).parent == folder:
            calls.append(source)
            if (Path(source).name == MANIFEST_FILE) if at_manifest else len(calls) == 2:
                raise OSError(5, "simulated crash")
        real(source, target)

    monkeypatch.setattr("tagtorch.serving.journal.os.replace", crashing)
    with pytest.raises(CompactionError, match=r"simulated crash.*--finish-compaction"):
        served.compact()
    monkeypatch.undo()
    assert (folder / COMPACTION_FOLDER / "READY").exists()
    assert (folder / MANIFEST_FILE).exists() != at_manifest
    assert (folder / BACKUP_FOLDER / MANIFEST_FILE).exists() == at_manifest


def test_a_crash_between_the_manifests_moves_is_named_by_every_loader(folder, monkeypatch,
                                                                     capsys):
    """Issue 69: the old manifest moved out, not the new one in: "not a recommender folder"."""
    cut_short_compaction(folder, monkeypatch, at_manifest=True)
    for load in (Recommender.load, PostRecommender.load):
        with pytest.raises(UnreadableFileError,
                           match=r"compaction .* cut short.* --finish-compaction"):
            load(folder)
    assert recommend_main([str(folder), "--user", "kept", "--resource", "r1"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "--finish-compaction" in error, error
    finish_compaction(folder)  # what --finish-compaction does
    assert not (folder / COMPACTION_FOLDER).exists()
    assert "kept" in PostRecommender.load(folder).users


@pytest.mark.integration  # an end-to-end run (the default run keeps its 8 minutes)
@pytest.mark.parametrize("at_manifest", [False, True])
def test_a_compaction_cut_short_is_named_by_every_reader_with_its_remedy(folder, monkeypatch,
                                                                        at_manifest):
    cut_short_compaction(folder, monkeypatch, at_manifest)
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
    with pytest.raises(ValueError, match=r"'title' not taken: .*'object'.* no texts"):
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


@contextlib.contextmanager
def file_size_limit(limit: int):
    """No file this process writes may grow past ``limit`` bytes (RLIMIT_FSIZE, ``ulimit -f``).

    SIGXFSZ is ignored (Python's default too), so a write past the limit fails with EFBIG.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def journal_bulk(folder, count: int = 3000) -> set[str]:
    """Journals ``count`` posts of new users (data past 70 kB once compacted); their users."""
    served = PostRecommender.load(folder)
    users = [f"bulk-{i}" for i in range(count)]
    for start in range(0, count, 1000):
        served.add_posts([post(user) for user in users[start:start + 1000]])
    return set(users)


def test_a_compaction_past_a_file_size_limit_says_what_to_do_and_loses_no_post(folder):
    """Issue 69: a (re)start's compaction under ``ulimit -f`` ended in an OSError traceback."""
    users = journal_bulk(folder)
    served = PostRecommender.load(folder)
    with file_size_limit(70_000), pytest.raises(CompactionError) as refused:
        served.compact()
    message = str(refused.value)
    assert "\n" not in message and message.startswith(str(folder / COMPACTION_FOLDER))
    assert "File too large; raise the file-size limit (ulimit -f)" in message, message
    assert not (folder / COMPACTION_FOLDER).exists()  # the half-written copy dropped
    assert users <= set(PostRecommender.load(folder).users)  # its segment replayed
    assert PostRecommender.load(folder).compact()  # with room: the next start's compaction
    assert not list(folder.glob("journal*"))
    assert users <= set(PostRecommender.load(folder).users)  # in the data itself


def test_posts_past_a_file_size_limit_are_refused_and_leave_no_trace(folder):
    served = PostRecommender.load(folder)
    served.add_posts([post("before")])
    size = (folder / "journal.jsonl").stat().st_size
    over = [post(f"over-{i}") for i in range(100)]  # about 6 kB
    with file_size_limit(size + 1000), pytest.raises(
            JournalWriteError, match=r"journal\.jsonl: the posts were not stored: File too "
                                     r"large; raise the file-size limit \(ulimit -f\)$"):
        served.add_posts(over)
    assert (folder / "journal.jsonl").stat().st_size == size  # its partial bytes cut
    assert "over-0" not in served.users
    served.add_posts([post("after")])
    users = set(PostRecommender.load(folder).users)
    assert {"before", "after"} <= users and not any(u.startswith("over-") for u in users)


@pytest.mark.integration  # the real server and two more starts of the command (about 30 s)
def test_a_service_under_a_file_size_limit_acknowledges_only_stored_posts(folder, tmp_path):
    """Issue 69: every 200 survives, every refusal is a 503 naming the journal, the compaction
    that cannot write is logged in one line, and the restart that cannot compact refuses in one.
    """
    from test_serve_hostile import refused_start, serve_command, stop, wait_for

    journal_bulk(folder)
    assert PostRecommender.load(folder).compact()  # the data: past the limit once written
    (tmp_path / "token").write_text(TOKEN)
    writes, limit = ("--token-file", str(tmp_path / "token")), 70_000
    command, url = serve_command(folder, *writes, "--apply-interval", "0.05", "--compact-after",
                                 "1", "--max-body", "200000", file_size_limit=limit)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    acknowledged: set[str] = set()
    refused: set[str] = set()
    try:
        wait_for(url, process)
        for request in range(8):  # 20 kB each: the fresh journal is full by the fifth
            users = {f"limit{request}-{i}" for i in range(300)}
            answer = httpx.post(f"{url}/v1/posts", json={"posts": [post(u) for u in users]},
                                headers=AUTH, timeout=60)
            assert answer.status_code in (200, 503), answer.text
            if answer.status_code == 503:
                assert "journal.jsonl" in answer.text and "ulimit -f" in answer.text
            (acknowledged if answer.status_code == 200 else refused).update(users)
            deadline = time.monotonic() + 60
            while httpx.get(f"{url}/v1/info", timeout=10).json()["pending_posts"]:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        output = stop(process)
    assert acknowledged and refused, output
    assert "Traceback" not in output and "compacting the journal failed" in output, output
    code, stderr = refused_start(folder, *writes, file_size_limit=limit)  # the restart
    assert code == 2 and "Traceback" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and COMPACTION_FOLDER in last and "ulimit -f" in last
    finished = subprocess.run([sys.executable, "-m", "tagtorch.serve", str(folder),
                               "--finish-compaction"], capture_output=True, text=True,
                              timeout=120)
    assert finished.returncode == 0, finished.stderr
    users = set(PostRecommender.load(folder).users)
    assert acknowledged <= users and not refused & users
