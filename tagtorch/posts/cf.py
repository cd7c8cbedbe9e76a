"""``cf``: user-based collaborative filtering of tags, as TagRec's ``CFTagRecommender`` does it.

Jäschke, Marinho, Hotho, Schmidt-Thieme and Stumme (2007), "Tag Recommendations in
Folksonomies" (PKDD), in TagRec's form (github.com/learning-layers/TagRec,
``processing/CFTagRecommender.java``; its Pipeline's ``cf`` runs it user-based only, 20
neighbours, output ``usercf_5``: the ``5`` is a beta that this variant never reads, there is no
resource part). For a test post ``(u, r)``:

1. Candidates: every other user with a training post of ``r``, in the order of those posts'
   lines (TagRec's ``LinkedHashMap`` of the lines on ``r``). When there is none, every
   training user, ``u`` included, in the order of each user's first training line.
2. Each candidate ``v`` gets the cosine of the users' tag-count profiles over all training
   posts: the integer dot product over ``sqrt(|u|² · |v|²)`` (0 without a common tag).
3. The candidates are sorted by similarity, equal ones the later in the candidate order first
   (TagRec's comparator in a ``TreeMap`` never answers "equal": the later insertion goes
   first), and the first 20 vote, similarity 0 included.
4. A neighbour votes its similarity for every tag of its post of ``r``, or in the fallback
   (no post of ``r``) of its last training post (``Bookmark.getBookmark``); the votes are
   summed in neighbour order into a map whose insertion order is the first vote of each tag
   (neighbour, then the post's tags in the line's order: by code in files tagtorch writes).
   Tags with only zero votes are candidates with score 0.
5. The tags are sorted by score, equal ones the later-inserted first (:meth:`UserCF.tie_order`);
   the first 10 are the list.

On TagRec's own split files (its ids as codes) the lists equal TagRec's ``usercf_5`` output
post for post (HetRec MovieLens and Last.fm 3-cores, leave-last). "Later" means later in the
training posts' order, i.e. the higher user code: TagRec numbers users by first appearance in
its file (numeric ids in TagRec's converters' files), tagtorch sorts raw ids as strings, so on
such files the order of equal-similarity neighbours follows tagtorch's codes, not the file's.

A test user with no training post: TagRec skips the similarities and keeps its candidates in
the order met, all scored 0, so the *first* 20 vote (0 each); the same here. "Order met" and
"later" follow the source's lines where the data keeps them (TagRec's files), else the
training posts' order. Deviation: TagRec's ``userMaps`` list also assumes every training user
has an index below the number of users (contiguous ids); tagtorch's codes always are.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from tagtorch.candidates.neighbours import incidence
from tagtorch.posts.base import PostRanker, recommend
from tagtorch.posts.baselines import counts_by
from tagtorch.posts.data import PostData, Posts, post_places
from tagtorch.progress import batch_ranges

__all__ = ["UserCF"]


def _line_places(posts: Posts, n_tags: int) -> sp.csr_matrix:
    """``[P, W]`` each tag's place in its post's line (source order, else code order).

    Stored like :func:`~tagtorch.candidates.neighbours.incidence`'s entries (zeros kept), so
    a row's data align with the incidence row's.
    """
    rows = posts.tags.row_ids
    seen = (np.arange(len(rows)) if posts.source_order is None else posts.source_order)
    sort = np.lexsort((seen, rows))
    within = np.empty(len(rows), dtype=np.int64)
    within[sort] = np.arange(len(rows)) - posts.tags.offsets[rows[sort]]
    return sp.csr_matrix((within, np.asarray(posts.tags.values, dtype=np.int64),
                          np.asarray(posts.tags.offsets, dtype=np.int64)),
                         shape=(len(posts), n_tags))


_CHUNK = 4096
"""Test posts scored at once (bounds the fallback's ``[posts, users]`` similarities)."""


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
        """The users' tag counts, the training posts by resource, each user's first/last post."""
        train = data.train
        self.n_tags_ = data.n_tags
        self.tags_ = incidence(train.tags, data.n_tags)
        self.inline_ = _line_places(train, data.n_tags)
        self.counts_ = counts_by(train.users, data.n_users, self.tags_)
        self.squares_ = np.asarray(self.counts_.multiply(self.counts_).sum(1)).ravel()
        self.posts_of_ = sp.csr_matrix(
            (np.ones(len(train)), (train.resources, np.arange(len(train)))),
            shape=(data.n_resources, len(train)))
        self.users_ = np.asarray(train.users, dtype=np.int64)
        place = post_places(train)  # TagRec's line order of the training posts
        self.place_ = place
        by_place = np.argsort(place, kind="stable")
        self.first_ = np.full(data.n_users, -1, dtype=np.int64)  # the candidate order
        self.first_[self.users_[by_place[::-1]]] = place[by_place[::-1]]
        self.last_ = np.full(data.n_users, -1, dtype=np.int64)  # the fallback's post
        self.last_[self.users_[by_place]] = by_place
        active = np.flatnonzero(self.first_ >= 0)
        by_first = active[np.argsort(self.first_[active])]
        # the fallback's zero-cosine fill: the last users for a known user (sorted, the later
        # first), the first ones for a new user (TagRec leaves its candidates unsorted)
        self.pool_ = by_first[::-1][:self.neighbours]
        self.new_pool_ = by_first[:self.neighbours]

    def _cosines(self, users: np.ndarray, others: np.ndarray) -> np.ndarray:
        """``[n]`` TagRec's cosine of each pair's tag counts (``Utilities.getCosineSim``)."""
        dots = np.asarray(self.counts_[users].multiply(self.counts_[others]).sum(1)).ravel()
        norms = np.sqrt(self.squares_[users] * self.squares_[others])
        return np.divide(dots, norms, out=np.zeros_like(dots), where=(dots > 0) & (norms > 0))

    def _candidates(self, posts: Posts
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, users, posts, met)``: each post's candidate neighbours and votes.

        ``posts``: the training post that votes; ``met``: the candidate's place in TagRec's
        candidate map (its line on ``r``; in the fallback, its first training line).
        """
        pairs = self.posts_of_[posts.resources].tocoo()
        other = self.users_[pairs.col] != posts.users[pairs.row]
        rows, voting = pairs.row[other].astype(np.int64), pairs.col[other].astype(np.int64)
        met = self.place_[voting]
        lonely = np.flatnonzero(np.bincount(rows, minlength=len(posts)) == 0)
        if len(lonely):  # nobody else tagged r: every user (u too) with its last post
            shared = (self.counts_[posts.users[lonely]] @ self.counts_.T).tocoo()
            new = self.first_[posts.users[lonely]] < 0
            pool = np.where(new[:, None], self.new_pool_, self.pool_).ravel()
            keys = np.unique(np.concatenate([
                lonely[shared.row] * np.int64(len(self.first_)) + shared.col,
                np.repeat(lonely, len(self.pool_)) * np.int64(len(self.first_)) + pool]))
            fallback_rows, fallback_users = keys // len(self.first_), keys % len(self.first_)
            rows = np.concatenate([rows, fallback_rows])
            voting = np.concatenate([voting, self.last_[fallback_users]])
            met = np.concatenate([met, self.first_[fallback_users]])
        return rows, self.users_[voting], voting, met

    def _neighbours(self, posts: Posts) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, ranks, sims, posts)`` the voting neighbours, by post, then rank."""
        rows, users, voting, met = self._candidates(posts)
        sims = self._cosines(posts.users[rows], users)
        new = self.first_[posts.users[rows]] < 0  # TagRec leaves a new user's candidates as met
        later = np.where(new, met, -met)
        order = np.lexsort((later, -sims, rows))  # equal: the later user first
        rows, sims, voting = rows[order], sims[order], voting[order]
        starts = np.searchsorted(rows, rows)  # rows sorted: where each post's run starts
        ranks = np.arange(len(rows)) - starts
        keep = ranks < self.neighbours
        return rows[keep], ranks[keep], sims[keep], voting[keep]

    def _votes(self, posts: Posts) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """``([Q, W] summed votes, [Q, W] insertion places)`` TagRec's result map per post."""
        rows, ranks, sims, voting = self._neighbours(posts)
        tags = self.tags_[voting]
        per = np.diff(tags.indptr)
        entry_rows = np.repeat(rows, per)
        place = (np.repeat(ranks * np.int64(self.tags_.shape[1] + 1), per)
                 + self.inline_[voting].data.astype(np.int64))
        flat = entry_rows * np.int64(self.n_tags_) + tags.indices
        cells, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
        sums = np.zeros(len(cells))
        np.add.at(sums, inverse, np.repeat(sims, per))  # in neighbour order, as TagRec adds
        index = (cells // self.n_tags_, cells % self.n_tags_)
        shape = (len(posts), self.n_tags_)
        return (sp.csr_matrix((sums, index), shape=shape),
                sp.csr_matrix((place[first] + 1, index), shape=shape, dtype=np.int64))

    def _scores_and_ties(self, posts: Posts) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """:meth:`_votes` of all posts, taken in chunks of ``_CHUNK`` (a bar past one)."""
        blocks = [self._votes(posts.take(np.arange(start, stop)))
                  for start, stop in batch_ranges(len(posts), _CHUNK, "CF", unit="post")]
        if not blocks:
            return sp.csr_matrix((0, self.n_tags_)), sp.csr_matrix((0, self.n_tags_))
        return (sp.vstack([b[0] for b in blocks], format="csr"),
                sp.vstack([b[1] for b in blocks], format="csr"))

    def score(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` the summed similarities of the top neighbours that used each tag.

        Every tag of a voting neighbour is stored, with 0 when its votes are all 0.
        """
        return self._scores_and_ties(posts)[0]

    def tie_order(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` each candidate's place in TagRec's result map: the later first on ties."""
        return self._scores_and_ties(posts)[1]

    def top_tags(self, posts: Posts, k: int) -> np.ndarray:
        """``[Q, k]`` the best tags, the votes counted once for the scores and their ties."""
        scores, ties = self._scores_and_ties(posts)
        return recommend(scores, k, ties)
