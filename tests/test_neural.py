"""The neural rankers: normalization, scorer networks, training, early stopping, save/load."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import pytorch_lightning as pl
import torch

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.losses import LOSSES
from tagtorch.metrics.functional import ndcg_at_k
from tagtorch.rankers.base import Ranker
from tagtorch.rankers.neural import FeatureNormalizer, ListScorer, NeuralRanker

NAMES = ("a", "b", "c", "d", "e")
CONF = Path(__file__).resolve().parents[1] / "tagtorch" / "conf"


def toy_lists(n_lists: int, seed: int, length: int = 20) -> CandidateSet:
    """Lists whose 3 relevant candidates are the top 3 of a hidden linear function.

    Features are exponentiated so that they are heavy-tailed positive counts, as the LATRE
    features are; list lengths vary, so there is padding.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_lists, length, len(NAMES), generator=g)
    lengths = torch.randint(8, length + 1, (n_lists,), generator=g)
    mask = torch.arange(length) < lengths[:, None]
    utility = x @ torch.tensor([2.0, -1.0, 0.5, 0.0, 1.0])
    utility = utility.masked_fill(~mask, -torch.inf)
    top = utility.topk(3, dim=1).indices
    labels = torch.zeros(n_lists, length).scatter_(1, top, 1.0)
    features = torch.exp(x).masked_fill(~mask[..., None], 0.0)
    return CandidateSet(objects=torch.arange(n_lists), tags=torch.where(mask, 0, -1),
                        features=features, labels=labels, mask=mask,
                        n_relevant=labels.sum(1).long(), feature_names=NAMES)


def cpu_trainer(max_epochs: int = 30) -> functools.partial:
    return functools.partial(pl.Trainer, max_epochs=max_epochs, accelerator="cpu", devices=1,
                             enable_progress_bar=False)


def test_log1p_zscore_matches_a_numpy_reference():
    lists = toy_lists(10, seed=1)
    norm = FeatureNormalizer(len(NAMES), "log1p_zscore").fit(lists.features, lists.mask)
    real = lists.features[lists.mask].numpy().astype(np.float64)
    squashed = np.log1p(real)  # the features are positive
    expected = (squashed - squashed.mean(0)) / squashed.std(0)
    out = norm(lists.features, lists.mask)
    np.testing.assert_allclose(out[lists.mask].numpy(), expected, rtol=1e-4, atol=1e-5)
    assert (out[~lists.mask] == 0).all()


def test_constant_feature_gets_unit_scale():
    features = torch.ones(2, 3, 1)
    norm = FeatureNormalizer(1, "zscore").fit(features, torch.ones(2, 3, dtype=torch.bool))
    assert norm.std.item() == 1.0
    assert (norm(features, torch.ones(2, 3, dtype=torch.bool)) == 0).all()


def test_linear_scorer_is_w_dot_x_plus_b():
    scorer = ListScorer(3, hidden=[])
    x = torch.randn(2, 4, 3)
    mask = torch.tensor([[True, True, True, False], [True, False, False, False]])
    w, b = scorer.out.weight.detach()[0], scorer.out.bias.detach()[0]
    expected = torch.where(mask, x @ w + b, 0.0)
    torch.testing.assert_close(scorer(x, mask).detach(), expected)


@pytest.mark.parametrize("kwargs", [
    {"hidden": [16]},
    {"hidden": [16, 8], "norm": "batch", "dropout": 0.2},
    {"hidden": [16], "norm": "layer", "attention_layers": 2, "attention_heads": 4},
])
def test_scorer_ignores_padding(kwargs):
    torch.manual_seed(0)
    scorer = ListScorer(3, **kwargs).eval()
    x = torch.randn(3, 5, 3)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False], [False] * 5])
    padded_x = torch.cat([x, 1e6 * torch.randn(3, 4, 3)], dim=1)
    padded_mask = torch.cat([mask, torch.zeros(3, 4, dtype=torch.bool)], dim=1)
    padded_x[:, :5][~mask] = -1e6  # garbage at the padding inside the width too
    with torch.no_grad():
        short = scorer(x.masked_fill(~mask[..., None], 0.0), mask)
        long = scorer(padded_x, padded_mask)
    torch.testing.assert_close(long[:, :5], short)
    assert torch.isfinite(long).all() and (long[~padded_mask] == 0).all()


