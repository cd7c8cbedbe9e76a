"""Files tagtorch writes and reads back, without ever running code from disk.

Nothing here unpickles. A saved model (a ranker or an item model) is a folder::

    manifest.json   {"format": 1, "class": "tagtorch.rankers.trees.LambdaMARTRanker",
                     "settings": {...constructor arguments, JSON values...},
                     "files": {"model.txt": {"size": 12345, "sha256": "..."}},
                     ...model-specific entries (feature names, best epoch, curves)}
    model files     tensors (``torch.save`` of a flat ``{name: tensor}``, read with
                    ``weights_only=True``), ``.npz`` arrays (read with ``allow_pickle=False``)
                    or a library's native model file (LightGBM text, XGBoost JSON)

:func:`read_manifest` checks the format, the class and every listed file's size and SHA-256
before anything parses the files, so a truncated or altered file is refused before a library
(which may crash on it) reads it. Training checkpoints are read with :func:`read_checkpoint`
(``weights_only=True``: tensors and primitive containers only; a planted pickle payload raises
before any of its code runs). Every failure is an :class:`UnreadableFileError` naming the file.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import math
import os
import re
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tagtorch.errors import UnreadableFileError
from tagtorch.version import __version__

__all__ = ["ARRAYS_FILE", "CONFIG_KEYS", "MANIFEST_FILE", "atomic_write", "check_codes",
           "check_count", "check_ragged", "check_strings", "class_name", "file_record",
           "load_array_model", "load_arrays", "load_tensors", "model_folder", "plain_json",
           "read_checkpoint", "read_json", "read_manifest", "reading", "refuse_config_nodes",
           "save_array_model", "save_arrays",
           "save_tensors", "saved_entries", "trusted_class", "write_json", "write_manifest"]

log = logging.getLogger(__name__)

MANIFEST_FILE = "manifest.json"
"""Name of the JSON manifest in a saved model's folder."""

ARRAYS_FILE = "arrays.npz"
"""Name of the arrays file of a model saved by :func:`save_array_model`."""

_FORMAT = 1


def _describe(error: BaseException) -> str:
    """The first line of an exception, with its type (torch's messages run long)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def class_name(kind: type) -> str:
    """The dotted name recorded in a manifest, e.g. ``tagtorch.itemrec.dorank.DoRank``."""
    return f"{kind.__module__}.{kind.__qualname__}"


def plain_json(value: Any) -> Any:
    """Plain JSON-able containers of ``value`` (Hydra passes DictConfig/ListConfig; paths: str).

    Example:
        >>> plain_json({"hidden": (64, 64), "dir": Path("runs")})
        {'hidden': [64, 64], 'dir': 'runs'}
    """
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [plain_json(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def trusted_class(target: str, modules: tuple[str, ...], kinds: tuple[type, ...],
                  what: str) -> type:
    """The class a config or manifest names, imported only from ``modules``.

    A name read from a file decides what gets imported; it is honoured only inside the trusted
    module prefixes, and only when it names a subclass of one of ``kinds``.

    Args:
        target: the dotted name (``package.module.Class``).
        modules: the module prefixes it may come from.
        kinds: the classes it must subclass (one of them).
        what: the setting or file it was read from, for the messages.

    Raises:
        ValueError: naming ``what``, for a name outside ``modules``, no such class, or another
            kind of class.

    Example:
        >>> trusted_class("tagtorch.errors.UnreadableFileError", ("tagtorch.",), (ValueError,),
        ...               "example").__name__
        'UnreadableFileError'
    """
    module_name, _, name = str(target).rpartition(".")
    if not f"{module_name}.".startswith(modules):
        raise ValueError(f"{what}: {target!r} is not in {modules}")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError):
        raise ValueError(f"{what}: no class {target!r}") from None
    if not (isinstance(found, type) and issubclass(found, kinds)):
        raise ValueError(f"{what}: {target!r} is not a "
                         f"{' or '.join(kind.__name__ for kind in kinds)}")
    return found


CONFIG_KEYS = frozenset({"_target_", "_partial_", "_args_", "_recursive_", "_convert_"})
"""The keys that make a mapping a node Hydra's ``instantiate`` would build (or call)."""


