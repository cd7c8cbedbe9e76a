"""Locating data files, and downloading and extracting the official dataset archives.

Every dataset lives in ``<data home>/<folder>/``. The data home is, in order of precedence,
the ``data_dir`` argument, the ``TAGTORCH_DATA_DIR`` environment variable, or
``$XDG_CACHE_HOME/tagtorch`` (``~/.cache/tagtorch`` when ``XDG_CACHE_HOME`` is unset).
When the files a loader needs are already in the folder they are used as they are (files
already there are never checksummed, so files placed there by hand work; :func:`verify_files`
checks a folder on request); otherwise the official archive is downloaded with a progress bar
and verified, and only then extracted there.

Verification: the archive's SHA-256 where one is published, and the SHA-256 of each extracted
file that has a known digest (:attr:`Archive.file_sha256`). Both are checked before anything is
placed in the dataset folder, so a corrupt or tampered copy fails with a
:class:`ChecksumError` naming the file and leaves the folder as it was.

Failures leave nothing behind: the download goes to ``<data home>/.<archive name>.part`` and
extraction to ``<data home>/.<folder>.extract/``, both removed when the download ends, however
it ends; a process killed outright (SIGKILL, power loss) leaves them, and the next download of
the same archive removes them before it starts. Earlier versions' ``.<archive name>.*.part``
files are removed too. A failed download also removes the folders it created (the dataset
folder, the data home and its parents), never one that existed before. Two processes must not
download the same archive into the same data home at the same time: they would share the
``.part`` file (where digests are known, the check then fails rather than pass a mixed file).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from tqdm.auto import tqdm

log = logging.getLogger(__name__)

#: Environment variable naming the data home.
DATA_DIR_ENV = "TAGTORCH_DATA_DIR"

_CHUNK = 1 << 16
_IGNORED_ENTRIES = frozenset({"__MACOSX", ".DS_Store"})


class DownloadError(OSError):
    """An archive could not be downloaded or extracted."""


class ChecksumError(DownloadError):
    """A downloaded archive does not have the expected SHA-256 digest."""


class DatasetNotFoundError(FileNotFoundError):
    """The files of a dataset are not on disk and may not (or could not) be downloaded."""


def data_home(data_dir: str | Path | None = None) -> Path:
    """Returns the folder that holds one sub-folder per dataset.

    Args:
        data_dir: explicit folder; if None, the ``TAGTORCH_DATA_DIR`` environment variable,
            else ``$XDG_CACHE_HOME/tagtorch``, else ``~/.cache/tagtorch``.

    Returns:
        The folder (``~`` expanded); it is not created.

    Example:
        >>> data_home("/tmp/tagtorch-data").as_posix()
        '/tmp/tagtorch-data'
    """
    if data_dir is not None and str(data_dir) != "":
        return Path(data_dir).expanduser()
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return user_cache_dir()


def user_cache_dir() -> Path:
    """The user cache folder: ``$XDG_CACHE_HOME/tagtorch``, else ``~/.cache/tagtorch``."""
    cache = os.environ.get("XDG_CACHE_HOME")
    base = Path(cache).expanduser() if cache else Path.home() / ".cache"
    return base / "tagtorch"


@dataclass(frozen=True)
class Archive:
    """An official dataset archive and the files a loader needs from it.

    Attributes:
        url: where the archive is published.
        sha256: hex SHA-256 of the archive, or None if unknown (then the download is not
            verified and a warning is logged).
        folder: name of the dataset's folder inside the data home.
        files: the files the loader needs; an entry that is a tuple of names is satisfied by
            any one of them (e.g. a timestamps file or its date-column variant).
        name: human-readable dataset name for messages.
        file_sha256: hex SHA-256 of files of the archive (names relative to its top-level
            folder), checked after extraction; files without an entry are not checked.
    """

    url: str
    sha256: str | None
    folder: str
    files: tuple[str | tuple[str, ...], ...]
    name: str = ""
    file_sha256: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def filename(self) -> str:
        """File name of the archive, from its URL."""
        return PurePosixPath(urlparse(self.url).path).name or f"{self.folder}.zip"

    @property
    def label(self) -> str:
        """The name used in messages."""
        return self.name or self.folder

    def missing_files(self, folder: str | Path) -> list[str]:
        """Needed files absent from ``folder`` (alternatives are joined with ' or ')."""
        folder = Path(folder)
        missing = []
        for entry in self.files:
            options = (entry,) if isinstance(entry, str) else entry
            if not any((folder / option).is_file() for option in options):
                missing.append(" or ".join(options))
        return missing


def _manual_hint(archive: Archive, target: Path) -> str:
    needed = ", ".join(" or ".join((e,) if isinstance(e, str) else e) for e in archive.files)
    return (
        f"Download {archive.url} by hand and extract it so that {target}/ holds {needed} "
        f"(or point data_dir / ${DATA_DIR_ENV} at a folder that has a {archive.folder}/ "
        "sub-folder with these files)."
    )


def ensure_archive(
    archive: Archive,
    data_dir: str | Path | None = None,
    download: bool = True,
    progress: bool = True,
) -> Path:
    """Returns the dataset folder, downloading and extracting the archive when needed.

    Args:
        archive: the dataset's archive spec.
        data_dir: data home (see :func:`data_home`).
        download: if False, never touch the network: missing files are an error.
        progress: show a tqdm progress bar while downloading.

    Returns:
        ``<data home>/<archive.folder>``, holding every needed file.

    Raises:
        DatasetNotFoundError: files are missing and ``download`` is False, or the archive
            does not contain them.
        ChecksumError: the downloaded archive's SHA-256 differs from ``archive.sha256``, or
            an extracted file's from its entry in ``archive.file_sha256``.
        DownloadError: the archive could not be fetched or extracted.
    """
    root = data_home(data_dir)
    target = root / archive.folder
    missing = archive.missing_files(target)
    if not missing:
        return target
    if not download:
        raise DatasetNotFoundError(
            f"{archive.label}: {target}/ lacks {', '.join(missing)} and download=False. "
            + _manual_hint(archive, target)
        )
    created = _make_folders(root)
    target_existed = target.exists()
    part = root / f".{archive.filename}.part"
    succeeded = False
    try:
        _remove_stale(root, archive)
        log.info("%s: downloading %s", archive.label, archive.url)
        fetch(archive.url, part, sha256=archive.sha256, progress=progress,
              hint=_manual_hint(archive, target))
        extract(part, target, url=archive.url, check=lambda folder: _check_extracted(
            archive, folder))
        succeeded = True
    finally:
        part.unlink(missing_ok=True)
        if not succeeded:
            if not target_existed and target.is_dir() and not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)
            for folder in reversed(created):  # deepest first; only if nothing else is there
                try:
                    folder.rmdir()
                except OSError:
                    break
    return target


def _make_folders(root: Path) -> list[Path]:
    """Creates ``root`` and its missing parents; returns those created, outermost first."""
    absent = []
    folder = root
    while not folder.exists() and folder != folder.parent:
        absent.append(folder)
        folder = folder.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DownloadError(f"cannot create the data folder {root}: "
                            f"{exc.strerror or exc}") from exc
    return list(reversed(absent))


def _remove_stale(root: Path, archive: Archive) -> None:
    """Removes what a killed download of ``archive`` left in ``root``."""
    leftovers = [root / f".{archive.filename}.part", root / f".{archive.folder}.extract",
                 *root.glob(f".{_glob_escape(archive.filename)}.*.part")]
    for path in leftovers:
        if path.is_dir() and not path.is_symlink():
            log.info("removing %s, left by an interrupted download", path)
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists() or path.is_symlink():
            log.info("removing %s, left by an interrupted download", path)
            path.unlink(missing_ok=True)


def _glob_escape(text: str) -> str:
    """``text`` with the glob metacharacters ``*?[`` escaped, for :meth:`Path.glob`."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _check_extracted(archive: Archive, folder: Path) -> None:
    missing = archive.missing_files(folder)
    if missing:
        raise DatasetNotFoundError(
            f"{archive.label}: the archive {archive.url} does not contain "
            f"{', '.join(missing)}; nothing was extracted."
        )
    verify_files(archive, folder, source=archive.url)


def verify_files(archive: Archive, folder: str | Path, source: str = "") -> None:
    """Checks the SHA-256 of each file of ``folder`` listed in ``archive.file_sha256``.

    Files without a known digest, and listed files absent from the folder, are not checked.

    Args:
        archive: the archive spec holding the digests.
        folder: the dataset folder (or an extracted archive).
        source: where the files came from (the archive URL), for messages; by default the
            message names the file's path.

    Raises:
        ChecksumError: a file's digest differs from the listed one.
    """
    folder = Path(folder)
    for name, expected in archive.file_sha256.items():
        path = folder / name
        if not path.is_file():
            continue
        got = _file_sha256(path)
        if got != expected.lower():
            where = f"{name} in {source}" if source else str(path)
            raise ChecksumError(
                f"{where}: expected SHA-256 {expected.lower()} (the official {archive.label} "
                f"file), got {got}; the copy is corrupt or was modified"
                + ("; nothing was extracted" if source else ""))


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(
    url: str,
    destination: str | Path,
    sha256: str | None = None,
    progress: bool = True,
    timeout: float = 60.0,
    hint: str = "",
) -> str:
    """Downloads ``url`` to ``destination`` and checks its SHA-256.

    Args:
        url: http(s):// or file:// address.
        destination: file to write (replaced: removed, then created new). It is deleted
            again if the check fails.
        sha256: expected hex digest; None skips the check with a logged warning.
        progress: show a tqdm progress bar.
        timeout: socket timeout in seconds.
        hint: sentence appended to network errors (where to place the files by hand).

    Returns:
        The SHA-256 hex digest of the downloaded file.

    Raises:
        DownloadError: the URL could not be read.
        ChecksumError: the digest differs from ``sha256``.
    """
    destination = Path(destination)
    digest = hashlib.sha256()
    try:  # created new (a link planted at the name is refused, never written through)
        destination.unlink(missing_ok=True)
        out_file = os.fdopen(os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                                     | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644), "wb")
    except OSError as exc:
        raise DownloadError(f"cannot write the download to {destination}: "
                            f"{exc.strerror or exc}") from exc
    try:
        with out_file, urllib.request.urlopen(url, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                      desc=PurePosixPath(urlparse(url).path).name or url,
                      disable=not progress, leave=False) as bar:
                while chunk := response.read(_CHUNK):
                    out_file.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
    except BaseException as exc:
        destination.unlink(missing_ok=True)
        if not isinstance(exc, (urllib.error.URLError, OSError, ValueError)):
            raise  # KeyboardInterrupt and the like, after removing the partial file
        reason = exc if isinstance(exc, urllib.error.HTTPError) else getattr(exc, "reason", exc)
        raise DownloadError(f"could not download {url}: {reason}. {hint}".rstrip()) from exc
    got = digest.hexdigest()
    if sha256 is None:
        log.warning("%s was not verified (no known SHA-256); its SHA-256 is %s", url, got)
    elif got.lower() != sha256.lower():
        destination.unlink(missing_ok=True)
        raise ChecksumError(
            f"checksum mismatch for {url}: expected SHA-256 {sha256.lower()}, got {got}. "
            "The download is corrupt or the archive changed upstream; nothing was extracted."
        )
    return got


