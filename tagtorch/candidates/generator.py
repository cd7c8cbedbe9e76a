"""The interface of a candidate source: what the tag-recommendation protocol asks of one."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, Self

import numpy as np
from joblib import delayed

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries
from tagtorch.data.terms import TermIndex

__all__ = ["CandidateGenerator", "check_rule_settings", "generate_in_tasks"]


def check_rule_settings(max_antecedent: int, min_support: int, min_confidence: float) -> None:
    """Raises ValueError naming the first rule-mining setting out of range.

    Shared by the batched generator and the reference oracle (the same settings, the same
    messages): ``max_antecedent >= 1``, ``min_support >= 1``, ``min_confidence`` in [0, 1].

    Example:
        >>> check_rule_settings(3, 1, 0.0)  # the paper's settings: accepted
    """
    if max_antecedent < 1:
        raise ValueError(f"max_antecedent must be >= 1, got {max_antecedent}")
    if min_support < 1:
        raise ValueError(f"min_support must be >= 1, got {min_support}")
    if not 0.0 <= min_confidence <= 1.0:
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")


class CandidateGenerator(Protocol):
    """Mines D, then turns V or T queries into candidate sets.

    Attributes:
        stage_seconds: seconds spent so far per recommendation stage (``"rules"``,
            ``"features"``), accumulated over calls; the protocol reads differences to time
            each stage.
    """

    stage_seconds: dict[str, float]

    def fit(self, train_objects: np.ndarray, train_tags: Ragged,
            terms: TermIndex) -> CandidateGenerator:
        """Mines rules and statistics from D (``train_objects [N]`` and their tags)."""
        ...

    def __call__(self, queries: TagQueries) -> CandidateSet:
        """Candidate sets with features and labels, one list per query object."""
        ...

    def settings(self) -> dict[str, Any]:
        """The constructor's settings, as plain values."""
        ...

    def config(self) -> dict[str, Any]:
        """``{"_target_": ..., **settings()}``: what the settings shape (the cache key)."""
        ...

    def unfitted(self, **changes: Any) -> Self:
        """A new, unfitted generator with the same settings, ``changes`` applied on top."""
        ...


def _task(generator: CandidateGenerator,
          queries: TagQueries) -> tuple[CandidateSet, dict[str, float]]:
    """One task of :func:`generate_in_tasks`: a block's candidates and the seconds it spent."""
    before = dict(generator.stage_seconds)  # a worker may keep the generator between tasks
    candidates = generator(queries)
    return candidates, {stage: seconds - before.get(stage, 0.0)
                        for stage, seconds in generator.stage_seconds.items()}


def generate_in_tasks(generator: CandidateGenerator, queries: TagQueries, task_objects: int,
                      parallel: Callable[[Iterable[Any]], list[Any]]) -> CandidateSet:
    """``generator(queries)``, generated in independent tasks of ``task_objects`` objects.

    The blocks are ``task_objects`` consecutive queries (rounded up to a multiple of the
    generator's ``chunk_size``, so that every chunk and every chunk-seeded topic fold-in is the
    one-process call's); ``parallel`` runs them, e.g. a ``joblib.Parallel`` on a Dask or Ray
    cluster (:func:`tagtorch.engines.joblib_engine`), which ships the fitted generator to its
    workers. The result equals ``generator(queries)``. The seconds the tasks spent per stage
    are added to ``generator.stage_seconds`` (summed over tasks: processor time, not wall time).

    Args:
        generator: a fitted candidate generator.
        queries: the V or T objects.
        task_objects: objects per task (>= 1).
        parallel: runs an iterable of ``joblib.delayed`` calls and returns their results in order.
    """
    if task_objects < 1:
        raise ValueError(f"task_objects must be >= 1, got {task_objects}")
    chunk = max(int(getattr(generator, "chunk_size", 1)), 1)
    step = -(-task_objects // chunk) * chunk
    starts = range(0, len(queries), step)
    if len(starts) <= 1:
        return generator(queries)
    results = parallel(delayed(_task)(generator, queries.take(np.arange(first, min(
        first + step, len(queries))))) for first in starts)
    for _, spent in results:
        for stage, seconds in spent.items():
            generator.stage_seconds[stage] = generator.stage_seconds.get(stage, 0.0) + seconds
    parts = [candidates for candidates, _ in results]
    del results
    return CandidateSet.concat(parts)