def refuse_config_nodes(value: Any, what: str) -> None:
    """Raises if a config node (a mapping with a key of :data:`CONFIG_KEYS`) is in ``value``.

    Settings read from a file are plain data: a node there would name something to import and
    call (``hydra.utils.instantiate`` builds nested nodes recursively), so it is refused at any
    depth, before anything is built.

    Raises:
        ValueError: naming ``what`` and the path of the first node found.

    Example:
        >>> try:
        ...     refuse_config_nodes({"hidden": [64, {"_target_": "os.system"}]}, "settings")
        ... except ValueError as error:
        ...     print(str(error).split(" where")[0])
        settings.hidden[1]: a config node ('_target_')
    """
    stack: list[tuple[str, Any]] = [(what, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, Mapping):
            found = sorted(CONFIG_KEYS.intersection(item))
            if found:
                raise ValueError(f"{where}: a config node ({found[0]!r}) where plain data "
                                 f"belongs: nothing nested is built")
            stack.extend((f"{where}.{key}", child) for key, child in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(item))


def read_json(path: str | Path, keys: Sequence[str] | None = None) -> Any:
    """Parses a JSON file written by tagtorch.

    Args:
        path: the file.
        keys: if given, the file must hold a JSON object with (at least) these keys.

    Raises:
        UnreadableFileError: the file is missing, not UTF-8 or not JSON, or lacks ``keys``
            (naming it).
    """
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:  # ValueError: 4300+ digit integers
        raise UnreadableFileError(f"{path}: not a readable JSON file written by tagtorch "
                                  f"({_describe(error)})") from None
    if keys is not None and not (isinstance(value, dict) and set(keys) <= set(value)):
        raise UnreadableFileError(f"{path}: expected a JSON object with the keys "
                                  f"{sorted(keys)}")
    return value


def write_json(value: Any, path: str | Path) -> None:
    """Writes ``value`` (made plain by :func:`plain_json`) as a JSON file, atomically."""
    with atomic_write(path) as partial:
        partial.write_text(json.dumps(plain_json(value)), encoding="utf-8")


def file_record(path: str | Path) -> dict[str, Any]:
    """``{"size": bytes, "sha256": hex digest}`` of a file."""
    with open(path, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    return {"size": Path(path).stat().st_size, "sha256": digest}


def _record(path: Path) -> dict[str, Any]:
    """A file's record, or a model folder's: ``folder: true`` and its manifest's record."""
    if path.is_dir():
        return {"folder": True, **file_record(path / MANIFEST_FILE)}
    return file_record(path)


def model_folder(path: str | Path) -> Path:
    """Creates the folder a model is saved to; a file there (an older format) is replaced."""
    folder = Path(path)
    if folder.is_file() or folder.is_symlink():
        log.info("replacing %s, a model file of an older format, by a model folder", folder)
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_manifest(folder: str | Path, kind: type, settings: Mapping[str, Any],
                   files: Sequence[str], **extra: Any) -> Path:
    """Writes ``folder/manifest.json``: format, class, settings, files and tagtorch's version.

    Args:
        folder: the model folder (``files`` are already written in it).
        kind: the model's class.
        settings: constructor arguments (made plain JSON by :func:`plain_json`).
        files: names of the folder's model files; :func:`read_manifest` checks their size and
            SHA-256 before anything reads them. A name may be a saved model's folder (a
            wrapped model, e.g. xTReD's base ranker): its record is that of its own
            manifest, which pins its files in turn.
        **extra: further JSON entries (feature names, best epoch, learning curve, ...).

    Returns:
        The manifest's path.
    """
    folder = Path(folder)
    manifest = {"format": _FORMAT, "class": class_name(kind), "settings": plain_json(settings),
                "files": {name: _record(folder / name) for name in files},
                "tagtorch_version": __version__, **plain_json(extra)}
    path = folder / MANIFEST_FILE
    with atomic_write(path) as partial:
        partial.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return path


def saved_entries(folder: str | Path) -> list[str]:
    """The files and folders of a saved model's folder besides its manifest.

    A loader that reads whatever its folder holds passes them as ``required`` to
    :func:`read_manifest`, so that no file there escapes the manifest's digests.
    """
    if not Path(folder).is_dir():
        return []  # read_manifest names the missing manifest
    return sorted(entry.name for entry in Path(folder).iterdir() if entry.name != MANIFEST_FILE)


def read_manifest(folder: str | Path, kind: type, required: Sequence[str] = ()
                  ) -> dict[str, Any]:
    """Reads a model folder's manifest and verifies every file it lists.

    The manifest itself is not pinned by anything (a folder that holds it may be rewritten
    whole), so a loader names the files it reads in ``required``: a manifest that leaves one
    out (``"files": {}`` would verify nothing) is refused.

    Args:
        folder: the saved model's folder.
        kind: the class that loads it (only compared by name, never imported). Its settings
            must be plain data (:func:`refuse_config_nodes`) but for those the class builds
            itself from a trusted config (``config_settings``, ``factory_settings``:
            :class:`~tagtorch.settings.SignatureSettings`).
        required: the files (and model folders) the loader reads; each must be listed.

    Returns:
        The manifest (``format``, ``class``, ``settings``, ``files`` and the extras).

    Raises:
        UnreadableFileError: an unreadable manifest, another class, a config node among its
            settings, a required file it does not list, or a missing, truncated or altered
            file (the message names the file).
    """
    folder = Path(folder)
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise UnreadableFileError(f"{path}: no such file; {folder} is not a saved "
                                  f"{kind.__name__} folder")
    manifest = read_json(path)
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
        raise UnreadableFileError(f"{path}: expected a tagtorch manifest of format {_FORMAT}")
    if manifest.get("class") != class_name(kind):
        raise UnreadableFileError(f"{path}: holds a {manifest.get('class')!r}, expected "
                                  f"{class_name(kind)!r}")
    files = manifest.get("files")
    if not isinstance(files, dict) or not isinstance(manifest.get("settings"), dict):
        raise UnreadableFileError(f"{path}: expected 'settings' and 'files' objects")
    _check_plain_settings(path, kind, manifest["settings"])
    unlisted = [name for name in required if name not in files]
    if unlisted:
        raise UnreadableFileError(f"{path}: does not list {unlisted[0]!r} among its files, "
                                  f"which must pin every file read ({', '.join(required)})")
    for name, expected in files.items():
        data = folder / name
        if isinstance(expected, dict) and expected.get("folder"):
            data = data / MANIFEST_FILE
        if Path(name).name != name or not data.is_file():
            raise UnreadableFileError(f"{data}: listed in {path} but missing")
        found = _record(folder / name)
        if found != expected:
            raise UnreadableFileError(
                f"{data}: its size and SHA-256 ({found['size']}, {found['sha256'][:12]}…) differ "
                f"from those recorded at save time in {path}: the file is truncated or altered")
    return manifest


def _check_plain_settings(path: Path, kind: type, settings: dict[str, Any]) -> None:
    """Refuses a config node in a manifest's settings but where ``kind`` builds one itself."""
    built = set(getattr(kind, "config_settings", ())) | set(getattr(kind, "factory_settings", ()))
    try:
        for name, value in settings.items():
            if name not in built:
                refuse_config_nodes(value, f"settings.{name}")
    except ValueError as error:
        raise UnreadableFileError(f"{path}: {error}") from None


@contextmanager
def reading(folder: str | Path, what: str) -> Iterator[None]:
    """Turns what a malformed saved folder makes code raise into one error naming the folder.

    A manifest's entries are JSON of any shape: a loader reading them may meet a ``KeyError``,
    ``TypeError``, ``ValueError``, ``IndexError`` or ``AttributeError``.

    Raises:
        UnreadableFileError: ``"{folder}: not a readable {what} (...)"``; an
            ``UnreadableFileError`` raised inside (naming its file) goes through unchanged.
    """
    try:
        yield
    except UnreadableFileError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        raise UnreadableFileError(f"{folder}: not a readable {what} ({_describe(error)})"
                                  ) from None


def save_tensors(tensors: Mapping[str, Tensor], path: str | Path) -> None:
    """Writes a flat ``{name: tensor}`` (on CPU) that :func:`load_tensors` reads back."""
    with atomic_write(path) as partial:
        torch.save({name: value.detach().cpu().contiguous() for name, value in tensors.items()},
                   partial)


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Loads a torch file holding a dict with ``weights_only=True``, on CPU.

    Raises:
        UnreadableFileError: naming the file, if it is truncated, garbage, holds anything but
            tensors and primitive containers (a pickle payload), or is not a dict.
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # whatever the failure: name the file
        raise UnreadableFileError(f"{path}: cannot be read safely ({_describe(error)})"
                                  ) from None
    if not isinstance(state, dict):
        raise UnreadableFileError(f"{path}: expected a dict, found {type(state).__name__}")
    return state


def load_tensors(path: str | Path) -> dict[str, Tensor]:
    """Reads a file of :func:`save_tensors` (``weights_only=True``: tensors only).

    Raises:
        UnreadableFileError: naming the file, if it is unreadable or holds anything else.
    """
    state = read_checkpoint(path)
    if not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()):
        raise UnreadableFileError(f"{path}: expected a mapping of names to tensors")
    return state


PARTIAL_SUFFIX = ".tmp"
"""The suffix of :func:`atomic_write`'s temporary files (``.NAME.RANDOM.tmp``)."""


def partial_of(name: str) -> str | None:
    """The file name whose :func:`atomic_write` temporary file ``name`` is, or None.

    Example:
        >>> partial_of(".scores.npz.k2j_x9.tmp"), partial_of("scores.npz")
        ('scores.npz', None)
    """
    match = re.fullmatch(rf"\.(.+)\.[A-Za-z0-9_]+{re.escape(PARTIAL_SUFFIX)}", name)
    return match.group(1) if match else None


@contextmanager
def atomic_write(path: str | Path) -> Iterator[Path]:
    """Writes a file that is never seen half-written: yields a temporary path beside ``path``.

    The caller writes the whole file to the yielded path (hidden, ``.NAME.RANDOM.tmp`` in the
    same folder, so the rename cannot cross file systems); when the block ends normally it
    replaces ``path`` in one rename, and when it raises the temporary file is removed and
    ``path`` is left as it was. The folder is created if missing. Written for a hostile folder:
    the temporary file is created new (``O_EXCL``, an unpredictable name: a link planted under a
    guessable name is never written through), and the rename replaces a link at ``path``
    itself, never its target. Writers that pick a format from the file name (pandas'
    ``compression="infer"``) must be told the format explicitly.

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "numbers.txt"
        >>> with atomic_write(target) as partial:
        ...     _ = partial.write_text("1 2 3")
        ...     target.exists()
        False
        >>> target.read_text(), sorted(p.name for p in target.parent.iterdir())
        ('1 2 3', ['numbers.txt'])
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=PARTIAL_SUFFIX,
                                    dir=path.parent)
    os.close(handle)
    partial = Path(name)
    try:
        yield partial
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def save_arrays(arrays: Mapping[str, np.ndarray], path: str | Path) -> None:
    """Writes arrays (no object dtype) to an ``.npz`` file, atomically (:func:`atomic_write`).

    An interrupted write never leaves a truncated entry; :func:`load_arrays` and
    ``np.load(path, allow_pickle=False)`` read it.
    """
    with atomic_write(path) as partial, open(partial, "wb") as out:
        np.savez(out, **dict(arrays))  # type: ignore[arg-type]  # numpy's stub: allow_pickle


def load_arrays(path: str | Path, names: Sequence[str] | None = None
                ) -> dict[str, np.ndarray]:
    """Reads the arrays ``names`` of an ``.npz`` file (``allow_pickle=False``; None: all).

    Memory is bounded by the file: before anything is allocated, each array's header (shape
    and dtype) must account for its entry's size exactly, and no entry may inflate to more
    than the whole file (:func:`save_arrays` stores arrays uncompressed). A crafted header
    declaring gigabytes is refused without allocating them.

    Raises:
        UnreadableFileError: naming the file, if it is unreadable, lacks an array, declares
            more data than it holds or holds object arrays (pickles).
    """
    try:
        if names is None:
            with zipfile.ZipFile(path) as archive:
                names = [name.removesuffix(".npy") for name in archive.namelist()]
        _check_entries(Path(path), names)
        with np.load(path, allow_pickle=False) as arrays:
            return {name: arrays[name] for name in names}
    except UnreadableFileError:
        raise
    except Exception as error:  # whatever the failure: name the file
        raise UnreadableFileError(f"{path}: cannot be read as arrays ({_describe(error)})"
                                  ) from None


_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}


def _check_entries(path: Path, names: Sequence[str]) -> None:
    """Refuses an ``.npz`` entry whose header does not account for its size (see load_arrays).

    Raises:
        UnreadableFileError: naming the file and the array.
        zipfile.BadZipFile, ValueError: not a zip file, a malformed header.
    """
    size = path.stat().st_size
    with zipfile.ZipFile(path) as archive:
        for name in names:
            try:
                entry = archive.getinfo(f"{name}.npy")
            except KeyError:
                raise UnreadableFileError(f"{path}: holds no array {name!r}") from None
            if entry.file_size > size:
                raise UnreadableFileError(
                    f"{path}: array {name!r} inflates to {entry.file_size:,} bytes, more than "
                    f"the file's {size:,} (tagtorch stores arrays uncompressed)")
            with archive.open(entry) as member:
                version = np.lib.format.read_magic(member)
                if version not in _HEADER_READERS:
                    raise UnreadableFileError(f"{path}: array {name!r} has an .npy header of "
                                              f"version {version}, expected 1.0 or 2.0")
                shape, _, dtype = _HEADER_READERS[version](member)
                declared = member.tell() + math.prod(shape) * dtype.itemsize
            if dtype.hasobject or min(shape, default=0) < 0 or declared != entry.file_size:
                raise UnreadableFileError(
                    f"{path}: array {name!r} declares shape {shape} of {dtype} "
                    f"({declared:,} bytes with its header) but its entry holds "
                    f"{entry.file_size:,} bytes" + (" (object arrays are pickles)"
                                                    if dtype.hasobject else ""))


def check_codes(path: str | Path, name: str, codes: np.ndarray, n_codes: int) -> np.ndarray:
    """Codes read from a file, checked: a 1-D integer array with values in ``[0, n_codes)``.

    Args:
        path: the file they were read from (for the message).
        name: their name in it (e.g. the ``.npz`` array).
        codes: ``[n]`` the codes.
        n_codes: how many codes there are (the size of what they index).

    Returns:
        ``[n]`` the codes as int64.

    Raises:
        UnreadableFileError: ``"{path}: {name}: ..."``, for another shape, dtype or range.

    Example:
        >>> check_codes("data.npz", "tag_values", np.array([2, 0], dtype=np.int32), 3).dtype
        dtype('int64')
    """
    if codes.ndim != 1 or codes.dtype.kind not in "iu":
        raise UnreadableFileError(f"{path}: {name}: expected a 1-D integer array, found a "
                                  f"{codes.ndim}-D {codes.dtype} array")
    if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= n_codes):
        raise UnreadableFileError(f"{path}: {name}: codes must lie in [0, {n_codes}), found "
                                  f"[{codes.min()}, {codes.max()}]")
    return codes.astype(np.int64, copy=False)


def check_ragged(path: str | Path, name: str, offsets: np.ndarray, values: np.ndarray,
                 n_rows: int, n_codes: int) -> tuple[np.ndarray, np.ndarray]:
    """A ragged array read from a file (``{name}_offsets``, ``{name}_values``), checked.

    Args:
        path: the file they were read from (for the message).
        name: their name's prefix (``tag`` for ``tag_offsets`` and ``tag_values``).
        offsets: ``[n_rows + 1]`` integers, from 0, non-decreasing, ending at ``len(values)``.
        values: ``[offsets[-1]]`` codes in ``[0, n_codes)``.
        n_rows: the number of rows expected.
        n_codes: the number of codes.

    Returns:
        ``(offsets, values)`` as int64, ready for :class:`tagtorch.data.ragged.Ragged`.

    Raises:
        UnreadableFileError: ``"{path}: {name}_offsets: ..."`` (or ``_values``).
    """
    where = f"{path}: {name}_offsets"
    if offsets.ndim != 1 or offsets.dtype.kind not in "iu":
        raise UnreadableFileError(f"{where}: expected a 1-D integer array, found a "
                                  f"{offsets.ndim}-D {offsets.dtype} array")
    if len(offsets) != n_rows + 1:
        raise UnreadableFileError(f"{where}: {len(offsets) - 1} rows, expected {n_rows}")
    if offsets[0] != 0 or (np.diff(offsets) < 0).any():
        raise UnreadableFileError(f"{where}: expected offsets from 0, non-decreasing")
    values = check_codes(path, f"{name}_values", values, n_codes)
    if offsets[-1] != len(values):
        raise UnreadableFileError(f"{where}: end at {offsets[-1]}, but {name}_values holds "
                                  f"{len(values)} values")
    return offsets.astype(np.int64, copy=False), values


def check_strings(path: str | Path, name: str, value: Any, length: int | None = None,
                  distinct: bool = False) -> list[str]:
    """A list of strings read from a JSON file, checked.

    Args:
        path: the file (for the message).
        name: the entry's key.
        value: what the file holds there.
        length: the number of strings expected (None: any).
        distinct: whether the strings must differ (they are keys: codes of ids, terms).

    Raises:
        UnreadableFileError: ``"{path}: {name!r} ..."``.
    """
    if not (isinstance(value, list) and all(isinstance(s, str) for s in value)):
        raise UnreadableFileError(f"{path}: {name!r} must be a list of strings")
    if length is not None and len(value) != length:
        raise UnreadableFileError(f"{path}: {name!r} holds {len(value)} strings, expected "
                                  f"{length}")
    if distinct and len(set(value)) != len(value):
        raise UnreadableFileError(f"{path}: {name!r} repeats a string; each must be unique")
    return value


def check_count(path: str | Path, name: str, value: Any, most: int) -> int:
    """An integer read from a JSON file, checked to lie in ``[0, most]``.

    Raises:
        UnreadableFileError: ``"{path}: {name!r} ..."``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise UnreadableFileError(f"{path}: {name!r} must be an integer in [0, {most}], got "
                                  f"{value!r:.40}")
    return value


