"""LETOR / SVMlight files in and out: candidate lists for RankLib, allRank, LightGBM and XGBoost.

The learning-to-rank benchmarks (MSLR-WEB10K/30K, Yahoo! LTR, Istella) and the tools that train
on them read one candidate per line, ``label qid:Q 1:v1 2:v2 ... [# comment]``, a query's lines
together. :func:`write_letor` writes a :class:`~tagtorch.candidates.candidate_set.CandidateSet`
that way with scikit-learn's ``dump_svmlight_file(query_id=...)``: ``qid`` is the object code,
the label the candidate's relevance, features numbered from 1 in the set's order, and a header
comment naming them (``features: ts tf ...``); padding is never written. :func:`read_letor`
reads such a file (ours or a benchmark's) back into padded ``[B, L, F]`` lists, graded labels
kept, so that every tag ranker can be trained on it; :func:`load_letor` reads a dataset folder
(train, validation and test files) for ``task=letor data=letor data.path=FOLDER``
(:mod:`tagtorch.evaluation.letor_task`).

What a LETOR file cannot hold: the candidates' tag codes (read back as their positions in the
list) and gold tags that are not candidates (``n_relevant`` is read back as the relevant lines
of the query). Values are written with 16 significant digits: float32 features and labels read
back as float32 are the values written.

Files come from anywhere: :func:`read_letor` checks the size before reading (``max_bytes``),
bounds the feature count (``max_features``: the dense ``[B, L, F]`` lists are allocated from
it), requires each query's lines to be contiguous and the labels to be finite and ``>= 0``, and
names the file in every error. The padded lists take queries x the longest list: before
allocating them it refuses lists that would take more than ``max_padding`` times the file's
size (64 by default, and at least 256 MiB; MSLR-WEB30K's files take about 6 times), naming
the numbers; ``max_list_length=K`` keeps each query's first ``K`` lines (allRank's
``slate_length``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.metrics.functional import check_k
from tagtorch.storage import atomic_write

__all__ = ["MAX_LETOR_BYTES", "LetorData", "letor_lists", "load_letor", "read_letor",
           "synthetic_letor_parts", "write_letor", "write_synthetic_letor"]

MAX_LETOR_BYTES = 1 << 32
"""The largest LETOR file :func:`read_letor` reads (4 GiB)."""

_MIN_PADDED_BYTES = 1 << 28
"""The padded lists :func:`read_letor` allows whatever the file's size (256 MiB)."""

_HEADER = re.compile(r"^# features: (.*)$", re.MULTILINE)


def write_letor(candidates: CandidateSet, path: str | Path) -> Path:
    """Writes the real candidates of ``candidates`` as a LETOR file (module docstring).

    Example:
        >>> import tempfile
        >>> lists = CandidateSet.from_flat(
        ...     torch.tensor([7, 9]), torch.tensor([0, 0, 1]), torch.tensor([3, 4, 3]),
        ...     torch.tensor([[0.5, 0.0], [0.25, 1.0], [1.0, 2.0]]), torch.tensor([1.0, 0.0, 2.0]),
        ...     torch.tensor([1, 1]), ("ts", "tf"))
        >>> path = write_letor(lists, Path(tempfile.mkdtemp()) / "lists.txt")
        >>> print(path.read_text().splitlines()[-3:])
        ['1 qid:7 1:0.5', '0 qid:7 1:0.25 2:1', '2 qid:9 1:1 2:2']
    """
    path = Path(path)
    rows, slots = candidates.mask.nonzero(as_tuple=True)
    features = candidates.features[rows, slots].double().numpy()
    labels = candidates.labels[rows, slots].double().numpy()
    queries = candidates.objects[rows].numpy()
    with atomic_write(path) as partial, partial.open("wb") as out:  # never through a link
        dump_svmlight_file(features, labels, out, query_id=queries, zero_based=False,
                           comment=f"features: {' '.join(candidates.feature_names)}")
    return path


def _feature_names(path: Path, n_features: int) -> tuple[str, ...]:
    """The names of the header comment, or ``f1 .. fF``."""
    with path.open(encoding="utf-8", errors="replace") as lines:
        head = "".join(line for _, line in zip(range(8), lines, strict=False))
    match = _HEADER.search(head)
    names = tuple(match.group(1).split()) if match else ()
    if len(names) == n_features:
        return names
    return tuple(f"f{j + 1}" for j in range(n_features))


