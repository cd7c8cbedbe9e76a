"""TREC run and qrels lines, so trec_eval, ranx or ir-measures can re-score tagtorch's rankings.

Each task ranks its own way (tag recommendation: every candidate, by score with ties in
candidate order; item recommendation: the top items) and hands the ranked documents here; the
lines are written by the run writer (:func:`tagtorch.evaluation.runs.write_run`). Query and
document ids are integers or space-free strings (tag recommendation: object codes and tag codes,
so no tag string with spaces can break the whitespace-separated format; item recommendation:
``u{user}t{tag}`` and item codes). ``qrels.trec`` lists every gold document of every query,
also those no ranking reached, so recall computed from the files matches tagtorch's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["qrels_lines", "ranked_lines", "run_file_names"]


def run_file_names(methods: Sequence[str]) -> dict[str, str]:
    """TREC run file of each method: ``run.trec`` for a lone method, else ``run.{method}.trec``.

    Example:
        >>> run_file_names(["rf", "gp"])
        {'rf': 'run.rf.trec', 'gp': 'run.gp.trec'}
    """
    if len(methods) == 1:
        return {name: "run.trec" for name in methods}
    return {name: f"run.{name}.trec" for name in methods}


def ranked_lines(queries: Sequence[object], documents: np.ndarray, keep: np.ndarray,
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


def qrels_lines(queries: Sequence[object], gold: Iterable[Iterable[object]]) -> list[str]:
    r"""TREC qrels lines ``qid 0 docid 1`` for every gold document of every query.

    Example:
        >>> qrels_lines([7, 8], [[3, 1], []])
        ['7 0 3 1\n', '7 0 1 1\n']
    """
    return [f"{query} 0 {doc} 1\n"
            for query, docs in zip(queries, gold, strict=True) for doc in docs]
