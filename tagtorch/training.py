"""Renamed: :mod:`tagtorch.lightning_fit` holds the Lightning fit helper (``fit_best``).

This alias keeps ``tagtorch.training`` importable for one release, with a
``DeprecationWarning`` (``python -m tagtorch.train`` runs every task; this was its helper).
"""

import warnings

from tagtorch.lightning_fit import *  # noqa: F403
from tagtorch.lightning_fit import BestEpoch, epoch_mean, fit_best  # noqa: F401

warnings.warn("tagtorch.training is now tagtorch.lightning_fit; the old name goes in the next "
              "release", DeprecationWarning, stacklevel=2)
