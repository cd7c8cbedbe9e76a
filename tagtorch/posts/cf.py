"""``cf``: user-based collaborative filtering of tags, as TagRec's ``CFTagRecommender`` does it.

Jäschke, Marinho, Hotho, Schmidt-Thieme and Stumme (2007), "Tag Recommendations in
Folksonomies" (PKDD), in TagRec's form (github.com/learning-layers/TagRec,
``processing/CFTagRecommender.java``, user-based, ``MAX_NEIGHBORS = 20``): for a post
``(u, r)`` the candidate neighbours are the other users with a training post of ``r``; each
gets the cosine similarity of its and ``u``'s tag-count profiles (all training assignments);
the 20 most similar add their similarity to every tag of their post of ``r``. When no other
user has tagged ``r``, every training user (``u`` included) is a candidate and contributes the
tags of its last training post (TagRec's ``Bookmark.getBookmark`` falls back to the user's last
bookmark).

Deviations: ties between neighbours and between tags are broken by the lower code (TagRec's
comparator: hash order); a neighbour with similarity 0 adds nothing, where TagRec lists its tags
with score 0 after all others.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from tagtorch.candidates.neighbours import incidence, top_per_row
from tagtorch.posts.base import PostRanker
from tagtorch.posts.baselines import counts_by
from tagtorch.posts.data import PostData, Posts, last_posts

__all__ = ["UserCF"]


class UserCF(PostRanker):
    """``cf`` (module docstring).

    Args:
        neighbours: how many of the most similar users vote (TagRec: 20).
    """

    def __init__(self, neighbours: int = 20) -> None:
        if neighbours < 1:
            raise ValueError(f"neighbours must be at least 1, got {neighbours}")
        self.neighbours = neighbours

    def _fit(self, data: PostData) -> None:
        """The users' unit-length tag profiles and the training posts by resource."""
        train = data.train
        self.tags_ = incidence(train.tags, data.n_tags)
        self.profiles_ = normalize(counts_by(train.users, data.n_users, self.tags_))
        self.posts_of_ = sp.csr_matrix(
            (np.ones(len(train)), (train.resources, np.arange(len(train)))),
            shape=(data.n_resources, len(train)))
        self.users_ = train.users
        self.last_posts_ = np.flatnonzero(last_posts(train))

    def _votes(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, P_train]`` each candidate neighbour post's similarity (before the top 20)."""
        pairs = self.posts_of_[posts.resources].tocoo()
        other = self.users_[pairs.col] != posts.users[pairs.row]
        rows, cols = pairs.row[other], pairs.col[other]
        sims = np.asarray(self.profiles_[posts.users[rows]].multiply(
            self.profiles_[self.users_[cols]]).sum(1)).ravel()
        votes = sp.csr_matrix((sims, (rows, cols)), shape=(len(posts), len(self.users_)))
        lonely = np.flatnonzero(np.bincount(rows, minlength=len(posts)) == 0)
        if len(lonely):  # nobody else tagged r: every user's last post
            last_users = self.users_[self.last_posts_]
            sims = (self.profiles_[posts.users[lonely]] @ self.profiles_[last_users].T).toarray()
            fallback = sp.csr_matrix(sims)
            fallback = sp.csr_matrix((fallback.data, self.last_posts_[fallback.indices],
                                      fallback.indptr), shape=(len(lonely), len(self.users_)))
            rows_of = sp.csr_matrix((np.ones(len(lonely)), (lonely, np.arange(len(lonely)))),
                                    shape=(len(posts), len(lonely)))
            votes = votes + rows_of @ fallback
        votes.eliminate_zeros()
        return votes

    def score(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` the summed similarities of the top neighbours that used each tag."""
        return (top_per_row(self._votes(posts), self.neighbours) @ self.tags_).tocsr()
