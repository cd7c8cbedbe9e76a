"""Tests for tagtorch.data.download: data home, archive download, checks and extraction.

Downloads are served from tmp_path, by file:// URLs or a loopback HTTP server (127.0.0.1).
"""

from __future__ import annotations

import hashlib
import http.server
import logging
import socket
import threading
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
    assert not (home / "toy").exists()
    assert list(home.iterdir()) == []  # the temporary file was removed


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
