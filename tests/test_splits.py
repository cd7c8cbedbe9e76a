import numpy as np
import pandas as pd
import pytest

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import (
    p_core,
    post_filter,
    random_post_split,
    split_input_gold,
    tag_recommendation_folds,
    temporal_user_split,
)


def random_folksonomy(seed: int = 0, n: int = 6000, objects: int = 700) -> Folksonomy:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "user": rng.integers(0, 80, n),
        "object": rng.integers(0, objects, n),
        "tag": [f"t{i}" for i in rng.zipf(1.6, n) % 200],
        "timestamp": rng.integers(0, 10**8, n),
    })
    return Folksonomy.from_frame(frame, name="random")


def tag_sets(f: Folksonomy) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for o, t in zip(f.assignments["object"], f.assignments["tag"], strict=True):
        out.setdefault(int(o), set()).add(int(t))
    return out


@pytest.fixture(scope="module")
def folksonomy() -> Folksonomy:
    return random_folksonomy()


def test_folds_are_deterministic_for_a_seed(folksonomy):
    a = tag_recommendation_folds(folksonomy, seed=3)
    b = tag_recommendation_folds(folksonomy, seed=3)
    c = tag_recommendation_folds(folksonomy, seed=4)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x.test.objects, y.test.objects)
        assert np.array_equal(x.test.input_tags.values, y.test.input_tags.values)
        assert np.array_equal(x.train_objects, y.train_objects)
    assert not np.array_equal(a[0].test.objects, c[0].test.objects)


def test_portions_are_disjoint_equal_and_cover_eligible_objects(folksonomy):
    sets = tag_sets(folksonomy)
    eligible = {o for o, s in sets.items() if len(s) >= 2}
    folds = tag_recommendation_folds(folksonomy, n_folds=5, seed=1)
    tests = [set(f.test.objects.tolist()) for f in folds]
    sizes = {len(t) for t in tests}
    assert len(sizes) == 1
    size = sizes.pop()
    assert size == len(eligible) // 5
    assert set().union(*tests) <= eligible
    assert sum(len(t) for t in tests) == len(set().union(*tests))  # disjoint
    for f in folds:
        d, v, t = set(f.train_objects.tolist()), set(f.val.objects.tolist()), tests[f.fold]
        assert len(d) == 3 * size and len(v) == size
        assert not (d & v) and not (d & t) and not (v & t)
        # the validation portion of fold f is the test portion of fold f + 1
        assert v == tests[(f.fold + 1) % 5]


def test_input_and_gold_split_each_object_in_half(folksonomy):
    sets = tag_sets(folksonomy)
    for f in tag_recommendation_folds(folksonomy, seed=2):
        for q in (f.val, f.test):
            for o, inp, gold in zip(q.objects, q.input_tags, q.gold_tags, strict=True):
                assert len(inp) >= 1 and len(gold) >= 1
                assert set(inp.tolist()) | set(gold.tolist()) == sets[int(o)]
                assert not set(inp.tolist()) & set(gold.tolist())
                assert len(inp) == len(sets[int(o)]) // 2


def test_no_gold_tag_of_v_or_t_reaches_d(folksonomy):
    sets = tag_sets(folksonomy)
    for f in tag_recommendation_folds(folksonomy, seed=5):
        held_out = set(f.val.objects.tolist()) | set(f.test.objects.tolist())
        assert not held_out & set(f.train_objects.tolist())
        # D's statistics see exactly the full tag sets of D's objects, nothing else
        for o, tags in zip(f.train_objects, f.train_tags, strict=True):
            assert set(tags.tolist()) == sets[int(o)]
        assert len(f.train_tags) == len(f.train_objects)


def test_an_object_is_split_the_same_way_in_v_and_t(folksonomy):
    folds = tag_recommendation_folds(folksonomy, seed=6)
    first = {int(o): tuple(i.tolist()) for o, i in
             zip(folds[0].test.objects, folds[0].test.input_tags, strict=True)}
    again = {int(o): tuple(i.tolist()) for o, i in
             zip(folds[4].val.objects, folds[4].val.input_tags, strict=True)}
    assert first == again


def test_sample_size_and_errors(folksonomy):
    folds = tag_recommendation_folds(folksonomy, sample_size=100, seed=0)
    assert all(len(f.test) == 20 for f in folds)
    with pytest.raises(ValueError, match="sample_size"):
        tag_recommendation_folds(folksonomy, sample_size=10**6)
    with pytest.raises(ValueError, match="n_folds"):
        tag_recommendation_folds(folksonomy, n_folds=2)


def test_split_input_gold_on_a_hand_made_case():
    tags = Ragged.from_lists([[1, 2], [3, 4, 5], [6, 7, 8, 9]])
    inp, gold = split_input_gold(tags, 0.5, np.random.default_rng(0))
    assert inp.lengths.tolist() == [1, 1, 2]
    assert gold.lengths.tolist() == [1, 2, 2]
    with pytest.raises(ValueError, match="at least two"):
        split_input_gold(Ragged.from_lists([[1]]), 0.5, np.random.default_rng(0))


def reference_p_core(rows: list[tuple[int, int, int]], p: int) -> set[tuple[int, int, int]]:
    current = set(rows)
    while True:
        posts = {(u, o) for u, o, _ in current}
        user_posts: dict[int, int] = {}
        object_posts: dict[int, int] = {}
        for u, o in posts:
            user_posts[u] = user_posts.get(u, 0) + 1
            object_posts[o] = object_posts.get(o, 0) + 1
        tag_count: dict[int, int] = {}
        for _, _, t in current:
            tag_count[t] = tag_count.get(t, 0) + 1
        kept = {(u, o, t) for u, o, t in current
                if user_posts[u] >= p and object_posts[o] >= p and tag_count[t] >= p}
        if kept == current:
            return kept
        current = kept


