r"""The journal of a served tag recommender: acknowledged posts kept until the data holds them.

``journal.jsonl`` in the artifact folder holds one record a line, one record per accepted
request: ``{"posts": [{"user", "object", "tags", "texts"}, ...]}`` (the schema of ``POST
/v1/posts``, :class:`~tagtorch.serving.schema.PostBatch`). A batch is encoded whole before a
byte is written and written as one line, so it is applied all or nothing. Records are ASCII
JSON: Unicode line separators (U+2028, U+2029, U+0085) are escaped, and lines are split on
``\n`` only.

Writing (:meth:`Journal.append`) starts at the end of the last whole record: a torn tail left
by a failed write or a crash (never acknowledged) is cut first, so it cannot swallow the next
record. The record is flushed to disk (fsync) before the call returns; a failed write cuts its
own partial bytes and raises :class:`JournalWriteError`, and nothing is applied. Reading
(:meth:`Journal.read`) validates every record with the endpoint's schema and leaves out a torn
last line with a warning; any other bad line is an error naming the file and line. The
journal must be a plain file: a symbolic link is refused, when reading and when writing.

:func:`lock_folder` keeps two processes from writing one artifact folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tagtorch.serving.schema import Post, PostBatch
from tagtorch.storage import UnreadableFileError

__all__ = ["Journal", "JournalWriteError", "check_writable", "encode_record", "lock_folder",
           "sync_folder", "sync_tree"]

log = logging.getLogger(__name__)


class JournalWriteError(RuntimeError):
    """A record could not be stored (disk full, no permission, ...): nothing was applied."""


def encode_record(posts: Sequence[Mapping[str, Any]]) -> bytes:
    """One journal line for a batch of posts (as :meth:`TagRecommender.add_posts` takes them).

    Raises:
        ValueError: a post the schema refuses (``pydantic.ValidationError``), naming it.
    """
    checked = []
    for position, post in enumerate(posts):
        try:
            checked.append(Post.from_plain(dict(post)).model_dump(exclude_none=True))
        except ValidationError as error:
            raise ValueError(f"post {position}: {_first_problem(error)}") from None
    line = json.dumps({"posts": checked}, ensure_ascii=True, allow_nan=False,
                      separators=(",", ":"))
    return (line + "\n").encode("ascii")


def _first_problem(error: ValidationError) -> str:
    """``"field: message"`` of a validation error's first problem."""
    problem = error.errors()[0]
    where = ".".join(str(part) for part in problem["loc"])
    return f"{where}: {problem['msg']}" if where else str(problem["msg"])


def _decode_record(line: bytes, where: str) -> list[dict[str, Any]]:
    """The posts of one journal line (plain form); a line of one post (older journals) too."""
    try:
        value = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise UnreadableFileError(f"{where}: not a JSON record") from None
    try:
        if isinstance(value, dict) and "posts" not in value:  # one post a line, before 0.2
            return [Post.from_plain(value).plain()]
        return [post.plain() for post in PostBatch.model_validate(value).posts]
    except ValidationError as error:
        raise UnreadableFileError(f"{where}: not a valid record of posts "
                                  f"({_first_problem(error)})") from None


class Journal:
    """The journal file of one artifact folder (module docstring).

    Args:
        path: the journal's path (``FOLDER/journal.jsonl``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._end: int | None = None  # bytes of whole records; beyond: a torn tail

    def restart(self) -> None:
        """Forgets the file's length: after a compaction moved it away, appends start anew."""
        self._end = None

    def _refuse_link(self) -> None:
        if self.path.is_symlink():
            raise UnreadableFileError(f"{self.path}: a symbolic link; the journal must be a "
                                      f"plain file of the artifact folder")

    def read(self) -> list[list[dict[str, Any]]]:
        """The journaled batches, oldest first (posts in plain form); a torn tail is left out.

        Raises:
            UnreadableFileError: a symbolic link, or a line that is not a valid record.
        """
        self._refuse_link()
        batches: list[list[dict[str, Any]]] = []
        end = 0
        if self.path.exists():
            with open(self.path, "rb") as handle:
                for number, line in enumerate(handle, 1):
                    if not line.endswith(b"\n"):
                        log.warning("%s:%d: an incomplete last record (a write cut short, "
                                    "never acknowledged) is left out", self.path, number)
                        break
                    end += len(line)
                    if line.strip():
                        batches.append(_decode_record(line, f"{self.path}:{number}"))
        self._end = end
        return batches

    def append(self, record: bytes) -> None:
        """Writes one record (:func:`encode_record`) and flushes it to disk.

        Raises:
            JournalWriteError: the record is not stored (its partial bytes are cut).
            UnreadableFileError: the journal is a symbolic link, or unreadable.
        """
        if self._end is None:
            self.read()
        self._refuse_link()
        end = int(self._end or 0)
        try:
            descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
                                 | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise JournalWriteError(f"{self.path}: cannot be opened for writing "
                                    f"({error.strerror or error})") from None
        try:
            if os.fstat(descriptor).st_size != end:
                os.ftruncate(descriptor, end)  # the torn tail of a failed write or a crash
            os.lseek(descriptor, end, os.SEEK_SET)
            view = memoryview(record)
            while view:
                view = view[os.write(descriptor, view):]
            os.fsync(descriptor)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, end)
            raise JournalWriteError(f"{self.path}: the posts were not stored "
                                    f"({error.strerror or error})") from None
        finally:
            os.close(descriptor)
        if end == 0:  # the file's entry in its folder must reach the disk too
            sync_folder(self.path.parent)
        self._end = end + len(record)


def sync_folder(folder: Path) -> None:
    """Flushes a folder's entries (new, renamed or removed files) to disk."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def sync_tree(folder: Path) -> None:
    """Flushes every file and folder under ``folder`` (and itself) to disk."""
    for root, _, files in os.walk(folder):
        for name in files:
            descriptor = os.open(Path(root) / name, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        sync_folder(Path(root))


def lock_folder(folder: Path, exclusive: bool) -> int:
    """Locks an artifact folder for this process (released when the process ends).

    A writer takes an exclusive lock, a reader a shared one, so that no two services write
    one folder and no reader serves a folder another service changes.

    Returns:
        The descriptor that holds the lock (keep it open).

    Raises:
        RuntimeError: another process holds the folder, in one line.
    """
    descriptor = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(descriptor, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        why = ("a service that takes posts needs the folder alone" if exclusive
               else "and takes posts into it")
        raise RuntimeError(f"{folder}: another process serves this folder ({why}); stop it, "
                           f"or serve a copy") from None
    return descriptor


def check_writable(folder: Path, room: int = 1 << 16) -> None:
    """Refuses, in one line, a folder where posts could not be journaled.

    A probe file of ``room`` bytes is written, flushed and removed (a full disk fails it).

    Raises:
        RuntimeError: the folder (or its journal) is not writable, or the journal is a link.
    """
    journal = folder / "journal.jsonl"
    if journal.is_symlink():
        raise RuntimeError(f"{journal}: a symbolic link; the journal must be a plain file of "
                           f"the artifact folder")
    probe = folder / f".write-check-{os.getpid()}"
    try:
        descriptor = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(bytes(room))
            while view:
                view = view[os.write(descriptor, view):]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
            probe.unlink()
        if journal.exists() and not os.access(journal, os.W_OK):
            raise PermissionError(13, f"{journal.name} is read-only")
    except OSError as error:
        raise RuntimeError(f"{folder}: posts cannot be stored here ({error.strerror or error}); "
                           f"serve it with --read-only, or make it writable") from None
