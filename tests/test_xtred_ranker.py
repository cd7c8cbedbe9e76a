"""The xTReD ranker (rankers/xtred.py, XTReD): a base ranker's scores re-ranked by Algorithm 1
(checked against the plain per-object implementation of test_xtred.py on a hand-computed base
score), λ tuned on V by the relevance rule (against a plain NDCG@5 written here), topics
required, save and load with the base ranker in a subfolder."""

from __future__ import annotations

import json
import math

import pytest
import torch
from test_xtred import ref_rank, ref_xtred

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.candidates.latre import LatreCandidates
from tagtorch.data.splits import tag_recommendation_folds
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.errors import UnreadableFileError
from tagtorch.rankers.xtred import XTReD
from tagtorch.storage import MANIFEST_FILE

BASE = {"_target_": "tagtorch.rankers.latre.LatreWTS", "alpha": 0.8}


@pytest.fixture(scope="module")
def lists() -> tuple[CandidateSet, CandidateSet]:
    folksonomy = generate_folksonomy(n_objects=200, n_categories=6, seed=3)
    fold = tag_recommendation_folds(folksonomy, n_folds=5, seed=0)[0]
    generator = LatreCandidates(max_rule_candidates=25, device="cpu",
                                diversity={"source": "categories"}).fit(
        fold.train_objects, fold.train_tags, TermIndex.from_folksonomy(folksonomy))
    return generator(fold.val), generator(fold.test)


def base_scores(batch: CandidateSet) -> torch.Tensor:
    """LATRE+wTS with α = 0.8, by its formula."""
    return 0.8 * batch.feature("sum_l") + 0.2 * batch.feature("wts")


def ranking(scores: torch.Tensor, mask: torch.Tensor, b: int) -> list[int]:
    return ref_rank(scores[b].tolist(), mask[b].tolist())


def ref_ndcg5(ranked: list[int], labels: list[float], n_relevant: int) -> float:
    dcg = sum(labels[j] / math.log2(i + 2) for i, j in enumerate(ranked[:5]))
    ideal = sum(1 / math.log2(i + 2) for i in range(min(5, n_relevant)))
    return dcg / ideal if ideal else math.nan


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_scores_rank_as_algorithm_1_over_the_base_ranking(lists, lam):
    train, test = lists
    ranker = XTReD(base=BASE, lam=lam, tau=6).fit(train)
    assert ranker.lam_ == lam
    scores = ranker.score(test)
    base = base_scores(test)
    for b in range(len(test)):
        want = ref_xtred(base[b].tolist(), test.mask[b].tolist(),
                         test.tag_topics[b].double().tolist(),
                         test.object_topics[b].double().tolist(), lam, tau=6)
        assert ranking(scores, test.mask, b) == want, b
        if lam == 0.0:
            assert want == ranking(base, test.mask, b)


def test_lambda_is_the_largest_of_the_grid_within_3_percent_of_the_base_on_v(lists):
    train, _ = lists
    grid = [0.0, 0.25, 0.5, 0.75, 1.0]
    ranker = XTReD(base=BASE, lam_grid=grid, tau=8).fit(train)
    base = base_scores(train)

    def mean_ndcg(lam: float) -> float:
        values = []
        for b in range(len(train)):
            order = ref_xtred(base[b].tolist(), train.mask[b].tolist(),
                              train.tag_topics[b].double().tolist(),
                              train.object_topics[b].double().tolist(), lam, tau=8)
            value = ref_ndcg5(order, train.labels[b].tolist(), int(train.n_relevant[b]))
            if not math.isnan(value):
                values.append(value)
        return sum(values) / len(values)

    values = {lam: mean_ndcg(lam) for lam in grid}
    assert [lam for lam, _, _ in ranker.tuning_] == grid
    assert [v for _, v, _ in ranker.tuning_] == pytest.approx([values[lam] for lam in grid])
    want = max(lam for lam in grid if values[lam] >= 0.97 * values[0.0] - 1e-12)
    assert ranker.lam_ == want
    strict = XTReD(base=BASE, lam_grid=grid, max_loss=0.0, tau=8).fit(train)
    assert strict.lam_ == max(lam for lam in grid if values[lam] >= values[0.0] - 1e-12)


def test_topics_are_required_and_settings_checked(lists):
    train, test = lists
    bare = CandidateSet(**(test.state() | {"tag_topics": None, "object_topics": None}))
    ranker = XTReD(base=BASE).fit(train)
    with pytest.raises(ValueError, match="latre_diverse"):
        ranker.score(bare)
    with pytest.raises(ValueError, match="latre_diverse"):
        XTReD(base=BASE).fit(CandidateSet(**(train.state() | {"tag_topics": None,
                                                              "object_topics": None})))
    for bad in ({"_target_": "os.system"}, {"alpha": 1.0},
                {"_target_": "tagtorch.rankers.xtred.XTReD"}):
        with pytest.raises(ValueError, match="base"):
            XTReD(base=bad)
    with pytest.raises(ValueError, match="lam"):
        XTReD(base=BASE, lam=1.5)
    with pytest.raises(ValueError, match="tau"):
        XTReD(base=BASE, tau=0)


def test_save_and_load_keep_the_base_in_a_subfolder_checked_by_digest(lists, tmp_path):
    train, test = lists
    ranker = XTReD(base=BASE, lam_grid=[0.0, 1.0], tau=5).fit(train)
    ranker.save(tmp_path / "x")
    manifest = json.loads((tmp_path / "x" / MANIFEST_FILE).read_text())
    assert list(manifest["files"]) == ["base"] and manifest["files"]["base"]["folder"]
    assert manifest["lam"] == ranker.lam_
    again = XTReD.load(tmp_path / "x")
    assert again.lam_ == ranker.lam_ and again.tuning_ == ranker.tuning_
    assert torch.equal(again.score(test), ranker.score(test))
    base_manifest = tmp_path / "x" / "base" / MANIFEST_FILE
    base_manifest.write_text(base_manifest.read_text().replace('"alpha": 0.8', '"alpha": 0.1'))
    with pytest.raises(UnreadableFileError, match="altered"):
        XTReD.load(tmp_path / "x")
