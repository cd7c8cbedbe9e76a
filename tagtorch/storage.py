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
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["ARRAYS_FILE", "MANIFEST_FILE", "UnreadableFileError", "atomic_write", "class_name",
           "file_record", "load_array_model", "load_arrays", "load_tensors", "model_folder",
           "plain_json", "read_checkpoint", "read_json", "read_manifest", "save_array_model",
           "save_arrays", "save_tensors", "trusted_class", "write_json", "write_manifest"]

log = logging.getLogger(__name__)

MANIFEST_FILE = "manifest.json"
"""Name of the JSON manifest in a saved model's folder."""

ARRAYS_FILE = "arrays.npz"
"""Name of the arrays file of a model saved by :func:`save_array_model`."""

_FORMAT = 1


class UnreadableFileError(ValueError):
    """A file that cannot be read safely (corrupt, foreign or not what its manifest says)."""


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
        >>> trusted_class("tagtorch.storage.UnreadableFileError", ("tagtorch.",), (ValueError,),
        ...               "example").__name__
        'UnreadableFileError'
    """
    module_name, _, name = str(target).rpartition(".")
    if not module_name.startswith(modules):
        raise ValueError(f"{what}: {target!r} is not in {modules}")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError):
        raise ValueError(f"{what}: no class {target!r}") from None
    if not (isinstance(found, type) and issubclass(found, kinds)):
        raise ValueError(f"{what}: {target!r} is not a "
                         f"{' or '.join(kind.__name__ for kind in kinds)}")
    return found


def read_json(path: str | Path) -> Any:
    """Parses a JSON file written by tagtorch.

    Raises:
        UnreadableFileError: the file is missing, not UTF-8 or not JSON (naming it).
    """
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnreadableFileError(f"{path}: not a readable JSON file written by tagtorch "
                                  f"({_describe(error)})") from None


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
    """Writes ``folder/manifest.json``: format, class, settings and the records of ``files``.

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
                **plain_json(extra)}
    path = folder / MANIFEST_FILE
    with atomic_write(path) as partial:
        partial.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return path


def read_manifest(folder: str | Path, kind: type) -> dict[str, Any]:
    """Reads a model folder's manifest and verifies every file it lists.

    Args:
        folder: the saved model's folder.
        kind: the class that loads it (only compared by name, never imported).

    Returns:
        The manifest (``format``, ``class``, ``settings``, ``files`` and the extras).

    Raises:
        UnreadableFileError: an unreadable manifest, another class, or a missing, truncated or
            altered file (the message names the file).
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


@contextmanager
def atomic_write(path: str | Path) -> Iterator[Path]:
    """Writes a file that is never seen half-written: yields a temporary path beside ``path``.

    The caller writes the whole file to the yielded path (hidden, ``.NAME.tmp`` in the same
    folder, so the rename cannot cross file systems); when the block ends normally it replaces
    ``path`` in one rename, and when it raises the temporary file is removed and ``path`` is
    left as it was. The folder is created if missing. Writers that pick a format from the
    file name (pandas' ``compression="infer"``) must be told the format explicitly.

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
    partial = path.with_name(f".{path.name}.tmp")
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
        np.savez(out, **arrays)


def load_arrays(path: str | Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    """Reads the arrays ``names`` of an ``.npz`` file (``allow_pickle=False``).

    Raises:
        UnreadableFileError: naming the file, if it is unreadable, lacks an array or holds
            object arrays (pickles).
    """
    try:
        with np.load(path, allow_pickle=False) as arrays:
            return {name: arrays[name] for name in names}
    except Exception as error:  # whatever the failure: name the file
        raise UnreadableFileError(f"{path}: cannot be read as arrays ({_describe(error)})"
                                  ) from None


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
    manifest = read_manifest(folder, kind)
    try:
        model = kind(**manifest["settings"])
        names = [str(name) for name in manifest["arrays"]]
    except (TypeError, ValueError, KeyError) as error:
        raise UnreadableFileError(f"{folder / MANIFEST_FILE}: settings or arrays refused "
                                  f"({_describe(error)})") from None
    return model, load_arrays(folder / ARRAYS_FILE, names), manifest
