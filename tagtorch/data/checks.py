"""Data that cannot support a task as configured: one error naming what is missing and why.

Each protocol checks its data before any model is fitted (the splits raise
:class:`DataCheckError` as they are drawn): a post filter that leaves nothing, a p-core that is
empty, too few objects for the folds, no test or validation query, no timestamps for a
temporal split. The command line shows the message as one line and exits with status 2, like
a configuration error; the advice names a setting that really changes the outcome.

Layer 0 (no tagtorch import).
"""

from __future__ import annotations

__all__ = ["DataCheckError"]


class DataCheckError(ValueError):
    """The data cannot support the task as configured.

    Args:
        dataset: the dataset's name.
        problem: what is missing (with the counts that show it).
        advice: the setting(s) that would change it.

    Example:
        >>> str(DataCheckError("bib", "no test query", "set task.split=global_time"))
        'data bib: no test query; set task.split=global_time'
    """

    def __init__(self, dataset: str, problem: str, advice: str) -> None:
        self.dataset, self.problem, self.advice = dataset, problem, advice
        super().__init__(f"data {dataset}: {problem}; {advice}")
