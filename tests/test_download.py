"""Tests for tagtorch.data.download: data home, archive download, checks and extraction.

Downloads are served from tmp_path, by file:// URLs or a loopback HTTP server (127.0.0.1).
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from tagtorch.data import download as dl
from tagtorch.data.download import (
    Archive,
    ChecksumError,
    DatasetNotFoundError,
    DownloadError,
    data_home,
    ensure_archive,
    extract,
    fetch,
)

FILES = {"user_taggedartists.dat": "userID\tartistID\ttagID\n2\t52\t13\n",
         "tags.dat": "tagID\ttagValue\n13\trock\n"}


def make_zip(path: Path, files: dict[str, str], inner: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(f"{inner}/{name}" if inner else name, text)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def spec(url: str, digest: str | None, folder: str = "toy") -> Archive:
    return Archive(url=url, sha256=digest, folder=folder,
                   files=("user_taggedartists.dat", ("tags.dat", "tags.txt")), name="Toy set")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A loopback HTTP server serving the folder it yields, as (base URL, folder)."""
    root = tmp_path / "served"
    root.mkdir()
    handler = partial(QuietHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


# ---------------------------------------------------------------- data_home


def test_data_home_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TAGTORCH_DATA_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data_home(tmp_path / "arg") == tmp_path / "arg"
    assert data_home(str(tmp_path / "arg")) == tmp_path / "arg"
    assert data_home() == tmp_path / "env"
    monkeypatch.delenv("TAGTORCH_DATA_DIR")
    assert data_home() == tmp_path / "xdg" / "tagtorch"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_home() == tmp_path / "home" / ".cache" / "tagtorch"
    assert data_home("~/data") == tmp_path / "home" / "data"


def test_archive_filename_and_missing(tmp_path: Path) -> None:
    archive = spec("https://example.org/sets/toy-v2.zip?x=1", None)
    assert archive.filename == "toy-v2.zip"
    assert archive.missing_files(tmp_path) == ["user_taggedartists.dat", "tags.dat or tags.txt"]
    (tmp_path / "user_taggedartists.dat").write_text("x")
    (tmp_path / "tags.txt").write_text("x")
    assert archive.missing_files(tmp_path) == []


# ---------------------------------------------------------------- ensure_archive


def test_download_file_url_top_level(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    zipped = make_zip(tmp_path / "toy.zip", {**FILES, "readme.txt": "hello"})
    home = tmp_path / "home"
    folder = ensure_archive(spec(zipped.as_uri(), sha256(zipped)), home)
    assert folder == home / "toy"
    assert sorted(p.name for p in folder.iterdir()) == [
        "readme.txt", "tags.dat", "user_taggedartists.dat"]
    assert (folder / "tags.dat").read_text() == FILES["tags.dat"]
    assert "toy.zip" in capsys.readouterr().err  # the progress bar names the archive
    leftovers = [p.name for p in home.iterdir() if p.name != "toy"]
    assert leftovers == []  # no temporary download or staging folder is left


def test_download_http_inner_folder(tmp_path: Path, server: tuple[str, Path],
                                    capsys: pytest.CaptureFixture) -> None:
    base, served = server
    zipped = make_zip(served / "ml-toy.zip", FILES, inner="ml-toy")
    with zipfile.ZipFile(zipped, "a") as zf:  # a macOS resource folder is ignored
        zf.writestr("__MACOSX/._tags.dat", "junk")
    folder = ensure_archive(spec(f"{base}/ml-toy.zip", sha256(zipped)), tmp_path / "home")
    assert sorted(p.name for p in folder.iterdir()) == ["tags.dat", "user_taggedartists.dat"]
    err = capsys.readouterr().err
    assert "ml-toy.zip" in err and f"/{zipped.stat().st_size}" in err  # size from the server


def test_files_present_no_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "home" / "toy"
    folder.mkdir(parents=True)
    (folder / "user_taggedartists.dat").write_text("edited by hand")
    (folder / "tags.txt").write_text("alternative name")

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("no download expected")

    monkeypatch.setattr(dl, "fetch", no_network)
    monkeypatch.setattr(dl.urllib.request, "urlopen", no_network)
    archive = spec("http://127.0.0.1:9/never.zip", "0" * 64)  # wrong digest: never checked
    assert ensure_archive(archive, tmp_path / "home") == folder
    assert ensure_archive(archive, tmp_path / "home", download=False) == folder
    assert (folder / "user_taggedartists.dat").read_text() == "edited by hand"


def test_download_false_and_missing(tmp_path: Path) -> None:
    archive = spec("https://files.example.org/toy.zip", None)
    with pytest.raises(DatasetNotFoundError) as info:
        ensure_archive(archive, tmp_path, download=False)
    message = str(info.value)
    assert "download=False" in message
    assert "user_taggedartists.dat" in message and "tags.dat or tags.txt" in message
    assert str(tmp_path / "toy") in message and "https://files.example.org/toy.zip" in message
    assert not (tmp_path / "toy").exists()


def test_checksum_mismatch(tmp_path: Path) -> None:
    zipped = make_zip(tmp_path / "toy.zip", FILES)
    home = tmp_path / "home"
    wrong = "ab" * 32
    with pytest.raises(ChecksumError) as info:
        ensure_archive(spec(zipped.as_uri(), wrong), home, progress=False)
    message = str(info.value)
    assert wrong in message and sha256(zipped) in message and zipped.as_uri() in message
    assert "expected" in message and "got" in message
    assert not home.exists()  # the data home it created and the temporary file are removed


def test_network_failure_names_url_and_folder(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/toy.zip"
    with pytest.raises(DownloadError) as info:
        ensure_archive(spec(url, None), tmp_path / "home", progress=False)
    message = str(info.value)
    assert url in message
    assert "by hand" in message and str(tmp_path / "home" / "toy") in message
    assert not isinstance(info.value, ChecksumError)


def test_http_404(tmp_path: Path, server: tuple[str, Path]) -> None:
    base, _ = server
    with pytest.raises(DownloadError, match="404"):
        ensure_archive(spec(f"{base}/missing.zip", None), tmp_path / "home", progress=False)


def test_unverified_download_logs_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    zipped = make_zip(tmp_path / "toy.zip", FILES)
    with caplog.at_level(logging.WARNING, logger="tagtorch.data.download"):
        ensure_archive(spec(zipped.as_uri(), None), tmp_path / "home", progress=False)
    assert "not verified" in caplog.text and sha256(zipped) in caplog.text


def test_archive_without_needed_files(tmp_path: Path) -> None:
    zipped = make_zip(tmp_path / "toy.zip", {"tags.dat": "x"})
    with pytest.raises(DatasetNotFoundError, match=r"user_taggedartists\.dat"):
        ensure_archive(spec(zipped.as_uri(), sha256(zipped)), tmp_path / "home", progress=False)


def test_not_a_zip(tmp_path: Path) -> None:
    bogus = tmp_path / "toy.zip"
    bogus.write_text("<html>maintenance</html>")
    with pytest.raises(DownloadError, match="not a zip archive"):
        ensure_archive(spec(bogus.as_uri(), None), tmp_path / "home", progress=False)


def test_unsafe_member_refused(tmp_path: Path) -> None:
    zipped = make_zip(tmp_path / "evil.zip", {"../evil.txt": "x", **FILES})
    with pytest.raises(DownloadError, match="unsafe path"):
        extract(zipped, tmp_path / "home" / "toy")
    assert not (tmp_path / "home" / "evil.txt").exists()


def test_extract_replaces_existing_and_keeps_others(tmp_path: Path) -> None:
    target = tmp_path / "toy"
    target.mkdir()
    (target / "tags.dat").write_text("old")
    (target / "notes.txt").write_text("mine")
    extract(make_zip(tmp_path / "toy.zip", FILES, inner="toy"), target)
    assert (target / "tags.dat").read_text() == FILES["tags.dat"]
    assert (target / "notes.txt").read_text() == "mine"


def test_fetch_returns_digest(tmp_path: Path) -> None:
    zipped = make_zip(tmp_path / "toy.zip", FILES)
    out = tmp_path / "copy.zip"
    assert fetch(zipped.as_uri(), out, sha256=sha256(zipped).upper(), progress=False) == sha256(
        zipped)
    assert out.read_bytes() == zipped.read_bytes()


# ---------------------------------------------------------------- issue 14: clean failures


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_stale_part_from_a_killed_download_is_replaced(tmp_path: Path) -> None:
    zipped = make_zip(tmp_path / "toy.zip", FILES)
    home = tmp_path / "home"
    home.mkdir()
    # What a process killed mid-download (SIGKILL: no cleanup) leaves behind, in this
    # version's naming and in the random naming of earlier versions.
    (home / ".toy.zip.part").write_bytes(b"PK\x03\x04 half an archive")
    (home / ".toy.zip.k2j4h1x9.part").write_bytes(b"older half")
    folder = ensure_archive(spec(zipped.as_uri(), sha256(zipped)), home, progress=False)
    assert (folder / "tags.dat").read_text() == FILES["tags.dat"]
    assert _hidden(home) == []


class _StallingHandler(QuietHandler):
    """Sends half of the archive, then hangs: a download to be killed."""

    def do_GET(self) -> None:
        body = Path(self.directory, self.path.lstrip("/")).read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2])
        self.wfile.flush()
        time.sleep(30)


def test_killed_download_leaves_nothing_behind_after_the_next_one(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    zipped = make_zip(served / "toy.zip", {**FILES, "pad.bin": os.urandom(200_000).hex()})
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(_StallingHandler, directory=str(served)))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    home = tmp_path / "home"
    url = f"http://127.0.0.1:{httpd.server_address[1]}/toy.zip"
    code = ("import sys; from tagtorch.data.download import Archive, ensure_archive; "
            "ensure_archive(Archive(url=sys.argv[1], sha256=None, folder='toy', "
            "files=('tags.dat',)), sys.argv[2], progress=False)")
    child = subprocess.Popen([sys.executable, "-c", code, url, str(home)])
    try:
        deadline = time.monotonic() + 60
        while not any(p.suffix == ".part" and p.stat().st_size > 0
                      for p in (home.iterdir() if home.is_dir() else [])):
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
        httpd.shutdown()
        httpd.server_close()
    assert [p.suffix for p in home.iterdir()] == [".part"]  # the killed process's leftover
    folder = ensure_archive(spec(zipped.as_uri(), sha256(zipped)), home, progress=False)
    assert (folder / "tags.dat").read_text() == FILES["tags.dat"]
    assert _hidden(home) == []


def test_failed_download_removes_the_folders_it_created(tmp_path: Path) -> None:
    zipped = make_zip(tmp_path / "toy.zip", {"tags.dat": "x"})  # lacks a needed file
    home = tmp_path / "new" / "home"
    with pytest.raises(DatasetNotFoundError, match=r"user_taggedartists\.dat"):
        ensure_archive(spec(zipped.as_uri(), sha256(zipped)), home, progress=False)
    assert not (tmp_path / "new").exists()


def test_failed_download_keeps_folders_that_existed(tmp_path: Path) -> None:
    zipped = make_zip(tmp_path / "toy.zip", {"tags.dat": "from the archive"})
    home = tmp_path / "home"
    target = home / "toy"
    target.mkdir(parents=True)
    (target / "tags.dat").write_text("mine")
    (target / "notes.txt").write_text("mine too")
    with pytest.raises(DatasetNotFoundError):
        ensure_archive(spec(zipped.as_uri(), sha256(zipped)), home, progress=False)
    assert sorted(p.name for p in home.iterdir()) == ["toy"]
    assert (target / "tags.dat").read_text() == "mine"  # nothing half-extracted into it
    assert (target / "notes.txt").read_text() == "mine too"
    # A failed fetch into an existing, empty data home leaves it there, empty.
    empty = tmp_path / "empty-home"
    empty.mkdir()
    with pytest.raises(DownloadError):
        ensure_archive(spec((tmp_path / "absent.zip").as_uri(), None), empty, progress=False)
    assert empty.is_dir() and list(empty.iterdir()) == []


def test_per_file_digests_catch_a_tampered_archive(tmp_path: Path) -> None:
    digests = {name: hashlib.sha256(text.encode()).hexdigest() for name, text in FILES.items()}
    good = make_zip(tmp_path / "good.zip", {**FILES, "readme.txt": "no digest: not checked"},
                    inner="toy")
    archive = dataclasses.replace(spec(good.as_uri(), None), file_sha256=digests)
    folder = ensure_archive(archive, tmp_path / "home", progress=False)
    assert (folder / "readme.txt").exists()
    tampered = make_zip(tmp_path / "bad.zip",
                        {**FILES, "tags.dat": FILES["tags.dat"] + "666\tevil\n"})
    home = tmp_path / "home2"
    with pytest.raises(ChecksumError) as info:
        ensure_archive(dataclasses.replace(archive, url=tampered.as_uri()), home,
                       progress=False)
    message = str(info.value)
    assert "tags.dat" in message and tampered.as_uri() in message
    assert digests["tags.dat"] in message
    assert hashlib.sha256((FILES["tags.dat"] + "666\tevil\n").encode()).hexdigest() in message
    assert "\n" not in message
    assert not home.exists()


def test_verify_files_of_a_folder(tmp_path: Path) -> None:
    (tmp_path / "tags.dat").write_text(FILES["tags.dat"])
    archive = dataclasses.replace(spec("file:///unused.zip", None), file_sha256={
        "tags.dat": hashlib.sha256(FILES["tags.dat"].encode()).hexdigest(),
        "absent.dat": "0" * 64})
    dl.verify_files(archive, tmp_path)  # absent files are not checked
    (tmp_path / "tags.dat").write_text("tampered")
    with pytest.raises(ChecksumError, match=str(tmp_path / "tags.dat")):
        dl.verify_files(archive, tmp_path)


def test_part_file_in_unwritable_data_home_names_the_path(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    zipped = make_zip(tmp_path / "toy.zip", FILES)
    home = tmp_path / "home"
    home.mkdir()
    real_open = os.open

    def deny(path: str | Path, *args: object, **kwargs: object) -> object:
        if Path(path).parent == home:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("tagtorch.data.download.os.open", deny)  # os.open: the one module
    with pytest.raises(DownloadError) as info:
        ensure_archive(spec(zipped.as_uri(), None), home, progress=False)
    assert str(home) in str(info.value) and "ermission denied" in str(info.value)


def test_fetch_never_writes_through_a_link_at_its_destination(tmp_path: Path) -> None:
    """Issue 52: a link planted at the download's name is replaced, its target untouched."""
    zipped = make_zip(tmp_path / "toy.zip", FILES)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    link = tmp_path / "home" / ".toy.zip.part"
    link.parent.mkdir()
    link.symlink_to(victim)
    dl.fetch(zipped.as_uri(), link, progress=False)
    assert victim.read_text() == "keep" and not link.is_symlink()
    assert link.read_bytes() == zipped.read_bytes()
