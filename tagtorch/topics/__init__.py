"""Topic models reusable by every task: LDA by collapsed Gibbs sampling (:mod:`.lda`).

Layer 2: imports :mod:`tagtorch.storage` and :mod:`tagtorch.data` only.
"""

from tagtorch.topics.lda import LDA, SAMPLERS

__all__ = ["LDA", "SAMPLERS"]