def test_p_core_matches_a_plain_implementation():
    f = random_folksonomy(seed=9, n=3000, objects=300)
    core = p_core(f, 3)
    raw = {(f.users[u], f.objects[o], f.tags[t]) for u, o, t in
           f.assignments[["user", "object", "tag"]].itertuples(index=False)}
    codes = {(u, o, t) for u, o, t in f.assignments[["user", "object", "tag"]].itertuples(
        index=False)}
    expected = {(f.users[u], f.objects[o], f.tags[t]) for u, o, t in reference_p_core(
        list(codes), 3)}
    got = {(core.users[u], core.objects[o], core.tags[t]) for u, o, t in
           core.assignments[["user", "object", "tag"]].itertuples(index=False)}
    assert got == expected
    assert 0 < len(got) < len(raw)


def test_random_post_split_keeps_posts_whole():
    f = random_folksonomy(seed=1)
    s = random_post_split(f, 0.2, seed=0)
    assert not (s.train & s.test).any() and (s.train | s.test).all()
    a = f.assignments.assign(test=s.test)
    per_post = a.groupby(["user", "object"])["test"].agg(["min", "max"])
    assert (per_post["min"] == per_post["max"]).all()
    assert abs(per_post["min"].mean() - 0.2) < 0.01


@pytest.mark.parametrize("unit", ["posts", "triples"])
def test_random_post_split_with_validation_is_a_three_way_partition(unit):
    f = random_folksonomy(seed=2)
    s = random_post_split(f, 0.2, seed=4, val_fraction=0.25, unit=unit)
    parts = np.stack([s.train, s.val, s.test]).astype(int)
    assert (parts.sum(0) == 1).all()  # disjoint, and every assignment in one part
    a = f.assignments.assign(part=parts.argmax(0))
    units = a.groupby(["user", "object"])["part"] if unit == "posts" else a["part"]
    if unit == "posts":
        assert (units.nunique() == 1).all()  # posts stay whole
        shares = units.first().value_counts(normalize=True)
    else:
        shares = units.value_counts(normalize=True)
    assert abs(shares[2] - 0.2) < 0.01 and abs(shares[1] - 0.8 * 0.25) < 0.01
    again = random_post_split(f, 0.2, seed=4, val_fraction=0.25, unit=unit)
    assert np.array_equal(again.val, s.val) and np.array_equal(again.test, s.test)
    with pytest.raises(ValueError, match="unit must be"):
        random_post_split(f, 0.2, unit="users")


def test_temporal_user_split_with_validation_and_seeded_ties():
    # user 1: 20 posts at 10 distinct times (pairs tie); test = the 2 last, val = floor(0.25*18)=4
    frame = pd.DataFrame({"user": [1] * 20, "object": list(range(20)), "tag": ["x"] * 20,
                          "timestamp": [t // 2 for t in range(20)]})
    f = Folksonomy.from_frame(frame)
    tests, vals = set(), set()
    for seed in range(8):
        s = temporal_user_split(f, 0.1, val_fraction=0.25, seed=seed)
        assert sorted(f.assignments["timestamp"][s.test].tolist()) == [9, 9]
        val_times = sorted(f.assignments["timestamp"][s.val].tolist())
        assert val_times == [7, 7, 8, 8]
        # ties at time 6 never reach val: both posts of time 6 stay in training
        assert not (s.train & (s.val | s.test)).any() and (s.train | s.val | s.test).all()
        again = temporal_user_split(f, 0.1, val_fraction=0.25, seed=seed)
        assert (again.val == s.val).all()
        tests.add(tuple(np.flatnonzero(s.test)))
        vals.add(tuple(np.flatnonzero(s.val)))
    # 4 val posts are exactly times 7-8 (no tie at the boundary): same set for every seed
    assert len(vals) == 1 and len(tests) == 1
    # a tie at the boundary: 3 posts at the last time, 1 test post -> the seed picks which
    frame = pd.DataFrame({"user": [1] * 10, "object": list(range(10)), "tag": ["x"] * 10,
                          "timestamp": [0] * 7 + [5] * 3})
    f = Folksonomy.from_frame(frame)
    picked = {int(np.flatnonzero(temporal_user_split(f, 0.1, seed=seed).test)[0])
              for seed in range(20)}
    assert picked == {7, 8, 9}


def test_post_filter_follows_the_papers_order():
    rows = []
    # objects 0-2 posted by 3 users (kept), object 9 by 1 user (dropped)
    for user in (1, 2, 3):
        rows += [(user, obj, tag) for obj in (0, 1, 2) for tag in ("a", "b")]
    rows += [(1, 9, "a"), (1, 9, "rare")]
    rows += [(4, 0, "a"), (4, 1, "single")]  # user 4: 2 objects of the kept ones
    frame = pd.DataFrame(rows, columns=["user", "object", "tag"])
    f = Folksonomy.from_frame(frame)
    out = post_filter(f, min_object_users=3, min_user_objects=3, min_tag_uses=2)
    assert set(out.users.tolist()) == {1, 2, 3}  # user 4 has only 2 kept objects
    assert set(out.objects.tolist()) == {0, 1, 2}
    assert set(out.tags.tolist()) == {"a", "b"}  # "rare" left with object 9, "single" with user 4
    with pytest.raises(ValueError, match="min_user_objects"):
        post_filter(f, min_user_objects=0)
    with pytest.raises(ValueError, match="nothing"):
        post_filter(f, min_object_users=5)
