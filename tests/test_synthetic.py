from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import Stemmer

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.ragged import Ragged
from tagtorch.data.synthetic import (
    STOPWORDS,
    SyntheticConfig,
    _pareto_scale,
    generate,
    generate_folksonomy,
)

SMALL = {"n_objects": 600, "n_users": 150, "n_tags": 500, "n_topics": 12, "n_categories": 6}


@pytest.fixture(scope="module")
def default() -> Folksonomy:
    return generate_folksonomy()


def _object_tag_matrix(f: Folksonomy) -> sp.csr_matrix:
    pairs = f.assignments[["object", "tag"]].drop_duplicates()
    return sp.csr_matrix(
        (np.ones(len(pairs)), (pairs["object"].to_numpy(), pairs["tag"].to_numpy())),
        shape=(f.n_objects, f.n_tags),
    )


def _assert_same(a: Folksonomy, b: Folksonomy) -> None:
    pd.testing.assert_frame_equal(a.assignments, b.assignments)
    pd.testing.assert_frame_equal(a.texts, b.texts)
    pd.testing.assert_frame_equal(a.categories, b.categories)
    for field in ("users", "objects", "tags", "category_names"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def test_signature_defaults_match_config() -> None:
    parameters = inspect.signature(generate_folksonomy).parameters
    fields = {f.name: f.default for f in dataclasses.fields(SyntheticConfig)}
    assert set(parameters) == {*fields, "progress"}
    for name, default in fields.items():
        assert parameters[name].default == default, name


def test_same_seed_same_output_and_seeds_differ() -> None:
    a = generate_folksonomy(**SMALL, seed=3)
    b = generate(SyntheticConfig(**SMALL, seed=3))
    _assert_same(a, b)
    c = generate_folksonomy(**SMALL, seed=4)
    assert not a.assignments.equals(c.assignments)
    assert not np.array_equal(a.tags, c.tags)
    assert not a.texts.equals(c.texts)


def test_sizes_match_config(default: Folksonomy) -> None:
    config = SyntheticConfig()
    assert default.n_objects == config.n_objects
    assert 0.8 * config.n_users <= default.n_users <= config.n_users
    assert 0.7 * config.n_tags <= default.n_tags <= config.n_tags
    assert len(default.category_names) == config.n_categories
    assert default.text_fields == ["title", "description"]
    assert len(default.texts) == default.n_objects
    title = default.texts["title"].str.split().str.len()
    description = default.texts["description"].str.split().str.len()
    assert title.between(*config.title_words).all()
    assert description.between(*config.description_words).all()
    assert title.min() == config.title_words[0] and title.max() == config.title_words[1]
    stats = default.describe()
    assert 6 <= stats["tags_per_object_mean"] <= 12
    assert stats["objects_with_2plus_tags"] > 0.9 * default.n_objects


def test_codes_follow_from_frame_invariants(default: Folksonomy) -> None:
    a = default.assignments
    assert list(a.columns) == ["user", "object", "tag", "timestamp"]
    assert (a.dtypes == np.int64).all()
    assert not a.duplicated(["user", "object", "tag"]).any()
    for column, n in (("user", default.n_users), ("object", default.n_objects),
                      ("tag", default.n_tags)):
        assert np.array_equal(np.unique(a[column]), np.arange(n)), column
    assert list(default.tags) == sorted(default.tags)
    assert len(set(default.tags)) == default.n_tags
    assert list(default.category_names) == sorted(default.category_names)


def test_matches_from_frame() -> None:
    f = generate_folksonomy(**SMALL, seed=5)
    raw = pd.DataFrame({
        "user": f.users[f.assignments["user"]],
        "object": f.objects[f.assignments["object"]],
        "tag": f.tags[f.assignments["tag"]],
        "timestamp": f.assignments["timestamp"],
    }).sample(frac=1.0, random_state=0)
    texts = f.texts.set_index(pd.Index(f.objects))
    categories = pd.DataFrame({"object": f.objects[f.categories["object"]],
                               "category": f.category_names[f.categories["category"]]})
    rebuilt = Folksonomy.from_frame(raw, texts=texts, categories=categories, name=f.name)
    rebuilt = dataclasses.replace(
        rebuilt, categories=rebuilt.categories.sort_values(["object", "category"],
                                                           ignore_index=True))
    _assert_same(f, rebuilt)


def test_chunked_generation_is_valid() -> None:
    f = generate_folksonomy(**SMALL, chunk_size=97, progress=True)
    assert f.n_objects == SMALL["n_objects"]
    assert not f.assignments.duplicated(["user", "object", "tag"]).any()
    assert f.assignments["object"].nunique() == f.n_objects
    assert len(f.texts) == f.n_objects and (f.texts["title"] != "").all()


def test_popularity_is_heavy_tailed(default: Folksonomy) -> None:
    tag_counts = np.sort(np.bincount(default.assignments["tag"], minlength=default.n_tags))[::-1]
    assert tag_counts[: len(tag_counts) // 10].sum() > 0.4 * tag_counts.sum()
    object_counts = np.sort(np.bincount(default.assignments["object"]))[::-1]
    assert object_counts[: len(object_counts) // 10].sum() > 0.3 * object_counts.sum()
    tags_per_object = default.object_tags().lengths
    assert (tags_per_object < 10).mean() > 0.6
    assert tags_per_object.max() > 5 * np.median(tags_per_object)
    user_counts = np.sort(np.bincount(default.assignments["user"]))[::-1]
    assert user_counts[: len(user_counts) // 10].sum() > 0.3 * user_counts.sum()


def test_cooccurrence_is_informative(default: Folksonomy) -> None:
    x = _object_tag_matrix(default)
    counts = np.asarray(x.sum(axis=0)).ravel()
    topic = np.asarray(default.meta["tag_topic"])
    co = (x.T @ x).toarray()
    ratios = []
    for a in np.argsort(-counts)[:30]:
        confidence = co[a] / counts[a]  # P(b | a), over objects
        same = (topic == topic[a]) & (np.arange(default.n_tags) != a)
        ratios.append(confidence[same].mean() / confidence[~same & (topic >= 0)].mean())
    assert np.median(ratios) > 5


def test_texts_contain_own_tags_at_configured_rate(default: Folksonomy) -> None:
    config = SyntheticConfig()
    own = default.object_tags()
    for field, rate in (("title", config.title_tag_prob),
                        ("description", config.description_tag_prob)):
        words = default.texts[field].str.split()
        hits = total = 0
        for obj, tokens in enumerate(words.head(800)):
            tag_set = set(default.tags[own[obj]])
            hits += sum(t in tag_set for t in tokens)
            total += len(tokens)
        assert rate - 0.04 < hits / total < rate + 0.08, field
    vocabulary = set(default.tags)
    tokens = " ".join(default.texts["description"].head(300)).split()
    assert any(t in STOPWORDS for t in tokens)
    assert sum(t not in vocabulary and t not in STOPWORDS for t in tokens) > 0.15 * len(tokens)


def test_every_object_has_categories_of_its_topics(default: Folksonomy) -> None:
    table = default.categories.sort_values(["object", "category"])
    per_object = Ragged.from_groups(table["object"].to_numpy(), table["category"].to_numpy(),
                                    default.n_objects)
    assert (per_object.lengths >= 1).all()
    assert (per_object.lengths <= 2).all()
    topics = np.asarray(default.meta["object_topics"])
    topic_category = np.asarray(default.meta["topic_category"])
    for obj in range(0, default.n_objects, 37):
        expected = {int(topic_category[t]) for t in topics[obj] if t >= 0}
        assert set(per_object[obj].tolist()) == expected
    assert (topics[:, 1] >= 0).mean() == pytest.approx(SyntheticConfig().two_topic_prob, abs=0.05)


def test_tags_are_pseudo_words_with_stemming_variants(default: Folksonomy) -> None:
    tags = [str(t) for t in default.tags]
    assert not set(tags) & set(STOPWORDS)
    assert all(t.isalpha() and len(t) >= 4 for t in tags)
    variant_of = np.asarray(default.meta["tag_variant_of"])
    variants = np.flatnonzero(variant_of >= 0)
    assert len(variants) >= 10
    kinds = {("plural" if tags[v] == tags[variant_of[v]] + "s" else
              "capital" if tags[v] == tags[variant_of[v]].capitalize() else "?")
             for v in variants}
    assert kinds == {"plural", "capital"}
    stemmer = Stemmer.Stemmer("porter")
    stems = np.array(stemmer.stemWords([t.lower() for t in tags]), dtype=object)
    for v in variants:
        assert stems[v] == stems[variant_of[v]]
    merged = default.with_tags(stems)
    assert merged.n_tags == default.n_tags - len(variants)


def test_timestamps_in_span_and_after_object_creation(default: Folksonomy) -> None:
    config = SyntheticConfig()
    time = default.assignments["timestamp"].to_numpy()
    obj = default.assignments["object"].to_numpy()
    created = np.floor(config.time_start + config.time_span * obj / config.n_objects)
    assert (time >= created).all()
    assert (time < config.time_start + config.time_span).all()
    first_time = pd.Series(time).groupby(obj).min().to_numpy()
    assert np.corrcoef(first_time, np.arange(default.n_objects))[0, 1] > 0.9


def test_meta_shapes(default: Folksonomy) -> None:
    assert len(default.meta["tag_topic"]) == default.n_tags
    assert default.meta["object_topics"].shape == (default.n_objects, 2)
    assert len(default.meta["topic_category"]) == SyntheticConfig().n_topics
    assert default.meta["config"]["seed"] == 0


def test_pareto_scale_gives_the_mean() -> None:
    rng = np.random.default_rng(0)
    for mean, alpha, cap in ((10.0, 1.0, 300), (3.0, 1.5, 50)):
        scale = _pareto_scale(mean, alpha, cap)
        draws = np.clip(np.ceil(scale * (1 - rng.random(400_000)) ** (-1 / alpha)), 1, cap)
        assert draws.mean() == pytest.approx(mean, rel=0.03)


@pytest.mark.parametrize("bad", [
    {"n_objects": 0},
    {"n_categories": 40},
    {"title_tag_prob": 1.5},
    {"mean_posts_per_object": 0.5},
    {"title_words": (5, 2)},
    {"tags_per_post": (0.0, 0.0, 0.0)},
])
def test_invalid_config_raises(bad: dict) -> None:
    with pytest.raises(ValueError, match="invalid SyntheticConfig"):
        SyntheticConfig(**bad)


def test_hydra_style_lists_become_tuples() -> None:
    config = SyntheticConfig(title_words=[2, 4], tags_per_post=[1, 1, 1])
    assert config.title_words == (2, 4)
    assert config.tags_per_post == (1.0, 1.0, 1.0)
    hash(config)
