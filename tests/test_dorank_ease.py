"""Do-Rank-EASE (ours): its prior is EASE^R's ranking, and early stopping keeps the best epoch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.itemrec.base import dcg_at_k, score_queries
from tagtorch.itemrec.data import ItemRecData, TagProfile, item_recommendation_data
from tagtorch.itemrec.dorank_ease import DoRankEASE
from tagtorch.itemrec.ease import EASE


@pytest.fixture(scope="module")
def per_user() -> ItemRecData:
    return item_recommendation_data(generate_folksonomy(n_objects=200, seed=1), p=1, seed=0,
                                    query="user", aggregate="profile")


def test_before_training_it_ranks_as_ease_scaled_to_unit_spread(per_user):
    """No factors (init_std 0) and no step: ``a e(u, i)`` with ``a = 1 / std(e)``, ``e`` from
    an EASE^R fitted on its own."""
    data = per_user
    model = DoRankEASE(max_epochs=0, init_std=0.0, tags=True, regularization=5.0).fit(data)
    ease = EASE(tags=True, regularization=5.0).fit(data)
    profile = TagProfile.from_triples(data.train, data.n_users, data.n_tags)
    users = torch.arange(data.n_users)
    prior = ease.profile_scores(users, profile)
    scale = 1.0 / float(prior.std())
    torch.testing.assert_close(model.profile_scores(users, profile), scale * prior)
    tags = torch.from_numpy(data.train[:5, 2])
    torch.testing.assert_close(model.score(users[:5], tags), scale * ease.score(users[:5], tags))
    assert model.best_epoch_ == 0 and len(model.history_) == 1


@pytest.mark.parametrize("prior", [True, False])
def test_the_kept_model_is_the_best_validation_epoch(per_user, prior):
    data = per_user
    model = DoRankEASE(rank=8, lr=0.05, max_epochs=6, patience=2, prior=prior, tags=True,
                       regularization=5.0).fit(data)
    curve = [h["val_dcg@10"] for h in model.history_]
    assert model.best_epoch_ == int(np.argmax(curve))
    total, count = 0.0, 0  # the kept model's validation DCG@10, recomputed
    for _, scores, labels, mask in score_queries(model, data.val_queries, data.n_items,
                                                 data.n_tags):
        total += float(dcg_at_k(scores, labels, mask, 10).sum())
        count += len(scores)
    assert total / count == pytest.approx(max(curve), rel=1e-5)
    if not prior:
        assert float(model.prior_scale) == 0.0
    assert len(curve) >= 2  # at least one epoch trained after the prior's


def test_settings_are_checked():
    with pytest.raises(ValueError, match="rank must be >= 1"):
        DoRankEASE(rank=0)
    with pytest.raises(ValueError, match="temperature and lr must be > 0"):
        DoRankEASE(lr=0.0)
