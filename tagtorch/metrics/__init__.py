"""Ranking metrics: batched functions on padded lists and torchmetrics wrappers.

See :mod:`tagtorch.metrics.functional` for the convention (ranking, ties, gains, empty lists).
The package re-exports the public names of both modules (their ``__all__``).
"""

from tagtorch.metrics import functional, retrieval
from tagtorch.metrics.functional import *  # noqa: F403  (functional.__all__)
from tagtorch.metrics.retrieval import *  # noqa: F403  (retrieval.__all__)

__all__ = sorted([*functional.__all__, *retrieval.__all__])
