"""The item-ranker interface and the shared trainer of the factorization models.

Every tag-based item recommender offers ``fit(data)``, ``score(users, tags) -> [B, n_items]``,
``save(path)`` and ``load(path)``, so one evaluator compares them all
(:class:`tagtorch.evaluation.itemrec.ItemRecommendationTask`). The factorization models
(Do-Rank, PITF, the probabilistic CP baseline) share :class:`FactorModel`, a Lightning module
that trains on batches of User-Tag-Set sets, measures DCG@10 on the training sets and on the
validation queries after every epoch, stops early when the validation DCG@10 stops rising,
restores the best epoch, and resumes from its last checkpoint after an interruption.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
from torch import Tensor, nn
from torch.utils.data import DataLoader

from tagtorch.itemrec.data import ItemRecData, Queries, UserTagSets

log = logging.getLogger(__name__)

__all__ = ["FactorModel", "ItemRanker", "dcg_at_k", "score_queries"]


@runtime_checkable
class ItemRanker(Protocol):
    """Ranks items for ``(user, tag)`` queries."""

    def fit(self, data: ItemRecData) -> Self:
        """Learns from ``data.train`` (``data.val`` for early stopping)."""
        ...

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """Scores ``[B, n_items]`` of every item for the queries ``(users [B], tags [B])``."""
        ...

    def save(self, path: str | Path) -> None:
        """Writes the fitted model to ``path``."""
        ...

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a model written by :meth:`save`."""
        ...


def dcg_at_k(scores: Tensor, labels: Tensor, mask: Tensor, k: int = 10) -> Tensor:
    """DCG@k ``[B]`` with linear gain, ``sum_{r <= k} label_r / log2(r + 1)``.

    Items are ranked by score among those where ``mask [B, I]`` is True (by ``torch.topk``:
    the order of tied scores is unspecified).

    Example:
        >>> dcg = dcg_at_k(torch.tensor([[0.1, 0.9, 0.5]]), torch.tensor([[1.0, 0.0, 1.0]]),
        ...                torch.ones(1, 3, dtype=torch.bool), k=2)
        >>> [round(v, 4) for v in dcg.tolist()]
        [0.6309]
    """
    masked = scores.masked_fill(~mask, -torch.inf)
    k = min(k, scores.shape[-1])
    top = torch.topk(masked, k, dim=-1, sorted=True).indices
    gains = labels.gather(1, top) * mask.gather(1, top)
    discount = 1.0 / torch.log2(torch.arange(2, k + 2, device=scores.device, dtype=scores.dtype))
    return (gains * discount).sum(-1)


def score_queries(ranker: ItemRanker, queries: Queries, n_items: int, batch_size: int = 1024,
                  ) -> Iterator[tuple[np.ndarray, Tensor, Tensor, Tensor]]:
    """Scores queries in batches: yields ``(rows, scores, labels, mask)``, each ``[b, I]``."""
    for start in range(0, len(queries), batch_size):
        rows = np.arange(start, min(start + batch_size, len(queries)))
        labels, mask = queries.batch(rows, n_items)
        with torch.no_grad():
            scores = ranker.score(torch.from_numpy(queries.users[rows]),
                                  torch.from_numpy(queries.tags[rows])).float().cpu()
        yield rows, scores, labels, mask


