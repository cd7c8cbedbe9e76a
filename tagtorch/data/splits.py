"""Evaluation splits: the object-centric 5-fold D/V/T protocol and user-centric post splits.

Tag recommendation (Canuto et al., JIDM 2013, Section 5.2): the objects with at least two
distinct tags (after text normalization) are shuffled (optionally sampling N of them first, as
the paper does per dataset) and divided into ``n_folds`` equal portions. Fold ``f`` tests on
portion ``f`` (T), learns and tunes on portion ``f + 1`` (V) and mines rules and statistics from
the other portions (D, three of five). In V and T, half of each object's tags, drawn at random,
are the input tags I_o and the others the gold standard Y_o. Only D's tag sets reach rules and
statistics, so no gold tag of V or T can leak into them. Each object's I_o / Y_o draw is made
once per seed, so an object split the same way in the fold where it is in V and in the one where
it is in T.

Item recommendation and retrieval (Do-Rank; topic-model ranking) use user-centric splits of posts
(a post is one user's tags on one object): iterative p-core filtering, a random 80/20 split of
posts, and the last 10% of each user's posts by time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from tagtorch.data.folksonomy import MISSING_TIME, Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.errors import DataCheckError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TagQueries:
    """Objects to recommend tags for (V or T): input tags I_o and gold tags Y_o.

    Attributes:
        objects: ``[n]`` object codes.
        input_tags: ragged ``[n]`` tag codes given to the recommender (I_o), ascending.
        gold_tags: ragged ``[n]`` tag codes to recover (Y_o), ascending; disjoint from I_o.
    """

    objects: np.ndarray
    input_tags: Ragged
    gold_tags: Ragged

    def __len__(self) -> int:
        return len(self.objects)

    def take(self, rows: np.ndarray) -> TagQueries:
        """The queries at ``rows`` (in the given order)."""
        rows = np.asarray(rows, dtype=np.int64)
        return TagQueries(self.objects[rows], self.input_tags.take(rows), self.gold_tags.take(rows))


@dataclass(frozen=True)
class TagRecFold:
    """One fold of the D/V/T protocol.

    Attributes:
        fold: fold index.
        train_objects: ``[n_D]`` object codes of D.
        train_tags: ragged ``[n_D]`` full tag sets of D's objects (rules and statistics).
        val: V, used to learn rankers and tune parameters.
        test: T, used only for the reported figures.
    """

    fold: int
    train_objects: np.ndarray
    train_tags: Ragged
    val: TagQueries
    test: TagQueries


def split_input_gold(
    tags: Ragged, input_fraction: float, rng: np.random.Generator
) -> tuple[Ragged, Ragged]:
    """Draws ``floor(input_fraction * n)`` (at least 1, at most ``n - 1``) input tags per row.

    Args:
        tags: ragged rows of at least two tags each.
        input_fraction: share of each row's tags given as input (the paper: 0.5).
        rng: random generator.

    Returns:
        ``(input_tags, gold_tags)``, each row ascending.
    """
    if not 0.0 < input_fraction < 1.0:
        raise ValueError(f"input_fraction must be in (0, 1), got {input_fraction}")
    lengths = tags.lengths
    if len(lengths) and lengths.min() < 2:
        raise ValueError("every object needs at least two tags to split into input and gold")
    n_input = np.clip(np.floor(lengths * input_fraction).astype(np.int64), 1, lengths - 1)
    rows = tags.row_ids
    order = np.lexsort((rng.random(len(rows)), rows))  # random order inside each row
    position = np.arange(len(rows)) - tags.offsets[rows]
    is_input = np.empty(len(rows), dtype=bool)
    is_input[order] = position < n_input[rows]
    values = tags.values

    def part(select: np.ndarray) -> Ragged:
        sub_rows, sub_values = rows[select], values[select]
        keep = np.lexsort((sub_values, sub_rows))
        return Ragged.from_groups(sub_rows[keep], sub_values[keep], len(tags))

    return part(is_input), part(~is_input)


def tag_recommendation_folds(
    folksonomy: Folksonomy,
    n_folds: int = 5,
    input_fraction: float = 0.5,
    min_tags: int = 2,
    sample_size: int | None = None,
    seed: int = 0,
) -> list[TagRecFold]:
    """Splits a folksonomy's objects into the D/V/T folds of Canuto et al. (2013).

    Args:
        folksonomy: the (normalized) folksonomy.
        n_folds: number of equal portions and folds (the paper: 5; D gets ``n_folds - 2``).
        input_fraction: share of each V/T object's tags given as input I_o (the paper: 0.5).
        min_tags: objects with fewer distinct tags are dropped (the paper: 2).
        sample_size: sample this many eligible objects first (the paper's N), or all if None.
        seed: controls the shuffle, the sample and the I_o / Y_o draws.

    Returns:
        ``n_folds`` folds; portions of equal size (the remainder of the division is dropped and
        its count logged).

    Raises:
        ValueError: on bad arguments or too few eligible objects.
    """
    if n_folds < 3:
        raise ValueError(f"n_folds must be >= 3 (D, V and T), got {n_folds}")
    if min_tags < 2:
        raise ValueError(f"min_tags must be >= 2 to split input and gold tags, got {min_tags}")
    rng = np.random.default_rng(seed)
    object_tags = folksonomy.object_tags()
    eligible = np.flatnonzero(object_tags.lengths >= min_tags)
    n_small = int(((object_tags.lengths > 0) & (object_tags.lengths < min_tags)).sum())
    log.info("%s: %d objects with >= %d tags; %d objects with fewer dropped",
             folksonomy.name, len(eligible), min_tags, n_small)
    chosen = rng.permutation(eligible)
    if sample_size is not None:
        if sample_size > len(chosen):
            raise ValueError(
                f"sample_size={sample_size} exceeds the {len(chosen)} eligible objects")
        chosen = chosen[:sample_size]
    portion = len(chosen) // n_folds
    if portion == 0:
        raise DataCheckError(
            folksonomy.name, f"{len(chosen)} objects with >= {min_tags} tags cannot fill "
            f"{n_folds} folds", "lower task.min_tags (objects with fewer tags are "
            "dropped) or task.n_folds, or use a larger dataset")
    if len(chosen) % n_folds:
        log.info("dropped %d objects so that the %d portions have equal size (%d)",
                 len(chosen) % n_folds, n_folds, portion)
    chosen = chosen[: portion * n_folds]
    chosen_tags = object_tags.take(chosen)
    input_tags, gold_tags = split_input_gold(chosen_tags, input_fraction, rng)
    portions = np.arange(len(chosen)).reshape(n_folds, portion)

    everything = TagQueries(chosen, input_tags, gold_tags)

    folds = []
    for f in range(n_folds):
        v = (f + 1) % n_folds
        train_rows = np.sort(portions[[p for p in range(n_folds) if p not in (f, v)]].ravel())
        folds.append(
            TagRecFold(
                fold=f,
                train_objects=chosen[train_rows],
                train_tags=chosen_tags.take(train_rows),
                val=everything.take(portions[v]),
                test=everything.take(portions[f]),
            )
        )
    return folds


# ----------------------------------------------------------------------------- user-centric
@dataclass(frozen=True)
class PostSplit:
    """A split of a folksonomy's assignments, whole posts (or single triples) at a time.

    Attributes:
        train: ``[n_assignments]`` bool mask of training assignments.
        val: ``[n_assignments]`` bool mask of validation assignments (all False without one).
        test: ``[n_assignments]`` bool mask of test assignments; the three are disjoint and
            cover every assignment.
    """

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


def _post_ids(folksonomy: Folksonomy) -> tuple[np.ndarray, int]:
    """Code of each assignment's post (user, object); returns ``(codes, n_posts)``."""
    a = folksonomy.assignments
    key = a["user"].to_numpy() * np.int64(folksonomy.n_objects) + a["object"].to_numpy()
    uniques, codes = np.unique(key, return_inverse=True)
    return codes, len(uniques)


def p_core(folksonomy: Folksonomy, p: int, max_rounds: int = 100) -> Folksonomy:
    """Iterative p-core (Jäschke et al. 2007): every user, object and tag in >= p posts.

    Users and objects are counted in posts (distinct user-object pairs), tags in the posts that
    use them. Entities below ``p`` are removed until nothing changes; the result is re-coded.

    Args:
        folksonomy: input folksonomy.
        p: the core level (1 keeps everything).
        max_rounds: safety bound on the iterations.
    """
    if p < 1:
        raise ValueError(f"p must be >= 1, got {p}")
    a = folksonomy.assignments
    user, obj, tag = (a[c].to_numpy() for c in ("user", "object", "tag"))
    keep = np.ones(len(a), dtype=bool)
    post, _ = _post_ids(folksonomy)
    rounds = 0
    for rounds in range(1, max_rounds + 1):  # noqa: B007 (reported after the loop)
        first = np.zeros(len(a), dtype=bool)
        _, first_idx = np.unique(post[keep], return_index=True)
        first[np.flatnonzero(keep)[first_idx]] = True
        user_posts = np.bincount(user[first], minlength=folksonomy.n_users)
        object_posts = np.bincount(obj[first], minlength=folksonomy.n_objects)
        tag_posts = np.bincount(tag[keep], minlength=folksonomy.n_tags)
        ok = keep & (user_posts[user] >= p) & (object_posts[obj] >= p) & (tag_posts[tag] >= p)
        if (ok == keep).all():
            break
        keep = ok
    else:
        log.warning("p-core did not converge in %d rounds", max_rounds)
    log.info("%d-core of %s: %d of %d assignments kept after %d rounds", p, folksonomy.name,
             int(keep.sum()), len(a), rounds)
    if not keep.any():
        raise DataCheckError(folksonomy.name, f"its {p}-core is empty (no user, object and tag "
                             f"with >= {p} posts each, jointly)", "lower task.p")
    return folksonomy.select(keep)


def random_post_split(folksonomy: Folksonomy, test_fraction: float = 0.2, seed: int = 0,
                      val_fraction: float = 0.0, unit: str = "posts") -> PostSplit:
    """Random split of posts (all their tags) into training, validation and test.

    One seeded permutation of the units: its first ``round(test_fraction * n)`` go to test, the
    next ``round(val_fraction * (n - n_test))`` to validation, the rest to training.

    Args:
        folksonomy: the assignments to split.
        test_fraction: share of the units in test, in (0, 1).
        seed: seed of the permutation.
        val_fraction: share of the non-test units in validation, in [0, 1).
        unit: ``"posts"`` (a user's tags on one object stay together) or ``"triples"`` (each
            assignment on its own).

    Raises:
        ValueError: a fraction out of range, another unit, or too few units for a non-empty
            test (and validation, if asked for) and training part.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    if unit == "posts":
        units, n_units = _post_ids(folksonomy)
    elif unit == "triples":
        n_units = len(folksonomy.assignments)
        units = np.arange(n_units)
    else:
        raise ValueError(f"unit must be 'posts' or 'triples', got {unit!r}")
    order = np.random.default_rng(seed).permutation(n_units)
    n_test = round(test_fraction * n_units)
    n_val = round(val_fraction * (n_units - n_test))
    if n_test == 0 or (val_fraction > 0 and n_val == 0) or n_test + n_val >= n_units:
        raise ValueError(f"{n_units} {unit} are too few for the split")
    part = np.zeros(n_units, dtype=np.int64)  # 0 train, 1 val, 2 test
    part[order[:n_test]] = 2
    part[order[n_test : n_test + n_val]] = 1
    part = part[units]
    return PostSplit(train=part == 0, val=part == 1, test=part == 2)


def post_filter(folksonomy: Folksonomy, min_object_users: int = 3,
                min_user_objects: int = 61, min_tag_uses: int = 2) -> Folksonomy:
    """The data cleaning of Harvey, Ruthven and Carman (2010), Section 4, in the paper's order.

    First the objects posted by at least ``min_object_users`` distinct users are kept (the
    paper: "bookmarked by more than 2 unique users"), then, "from the remaining data", the users
    with at least ``min_user_objects`` distinct objects ("more than 60 unique URLs"), and last
    the tags used at least ``min_tag_uses`` times in the remaining assignments ("removed all tags
    that appeared less than 2 times"). One pass each, as in the paper (not iterated to a fixed
    point like :func:`p_core`); the result is re-coded.

    Raises:
        ValueError: a threshold below 1, or nothing left.
    """
    for name, value in (("min_object_users", min_object_users),
                        ("min_user_objects", min_user_objects), ("min_tag_uses", min_tag_uses)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    a = folksonomy.assignments
    user, obj, tag = (a[c].to_numpy() for c in ("user", "object", "tag"))
    post, _ = _post_ids(folksonomy)
    first = np.zeros(len(a), dtype=bool)
    first[np.unique(post, return_index=True)[1]] = True
    keep = np.bincount(obj[first], minlength=folksonomy.n_objects)[obj] >= min_object_users
    user_objects = np.bincount(user[first & keep], minlength=folksonomy.n_users)
    keep &= user_objects[user] >= min_user_objects
    keep &= np.bincount(tag[keep], minlength=folksonomy.n_tags)[tag] >= min_tag_uses
    log.info("%s filtered (objects of >= %d users, users of >= %d objects, tags used >= %d "
             "times): %d of %d assignments kept", folksonomy.name, min_object_users,
             min_user_objects, min_tag_uses, int(keep.sum()), len(a))
    if not keep.any():
        most = np.bincount(obj[first], minlength=folksonomy.n_objects).max()
        raise DataCheckError(
            folksonomy.name, f"the post filter leaves nothing (objects posted by >= "
            f"{min_object_users} users, then users of >= {min_user_objects} of them, then tags "
            f"used >= {min_tag_uses} times; here the most users of one object is {most} and "
            f"the most objects of one user {int(user_objects.max(initial=0))})",
            "lower task.min_object_users, task.min_user_objects or task.min_tag_uses")
    return folksonomy.select(keep)


def _check_fractions(test_fraction: float | None, val_fraction: float) -> None:
    if test_fraction is not None and not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")


def _timed_posts(folksonomy: Folksonomy, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each assignment's post, each post's time and a seeded draw among posts (for ties).

    Raises:
        DataCheckError: a post without a timestamp (a temporal split needs them all).
    """
    a = folksonomy.assignments
    post, n_posts = _post_ids(folksonomy)
    missing = np.unique(post[a["timestamp"].to_numpy() == MISSING_TIME])
    if len(missing):
        raise DataCheckError(
            folksonomy.name, f"{len(missing)} of {n_posts} posts have no timestamp, and the "
            "split is by time", "load the data with its time column (e.g. "
            "data.columns.timestamp=COLUMN for data=tabular)")
    post_time = np.full(n_posts, np.iinfo(np.int64).max)
    np.minimum.at(post_time, post, a["timestamp"].to_numpy())
    return post, post_time, np.random.default_rng(seed).permutation(n_posts)


def _parts_from_end(from_end: np.ndarray, n_test: np.ndarray, n_val: np.ndarray) -> np.ndarray:
    """0 train, 1 val, 2 test by the position from the end (1 = last)."""
    return np.where(from_end <= n_test, 2, np.where(from_end <= n_test + n_val, 1, 0))


def temporal_user_split(folksonomy: Folksonomy, test_fraction: float = 0.1,
                        val_fraction: float = 0.0, seed: int = 0) -> PostSplit:
    """Per user, the last posts by time go to test, and the last of the rest to validation.

    A post's time is its earliest assignment's timestamp; posts of one user at the same time
    are ordered by a seeded random draw (HetRec LastFM's dates are months, so ties are common).
    Of a user's ``n`` posts the last ``floor(test_fraction * n)`` are test posts, and of the
    ``m`` others the last ``floor(val_fraction * m)`` are validation posts (Harvey et al.
    2011: "the last 10% of bookmarks by each user for testing"). Users with fewer than
    ``1 / test_fraction`` posts keep all their posts in training.

    Args:
        folksonomy: the assignments to split.
        test_fraction: share of each user's posts in test, in (0, 1).
        val_fraction: share of each user's remaining posts in validation, in [0, 1).
        seed: seed of the draw that orders posts with equal times.

    Raises:
        DataCheckError: a post without a timestamp.
    """
    _check_fractions(test_fraction, val_fraction)
    post, post_time, draw = _timed_posts(folksonomy, seed)
    n_posts = len(post_time)
    post_user = np.zeros(n_posts, dtype=np.int64)
    post_user[post] = folksonomy.assignments["user"].to_numpy()
    order = np.lexsort((draw, post_time, post_user))
    counts = np.bincount(post_user, minlength=folksonomy.n_users)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    sorted_user = post_user[order]
    from_end = counts[sorted_user] - (np.arange(n_posts) - starts[sorted_user])  # 1 = last
    n_test = np.floor(counts * test_fraction).astype(np.int64)
    n_val = np.floor((counts - n_test) * val_fraction).astype(np.int64)
    part = np.zeros(n_posts, dtype=np.int64)
    part[order] = _parts_from_end(from_end, n_test[sorted_user], n_val[sorted_user])
    part = part[post]
    return PostSplit(train=part == 0, val=part == 1, test=part == 2)


def global_temporal_split(folksonomy: Folksonomy, test_fraction: float = 0.1,
                          val_fraction: float = 0.0, seed: int = 0) -> PostSplit:
    """The last posts of all users by time go to test, the last of the rest to validation.

    Ours, for data whose users have one post or few (TagRec's public samples), where a split
    per user leaves no test post.

    Of all ``n`` posts the last ``floor(test_fraction * n)`` by time are test posts, and of the
    ``m`` others the last ``floor(val_fraction * m)`` validation posts; posts at the same time
    are ordered by a seeded draw, as in :func:`temporal_user_split`.

    Raises:
        DataCheckError: a post without a timestamp.
    """
    _check_fractions(test_fraction, val_fraction)
    post, post_time, draw = _timed_posts(folksonomy, seed)
    n_posts = len(post_time)
    order = np.lexsort((draw, post_time))
    from_end = n_posts - np.arange(n_posts)
    n_test = int(np.floor(n_posts * test_fraction))
    n_val = int(np.floor((n_posts - n_test) * val_fraction))
    part = np.zeros(n_posts, dtype=np.int64)
    part[order] = _parts_from_end(from_end, np.asarray(n_test), np.asarray(n_val))
    part = part[post]
    return PostSplit(train=part == 0, val=part == 1, test=part == 2)


def given_split(folksonomy: Folksonomy, val_fraction: float = 0.0, seed: int = 0) -> PostSplit:
    """The split the source gave as test, the last of the other posts by time as validation.

    Test: the posts of :attr:`Folksonomy.test_posts` (e.g. TagRec's ``X_test.txt``).
    Validation: of the ``m`` other posts, the last ``floor(val_fraction * m)`` by time (ties
    by a seeded draw); no timestamp is needed when ``val_fraction`` is 0.

    Raises:
        DataCheckError: the data marks no test post, or (with validation) a post has no
            timestamp.
    """
    _check_fractions(None, val_fraction)
    if not len(folksonomy.test_posts):
        raise DataCheckError(folksonomy.name, "the data marks no test post (task.split=given)",
                             "load a given split (data=tagrec data.test_path=X_test.txt) or "
                             "set task.split=per_user_time or global_time")
    a = folksonomy.assignments
    test = folksonomy.is_test_post(a["user"].to_numpy(), a["object"].to_numpy())
    val = np.zeros(len(a), dtype=bool)
    if val_fraction > 0:
        post, post_time, draw = _timed_posts(folksonomy, seed)
        test_post = np.zeros(len(post_time), dtype=bool)
        test_post[post[test]] = True
        others = np.flatnonzero(~test_post)
        others = others[np.lexsort((draw[others], post_time[others]))]
        n_val = int(np.floor(len(others) * val_fraction))
        val_post = np.zeros(len(post_time), dtype=bool)
        val_post[others[len(others) - n_val:]] = True
        val = val_post[post]
    return PostSplit(train=~test & ~val, val=val, test=test)
