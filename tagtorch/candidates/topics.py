"""Renamed: :mod:`tagtorch.candidates.lda_tags`.

An alias for one release, with a ``DeprecationWarning``.
"""

import warnings

from tagtorch.candidates.lda_tags import *  # noqa: F403
from tagtorch.candidates.lda_tags import TopicTags  # noqa: F401

warnings.warn("tagtorch.candidates.topics is now tagtorch.candidates.lda_tags; "
              "the old name goes in the next release", DeprecationWarning, stacklevel=2)
