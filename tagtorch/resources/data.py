"""Data of resource ranking: the training documents and the post queries of one split.

The protocol of Harvey, Ruthven and Carman (2010), Section 4: a post is a (user, object) pair
with all its tags. Each user's last ``test_fraction`` of posts by time are test posts
(:func:`tagtorch.data.splits.temporal_user_split`; ties in time by a seeded draw), the last
``val_fraction`` of the remaining ones validation posts for tuning, and the rest training. The
training posts make the documents: an object's document holds every training tag of every one
of its posts, with repeats. A query is the tag set of a validation or test post, kept to the
tags that occur in training (an unseen tag carries no evidence for any object); its one
relevant object is the post's. Every object with a training document is a candidate; a post
whose object has none cannot be answered: it is counted (:attr:`ResourceSplit.counts`) and left
out. A query left without any tag stays in: every method then ranks by what it knows of the
objects alone (its prior, if it has one; else ties broken by object code).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import given_split, global_temporal_split, temporal_user_split

log = logging.getLogger(__name__)

__all__ = ["SPLITS", "ResourceQueries", "ResourceSplit", "resource_ranking_data"]


@dataclass(frozen=True)
class ResourceQueries:
    """Post queries: a tag set each, and the post's object as the one relevant answer.

    Attributes:
        ids: ``[Q]`` int64 post key ``user * n_objects + object`` (stable across seeds).
        users: ``[Q]`` the posts' users.
        words: ``[Q]`` rows of tag codes (tags known from training only).
        relevant: ``[Q]`` the posts' objects.
    """

    ids: np.ndarray
    users: np.ndarray
    words: Ragged
    relevant: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, rows: np.ndarray) -> ResourceQueries:
        """The queries at ``rows``."""
        return ResourceQueries(self.ids[rows], self.users[rows], self.words.take(rows),
                               self.relevant[rows])


@dataclass(frozen=True)
class ResourceSplit:
    """One seed's split.

    Attributes:
        documents: ``[n_objects]`` rows of training tag codes (with repeats); empty rows for
            objects without training posts.
        n_words: the tag vocabulary's size (the folksonomy's tags).
        candidates: ``[n_objects]`` bool, objects with a training document.
        val: the answerable validation queries.
        test: the answerable test queries.
        counts: facts for the report: posts per part, unanswerable and tagless queries.
    """

    documents: Ragged
    n_words: int
    candidates: np.ndarray
    val: ResourceQueries
    test: ResourceQueries
    counts: dict[str, int]


def _queries(folksonomy: Folksonomy, part: np.ndarray, known: np.ndarray,
             candidates: np.ndarray, name: str, counts: dict[str, int]) -> ResourceQueries:
    """The answerable post queries of the assignments in ``part``."""
    a = folksonomy.assignments[part]
    user, obj, tag = (a[c].to_numpy() for c in ("user", "object", "tag"))
    key = user * np.int64(folksonomy.n_objects) + obj
    ids, post = np.unique(key, return_inverse=True)
    post_user, post_object = ids // folksonomy.n_objects, ids % folksonomy.n_objects
    keep_tag = known[tag]
    words = Ragged.from_groups(post[keep_tag], tag[keep_tag], len(ids))
    answerable = candidates[post_object]
    counts[f"{name}_posts"] = len(ids)
    counts[f"{name}_unanswerable"] = int((~answerable).sum())
    counts[f"{name}_tagless"] = int((answerable & (words.lengths == 0)).sum())
    rows = np.flatnonzero(answerable)
    return ResourceQueries(ids, post_user, words, post_object).take(rows)


SPLITS = ("per_user_time", "global_time", "given")
"""``per_user_time``: each user's last posts (the paper); ``global_time``: the last posts of all
users (ours, for data of one post per user); ``given``: the source's own test posts
(:attr:`~tagtorch.data.folksonomy.Folksonomy.test_posts`, e.g. TagRec's ``X_test.txt``)."""


def resource_ranking_data(folksonomy: Folksonomy, test_fraction: float = 0.1,
                          val_fraction: float = 0.1, seed: int = 0,
                          split: str = "per_user_time") -> ResourceSplit:
    """The documents and queries of one seed's split (see the module).

    Args:
        folksonomy: the (filtered) folksonomy.
        test_fraction: share of each user's posts in test (the paper: 10%).
        val_fraction: share of each user's remaining posts in validation.
        seed: seed of the draw that orders posts with equal times.
        split: :data:`SPLITS`: per user by time (the paper), over all posts by time, or the
            source's own test posts (``test_fraction`` unused).

    Raises:
        ValueError: an unknown split.
        DataCheckError: a post without a timestamp.

    Example:
        >>> import pandas as pd
        >>> rows = [(u, o, t, 10 * o) for u in (1, 2) for o in range(10) for t in ("a", "b")]
        >>> f = Folksonomy.from_frame(pd.DataFrame(rows, columns=["user", "object", "tag",
        ...                                                       "timestamp"]))
        >>> split = resource_ranking_data(f, test_fraction=0.1, val_fraction=0.0)
        >>> split.counts["test_posts"], split.counts["test_unanswerable"]
        (2, 2)
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if split == "given":
        parts = given_split(folksonomy, val_fraction, seed)
    else:
        draw = temporal_user_split if split == "per_user_time" else global_temporal_split
        parts = draw(folksonomy, test_fraction, val_fraction, seed)
    a = folksonomy.assignments
    train = a[parts.train]
    documents = Ragged.from_groups(train["object"].to_numpy(), train["tag"].to_numpy(),
                                   folksonomy.n_objects)
    known = np.bincount(train["tag"].to_numpy(), minlength=folksonomy.n_tags) > 0
    candidates = documents.lengths > 0
    counts: dict[str, int] = {"train_posts": int(a[parts.train][["user", "object"]]
                                                 .drop_duplicates().shape[0]),
                              "candidates": int(candidates.sum())}
    val = _queries(folksonomy, parts.val, known, candidates, "val", counts)
    test = _queries(folksonomy, parts.test, known, candidates, "test", counts)
    log.info("resource ranking split (seed %d): %s", seed, counts)
    return ResourceSplit(documents, folksonomy.n_tags, candidates, val, test, counts)
