"""Files of the item models, read without running code from disk.

Nothing here unpickles: a saved model is a folder with a JSON manifest and its arrays in safe
formats, and training checkpoints are read with ``torch.load(..., weights_only=True)``, which
accepts tensors and primitive containers only (a planted pickle payload raises before any of
its code runs).

A saved model's folder::

    manifest.json   {"format": 1, "class": "tagtorch.itemrec.dorank.DoRank",
                     "settings": {...constructor arguments, JSON values...},
                     "files": {"weights.pt": "<sha256>"}, ...model-specific entries}
    weights.pt      tensors only (``torch.save`` of a flat ``{name: tensor}``; factor models)
    arrays.npz      NumPy arrays without object dtype (count models)

:func:`read_manifest` checks the class and every file's digest before anything is loaded; every
failure is a :class:`UnreadableFileError` naming the file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["MANIFEST", "UnreadableFileError", "class_name", "file_digest", "load_arrays",
           "load_tensors", "model_folder", "read_checkpoint", "read_manifest", "save_tensors",
           "write_manifest"]

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
_FORMAT = 1


class UnreadableFileError(ValueError):
    """A file that cannot be read safely (corrupt, foreign or not what its manifest says)."""


def _describe(error: BaseException) -> str:
    """One line on why a file could not be loaded (torch's advice to unpickle it left out)."""
    text = str(error)
    unsafe = re.search(r"WeightsUnpickler error:\s*(.*?)\s*(?:Please use|Check the|$)", text,
                       re.S)
    if unsafe:
        reason = " ".join(unsafe.group(1).split()) or "unknown content"
        return f"holds more than tensors and plain containers, or is garbage: {reason}"
    if isinstance(error, EOFError):
        return "empty or cut short"
    first = text.strip().split(". ")[0].splitlines()
    return f"{type(error).__name__}: {first[0]}" if first else type(error).__name__


def class_name(kind: type) -> str:
    """The dotted name recorded in a manifest (compared, never imported).

    Example:
        >>> class_name(UnreadableFileError)
        'tagtorch.itemrec.storage.UnreadableFileError'
    """
    return f"{kind.__module__}.{kind.__qualname__}"


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_folder(path: str | Path) -> Path:
    """Creates the folder a model is saved to; a file there (an older format) is replaced."""
    folder = Path(path)
    if folder.is_file() or folder.is_symlink():
        log.info("replacing %s, a model file of an older format, by a model folder", folder)
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_manifest(folder: str | Path, kind: type, settings: dict[str, Any], files: list[str],
                   **extra: Any) -> Path:
    """Writes ``folder/manifest.json``: the class, its settings and the digests of ``files``.

    Args:
        folder: the model folder (``files`` are already written in it).
        kind: the model's class.
        settings: constructor arguments, JSON values only.
        files: names of the folder's data files.
        **extra: further JSON entries (sizes, learning curve, ...).

    Returns:
        The manifest's path.
    """
    folder = Path(folder)
    manifest = {"format": _FORMAT, "class": class_name(kind), "settings": settings,
                "files": {name: file_digest(folder / name) for name in files}, **extra}
    path = folder / MANIFEST
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return path


def read_manifest(folder: str | Path, kind: type) -> dict[str, Any]:
    """Reads and checks a model folder's manifest (class, format, digests of its files).

    Raises:
        UnreadableFileError: naming the manifest or the data file that fails a check.
    """
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise UnreadableFileError(f"{path}: no such file; {folder} is not a saved "
                                  f"{kind.__name__} folder")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnreadableFileError(f"{path}: not a JSON manifest ({_describe(error)})") from error
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
        raise UnreadableFileError(f"{path}: expected a manifest of format {_FORMAT}")
    if manifest.get("class") != class_name(kind):
        raise UnreadableFileError(f"{path}: holds a {manifest.get('class')!r}, expected "
                                  f"{class_name(kind)!r}")
    files = manifest.get("files")
    if not isinstance(files, dict) or not isinstance(manifest.get("settings"), dict):
        raise UnreadableFileError(f"{path}: expected 'settings' and 'files' objects")
    for name, expected in files.items():
        data = Path(folder) / name
        if Path(name).name != name or not data.is_file():
            raise UnreadableFileError(f"{data}: listed in {path} but missing")
        if file_digest(data) != expected:
            raise UnreadableFileError(f"{data}: its SHA-256 differs from {path}'s")
    return manifest


def save_tensors(tensors: dict[str, Tensor], path: str | Path) -> None:
    """Writes a flat ``{name: tensor}`` (on CPU) that :func:`load_tensors` reads back."""
    torch.save({name: value.detach().cpu().contiguous() for name, value in tensors.items()},
               path)


def load_tensors(path: str | Path) -> dict[str, Tensor]:
    """Reads a file of :func:`save_tensors` (``weights_only=True``: tensors only).

    Raises:
        UnreadableFileError: naming the file, if it is unreadable or holds anything else.
    """
    state = read_checkpoint(path)
    if not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()):
        raise UnreadableFileError(f"{path}: expected a mapping of names to tensors")
    return state


def load_arrays(path: str | Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
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
                                  ) from error


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
                                  ) from error
    if not isinstance(state, dict):
        raise UnreadableFileError(f"{path}: expected a dict, found {type(state).__name__}")
    return state