def extract(archive_path: str | Path, target: str | Path, url: str = "",
            check: Callable[[Path], None] | None = None) -> Path:
    """Extracts a zip archive into ``target``, flattening a single inner folder.

    Archives whose entries sit at the top level and archives holding one folder (such as
    ``ml-latest-small/...``) both end with the files directly in ``target``. The archive is
    first extracted into ``.<target name>.extract/`` beside ``target`` (removed afterwards,
    however extraction ends); only when that succeeded and ``check`` accepted it are its files
    moved into ``target``, replacing existing files of the same name; other files in
    ``target`` are kept.

    Args:
        archive_path: the zip file.
        target: the dataset folder (created if needed).
        url: the archive's address, for error messages.
        check: called with the extracted (flattened) folder before anything is moved into
            ``target``; an exception it raises aborts the extraction.

    Returns:
        ``target``.

    Raises:
        DownloadError: the file is not a zip archive or has an entry outside the folder.
    """
    archive_path, target = Path(archive_path), Path(target)
    source_name = url or str(archive_path)
    if not zipfile.is_zipfile(archive_path):
        raise DownloadError(f"{source_name} is not a zip archive")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.extract"
    if staging.is_dir() and not staging.is_symlink():
        shutil.rmtree(staging)
    elif staging.exists() or staging.is_symlink():
        staging.unlink()
    try:
        staging.mkdir()
        try:
            with zipfile.ZipFile(archive_path) as zf:
                _check_members(zf.namelist(), source_name)
                zf.extractall(staging)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise DownloadError(f"could not extract {source_name}: {exc}") from exc
        entries = [p for p in staging.iterdir() if p.name not in _IGNORED_ENTRIES]
        source = entries[0] if len(entries) == 1 and entries[0].is_dir() else staging
        if check is not None:
            check(source)
        target.mkdir(parents=True, exist_ok=True)
        for item in source.iterdir():
            if item.name in _IGNORED_ENTRIES:
                continue
            dest = target / item.name
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            elif dest.exists() or dest.is_symlink():
                dest.unlink()
            shutil.move(str(item), str(dest))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _check_members(names: Sequence[str], source_name: str) -> None:
    """Refuses absolute paths and ``..`` components in archive member names."""
    for name in names:
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
            raise DownloadError(f"{source_name}: unsafe path {name!r} in the archive")