def test_attention_dropout_acts_on_the_attention_weights_only():
    torch.manual_seed(0)
    x, mask = torch.randn(2, 6, 3), torch.ones(2, 6, dtype=torch.bool)
    mask[1, 4:] = False

    def scorer(**kwargs: float | None) -> ListScorer:
        return ListScorer(3, hidden=[8], attention_layers=1, attention_heads=2, **kwargs).train()

    quiet = scorer(dropout=0.0, attention_dropout=0.0)
    torch.testing.assert_close(quiet(x, mask), quiet.eval()(x, mask))  # training == evaluation
    noisy = scorer(dropout=0.0, attention_dropout=0.5)
    assert not torch.equal(noisy(x, mask), noisy(x, mask))
    inherited = scorer(dropout=0.3)  # None: the dropout of the rest of the network
    assert inherited.context is not None
    assert [layer.self_attn.dropout for layer in inherited.context.layers] == [0.3]
    with pytest.raises(ValueError, match="attention_dropout"):
        ListScorer(3, hidden=[8], attention_layers=1, attention_heads=2, attention_dropout=1.0)


def test_scorer_rejects_bad_settings():
    with pytest.raises(ValueError, match="hidden layer"):
        ListScorer(3, hidden=[], attention_layers=1)
    with pytest.raises(ValueError, match="divide"):
        ListScorer(3, hidden=[10], attention_layers=1, attention_heads=4)
    with pytest.raises(ValueError, match="norm"):
        ListScorer(3, norm="group")  # type: ignore[arg-type]


def test_ranker_errors_are_clear():
    with pytest.raises(ValueError, match="listnet"):
        NeuralRanker(loss="nope")
    ranker = NeuralRanker()
    with pytest.raises(RuntimeError, match="not fitted"):
        ranker.score(toy_lists(2, seed=0))
    with pytest.raises(RuntimeError, match="not fitted"):
        ranker.save("x.pt")
    assert isinstance(ranker, Ranker)


