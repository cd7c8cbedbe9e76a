"""Per-fold (nested) tuning of the tag-recommendation protocol: chosen on the fold's V alone.

The references are plain recomputations: each grid point's generator fitted on D and its
candidate recall on V counted by hand, and each ranker setting learned on V's first part and
scored by NDCG@5 on the held-out part with the metric library's own function. A run whose test
objects' gold tags are scrambled must choose exactly the same settings: tuning never reads T.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hydra.utils import instantiate

from tagtorch.data.ragged import Ragged
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor
from tagtorch.evaluation.tag_recommendation import TagRecommendationProtocol
from tagtorch.metrics.functional import ndcg_at_k

CANDIDATES = {"_target_": "tagtorch.candidates.latre.LatreCandidates",
              "max_rule_candidates": 20, "device": "cpu"}
WTS = {"_target_": "tagtorch.rankers.latre.LatreWTS", "alpha": 0.5}
RULES = [2, 8, 30]
ALPHAS = [0.0, 0.5, 1.0]


@pytest.fixture(scope="module")
def folksonomy():
    raw = generate_folksonomy(n_objects=500, n_users=150, n_tags=300, seed=3)
    return TextProcessor(cache=False).apply(raw)


def _protocol(**settings) -> TagRecommendationProtocol:
    return TagRecommendationProtocol(
        folds=[0, 1], device="cpu", online_objects=0, trec=False,
        tune={"wts": {"alpha": ALPHAS}},
        tune_candidates={"candidates": {"max_rule_candidates": RULES}}, **settings)


def _run(protocol: TagRecommendationProtocol, folksonomy, out: Path) -> pd.DataFrame:
    protocol.evaluate(folksonomy, instantiate(CANDIDATES), {"wts": partial(instantiate, WTS)},
                      output_dir=out, ranker_configs={"wts": WTS})
    return pd.read_csv(out / "tuning.csv")


def _reference_recall(folksonomy, fold) -> list[float]:
    """Candidate recall on V of each grid point, counted from the candidate lists."""
    terms = TermIndex.from_folksonomy(folksonomy)
    recalls = []
    for rules in RULES:
        generator = instantiate({**CANDIDATES, "max_rule_candidates": rules}).fit(
            fold.train_objects, fold.train_tags, terms)
        val = generator(fold.val)
        found = total = 0
        for row in range(len(val)):
            listed = set(val.tags[row][val.mask[row]].tolist())
            gold = set(fold.val.gold_tags[row].tolist())
            found, total = found + len(listed & gold), total + len(gold)
        recalls.append(found / total)
    return recalls


def test_candidate_and_ranker_settings_are_chosen_on_the_folds_own_v(folksonomy, tmp_path):
    protocol = _protocol()
    tuning = _run(protocol, folksonomy, tmp_path)
    for fold in protocol.splits(folksonomy)[:2]:
        sets = tuning[(tuning["method"] == "candidates") & (tuning["fold"] == fold.fold)]
        expected = _reference_recall(folksonomy, fold)
        assert np.allclose(sets["val_candidate_recall"], expected, atol=1e-6)
        assert sets["chosen"].tolist() == [i == int(np.argmax(expected))
                                            for i in range(len(RULES))]
        # the ranker: learned on V minus the held-out quarter, NDCG@5 on that quarter
        chosen_rules = RULES[int(np.argmax(expected))]
        generator = instantiate({**CANDIDATES, "max_rule_candidates": chosen_rules}).fit(
            fold.train_objects, fold.train_tags, TermIndex.from_folksonomy(folksonomy))
        val = generator(fold.val)
        order = np.random.default_rng([protocol.seed, fold.fold]).permutation(len(val))
        n_held = round(0.25 * len(val))
        learn = val[torch.from_numpy(np.sort(order[n_held:]))]
        held = val[torch.from_numpy(np.sort(order[:n_held]))]
        scores = []
        for alpha in ALPHAS:
            ranker = instantiate({**WTS, "alpha": alpha})
            ranker.fit(learn, None)
            ndcg = ndcg_at_k(ranker.score(held), held.labels, held.mask, 5,
                             n_relevant=held.n_relevant)
            scores.append(float(torch.nanmean(ndcg)))
        ranks = tuning[(tuning["method"] == "wts") & (tuning["fold"] == fold.fold)]
        assert np.allclose(ranks["val_ndcg@5"], scores, atol=1e-6)
        assert ranks["chosen"].tolist() == [i == int(np.argmax(scores))
                                             for i in range(len(ALPHAS))]
    report = (tmp_path / "report.md").read_text()
    assert "never on a reported test object" in report and "wts fold 1" in report


def _scramble_test_gold(fold):
    """The fold with T's gold tags replaced by other tags (V and D untouched)."""
    gold = fold.test.gold_tags
    shifted = Ragged.from_lists([[int(t) + 1 for t in gold[i]] for i in range(len(gold))])
    return replace(fold, test=replace(fold.test, gold_tags=shifted))


