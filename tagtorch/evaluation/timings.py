"""How long a run will take, said before its first fit: each fit's seconds kept.

Every evaluation run appends, for each (seed or fold, method) it fits and evaluates, one JSON
line to ``timings.jsonl`` in the user cache folder (``$TAGTORCH_TIMINGS``: another file;
``off``: none): the method's key (its task, config, grid and protocol, hashed; not the data), the
data's size (:func:`data_size`: a folksonomy's tag assignments, a LETOR dataset's training
documents) and the wall seconds. Before its first fit, a run sums the estimate of each of its
pending fits (:func:`announce`): the record of the same key nearest in size, scaled linearly to
this data's size (some steps grow faster than linearly, ``docs/scale.md``: an estimate, said to
be one). Fits never timed on this machine are counted apart.

Fits never timed on this machine are estimated from :data:`REFERENCE_FILE`, shipped with
tagtorch: the seconds of one fit of each model class on the 2-core machine the tables were
measured on, at a known data size (``benchmarks/reference_timings.py`` writes it from run
folders), times the points of the run's tuning grid, scaled linearly to this data's size; this
machine's own record wins where it has one, and a class in neither is counted apart.

The file is a cache, read as untrusted: lines that are not such records are skipped, only its
last :data:`READ_BYTES` are read, it is rewritten shorter past :data:`MAX_BYTES`, appends
never follow a link (``O_NOFOLLOW``), and a failure to read or write it never stops a run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tagtorch.candidates.letor import LetorData
from tagtorch.data.download import user_cache_dir
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.storage import atomic_write

__all__ = ["REFERENCE_FILE", "TimingLog", "announce", "data_size", "reference_estimate",
           "reference_key", "timing_key"]

log = logging.getLogger(__name__)

READ_BYTES = 4 << 20
"""The tail of the file an estimate reads."""
MAX_BYTES = 16 << 20
"""Past this size, a record rewrites the file as its last :data:`READ_BYTES`."""


REFERENCE_FILE = Path(__file__).with_name("reference_timings.json")
"""``{"machine": ..., "timings": {"TASK|MODEL_CLASS": [size, seconds of one fit]}}`` (a candidate
set's class is followed by its sources: :func:`reference_key`)."""


def reference_estimate(targets: Sequence[tuple[str, int]], size: int,
                       path: Path | None = None) -> tuple[float, int]:
    """Seconds of one run of each ``("TASK|MODEL_CLASS", grid points)`` at ``size``.

    From the reference machine's seconds of one fit (:data:`REFERENCE_FILE`), times the points
    of the method's tuning grid, scaled linearly; also how many targets it has no timing of.

    Example:
        >>> import tempfile
        >>> ref = Path(tempfile.mkdtemp()) / "r.json"
        >>> _ = ref.write_text('{"timings": {"T|a.B": [1000, 3.0]}}')
        >>> reference_estimate([("T|a.B", 1), ("T|a.B", 4), ("T|a.C", 1)], 2000, ref)
        (30.0, 1)
    """
    try:
        table = json.loads((path or REFERENCE_FILE).read_text(encoding="utf-8"))["timings"]
    except (OSError, ValueError, KeyError, TypeError):
        table = {}
    total, unknown = 0.0, 0
    for target, points in targets:
        entry = table.get(target)
        if not (isinstance(entry, list) and len(entry) == 2 and entry[0] > 0 and size > 0):
            unknown += 1
            continue
        total += float(entry[1]) * points * size / float(entry[0])
    return total, unknown


MODEL_COST_SETTINGS = ("topics",)
"""Settings of a method that change its cost beyond its class, by default: 3Layers' LDA topics
(``three_layers_lda`` fits a topic model; ``three_layers`` counts categories)."""


def reference_key(task: str, config: Any, parts: Sequence[str] = MODEL_COST_SETTINGS) -> str:
    """The ``"TASK|MODEL_CLASS"`` of a method of ``task`` in the reference timings.

    ``parts``: settings of ``config`` that change the cost beyond its class (a method's
    :data:`MODEL_COST_SETTINGS`, a candidate set's sources); each one set is appended as
    ``+NAME``.

    Example:
        >>> reference_key("LetorTask", {"_target_": "tagtorch.rankers.trees.LambdaMART"})
        'LetorTask|tagtorch.rankers.trees.LambdaMART'
        >>> reference_key("T", {"_target_": "a.Gen", "topics": {"k": 2}, "embeddings": None},
        ...               parts=("topics", "embeddings"))
        'T|a.Gen+topics'
    """
    target = config.get("_target_") if isinstance(config, Mapping) else None
    kind = type(config)
    extra = "".join(f"+{name}" for name in parts
                    if isinstance(config, Mapping) and config.get(name))
    return f"{task}|{target or kind.__module__ + '.' + kind.__name__}{extra}"


def data_size(data: Folksonomy | LetorData) -> tuple[int, str]:
    """What an estimate scales by, and its unit's name.

    A folksonomy's tag assignments; a LETOR dataset's training documents.
    """
    if isinstance(data, Folksonomy):
        return data.n_assignments, "tag assignments"
    return int(data.train.mask.sum()), "training documents"


def announce(timings: TimingLog, fits: Sequence[tuple[str, str, int]],
             data: Folksonomy | LetorData) -> None:
    """Logs how long the pending fits should take, before the first one starts.

    Args:
        timings: this machine's records.
        fits: ``(timing key, reference key, grid points)`` of each pending fit (the settings
            its tuning grid tries; 1 without one).
        data: the run's data (its :func:`data_size` scales the estimate).
    """
    if not fits:
        return
    size, unit = data_size(data)
    timed = timings.timed([key for key, _, _ in fits])
    here, _ = timings.estimate([key for key, _, _ in fits if key in timed], size)
    elsewhere = [(target, points) for key, target, points in fits if key not in timed]
    reference, unknown = reference_estimate(elsewhere, size)
    parts = [f"{len(fits) - len(elsewhere)} timed before on this machine"] if timed else []
    if len(elsewhere) > unknown:
        parts.append(f"{len(elsewhere) - unknown} from the reference machine's timings "
                     "(2 cores)")
    log.info("%d fits to run; %s", len(fits), (
        f"about {_duration(here + reference)} ({', '.join(parts)}; scaled to "
        f"{size:,} {unit})" if parts else "none timed before: no estimate yet")
        + (f"; {unknown} never timed" if parts and unknown else ""))


def _duration(seconds: float) -> str:
    """``seconds`` as a person reads an estimate: seconds under a minute, else minutes.

    Example:
        >>> _duration(0.4), _duration(42.2), _duration(95.0)
        ('under 1 s', '42 s', '1.6 min')
    """
    if seconds < 0.5:
        return "under 1 s"
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.1f} min"


