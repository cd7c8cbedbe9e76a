"""Data of tag-based item recommendation: p-core, the 80/20 split and User-Tag-Set queries.

The task (Do-Rank; Rendle and Schmidt-Thieme 2010 for PITF): for a user ``u`` and a tag ``t``,
rank the items that ``u`` would tag with ``t``. A folksonomy's assignments are the observed
``(user, item, tag)`` triples of a binary tensor.

Protocol (the Do-Rank paper, Section 3): the iterative p-core of the folksonomy (every user,
item and tag in at least ``p`` posts), then a seeded random split into 80% training and 20% test
(of the posts, see below); a seeded ``val_fraction`` of the training part is held out for early
stopping (the paper holds out 25% of the training data to tune its parameters). The models
learn from the remaining training triples only.

**Split by posts** (``split="posts"``, the default): the units split at random are the posts
(``(user, item)`` pairs, with all their tags), so no post has triples on both sides and an
evaluated item is new to its user. This is our reading of Section 3, garbled in the extracted
text ("... a training set (80%) and a test set ... user-item combination in the training set if
a triplet ..."): no user-item combination of the test set stays in training. Splitting posts
keeps that property without dropping training triples. ``split="triples"`` splits the triples
themselves; then a test item is often one the user tagged with other tags in training, which
rewards user-item and popularity terms (PITF, the 2-D model) that a UTS model is not trained
to learn (such items are neutral in its sets).

Queries are ``(user, tag)`` pairs. A query's **gold** items are those that the user tagged with
the tag in the evaluated part (validation or test). Its **known** items are excluded from its
ranking (their mask is False), as they would be in a deployed recommender: with the triple split,
the items that the user tagged with that tag in the data the model learned from; with the post
split, every item that the user tagged in that data (with any tag), since an evaluated item is
then by construction new to its user, and a post already made is not recommended again. Every
other item of the core is a candidate, so each query ranks all ``n_items`` items at once: the
batches are ``scores [B, n_items]``, ``labels [B, n_items]``, ``mask [B, n_items]``.

**Per-user queries** (``query="user"``, the paper's protocol; ``"user_tag"`` above is the
default of the data layer): the Do-Rank paper recommends items to a user, "the item recommended
list is generated for user ... [in des]cending order of the computed preference scores over all
items under all tags", and "the item predicted preference scores must be calculated for the
whole available tags before being sorted". Then there is one query per evaluated user; its gold
items are the user's items in the evaluated part, its known items (excluded) the user's items
in the data the model learned from, and the models' tag-level scores ``s(u, i, t)`` become one
score per item by an aggregation (:func:`tagtorch.itemrec.base.user_scores`): ``"max"`` over all
tags (the literal reading of "over all items under all tags") or ``"profile"``,
``sum_t P(t | u) s(u, i, t)`` over the user's own training tags (``P(t | u)``: the share of the
user's training triples with tag ``t``). Such queries carry ``tags = -1``, the aggregation and
the users' tag profiles.

User-Tag-Set (UTS) relevance, for the training sets: for each observed training pair ``(u, t)``,
the items ``u`` tagged with ``t`` are **positive**, the items ``u`` tagged with other tags only
are **neutral**, and the items ``u`` never tagged are **negative**.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import numba
import numpy as np
import torch

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import p_core, random_post_split

log = logging.getLogger(__name__)

__all__ = [
    "AGGREGATES",
    "QUERY_KINDS",
    "ItemRecData",
    "Queries",
    "TagProfile",
    "UserTagSets",
    "item_recommendation_data",
]


@dataclass(frozen=True)
class UserTagSets:
    """The observed ``(user, tag)`` pairs of some triples, with their items.

    Attributes:
        users: ``[S]`` user of each set.
        tags: ``[S]`` tag of each set.
        items: the items of each set (``u`` tagged them with ``t``), one row per set.
    """

    users: np.ndarray
    tags: np.ndarray
    items: Ragged

    def __len__(self) -> int:
        return len(self.users)

    @classmethod
    def from_triples(cls, triples: np.ndarray, n_tags: int) -> UserTagSets:
        """Groups ``[N, 3]`` (user, item, tag) triples by ``(user, tag)``, sorted."""
        if len(triples) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls(empty, empty, Ragged(np.zeros(1, dtype=np.int64), empty))
        key = triples[:, 0] * np.int64(n_tags) + triples[:, 2]
        pairs, group = np.unique(key, return_inverse=True)
        return cls(pairs // n_tags, pairs % n_tags,
                   Ragged.from_groups(group, triples[:, 1], len(pairs)))

    def padded(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """``(items [b, P], mask [b, P])`` of the sets at ``rows``, padded with item 0."""
        items, mask = self.items.padded(rows)
        return torch.from_numpy(items.astype(np.int64, copy=False)), torch.from_numpy(mask)


AGGREGATES = ("max", "profile")
"""How per-user queries turn tag-level scores into item scores (module docstring)."""

QUERY_KINDS = ("user_tag", "user")
"""The kinds of evaluation queries: ``(user, tag)`` pairs, or users (module docstring)."""


@dataclass(frozen=True)
class TagProfile:
    """Each user's training tags and ``P(t | u)``, the share of the user's triples with ``t``.

    Attributes:
        tags: the tags of each user, one row per user (sorted).
        weights: ``P(t | u)`` of each entry of ``tags.values`` (each row sums to 1).
    """

    tags: Ragged
    weights: np.ndarray

    @classmethod
    def from_triples(cls, triples: np.ndarray, n_users: int, n_tags: int) -> TagProfile:
        """The profiles of ``n_users`` users from ``[N, 3]`` (user, item, tag) triples.

        Example:
            >>> p = TagProfile.from_triples(np.array([[0, 5, 1], [0, 6, 1], [0, 5, 2]]), 2, 3)
            >>> p.tags.values.tolist(), [round(w, 4) for w in p.weights.tolist()]
            ([1, 2], [0.6667, 0.3333])
        """
        key = triples[:, 0] * np.int64(n_tags) + triples[:, 2]
        pairs, counts = np.unique(key, return_counts=True)
        users = pairs // n_tags
        totals = np.bincount(users, weights=counts, minlength=n_users)
        return cls(Ragged.from_groups(users, pairs % n_tags, n_users),
                   (counts / totals[users]).astype(np.float32))

    def take(self, rows: np.ndarray) -> TagProfile:
        """The profiles at ``rows``."""
        entries = Ragged(self.tags.offsets, np.arange(len(self.weights), dtype=np.int64))
        return TagProfile(self.tags.take(rows), self.weights[entries.take(rows).values])


@dataclass(frozen=True)
class Queries:
    """Evaluation queries: ``(user, tag)`` pairs or users, their gold and their known items.

    Attributes:
        users: ``[Q]`` user of each query.
        tags: ``[Q]`` tag of each query; -1 for per-user queries (module docstring).
        gold: the items to find, one row per query.
        known: the items excluded from the query's ranking (the user's items in the data the
            model learned from: those tagged with the tag, or any with the post split or in
            per-user queries), one row per query.
        aggregate: per-user queries: ``"max"`` or ``"profile"`` (:data:`AGGREGATES`); None for
            ``(user, tag)`` queries.
        profile: per-user queries: the users' training tag profiles, one row per query.
    """

    users: np.ndarray
    tags: np.ndarray
    gold: Ragged
    known: Ragged
    aggregate: str | None = None
    profile: TagProfile | None = None

    @property
    def per_user(self) -> bool:
        """Whether these are per-user queries (no tag)."""
        return self.aggregate is not None

    def ids(self, rows: np.ndarray | range) -> list[str]:
        """TREC query ids: ``u{user}t{tag}``, or ``u{user}`` for per-user queries."""
        if self.per_user:
            return [f"u{int(self.users[row])}" for row in rows]
        return [f"u{int(self.users[row])}t{int(self.tags[row])}" for row in rows]

    def __len__(self) -> int:
        return len(self.users)

    def take(self, rows: np.ndarray) -> Queries:
        """The queries at ``rows``."""
        return Queries(self.users[rows], self.tags[rows], self.gold.take(rows),
                       self.known.take(rows), self.aggregate,
                       None if self.profile is None else self.profile.take(rows))

    def batch(self, rows: np.ndarray, n_items: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(labels [b, n_items] float, mask [b, n_items] bool)`` of the queries at ``rows``.

        Labels are 1 at the gold items; the mask is False at the known items.
        """
        labels = torch.zeros(len(rows), n_items)
        mask = torch.ones(len(rows), n_items, dtype=torch.bool)
        gold, known = self.gold.take(rows), self.known.take(rows)
        labels[torch.from_numpy(gold.row_ids), torch.from_numpy(gold.values)] = 1.0
        mask[torch.from_numpy(known.row_ids), torch.from_numpy(known.values)] = False
        return labels, mask