class _SetIndex(torch.utils.data.Dataset):
    """Indices of the training sets (a batch gathers its sets in the collate function)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


class FactorModel(pl.LightningModule):
    """Lightning trainer shared by the factorization models.

    Subclasses build their parameters in :meth:`build`, score in :meth:`score` and define the
    training objective in :meth:`set_loss` over a batch of UTS sets. Training follows the
    Do-Rank paper's protocol: after every epoch, DCG@10 on (a sample of) the training sets and
    on the validation queries is logged (``train/dcg@10``, ``val/dcg@10``) and kept in
    ``history_`` (the learning curve); training stops when ``val/dcg@10`` has not risen for
    ``patience`` epochs, and the best epoch's weights are restored.

    With ``checkpoint_dir``, the best and the last epoch are checkpointed there; a later
    ``fit`` with the same folder resumes from ``last.ckpt`` (the interrupted run's epoch,
    optimizer and early-stopping state) instead of starting over.

    Args:
        rank: the number of latent factors ``r``.
        regularization: ``lambda`` of the subclass's L2 penalty on the factor rows it trains.
        optimizer: builds the optimizer from the parameters (``_partial_``); default Adam with
            ``lr = 0.01``.
        trainer: builds the Lightning ``Trainer`` (``_partial_``); default 50 epochs.
        batch_size: UTS sets per training step.
        patience: epochs without a better validation DCG@10 before training stops.
        init_std: standard deviation of the normal initialization of the factors.
        train_sample: training sets whose DCG@10 is reported per epoch (a seeded sample).
        checkpoint_dir: folder of ``best.ckpt`` and ``last.ckpt`` (None: a temporary folder,
            no resumption).
        seed: seeds the initialization, the batch order and the negative sampling.
        name: the run's name in logs.
    """

    def __init__(
        self,
        rank: int = 64,
        regularization: float = 1e-4,
        optimizer: Callable[..., torch.optim.Optimizer] | None = None,
        trainer: Callable[..., pl.Trainer] | None = None,
        batch_size: int = 64,
        patience: int = 3,
        init_std: float = 0.1,
        train_sample: int = 2000,
        checkpoint_dir: str | Path | None = None,
        seed: int = 0,
        name: str | None = None,
    ) -> None:
        super().__init__()
        if rank < 1:
            raise ValueError(f"rank must be >= 1, got {rank}")
        if regularization < 0:
            raise ValueError(f"regularization must be >= 0, got {regularization}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        self.init_args: dict[str, Any] = {
            "rank": rank, "regularization": regularization, "optimizer": optimizer,
            "trainer": trainer, "batch_size": batch_size, "patience": patience,
            "init_std": init_std, "train_sample": train_sample,
            "checkpoint_dir": checkpoint_dir, "seed": seed, "name": name}
        self.rank = rank
        self.regularization = regularization
        self.batch_size = batch_size
        self.patience = patience
        self.init_std = init_std
        self.train_sample = train_sample
        self.seed = seed
        self.run_name = name or type(self).__name__.lower()
        self.sizes: tuple[int, int, int] | None = None
        self._data_key: str | None = None
        self.data: ItemRecData | None = None
        self.best_epoch_: int | None = None
        self.history_: list[dict[str, float]] = []
        self._sums = [0.0, 0, 0.0, 0]

    # ------------------------------------------------------------- to implement
    def build(self, n_users: int, n_items: int, n_tags: int) -> None:
        """Creates the parameters for the given sizes."""
        raise NotImplementedError

    def score(self, users: Tensor, tags: Tensor) -> Tensor:
        """Scores ``[B, n_items]`` of every item for ``(users [B], tags [B])``."""
        raise NotImplementedError

    def set_loss(self, users: Tensor, tags: Tensor, items: Tensor, item_mask: Tensor) -> Tensor:
        """Training loss (scalar, minimized) of a batch of UTS sets.

        Args:
            users: ``[B]`` the sets' users.
            tags: ``[B]`` the sets' tags.
            items: ``[B, P]`` the sets' positive items, padded.
            item_mask: ``[B, P]`` bool, True at real positives.
        """
        raise NotImplementedError

    # ------------------------------------------------------------- helpers
    def _init_factor(self, n: int) -> nn.Parameter:
        return nn.Parameter(torch.randn(n, self.rank) * self.init_std)

    def negative_mask(self, users: Tensor) -> Tensor:
        """``[B, n_items]`` bool, True at the UTS negatives (items ``u`` never tagged)."""
        if self.data is None:
            raise RuntimeError("negative items are known during fit only")
        return self.data.negative_mask(users)

    # ------------------------------------------------------------- Lightning hooks
    def training_step(self, batch: list[Tensor], batch_idx: int) -> Tensor:
        """The subclass's loss on a batch of UTS sets."""
        loss = self.set_loss(*batch)
        self.log("train/loss", loss, on_step=False, on_epoch=True, batch_size=len(batch[0]))
        return loss

    def on_validation_epoch_start(self) -> None:
        """Resets the DCG sums."""
        self._sums = [0.0, 0, 0.0, 0]

    def validation_step(self, batch: list[Tensor], batch_idx: int,
                        dataloader_idx: int = 0) -> None:
        """DCG@10 of validation queries (loader 0) or of training sets (loader 1)."""
        users, tags, labels, mask = batch
        dcg = dcg_at_k(self.score(users, tags), labels, mask, 10)
        slot = 0 if dataloader_idx == 0 else 2
        self._sums[slot] += float(dcg.sum())
        self._sums[slot + 1] += len(users)

    def on_validation_epoch_end(self) -> None:
        """Logs ``val/dcg@10`` (the early-stopping monitor) and ``train/dcg@10``."""
        val = self._sums[0] / max(int(self._sums[1]), 1)
        train = self._sums[2] / max(int(self._sums[3]), 1)
        self.log("val/dcg@10", val)
        self.log("train/dcg@10", train)
        if not self.trainer.sanity_checking:
            self.history_.append({"epoch": float(self.current_epoch), "train_dcg@10": train,
                                  "val_dcg@10": val})
            log.info("%s epoch %d: train DCG@10 %.4f, val DCG@10 %.4f", self.run_name,
                     self.current_epoch, train, val)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """The optimizer (default Adam, ``lr = 0.01``)."""
        make = self.init_args["optimizer"] or (lambda p: torch.optim.Adam(p, lr=0.01))
        return make(self.parameters())

    def settings_key(self) -> str:
        """What a checkpoint must have been trained with to be resumed: class, settings, data.

        The data count by their sizes and :meth:`ItemRecData.fingerprint`. The trainer and the
        checkpoint folder do not count (a resumed run may raise ``max_epochs``); the optimizer
        counts by its ``repr``.
        """
        args = {k: v for k, v in self.init_args.items() if k not in ("trainer", "checkpoint_dir")}
        return repr((type(self).__name__, sorted(args.items()), self.sizes, self._data_key))

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Keeps the learning curve (a resumed run continues it) and the settings key."""
        checkpoint["tagtorch_history"] = self.history_
        checkpoint["tagtorch_settings"] = self.settings_key()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restores the learning curve of a resumed run."""
        self.history_ = list(checkpoint.get("tagtorch_history", []))

    # ------------------------------------------------------------- loaders
    def _train_loader(self, sets: UserTagSets) -> DataLoader:
        def collate(rows: list[int]) -> list[Tensor]:
            index = np.asarray(rows)
            items, mask = sets.padded(index)
            return [torch.from_numpy(sets.users[index]), torch.from_numpy(sets.tags[index]),
                    items, mask]

        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(_SetIndex(len(sets)), batch_size=self.batch_size, shuffle=True,
                          collate_fn=collate, generator=generator)

    def _query_loader(self, queries: Queries, n_items: int) -> DataLoader:
        def collate(rows: list[int]) -> list[Tensor]:
            index = np.asarray(rows)
            labels, mask = queries.batch(index, n_items)
            return [torch.from_numpy(queries.users[index]),
                    torch.from_numpy(queries.tags[index]), labels, mask]

        return DataLoader(_SetIndex(len(queries)), batch_size=512, collate_fn=collate)

    def _train_queries(self, data: ItemRecData) -> Queries:
        """A seeded sample of the training sets, as queries with nothing excluded."""
        sets = data.train_sets
        rng = np.random.default_rng(self.seed)
        rows = np.sort(rng.permutation(len(sets))[: self.train_sample])
        gold = sets.items.take(rows)
        empty = type(gold)(np.zeros(len(rows) + 1, dtype=np.int64), np.zeros(0, dtype=np.int64))
        return Queries(sets.users[rows], sets.tags[rows], gold, empty)

    # ------------------------------------------------------------- ItemRanker interface
    def fit(self, data: ItemRecData) -> Self:
        """Trains on ``data.train``'s UTS sets, early-stopping on ``data.val``'s queries."""
        if len(data.train_sets) == 0:
            raise ValueError("no training triples")
        if len(data.val_queries) == 0:
            raise ValueError("no validation queries for early stopping")
        pl.seed_everything(self.seed, workers=True, verbose=False)
        self.sizes = (data.n_users, data.n_items, data.n_tags)
        self._data_key = data.fingerprint()
        self.build(*self.sizes)
        self.data = data
        self.history_ = []
        directory = self.init_args["checkpoint_dir"]
        scratch = None
        if directory is None:
            import tempfile

            scratch = tempfile.TemporaryDirectory(prefix="tagtorch-itemrec-")
            directory = scratch.name
        directory = Path(directory)
        best = ModelCheckpoint(dirpath=directory, filename="best", monitor="val/dcg@10",
                               mode="max", save_top_k=1, enable_version_counter=False)
        # every epoch (no monitor: the newest is kept), for resuming after an interruption
        latest = ModelCheckpoint(dirpath=directory, filename="last", save_top_k=1,
                                 enable_version_counter=False)
        stop = EarlyStopping("val/dcg@10", mode="max", patience=self.patience)
        make = self.init_args["trainer"] or (lambda **kw: pl.Trainer(max_epochs=50, **kw))
        trainer = make(callbacks=[best, latest, stop], logger=False, enable_checkpointing=True,
                       enable_model_summary=False, num_sanity_val_steps=0)
        last = directory / "last.ckpt"
        resume = str(last) if last.is_file() else None
        if resume and torch.load(last, map_location="cpu", weights_only=False).get(
                "tagtorch_settings") != self.settings_key():
            log.warning("%s: %s was trained with other settings or data; starting over",
                        self.run_name, last)
            last.unlink()
            resume = None
        if resume:
            log.info("%s: resuming from %s", self.run_name, resume)
        else:  # a fresh run: a best epoch of an earlier, finished run does not count
            (directory / "best.ckpt").unlink(missing_ok=True)
        try:
            trainer.fit(self, self._train_loader(data.train_sets),
                        [self._query_loader(data.val_queries, data.n_items),
                         self._query_loader(self._train_queries(data), data.n_items)],
                        ckpt_path=resume)
            if best.best_model_path:
                state = torch.load(best.best_model_path, map_location="cpu", weights_only=False)
                self.load_state_dict(state["state_dict"])
                score = float(best.best_model_score) if best.best_model_score is not None \
                    else math.nan
                self.best_epoch_ = next((int(h["epoch"]) for h in self.history_
                                         if math.isclose(h["val_dcg@10"], score,
                                                         rel_tol=1e-6, abs_tol=1e-9)), None)
            last.unlink(missing_ok=True)  # finished: a later fit starts over
        finally:
            self.data = None
            if scratch is not None:
                scratch.cleanup()
        log.info("%s: best val DCG@10 at epoch %s of %d", self.run_name, self.best_epoch_,
                 len(self.history_))
        return self.cpu().eval()

    def save(self, path: str | Path) -> None:
        """Writes the configuration, the sizes, the learning curve and the weights."""
        if self.sizes is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted: nothing to save")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        torch.save({"init_args": self.init_args, "sizes": self.sizes,
                    "best_epoch": self.best_epoch_, "history": self.history_,
                    "state_dict": {k: v.cpu() for k, v in self.state_dict().items()}}, path)

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Reads a model written by :meth:`save` (its file holds pickled config callables)."""
        state = torch.load(path, map_location="cpu", weights_only=False)
        model = cls(**state["init_args"])
        model.sizes = tuple(state["sizes"])
        model.build(*model.sizes)
        model.load_state_dict(state["state_dict"])
        model.best_epoch_ = state["best_epoch"]
        model.history_ = state["history"]
        return model.eval()
