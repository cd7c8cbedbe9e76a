"""The extended candidate set (ours): tag embeddings, per-source features, gold never read, and
two candidate sets compared in one protocol run; each against a plain recomputation."""

from __future__ import annotations

import dataclasses
import math
from functools import partial

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

from tagtorch.candidates.embeddings import EmbeddingTags, ppmi
from tagtorch.candidates.latre import FEATURE_NAMES, LatreCandidates
from tagtorch.data.splits import TagQueries, tag_recommendation_folds
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor
from tagtorch.evaluation.tag_recommendation import TagRecommendationProtocol
from tagtorch.rankers.latre import LatreWTS
from tagtorch.rankers.trees import RandomForestRanker


def plain_ppmi(counts: np.ndarray, alpha: float) -> np.ndarray:
    """PPMI with smoothed contexts, entry by entry with Python floats."""
    n = len(counts)
    total = sum(counts[a, b] for a in range(n) for b in range(n))
    row = [sum(counts[a, b] for b in range(n)) / total for a in range(n)]
    col = [sum(counts[a, b] for a in range(n)) ** alpha for b in range(n)]
    col = [c / sum(col) for c in col]
    out = np.zeros((n, n))
    for a in range(n):
        for b in range(n):
            if counts[a, b] > 0:
                out[a, b] = max(0.0, math.log(counts[a, b] / total / (row[a] * col[b])))
    return out


def test_ppmi_matches_a_plain_computation():
    rng = np.random.default_rng(3)
    upper = np.triu(rng.integers(0, 4, (12, 12)) * (rng.random((12, 12)) < 0.5), 1)
    counts = (upper + upper.T).astype(float)
    for alpha in (1.0, 0.75):
        got = ppmi(sp.csr_matrix(counts), alpha).toarray()
        np.testing.assert_allclose(got, plain_ppmi(counts, alpha), rtol=1e-10, atol=1e-12)


def test_embedding_scores_match_an_exact_svd(with_profiles):
    """Rank r with r + 10 >= the tags in use: the randomized SVD spans the whole space, so it
    equals numpy's exact SVD truncated to r (up to signs, which cosines do not see)."""
    fold, terms, _ = with_profiles
    used = np.unique(fold.train_tags.values)
    rank = len(used) - 5
    source = EmbeddingTags(rank=rank, top=10_000).fit(fold.train_objects, fold.train_tags,
                                                      terms)
    got = source.scores(fold.test.objects, fold.test.input_tags).toarray()
    # the reference: co-occurrence by set intersections, PPMI by loops, numpy's SVD
    sets = [set(fold.train_tags[i].tolist()) for i in range(len(fold.train_tags))]
    index = {t: i for i, t in enumerate(used)}
    counts = np.zeros((len(used), len(used)))
    for tags in sets:
        for a in tags:
            for b in tags:
                if a != b:
                    counts[index[a], index[b]] += 1
    matrix = plain_ppmi(counts, 0.75)
    live = matrix.any(1)
    u, s, _ = np.linalg.svd(matrix[live][:, live])
    vectors = np.zeros((terms.n_terms, rank))
    vectors[used[live]] = u[:, :rank] * np.sqrt(s[:rank])
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-300)
    for i in range(len(fold.test)):
        given = fold.test.input_tags[i].tolist()
        query = vectors[given].sum(0)
        want = np.maximum(vectors @ query / max(np.linalg.norm(query), 1e-300), 0.0)
        want[given] = 0.0
        np.testing.assert_allclose(got[i], want, atol=1e-5)
    assert (got > 0).any(1).mean() > 0.9  # an object whose input tags are all new has none


def test_embeddings_keep_their_top_scores_and_check_settings(with_profiles):
    fold, terms, _ = with_profiles
    source = EmbeddingTags(rank=16, top=7).fit(fold.train_objects, fold.train_tags, terms)
    scores = source.scores(fold.test.objects, fold.test.input_tags)
    assert int(np.diff(scores.indptr).max()) <= 7
    assert float(scores.max()) <= 1.0 + 1e-6
    with pytest.raises(ValueError, match="embeddings"):
        EmbeddingTags(rank=0)
    with pytest.raises(RuntimeError, match="fit"):
        EmbeddingTags().scores(np.zeros(0), fold.test.input_tags)


EXTENDED = {"neighbours": {"k": 20, "n_candidates": 15},
            "profile_neighbours": {"k": 10, "n_candidates": 10},
            "embeddings": {"rank": 16, "n_candidates": 10}}


def test_source_features_match_a_plain_recomputation(with_profiles):
    """rr_s, agreement and rrf from the candidates' own scores, ranked here with sorted()."""
    fold, terms, _ = with_profiles
    generator = LatreCandidates(device="cpu", chunk_size=64, source_features=True, **EXTENDED)
    cs = generator.fit(fold.train_objects, fold.train_tags, terms)(fold.test)
    sources = {"rules": "sum_l", "knn": "knn", "knn_profile": "knn_profile", "emb": "emb"}
    assert cs.feature_names == (*FEATURE_NAMES, "knn", "knn_profile", "emb",
                                *(f"rr_{s}" for s in sources), "agreement", "rrf")
    for i in range(len(cs)):
        real = cs.mask[i].nonzero().flatten().tolist()  # tag-code order: the ties' order
        agreement = {j: float(cs.feature("ts")[i, j] > 0) for j in real}
        fusion = dict.fromkeys(real, 0.0)
        for source, column in sources.items():
            score = cs.feature(column)[i]
            ranked = sorted((j for j in real if score[j] > 0), key=lambda j: -float(score[j]))
            rr = dict.fromkeys(real, 0.0)
            for rank, j in enumerate(ranked):
                rr[j] = 1.0 / (1 + rank)
                fusion[j] += 1.0 / (60 + rank)
                agreement[j] += 1
            got = cs.feature(f"rr_{source}")[i]
            assert [float(got[j]) for j in real] == pytest.approx([rr[j] for j in real])
        assert [float(cs.feature("agreement")[i, j]) for j in real] == \
            [agreement[j] for j in real]
        assert [float(cs.feature("rrf")[i, j]) for j in real] == \
            pytest.approx([fusion[j] for j in real], rel=1e-6)


