"""TagRec's popularity and time-aware baselines, batched over all test posts.

Each ranker is fitted on a split's training posts and scores every test post's tags as one
sparse ``[Q, W]`` matrix (sparse products, no per-post loops). Formulas as in TagRec's code
(github.com/learning-layers/TagRec), checked against the output of its ``test.Pipeline``
(``tests/test_tagrec_oracle.py``):

- ``mp`` (``MPCalculator``): the tags most used in training, the same list for every post;
- ``mp_u``, ``mp_r``, ``mp_ur`` (``MPurCalculator``): with ``c_ut`` the user's and ``c_rt``
  the resource's tag counts, ``c_ut + (1 − β) · exp(c_rt) / Σ_t' exp(c_rt')``, β = 0.5
  (``mp_u``: the user part alone, ``mp_r``: the resource part). TagRec's code adds the user's
  *raw* counts (its softmax of them, ``β · exp(c_ut) / Σ exp(c_ut')``, is commented out), so
  the user part decides whenever the user used a tag; ``user_part="softmax"`` (ours, the
  formula as written there and in Kowald et al.'s description of a weighted mix) mixes the two
  softmaxes. We subtract each row's largest count before ``exp`` (the same values where Java's
  ``Math.exp`` does not overflow, above a count of about 709);
- ``bll``, ``bll_c`` (``BLLCalculator``, Kowald et al. 2014): the user's base-level activation
  of each tag, ``Σ_j (t_ref − t_j + 1)^(−d)`` over the user's training posts ``j`` with the
  tag, ``d = 0.5``, divided by the row's sum; ``bll_c`` adds the resource's relative tag
  counts: ``β · BLL + (1 − β) · P(t | r)``, β = 0.5. ``t_ref`` is TagRec's: the latest time
  among the user's test posts, the same for all of them (``Utilities.getBaselineTimestamp``);
  ``reference_time="post"`` takes each test post's own time, as Kowald et al. write it. A
  training post later than ``t_ref`` is left out, its tags too (TagRec's ``Math.pow`` gives
  NaN there and it skips the line).
- ``bll_ac``, ``bll_c_ac`` (``associative=True``; TagRec's ``bll_c_ac`` command, Kowald et al.
  2015 and Trattner et al. 2016, BLLac+MPr): where the resource has training posts, the user's
  activations plus an associative part, ``X(t) = B(t) + Σ_d J(t, d) · P(d | r)`` over all the
  user's tags ``t`` and the resource's tags ``d``, with ``J`` the Jaccard index of the two tags'
  training posts (TagRec's ``CooccurenceMatrix``), divided by its sum; then ``β · X + (1 − β) ·
  P(t | r)``. Every tag of the user is a candidate (0 included), the counted ones first in the
  tie order.

Ties are TagRec's (:meth:`~tagtorch.posts.base.PostRanker.tie_order`): its maps hold a user's
tags in the order of first use, then the resource's other tags in theirs, and its sort
(``DoubleMapComparator``, never 0) puts the later of two equal scores first
(:func:`tagrec_ties`). ``mp``'s map is in TagRec's tag index order (first appearance in the
file), and the later first appearance comes first among equal counts. "First" is the source's
order where the data keeps it (TagRec's files: :attr:`~tagtorch.posts.data.Posts.source_order`),
else the posts' order with a post's tags by code.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from tagtorch.candidates.neighbours import incidence
from tagtorch.posts.base import PostRanker, recommend, value_at
from tagtorch.posts.data import PostData, Posts, first_use, posts_of_users

ReferenceTime = Literal["user_latest", "post"]

__all__ = ["BaseLevelLearning", "MostPopular", "MostPopularUserResource", "counts_by",
           "first_uses", "tagrec_ties"]


def counts_by(keys: np.ndarray, n_rows: int, tags: sp.csr_matrix) -> sp.csr_matrix:
    """``[n_rows, W]`` the tag counts of the posts grouped by ``keys`` (a user or resource)."""
    groups = sp.csr_matrix((np.ones(len(keys)), (keys, np.arange(len(keys)))),
                           shape=(n_rows, len(keys)))
    return (groups @ tags).tocsr()


def tagrec_ties(posts: Posts, user_first: sp.csr_matrix | None,
                resource_first: sp.csr_matrix | None) -> sp.csr_matrix:
    """``[Q, W]`` TagRec's order of equal scores for the posts ``(u, r)``: higher keys first.

    TagRec fills a post's result map with the user's tags in their order of first use, then
    the resource's other tags in theirs, and sorts with a comparator that puts the later
    insertion first among equal values; the keys are those insertion places.

    Args:
        posts: the test posts.
        user_first: ``[users, W]`` :func:`~tagtorch.posts.data.first_use` by user (None:
            the method has no user part).
        resource_first: the same by resource (None: no resource part).

    Example:
        >>> from tagtorch.data.ragged import Ragged
        >>> posts = Posts(np.array([0]), np.array([0]), np.array([9]), Ragged.from_lists([[]]))
        >>> keys = tagrec_ties(posts, sp.csr_matrix([[0, 3, 1]]), sp.csr_matrix([[2, 5, 0]]))
        >>> keys.toarray().tolist()  # the user's tags 2 then 1, then the resource's tag 0
        [[6, 3, 1]]
    """
    parts = [m[codes] for m, codes in ((user_first, posts.users),
                                       (resource_first, posts.resources)) if m is not None]
    if len(parts) == 1:
        return parts[0].tocsr()
    user, resource = (part.tocsr().astype(np.int64) for part in parts)
    offset = int(user.data.max(initial=0)) + 1
    later = resource.copy()
    later.data += offset
    later = later - later.multiply(user.astype(bool))  # a tag of the user keeps its place
    return (user + later).tocsr()


def first_uses(data: PostData) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """The training posts' :func:`~tagtorch.posts.data.first_use` by user and by resource.

    Returns:
        ``([users, W], [resources, W])``, the maps :func:`tagrec_ties` reads.
    """
    train = data.train
    return (first_use(train, train.users, data.n_users, data.n_tags),
            first_use(train, train.resources, data.n_resources, data.n_tags))


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
        self.first_ = first_use(data.train, np.zeros(len(data.train), np.int64), 1,
                                data.n_tags)

    def score(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` the counts, one row per post."""
        return sp.csr_matrix(np.broadcast_to(self.counts_, (len(posts), len(self.counts_))))

    def tie_order(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` TagRec's tag index: the later first appearance first (module docstring)."""
        return self.first_[np.zeros(len(posts), dtype=np.int64)]

    def top_tags(self, posts: Posts, k: int) -> np.ndarray:
        """``[Q, k]`` the one list of every post, ranked once and repeated.

        Each row of :meth:`score` ranks to that list; sorting ``posts x tags`` equal rows took
        338 ms at 1,861 posts.
        """
        one = recommend(sp.csr_matrix(self.counts_[None, :]), k,
                        self.first_[np.zeros(1, dtype=np.int64)])
        return np.repeat(one, len(posts), axis=0)


class MostPopularUserResource(PostRanker):
    """``mp_u``, ``mp_r``, ``mp_ur`` (module docstring).

    Args:
        beta: the user part's weight (TagRec: 0.5; with ``user_part="counts"`` it weighs the
            resource part alone, as TagRec's code does).
        user: use the user's tag counts.
        resource: use the resource's tag counts.
        user_part: ``"counts"`` (TagRec's code: the raw counts) or ``"softmax"`` (ours: β
            times their softmax).
    """

    user_part: str

    def __init__(self, beta: float = 0.5, user: bool = True, resource: bool = True,
                 user_part: str = "counts") -> None:
        if not (user or resource):
            raise ValueError("mp_ur needs the user part, the resource part or both")
        if user_part not in ("counts", "softmax"):
            raise ValueError(f"user_part must be 'counts' or 'softmax', got {user_part!r}")
        self.beta, self.user, self.resource = beta, user, resource

    def _fit(self, data: PostData) -> None:
        """The users' tag counts (or their softmax), the resources' softmax, the first uses."""
        train, tags = data.train, incidence(data.train.tags, data.n_tags)
        counts = counts_by(train.users, data.n_users, tags)
        self.user_ = (counts if self.user_part == "counts"
                      else self.beta * _row_softmax(counts))
        self.resource_ = _row_softmax(counts_by(train.resources, data.n_resources, tags))
        self.user_first_, self.resource_first_ = first_uses(data)

    def score(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` user part + (1 − β) · resource part."""
        parts = []
        if self.user:
            parts.append(self.user_[posts.users])
        if self.resource:
            parts.append((1.0 - self.beta) * self.resource_[posts.resources])
        return sum(parts[1:], parts[0]).tocsr()

    def tie_order(self, posts: Posts) -> sp.csr_matrix:
        """TagRec's order of equal scores (:func:`tagrec_ties`)."""
        return tagrec_ties(posts, self.user_first_ if self.user else None,
                           self.resource_first_ if self.resource else None)


class BaseLevelLearning(PostRanker):
    """``bll`` and ``bll_c`` (module docstring).

    Args:
        d: the decay exponent (Kowald et al.: 0.5).
        beta: the user (BLL) part's weight; 1.0 is ``bll``, 0.5 ``bll_c``.
        reference_time: ``"user_latest"`` (TagRec's): every post of a user is scored at the
            latest time among that user's posts scored together (TagRec: the user's test
            posts); ``"post"``: each post at its own time (Kowald et al.'s formula).
        associative: add the associative component of the resource's tags (TagRec's
            ``bll_ac``; with ``beta=0.5`` its BLLac+MPr, ``bll_c_ac``; module docstring).
    """

    def __init__(self, d: float = 0.5, beta: float = 1.0,
                 reference_time: ReferenceTime = "user_latest",
                 associative: bool = False) -> None:
        if reference_time not in ("user_latest", "post"):
            raise ValueError(f"reference_time must be 'user_latest' or 'post', "
                             f"got {reference_time!r}")
        self.d, self.beta, self.reference_time = d, beta, reference_time
        self.associative = associative

    def _fit(self, data: PostData) -> None:
        """The training posts' tags by user (sorted) and the resources' relative counts."""
        order = np.argsort(data.train.users, kind="stable")
        self.train_ = data.train.take(order)
        self.tags_ = incidence(self.train_.tags, data.n_tags)
        counts = counts_by(data.train.resources, data.n_resources,
                           incidence(data.train.tags, data.n_tags))
        self.resource_ = normalize(counts, norm="l1")
        self.user_first_, self.resource_first_ = first_uses(data)
        if self.associative:
            self.jaccard_ = _jaccard(self.tags_)
            self.user_tags_ = counts_by(self.train_.users, data.n_users, self.tags_)

    def reference_times(self, posts: Posts) -> np.ndarray:
        """``[Q]`` the time at which each post's activations are computed (``reference_time``)."""
        if self.reference_time == "post":
            return np.asarray(posts.times)
        users, inverse = np.unique(posts.users, return_inverse=True)
        latest = np.full(len(users), np.iinfo(np.int64).min, dtype=np.asarray(posts.times).dtype)
        np.maximum.at(latest, inverse, posts.times)
        return latest[inverse]

    def _counted(self, users: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, columns)``: each ``(user, time)``'s training posts made by then.

        ``age = time − t_j + 1 > 0``: TagRec's ``Math.pow`` gives NaN for a later post, and
        it skips that line before its tags enter the user's map.
        """
        rows, columns = posts_of_users(self.train_.users, users)
        keep = times[rows] - self.train_.times[columns] + 1.0 > 0
        return rows[keep], columns[keep]

    def activations(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` each post's user's normalized base-level activations at its reference."""
        reference = self.reference_times(posts)
        rows, columns = self._counted(posts.users, reference)
        age = reference[rows] - self.train_.times[columns] + 1.0
        weights = sp.csr_matrix((age ** -self.d, (rows, columns)),
                                shape=(len(posts), len(self.train_)))
        return normalize((weights @ self.tags_).tocsr(), norm="l1")

    def associated(self, posts: Posts, activation: sp.csr_matrix) -> sp.csr_matrix:
        """``[Q, W]`` TagRec's BLLac, ``X(t) = B(t) + Σ_d J(t, d) · P(d | r)`` (module docstring).

        Over all the user's tags, divided by its sum; the activations ``B`` alone where ``r``
        has no training post. The user's tags with ``X = 0`` stay candidates (stored zeros).
        """
        share = self.resource_[posts.resources].tocsr()
        known = np.diff(share.indptr) > 0
        own = self.user_tags_[posts.users].tocoo()
        keep = known[own.row]
        rows, cols = own.row[keep], own.col[keep]
        values = (value_at(activation, rows, cols)
                  + value_at((share @ self.jaccard_).tocsr(), rows, cols))
        sums = np.bincount(rows, weights=values, minlength=len(posts))
        values = values / np.where(sums > 0, sums, 1.0)[rows]
        alone = activation.tocoo()
        alone_keep = ~known[alone.row]
        return _stored(np.r_[rows, alone.row[alone_keep]], np.r_[cols, alone.col[alone_keep]],
                       np.r_[values, alone.data[alone_keep]], activation.shape)

    def score(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` β · BLL (or BLLac) + (1 − β) · P(t | r)."""
        user = self.activations(posts)
        if self.associative:
            user = self.associated(posts, user)
        parts = [(user.tocoo(), self.beta)]
        if self.beta < 1.0:
            parts.append((self.resource_[posts.resources].tocoo(), 1.0 - self.beta))
        return _stored(np.concatenate([m.row for m, _ in parts]),
                       np.concatenate([m.col for m, _ in parts]),
                       np.concatenate([w * m.data for m, w in parts]), user.shape)

    def tie_order(self, posts: Posts) -> sp.csr_matrix:
        """TagRec's order of equal scores (:func:`tagrec_ties`).

        With ``user_latest``, a user's tags are in their order of first use among the training
        posts counted at the reference time (TagRec never inserts the others); with ``post``,
        among all of the user's training posts.
        """
        user_first = self.user_first_
        if self.reference_time == "user_latest":
            users, first = np.unique(posts.users, return_index=True)
            _, columns = self._counted(users, self.reference_times(posts)[first])
            counted = self.train_.take(columns)
            user_first = first_use(counted, counted.users, *self.user_first_.shape)
        if self.associative:  # then the user's other tags, in their order of first use
            later = self.user_first_.copy()
            later.data += int(user_first.data.max(initial=0))
            user_first = (later - later.multiply(user_first.astype(bool)) + user_first).tocsr()
        return tagrec_ties(posts, user_first, self.resource_first_ if self.beta < 1.0 else None)


def _stored(rows: np.ndarray, cols: np.ndarray, values: np.ndarray,
            shape: tuple[int, int]) -> sp.csr_matrix:
    """A CSR matrix of the entries, duplicates summed and stored zeros kept (candidates)."""
    matrix = sp.csr_matrix((values, (rows, cols)), shape=shape)
    matrix.sum_duplicates()
    return matrix


def _jaccard(tags: sp.csr_matrix) -> sp.csr_matrix:
    """``[W, W]`` the Jaccard index of the tags' training posts (TagRec's ``CooccurenceMatrix``).

    ``c_xy / (n_x + n_y − c_xy)``: the posts with both over the posts with either.
    """
    binary = tags.astype(bool).astype(np.float64)
    both = (binary.T @ binary).tocoo()
    n = np.asarray(binary.sum(0)).ravel()
    return sp.csr_matrix((both.data / (n[both.row] + n[both.col] - both.data),
                          (both.row, both.col)), shape=both.shape)
