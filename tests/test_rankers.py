import pytest
import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.rankers import latre
from tagtorch.rankers.base import Ranker
from tagtorch.rankers.latre import LatreWTS
from tagtorch.rankers.single_feature import FeatureRanker

NAMES = ("sum_l", "wts")


def toy_lists() -> CandidateSet:
    """Two objects; rule evidence (sum_l) and text evidence (wts) disagree.

    Object 0: the relevant tag has the lower Sum but the highest wTS.
    Object 1: the relevant tag has the higher Sum and no wTS.
    """
    features = torch.tensor([
        [[1.0, 0.0], [0.6, 2.0], [0.9, 0.0]],   # relevant: candidate 1
        [[0.8, 0.0], [0.3, 1.0], [0.0, 0.0]],   # relevant: candidate 0
    ])
    labels = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    return CandidateSet(objects=torch.tensor([0, 1]), tags=torch.tensor([[1, 2, 3], [4, 5, -1]]),
                        features=features, labels=labels, mask=mask,
                        n_relevant=torch.tensor([1, 1]), feature_names=NAMES)


def test_latre_wts_combines_sum_and_wts():
    lists = toy_lists()
    scores = LatreWTS(alpha=0.25).fit(lists).score(lists)
    # 0.25 * sum_l + 0.75 * wts
    expected = torch.tensor([[0.25, 1.65, 0.225], [0.2, 0.825, 0.0]])
    torch.testing.assert_close(scores, expected)


@pytest.mark.parametrize("batch", [16384, 1])
def test_alpha_is_tuned_on_the_training_lists(batch, monkeypatch):
    monkeypatch.setattr(latre, "TUNING_BATCH", batch)  # 1: each list's NDCG apart
    lists = toy_lists()
    # By hand: object 0 needs 0.6a + 2(1-a) > a, i.e. a < 5/7 ~ 0.714;
    # object 1 needs 0.8a > 0.3a + (1-a), i.e. a > 2/3 ~ 0.667. Only a = 0.70 of the grid
    # (step 0.05) ranks both relevant tags first.
    ranker = LatreWTS().fit(lists)
    assert ranker.alpha == pytest.approx(0.70)
    fixed = LatreWTS(alpha=0.9).fit(lists)
    assert fixed.alpha == 0.9


def test_rankers_save_and_load_to_identical_scores(tmp_path):
    lists = toy_lists()
    for ranker in (LatreWTS().fit(lists), FeatureRanker("sum_l").fit(lists)):
        assert isinstance(ranker, Ranker)
        path = tmp_path / type(ranker).__name__
        ranker.save(path)
        again = type(ranker).load(path)
        torch.testing.assert_close(again.score(lists), ranker.score(lists))


def test_errors():
    with pytest.raises(ValueError, match="alpha"):
        LatreWTS(alpha=1.5)
    with pytest.raises(RuntimeError, match="fit"):
        LatreWTS().score(toy_lists())
    with pytest.raises(KeyError, match="no feature"):
        FeatureRanker("vote").fit(toy_lists())