def _query_ids(sidecar: Path, n_lines: int, max_bytes: int) -> np.ndarray:
    """Query ids ``1..Q`` of the lines, from a LightGBM query file (lines per query)."""
    if sidecar.stat().st_size > max_bytes:
        raise ValueError(f"{sidecar}: more than the {max_bytes} bytes allowed")
    try:
        sizes = np.loadtxt(sidecar, dtype=np.int64, ndmin=1)
    except ValueError as error:
        raise ValueError(f"{sidecar}: not a query file ({error})") from error
    if (sizes < 1).any() or (sizes > n_lines).any() or int(sizes.sum()) != n_lines:  # no wrap
        raise ValueError(f"{sidecar}: its query sizes must be >= 1 and sum to the {n_lines} "
                         "lines of its data file")
    return np.repeat(np.arange(1, len(sizes) + 1), sizes)


def _check_limits(max_bytes: int, max_features: int, max_list_length: int | None,
                  max_padding: float) -> None:
    """Refuses a reader's limit that is not a number of its kind, naming it."""
    check_k(max_bytes, "max_bytes")
    check_k(max_features, "max_features")
    check_k(max_list_length, "max_list_length", optional=True)
    if isinstance(max_padding, bool) or not isinstance(max_padding, int | float) or not (
            math.isfinite(max_padding) and max_padding > 0):
        raise ValueError(f"max_padding must be a finite number > 0, got {max_padding!r}")


