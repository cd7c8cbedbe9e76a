"""Topics on candidate sets (candidates/diversity_topics.py, LatreCandidates(diversity=...)):
p(z | t) and p(z | o) against plain per-object counts written here; off by default; the
optional fields through slicing, padding, state and the on-disk cache."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from tagtorch.candidates.cache import CandidateCache
from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.candidates.latre import LatreCandidates
from tagtorch.data.splits import tag_recommendation_folds
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex

SMALL_LDA = {"n_topics": 4, "iterations": 10, "burn_in": 5, "seed": 0}


@pytest.fixture(scope="module")
def setting():
    folksonomy = generate_folksonomy(n_objects=150, n_categories=5, seed=1)
    fold = tag_recommendation_folds(folksonomy, n_folds=5, seed=0)[0]
    return folksonomy, fold, TermIndex.from_folksonomy(folksonomy)


def _generator(setting, diversity=None):
    _, fold, terms = setting
    return LatreCandidates(max_rule_candidates=20, device="cpu", chunk_size=16,
                           diversity=diversity).fit(fold.train_objects, fold.train_tags, terms)


def ref_topic_given_tag(train_tags: list[set[int]], train_topics: list[set[int]], tag: int,
                        n_topics: int) -> list[float]:
    """f(z, t) / f(t) over D, one object at a time."""
    tagged = [i for i, tags in enumerate(train_tags) if tag in tags]
    if not tagged:
        return [0.0] * n_topics
    return [sum(z in train_topics[i] for i in tagged) / len(tagged) for z in range(n_topics)]


def test_off_by_default_and_the_same_candidates_and_features_when_on(setting):
    _, fold, _ = setting
    plain = _generator(setting)(fold.val)
    with_topics = _generator(setting, {"source": "categories"})(fold.val)
    assert not plain.has_topics and plain.tag_topics is None and plain.object_topics is None
    assert with_topics.has_topics
    for name in ("objects", "tags", "features", "labels", "mask", "n_relevant"):
        assert torch.equal(getattr(plain, name), getattr(with_topics, name)), name
    assert plain.feature_names == with_topics.feature_names


def test_categories_give_p_z_given_t_from_d_counts_and_uniform_p_z_given_o(setting):
    folksonomy, fold, _ = setting
    n_topics = len(folksonomy.category_names)
    cats = folksonomy.categories
    topics_of = {o: set(cats.loc[cats["object"] == o, "category"].tolist())
                 for o in range(folksonomy.n_objects)}
    train_tags = [set(fold.train_tags[i].tolist()) for i in range(len(fold.train_objects))]
    train_topics = [topics_of[int(o)] for o in fold.train_objects]
    lists = _generator(setting, {"source": "auto"})(fold.test)
    assert lists.tag_topics.shape == (*lists.mask.shape, n_topics)
    for b in range(len(lists)):
        zo = topics_of[int(lists.objects[b])]
        expected = [1 / len(zo) if z in zo else 0.0 for z in range(n_topics)]
        assert lists.object_topics[b].tolist() == pytest.approx(expected)
        for j in range(lists.mask.shape[1]):
            if not lists.mask[b, j]:
                assert lists.tag_topics[b, j].abs().sum() == 0
                continue
            want = ref_topic_given_tag(train_tags, train_topics, int(lists.tags[b, j]), n_topics)
            assert lists.tag_topics[b, j].tolist() == pytest.approx(want, abs=1e-6)


def test_p_z_given_o_from_input_tags_evidence(setting):
    _, fold, _ = setting
    generator = _generator(setting, {"source": "categories", "object_mode": "tags"})
    lists = generator(fold.test)
    table = generator.object_topics.table_
    cats = generator.object_topics.terms.categories
    for b in range(len(lists)):
        zo = set(cats[int(lists.objects[b])].tolist())
        evidence = [sum(table[t, z] for t in fold.test.input_tags[b]) if z in zo else 0.0
                    for z in range(table.shape[1])]
        if sum(evidence) == 0:
            evidence = [1.0 if z in zo else 0.0 for z in range(table.shape[1])]
        total = sum(evidence)
        assert lists.object_topics[b].tolist() == pytest.approx(
            [e / total if total else 0.0 for e in evidence], abs=1e-6)


def test_lda_topics_come_from_input_tags_and_d_counts_with_inferred_sets(setting):
    _, fold, _ = setting
    settings = {"source": "lda", "threshold": 0.3, "lda": SMALL_LDA}
    generator = _generator(setting, settings)
    lists = generator(fold.test)
    model = generator.object_topics.topic_model.model_
    train_tags = [set(fold.train_tags[i].tolist()) for i in range(len(fold.train_objects))]
    train_topics = [{z for z in range(4) if model.theta_[i, z] >= 0.3}
                    for i in range(len(fold.train_objects))]
    real = lists.mask.nonzero().tolist()
    for b, j in real[:: max(1, len(real) // 200)]:
        want = ref_topic_given_tag(train_tags, train_topics, int(lists.tags[b, j]), 4)
        assert lists.tag_topics[b, j].tolist() == pytest.approx(want, abs=1e-6)
    # Z_o from I_o only: other gold tags give the same p(z | o)
    from tagtorch.data.ragged import Ragged
    from tagtorch.data.splits import TagQueries
    other = TagQueries(fold.test.objects, fold.test.input_tags,
                       Ragged.from_lists([[0]] * len(fold.test)))
    assert torch.equal(generator(other).object_topics, lists.object_topics)
    topic_model = generator.object_topics.topic_model
    for first in range(0, len(fold.test), 16):  # the generator's chunks (fold-in seeds)
        rows = np.arange(first, min(first + 16, len(fold.test)))
        theta = topic_model.mixtures(fold.test.input_tags.take(rows),
                                     int(fold.test.objects[first]), torch.device("cpu"))
        for b, row in zip(rows, theta, strict=True):
            zo = [z for z in range(4) if row[z] >= 0.3]
            want = [1 / len(zo) if z in zo else 0.0 for z in range(4)]
            assert lists.object_topics[b].tolist() == pytest.approx(want)
    phi = _generator(setting, {**settings, "tag_topics": "phi"})(fold.test)
    sums = phi.tag_topics.sum(-1)[phi.mask]
    assert (((sums - 1).abs() < 1e-5) | (sums == 0)).all()  # Bayes over topics; 0 unseen


def test_optional_fields_survive_slicing_from_flat_state_and_the_cache(setting, tmp_path):
    _, fold, _ = setting
    lists = _generator(setting, {"source": "categories"})(fold.val)
    part = lists[torch.tensor([2, 0])]
    assert torch.equal(part.tag_topics, lists.tag_topics[[2, 0]])
    assert torch.equal(part.object_topics, lists.object_topics[[2, 0]])
    batches = list(lists.batches(5))
    assert torch.equal(torch.cat([b.tag_topics for b in batches]), lists.tag_topics)
    assert CandidateSet(**lists.state()).has_topics
    assert lists.to("cpu").object_topics is not None
    with pytest.raises(ValueError, match="both or neither"):
        CandidateSet(**(lists.state() | {"object_topics": None}))
    flat = CandidateSet.from_flat(
        objects=torch.tensor([7, 8]), rows=torch.tensor([0, 0, 1]), tags=torch.tensor([3, 1, 2]),
        features=torch.ones(3, 1), labels=torch.tensor([1.0, 0, 0]),
        n_relevant=torch.tensor([1, 0]), feature_names=("f",),
        tag_topics=torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.0, 0.25]]),
        object_topics=torch.tensor([[1.0, 0.0], [0.5, 0.5]]))
    assert flat.tag_topics.tolist() == [[[0.5, 0.5], [1.0, 0.0]], [[0.0, 0.25], [0.0, 0.0]]]
    for sets in (lists, _generator(setting)(fold.val)):
        cache = CandidateCache(tmp_path / str(sets.has_topics), {"k": 1})
        cache.get(0, "val", lambda sets=sets: sets)
        again = cache.get(0, "val", lambda: pytest.fail("rebuilt"))
        for name, value in sets.state().items():
            got = getattr(again, name)
            if isinstance(value, torch.Tensor):
                assert torch.equal(got, value), name
            else:
                assert got == value, name


def test_bad_settings_and_missing_categories():
    with pytest.raises(ValueError, match="source"):
        LatreCandidates(diversity={"source": "genres"})
    with pytest.raises(ValueError, match="threshold"):
        LatreCandidates(diversity={"threshold": 0})
    folksonomy = generate_folksonomy(n_objects=60, seed=0)
    folksonomy = replace(folksonomy, categories=folksonomy.categories.iloc[:0],
                         category_names=folksonomy.category_names[:0])
    fold = tag_recommendation_folds(folksonomy, n_folds=5, seed=0)[0]
    terms = TermIndex.from_folksonomy(folksonomy)
    assert terms.categories is None
    with pytest.raises(ValueError, match="no object categories"):
        LatreCandidates(device="cpu", diversity={"source": "categories"}).fit(
            fold.train_objects, fold.train_tags, terms)
    auto = LatreCandidates(device="cpu", diversity={"lda": SMALL_LDA}).fit(
        fold.train_objects, fold.train_tags, terms)
    assert auto.object_topics.source_ == "lda"
    assert np.isfinite(auto(fold.val).object_topics.numpy()).all()


def test_tag_distance_is_the_jaccard_distance_of_d_object_sets(setting, tmp_path):
    _, fold, terms = setting
    plain = _generator(setting)(fold.val)
    assert plain.tag_distance is None
    lists = LatreCandidates(max_rule_candidates=20, device="cpu", chunk_size=16,
                            distances=True).fit(fold.train_objects, fold.train_tags,
                                                terms)(fold.val)
    assert torch.equal(lists.features, plain.features)
    objects_of: dict[int, set[int]] = {}
    for i in range(len(fold.train_tags)):
        for tag in fold.train_tags[i].tolist():
            objects_of.setdefault(int(tag), set()).add(i)
    b, length = lists.tags.shape
    assert lists.tag_distance.shape == (b, length, length)
    assert lists.tag_distance.dtype == torch.float16
    checked = 0
    for row in range(0, b, 3):
        for i in range(length):
            for j in range(length):
                got = float(lists.tag_distance[row, i, j])
                if not (lists.mask[row, i] and lists.mask[row, j]):
                    assert got == 1.0
                    continue
                a = objects_of.get(int(lists.tags[row, i]), set())
                c = objects_of.get(int(lists.tags[row, j]), set())
                want = 1.0 - len(a & c) / len(a | c) if a | c else 1.0
                assert got == pytest.approx(want, abs=1e-3)
                checked += 1
    assert checked > 500
    cache = CandidateCache(tmp_path, {"k": 2})
    cache.get(0, "val", lambda: lists)
    again = cache.get(0, "val", lambda: pytest.fail("rebuilt"))
    assert torch.equal(again.tag_distance, lists.tag_distance)
    assert torch.equal(lists[torch.tensor([1])].tag_distance, lists.tag_distance[[1]])
