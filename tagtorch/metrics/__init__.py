"""Ranking metrics: batched functions on padded lists and torchmetrics wrappers.

See :mod:`tagtorch.metrics.functional` for the convention (ranking, ties, gains, empty lists).
Diversity metrics (Belém et al., xTReD) are in :mod:`tagtorch.metrics.diversity`.
The package re-exports the public names of the three modules (their ``__all__``).
"""

from tagtorch.metrics import diversity, functional, retrieval
from tagtorch.metrics.diversity import *  # noqa: F403  (diversity.__all__)
from tagtorch.metrics.functional import *  # noqa: F403  (functional.__all__)
from tagtorch.metrics.retrieval import *  # noqa: F403  (retrieval.__all__)

__all__ = sorted([*diversity.__all__, *functional.__all__, *retrieval.__all__])
