"""On-disk caches: the fingerprint of the code that fills them, and what they hold.

Every on-disk cache entry (candidate sets, processed tags and texts) and every run piece that a
resumed run reuses is keyed by :func:`code_fingerprint` of the code that produced it, besides
the data and the settings: a digest of the tagtorch version and of the source files of the
modules that shape its content. After an upgrade or an edit of that code, older entries are
never read again; they stay on disk until ``python -m tagtorch.cache clear`` removes them
(``python -m tagtorch.cache info`` says how large the caches are).

The caches live in one folder per kind (:data:`KINDS`) under the user cache folder
(:func:`tagtorch.data.download.user_cache_dir`), which may also hold downloaded datasets; only
the files whose names a kind writes (an entry, or the hidden partial file of an interrupted
write) are counted or removed here, and symbolic links are never followed.

Layer 0: nothing of tagtorch is imported but its version.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tagtorch.storage import partial_of
from tagtorch.version import __version__

__all__ = ["KINDS", "CacheKind", "CacheUsage", "cache_entries", "cache_usage", "clear_caches",
           "code_fingerprint", "describe_caches", "format_size"]

log = logging.getLogger(__name__)

SOURCE_ROOT = Path(__file__).resolve().parent.parent
"""The folder of the ``tagtorch`` package, whose source files :func:`code_fingerprint` reads."""


@dataclass(frozen=True)
class CacheKind:
    """One kind of cache entry: its folder under the cache root and the names it writes.

    Attributes:
        folder: the folder's name under the cache root.
        entry: the full match of an entry's file name.
        what: what the entries hold, for messages.
    """

    folder: str
    entry: re.Pattern[str]
    what: str

    def recognizes(self, name: str) -> bool:
        """Whether a file name is one of this kind's entries or the partial file of one."""
        return self.entry.fullmatch(partial_of(name) or name) is not None


KINDS: dict[str, CacheKind] = {kind.folder: kind for kind in (
    CacheKind("candidates", re.compile(r"[0-9a-f]{32}\.npz"), "candidate sets"),
    CacheKind("text", re.compile(r"[^/]+-[0-9a-f]{24}\.npz"), "processed tags and texts"),
)}
"""The kinds of cache entries, by folder (``tagtorch.candidates.cache``, ``tagtorch.data.text``)."""


@dataclass(frozen=True)
class CacheUsage:
    """The recognized files of one cache folder.

    Attributes:
        kind: the folder's name (a key of :data:`KINDS`).
        entries: how many files.
        size: their total size in bytes.
    """

    kind: str
    entries: int
    size: int

    def summary(self) -> str:
        """The count and size in words.

        Example:
            >>> CacheUsage("text", 2, 3_500).summary()
            '2 entries, 3500 bytes (3.5 kB)'
        """
        return f"{_entries(self.entries)}, {self.size} bytes ({format_size(self.size)})"


def code_fingerprint(*modules: str) -> str:
    """A digest of the tagtorch version and the source files of some of its modules.

    Each name is a dotted module (``"tagtorch.data.text"``: its ``.py`` file) or package
    (``"tagtorch.candidates"``: every ``.py`` file under it); ``"tagtorch"`` is the whole
    package. The files are hashed sorted by their path relative to the package folder, each
    as its path, length and bytes, so an edit, a new file or a renamed file changes the
    digest. Memoized per process: code edited during a run takes effect in the next process
    anyway.

    Args:
        modules: the modules and packages whose code shapes what is cached.

    Returns:
        16 hex digits.

    Raises:
        ValueError: a name that is not a tagtorch module or package.
    """
    return _fingerprint(SOURCE_ROOT, tuple(modules), __version__)


@functools.cache
def _fingerprint(root: Path, modules: tuple[str, ...], version: str) -> str:
    """:func:`code_fingerprint` of the package in ``root`` at a version."""
    digest = hashlib.sha256(f"tagtorch {version}\0".encode())
    for relative in sorted(_source_files(root, modules)):
        data = (root / relative).read_bytes()
        digest.update(f"{relative}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def _source_files(root: Path, modules: Iterable[str]) -> set[str]:
    """The ``.py`` files of some modules and packages, relative to the package folder."""
    files: set[str] = set()
    for module in modules:
        parts = module.split(".")
        path = root.joinpath(*parts[1:])
        if parts[0] == "tagtorch" and path.is_dir():
            files |= {p.relative_to(root).as_posix() for p in path.rglob("*.py")}
        elif parts[0] == "tagtorch" and len(parts) > 1 and path.with_suffix(".py").is_file():
            files.add(path.with_suffix(".py").relative_to(root).as_posix())
        else:
            raise ValueError(f"{module!r} is not a tagtorch module or package (in {root})")
    return files


def cache_entries(root: Path, kind: CacheKind) -> list[Path]:
    """The files of one kind under the cache root, sorted; symbolic links are not followed.

    A folder of that kind that is a symbolic link is skipped with a warning, and so are
    entries that are links: nothing outside the cache root is ever counted or removed.
    """
    folder = root / kind.folder
    if folder.is_symlink():
        log.warning("%s is a symbolic link: not followed", folder)
        return []
    if not folder.is_dir():
        return []
    with os.scandir(folder) as found:
        return sorted(Path(entry.path) for entry in found
                      if entry.is_file(follow_symlinks=False) and kind.recognizes(entry.name))


def cache_usage(root: Path) -> list[CacheUsage]:
    """How many files each kind of cache holds under the root, and their size in bytes."""
    usage = []
    for name, kind in KINDS.items():
        files = cache_entries(root, kind)
        usage.append(CacheUsage(name, len(files), sum(f.lstat().st_size for f in files)))
    return usage


def format_size(size: int) -> str:
    """A size in bytes with a decimal unit.

    Example:
        >>> format_size(999), format_size(3_500), format_size(1_234_567_890)
        ('999 B', '3.5 kB', '1.2 GB')
    """
    if size < 1000:
        return f"{size} B"
    value = float(size)
    for unit in ("kB", "MB", "GB", "TB"):
        value /= 1000
        if round(value, 1) < 1000 or unit == "TB":
            break
    return f"{value:.1f} {unit}"


def describe_caches(root: Path) -> str:
    """One line for a run's log: where the caches live and how large they are.

    Example: ``caches: /root/.cache/tagtorch (candidates 1.2 GB in 34 entries, text 3.0 MB
    in 2 entries)``.
    """
    parts = ", ".join(f"{u.kind} {format_size(u.size)} in {_entries(u.entries)}"
                      for u in cache_usage(root))
    return f"caches: {root} ({parts})"


def _entries(count: int) -> str:
    """``"1 entry"``, ``"2 entries"``."""
    return f"{count} {'entry' if count == 1 else 'entries'}"


def clear_caches(root: Path, kinds: Iterable[str]) -> CacheUsage:
    """Removes the recognized files of some kinds of cache under the root.

    Args:
        root: the cache root.
        kinds: keys of :data:`KINDS`.

    Returns:
        What was removed (``kind`` is the kinds joined by ``+``).

    Raises:
        KeyError: an unknown kind.
        OSError: a file that could not be removed (those before it are gone).
    """
    names = list(kinds)
    removed, size = 0, 0
    for name in names:
        for path in cache_entries(root, KINDS[name]):
            length = path.lstat().st_size
            path.unlink()
            removed, size = removed + 1, size + length
    return CacheUsage("+".join(names), removed, size)
