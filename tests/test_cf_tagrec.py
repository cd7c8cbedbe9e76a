"""``cf`` (tagtorch/posts/cf.py) list by list against TagRec's ``CFTagRecommender``.

The reference is a per-post transcription of ``getRankedTagList`` (user-based, 20 neighbours,
as TagRec's Pipeline runs ``cf``) written from the Java with dicts and lists: candidates in a
map filled in training order, TagRec's cosine, a ``TreeMap`` whose comparator puts a new key
before every key of equal or lower value, ``Bookmark.getBookmark``'s fallback to the user's last
bookmark, and the same ``TreeMap`` sort of the result map. The data are built so that every
odd branch occurs: neighbours of similarity 0, neighbours of equal similarity, more than 20
candidates, and resources nobody else tagged.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.posts.cf import UserCF
from tagtorch.posts.data import PostData, Posts, personalized_split

Bookmark = tuple[int, int, list[int]]


def tree_map_order(entries: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """``new TreeMap(new DoubleMapComparator(map)).putAll(map)``, one insertion at a time."""
    out: list[tuple[int, float]] = []
    for key, value in entries:  # compare(new, old) = -1 when new >= old: new goes before
        place = next((i for i, (_, old) in enumerate(out) if value >= old), len(out))
        out.insert(place, (key, value))
    return out


def tagrec_cosine(a: Counter[int], b: Counter[int]) -> float:
    """``Utilities.getCosineSim``: integer dot product over ``sqrt(norm1 * norm2)``."""
    both = set(a) & set(b)
    if not both:
        return 0.0
    scalar = float(sum(a[k] * b[k] for k in both))
    norm = math.sqrt(float(sum(v * v for v in a.values())) * float(sum(v * v for v in b.values())))
    return 0.0 if norm == 0.0 else scalar / norm


def get_bookmark(train: list[Bookmark], user: int, resource: int) -> Bookmark:
    """``Bookmark.getBookmark``: the user's bookmark of the resource, else its last one."""
    found = None
    for bookmark in train:
        if bookmark[0] == user:
            found = bookmark
            if bookmark[1] == resource:
                return bookmark
    assert found is not None
    return found


def tagrec_cf(train: list[Bookmark], user: int, resource: int, k: int = 20) -> list[int]:
    """``CFTagRecommender.getRankedTagList(user, resource, sorting=true)``, user-based."""
    profiles: dict[int, Counter[int]] = {}
    for u, _, tags in train:
        profiles.setdefault(u, Counter()).update(tags)
    neighbours = dict.fromkeys(u for u, r, _ in train if u != user and r == resource)
    if not neighbours:
        neighbours = dict.fromkeys(u for u, _, _ in train)
    sims = [(v, tagrec_cosine(profiles[user], profiles[v])) for v in neighbours]
    result: dict[int, float] = {}
    for v, sim in tree_map_order(sims)[:k]:
        for tag in get_bookmark(train, v, resource)[2]:
            result[tag] = result[tag] + sim if tag in result else sim
    return [tag for tag, _ in tree_map_order(list(result.items()))[:10]]


def clustered_split(seed: int, objects: int) -> PostData:
    """Users in clusters with their own tags (similarity 0 across), some with equal profiles."""
    rng = np.random.default_rng(seed)
    rows = []
    for user in range(54):
        cluster = user % 3
        copy = user % 9 < 2  # users 0/1, 9/10, ...: the same posts, the same profile
        source = np.random.default_rng(seed * 100 + user // 9) if copy else rng
        for _ in range(int(source.integers(3, 9))):
            obj = int(source.integers(0, objects))
            for tag in source.choice(6, size=int(source.integers(1, 4)), replace=False):
                rows.append((str(user), str(obj), f"c{cluster}t{tag}", int(source.integers(0, 99))))
    frame = pd.DataFrame(rows, columns=["user", "object", "tag", "timestamp"])
    return personalized_split(Folksonomy.from_frame(frame), p=1)


def bookmarks(posts: Posts) -> list[Bookmark]:
    """The posts as TagRec's bookmarks, in their order (by user, then time)."""
    return [(int(posts.users[i]), int(posts.resources[i]), posts.tags[i].tolist())
            for i in range(len(posts))]


@pytest.mark.parametrize(("seed", "objects"), [(1, 8), (2, 8), (3, 200), (4, 30)])
def test_cf_lists_equal_tagrecs_getrankedtaglist(seed, objects):
    data = clustered_split(seed, objects)
    train = bookmarks(data.train)
    got = UserCF().fit(data).top_tags(data.test, 10)
    lonely = 0
    for q, (user, resource, _) in enumerate(bookmarks(data.test)):
        lonely += not any(r == resource and u != user for u, r, _ in train)
        assert [t for t in got[q] if t >= 0] == tagrec_cf(train, user, resource), q
    assert lonely if objects == 200 else not lonely  # the every-user fallback's cases


def test_the_data_reach_tagrecs_odd_branches():
    """More than 20 candidates, zero and equal similarities among the 20 that vote."""
    data = clustered_split(1, 8)
    model = UserCF().fit(data)
    assert np.bincount(model._candidates(data.test)[0]).max() > 20
    rows, _, sims, _ = model._neighbours(data.test)
    assert np.bincount(rows).max() == 20 and (sims == 0).any()
    assert any(len(set(sims[rows == q])) < (rows == q).sum() for q in range(len(data.test)))


def test_zero_votes_are_candidates_and_ties_go_to_the_later_insertion():
    # users 0, 1, 2 tagged r0; user 3's profile shares a tag with user 1 only
    tags = Ragged.from_lists([[0, 1], [2], [3, 4], [2], [5], [2]])
    train = Posts(np.array([0, 1, 2, 3, 3, 4]), np.array([0, 0, 0, 1, 2, 3]), np.arange(6), tags)
    test = Posts(np.array([3]), np.array([0]), np.array([9]), Ragged.from_lists([[0]]))
    model = UserCF().fit(PostData(train, test, 5, 4, 6, None))
    scores = model.score(test)
    assert isinstance(scores, sp.csr_matrix)
    cos = 1 / math.sqrt(2)  # user 3: {2, 5}; user 1: {2}
    assert dict(zip(scores.indices.tolist(), scores.data.tolist(), strict=True)) == {
        0: 0.0, 1: 0.0, 2: cos, 3: 0.0, 4: 0.0}
    # neighbours: 1, then 2 before 0 (equal 0: the later first); tags of 2 then 0, later first
    assert model.top_tags(test, 10).tolist() == [[2, 1, 0, 4, 3, -1, -1, -1, -1, -1]]
    assert tagrec_cf(bookmarks(train), 3, 0) == [2, 1, 0, 4, 3]