def timing_key(task: str, method: Any, tune: Any, protocol: Any) -> str:
    """The key of a method's fits: its task, config, grid and protocol (not the data)."""
    text = json.dumps([task, method, tune, protocol], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class TimingLog:
    """The ``timings.jsonl`` file of the module docstring (None: kept nowhere).

    Example:
        >>> import tempfile
        >>> log = TimingLog(Path(tempfile.mkdtemp()) / "t.jsonl")
        >>> log.record("k", 1000, 2.0)
        >>> log.estimate(["k", "k", "other"], 2000)
        (8.0, 1)
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path

    @classmethod
    def default(cls) -> TimingLog:
        """``$TAGTORCH_TIMINGS`` (``off``: none), else ``timings.jsonl`` of the user cache."""
        setting = os.environ.get("TAGTORCH_TIMINGS")
        if setting == "off":
            return cls(None)
        return cls(Path(setting) if setting else user_cache_dir() / "timings.jsonl")

    def record(self, key: str, size: int, seconds: float) -> None:
        """Appends one fit's seconds at ``size`` (:func:`data_size`; best effort)."""
        if self.path is None:
            return
        line = json.dumps({"key": key, "size": int(size), "seconds": float(seconds)}) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
                             0o600)
            try:
                os.write(handle, line.encode())
            finally:
                os.close(handle)
            if self.path.stat().st_size > MAX_BYTES:
                kept = self._tail()
                with atomic_write(self.path) as partial:
                    partial.write_text(kept)
        except OSError:
            return  # a cache: a run never fails on it

    def _tail(self) -> str:
        """The file's last :data:`READ_BYTES`, whole lines only ("" when unreadable)."""
        if self.path is None:
            return ""
        try:
            with open(self.path, "rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(0, size - READ_BYTES))
                text = handle.read(READ_BYTES).decode("utf-8", errors="replace")
        except OSError:
            return ""
        return text if size <= READ_BYTES else text.partition("\n")[2]

    def _records(self) -> dict[str, list[tuple[int, float]]]:
        """``{key: [(size, seconds)]}`` of the readable records."""
        records: dict[str, list[tuple[int, float]]] = {}
        for line in self._tail().splitlines():
            try:
                row = json.loads(line)
                key, size, seconds = str(row["key"]), int(row["size"]), float(row["seconds"])
            except (ValueError, TypeError, KeyError):
                continue
            if size > 0 and math.isfinite(seconds) and seconds >= 0:
                records.setdefault(key, []).append((size, seconds))
        return records

    def timed(self, keys: Sequence[str]) -> set[str]:
        """The ``keys`` with a record on this machine."""
        records = self._records()
        return {key for key in keys if key in records}

    def estimate(self, keys: Sequence[str], size: int) -> tuple[float, int]:
        """Seconds for one fit of each key at ``size``, and how many keys have no record."""
        records = self._records()
        total, unknown = 0.0, 0
        for key in keys:
            if key not in records or size <= 0:
                unknown += 1
                continue
            near, seconds = min(reversed(records[key]),
                                key=lambda r: abs(math.log(r[0] / size)))  # latest of equals
            total += seconds * size / near
        return total, unknown