def test_the_extended_set_never_reads_a_gold_tag(with_profiles):
    """Changing the gold tags changes labels only, never candidates or features."""
    fold, terms, _ = with_profiles
    generator = LatreCandidates(device="cpu", source_features=True, max_candidates=20,
                                **EXTENDED).fit(fold.train_objects, fold.train_tags, terms)
    queries = fold.test
    first = generator(queries)
    shuffled = queries.gold_tags.take(np.random.default_rng(0).permutation(len(queries)))
    second = generator(TagQueries(queries.objects, queries.input_tags, shuffled))
    assert torch.equal(first.tags, second.tags)
    assert torch.equal(first.features, second.features)
    assert not torch.equal(first.labels, second.labels)


def test_two_candidate_sets_in_one_run_equal_two_runs(with_profiles):
    """Each method's figures equal a run with its candidate set alone."""
    *_, folksonomy = with_profiles
    protocol = TagRecommendationProtocol(folds=[0], device="cpu", online_objects=0,
                                         trec=False)
    paper = LatreCandidates(max_rule_candidates=20, device="cpu")
    extended = LatreCandidates(max_rule_candidates=20, device="cpu", source_features=True,
                               max_candidates=40, **EXTENDED)
    wts = partial(LatreWTS, alpha=0.9)
    rf = partial(RandomForestRanker, n_trees=20, n_leaves=31, seed=0, n_jobs=1)
    both = protocol.evaluate(folksonomy, paper, {"wts": wts, "rf": rf, "rf_ext": rf},
                             candidate_sets={"extended": extended},
                             method_candidates={"rf_ext": "extended"}).results
    alone = pd.concat([
        protocol.evaluate(folksonomy, paper, {"wts": wts, "rf": rf}).results,
        protocol.evaluate(folksonomy, extended, {"rf_ext": rf}).results])

    def table(frame: pd.DataFrame) -> pd.Series:
        return frame[~frame["metric"].str.contains("seconds|ms_")].set_index(
            ["method", "metric"])["value"].sort_index()

    assert len(table(both)) > 0
    pd.testing.assert_series_equal(table(both), table(alone), rtol=1e-6)
    recall = table(both).xs("candidate_recall", level="metric")
    assert recall["rf_ext"] != recall["rf"]
    with pytest.raises(ValueError, match="method_candidates"):
        protocol.evaluate(folksonomy, paper, {"wts": wts}, method_candidates={"wts": "nope"})


def test_fields_read_only_the_chosen_text_fields():
    """fields=[title] on title + description equals the generator on the titles alone."""
    raw = generate_folksonomy(n_objects=200, seed=4)
    both = TextProcessor(cache=False).apply(raw)
    titles = TextProcessor(cache=False).apply(
        dataclasses.replace(raw, texts=raw.texts[["title"]]))
    fold_both = tag_recommendation_folds(both, n_folds=5, seed=0)[0]
    fold_titles = tag_recommendation_folds(titles, n_folds=5, seed=0)[0]
    terms_both, terms_titles = TermIndex.from_folksonomy(both), TermIndex.from_folksonomy(titles)
    chosen = LatreCandidates(device="cpu", fields=["title"]).fit(
        fold_both.train_objects, fold_both.train_tags, terms_both)(fold_both.test)
    alone = LatreCandidates(device="cpu").fit(
        fold_titles.train_objects, fold_titles.train_tags, terms_titles)(fold_titles.test)
    words_both, words_titles = terms_both.vocabulary, terms_titles.vocabulary
    for i in range(len(chosen)):
        got = {words_both[int(t)]: chosen.features[i, j]
               for j, t in enumerate(chosen.tags[i]) if chosen.mask[i, j]}
        want = {words_titles[int(t)]: alone.features[i, j]
                for j, t in enumerate(alone.tags[i]) if alone.mask[i, j]}
        assert got.keys() == want.keys(), i
        for word, value in want.items():
            torch.testing.assert_close(got[word], value)
    with pytest.raises(ValueError, match="fields"):
        LatreCandidates(device="cpu", fields=["abstract"]).fit(
            fold_both.train_objects, fold_both.train_tags, terms_both)


def test_without_features_leaves_the_named_columns_out(with_profiles):
    fold, terms, _ = with_profiles
    cs = LatreCandidates(device="cpu", max_rule_candidates=10).fit(
        fold.train_objects, fold.train_tags, terms)(fold.test)
    left = cs.without_features(["tf", "sum_1"])
    assert left.feature_names == tuple(n for n in FEATURE_NAMES if n not in ("tf", "sum_1"))
    for name in left.feature_names:
        assert torch.equal(left.feature(name), cs.feature(name))
    with pytest.raises(KeyError, match="knn"):
        cs.without_features(["knn"])
