"""Our deep tag ranker (rankers/tag_context.py) and the input tags the candidate lists carry.

The references are independent of the code: plain Python for the vocabulary and for the input
tags a LATRE generator attaches, and for what the ranker must learn, lists whose features are
identical for every candidate (so that LightGBM's λ-MART, run on the same lists, is at chance)
while the gold tag is fixed by the object's input tag: only a ranker that reads the tags can
rank it first.
"""

from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.candidates.latre import LatreCandidates
from tagtorch.data.ragged import Ragged
from tagtorch.data.splits import tag_recommendation_folds
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.metrics.functional import ranking_metrics
from tagtorch.rankers.base import fit_ranker, load_ranker
from tagtorch.rankers.tag_context import TagContextNet, TagContextRanker, TagVocabulary
from tagtorch.rankers.trees import LambdaMARTRanker

QUIET = {"enable_progress_bar": False, "logger": False, "enable_model_summary": False,
         "accelerator": "cpu"}


def test_vocabulary_maps_known_codes_to_rows_and_others_to_zero():
    codes = [40, 3, 17, 3]
    vocabulary = TagVocabulary(torch.tensor(codes))
    rows = {code: i + 1 for i, code in enumerate(sorted(set(codes)))}
    query = torch.tensor([[17, 5, -1], [40, 3, 1000]])
    expected = [[rows.get(int(c), 0) for c in row] for row in query]
    assert vocabulary(query).tolist() == expected
    assert TagVocabulary(torch.tensor([], dtype=torch.long))(query).tolist() == [[0] * 3] * 2


def test_latre_lists_carry_the_most_frequent_input_tags():
    """``input_tags``: each object's ``k`` input tags most frequent in D (ties by code)."""
    folksonomy = generate_folksonomy(n_objects=200, seed=1)
    fold = tag_recommendation_folds(folksonomy, n_folds=5, seed=0)[0]
    terms = TermIndex.from_folksonomy(folksonomy)
    generator = LatreCandidates(max_rule_candidates=20, device="cpu", input_tags=3,
                                chunk_size=16).fit(fold.train_objects, fold.train_tags, terms)
    lists = generator(fold.val)
    counts = Counter(int(t) for t in fold.train_tags.values)
    assert lists.input_tags is not None
    for row, given in enumerate(fold.val.input_tags):
        kept = sorted(sorted(given.tolist(), key=lambda t: (-counts[t], t))[:3])
        assert lists.input_tags[row].tolist() == kept + [-1] * (lists.input_tags.shape[1] - 3
                                                                + (3 - len(kept)))
    off = LatreCandidates(max_rule_candidates=20, device="cpu", input_tags=0).fit(
        fold.train_objects, fold.train_tags, terms)(fold.val)
    assert off.input_tags is None
    assert torch.equal(off.features, lists.features) and torch.equal(off.tags, lists.tags)
    with pytest.raises(ValueError, match="input_tags must be an integer >= 0"):
        LatreCandidates(input_tags=-1)


def test_concat_pads_input_tags_to_the_widest_part():
    def part(inputs: list[int]) -> CandidateSet:
        lists = CandidateSet.from_flat(
            torch.tensor([0]), torch.tensor([0]), torch.tensor([1]), torch.ones(1, 1),
            torch.tensor([1.0]), torch.tensor([1]), ("f",))
        return CandidateSet(**{**lists.state(), "input_tags": torch.tensor([inputs])})
    merged = CandidateSet.concat([part([4]), part([5, 6, 7])])
    assert merged.input_tags is not None
    assert merged.input_tags.tolist() == [[4, -1, -1], [5, 6, 7]]


def _identity_lists(n_objects: int, seed: int) -> CandidateSet:
    """Lists where only the tags say which candidate is gold.

    Each object has one input tag ``a`` (of 20); its candidates are 10 tags, among them
    ``partner(a) = a + 100``; every candidate has the same two features. The gold tag is the
    partner.
    """
    rng = np.random.default_rng(seed)
    inputs = rng.integers(0, 20, n_objects)
    tags = np.stack([rng.permutation(np.r_[a + 100, rng.choice(
        [t for t in range(100, 120) if t != a + 100], 9, replace=False)]) for a in inputs])
    labels = (tags == inputs[:, None] + 100).astype(np.float32)
    b, length = tags.shape
    return CandidateSet(objects=torch.arange(b), tags=torch.as_tensor(tags),
                        features=torch.ones(b, length, 2), labels=torch.as_tensor(labels),
                        mask=torch.ones(b, length, dtype=torch.bool),
                        n_relevant=torch.ones(b, dtype=torch.long), feature_names=("a", "b"),
                        input_tags=torch.as_tensor(inputs[:, None]))


