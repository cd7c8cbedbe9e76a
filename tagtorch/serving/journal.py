r"""The journal of a served recommender: acknowledged posts kept until the data holds them.

``journal.jsonl`` in the artifact folder holds one record a line, one record per accepted
request: ``{"posts": [{"user", "object", "tags", "texts"}, ...]}`` (the schema of ``POST
/v1/posts``, :class:`~tagtorch.serving.schema.PostBatch`). A batch is encoded whole before a
byte is written and written as one line, so it is applied all or nothing. Records are ASCII
JSON: Unicode line separators (U+2028, U+2029, U+0085) are escaped, and lines are split on
``\n`` only.

Writing (:meth:`Journal.append`) starts at the end of the last whole record: a torn tail left
by a failed write or a crash (never acknowledged) is cut first, so it cannot swallow the next
record. The record is flushed to disk (fsync) before the call returns; a failed write (a full
disk, a file-size limit) cuts its own partial bytes and raises :class:`JournalWriteError`
naming the file and what to do (:func:`write_problem`), and nothing is applied. Reading
(:meth:`Journal.read`) validates every record with the endpoint's schema and leaves out a torn
last line with a warning; a last line that is a whole record without its newline (an editor's
save) is a record, and the next append starts a new line after it. Any other bad line is an
error naming the file and line. The journal must be a plain file: a symbolic link is refused,
when reading and when writing.

Compaction (:func:`compact_journal`) writes the journaled posts into the folder's data. The
journal is first moved aside as a numbered segment (``journal.compacting-N.jsonl``,
:meth:`Journal.rotate`), so that a service goes on journaling new posts into a fresh
``journal.jsonl`` while the data is written; the segments go to ``backup/`` once the data
holds them. Loading replays the segments, then the journal. A crash at any step loses no post
(a post replayed over data that holds it changes nothing); :func:`finish_compaction` completes
or drops a compaction cut short, and a folder whose compaction was cut short after its copy
was ready is refused by readers with the way to finish it (:func:`check_no_compaction_left`),
its manifest missing too (a crash between moving the old one out and the new one in). A
compaction that cannot write (a full disk, a file-size limit) raises :class:`CompactionError`
in one line, naming the file and what to do; the journal keeps every post meanwhile.

:func:`lock_folder` keeps two processes from writing one artifact folder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tagtorch.errors import UnreadableFileError
from tagtorch.serving.schema import Post, PostBatch
from tagtorch.storage import MANIFEST_FILE

__all__ = ["BACKUP_FOLDER", "COMPACTION_FOLDER", "JOURNAL_FILE", "CompactionError", "Journal",
           "JournalWriteError", "check_no_compaction_left", "check_writable", "compact_journal",
           "encode_record", "finish_compaction", "lock_folder", "replay", "sync_folder",
           "sync_tree", "write_problem"]

log = logging.getLogger(__name__)

JOURNAL_FILE = "journal.jsonl"
COMPACTION_FOLDER = ".compaction"
"""Where :func:`compact_journal` writes the new data before it replaces the old."""
BACKUP_FOLDER = "backup"
"""Where the data and journal segments replaced by the last compaction are kept."""
_READY = "READY"
_SEGMENT_STEM = "journal.compacting-"
_SEGMENT = re.compile(r"journal\.compacting-([0-9]{1,9})\.jsonl")


_REMEDIES: dict[int | None, str] = {
    errno.EFBIG: "raise the file-size limit (ulimit -f)", errno.ENOSPC: "free disk space",
    errno.EDQUOT: "free disk space (the disk quota is full)",
    **dict.fromkeys((errno.EACCES, errno.EPERM, errno.EROFS), "make the folder writable")}
"""What to do about a failed write, by its ``errno`` (:func:`write_problem`)."""


class JournalWriteError(RuntimeError):
    """A record could not be stored (disk full, no permission, ...): nothing was applied."""


class CompactionError(RuntimeError):
    """A compaction could not write the data (disk full, ...): the journal keeps every post."""


def write_problem(error: OSError) -> str:
    """``"reason; remedy"`` of a failed write, for a one-line message.

    Example:
        >>> write_problem(OSError(errno.EFBIG, "File too large"))
        'File too large; raise the file-size limit (ulimit -f)'
        >>> write_problem(OSError(errno.ENOSPC, "No space left on device"))
        'No space left on device; free disk space'
    """
    remedy = _REMEDIES.get(error.errno, "check the disk and the folder")
    return f"{error.strerror or error}; {remedy}"


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
    """The journal file of one artifact folder, and its segments (module docstring).

    Args:
        path: the journal's path (``FOLDER/journal.jsonl``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._end: int | None = None  # bytes of whole records; beyond: a torn tail
        self._unended = False  # the last whole record lacks its newline

    def segments(self) -> list[Path]:
        """The segments a compaction moved aside and the data does not hold yet, oldest first."""
        found = [entry for entry in self.path.parent.iterdir() if _SEGMENT.fullmatch(entry.name)]
        return sorted(found, key=_segment_number)

    def read(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """The journaled batches, oldest first, each with its ``"file:line"``.

        The segments come first, then the journal; a torn tail is left out.

        Raises:
            UnreadableFileError: a symbolic link, or a line that is not a valid record.
        """
        batches: list[tuple[str, list[dict[str, Any]]]] = []
        for segment in self.segments():
            batches += _read_file(segment)[0]
        records, self._end, self._unended = _read_file(self.path)
        return batches + records

    def append(self, record: bytes) -> None:
        """Writes one record (:func:`encode_record`) and flushes it to disk.

        Raises:
            JournalWriteError: the record is not stored (its partial bytes are cut).
            UnreadableFileError: the journal is a symbolic link, or unreadable.
        """
        size = self.path.stat().st_size if self.path.exists() else 0
        if self._end is None or size < self._end:  # not read yet, or replaced meanwhile
            _, self._end, self._unended = _read_file(self.path)
        _refuse_link(self.path)
        end = self._end
        if self._unended:
            record = b"\n" + record
        try:
            descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
                                 | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise JournalWriteError(f"{self.path}: cannot be opened for writing: "
                                    f"{write_problem(error)}") from None
        try:
            if os.fstat(descriptor).st_size != end:
                os.ftruncate(descriptor, end)  # the torn tail of a failed write or a crash
            os.lseek(descriptor, end, os.SEEK_SET)
            view = memoryview(record)
            while view:
                view = view[os.write(descriptor, view):]
            os.fsync(descriptor)
            if end == 0:  # the file's entry in its folder must reach the disk too
                sync_folder(self.path.parent)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, end)
            raise JournalWriteError(f"{self.path}: the posts were not stored: "
                                    f"{write_problem(error)}") from None
        finally:
            os.close(descriptor)
        self._end, self._unended = end + len(record), False

    def rotate(self, unapplied: Sequence[bytes] = ()) -> bool:
        """Moves the journal aside as the next segment, for a compaction (module docstring).

        The caller keeps every writer out meanwhile. ``unapplied``: records of the journal
        whose posts the recommender has not applied yet; they are written again into the fresh
        journal, since the data the compaction writes will not hold them.

        Returns:
            Whether a segment waits to be written into the data.
        """
        _refuse_link(self.path)
        if self.path.exists() and self.path.stat().st_size:
            numbers = [_segment_number(entry) for entry in self.segments()]
            target = self.path.with_name(f"{_SEGMENT_STEM}{max(numbers, default=0) + 1}.jsonl")
            os.replace(self.path, target)
            self._end, self._unended = 0, False  # the journal is new from here, whatever follows
            sync_folder(self.path.parent)
        self._end, self._unended = 0, False
        if unapplied:
            self.append(b"".join(unapplied))  # one write, one fsync, under the writers' lock
        return bool(self.segments())


