"""Batched LATRE candidates and features against the plain per-object reference."""

import dataclasses

import numpy as np
import pytest
import torch

from tagtorch.candidates.latre import FEATURE_NAMES, LatreCandidates, stability
from tagtorch.candidates.reference import FEATURE_NAMES as REFERENCE_NAMES
from tagtorch.candidates.reference import ReferenceFeatures
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import TagQueries, tag_recommendation_folds
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor


def prepare(folksonomy, fold_index=0, n_queries=None):
    terms = TermIndex.from_folksonomy(folksonomy)
    fold = tag_recommendation_folds(folksonomy, seed=0)[fold_index]
    queries = fold.test
    if n_queries is not None:
        rows = np.arange(min(n_queries, len(queries)))
        queries = TagQueries(queries.objects[rows], queries.input_tags.take(rows),
                             queries.gold_tags.take(rows))
    return terms, fold, queries


def texts_of(terms, obj):
    return {name: terms.fields[name][obj].tolist() for name in terms.fields}


def reference_of(generator, fold, terms, **params):
    """The plain per-object oracle with the generator's caps."""
    caps = {"max_antecedent_tags": generator.max_antecedent_tags,
            "max_train_tags": generator.max_train_tags}
    return ReferenceFeatures(
        [set(t.tolist()) for t in fold.train_tags],
        [texts_of(terms, o) for o in fold.train_objects], **{**caps, **params})


def assert_matches(cs, row, expected, gold):
    """List ``row`` of ``cs`` has the reference's candidates, features and labels."""
    mask = cs.mask[row]
    tags = cs.tags[row][mask].tolist()
    assert sorted(tags) == sorted(expected), f"candidates of list {row}"
    got = cs.features[row][mask]
    want = torch.tensor([[expected[c][n] for n in FEATURE_NAMES] for c in tags])
    torch.testing.assert_close(got, want.float(), atol=1e-5, rtol=1e-5)
    labels = cs.labels[row][mask].tolist()
    assert labels == [float(c in gold) for c in tags]  # labels only


def compare(terms, fold, queries, **params):
    batched = LatreCandidates(max_rule_candidates=None, device="cpu", chunk_size=7, **params)
    batched.fit(fold.train_objects, fold.train_tags, terms)
    cs = batched(queries)
    reference = reference_of(batched, fold, terms, **params)
    for row, obj in enumerate(queries.objects):
        expected = reference.candidates(set(queries.input_tags[row].tolist()),
                                        texts_of(terms, obj))
        assert_matches(cs, row, expected, set(queries.gold_tags[row].tolist()))
    return cs


def test_feature_names_match_the_reference():
    assert FEATURE_NAMES == REFERENCE_NAMES
    assert len(FEATURE_NAMES) == 13


@pytest.fixture(scope="module")
def synthetic():
    return TextProcessor(cache=False).apply(generate_folksonomy(n_objects=400, seed=3))


@pytest.mark.parametrize("params", [
    {},
    {"max_antecedent": 1},
    {"max_antecedent": 2, "min_support": 2},
    {"min_confidence": 0.2, "k_x": 5.0, "k_c": 7.0, "k_r": 2.0, "k_s": 3.0},
    {"max_antecedent_tags": 3, "max_train_tags": 4},
    {"max_antecedent_tags": None, "max_train_tags": None},
])
def test_batched_features_equal_the_reference_on_synthetic_data(synthetic, params):
    terms, fold, queries = prepare(synthetic, n_queries=40)
    compare(terms, fold, queries, **params)


def test_one_object_calls_equal_the_reference(synthetic):
    """The online path: each object alone, by its code and as a new object's given texts."""
    terms, fold, queries = prepare(synthetic, n_queries=15)
    generator = LatreCandidates(max_rule_candidates=None, device="cpu")
    generator.fit(fold.train_objects, fold.train_tags, terms)
    reference = reference_of(generator, fold, terms)
    first = next(iter(terms.fields))  # a new object with only its first field
    for row, obj in enumerate(queries.objects):
        one = queries.take(np.array([row]))
        inputs, gold = set(queries.input_tags[row].tolist()), set(queries.gold_tags[row].tolist())
        texts = texts_of(terms, obj)
        assert_matches(generator(one), 0, reference.candidates(inputs, texts), gold)
        partial = {name: (codes if name == first else []) for name, codes in texts.items()}
        given = {first: terms.fields[first].take(np.array([obj]))}
        assert_matches(generator(one, given), 0, reference.candidates(inputs, partial), gold)


def test_no_feature_reads_a_gold_tag(synthetic):
    """Changing the gold tags changes labels only, never candidates or features."""
    terms, fold, queries = prepare(synthetic, n_queries=30)
    generator = LatreCandidates(device="cpu").fit(fold.train_objects, fold.train_tags, terms)
    first = generator(queries)
    rng = np.random.default_rng(0)
    shuffled = queries.gold_tags.take(rng.permutation(len(queries)))
    second = generator(TagQueries(queries.objects, queries.input_tags, shuffled))
    assert torch.equal(first.tags, second.tags)
    assert torch.equal(first.features, second.features)
    assert not torch.equal(first.labels, second.labels)