@dataclass(frozen=True)
class ItemRecData:
    """One seeded split of a folksonomy's core for tag-based item recommendation.

    Attributes:
        name: dataset name.
        n_users: users of the core.
        n_items: items (the folksonomy's objects) of the core.
        n_tags: tags of the core.
        split: ``"posts"`` or ``"triples"``, the unit of the random split.
        query: ``"user_tag"`` or ``"user"``, the kind of the validation and test queries.
        aggregate: per-user queries' aggregation of tag-level scores (:data:`AGGREGATES`).
        train: ``[N, 3]`` int64 (user, item, tag) triples the models learn from.
        val: ``[N_v, 3]`` held-out training triples (early stopping).
        test: ``[N_t, 3]`` test triples.
        user_items: the items each user tagged in ``train`` (any tag): UTS positives and
            neutrals; every other item is a UTS negative.
        train_sets: the UTS sets of ``train``.
        val_queries: queries of ``val`` (known items from ``train``).
        test_queries: queries of ``test`` (known items from ``train`` and ``val``).
    """

    name: str
    n_users: int
    n_items: int
    n_tags: int
    split: str
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    user_items: Ragged
    train_sets: UserTagSets
    val_queries: Queries
    test_queries: Queries
    query: str = "user_tag"
    aggregate: str = "max"

    @classmethod
    def from_triples(cls, name: str, n_users: int, n_items: int, n_tags: int,
                     train: np.ndarray, val: np.ndarray, test: np.ndarray, split: str,
                     query: str = "user_tag", aggregate: str = "max") -> ItemRecData:
        """The split of ``[N, 3]`` (user, item, tag) train, validation and test triples.

        The UTS sets, the users' items and the queries are built from them;
        :func:`item_recommendation_data` makes the triples from a folksonomy.
        """
        sizes = (n_users, n_items, n_tags)
        known = np.concatenate([train, val])
        if query == "user":
            profile = TagProfile.from_triples(train, n_users, n_tags)
            val_queries = _user_queries(val, train, n_users, n_items, profile, aggregate)
            test_queries = _user_queries(test, known, n_users, n_items, profile, aggregate)
        else:
            val_queries = _queries(val, train, *sizes, split)
            test_queries = _queries(test, known, *sizes, split)
        return cls(
            name=name, n_users=n_users, n_items=n_items, n_tags=n_tags, split=split,
            train=train, val=val, test=test,
            user_items=_user_items(train, n_users, n_items),
            train_sets=UserTagSets.from_triples(train, n_tags),
            val_queries=val_queries, test_queries=test_queries, query=query, aggregate=aggregate,
        )

    def negative_mask(self, users: torch.Tensor) -> torch.Tensor:
        """``[b, n_items]`` bool: True at the UTS negatives (items the user never tagged)."""
        rows = self.user_items.take(users.cpu().numpy())
        mask = torch.ones(len(users), self.n_items, dtype=torch.bool)
        mask[torch.from_numpy(rows.row_ids), torch.from_numpy(rows.values)] = False
        return mask.to(users.device)

    def tagged(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """``[b, S]`` bool: whether user ``users[b]`` tagged ``items[b, s]`` in training.

        A binary search in each user's sorted training items (a compiled kernel, rows in
        parallel): no ``[b, n_items]`` mask (the sampled negatives of large catalogues).

        Example:
            >>> data = ItemRecData.from_triples("toy", 2, 3, 2, np.array([[0, 2, 1]]),
            ...                                 np.array([[1, 0, 0]]), np.array([[1, 1, 0]]),
            ...                                 "triples")
            >>> data.tagged(torch.tensor([0, 1]), torch.tensor([[2, 0], [2, 2]])).tolist()
            [[True, False], [False, False]]
        """
        found = _tagged(np.ascontiguousarray(users.cpu().numpy(), dtype=np.int64),
                        np.ascontiguousarray(items.cpu().numpy(), dtype=np.int64),
                        self.user_items.offsets, np.asarray(self.user_items.values, np.int64))
        return torch.from_numpy(found).to(items.device)

    def subsample(self, fraction: float, seed: int = 0) -> ItemRecData:
        """The same split with a seeded ``fraction`` of the training triples (benchmarks)."""
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        rng = np.random.default_rng(seed)
        n_keep = max(1, round(fraction * len(self.train)))
        keep = np.sort(rng.permutation(len(self.train))[:n_keep])
        return self.from_triples(self.name, self.n_users, self.n_items, self.n_tags,
                                 self.train[keep], self.val, self.test, self.split, self.query,
                                 self.aggregate)

    def fingerprint(self) -> str:
        """A digest of what training sees (split rule, query kind, train and validation)."""
        kind = self.split if self.query == "user_tag" else f"{self.split}|user|{self.aggregate}"
        digest = hashlib.sha1(kind.encode())
        for part in (self.train, self.val):
            digest.update(np.ascontiguousarray(part, dtype=np.int64).tobytes())
        return digest.hexdigest()

    def describe(self) -> dict[str, float]:
        """Sizes of the split."""
        return {"users": self.n_users, "items": self.n_items, "tags": self.n_tags,
                "train_triples": len(self.train), "val_triples": len(self.val),
                "test_triples": len(self.test), "train_sets": len(self.train_sets),
                "positives_per_set": float(self.train_sets.items.lengths.mean())
                if len(self.train_sets) else 0.0,
                "val_queries": len(self.val_queries), "test_queries": len(self.test_queries)}


@numba.njit(nogil=True, parallel=True, cache=True)
def _tagged(users: np.ndarray, items: np.ndarray, offsets: np.ndarray,
            values: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``[b, S]`` bool: ``items[b, s]`` in user ``users[b]``'s sorted row of ``values``."""
    found = np.zeros(items.shape, np.bool_)
    for b in numba.prange(items.shape[0]):
        row = values[offsets[users[b]] : offsets[users[b] + 1]]
        for s in range(items.shape[1]):
            at = np.searchsorted(row, items[b, s])
            found[b, s] = at < len(row) and row[at] == items[b, s]
    return found


def _user_items(triples: np.ndarray, n_users: int, n_items: int) -> Ragged:
    """The distinct items of each user in ``[N, 3]`` triples (any tag), sorted."""
    pairs = np.unique(triples[:, 0] * np.int64(n_items) + triples[:, 1])
    return Ragged.from_groups(pairs // n_items, pairs % n_items, n_users)


def _queries(evaluated: np.ndarray, known: np.ndarray, n_users: int, n_items: int,
             n_tags: int, split: str) -> Queries:
    """Queries of the ``evaluated`` triples; their known items from the ``known`` triples.

    With ``split="posts"`` a query's known items are all the user's items in ``known``; with
    ``split="triples"`` only those the user tagged with the query's tag.
    """
    sets = UserTagSets.from_triples(evaluated, n_tags)
    if split == "posts":
        known_items = _user_items(known, n_users, n_items).take(sets.users)
        return Queries(sets.users, sets.tags, sets.items, known_items)
    query_key = sets.users * np.int64(n_tags) + sets.tags
    known_key = known[:, 0] * np.int64(n_tags) + known[:, 2]
    row = np.searchsorted(query_key, known_key)
    row = np.minimum(row, max(len(query_key) - 1, 0))
    hit = (query_key[row] == known_key) if len(query_key) else np.zeros(len(known), dtype=bool)
    known_items = Ragged.from_groups(row[hit], known[hit, 1], len(sets))
    return Queries(sets.users, sets.tags, sets.items, known_items)


def _user_queries(evaluated: np.ndarray, known: np.ndarray, n_users: int, n_items: int,
                  profile: TagProfile, aggregate: str) -> Queries:
    """One query per user of the ``evaluated`` triples, with the users' tag profiles.

    A query's items in ``evaluated`` are gold, its items in ``known`` (any tag) excluded.
    """
    gold = _user_items(evaluated, n_users, n_items)
    users = np.flatnonzero(gold.lengths > 0)
    return Queries(users, np.full(len(users), -1, dtype=np.int64), gold.take(users),
                   _user_items(known, n_users, n_items).take(users), aggregate,
                   profile.take(users))


def item_recommendation_data(
    folksonomy: Folksonomy,
    p: int = 5,
    test_fraction: float = 0.2,
    val_fraction: float = 0.25,
    seed: int = 0,
    split: str = "posts",
    query: str = "user_tag",
    aggregate: str = "max",
) -> ItemRecData:
    """The p-core of a folksonomy, split at random into train, validation and test triples.

    Args:
        folksonomy: the (normalized) folksonomy; its objects are the items.
        p: the p-core level (1 keeps everything).
        test_fraction: share of the core's triples in test (the paper: 0.2).
        val_fraction: share of the remaining (training) units held out for early stopping
            (the paper holds out 25% of the training data for tuning).
        seed: seed of both random splits.
        split: ``"posts"`` splits the ``(user, item)`` posts with all their triples (the
            shares are shares of posts), ``"triples"`` the triples (see the module docstring).
        query: ``"user_tag"``: a query per evaluated ``(user, tag)`` pair; ``"user"``: a query
            per evaluated user, the paper's protocol (module docstring).
        aggregate: per-user queries' aggregation of tag-level scores, ``"max"`` or
            ``"profile"``.

    Returns:
        The split, with UTS sets and evaluation queries.

    Example:
        >>> import pandas as pd
        >>> rows = [(u, i, t) for u in range(4) for i in range(4) for t in range(3)]
        >>> f = Folksonomy.from_frame(pd.DataFrame(rows, columns=["user", "object", "tag"]))
        >>> data = item_recommendation_data(f, p=1, seed=0, split="triples")
        >>> len(data.train) + len(data.val) + len(data.test) == 48, len(data.test)
        (True, 10)
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    if split not in ("posts", "triples"):
        raise ValueError(f"split must be 'posts' or 'triples', got {split!r}")
    if query not in QUERY_KINDS:
        raise ValueError(f"query must be one of {QUERY_KINDS}, got {query!r}")
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    core = p_core(folksonomy, p)
    a = core.assignments
    triples = np.stack([a["user"].to_numpy(), a["object"].to_numpy(), a["tag"].to_numpy()],
                       axis=1).astype(np.int64)
    parts = random_post_split(core, test_fraction, seed, val_fraction=val_fraction, unit=split)
    train, val, test = triples[parts.train], triples[parts.val], triples[parts.test]
    data = ItemRecData.from_triples(core.name, core.n_users, core.n_objects, core.n_tags, train,
                                    val, test, split, query, aggregate)
    log.info("item recommendation on the %d-core of %s: %s", p, core.name, data.describe())
    return data
