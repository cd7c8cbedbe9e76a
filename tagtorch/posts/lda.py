"""``lda``: TagRec's topic-model tag recommender, on tagtorch's LDA (:mod:`tagtorch.topics`).

Krestel, Fankhauser and Nejdl (2009), "Latent Dirichlet Allocation for Tag Recommendation"
(RecSys), as TagRec runs it (github.com/learning-layers/TagRec, ``processing/
MalletCalculator.java``): one LDA over user documents (a user's training tag assignments,
repeats kept) and one over resource documents; a tag's score for the post ``(u, r)`` is
``Σ_z θ_{z|u} φ_{t|z} + Σ_z θ_{z|r} φ_{t|r}``, each sum over the document's topics with
``θ > 0.001`` (TagRec's ``TOPIC_THRESHOLD``). TagRec's Mallet settings are the defaults here:
``Z = 1000`` topics, α = 0.01 per topic, β = 0.01, 2000 iterations, θ and φ of the last sample
(``burn_in = iterations − 1``: our LDA averages the samples after ``burn_in``, here the last
one). A user or resource without training posts contributes nothing (TagRec: no document).

Deviations: our sampler is tagtorch's collapsed Gibbs sampler (seeded), not Mallet's; our
``φ = (N_wz + β) / (N_z + Wβ)`` is smoothed where TagRec normalizes the raw counts of each
topic's words; ties by the lower tag code. Mallet's hyperparameter optimization, which TagRec
leaves on (every 50 iterations after 200), is not done: on the HetRec MovieLens 3-core it
drives β to NaN, every user's topic mixture becomes the same and TagRec's ``lda`` output equals
``mp``'s list for every post (``docs/personalized_tags.md``); this module is the model with the
optimization off.
"""

from __future__ import annotations

import numpy as np

from tagtorch.data.ragged import Ragged
from tagtorch.posts.base import PostRanker
from tagtorch.posts.data import PostData, Posts
from tagtorch.topics.lda import LDA

__all__ = ["TopicTags", "topic_mixtures"]


def topic_mixtures(keys: np.ndarray, n_documents: int, data: PostData, n_topics: int,
                   alpha: float, beta: float, iterations: int, threshold: float, seed: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """One LDA over documents of training tags: ``θ`` thresholded and ``φ`` (TagRec's Mallet).

    Args:
        keys: ``[P]`` each training post's document (a user or resource code).
        n_documents: the number of documents.
        data: the split (its training posts' tags are the words).
        n_topics: ``Z``.
        alpha: the per-topic prior.
        beta: the per-word prior.
        iterations: Gibbs sweeps; θ and φ of the last one.
        threshold: a document's topics with ``θ`` above it count (0 otherwise).
        seed: the sampler's seed.

    Returns:
        ``θ`` (``[n_documents, Z]``, 0 for a document without posts) and ``φ`` (``[Z, W]``).
    """
    train = data.train
    documents = Ragged.from_groups(keys[train.tags.row_ids], train.tags.values, n_documents)
    lda = LDA(n_topics=n_topics, alpha=alpha, beta=beta, iterations=iterations,
              burn_in=iterations - 1, seed=seed, progress=False).fit(documents, data.n_tags)
    theta = np.where(lda.theta_ > threshold, lda.theta_, 0.0)
    theta[documents.lengths == 0] = 0.0
    return theta, lda.phi_


class TopicTags(PostRanker):
    """``lda`` (module docstring).

    Args:
        n_topics: ``Z`` of both models (TagRec: 1000).
        alpha: the per-topic Dirichlet prior (TagRec: 0.01).
        beta: the per-word prior (TagRec: 0.01).
        iterations: Gibbs sweeps (TagRec: 2000).
        threshold: a document's topics with ``θ`` above it count (TagRec: 0.001).
        user: use the user model.
        resource: use the resource model.
        seed: the samplers' seed.
    """

    def __init__(self, n_topics: int = 1000, alpha: float = 0.01, beta: float = 0.01,
                 iterations: int = 2000, threshold: float = 0.001, user: bool = True,
                 resource: bool = True, seed: int = 0) -> None:
        if not (user or resource):
            raise ValueError("lda needs the user model, the resource model or both")
        self.n_topics, self.alpha, self.beta = n_topics, alpha, beta
        self.iterations, self.threshold = iterations, threshold
        self.user, self.resource, self.seed = user, resource, seed

    def _model(self, keys: np.ndarray, n_documents: int, data: PostData
               ) -> tuple[np.ndarray, np.ndarray]:
        """``θ`` (``[n_documents, Z]``, thresholded, 0 without posts) and ``φ`` (``[Z, W]``)."""
        return topic_mixtures(keys, n_documents, data, self.n_topics, self.alpha, self.beta,
                              self.iterations, self.threshold, self.seed)

    def _fit(self, data: PostData) -> None:
        """The user and resource models' tag scores."""
        train = data.train
        self.user_ = self._model(train.users, data.n_users, data) if self.user else None
        self.resource_ = (self._model(train.resources, data.n_resources, data)
                          if self.resource else None)

    def score(self, posts: Posts) -> np.ndarray:
        """``[Q, W]`` the user part plus the resource part (``-inf`` where both are 0)."""
        parts = [theta[codes] @ phi for model, codes in ((self.user_, posts.users),
                                                          (self.resource_, posts.resources))
                 if model is not None for theta, phi in (model,)]
        scores = sum(parts[1:], parts[0])
        return np.where(scores > 0, scores, -np.inf)