def read_letor(path: str | Path, max_bytes: int = MAX_LETOR_BYTES, max_features: int = 4096,
               max_list_length: int | None = None, max_padding: float = 64.0) -> CandidateSet:
    """Reads a LETOR file into padded lists, one per query in file order (module docstring).

    A file without ``qid`` (LightGBM's layout) takes its queries from the ``PATH.query`` file
    beside it (the number of lines of each query, in order), when there is one.

    Args:
        path: the file.
        max_bytes: the largest file read.
        max_features: the most features (the dense lists' width).
        max_list_length: keep each query's first lines, this many (None: all; the others
            count nowhere, ``n_relevant`` included).
        max_padding: the padded lists' bytes at most this times the file's (or 256 MiB).

    Raises:
        ValueError: naming the file, for a file above ``max_bytes``, one that scikit-learn
            cannot parse, more than ``max_features`` features, a query whose lines are not
            contiguous, a label that is negative or not finite, a feature that is not finite
            (both as float32), or padded lists above ``max_padding``.
    """
    _check_limits(max_bytes, max_features, max_list_length, max_padding)
    path = Path(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{path}: {size} bytes, more than the {max_bytes} allowed")
    try:
        matrix, labels, queries = load_svmlight_file(str(path), query_id=True, zero_based=False,
                                                     dtype=np.float32)
    except (ValueError, UnicodeDecodeError, OverflowError) as error:
        why = "a number beyond 64 bits" if isinstance(error, OverflowError) else error
        raise ValueError(f"{path}: not a LETOR / SVMlight file ({why})") from error
    if not len(labels):
        raise ValueError(f"{path}: no data line (an empty LETOR file)")
    if len(queries) < len(labels):  # no qid: LightGBM's layout, queries in PATH.query
        sidecar = Path(f"{path}.query")
        if not sidecar.is_file():
            raise ValueError(f"{path}: its lines have no qid and there is no {sidecar.name}")
        queries = _query_ids(sidecar, len(labels), max_bytes)
    n_features = matrix.shape[1]
    if n_features > max_features:
        raise ValueError(f"{path}: {n_features} features, more than the {max_features} allowed")
    _check_values(path, labels, matrix)
    try:
        starts, rows, positions = _list_positions(queries)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    if max_list_length is not None:
        kept = positions < max_list_length
        rows, positions, labels, matrix = rows[kept], positions[kept], labels[kept], matrix[kept]
    _check_padding(path, size, len(starts), int(positions.max()) + 1, n_features, max_padding)
    return _padded(queries[starts], rows, positions, labels, matrix.toarray(),
                   _feature_names(path, n_features))


def letor_lists(queries: np.ndarray, labels: np.ndarray, features: np.ndarray,
                feature_names: tuple[str, ...] | None = None) -> CandidateSet:
    """Padded lists of LETOR rows held in memory, one per query in row order.

    Args:
        queries: ``[N]`` each row's query id (a query's rows contiguous).
        labels: ``[N]`` graded relevance labels.
        features: ``[N, F]`` feature values (float32).
        feature_names: the ``F`` names (default: ``1`` to ``F``, as in a LETOR file).

    Raises:
        ValueError: a query whose rows are not contiguous, or lengths that disagree.
    """
    if not len(queries) == len(labels) == len(features):
        raise ValueError(f"queries, labels and features must have one row each, got "
                         f"{len(queries)}, {len(labels)} and {len(features)}")
    starts, rows, positions = _list_positions(np.asarray(queries))
    names = feature_names or tuple(str(i) for i in range(1, features.shape[1] + 1))
    return _padded(np.asarray(queries)[starts], rows, positions, np.asarray(labels),
                   np.asarray(features, dtype=np.float32), names)


def _list_positions(queries: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(each query's first row, each row's list, each row's position in it)``.

    Raises:
        ValueError: a query whose rows are not contiguous.
    """
    starts = np.flatnonzero(np.r_[True, queries[1:] != queries[:-1]])
    if len(np.unique(queries)) != len(starts):
        raise ValueError("the lines of a query must be contiguous")
    rows = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(queries)]))
    return starts, rows, np.arange(len(rows)) - starts[rows]


def _padded(query_ids: np.ndarray, rows: np.ndarray, positions: np.ndarray, labels: np.ndarray,
            features: np.ndarray, names: tuple[str, ...]) -> CandidateSet:
    """The ``[B, L, F]`` lists of flat rows; ``n_relevant`` counts each list's labels above 0."""
    label_values = torch.from_numpy(labels.astype(np.float32))
    n_relevant = np.bincount(rows, label_values.numpy() > 0, len(query_ids)).astype(np.int64)
    return CandidateSet.from_flat(
        torch.from_numpy(query_ids.astype(np.int64)), torch.from_numpy(rows),
        torch.from_numpy(positions), torch.from_numpy(features), label_values,
        torch.from_numpy(n_relevant), names)


def _check_padding(path: Path, size: int, n_queries: int, longest: int, n_features: int,
                   max_padding: float) -> None:
    """Refuses padded lists above ``max_padding`` times the file's ``size`` (or 256 MiB).

    Raises:
        ValueError: naming the file, its queries, its longest list and the padded size.
    """
    padded = n_queries * longest * (13 + 4 * n_features)  # mask, tag, label, features
    if padded > max(max_padding * size, _MIN_PADDED_BYTES):
        raise ValueError(
            f"{path}: {n_queries} queries, longest {longest} lines: padded to [{n_queries}, "
            f"{longest}, {n_features}] they would take {padded / 2**30:.1f} GiB, more than "
            f"{max_padding:g} times the file's {size} bytes (max_padding); read it with "
            "max_list_length=K (each query's first K lines) or split the file")


def _check_values(path: Path, labels: np.ndarray, matrix: sp.csr_matrix) -> None:
    """Labels finite and ``>= 0``, features finite, both *as float32* (``1e308`` is ``inf``).

    Raises:
        ValueError: naming the file and the first data line at fault.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        bad_labels = ~np.isfinite(labels.astype(np.float32)) | (labels < 0)
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    bad_features = rows[~np.isfinite(matrix.data)]
    if bad_labels.any():
        line = int(np.argmax(bad_labels)) + 1
        raise ValueError(f"{path}: data line {line}: the label {float(labels[line - 1])!r} is "
                         "not a finite number >= 0 (as float32)")
    if len(bad_features):
        raise ValueError(f"{path}: data line {int(bad_features[0]) + 1}: a feature value is "
                         "not a finite float32 number (NaN, inf or beyond ±3.4e38)")


@dataclass(frozen=True)
class LetorData:
    """A LETOR dataset: training, test and (optional) validation lists (``data=letor``).

    Attributes:
        name: the dataset's name (reports, run folders).
        train: the lists rankers learn on.
        test: the lists they are evaluated on.
        vali: lists for early stopping and tuning (None: the rankers get none).
    """

    name: str
    train: CandidateSet
    test: CandidateSet
    vali: CandidateSet | None = None

    def __repr__(self) -> str:
        sizes = ", ".join(f"{part} {len(lists)} queries" for part, lists in
                          (("train", self.train), ("vali", self.vali), ("test", self.test))
                          if lists is not None)
        return f"LetorData({self.name!r}: {sizes}, {len(self.train.feature_names)} features)"


def load_letor(path: str | Path, train: str = "train.txt", test: str = "test.txt",
               vali: str | None = "vali.txt", name: str | None = None,
               max_bytes: int = MAX_LETOR_BYTES, max_features: int = 4096,
               max_list_length: int | None = None, max_padding: float = 64.0) -> LetorData:
    """Reads a LETOR dataset folder (MSLR's ``FoldK`` layout).

    The files ``train``, ``test`` and ``vali`` inside ``path``; ``vali`` is optional (None, or
    a missing file: no validation lists). The limits are :func:`read_letor`'s, for each file.

    Raises:
        ValueError: as :func:`read_letor`, or when the parts' feature counts differ.
    """
    folder = Path(path)
    read = partial(read_letor, max_bytes=max_bytes, max_features=max_features,
                   max_list_length=max_list_length, max_padding=max_padding)
    parts = {"train": read(folder / train), "test": read(folder / test)}
    if vali is not None and (folder / vali).is_file():
        parts["vali"] = read(folder / vali)
    widths = {part: lists.features.shape[-1] for part, lists in parts.items()}
    if len(set(widths.values())) > 1:
        raise ValueError(f"{folder}: the parts' feature counts differ {widths}")
    return LetorData(name or folder.name, parts["train"], parts["test"], parts.get("vali"))


def write_synthetic_letor(folder: str | Path, queries: int = 200, features: int = 136,
                          mean_documents: int = 60, seed: int = 0) -> Path:
    """Writes a LETOR dataset with MSLR-WEB10K's layout: ``train``, ``vali`` and ``test`` files.

    The rows of :func:`synthetic_letor_parts` (its generator is stated there); query ids
    distinct across the files.

    Returns:
        The folder (its ``train.txt``, ``vali.txt``, ``test.txt``).
    """
    parts = synthetic_letor_parts(queries, features, mean_documents, seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for part, qids, grades, x in parts:
        with atomic_write(folder / f"{part}.txt") as partial, partial.open("wb") as out:
            dump_svmlight_file(x, grades, out, query_id=qids, zero_based=False,
                               comment=f"synthetic LETOR, MSLR-WEB10K layout, seed {seed}")
    return folder


def synthetic_letor_parts(queries: int = 200, features: int = 136, mean_documents: int = 60,
                          seed: int = 0) -> Iterator[tuple[str, np.ndarray, np.ndarray,
                                                           np.ndarray]]:
    """A synthetic LETOR dataset's parts, one at a time: ``(part, qids, grades, features)``.

    The generator (stated, for benchmarks and tests): ``features`` uniform float32 features per
    document (136: MSLR's), ``1 + Poisson(mean_documents - 1)`` documents per query, and a
    grade 0-4 per document from a hidden score, a random linear function of the features plus a
    random pairwise interaction of the first ten (all, when fewer) and Gaussian noise, cut at
    its quantiles 50/75/90/97% (MSLR's grades are about that skewed). ``queries`` training
    queries (``train``), a quarter as many for ``vali``, half as many for ``test``; query ids
    numbered on from 1 across the parts. MSLR-WEB30K's shape: ``queries=18_919``,
    ``mean_documents=114`` (3.8M documents in all).

    Raises:
        ValueError: a count below 1.
    """
    if min(queries, features, mean_documents) < 1:
        raise ValueError(f"queries, features and mean_documents must be >= 1, got {queries}, "
                         f"{features}, {mean_documents}")
    return _synthetic_parts(queries, features, mean_documents, seed)


def _synthetic_parts(queries: int, features: int, mean_documents: int,
                     seed: int) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`synthetic_letor_parts`' generator, its counts checked."""
    rng = np.random.default_rng(seed)
    linear = rng.normal(size=features)
    first = min(10, features)  # the interacting features: the first ten (all, when fewer)
    pairs = rng.normal(size=(first, first)) / 3
    next_id = 1
    for part, count in (("train", queries), ("vali", max(1, queries // 4)),
                        ("test", max(1, queries // 2))):
        sizes = 1 + rng.poisson(mean_documents - 1, size=count)
        x = rng.random((int(sizes.sum()), features)).astype(np.float32)
        hidden = x @ linear + np.einsum("ni,ij,nj->n", x[:, :first], pairs, x[:, :first])
        hidden = hidden + rng.normal(scale=hidden.std() / 2, size=len(hidden))
        grades = np.searchsorted(np.quantile(hidden, [0.5, 0.75, 0.9, 0.97]), hidden)
        qids = np.repeat(np.arange(next_id, next_id + count), sizes)
        next_id += count
        yield part, qids, grades, x
