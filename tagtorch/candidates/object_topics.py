"""Renamed: :mod:`tagtorch.candidates.diversity_topics`.

An alias for one release, with a ``DeprecationWarning``.
"""

import warnings

from tagtorch.candidates.diversity_topics import *  # noqa: F403
from tagtorch.candidates.diversity_topics import ObjectTopics  # noqa: F401

warnings.warn("tagtorch.candidates.object_topics is now tagtorch.candidates.diversity_topics; "
              "the old name goes in the next release", DeprecationWarning, stacklevel=2)
