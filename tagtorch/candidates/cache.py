"""On-disk cache of candidate sets, keyed by the data, the fold and the feature configuration."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tagtorch.cache import code_fingerprint
from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.storage import load_arrays, save_arrays

log = logging.getLogger(__name__)

OPTIONAL = ("tag_topics", "object_topics", "tag_distance", "input_tags")
"""The optional fields of a candidate set: stored when present, None when absent."""

CANDIDATE_CODE = (
    "tagtorch.candidates", "tagtorch.topics", "tagtorch.data.categories",
    "tagtorch.errors", "tagtorch.data.folksonomy", "tagtorch.data.ragged",
    "tagtorch.data.splits", "tagtorch.data.terms", "tagtorch.metrics", "tagtorch.devices",
    "tagtorch.progress", "tagtorch.settings", "tagtorch.storage", "tagtorch.version",
)
"""The code a candidate set depends on (:func:`~tagtorch.cache.code_fingerprint`):
``candidates/``, the topic models, and every tagtorch module they import but ``engines``
(where jobs run, not what they compute)."""


class CandidateCache:
    """Stores candidate sets as ``.npz`` files named by a hash of everything they depend on.

    An entry holds the set's tensors as arrays and its feature names as strings; it is read
    with ``allow_pickle=False`` (a planted file cannot run code), and the zip container's CRC-32
    checks catch truncated or garbled entries. An entry that cannot be read is discarded with a
    warning naming it, and the set is built again.

    Args:
        folder: the cache folder (created on first write).
        key: what the candidates depend on besides the fold and split (the data's
            :meth:`~tagtorch.data.folksonomy.Folksonomy.fingerprint`, split settings, feature
            configuration); any JSON-serializable mapping. The fingerprint of the
            candidate-generation code and the tagtorch version (:data:`CANDIDATE_CODE`) is
            added to it, so edited code never reads stale sets.
    """

    def __init__(self, folder: str | Path, key: Mapping[str, Any]) -> None:
        self.folder = Path(folder)
        self.key = json.dumps({**key, "code": code_fingerprint(*CANDIDATE_CODE)}, sort_keys=True,
                              default=str)

    def path(self, fold: int, split: str) -> Path:
        """The file of one fold's split (``"val"`` or ``"test"``)."""
        digest = hashlib.sha256(f"{self.key}|{fold}|{split}".encode()).hexdigest()[:32]
        return self.folder / f"{digest}.npz"

    def get(self, fold: int, split: str, build: Callable[[], CandidateSet]) -> CandidateSet:
        """Reads the cached candidate set, or builds and stores it."""
        path = self.path(fold, split)
        if path.is_file():
            try:
                candidates = _read(path)
            except Exception as error:  # any unreadable entry is rebuilt
                log.warning("%s: unreadable candidate cache entry, building the candidates "
                            "again (%s: %s)", path, type(error).__name__, error)
            else:
                log.info("fold %d %s: candidates read from %s", fold, split, path)
                return candidates
        candidates = build()
        arrays = {name: value.detach().cpu().numpy() for name, value
                  in candidates.state().items() if isinstance(value, torch.Tensor)}
        save_arrays({"feature_names": np.array(candidates.feature_names, dtype=str), **arrays},
                    path)
        return candidates


def _read(path: Path) -> CandidateSet:
    """The candidate set of a cache entry (ValueError and the like when it is unreadable)."""
    names = [f.name for f in fields(CandidateSet)]
    required = [name for name in names if name not in OPTIONAL]
    stored = load_arrays(path)  # bounded by the file's size
    present = [name for name in names if name in stored]
    if sorted(stored) != sorted(present) or not set(required) <= set(present):
        raise ValueError(f"arrays {sorted(stored)}, expected {sorted(required)} "
                         f"and optionally {sorted(OPTIONAL)}")
    state: dict[str, Any] = {name: torch.from_numpy(stored[name]) for name in present
                             if name != "feature_names"}
    state["feature_names"] = tuple(str(name) for name in stored["feature_names"])
    return CandidateSet(**state)
