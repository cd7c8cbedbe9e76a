"""The one ranker interface every method implements, so one evaluator compares them all.

Also the saved-model helpers: a ranker saved as a folder holds `manifest.json` (class, settings,
feature names, size and SHA-256 of each model file) next to model files in safe formats
(tensors, JSON, the libraries' native model files), never a pickle.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, Self, runtime_checkable

import torch

from tagtorch.candidates.candidate_set import CandidateSet


@runtime_checkable
class Ranker(Protocol):
    """Orders candidate tags: learns on V's candidate sets, scores T's.

    Lightning modules and library wrappers (LightGBM, XGBoost, DEAP, ...) alike implement it;
    wrappers use composition rather than pretending to be torch modules.
    """

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Learns from labelled candidate sets (the protocol's V); ``val`` for early stopping."""
        ...

    def score(self, batch: CandidateSet) -> torch.Tensor:
        """Scores candidates: ``[B, L]`` float, higher is better (padding values are ignored)."""
        ...

    def save(self, path: str | Path) -> None:
        """Writes the fitted model to ``path``."""
        ...

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a model written by :meth:`save`."""
        ...


def check_feature_names(fitted: tuple[str, ...] | None, batch: CandidateSet) -> None:
    """Raises ValueError when a batch's features differ from those a ranker was fitted on.

    Example:
        >>> check_feature_names(None, None)  # not fitted yet: nothing to compare
    """
    if fitted is not None and tuple(batch.feature_names) != tuple(fitted):
        raise ValueError(f"the batch's features {tuple(batch.feature_names)} differ from the "
                         f"fitted features {tuple(fitted)}")


MANIFEST_FILE = "manifest.json"
"""Name of the JSON manifest in a saved ranker's folder."""


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


def read_json(path: str | Path) -> Any:
    """Parses a JSON file; an unreadable one is a ValueError naming it.

    Raises:
        ValueError: the file is missing, not UTF-8 or not JSON.
    """
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a readable JSON file written by tagtorch "
                         f"({type(error).__name__}: {error})") from None


def _file_record(path: Path) -> dict[str, Any]:
    """Size and SHA-256 of a file."""
    with open(path, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    return {"size": path.stat().st_size, "sha256": digest}


def write_manifest(folder: str | Path, ranker: object, settings: Mapping[str, Any],
                   feature_names: Sequence[str] | None, files: Sequence[str],
                   **extra: Any) -> None:
    """Writes ``manifest.json`` of a saved ranker: class, settings, features, file digests.

    Args:
        folder: the saved ranker's folder, already holding ``files``.
        ranker: the ranker (its class name is recorded).
        settings: its constructor arguments (JSON-able).
        feature_names: the features it was fitted on.
        files: names of the model files in ``folder``; their size and SHA-256 are recorded,
            and :func:`read_manifest` checks them before anything reads the files.
        **extra: further JSON-able entries (best iteration, training history, ...).
    """
    folder = Path(folder)
    manifest = {"class": type(ranker).__name__, "settings": plain_json(settings),
                "feature_names": list(feature_names or ()),
                "files": {name: _file_record(folder / name) for name in files},
                **plain_json(extra)}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2), encoding="utf-8")


def read_manifest(folder: str | Path, cls: type) -> dict[str, Any]:
    """Reads a saved ranker's manifest and verifies every file it lists.

    Each file must have the size and SHA-256 recorded at save time, so a truncated or altered
    file is refused before a library parses it.

    Args:
        folder: the saved ranker's folder.
        cls: the class that loads it.

    Returns:
        The manifest (``class``, ``settings``, ``feature_names``, ``files``, extras).

    Raises:
        ValueError: an unreadable manifest, another ranker class, or a missing, truncated or
            altered file (the message names the file).
    """
    folder = Path(folder)
    path = folder / MANIFEST_FILE
    manifest = read_json(path)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise ValueError(f"{path}: not a ranker manifest (no 'files' entry)")
    if manifest.get("class") != cls.__name__:
        raise ValueError(f"{path}: holds a {manifest.get('class')}, not a {cls.__name__}")
    for name, expected in manifest["files"].items():
        file = folder / name
        if Path(name).name != name or not file.is_file():
            raise ValueError(f"{file}: model file listed in {path} is missing")
        found = _file_record(file)
        if found != expected:
            raise ValueError(f"{file}: size {found['size']} and SHA-256 {found['sha256'][:12]}… "
                             f"differ from those recorded at save time in {path} "
                             f"({expected.get('size')}, {str(expected.get('sha256'))[:12]}…): "
                             "the file is truncated or altered")
    return manifest
