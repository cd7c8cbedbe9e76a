"""``3layers`` and ``3lt``: TagRec's cognitive tag recommenders, 3Layers and its time-aware 3LT.

Seitlinger, Kowald, Trattner and Ley (2013), "Recommending Tags with a Model of Human
Categorization" (CIKM), and Kowald, Seitlinger, Trattner and Ley (2014/2015), "Long Time No
See: The Probability of Reusing Tags as a Function of Frequency and Recency" / "Forgetting the
Words but Remembering the Meaning" (3LT), as TagRec computes them
(github.com/learning-layers/TagRec, ``processing/ThreeLTCalculator.java``, run by its Pipeline's
``3layers`` and ``3LT``; β = d = 0.5). For a test post ``(u, r)`` with categories ``C*``:

- **Semantic layer.** Each training post ``j`` of ``u`` is an exemplar with the similarity
  ``a_j = cos(cats(j), C*)³``, the binary cosine of the two category sets (0 when either is
  empty).
- **Lexical layer.** ``v(t) = Σ_j a_j · w(t)`` over the user's posts with the tag, where
  ``w(t) = ln 2`` in 3Layers; in 3LT on tags (``time="tags"``) ``w(t) = ln(1 + λ(t))``,
  ``λ(t) = (T* − t_last(t) + 1)^(−d)`` with ``T*`` the test post's time and ``t_last(t)`` the
  user's last post with the tag (0 when it lies after ``T*``: TagRec's ``pow`` gives NaN
  there); in 3LT on topics (``time="topics"``) the exemplar's similarity is multiplied by
  ``Σ_{c ∈ cats(j)} ln(1 + λ(c))``, the recency of each of its categories in the user's posts.
- **Normalization, TagRec's.** Each of the user's tags gets ``v(t)``, or **1** where
  ``v(t) = 0`` (TagRec takes ``exp`` of ``log v`` and of 0 for an empty value), divided by
  their sum: without categories every tag of the user weighs the same.
- **Resource.** ``s(t) = β · U(t) + (1 − β) · P(t | r)``, the resource's relative tag counts;
  ``resource=False`` (TagRec's ``userlayers``) keeps ``β · U(t)``.
- **Ties.** TagRec inserts the candidates in its tag index order (first appearance in its
  file) and its sort puts the later insertion first: the higher index wins a tie.

The tag service (``task=fit``) keeps no categories: served, the model is fitted on posts alone
and answers as 3Layers without categories does (every tag of the user weighs the same).

Topics instead of categories (``topics=Z``, ours; ``model=three_layers_lda``). Where the data has
no categories TagRec's 3Layers runs on nothing (every tag of the user weighs the same); its
authors fed it LDA topics, written into the file's category field by ``Pipeline lda_samples``
(``MalletCalculator.createSample``: a resource LDA, Z = 1000, each resource's topics with
``θ > 0.001``). That path does not work at TagRec's commit: its Mallet hyperparameter
optimization breaks the model (``tagtorch.posts.lda``), and it fits the topics on every line,
test lines included. ``topics=Z`` fits tagtorch's LDA (α = β = 0.01, the last of
``topic_iterations`` sweeps, seeded) on the resources' *training* tags and takes each resource's
topics with ``θ > 0.001`` as its categories; a resource without training posts has none.

Deviation: TagRec reads each line's own categories; tagtorch's folksonomy holds one category
set per resource (its first non-empty field), the same thing where a resource's lines agree (as
in every file TagRec's converters write). TagRec keeps a category's weight suffix as part of
its name (``jazz_0.7``); tagtorch reads it as a weight and ignores it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from tagtorch.candidates.neighbours import incidence
from tagtorch.errors import UnreadableFileError
from tagtorch.posts.base import PostRanker
from tagtorch.posts.baselines import counts_by
from tagtorch.posts.data import PostData, Posts, first_use, posts_of_users, user_tag_reduce
from tagtorch.posts.lda import topic_mixtures
from tagtorch.storage import check_codes, check_count

__all__ = ["ThreeLayers"]

Time = Literal["none", "tags", "topics"]
TOPIC_THRESHOLD = 0.001
"""A resource's LDA topic is one of its categories above this ``θ`` (TagRec's
``MalletCalculator.TOPIC_THRESHOLD`` for tag samples)."""


def _recency(now: np.ndarray, last: np.ndarray, d: float) -> np.ndarray:
    """``ln(1 + (now − last + 1)^(−d))``, 0 where the power is not finite (TagRec's NaN)."""
    base = now - last + 1.0
    out = np.zeros(len(base))
    ok = base > 0
    out[ok] = np.log1p(base[ok] ** -d)
    return out


class ThreeLayers(PostRanker):
    """``3layers`` (``time="none"``) and ``3lt`` (``time="tags"``, ``"topics"``): module docstring.

    Args:
        beta: the user part's weight (TagRec: 0.5).
        d: the decay of 3LT's recency (TagRec: 0.5).
        resource: add the resource's relative tag counts (TagRec's ``layers``; False:
            ``userlayers``).
        time: ``"none"`` (3Layers), ``"tags"`` (3LT on the tags) or ``"topics"`` (3LT on
            the categories).
        topics: 0: the data's categories; ``Z > 0``: each resource's LDA topics instead
            (module docstring; ours, a working stand-in for TagRec's ``lda_samples``).
        topic_iterations: the LDA's Gibbs sweeps.
        seed: the LDA's seed.
    """

    saved_categories_: sp.csr_matrix | None = None
    """The categories a saved model was loaded with (:meth:`load`; its posts have no folksonomy)."""

    def __init__(self, beta: float = 0.5, d: float = 0.5, resource: bool = True,
                 time: Time = "none", topics: int = 0, topic_iterations: int = 300,
                 seed: int = 0) -> None:
        if topics < 0:
            raise ValueError(f"topics must be 0 (the data's categories) or more, got {topics}")
        if time not in ("none", "tags", "topics"):
            raise ValueError(f"time must be 'none', 'tags' or 'topics', got {time!r}")
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {beta}")
        self.beta, self.d, self.resource, self.time = beta, d, resource, time
        self.topics, self.topic_iterations, self.seed = topics, topic_iterations, seed

    def _fit(self, data: PostData) -> None:
        """The training posts by user, the resources' categories and tag shares."""
        order = np.argsort(data.train.users, kind="stable")
        self.train_ = data.train.take(order)
        self.n_tags_ = data.n_tags
        self.tags_ = incidence(self.train_.tags, data.n_tags).astype(bool).astype(np.float64)
        self.user_tags_ = counts_by(self.train_.users, data.n_users, self.tags_).astype(bool)
        categories = (self.saved_categories_ if data.folksonomy is None
                      and self.saved_categories_ is not None
                      else self._topic_sets(data) if self.topics else _category_sets(data))
        if categories.shape[0] < data.n_resources:  # resources added since: no categories
            categories = sp.vstack([categories, sp.csr_matrix(
                (data.n_resources - categories.shape[0], categories.shape[1]))], format="csr")
        self.categories_ = categories
        self.resource_ = normalize(counts_by(data.train.resources, data.n_resources,
                                             incidence(data.train.tags, data.n_tags)),
                                   norm="l1")
        self.tag_index_ = first_use(data.train, np.zeros(len(data.train), np.int64), 1,
                                    data.n_tags)
        users, tags, last = user_tag_reduce(self.train_, data.n_tags, self.train_.times,
                                            np.maximum)
        self.last_use_ = (users * np.int64(data.n_tags) + tags, last)
        self.last_category_ = self._last_category_use()

    def _topic_sets(self, data: PostData) -> sp.csr_matrix:
        """``[R, Z]`` each resource's LDA topics with ``θ > 0.001`` over its training tags."""
        theta, _ = topic_mixtures(data.train.resources, data.n_resources, data, self.topics,
                                  0.01, 0.01, self.topic_iterations, TOPIC_THRESHOLD, self.seed)
        return sp.csr_matrix((theta > 0).astype(np.float64))

    def _last_category_use(self) -> tuple[np.ndarray, np.ndarray]:
        """``(user · C + category, time)``: each user's last training post with the category."""
        cats = self.categories_[self.train_.resources]
        per = np.diff(cats.indptr)
        owner = np.repeat(self.train_.users, per) * np.int64(cats.shape[1])
        keys, inverse = np.unique(owner + cats.indices, return_inverse=True)
        last = np.full(len(keys), -np.inf)
        np.maximum.at(last, inverse, np.repeat(self.train_.times, per))
        return keys, last

    def _exemplars(self, posts: Posts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, columns, a)``: each post's user's training posts and their similarity."""
        rows, columns = posts_of_users(self.train_.users, posts.users)
        mine = self.categories_[posts.resources[rows]]
        theirs = self.categories_[self.train_.resources[columns]]
        shared = np.asarray(mine.multiply(theirs).sum(1)).ravel()
        sizes = np.diff(mine.indptr) * np.diff(theirs.indptr).astype(np.float64)
        similarity = np.divide(shared, np.sqrt(sizes), out=np.zeros(len(rows)),
                               where=sizes > 0) ** 3
        if self.time == "topics":
            similarity *= self._topic_recency(posts, rows, columns, theirs)
        return rows, columns, similarity

    def _topic_recency(self, posts: Posts, rows: np.ndarray, columns: np.ndarray,
                       theirs: sp.csr_matrix) -> np.ndarray:
        """``Σ_{c ∈ cats(j)} ln(1 + λ(c))`` of each exemplar: its categories' recency."""
        n_cats = self.categories_.shape[1]
        per = np.diff(theirs.indptr)
        pair = np.repeat(np.arange(len(rows)), per)
        keys = posts.users[rows][pair] * np.int64(n_cats) + theirs.indices
        known, last = self.last_category_
        found = last[np.searchsorted(known, keys)]
        values = _recency(posts.times[rows][pair].astype(np.float64), found, self.d)
        return np.bincount(pair, weights=values, minlength=len(rows))

    def user_part(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` ``U(t)``: the normalized lexical activation of each of the user's tags."""
        rows, columns, similarity = self._exemplars(posts)
        weights = sp.csr_matrix((similarity, (rows, columns)),
                                shape=(len(posts), len(self.train_)))
        values = (weights @ self.tags_).tocsr()
        values = (self._tag_recency(posts, values) if self.time == "tags"
                  else values * np.log(2.0))  # 3Layers' and 3LT-topic's lexical weight: ln 2
        own = self.user_tags_[posts.users].astype(np.float64).tocsr()
        filled = own.copy()  # every tag of the user: v(t), or 1 where v(t) = 0
        filled.data = np.ones(len(filled.data))
        found = values.multiply(own).tocsr()
        found.eliminate_zeros()
        filled = filled - filled.multiply(found.astype(bool)) + found
        return normalize(filled.tocsr(), norm="l1")

    def _tag_recency(self, posts: Posts, values: sp.csr_matrix) -> sp.csr_matrix:
        """``values · ln(1 + λ(t))`` with each tag's recency in the user's posts."""
        values = values.tocoo()
        keys = posts.users[values.row] * np.int64(self.n_tags_) + values.col
        known, last = self.last_use_
        found = last[np.searchsorted(known, keys)].astype(np.float64)
        decay = _recency(posts.times[values.row].astype(np.float64), found, self.d)
        return sp.csr_matrix((values.data * decay, (values.row, values.col)),
                             shape=values.shape)

    def score(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` β · U(t) (+ (1 − β) · P(t | r))."""
        scores = self.beta * self.user_part(posts)
        if self.resource:
            scores = scores + (1.0 - self.beta) * self.resource_[posts.resources]
        return scores.tocsr()

    def tie_order(self, posts: Posts) -> sp.csr_matrix:
        """``[Q, W]`` TagRec's tag index: the later first appearance first."""
        return self.tag_index_[np.zeros(len(posts), dtype=np.int64)]

    def _saved_arrays(self) -> dict[str, np.ndarray]:
        """The resources' categories (the posts alone do not hold them)."""
        pairs = self.categories_.tocoo()
        return {"category_resources": pairs.row.astype(np.int64),
                "category_codes": pairs.col.astype(np.int64),
                "n_categories": np.array([pairs.shape[1]], dtype=np.int64)}

    def _restore(self, arrays: Mapping[str, np.ndarray], file: Path, n_resources: int) -> None:
        """Reads the categories :meth:`_saved_arrays` wrote."""
        missing = {"category_resources", "category_codes", "n_categories"} - set(arrays)
        if missing:
            raise UnreadableFileError(f"{file}: the saved arrays lack {sorted(missing)}")
        counts = arrays["n_categories"]
        if counts.shape != (1,) or counts.dtype.kind not in "iu":
            raise UnreadableFileError(f"{file}: n_categories: expected 1 integer")
        n_categories = check_count(file, "n_categories", int(counts[0]), 2**31)
        rows = check_codes(file, "category_resources", arrays["category_resources"],
                           n_resources)
        columns = check_codes(file, "category_codes", arrays["category_codes"], n_categories)
        if rows.shape != columns.shape:
            raise UnreadableFileError(f"{file}: category_resources and category_codes must be "
                                      "of one length")
        self.saved_categories_ = sp.csr_matrix(
            (np.ones(len(rows)), (rows, columns)), shape=(n_resources, max(n_categories, 1)))


def _category_sets(data: PostData) -> sp.csr_matrix:
    """``[R, C]`` each resource's categories (binary; one empty column without any)."""
    folksonomy = data.folksonomy
    if folksonomy is None or not len(folksonomy.categories):
        return sp.csr_matrix((data.n_resources, 1))
    table = folksonomy.categories
    return sp.csr_matrix((np.ones(len(table)), (table["object"], table["category"])),
                         shape=(data.n_resources, len(folksonomy.category_names)))