def test_settings_are_saved_as_hydra_configs_and_only_trusted_classes_load(tmp_path):
    ranker = NeuralRanker(scorer=functools.partial(ListScorer, hidden=(4,)),
                          optimizer=functools.partial(torch.optim.SGD, lr=0.5),
                          trainer=cpu_trainer(1), holdout_fraction=0.5).fit(toy_lists(4, seed=0))
    ranker.save(tmp_path / "model")
    manifest = json.loads((tmp_path / "model" / "manifest.json").read_text())
    assert manifest["settings"]["scorer"] == {"_target_": "tagtorch.rankers.neural.ListScorer",
                                              "_partial_": True, "hidden": [4]}
    assert manifest["settings"]["optimizer"] == {"_target_": "torch.optim.sgd.SGD",
                                                 "_partial_": True, "lr": 0.5}
    assert manifest["settings"]["scheduler"] is None
    # a config naming a class outside tagtorch / torch / Lightning, or of the wrong kind, is
    # refused before anything is imported or called
    for target in ("os.system", "torch.nn.Linear"):
        manifest["settings"]["optimizer"]["_target_"] = target
        (tmp_path / "model" / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(ValueError, match=r"manifest\.json.*optimizer"):
            NeuralRanker.load(tmp_path / "model")
    unsaveable = NeuralRanker(optimizer=lambda p: torch.optim.SGD(p, lr=0.1),
                              trainer=cpu_trainer(1), holdout_fraction=0.5)
    with pytest.raises(ValueError, match="optimizer"):
        unsaveable.fit(toy_lists(4, seed=0)).save(tmp_path / "lambda")


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_every_loss_learns_the_toy_ranking(loss):
    """Trained on 200 lists, each loss ranks 200 fresh lists far better than chance."""
    train, test = toy_lists(200, seed=2), toy_lists(200, seed=3)
    ranker = NeuralRanker(loss=loss, scorer=functools.partial(ListScorer, hidden=[32]),
                          trainer=cpu_trainer(25), batch_size=32, seed=0)
    ranker.fit(train)
    scores = ranker.score(test)
    ndcg = ndcg_at_k(scores, test.labels, test.mask, k=5).mean().item()
    chance = ndcg_at_k(torch.rand(test.mask.shape), test.labels, test.mask, k=5).mean().item()
    assert chance < 0.5
    assert ndcg > 0.85, (loss, ndcg)
    assert ranker.best_epoch_ is not None and ranker.history_


def test_early_stopping_stops_when_validation_ndcg_does_not_rise(tmp_path):
    ranker = NeuralRanker(optimizer=functools.partial(torch.optim.SGD, lr=0.0),
                          trainer=cpu_trainer(50), patience=2, log_dir=tmp_path, name="frozen")
    ranker.fit(toy_lists(50, seed=4))
    # nothing changes: epoch 0 is best, epochs 1 and 2 do not improve, training stops
    assert [row["epoch"] for row in ranker.history_] == [0.0, 1.0, 2.0]
    assert ranker.best_epoch_ == 0
    metrics = pd.read_csv(next(tmp_path.glob("frozen/version_*/metrics.csv")))
    assert {"train/loss", "val/ndcg@5", "val/loss"} <= set(metrics.columns)


def test_save_and_load_score_identically(tmp_path):
    train, test = toy_lists(60, seed=5), toy_lists(10, seed=6)
    ranker = NeuralRanker(loss="lambdarank", trainer=cpu_trainer(3),
                          checkpoint_dir=tmp_path / "best", seed=1).fit(train)
    assert list((tmp_path / "best").glob("lambdarank-*.ckpt"))
    ranker.save(tmp_path / "model")
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["manifest.json",
                                                                     "weights.pt"]
    loaded = NeuralRanker.load(tmp_path / "model")
    torch.testing.assert_close(loaded.score(test), ranker.score(test))
    assert loaded.feature_names_ == NAMES
    assert loaded.history_ == ranker.history_ and loaded.best_epoch_ == ranker.best_epoch_
    trainer = loaded.init_args["trainer"]  # rebuilt from its JSON config
    assert trainer.func is pl.Trainer and trainer.keywords == cpu_trainer(3).keywords
    renamed = CandidateSet(**{**test.state(), "feature_names": tuple("vwxyz")})
    with pytest.raises(ValueError, match="differ"):
        loaded.score(renamed)


def test_same_seed_same_model():
    train, test = toy_lists(60, seed=7), toy_lists(5, seed=8)
    first = NeuralRanker(trainer=cpu_trainer(3), seed=3).fit(train).score(test)
    second = NeuralRanker(trainer=cpu_trainer(3), seed=3).fit(train).score(test)
    torch.testing.assert_close(first, second)


@pytest.mark.parametrize("scheduler", ["none", "cosine", "plateau"])
def test_a_ranker_built_by_hydra_saves_and_loads(tmp_path, scheduler):
    """Hydra's `_partial_` nodes (functools.partial with ListConfig values) round-trip."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.utils import instantiate

    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose("train", overrides=[
            "model=lambdarank", "scorer=attention", "optimizer=sgd", f"scheduler={scheduler}",
            "trainer.max_epochs=2", "trainer.accelerator=cpu", f"paths.output_dir={tmp_path}"])
    GlobalHydra.instance().clear()
    ranker = instantiate(cfg.model.lambdarank).fit(toy_lists(20, seed=0))
    ranker.save(tmp_path / "model")
    loaded = NeuralRanker.load(tmp_path / "model")
    test = toy_lists(5, seed=1)
    torch.testing.assert_close(loaded.score(test), ranker.score(test))
    assert loaded.init_args["scorer"].keywords["hidden"] == [64, 64]
    assert loaded.init_args["optimizer"].func is torch.optim.SGD
    assert (loaded.init_args["scheduler"] is None) == (scheduler == "none")


@pytest.mark.parametrize("normalization", ["log1p_zscore", "zscore"])
def test_the_normalizer_fitted_in_chunks_equals_one_pass_over_all_rows(monkeypatch,
                                                                       normalization):
    """Chunks of a few lists (memory bounded) give torch's mean and population std."""
    monkeypatch.setattr("tagtorch.rankers.neural._CHUNK_VALUES", 40)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(97, 13, 3, generator=generator) * 50 + 7
    mask = torch.rand(97, 13, generator=generator) < 0.6
    fitted = FeatureNormalizer(3, normalization).fit(x, mask)
    real = x[mask].double()
    if normalization == "log1p_zscore":
        real = real.sign() * real.abs().log1p()
    torch.testing.assert_close(fitted.mean, real.mean(0).float())
    torch.testing.assert_close(fitted.std, real.std(0, unbiased=False).float())