def test_max_rule_candidates_keeps_best_rules_and_all_text_terms(synthetic):
    terms, fold, queries = prepare(synthetic, n_queries=20)
    full = LatreCandidates(max_rule_candidates=None, device="cpu").fit(
        fold.train_objects, fold.train_tags, terms)(queries)
    capped = LatreCandidates(max_rule_candidates=5, device="cpu").fit(
        fold.train_objects, fold.train_tags, terms)(queries)
    sum_l = FEATURE_NAMES.index("sum_l")
    ts = FEATURE_NAMES.index("ts")
    for row in range(len(queries)):
        f = full.features[row][full.mask[row]]
        c = capped.features[row][capped.mask[row]]
        tags = set(capped.tags[row][capped.mask[row]].tolist())
        rule_only = (c[:, ts] == 0) & (c[:, sum_l] > 0)
        assert int(rule_only.sum()) <= 5
        text_terms = set(full.tags[row][full.mask[row]][f[:, ts] > 0].tolist())
        assert text_terms <= tags
        best = f[(f[:, ts] == 0)][:, sum_l].sort(descending=True).values[:5]
        kept = c[rule_only][:, sum_l].sort(descending=True).values
        torch.testing.assert_close(kept, best[: len(kept)])


def test_the_caps_really_apply_to_the_synthetic_objects(synthetic):
    _, fold, queries = prepare(synthetic, n_queries=40)
    assert (queries.input_tags.lengths > 3).sum() >= 5  # the reference comparison with
    assert (fold.train_tags.lengths > 4).sum() >= 5  # max_antecedent_tags=3, max_train_tags=4


def fit_and_run(terms, fold, queries, **params):
    generator = LatreCandidates(max_rule_candidates=None, device="cpu", **params)
    return generator.fit(fold.train_objects, fold.train_tags, terms)(queries)


def test_objects_under_the_antecedent_cap_keep_their_exact_features(synthetic, caplog):
    terms, fold, queries = prepare(synthetic, n_queries=60)
    cap = 4
    with caplog.at_level("WARNING", logger="tagtorch.candidates.latre"):
        capped = fit_and_run(terms, fold, queries, max_antecedent_tags=cap)
    free = fit_and_run(terms, fold, queries, max_antecedent_tags=None)
    over = queries.input_tags.lengths > cap
    assert f"{int(over.sum())} of {len(queries)} objects have more than {cap} input tags" \
        in caplog.text
    changed = 0
    for row in range(len(queries)):
        a = capped.features[row][capped.mask[row]]
        b = free.features[row][free.mask[row]]
        same = (a.shape == b.shape and torch.equal(capped.tags[row][capped.mask[row]],
                                                   free.tags[row][free.mask[row]])
                and torch.equal(a, b))
        if not over[row]:
            assert same, f"object {queries.objects[row]} is under the cap but changed"
        changed += not same
    assert changed > 0  # the cap changes the objects over it


def heavy_query(fold, terms, n_input):
    """One query whose input tags are D's ``n_input`` most frequent tags (none pruned)."""
    counts = np.bincount(fold.train_tags.values, minlength=terms.n_terms)
    top = np.argsort(-counts, kind="stable")[:n_input]
    assert counts[top].min() > 0
    return TagQueries(fold.test.objects[:1], Ragged.from_lists([sorted(top.tolist())]),
                      Ragged.from_lists([[]]))


def test_a_heavily_tagged_object_forms_antecedents_from_its_most_frequent_tags(synthetic):
    """150 input tags: larger antecedents only from the 20 most frequent, as the oracle does."""
    terms, fold, _ = prepare(synthetic)
    query = heavy_query(fold, terms, 150)
    cs = compare(terms, fold, query, max_antecedent_tags=20)
    assert cs.mask.sum() > 0


def test_a_heavily_tagged_training_object_is_mined_through_its_most_frequent_tags(synthetic):
    terms, fold, queries = prepare(synthetic, n_queries=15)
    counts = np.bincount(fold.train_tags.values, minlength=terms.n_terms)
    heavy = np.flatnonzero(counts > 0)[:300]  # one D object tagged with 300 tags
    assert len(heavy) == 300
    rows = [t.tolist() for t in fold.train_tags]
    rows[0] = heavy.tolist()
    fold = dataclasses.replace(fold, train_tags=Ragged.from_lists(rows))
    generator = LatreCandidates(max_rule_candidates=None, device="cpu", max_train_tags=12)
    generator.fit(fold.train_objects, fold.train_tags, terms)
    uncapped = LatreCandidates(max_rule_candidates=None, device="cpu", max_train_tags=None)
    uncapped.fit(fold.train_objects, fold.train_tags, terms)
    dropped = len(uncapped.rules.rule_cols) - len(generator.rules.rule_cols)
    assert dropped > 300 * 299 // 2  # pairs dropped
    compare(terms, fold, queries, max_train_tags=12)


def test_stability_formula_by_hand():
    # k = 2: f = 1 -> 2 / (2 + |2 - 0|) = 0.5; f = e^2 -> 1; f = e^4 -> 2 / (2 + 2) = 0.5
    f = torch.tensor([0.0, 1.0, float(np.e ** 2), float(np.e ** 4)])
    torch.testing.assert_close(stability(f, 2.0), torch.tensor([0.0, 0.5, 1.0, 0.5]))


@pytest.mark.parametrize("loader", ["load_lastfm", "load_movielens_2k"])
def test_batched_features_equal_the_reference_on_real_data(data_dir, loader):
    from tagtorch.data.loaders import hetrec

    folksonomy = TextProcessor(cache=False).apply(getattr(hetrec, loader)(data_dir))
    terms, fold, queries = prepare(folksonomy, n_queries=25)
    cs = compare(terms, fold, queries)
    assert cs.mask.sum() > 100
