"""Lightning DDP on 2 CPU processes (gloo): the model scores within tolerance of one process.

A neural ranker and an item model are trained once in one process with batch ``2b`` and once
with ``trainer.strategy=ddp_spawn`` (the item model: ``ddp``, which tagtorch runs as
``ddp_spawn``) on 2 processes with batch ``b`` each, the same effective batch. The batch order
differs (Lightning's ``DistributedSampler``), so the figures are compared within a tolerance.
A trainer subclass leaves one file per process, showing that both took part, each with half of
the lists in as many steps as the single process.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from tagtorch.candidates.latre import LatreCandidates
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor
from tagtorch.evaluation.tag_recommendation import TagRecommendationProtocol
from tagtorch.itemrec.base import dcg_at_k
from tagtorch.itemrec.data import item_recommendation_data
from tagtorch.itemrec.dorank import DoRank
from tagtorch.metrics.functional import ranking_metrics
from tagtorch.rankers.neural import NeuralRanker


class _Witness(pl.Callback):
    """Writes ``rank{r}``: the world size and the training batches that process saw."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def on_train_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        Path(self.folder, f"rank{trainer.global_rank}").write_text(
            f"{trainer.world_size} {trainer.num_training_batches}")


class WitnessedTrainer(pl.Trainer):
    """A Trainer that adds :class:`_Witness` to the callbacks it is given."""

    def __init__(self, *, witness: str, callbacks: list[pl.Callback] | None = None,
                 **kwargs: object) -> None:
        super().__init__(callbacks=[*(callbacks or []), _Witness(witness)], **kwargs)


def trainer(folder: Path, epochs: int, **distributed: object) -> functools.partial:
    return functools.partial(WitnessedTrainer, witness=str(folder), max_epochs=epochs,
                             accelerator="cpu", enable_progress_bar=False, **distributed)


def witnessed(folder: Path) -> dict[int, tuple[int, int]]:
    return {int(path.name[4:]): tuple(map(int, path.read_text().split()))
            for path in folder.glob("rank*")}


@pytest.fixture(scope="module")
def lists():
    folksonomy = TextProcessor(cache=False).apply(generate_folksonomy(n_objects=1500, seed=3))
    fold = TagRecommendationProtocol(device="cpu").splits(folksonomy)[0]
    generator = LatreCandidates(device="cpu", max_rule_candidates=30).fit(
        fold.train_objects, fold.train_tags, TermIndex.from_folksonomy(folksonomy))
    return generator(fold.val), generator(fold.test)


@pytest.mark.integration
def test_a_neural_ranker_trained_on_two_processes_scores_like_one(tmp_path, lists):
    val, test = lists

    def ndcg(ranker: NeuralRanker) -> float:
        scores = ranker.score(test)
        return float(ranking_metrics(scores, test.labels, test.mask, n_relevant=test.n_relevant,
                                     ks=(5,), metrics=("ndcg",))["ndcg@5"].mean())

    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    single = NeuralRanker(loss="lambdarank", batch_size=32, seed=0,
                          trainer=trainer(one, 5)).fit(val)
    ddp = NeuralRanker(loss="lambdarank", batch_size=16, seed=0,
                       trainer=trainer(two, 5, strategy="ddp_spawn", devices=2)).fit(val)
    (_, batches), = witnessed(one).values()
    # each process: half of the lists in batches of half the size, as many steps as one process
    assert witnessed(two) == {0: (2, batches), 1: (2, batches)}
    assert ddp.history_ and ddp.best_epoch_ is not None  # brought back from the checkpoint
    assert [row["epoch"] for row in ddp.history_] == list(range(ddp.best_epoch_ + 1))
    a, b = ndcg(single), ndcg(ddp)
    assert abs(a - b) < 0.03, (a, b)
    first = next(iter(single.scorer.state_dict()))
    assert not torch.equal(single.scorer.state_dict()[first],  # not the same run
                           ddp.scorer.state_dict()[first])


@pytest.mark.integration
def test_an_item_model_trained_on_two_processes_scores_like_one(tmp_path):
    from test_itemrec import toy_folksonomy

    data = item_recommendation_data(toy_folksonomy(), p=1, seed=0, split="triples")
    q = data.test_queries
    labels, mask = q.batch(np.arange(len(q)), data.n_items)

    def dcg(model: DoRank) -> float:
        scores = model.score(torch.from_numpy(q.users), torch.from_numpy(q.tags))
        return float(dcg_at_k(scores, labels, mask).mean())

    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    settings = {"rank": 8, "patience": 5, "seed": 0}
    single = DoRank(batch_size=8, trainer=trainer(one, 15), **settings).fit(data)
    ddp = DoRank(batch_size=4, trainer=trainer(two, 15, strategy="ddp", devices=2),
                 **settings).fit(data)
    (_, batches), = witnessed(one).values()
    # each process: half of the lists in batches of half the size, as many steps as one process
    assert witnessed(two) == {0: (2, batches), 1: (2, batches)}
    assert ddp.history_
    a, b = dcg(single), dcg(ddp)
    assert abs(a - b) < 0.1 * a, (a, b)
