"""Renamed: :mod:`tagtorch.candidates.latre` holds the LATRE candidate generator.

This alias keeps ``tagtorch.candidates.features`` importable (and old configs' ``_target_``
working) for one release, with a ``DeprecationWarning``.
"""

import warnings

from tagtorch.candidates.latre import *  # noqa: F403
from tagtorch.candidates.latre import (  # noqa: F401
    FEATURE_NAMES,
    LatreCandidates,
    stability,
)

warnings.warn("tagtorch.candidates.features is now tagtorch.candidates.latre; the old name goes "
              "in the next release", DeprecationWarning, stacklevel=2)
