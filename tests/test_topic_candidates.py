"""LDA candidates and the ``p_lda`` feature (ours) beside the 13 LATRE features.

Checked against the unchanged LATRE generator (the 13 features of shared candidates must not
move) and against ``P(t | o) = θ_o · φ_t`` computed here with numpy from the model's ``φ`` and
the fold-in ``θ`` of each object's input tags.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tagtorch.candidates.latre import FEATURE_NAMES, LatreCandidates
from tagtorch.data.splits import TagQueries, tag_recommendation_folds
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor

LDA = {"n_topics": 8, "iterations": 30, "burn_in": 15, "seed": 2}


@pytest.fixture(scope="module")
def fold_and_terms():
    folksonomy = TextProcessor(cache=False).apply(generate_folksonomy(n_objects=300, seed=1))
    return tag_recommendation_folds(folksonomy, n_folds=5, seed=0)[0], \
        TermIndex.from_folksonomy(folksonomy)


def candidates(fold, terms, **topics):
    generator = LatreCandidates(device="cpu", chunk_size=64, topics=topics or None)
    generator.fit(fold.train_objects, fold.train_tags, terms)
    return generator, generator(fold.test)


def pairs(cs) -> dict[tuple[int, int], torch.Tensor]:
    rows, cols = torch.nonzero(cs.mask, as_tuple=True)
    return {(int(cs.objects[r]), int(cs.tags[r, c])): cs.features[r, c]
            for r, c in zip(rows.tolist(), cols.tolist(), strict=True)}


def test_feature_only_keeps_the_candidates_and_adds_p_lda(fold_and_terms):
    fold, terms = fold_and_terms
    _, base = candidates(fold, terms)
    generator, cs = candidates(fold, terms, lda=LDA, n_candidates=0, feature=True)
    assert cs.feature_names == (*FEATURE_NAMES, "p_lda")
    ours, theirs = pairs(cs), pairs(base)
    assert ours.keys() == theirs.keys()
    for key, value in theirs.items():
        assert torch.equal(ours[key][:13], value)
    # P(t | o) from phi and the fold-in theta of the object's input tags, chunk by chunk
    model = generator.topic_tags.model_
    queries = fold.test
    for start in range(0, len(queries), 64):
        rows = np.arange(start, min(start + 64, len(queries)))
        chunk = TagQueries(queries.objects[rows], queries.input_tags.take(rows),
                           queries.gold_tags.take(rows))
        theta = model.infer(chunk.input_tags, iterations=50, burn_in=25,
                            seed=LDA["seed"] * 1_000_003 + int(chunk.objects[0]))
        for i, obj in enumerate(chunk.objects):
            for (o, tag), value in ours.items():
                if o == obj:
                    expected = float(theta[i] @ model.phi_[:, tag])
                    assert float(value[13]) == pytest.approx(expected, rel=1e-4, abs=1e-7)


def test_lda_candidates_add_each_objects_most_probable_tags(fold_and_terms):
    fold, terms = fold_and_terms
    _, base = candidates(fold, terms)
    generator, cs = candidates(fold, terms, lda=LDA, n_candidates=15, feature=False)
    assert cs.feature_names == FEATURE_NAMES
    ours, theirs = pairs(cs), pairs(base)
    assert set(theirs) < set(ours)  # every LATRE candidate stays, new ones come
    for key, value in theirs.items():
        assert torch.equal(ours[key], value)  # and their features do not move
    model = generator.topic_tags.model_
    queries = fold.test
    first = min(64, len(queries))  # the first chunk
    theta = model.infer(queries.input_tags.take(np.arange(first)), iterations=50, burn_in=25,
                        seed=LDA["seed"] * 1_000_003 + int(queries.objects[0]))
    for i in range(first):
        scores = theta[i] @ model.phi_
        scores[queries.input_tags[i]] = -1
        best = np.argsort(-scores, kind="stable")[:15]
        obj = int(queries.objects[i])
        assert {(obj, int(t)) for t in best} <= set(ours)
    recall = float(cs.labels.sum() / cs.n_relevant.sum())
    assert recall >= float(base.labels.sum() / base.n_relevant.sum())


def test_topic_settings_are_checked(fold_and_terms):
    with pytest.raises(ValueError, match="n_candidates"):
        LatreCandidates(device="cpu", topics={"n_candidates": -1})
