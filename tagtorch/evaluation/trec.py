"""TREC run and qrels lines, so trec_eval, ranx or ir-measures can re-score tagtorch's rankings.

Every task writes exactly the ranking its metrics scored: :func:`scored_lines` orders each
query's documents with :func:`tagtorch.metrics.functional.top_rank_order`, the order of the
metrics themselves (by score, descending; equal scores in candidate order, i.e. by tag slot,
item code or object code; masked documents never written), and the lines are written by the
run writer (:func:`tagtorch.evaluation.runs.write_run`).

The score column is not the model's score but ``depth - (rank - 1)`` (``depth``: the places
written per query), strictly decreasing with the rank: trec_eval and ranx ignore the rank
column, sort by score and break equal scores by document id, so with the model's own tied
scores they would re-order ties and score another ranking than ours. With rank-based scores
any TREC tool reads our ranking exactly; the model's scores themselves are not written.

A method's name is part of file and folder names (``run.METHOD.trec``, the checkpoint folders
``.../METHOD/fold{k}``, a fitted recommender's ``DATASET-METHOD``) and the run column of the
TREC lines: :func:`check_name` refuses any but :data:`NAME_RULE` (no path separator, no
``..``, no leading dot, no whitespace or control character), the one check of such names
(``config_checks`` applies it to every method and ``data.name`` before any work;
:func:`run_file_names` again).

Query and document ids are integers or space-free strings (tag recommendation: object codes and
tag codes, so no tag string with spaces can break the whitespace-separated format; item
recommendation: ``u{user}t{tag}`` or ``u{user}`` and item codes; resource ranking:
``q{post key}`` and object codes); ``per_object.csv.gz`` names its queries by the same ids, so
its rows join the run files' lines. ``qrels.trec`` lists every gold document of every query,
also those no ranking reached, so recall computed from the files matches tagtorch's.

:func:`read_qrels` and :func:`read_run` read such files back (ours or any tool's), for
``python -m tagtorch.evaluation`` (:mod:`tagtorch.evaluation.score_runs`). They are written
for files from anywhere: the size is checked before reading (``max_bytes``), every line must
have the format's fields with a number where one belongs, and a bad line is an error naming the
file and the line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from tagtorch.metrics.functional import top_rank_order

__all__ = ["MAX_TREC_BYTES", "NAME_RULE", "check_name", "qrels_lines", "ranked_lines",
           "read_qrels", "read_run", "run_file_names", "scored_lines"]

MAX_TREC_BYTES = 1 << 31
"""The largest TREC file :func:`read_qrels` and :func:`read_run` read (2 GiB)."""

NAME_RULE = ("1 to 100 ASCII letters, digits, '_', '-', '.' or '+', starting with a letter, "
             "digit or '_', without '..' (it names the run's files)")
"""What a method's (or a dataset's) name may be: safe in file names and TREC lines."""

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}", re.ASCII)


def check_name(name: object, what: str = "method") -> str:
    """``name`` if it is safe as part of a file name (:data:`NAME_RULE`).

    Args:
        name: a method's name (a key of ``model``, of the Python API's ``models``), or a
            dataset's.
        what: what the name names, in the message.

    Raises:
        ValueError: in one line naming ``what``, the name and :data:`NAME_RULE`.

    Example:
        >>> check_name("latre_wts")
        'latre_wts'
        >>> check_name("x/../../../escaped_run")
        Traceback (most recent call last):
        ...
        ValueError: method 'x/../../../escaped_run': expected 1 to 100 ASCII letters, digits, \
