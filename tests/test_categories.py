"""p(z | t), p(z | o) and Z_o (tagtorch.data.categories) against plain counts written here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tagtorch.data.categories import object_categories, topic_given_object, topic_given_tag
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged


def random_rows(rng: np.random.Generator, n: int, n_codes: int, max_len: int) -> list[list[int]]:
    return [rng.integers(0, n_codes, rng.integers(0, max_len + 1)).tolist() for _ in range(n)]


@pytest.mark.parametrize("seed", range(3))
def test_topic_given_tag_is_a_plain_count(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, n_tags, n_topics = 40, 9, 4
    tags = random_rows(rng, n, n_tags, 6)  # repeats inside a row count once
    cats = random_rows(rng, n, n_topics, 3)
    got = topic_given_tag(Ragged.from_lists(tags), Ragged.from_lists(cats), n_tags, n_topics)
    assert got.shape == (n_tags, n_topics)
    for t in range(n_tags):
        f_t = sum(t in row for row in tags)
        for z in range(n_topics):
            f_zt = sum(t in tags[i] and z in cats[i] for i in range(n))
            assert got[t, z] == pytest.approx(f_zt / f_t if f_t else 0.0), (t, z)


def test_topic_given_tag_checks_its_inputs() -> None:
    tags = Ragged.from_lists([[0], [1]])
    with pytest.raises(ValueError, match="rows"):
        topic_given_tag(tags, Ragged.from_lists([[0]]), 2, 1)
    with pytest.raises(ValueError, match="tag codes"):
        topic_given_tag(tags, Ragged.from_lists([[0], [0]]), 1, 1)


def test_topic_given_object_uniform_and_from_tags() -> None:
    rng = np.random.default_rng(5)
    n, n_tags, n_topics = 30, 7, 5
    cats = random_rows(rng, n, n_topics, 3)
    inputs = [sorted(set(r)) for r in random_rows(rng, n, n_tags, 3)]
    pzt = rng.random((n_tags, n_topics)) * (rng.random((n_tags, n_topics)) < 0.5)
    uniform = topic_given_object(Ragged.from_lists(cats), n_topics)
    by_tags = topic_given_object(Ragged.from_lists(cats), n_topics, "tags",
                                 Ragged.from_lists(inputs), pzt)
    for i in range(n):
        zo = set(cats[i])
        evidence = {z: sum(pzt[t, z] for t in inputs[i]) for z in zo}
        total = sum(evidence.values())
        for z in range(n_topics):
            assert uniform[i, z] == pytest.approx(1 / len(zo) if z in zo else 0.0)
            want = (evidence[z] / total if total > 0 else 1 / len(zo)) if z in zo else 0.0
            assert by_tags[i, z] == pytest.approx(want), (i, z)
    with pytest.raises(ValueError, match="mode"):
        topic_given_object(Ragged.from_lists(cats), n_topics, "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="input_tags"):
        topic_given_object(Ragged.from_lists(cats), n_topics, "tags")


def test_object_categories_from_the_folksonomy() -> None:
    assignments = pd.DataFrame({"user": ["u"] * 3, "object": ["m1", "m2", "m3"],
                                "tag": ["a", "b", "c"]})
    categories = pd.DataFrame({"object": ["m3", "m1", "m3", "m3", "zz"],
                               "category": ["Drama", "Comedy", "Comedy", "Drama", "War"]})
    f = Folksonomy.from_frame(assignments, categories=categories)
    names = list(f.category_names)
    rows = object_categories(f, np.array([2, 1, 0]))
    got = [sorted(names[c] for c in row) for row in rows]
    assert got == [["Comedy", "Drama"], [], ["Comedy"]]