def save_array_model(path: str | Path, kind: type, settings: Mapping[str, Any],
                     arrays: Mapping[str, np.ndarray], **extra: Any) -> Path:
    """Saves a model whose state is named arrays: a folder with the manifest and ``arrays.npz``.

    Args:
        path: the model folder (created; a file there is replaced, see :func:`model_folder`).
        kind: the model's class.
        settings: its constructor arguments.
        arrays: its fitted state (numeric arrays, no object dtype).
        **extra: further JSON entries of the manifest.

    Returns:
        The folder.
    """
    folder = model_folder(path)
    save_arrays(arrays, folder / ARRAYS_FILE)
    write_manifest(folder, kind, settings, [ARRAYS_FILE], arrays=sorted(arrays), **extra)
    return folder


def load_array_model(path: str | Path, kind: type) -> tuple[Any, dict[str, np.ndarray],
                                                            dict[str, Any]]:
    """Reads a model saved by :func:`save_array_model`: ``(kind(**settings), arrays, manifest)``.

    Every file is checked against the manifest before it is read; the model is built from the
    manifest's settings, and the caller sets its fitted state from the arrays.

    Raises:
        UnreadableFileError: another class's folder, a missing, truncated or altered file, or
            settings the class refuses (naming the file).
    """
    folder = Path(path)
    manifest = read_manifest(folder, kind, [ARRAYS_FILE])
    try:
        model = kind(**manifest["settings"])
        names = [str(name) for name in manifest["arrays"]]
    except (TypeError, ValueError, KeyError) as error:
        raise UnreadableFileError(f"{folder / MANIFEST_FILE}: settings or arrays refused "
                                  f"({_describe(error)})") from None
    return model, load_arrays(folder / ARRAYS_FILE, names), manifest
