"""TagRec's popularity and time-aware baselines, batched over all test posts.

Each ranker is fitted on a split's training posts and scores every test post's tags as one
sparse ``[Q, W]`` matrix (sparse products, no per-post loops); :func:`recommend` takes each
row's top ``k``, ties by the lower tag code (TagRec's ``DoubleMapComparator`` never calls two
values equal, so its ties come out in about the reverse of the order the tags entered its hash
maps, which depends on the training file's line order: not reproduced).
Formulas as in TagRec's code (github.com/learning-layers/TagRec):

- ``mp`` (``BaselineCalculator``): the tags most used in training, the same list for every
  post;
- ``mp_u``, ``mp_r``, ``mp_ur`` (``MPurCalculator``): with ``c_ut`` the user's and ``c_rt``
  the resource's tag counts, ``β · exp(c_ut) / Σ_t' exp(c_ut') + (1 − β) · exp(c_rt) /
  Σ_t' exp(c_rt')``, β = 0.5 (``mp_u``: the user part alone, ``mp_r``: the resource part);
  we subtract each row's largest count before ``exp`` (the same values where Java's
  ``Math.exp`` does not overflow, above a count of about 709);
- ``bll``, ``bll_c`` (``BLLCalculator``, Kowald et al. 2014): the user's base-level activation
  of each tag, ``Σ_j (t_ref − t_j + 1)^(−d)`` over the user's training posts ``j`` with the
  tag, ``t_ref`` the test post's time, ``d = 0.5``, divided by the row's sum; ``bll_c`` adds
  the resource's relative tag counts: ``β · BLL + (1 − β) · P(t | r)``, β = 0.5. A training
  post later than the test post is left out (TagRec's ``Math.pow`` gives NaN there and skips
  it).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from tagtorch.candidates.neighbours import incidence
from tagtorch.posts.base import PostRanker
from tagtorch.posts.data import PostData, Posts

__all__ = ["BaseLevelLearning", "MostPopular", "MostPopularUserResource", "counts_by"]


def counts_by(keys: np.ndarray, n_rows: int, tags: sp.csr_matrix) -> sp.csr_matrix:
    """``[n_rows, W]`` the tag counts of the posts grouped by ``keys`` (a user or resource)."""
    groups = sp.csr_matrix((np.ones(len(keys)), (keys, np.arange(len(keys)))),
                           shape=(n_rows, len(keys)))
    return (groups @ tags).tocsr()


def _row_softmax(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """``exp(v) / Σ exp(v)`` over each row's stored entries (max subtracted first)."""
    out = matrix.copy().astype(np.float64)
    filled = np.flatnonzero(np.diff(out.indptr))
    if len(filled):
        starts = out.indptr[filled]
        rows = np.repeat(np.arange(out.shape[0]), np.diff(out.indptr))
        top = np.zeros(out.shape[0])
        top[filled] = np.maximum.reduceat(out.data, starts)
        out.data = np.exp(out.data - top[rows])
        sums = np.zeros(out.shape[0])
        sums[filled] = np.add.reduceat(out.data, starts)
        out.data /= sums[rows]
    return out


class MostPopular(PostRanker):
    """``mp``: the most used tags of the training posts, for every test post."""

    def _fit(self, data: PostData) -> None:
        """Counts each tag's assignments in training."""
        counts = np.bincount(data.train.tags.values, minlength=data.n_tags).astype(np.float64)
        self.counts_ = counts

    def score(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` the counts, one row per post."""
        return sp.csr_matrix(np.broadcast_to(self.counts_, (len(posts), len(self.counts_))))


class MostPopularUserResource(PostRanker):
    """``mp_u``, ``mp_r``, ``mp_ur`` (module docstring).

    Args:
        beta: the user part's weight (TagRec: 0.5).
        user: use the user's tag counts.
        resource: use the resource's tag counts.
    """

    def __init__(self, beta: float = 0.5, user: bool = True, resource: bool = True) -> None:
        if not (user or resource):
            raise ValueError("mp_ur needs the user part, the resource part or both")
        self.beta, self.user, self.resource = beta, user, resource

    def _fit(self, data: PostData) -> None:
        """The users' and resources' softmax-normalized tag counts."""
        tags = incidence(data.train.tags, data.n_tags)
        self.user_ = _row_softmax(counts_by(data.train.users, data.n_users, tags))
        self.resource_ = _row_softmax(counts_by(data.train.resources, data.n_resources, tags))

    def score(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` β · user part + (1 − β) · resource part."""
        parts = []
        if self.user:
            parts.append(self.beta * self.user_[posts.users])
        if self.resource:
            parts.append((1.0 - self.beta) * self.resource_[posts.resources])
        return sum(parts[1:], parts[0]).tocsr()


class BaseLevelLearning(PostRanker):
    """``bll`` and ``bll_c`` (module docstring).

    Args:
        d: the decay exponent (Kowald et al.: 0.5).
        beta: the user (BLL) part's weight; 1.0 is ``bll``, 0.5 ``bll_c``.
    """

    def __init__(self, d: float = 0.5, beta: float = 1.0) -> None:
        self.d, self.beta = d, beta

    def _fit(self, data: PostData) -> None:
        """The training posts' tags by user (sorted) and the resources' relative counts."""
        order = np.argsort(data.train.users, kind="stable")
        self.train_ = data.train.take(order)
        self.tags_ = incidence(self.train_.tags, data.n_tags)
        counts = counts_by(data.train.resources, data.n_resources,
                           incidence(data.train.tags, data.n_tags))
        self.resource_ = normalize(counts, norm="l1")

    def activations(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` each post's user's normalized base-level activations at its time."""
        users = self.train_.users
        starts = np.searchsorted(users, posts.users, "left")
        ends = np.searchsorted(users, posts.users, "right")
        counts = ends - starts
        rows = np.repeat(np.arange(len(posts)), counts)  # (test post, its user's train post)
        columns = np.arange(len(rows)) + np.repeat(starts - (np.cumsum(counts) - counts),
                                                   counts)
        age = posts.times[rows] - self.train_.times[columns] + 1.0
        keep = age > 0  # a training post later than the test post: left out
        weights = sp.csr_matrix((age[keep] ** -self.d, (rows[keep], columns[keep])),
                                shape=(len(posts), len(self.train_)))
        return normalize((weights @ self.tags_).tocsr(), norm="l1")

    def score(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` β · BLL + (1 − β) · P(t | r)."""
        scores = self.beta * self.activations(posts)
        if self.beta < 1.0:
            scores = scores + (1.0 - self.beta) * self.resource_[posts.resources]
        return scores.tocsr()