def _segment_number(path: Path) -> int:
    """The number N of a segment ``journal.compacting-N.jsonl``."""
    return int(path.name.removeprefix(_SEGMENT_STEM).removesuffix(".jsonl"))


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise UnreadableFileError(f"{path}: a symbolic link; the journal must be a plain file "
                                  f"of the artifact folder")


def _read_file(path: Path) -> tuple[list[tuple[str, list[dict[str, Any]]]], int, bool]:
    """A journal file's records, the length of its whole records, whether the last is unended.

    Each record comes with its ``"file:line"``; unended: the last whole record lacks its
    newline.
    """
    _refuse_link(path)
    batches: list[tuple[str, list[dict[str, Any]]]] = []
    end, unended = 0, False
    if not path.exists():
        return batches, end, unended
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            where = f"{path}:{number}"
            if not line.endswith(b"\n"):
                try:  # whole JSON without its newline is a record (checked); else a torn write
                    json.loads(line.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                    log.warning("%s: an incomplete last record (a write cut short, never "
                                "acknowledged) is left out", where)
                    break
                batches.append((where, _decode_record(line, where)))
                end, unended = end + len(line), True
                break
            end += len(line)
            if line.strip():
                batches.append((where, _decode_record(line, where)))
    return batches, end, unended


def replay(journal: Journal, check: Callable[[list[dict[str, Any]]], tuple[list[dict[str, Any]],
                                                                         bytes]]
           ) -> list[dict[str, Any]]:
    """Every journaled post, each record checked as its request was.

    ``check`` is the recommender's ``check_posts``: a record it refuses is an error naming the
    file and line.

    Raises:
        UnreadableFileError: a line that is not a valid record, or a record of posts the
            recommender does not take.
    """
    replayed = []
    for where, batch in journal.read():
        try:
            replayed += check(batch)[0]
        except ValueError as error:
            raise UnreadableFileError(f"{where}: posts this recommender does not take "
                                      f"({error})") from None
    return replayed


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
        raise RuntimeError(f"{folder}: posts cannot be stored here: {write_problem(error)}, "
                           f"or serve it with --read-only") from None


def compact_journal(journal: Journal | None, lock: threading.Lock,
                    save: Callable[[Path], Path], rotate: bool = True) -> bool:
    """Writes a recommender's journaled posts into its folder's data, atomically.

    The journal becomes a segment (:meth:`Journal.rotate`; ``rotate=False``: the caller did
    it, keeping its writers out, and new posts go on into a fresh journal). The whole artifact
    is written again (``save``) into ``FOLDER/.compaction`` and flushed to disk; a ``READY``
    marker then makes :func:`finish_compaction` move its files over the folder's, the replaced
    files and the segments going to ``FOLDER/backup/`` (the previous backup is dropped). A
    crash before the marker leaves the folder as it was (the next start drops the half-written
    copy, and replays the segments); after it, the next start finishes the move. A journal
    replayed over data that already holds it changes nothing (a post adds tags to a set), so
    no step can lose or double a post. A write that fails (a full disk, a file-size limit)
    drops the copy and leaves the folder as it was, the segments holding the posts.

    Args:
        journal: the recommender's journal (None: nothing to do).
        lock: the recommender's writer lock, held while its state is written.
        save: writes the recommender's artifact into a folder (without taking ``lock``).
        rotate: whether to move the journal aside first.

    Returns:
        Whether anything was written (False: no journal, or nothing journaled).

    Raises:
        CompactionError: a write failed, naming the file and what to do.
    """
    if journal is None:
        return False
    folder = journal.path.parent
    staging, backup = folder / COMPACTION_FOLDER, folder / BACKUP_FOLDER
    with lock:
        try:
            if not (journal.rotate() if rotate else journal.segments()):
                return False
            for old in (staging, backup):
                shutil.rmtree(old, ignore_errors=True)
            backup.mkdir()
            save(staging)
            sync_tree(staging)
            (staging / _READY).touch(exist_ok=False)  # O_EXCL: never a planted link
            sync_folder(staging)
        except OSError as error:
            shutil.rmtree(staging, ignore_errors=True)  # the folder is as it was: free the room
            raise CompactionError(
                f"{staging}: the journaled posts could not be written into the data: "
                f"{write_problem(error)}; the journal keeps every post, and the next start "
                f"compacts it") from None
        finish_compaction(folder)
    return True


def finish_compaction(folder: Path) -> None:
    """Completes or drops a compaction a crash cut short (:func:`compact_journal`).

    Every entry of the staged copy (the artifact's files and model folder, its manifest last)
    replaces the folder's; the journal's segments go to ``backup/``.

    Raises:
        CompactionError: a move failed, naming the folder, what to do and the way to finish.
    """
    try:
        _move_staged(folder)
    except OSError as error:
        raise CompactionError(
            f"{folder}: a compaction could not finish: {write_problem(error)}; then finish it "
            f"with `python -m tagtorch.serve {folder} --finish-compaction` (no post was "
            f"lost)") from None


def _move_staged(folder: Path) -> None:
    """:func:`finish_compaction`'s moves (an ``OSError`` as it comes)."""
    staging, backup = folder / COMPACTION_FOLDER, folder / BACKUP_FOLDER
    if not staging.is_dir():
        return
    if not (staging / _READY).exists():  # cut short while it was written: the folder is whole
        shutil.rmtree(staging)
        return
    backup.mkdir(exist_ok=True)
    staged = sorted(entry.name for entry in staging.iterdir() if entry.name != _READY)
    for name in sorted(staged, key=lambda n: n == MANIFEST_FILE):  # the manifest last
        if (folder / name).exists():
            os.replace(folder / name, backup / name)
        os.replace(staging / name, folder / name)
    for segment in Journal(folder / JOURNAL_FILE).segments():
        os.replace(segment, backup / segment.name)
    sync_folder(backup)
    sync_folder(folder)
    shutil.rmtree(staging)


def check_no_compaction_left(folder: Path) -> None:
    """Refuses a folder whose compaction was cut short after its new data was ready.

    Its files may be half old, half new until :func:`finish_compaction` runs (no post is lost:
    the new data and the journal's segments hold them all).

    Raises:
        UnreadableFileError: naming the folder and the way to finish the compaction.
    """
    if (folder / COMPACTION_FOLDER / _READY).exists():
        raise UnreadableFileError(
            f"{folder}: a compaction of the journal was cut short (a crash while the new data "
            f"replaced the old; no post was lost); finish it with `python -m tagtorch.serve "
            f"{folder} --finish-compaction`, then read the folder")