'_', '-', '.' or '+', starting with a letter, digit or '_', without '..' (it names the run's files)
    """
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name) or ".." in name:
        raise ValueError(f"{what} {name!r:.80}: expected {NAME_RULE}")
    return name


def run_file_names(methods: Sequence[str]) -> dict[str, str]:
    """TREC run file of each method: ``run.trec`` for a lone method, else ``run.{method}.trec``.

    Raises:
        ValueError: a method's name that is not safe in a file name (:func:`check_name`).

    Example:
        >>> run_file_names(["rf", "gp"])
        {'rf': 'run.rf.trec', 'gp': 'run.gp.trec'}
    """
    if len(methods) == 1:
        return {check_name(name): "run.trec" for name in methods}
    return {check_name(name): f"run.{name}.trec" for name in methods}


def ranked_lines(queries: Sequence[object] | np.ndarray, documents: np.ndarray, keep: np.ndarray,
                 run_name: str, width: int) -> list[str]:
    r"""TREC run lines ``qid Q0 docid rank score run`` of ranked documents.

    Args:
        queries: ``[B]`` query ids.
        documents: ``[B, D]`` document ids of each query, best first.
        keep: ``[B, D]`` bool, the positions written (padding, excluded documents: False);
            a position's rank is its place in ``documents`` (1-based), kept or not.
        run_name: the run tag (the method's name, without whitespace).
        width: scores are written as ``width - (rank - 1)``, so tools that sort by score
            themselves see the same order.

    Example:
        >>> ranked_lines([7], np.array([[3, 1, 0]]), np.array([[True, True, False]]), "m", 3)
        ['7 Q0 3 1 3 m\n', '7 Q0 1 2 2 m\n']
    """
    lines = []
    for query, row, kept in zip(queries, documents, keep, strict=True):
        lines += [f"{query} Q0 {doc} {rank + 1} {width - rank} {run_name}\n"
                  for rank in np.flatnonzero(kept) for doc in (row[rank],)]
    return lines


def scored_lines(queries: Sequence[object] | np.ndarray, scores: torch.Tensor, mask: torch.Tensor,
                 run_name: str, depth: int, documents: torch.Tensor | None = None) -> list[str]:
    r"""TREC run lines of the ``depth`` best documents of each query, ranked as the metrics rank.

    The order is :func:`~tagtorch.metrics.functional.top_rank_order`'s, the one every metric
    of :mod:`tagtorch.metrics.functional` uses: by score, descending, equal scores in column
    order, masked columns last and never written.

    Args:
        queries: ``[B]`` query ids.
        scores: ``[B, L]`` the scores the metrics were computed on.
        mask: ``[B, L]`` bool, the real documents (padding, excluded documents: False).
        run_name: the run tag (the method's name, without whitespace).
        depth: the places written per query at most (``>= 1``).
        documents: ``[B, L]`` the document id of each column (tag codes of candidate slots);
            None: the column index itself (item codes, object codes).

    Example:
        >>> scores = torch.tensor([[0.5, 0.9, 0.5, 0.7]])
        >>> mask = torch.tensor([[True, True, True, False]])
        >>> scored_lines(["q1"], scores, mask, "m", depth=3)  # the tie in column order
        ['q1 Q0 1 1 3 m\n', 'q1 Q0 0 2 2 m\n', 'q1 Q0 2 3 1 m\n']
    """
    scores, mask = scores.detach().cpu(), mask.cpu()
    if scores.shape[-1] == 0:  # no document to rank
        return []
    order = top_rank_order(scores, mask, depth)
    keep = mask.gather(-1, order)
    if documents is not None:
        order = documents.cpu().gather(-1, order)
    return ranked_lines(queries, order.numpy(), keep.numpy(), run_name, order.shape[1])


def qrels_lines(queries: Sequence[object] | np.ndarray,
                gold: Iterable[Iterable[object]]) -> list[str]:
    r"""TREC qrels lines ``qid 0 docid 1`` for every gold document of every query.

    Example:
        >>> qrels_lines([7, 8], [[3, 1], []])
        ['7 0 3 1\n', '7 0 1 1\n']
    """
    return [f"{query} 0 {doc} 1\n"
            for query, docs in zip(queries, gold, strict=True) for doc in docs]


def _trec_rows(path: str | Path, n_fields: int, max_bytes: int) -> Iterator[tuple[int, list[str]]]:
    """The whitespace-separated fields of each non-empty line, with its line number."""
    path = Path(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{path}: {size} bytes, more than the {max_bytes} allowed")
    with path.open(encoding="utf-8", errors="strict") as lines:
        try:
            for number, line in enumerate(lines, start=1):
                fields = line.split()
                if not fields:
                    continue
                if len(fields) != n_fields:
                    raise ValueError(f"{path}, line {number}: expected {n_fields} fields, got "
                                     f"{len(fields)}")
                yield number, fields
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}: not UTF-8 text ({error.reason})") from error


def _number(text: str, path: str | Path, number: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{path}, line {number}: {text[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{path}, line {number}: {text[:40]!r} is not a finite number")
    return value


def read_qrels(path: str | Path, max_bytes: int = MAX_TREC_BYTES) -> dict[str, dict[str, float]]:
    r"""The relevance of each query's documents in a TREC qrels file (``qid 0 docid rel``).

    Raises:
        ValueError: naming the file (and line) if it is too large, not UTF-8 text, a line has
            not 4 fields or a relevance that is not a finite number, or a document appears
            twice for one query.

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile("w", suffix=".trec", delete=False) as f:
        ...     _ = f.write("q1 0 d1 2\nq1 0 d2 0\n")
        >>> read_qrels(f.name)
        {'q1': {'d1': 2.0, 'd2': 0.0}}
        >>> Path(f.name).unlink()
    """
    qrels: dict[str, dict[str, float]] = {}
    for number, (query, _, doc, grade) in _trec_rows(path, 4, max_bytes):
        docs = qrels.setdefault(query, {})
        if doc in docs:
            raise ValueError(f"{path}, line {number}: document {doc!r} twice for query {query!r}")
        docs[doc] = _number(grade, path, number)
    return qrels


def read_run(path: str | Path, max_bytes: int = MAX_TREC_BYTES) -> dict[str, dict[str, float]]:
    """The scores of each query's documents in a TREC run file (``qid Q0 docid rank score tag``).

    The rank column is not used (as in trec_eval and ranx: documents are ranked by score).

    Raises:
        ValueError: as :func:`read_qrels` (6 fields per line, a finite score).
    """
    run: dict[str, dict[str, float]] = {}
    for number, (query, _, doc, _, score, _) in _trec_rows(path, 6, max_bytes):
        docs = run.setdefault(query, {})
        if doc in docs:
            raise ValueError(f"{path}, line {number}: document {doc!r} twice for query {query!r}")
        docs[doc] = _number(score, path, number)
    return run