def test_choices_do_not_depend_on_the_test_objects(folksonomy, tmp_path, monkeypatch):
    honest = _run(_protocol(), folksonomy, tmp_path / "a")
    splits = TagRecommendationProtocol.splits
    monkeypatch.setattr(TagRecommendationProtocol, "splits", lambda self, data: [
        _scramble_test_gold(fold) for fold in splits(self, data)])
    scrambled = _run(_protocol(), folksonomy, tmp_path / "b")
    pd.testing.assert_frame_equal(honest, scrambled)
    before = pd.read_csv(tmp_path / "a" / "results.csv")
    after = pd.read_csv(tmp_path / "b" / "results.csv")
    ndcg = [frame[frame["metric"] == "ndcg@5"]["value"].to_numpy() for frame in (before, after)]
    assert not np.allclose(*ndcg)  # T itself did change


def test_bad_grids_are_refused(folksonomy):
    with pytest.raises(ValueError, match="unknown validation metric"):
        TagRecommendationProtocol(tune_metric="ndcg")
    with pytest.raises(ValueError, match="non-empty list"):
        TagRecommendationProtocol(tune={"wts": {"alpha": []}})
    protocol = TagRecommendationProtocol(folds=[0], device="cpu", tune={"rf": {"n": [1]}})
    with pytest.raises(ValueError, match=r"tune\.rf"):
        protocol.evaluate(folksonomy, instantiate(CANDIDATES),
                          {"wts": partial(instantiate, WTS)}, ranker_configs={"wts": WTS})


def _plain_dcg10(scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> list[float]:
    """DCG@10 per query, linear gain, ties in item order: a plain loop."""
    values = []
    for row in range(len(scores)):
        items = [i for i in range(scores.shape[1]) if mask[row, i]]
        items.sort(key=lambda i: -float(scores[row, i]))  # stable: ties keep item order
        values.append(sum(float(labels[row, i]) / np.log2(rank + 2)
                          for rank, i in enumerate(items[:10])))
    return values


def test_item_settings_are_chosen_on_each_seeds_own_validation_posts(tmp_path):
    from omegaconf import OmegaConf

    from tagtorch.evaluation.item_recommendation import ItemRecommendationTask
    from tagtorch.itemrec.base import score_queries
    from tests.test_itemrec import toy_folksonomy

    betas = [0.0, 0.5, 1.0]
    node = {"_target_": "tagtorch.itemrec.baselines.TwoDimensional", "beta": 0.5}
    task = ItemRecommendationTask(seeds=[0, 1], p=1, trec=False,
                                  tune={"two_dimensional": {"beta": betas}})
    folksonomy = toy_folksonomy()
    task.run(folksonomy, OmegaConf.create({"model": {"two_dimensional": node}}), tmp_path)
    tuning = pd.read_csv(tmp_path / "tuning.csv")
    results = pd.read_csv(tmp_path / "results.csv")
    for seed in (0, 1):
        data = task.seed_data(folksonomy, seed)
        expected = []
        for beta in betas:
            model = instantiate({**node, "beta": beta}).fit(data)
            per_query = [value for _, scores, labels, mask in score_queries(
                model, data.val_queries, data.n_items, data.n_tags, 64)
                for value in _plain_dcg10(scores, labels, mask)]
            expected.append(float(np.mean(per_query)))
        rows = tuning[tuning["seed"] == seed]
        assert np.allclose(rows["val_dcg@10"], expected, atol=1e-6)
        assert rows["chosen"].tolist() == [i == int(np.argmax(expected))
                                           for i in range(len(betas))]
        reported = results[(results["fold"] == seed) & (results["metric"] == "val_dcg@10")]
        assert reported["value"].item() == pytest.approx(max(expected), abs=1e-6)
    assert "seed 1" in (tmp_path / "report.md").read_text()