def _ndcg(scores: torch.Tensor, lists: CandidateSet) -> float:
    values = ranking_metrics(scores, lists.labels, lists.mask, n_relevant=lists.n_relevant,
                             ks=[1], metrics=["ndcg"])
    return float(values["ndcg@1"].mean())


def test_it_learns_from_the_tags_what_trees_cannot(tmp_path):
    train, test = _identity_lists(400, seed=0), _identity_lists(200, seed=1)
    trees = LambdaMARTRanker(n_iterations=20, n_jobs=1).fit(train)
    assert _ndcg(trees.score(test), test) < 0.25  # the features say nothing: chance is 0.1
    ranker = TagContextRanker(
        min_tag_count=1, attention_layers=0, dropout=0.0, input_noise=0.0, patience=None,
        batch_size=16, optimizer=functools.partial(torch.optim.AdamW, lr=1e-2),
        trainer=functools.partial(pl.Trainer, max_epochs=12, **QUIET))
    ranker.fit(train)
    scores = ranker.score(test)
    assert _ndcg(scores, test) > 0.9
    ranker.save(tmp_path / "saved")
    assert torch.allclose(load_ranker(tmp_path / "saved").score(test), scores)


def test_pretraining_on_d_learns_which_tags_go_together():
    """Tags come in pairs ``(2i, 2i + 1)`` in D; after pre-training, the completion of an
    object holding ``2i`` ranks ``2i + 1`` first among all tags."""
    pairs = [[2 * i, 2 * i + 1] for i in range(30)] * 20
    tag_sets = Ragged.from_lists(pairs)
    lists = _identity_lists(50, seed=0)  # V: unused tags; the vocabulary is D's
    ranker = TagContextRanker(min_tag_count=1, pretrain_epochs=30, dropout=0.0,
                              trainer=functools.partial(pl.Trainer, max_epochs=1, **QUIET))
    fit_ranker(ranker, lists, tag_sets)
    assert ranker.vocabulary is not None and isinstance(ranker.scorer, TagContextNet)
    given = ranker.vocabulary(torch.arange(0, 60, 2)[:, None])
    with torch.no_grad():
        best = ranker.scorer.completion_logits(given).argmax(-1)
    partners = ranker.vocabulary(torch.arange(1, 60, 2))
    assert (best == partners).float().mean() > 0.9


def test_lists_without_input_tags_are_refused_in_one_line():
    lists = _identity_lists(20, seed=0)
    bare = CandidateSet(**{**lists.state(), "input_tags": None})
    with pytest.raises(ValueError, match=r"reads the candidate lists' \['input_tags'\]"):
        TagContextRanker().fit(bare)
    with pytest.raises(ValueError, match="pretrain_epochs must be >= 0"):
        TagContextRanker(pretrain_epochs=-1)
    with pytest.raises(ValueError, match="use_input_tags needs use_tags"):
        TagContextRanker(use_tags=False, use_input_tags=True)


def test_a_recommender_learns_its_vocabulary_from_d_and_serves_the_same_after_loading(tmp_path):
    """TagRecommender.fit hands D's tag sets to the ranker (fit_ranker); the artifact reloads
    to the same recommendations, the tag-context network read back from safe tensors."""
    from conftest import CANDIDATES

    from tagtorch.data.text import TextProcessor
    from tagtorch.serving.tags import TagRecommender

    raw = generate_folksonomy(n_objects=300, seed=4)
    processor = TextProcessor(cache=False)
    folksonomy = processor.apply(raw)
    ranker = TagContextRanker(pretrain_epochs=2, min_tag_count=1,
                              trainer=functools.partial(pl.Trainer, max_epochs=2, **QUIET))
    recommender = TagRecommender.fit(folksonomy, processor, LatreCandidates(**CANDIDATES),
                                     ranker, val_fraction=0.25, seed=3)
    d_tags = set(folksonomy.object_tags().take(recommender.train_objects).values.tolist())
    assert ranker.vocabulary is not None
    assert set(ranker.vocabulary.codes.tolist()) >= d_tags  # D's tags, not only V's
    folder = recommender.save(tmp_path / "artifact")
    loaded = TagRecommender.load(folder)
    tags = [str(folksonomy.tags[t]) for t in folksonomy.object_tags()[0][:2]]
    assert loaded.recommend_tags(tags=tags, k=5) == recommender.recommend_tags(tags=tags, k=5)
