"""Posts and splits of personalized tag recommendation, as TagRec makes them.

A post is a user's tagging of one resource: ``(user, resource)`` with its distinct tags and its
time (the earliest timestamp of its assignments). TagRec's benchmark (Kowald et al.; the
``BookmarkSplitter`` of github.com/learning-layers/TagRec) takes the p-core of the folksonomy
(users, resources and tags with at least ``p`` posts each, jointly: :func:`~tagtorch.data.
splits.p_core`; ``p = 1``: no core), sorts the posts by user, then time, and holds out each
user's last post when the user has more than one. Also offered: the last posts of everyone by
time (``global_time``), a seeded random share (``random``), and a given split (``given``: the
source's own test posts, e.g. TagRec's ``X_test.txt``, :attr:`Folksonomy.test_posts`).

Ties in time within a user are broken by the resource code (the files' order in TagRec, whose
sort is stable; ours is stable over the resource-ordered post table). The test posts' tags
are the gold; the test posts are in no statistic a method learns from, and a test post's time
is the reference time of time-aware methods.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from tagtorch.data.folksonomy import SOURCE_ORDER, Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import p_core
from tagtorch.errors import DataCheckError

__all__ = ["SPLITS", "PostData", "Posts", "first_use", "held_out", "held_out_last", "last_posts",
           "personalized_split", "post_places", "posts_from_assignments", "posts_of",
           "posts_of_users", "user_tag_reduce", "validation_posts"]

SPLITS = ("leave_last", "global_time", "random", "given")
"""How test posts are chosen (module docstring)."""


@dataclass(frozen=True)
class Posts:
    """Posts, one per row.

    Attributes:
        users: ``[P]`` user codes.
        resources: ``[P]`` resource (object) codes.
        times: ``[P]`` Unix seconds (the earliest of the post's assignments).
        tags: ragged ``[P]`` distinct tag codes of each post, ascending.
        source_order: ``[nnz]`` aligned with ``tags.values``: each assignment's place in the
            source (:data:`~tagtorch.data.folksonomy.SOURCE_ORDER`; None: a source whose order
            means nothing, the posts' order stands for it).
        places: ``[P]`` each post's first place in the source, set with ``source_order``
            (a post without a tag has a place but no assignment; :func:`post_places`).
    """

    users: np.ndarray
    resources: np.ndarray
    times: np.ndarray
    tags: Ragged
    source_order: np.ndarray | None = None
    places: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.users)

    def take(self, rows: np.ndarray) -> Posts:
        """The posts ``rows``, in that order."""
        order = (None if self.source_order is None
                 else self.source_order[self.tags.positions(np.asarray(rows, dtype=np.int64))])
        return Posts(self.users[rows], self.resources[rows], self.times[rows],
                     self.tags.take(rows), order,
                     None if self.places is None else self.places[rows])


@dataclass(frozen=True)
class PostData:
    """One split of personalized tag recommendation.

    Attributes:
        train: the posts methods learn from.
        test: the held-out posts (their tags are the gold).
        n_users: users of the (cored) folksonomy.
        n_resources: resources of the (cored) folksonomy.
        n_tags: tags of the (cored) folksonomy.
        folksonomy: the (cored) folksonomy the codes refer to (None: the posts alone, as a
            saved model keeps them).
    """

    train: Posts
    test: Posts
    n_users: int
    n_resources: int
    n_tags: int
    folksonomy: Folksonomy | None


def posts_of(folksonomy: Folksonomy) -> Posts:
    """The folksonomy's posts, ordered by user, then time, then resource.

    Its untagged posts (:attr:`Folksonomy.untagged_posts`) are posts without tags.

    Example:
        >>> import pandas as pd
        >>> f = Folksonomy.from_frame(pd.DataFrame({
        ...     "user": ["a", "a", "a", "b"], "object": ["r2", "r2", "r1", "r1"],
        ...     "tag": ["x", "y", "x", "z"], "timestamp": [5, 7, 9, 1]}))
        >>> p = posts_of(f)
        >>> p.users.tolist(), p.resources.tolist(), p.times.tolist(), [t.tolist() for t in p.tags]
        ([0, 0, 1], [1, 0, 0], [5, 9, 1], [[0, 1], [0], [2]])
    """
    a, bare = folksonomy.assignments, folksonomy.untagged_posts
    ordered = SOURCE_ORDER in a
    untagged = None
    if len(bare):  # posts without a tag (TagRec's tagless lines)
        untagged = (bare["user"].to_numpy(), bare["object"].to_numpy(),
                    bare["timestamp"].to_numpy(),
                    bare[SOURCE_ORDER].to_numpy() if ordered and SOURCE_ORDER in bare
                    else np.full(len(bare), np.iinfo(np.int64).max))
    return posts_from_assignments(a["user"].to_numpy(), a["object"].to_numpy(),
                                  a["tag"].to_numpy(), a["timestamp"].to_numpy(),
                                  a[SOURCE_ORDER].to_numpy() if ordered else None, untagged)


def posts_from_assignments(users: np.ndarray, resources: np.ndarray, tags: np.ndarray,
                           times: np.ndarray, source_order: np.ndarray | None = None,
                           untagged: tuple[np.ndarray, ...] | None = None) -> Posts:
    """The posts of tag assignments (one per distinct (user, resource)), by user, time, resource.

    A post's time is the earliest of its assignments'; its tags are distinct, ascending. With
    ``source_order`` (``[A]``, each assignment's place in the source), equal times of a user
    are ordered by the posts' first place in the source instead of the resource (TagRec's
    stable sort of its lines), and the posts keep the places. ``untagged``: ``(users,
    resources, times, places)`` of posts without a tag (places read with ``source_order``).

    Example:
        >>> p = posts_from_assignments(np.array([1, 0, 1]), np.array([0, 0, 0]),
        ...                            np.array([2, 1, 0]), np.array([8, 3, 5]))
        >>> p.users.tolist(), p.times.tolist(), [t.tolist() for t in p.tags]
        ([0, 1], [3, 5], [[1], [0, 2]])
    """
    if untagged is not None:  # each a row with tag -1, left out of the posts' tags
        users, resources, times = (np.concatenate((a, b)) for a, b in
                                   zip((users, resources, times), untagged, strict=False))
        tags = np.concatenate((tags, np.full(len(untagged[0]), -1)))
        if source_order is not None:
            source_order = np.concatenate((source_order, untagged[3]))
    n_resources = np.int64(resources.max(initial=0)) + 1
    keys = users.astype(np.int64) * n_resources + resources
    unique, post = np.unique(keys, return_inverse=True)
    first = np.full(len(unique), np.iinfo(np.int64).max)
    np.minimum.at(first, post, times.astype(np.int64))
    post_users, post_resources = unique // n_resources, unique % n_resources
    place = post_resources
    if source_order is not None:
        place = np.full(len(unique), np.iinfo(np.int64).max)
        np.minimum.at(place, post, source_order.astype(np.int64))
    order = np.lexsort((place, first, post_users))
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    seen = (np.zeros(len(tags), np.int64) if source_order is None
            else source_order.astype(np.int64))
    sort = np.lexsort((seen, tags, rank[post]))  # by post, tag, first place
    keys = np.stack([rank[post][sort], tags.astype(np.int64)[sort]], 1)
    keep = np.r_[True, (keys[1:] != keys[:-1]).any(1)] if len(keys) else np.zeros(0, bool)
    keep &= keys[:, 1] >= 0
    tag_rows = Ragged.from_groups(keys[keep, 0], keys[keep, 1], len(unique))
    return Posts(post_users[order], post_resources[order], first[order], tag_rows,
                 *((None, None) if source_order is None else (seen[sort][keep], place[order])))


def last_posts(posts: Posts) -> np.ndarray:
    """``[P]`` bool: each user's last post (the posts ordered by user, then time).

    Example:
        >>> p = Posts(np.array([0, 0, 1]), np.zeros(3, int), np.arange(3),
        ...           Ragged.from_lists([[0], [1], [0]]))
        >>> last_posts(p).tolist()
        [False, True, True]
    """
    return np.r_[posts.users[1:] != posts.users[:-1], np.ones(min(len(posts), 1), bool)]


def held_out_last(posts: Posts, n_users: int) -> np.ndarray:
    """``[P]`` bool: TagRec's leave-last test posts, each user's last one if it has two or more."""
    counts = np.bincount(posts.users, minlength=n_users)
    return last_posts(posts) & (counts[posts.users] > 1)


def user_tag_reduce(posts: Posts, n_tags: int, values: np.ndarray, reduce: np.ufunc
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (user, tag) used in ``posts``: ``reduce`` of ``values[post]`` over its posts.

    Args:
        posts: the posts.
        n_tags: the number of tag codes.
        values: ``[P]`` one value per post (a time, a position).
        reduce: ``np.minimum``, ``np.maximum``, ``np.add`` (a ufunc with ``reduceat``).

    Returns:
        ``(users, tags, reduced)``, one entry per distinct (user, tag), by user then tag.

    Example:
        >>> p = Posts(np.array([0, 0, 1]), np.zeros(3, int), np.array([5, 9, 7]),
        ...           Ragged.from_lists([[0, 1], [0], [0]]))
        >>> [a.tolist() for a in user_tag_reduce(p, 2, p.times, np.maximum)]
        [[0, 0, 1], [0, 1, 0], [9, 5, 7]]
    """
    rows = posts.tags.row_ids
    keys = posts.users[rows] * np.int64(n_tags) + posts.tags.values
    order = np.argsort(keys, kind="stable")
    unique, starts = np.unique(keys[order], return_index=True)
    return unique // n_tags, unique % n_tags, reduce.reduceat(values[rows][order], starts)


def posts_of_users(sorted_users: np.ndarray, users: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, columns)``: for each ``users[row]``, every place of that user in ``sorted_users``.

    ``sorted_users``: the (training) posts' users, sorted. The pairs come row by row, each
    user's places in order: the (test post, training post) pairs of a per-user method.

    Example:
        >>> [a.tolist() for a in posts_of_users(np.array([0, 0, 2]), np.array([2, 1, 0]))]
        [[0, 2, 2], [2, 0, 1]]
    """
    starts = np.searchsorted(sorted_users, users, "left")
    counts = np.searchsorted(sorted_users, users, "right") - starts
    rows = np.repeat(np.arange(len(users)), counts)
    columns = np.arange(len(rows)) + np.repeat(starts - (np.cumsum(counts) - counts), counts)
    return rows, columns


def post_places(posts: Posts) -> np.ndarray:
    """``[P]`` each post's place in the source (its first line's), else its index.

    TagRec reads its files line by line: where the posts know their lines
    (:attr:`Posts.places`, else the first of :attr:`Posts.source_order`), this is the order in
    which TagRec meets them.
    """
    if posts.places is not None:
        return posts.places
    if posts.source_order is None:
        return np.arange(len(posts), dtype=np.int64)
    first = np.full(len(posts), np.iinfo(np.int64).max)
    np.minimum.at(first, posts.tags.row_ids, posts.source_order)
    return first


def first_use(posts: Posts, keys: np.ndarray, n_rows: int, n_tags: int) -> sp.csr_matrix:
    """``[n_rows, W]`` when each group first used each tag: 1 + the assignment's position.

    The position of an assignment is its place in the source where the posts know it
    (:attr:`Posts.source_order`, TagRec's files), else its place in ``posts.tags.values``:
    posts in their order (user, then time), each post's tags by code. TagRec keeps a user's or
    resource's tag counts in maps filled in its file's order (its ``LinkedHashMap`` of first
    uses, the tags of a line in the line's order), and its sort puts the later of
    two equal scores first: these positions are the tie keys that reproduce it.

    Args:
        posts: the (training) posts.
        keys: ``[P]`` each post's group (a user or resource code; zeros: one global group).
        n_rows: the number of groups.
        n_tags: the number of tag codes.

    Example:
        >>> p = Posts(np.array([0, 0, 1]), np.zeros(3, int), np.arange(3),
        ...           Ragged.from_lists([[0, 2], [1, 2], [2]]))
        >>> first_use(p, p.users, 2, 3).toarray().tolist()
        [[1, 3, 2], [0, 0, 5]]
    """
    rows = np.asarray(keys, dtype=np.int64)[posts.tags.row_ids]
    cols = np.asarray(posts.tags.values, dtype=np.int64)
    flat = rows * np.int64(n_tags) + cols
    if posts.source_order is not None:  # the source's places instead of the posts' order
        by_place = np.argsort(posts.source_order, kind="stable")
        unique, first = np.unique(flat[by_place], return_index=True)
        first = posts.source_order[by_place][first]
    else:
        unique, first = np.unique(flat, return_index=True)  # the first index of each (row, tag)
    return sp.csr_matrix((first + 1, (unique // n_tags, unique % n_tags)),
                         shape=(n_rows, n_tags), dtype=np.int64)


def held_out(posts: Posts, split: str, n_users: int, fraction: float = 0.2, seed: int = 0
             ) -> np.ndarray:
    """``[P]`` bool: the posts a split holds out (``leave_last``, ``global_time``, ``random``).

    The test posts of :func:`personalized_split`, and the validation posts that learned methods
    carve from their training posts the same way.

    Args:
        posts: the posts, by user, then time.
        split: ``leave_last`` (each user's last post when it has two or more), ``global_time``
            (the last ``fraction`` by time, ties drawn with ``seed``) or ``random``.
        n_users: the number of user codes.
        fraction: the share held out by ``global_time`` and ``random``.
        seed: their draw.
    """
    if split == "leave_last":
        return held_out_last(posts, n_users)
    if split not in ("global_time", "random"):
        raise ValueError(f"split must be leave_last, global_time or random, got {split!r}")
    n_held = int(np.floor(fraction * len(posts)))
    draw = np.random.default_rng(seed).permutation(len(posts))
    chosen = (np.lexsort((draw, posts.times))[len(posts) - n_held:] if split == "global_time"
              else draw[:n_held])
    held = np.zeros(len(posts), dtype=bool)
    held[chosen] = True
    return held


def validation_posts(train: Posts, n_users: int, split: str, fraction: float, seed: int
                     ) -> np.ndarray:
    """``[P]`` bool: the training posts a learned method validates on (:func:`held_out`).

    Raises:
        DataCheckError: none would be held out (e.g. ``leave_last`` where every user has one
            post), naming the setting to change.
    """
    val = held_out(train, split, n_users, fraction, seed)
    if not val.any() or val.all():
        raise DataCheckError("training posts", f"{split} leaves {int(val.sum())} of "
                             f"{len(train)} posts for validation",
                             "set the method's validation=global_time (or random)"
                             if split == "leave_last" else "raise validation_fraction")
    return val


def _test_rows(posts: Posts, folksonomy: Folksonomy, split: str, test_fraction: float,
               seed: int) -> np.ndarray:
    """``[P]`` bool: the test posts of ``split``."""
    if split != "given":
        return held_out(posts, split, folksonomy.n_users, test_fraction, seed)
    if not len(folksonomy.test_posts):
        raise DataCheckError(folksonomy.name, "the data marks no test post (task.split="
                             "given)", "load a given split (data=tagrec data.test_path="
                             "X_test.txt) or set task.split=leave_last")
    return folksonomy.is_test_post(posts.users, posts.resources)


def personalized_split(folksonomy: Folksonomy, p: int = 3, split: str = "leave_last",
                       test_fraction: float = 0.2, seed: int = 0) -> PostData:
    """TagRec's split of a folksonomy (module docstring).

    Args:
        folksonomy: the (normalized) folksonomy.
        p: the core (1: none).
        split: :data:`SPLITS`.
        test_fraction: the share of test posts of ``global_time`` and ``random``.
        seed: the draw of ``random`` (and of ties in time for ``global_time``).

    Raises:
        ValueError: an unknown split, or a fraction out of (0, 1).
        DataCheckError: an empty core or no test post.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    cored = p_core(folksonomy, p) if p > 1 else folksonomy
    posts = posts_of(cored)
    test = _test_rows(posts, cored, split, test_fraction, seed)
    if not test.any():
        raise DataCheckError(cored.name, f"no test post ({len(posts)} posts; split {split})",
                             "every user has one post: set task.split=global_time or random"
                             if split == "leave_last" else "raise task.test_fraction or "
                             "choose another task.split")
    return PostData(posts.take(np.flatnonzero(~test)), posts.take(np.flatnonzero(test)),
                    cored.n_users, cored.n_objects, cored.n_tags, cored)
