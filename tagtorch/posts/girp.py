"""``girp`` and ``girptm``: a user's tag frequencies weighted by the tags' temporal usage pattern.

Zhang, Tang and Zhang (2012), "Integrating Temporal Usage Pattern into Personalized Tag
Prediction" (APWeb), as TagRec computes it (github.com/learning-layers/TagRec,
``processing/GIRPTMCalculator.java``). For a user with ``n`` training posts (positions
``0 … n − 1`` in the order of TagRec's file, whose lines it reads as they come: its sort by
time is commented out; posts without a source, in time order), a tag first used at position
``f`` and last at ``l`` has the recency ``ln(n + 1 − f) · ln(n + 1 − l)^(−ln(n + 1 − f))``;
``girp`` scores it by the tag's relative frequency among the user's assignments times that
recency, ``girptm`` adds the resource's relative tag frequency (unweighted, as TagRec does).
The positions count the user's training posts, not the test post's time: TagRec's recency does
not depend on when the test post was made. Ties as TagRec's
(:func:`~tagtorch.posts.baselines.tagrec_ties`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from tagtorch.candidates.neighbours import incidence
from tagtorch.posts.base import PostRanker
from tagtorch.posts.baselines import counts_by, first_uses, tagrec_ties
from tagtorch.posts.data import PostData, Posts, post_places, user_tag_reduce

__all__ = ["Girp"]


class Girp(PostRanker):
    """``girp`` (``resource=False``) and ``girptm`` (``resource=True``), module docstring.

    Args:
        resource: add the resource's relative tag frequencies (GIRPTM).
    """

    def __init__(self, resource: bool = True) -> None:
        self.resource = resource

    def _fit(self, data: PostData) -> None:
        """Each user's tag scores (they do not depend on the test post) and the resources'."""
        train = data.train
        order = np.lexsort((post_places(train), train.users))  # by user, then line
        users = train.users[order]
        first_row = np.searchsorted(users, users, "left")
        n_posts = np.bincount(users, minlength=data.n_users)
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order)) - first_row  # a post's place in its user's
        user, tag, first = user_tag_reduce(train, data.n_tags, position, np.minimum)
        last = user_tag_reduce(train, data.n_tags, position, np.maximum)[2]
        count = user_tag_reduce(train, data.n_tags, np.ones(len(train)), np.add)[2]
        top = np.log(n_posts[user] + 1.0 - first)
        recency = top * np.log(n_posts[user] + 1.0 - last) ** -top
        frequency = count / np.bincount(user, weights=count, minlength=data.n_users)[user]
        self.user_ = sp.csr_matrix((frequency * recency, (user, tag)),
                                   shape=(data.n_users, data.n_tags))
        self.resource_ = normalize(counts_by(train.resources, data.n_resources,
                                             incidence(train.tags, data.n_tags)), norm="l1")
        self.user_first_, self.resource_first_ = first_uses(data)

    def score(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` the user's GIRP scores (plus the resource's frequencies for GIRPTM)."""
        scores = self.user_[posts.users]
        if self.resource:
            scores = scores + self.resource_[posts.resources]
        return scores.tocsr()

    def tie_order(self, posts: Posts) -> sp.csr_matrix:
        """TagRec's order of equal scores (:func:`~tagtorch.posts.baselines.tagrec_ties`)."""
        return tagrec_ties(posts, self.user_first_,
                           self.resource_first_ if self.resource else None)
