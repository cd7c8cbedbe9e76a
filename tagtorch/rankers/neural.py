"""Neural rankers over padded candidate lists, as Lightning modules.

Canuto et al. (JIDM 2013, Section 4.3.5) evaluate ListNet (Cao et al., ICML 2007): a neural
scoring function of the candidate's features, trained on whole candidate lists. This module
generalizes it: one :class:`NeuralRanker` trains a scorer network (:class:`ListScorer`: linear as
in the paper's ListNet, an MLP, optionally with a self-attention context over the list) with any
loss of :mod:`tagtorch.losses` (ListNet, RankNet, LambdaRank, LambdaLoss, ApproxNDCG,
NeuralNDCG) on the protocol's V lists, stops early on NDCG@k of a held-out part of V and
scores T's lists. It implements the :class:`~tagtorch.rankers.base.Ranker` interface, so the
evaluator and the report treat it like any other ranker.

Deviations from the paper's ListNet (RankLib): features are normalized (signed ``log1p`` then
z-score, fitted on the training candidates; ``normalization="none"`` restores the raw
features), Adam-type optimizers replace plain gradient descent, and training stops early on the
held-out lists. ``conf/model/listnet_paper.yaml`` is the paper's own setting (linear scorer,
SGD, ``lr = 1e-5``, one list per step, ``i`` epochs from its Table III).
"""

from __future__ import annotations

import functools
import logging
import math
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal, Self

import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.errors import UnreadableFileError
from tagtorch.lightning_fit import epoch_mean, fit_best
from tagtorch.losses import get_loss
from tagtorch.metrics.retrieval import NDCG
from tagtorch.rankers.base import BaseRanker, check_feature_names
from tagtorch.storage import load_tensors, plain_json, save_tensors

_CHUNK_VALUES = 1 << 22
"""Feature values per chunk of :meth:`FeatureNormalizer.fit` (32 MiB in float64)."""

log = logging.getLogger(__name__)

__all__ = ["FeatureNormalizer", "ListScorer", "NeuralRanker", "list_padding"]

Normalization = Literal["log1p_zscore", "zscore", "none"]
Norm = Literal["none", "layer", "batch"]
ListBatch = tuple[Tensor, ...]
"""``(features, labels, mask, n_relevant, *list_inputs)`` of a batch of lists."""


class FeatureNormalizer(nn.Module):
    """Per-feature normalization fitted on the real candidates of the training lists.

    ``"zscore"``: ``(x - mean) / std``; ``"log1p_zscore"``: the z-score of
    ``sign(x) log(1 + |x|)``, which tames the heavy tails of count features (Sum, Vote, TF,
    IFF, ...); ``"none"``: the identity. A feature constant on the training candidates gets
    ``std = 1``. Padding positions come out as 0.

    Args:
        n_features: ``F``.
        normalization: ``"log1p_zscore"``, ``"zscore"`` or ``"none"``.

    Example:
        >>> norm = FeatureNormalizer(1, "zscore")
        >>> x = torch.tensor([[[1.0], [3.0], [99.0]]])
        >>> mask = torch.tensor([[True, True, False]])
        >>> [round(v, 4) for v in norm.fit(x, mask)(x, mask)[0, :, 0].tolist()]
        [-1.0, 1.0, 0.0]
    """

    mean: Tensor
    std: Tensor

    def __init__(self, n_features: int, normalization: Normalization = "log1p_zscore") -> None:
        super().__init__()
        if normalization not in ("log1p_zscore", "zscore", "none"):
            raise ValueError(f"normalization must be 'log1p_zscore', 'zscore' or 'none', "
                             f"got {normalization!r}")
        self.normalization = normalization
        self.register_buffer("mean", torch.zeros(n_features))
        self.register_buffer("std", torch.ones(n_features))

    def _squash(self, x: Tensor) -> Tensor:
        return torch.sign(x) * torch.log1p(x.abs()) if self.normalization == "log1p_zscore" else x

    @torch.no_grad()
    def fit(self, features: Tensor, mask: Tensor) -> Self:
        """Fits the statistics on ``features [B, L, F]`` where ``mask [B, L]`` is True."""
        if self.normalization == "none":
            return self
        count = int(mask.sum())
        if count == 0:
            raise ValueError("no real candidate to fit the feature normalization on")
        mean = torch.zeros(features.shape[-1], dtype=torch.float64)
        for chunk in self._real_chunks(features, mask):
            mean += chunk.sum(0) / count
        squares = torch.zeros_like(mean)
        for chunk in self._real_chunks(features, mask):
            squares += ((chunk - mean) ** 2).sum(0)
        std = (squares / count).sqrt()
        self.mean.copy_(mean)
        self.std.copy_(torch.where(std > 1e-12, std, torch.ones_like(std)))
        return self

    def _real_chunks(self, features: Tensor, mask: Tensor) -> Iterator[Tensor]:
        """The squashed real rows in float64, a few million values at a time.

        :meth:`fit` passes over them twice (the mean, then the squared deviations): memory
        bounded whatever the data's size, where one float64 copy of MSLR-WEB30K's training
        rows and its squashing took 10 GB.
        """
        step = max(1, _CHUNK_VALUES // max(1, features.shape[1] * features.shape[2]))
        for begin in range(0, len(features), step):
            yield self._squash(features[begin:begin + step][mask[begin:begin + step]].double())

    def forward(self, features: Tensor, mask: Tensor) -> Tensor:
        """``[B, L, F]`` normalized features, 0 at padding."""
        x = (self._squash(features) - self.mean) / self.std
        return x.masked_fill(~mask.unsqueeze(-1), 0.0)


class ListScorer(nn.Module):
    """Scorer network: candidate features ``[B, L, F]`` to scores ``[B, L]``.

    With no hidden layer it is the linear scorer of the paper's ListNet (``w · x + b``). Hidden
    layers form an MLP applied to each real candidate (padding is never computed on, so batch
    normalization sees only real candidates). With ``attention_layers > 0``, Transformer
    encoder layers (self-attention over the real candidates of the same list, padding masked
    out) give each candidate the context of its list before the output layer.

    Args:
        n_features: ``F``.
        hidden: widths of the hidden layers (empty: linear scorer).
        dropout: dropout after each hidden layer and inside the attention layers.
        norm: ``"none"``, ``"layer"`` or ``"batch"`` normalization after each hidden layer.
        attention_layers: Transformer encoder layers over the list (needs ``hidden``).
        attention_heads: heads per attention layer (must divide the last hidden width).
        attention_dropout: dropout on the attention weights (None: ``dropout``, as allRank's
            transformer). 0 lets PyTorch run its fused attention kernel while training, which
            never holds the ``[B, heads, L, L]`` weights: a training step 5.6 times faster on a
            CPU at 1024 candidates (``benchmarks/bench_neural.py --attention``).

    Example:
        >>> scorer = ListScorer(3, hidden=[8], attention_layers=1, attention_heads=2)
        >>> scorer(torch.randn(2, 5, 3), torch.ones(2, 5, dtype=torch.bool)).shape
        torch.Size([2, 5])
    """

    def __init__(
        self,
        n_features: int,
        hidden: Sequence[int] = (64, 64),
        dropout: float = 0.0,
        norm: Norm = "none",
        attention_layers: int = 0,
        attention_heads: int = 4,
        attention_dropout: float | None = None,
    ) -> None:
        super().__init__()
        if norm not in ("none", "layer", "batch"):
            raise ValueError(f"norm must be 'none', 'layer' or 'batch', got {norm!r}")
        for name, rate in (("dropout", dropout), ("attention_dropout", attention_dropout)):
            if rate is not None and not 0.0 <= rate < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {rate}")
        if attention_layers and not hidden:
            raise ValueError("the attention context needs at least one hidden layer")
        layers: list[nn.Module] = []
        width = n_features
        for size in hidden:
            layers.append(nn.Linear(width, size))
            if norm == "layer":
                layers.append(nn.LayerNorm(size))
            elif norm == "batch":
                layers.append(nn.BatchNorm1d(size))
            layers.append(nn.ReLU())
            if dropout:
                layers.append(nn.Dropout(dropout))
            width = size
        self.mlp = nn.Sequential(*layers)
        self.context: nn.TransformerEncoder | None = None
        if attention_layers:
            if width % attention_heads:
                raise ValueError(f"attention_heads ({attention_heads}) must divide the last "
                                 f"hidden width ({width})")
            layer = nn.TransformerEncoderLayer(
                width, attention_heads, dim_feedforward=2 * width, dropout=dropout,
                batch_first=True, norm_first=True)
            layer.self_attn.dropout = dropout if attention_dropout is None else attention_dropout
            self.context = nn.TransformerEncoder(layer, attention_layers,
                                                 enable_nested_tensor=False)
        self.out = nn.Linear(width, 1)

    def forward(self, features: Tensor, mask: Tensor) -> Tensor:
        """Scores ``[B, L]`` (0 at padding) of ``features [B, L, F]`` under ``mask [B, L]``."""
        hidden = self.mlp(features[mask])
        h = features.new_zeros((*mask.shape, hidden.shape[-1]), dtype=hidden.dtype)
        h[mask] = hidden
        if self.context is not None:
            h = self.context(h, src_key_padding_mask=list_padding(mask))
        return self.out(h).squeeze(-1).masked_fill(~mask, 0.0)


def list_padding(mask: Tensor) -> Tensor | None:
    """The key padding mask of attention across ``[B, L]`` lists (None: no padding).

    A list with no real candidate would attend to nothing (NaN): it sees its position 0. None
    where every position is real (one served object): PyTorch's attention then takes its fast
    path, four times faster than with a mask of no padding.
    """
    if bool(mask.all()):
        return None
    keep = mask.clone()
    keep[~mask.any(-1), 0] = True
    return ~keep


def _trim(batch: Sequence[Tensor], cut: Sequence[bool] = ()) -> list[Tensor]:
    """Cuts a ``(features, labels, mask, n_relevant, *inputs)`` batch to its longest real list.

    ``cut[i]``: whether the extra input ``i`` (:attr:`NeuralRanker.list_inputs`) is
    per-candidate (``[B, L]``, cut like the mask); the others are kept whole.
    """
    features, labels, mask, n_relevant, *inputs = batch
    width = max(int(mask.sum(-1).max()), 1) if len(mask) else 1
    return [features[:, :width], labels[:, :width], mask[:, :width], n_relevant,
            *(x[:, :width] if per_candidate else x
              for x, per_candidate in zip(inputs, cut, strict=True))]


def _collate(items: list[tuple[Tensor, ...]], cut: Sequence[bool] = ()) -> list[Tensor]:
    return _trim([torch.stack(column) for column in zip(*items, strict=True)], cut)


PER_CANDIDATE = frozenset({"tags", "labels", "mask", "features"})
"""The :class:`CandidateSet` fields with one value per candidate (``[B, L, ...]``)."""


class NeuralRanker(BaseRanker, pl.LightningModule):
    """A neural ranker trained on whole candidate lists with a loss of :mod:`tagtorch.losses`.

    ``fit(train, val)`` normalizes the features (statistics from ``train``'s real candidates),
    builds the scorer for ``F`` features, and trains with a Lightning ``Trainer`` on ``train``'s
    lists that hold a relevant candidate (other lists give no gradient under any of the losses);
    it logs ``train/loss``, ``val/loss`` and ``val/ndcg@k``, stops early when ``val/ndcg@k``
    has not risen for ``patience`` epochs, and restores the best epoch's weights from the
    checkpoint. Without ``val`` (the protocol passes V alone), a seeded random
    ``holdout_fraction`` of ``train``'s lists is held out for validation.

    Args:
        loss: a loss name of :data:`tagtorch.losses.LOSSES`.
        loss_params: keyword parameters of the loss (e.g. ``{"k": 5}``).
        scorer: builds the scorer network from ``F`` (a ``_partial_`` config of
            :class:`ListScorer`); default: an MLP with two hidden layers of 64.
        optimizer: builds the optimizer from the parameters (``_partial_``); default AdamW with
            ``lr = 1e-3``.
        scheduler: builds an LR scheduler from the optimizer (``_partial_``), stepped per epoch;
            ``ReduceLROnPlateau`` follows ``val/ndcg@k``. None: constant learning rate.
        trainer: builds the Lightning ``Trainer`` from keyword arguments (``_partial_`` config
            of ``pytorch_lightning.Trainer``: ``max_epochs``, ``accelerator``, ``precision``,
            ...); the ranker adds the early-stopping and checkpoint callbacks and the logger.
            Default: ``Trainer(max_epochs=40)``.
        normalization: ``"log1p_zscore"``, ``"zscore"`` or ``"none"`` (:class:`FeatureNormalizer`).
        batch_size: lists per training step.
        holdout_fraction: part of ``train`` held out for validation when ``val`` is None.
        k: cut-off of the validation NDCG that early stopping follows.
        patience: epochs without a better ``val/ndcg@k`` before training stops (None: never).
        checkpoint_dir: folder of the best-epoch checkpoints (None: a temporary folder).
        log_dir: folder of the CSV training logs (``train/...``, ``val/...`` per epoch);
            None: no log files.
        seed: seeds the initialization, the hold-out split and the batch order.
        name: the run's name in checkpoints and logs.
    """

    factory_settings: ClassVar[Mapping[str, tuple[type, ...]]] = MappingProxyType({
        "scorer": (nn.Module,),
        "optimizer": (torch.optim.Optimizer,),
        "scheduler": (torch.optim.lr_scheduler.LRScheduler,
                      torch.optim.lr_scheduler.ReduceLROnPlateau),
        "trainer": (pl.Trainer,),
    })
    """The settings that build objects, and the classes each may build (saved as configs)."""

    list_inputs: ClassVar[tuple[str, ...]] = ()
    """The :class:`CandidateSet` fields :meth:`forward` takes after the features and the mask
    (none here: the scorer sees the features alone)."""

    loss: str
    optimizer: Callable[..., torch.optim.Optimizer] | None
    scheduler: Callable[[torch.optim.Optimizer], Any] | None
    normalization: Normalization
    batch_size: int
    holdout_fraction: float
    k: int
    patience: int | None
    checkpoint_dir: str | Path | None
    log_dir: str | Path | None
    seed: int
    name: str | None

    def __init__(
        self,
        loss: str = "listnet",
        loss_params: Mapping[str, Any] | None = None,
        scorer: Callable[[int], nn.Module] | None = None,
        optimizer: Callable[..., torch.optim.Optimizer] | None = None,
        scheduler: Callable[[torch.optim.Optimizer], Any] | None = None,
        trainer: Callable[..., pl.Trainer] | None = None,
        normalization: Normalization = "log1p_zscore",
        batch_size: int = 64,
        holdout_fraction: float = 0.2,
        k: int = 5,
        patience: int | None = 5,
        checkpoint_dir: str | Path | None = None,
        log_dir: str | Path | None = None,
        seed: int = 0,
        name: str | None = None,
    ) -> None:
        super().__init__()
        self.loss_fn = get_loss(loss)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 0.0 < holdout_fraction < 1.0:
            raise ValueError(f"holdout_fraction must be in (0, 1), got {holdout_fraction}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if patience is not None and patience < 1:
            raise ValueError(f"patience must be >= 1 or None, got {patience}")
        FeatureNormalizer(1, normalization)  # validates the name
        self.loss_params = dict(loss_params or {})
        self.run_name = name or loss
        self.feature_names_: tuple[str, ...] | None = None
        self.normalizer: FeatureNormalizer | None = None
        self.scorer: nn.Module | None = None
        self.best_epoch_: int | None = None
        self.history_: list[dict[str, float]] = []
        self.val_ndcg = NDCG(k, empty_target_action="neg")  # gold tags outside count
        self._val_loss = (0.0, 0)  # the held-out lists' loss sum, and their number

    @property
    def monitor(self) -> str:
        """The early-stopping quantity, ``val/ndcg@k``."""
        return f"val/ndcg@{self.k}"

    def _build(self, n_features: int, train: CandidateSet | None = None) -> None:
        """The normalizer and the scorer for ``n_features``.

        ``train``: the training lists at fit time, None at load time (a subclass may read them).
        """
        make = self.init_args["scorer"] or (lambda f: ListScorer(f))
        self.normalizer = FeatureNormalizer(n_features, self.normalization)
        self.scorer = make(n_features)

    def forward(self, features: Tensor, mask: Tensor, *inputs: Tensor) -> Tensor:
        """Scores ``[B, L]`` of raw features ``[B, L, F]`` (0 at padding)."""
        if self.scorer is None or self.normalizer is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit() or load()")
        return self.scorer(self.normalizer(features, mask), mask, *inputs)

    def _inputs(self, lists: CandidateSet) -> list[Tensor]:
        """The fields of :attr:`list_inputs` of ``lists``.

        Raises:
            ValueError: ``lists`` lack one of them.
        """
        values = [getattr(lists, name) for name in self.list_inputs]
        missing = [name for name, value in zip(self.list_inputs, values, strict=True)
                   if value is None]
        if missing:
            raise ValueError(f"{type(self).__name__} reads the candidate lists' {missing}, "
                             f"which these lists do not carry")
        return values

    # ----------------------------------------------------------------- Lightning hooks
    def training_step(self, batch: ListBatch, batch_idx: int) -> Tensor:
        """Loss on a batch of training lists."""
        features, labels, mask, _, *inputs = batch
        loss = self.loss_fn(self(features, mask, *inputs), labels, mask, **self.loss_params)
        self.log("train/loss", loss, on_step=False, on_epoch=True, batch_size=len(features),
                 prog_bar=True, sync_dist=True)
        return loss

    def on_validation_epoch_start(self) -> None:
        """Resets the held-out metrics."""
        self.val_ndcg.reset()
        self._val_loss = (0.0, 0)

    def validation_step(self, batch: ListBatch, batch_idx: int) -> None:
        """Accumulates the loss and NDCG@k (with the gold tags outside the list) of a batch."""
        features, labels, mask, n_relevant, *inputs = batch
        scores = self(features, mask, *inputs).float()
        loss = self.loss_fn(scores, labels, mask, **self.loss_params)
        self.val_ndcg.update(scores, labels, mask, n_relevant)
        total, lists = self._val_loss
        self._val_loss = (total + float(loss) * len(features), lists + len(features))

    def on_validation_epoch_end(self) -> None:
        """Logs ``val/ndcg@k`` (the early-stopping monitor) and ``val/loss``."""
        total, lists = self._val_loss
        ndcg, loss = epoch_mean(self.val_ndcg), total / max(lists, 1)
        self.log(self.monitor, ndcg, prog_bar=True, sync_dist=True)  # equal on every process
        self.log("val/loss", loss, sync_dist=True)  # a DDP process's mean, then their mean
        if not self.trainer.sanity_checking:
            self.history_.append({"epoch": float(self.current_epoch), "val_ndcg": ndcg,
                                  "val_loss": loss})

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Adds the learning curve so far (kept by DDP fits: :mod:`tagtorch.lightning_fit`)."""
        checkpoint["tagtorch_history"] = [dict(row) for row in self.history_]

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restores the learning curve of :meth:`on_save_checkpoint`."""
        self.history_ = [dict(row) for row in checkpoint.get("tagtorch_history", [])]

    def configure_optimizers(self) -> Any:
        """The optimizer (default AdamW, lr 1e-3) and the optional per-epoch scheduler."""
        make = self.init_args["optimizer"] or (lambda p: torch.optim.AdamW(p, lr=1e-3))
        optimizer = make(self.parameters())
        if self.init_args["scheduler"] is None:
            return optimizer
        scheduler = self.init_args["scheduler"](optimizer)
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "interval": "epoch",
                                 "monitor": self.monitor}}

    # ----------------------------------------------------------------- Ranker interface
    def _loader(self, lists: CandidateSet, shuffle: bool) -> DataLoader:
        dataset = TensorDataset(lists.features.float(), lists.labels.float(), lists.mask,
                                lists.n_relevant, *self._inputs(lists))
        generator = torch.Generator().manual_seed(self.seed)
        cut = tuple(name in PER_CANDIDATE for name in self.list_inputs)
        return DataLoader(dataset, batch_size=self.batch_size, shuffle=shuffle,
                          collate_fn=functools.partial(_collate, cut=cut),
                          generator=generator if shuffle else None)

    def _split(self, train: CandidateSet) -> tuple[CandidateSet, CandidateSet]:
        order = torch.randperm(len(train), generator=torch.Generator().manual_seed(self.seed))
        n_val = max(1, round(self.holdout_fraction * len(train)))
        if n_val >= len(train):
            raise ValueError(f"{len(train)} training lists are too few to hold out "
                             f"{self.holdout_fraction:.0%} for validation")
        return train[order[n_val:]], train[order[:n_val]]

    def fit(self, train: CandidateSet, val: CandidateSet | None = None) -> Self:
        """Trains on ``train``'s lists, stopping early on ``val`` (default: held out of train)."""
        if len(train) == 0:
            raise ValueError("no training lists")
        if val is None:
            train, val = self._split(train)
        check_feature_names(tuple(train.feature_names), val)
        pl.seed_everything(self.seed, workers=True, verbose=False)
        self.feature_names_ = tuple(train.feature_names)
        self._inputs(train)
        self._build(len(self.feature_names_), train)
        assert self.normalizer is not None
        self.normalizer.fit(train.features, train.mask)
        useful = ((train.labels > 0) & train.mask).any(-1)
        if not bool(useful.any()):
            raise ValueError("no training list holds a relevant candidate")
        train = train[useful]
        self.history_ = []
        with tempfile.TemporaryDirectory(prefix="tagtorch-ckpt-") as scratch:
            log_dir = self.init_args["log_dir"]
            best = fit_best(
                self, self._loader(train, shuffle=True), self._loader(val, False),
                monitor=self.monitor, folder=Path(self.init_args["checkpoint_dir"] or scratch),
                best_name=f"{self.run_name}-{uuid.uuid4().hex[:8]}", patience=self.patience,
                trainer=self.init_args["trainer"], max_epochs=40,
                logger=CSVLogger(log_dir, name=self.run_name) if log_dir else False)
            if best.path is not None:  # fast_dev_run writes no checkpoint
                self.best_epoch_ = best.epoch
        self.cpu().eval()
        log.info("%s: best %s %.4f at epoch %s", self.run_name, self.monitor,
                 math.nan if best.score is None else best.score, self.best_epoch_)
        return self

    @torch.no_grad()
    def score(self, batch: CandidateSet) -> Tensor:
        """Scores ``[B, L]`` (0 at padding) on the batch's device.

        The network is moved and switched to evaluation only when it is not there already: a
        served ranker scores one object at a time, and each traversal of its modules costs
        about 0.2 ms.
        """
        self.check_features(batch)
        device = batch.features.device
        first = next(self.parameters(), None)
        if first is not None and first.device != device:
            self.to(device)
        was_training = self.training
        if was_training:
            self.eval()
        scores = self(batch.features.float(), batch.mask, *self._inputs(batch)).float()
        if was_training:
            self.train()
        return scores

    # ----------------------------------------------------------------- saved folder
    # The folder (:meth:`~tagtorch.rankers.base.BaseRanker.save`): ``manifest.json`` with the
    # settings as JSON, the scorer, optimizer, scheduler and trainer as their Hydra config dicts
    # (``_target_``, ``_partial_: true`` and the keyword arguments), the feature names, the
    # best epoch and the validation history; and ``weights.pt``, a plain dict of tensors
    # (``torch.load(..., weights_only=True)`` reads it).

    def _settings_to_json(self) -> dict[str, Any]:
        """The settings with each factory as its Hydra config dict.

        Raises:
            ValueError: a factory that is no ``functools.partial`` of a class (e.g. a lambda).
        """
        return plain_json({name: _config_of(name, value) if name in self.factory_settings
                           else value for name, value in self.init_args.items()})

    def _save_files(self, folder: Path) -> list[str]:
        """Writes the network's tensors to ``weights.pt``."""
        save_tensors(self.state_dict(), folder / WEIGHTS_FILE)
        return [WEIGHTS_FILE]

    def _manifest_extras(self) -> dict[str, Any]:
        return {"best_epoch": self.best_epoch_, "history": self.history_}

    def _load_files(self, folder: Path, manifest: Mapping[str, Any]) -> None:
        """Builds the network for the saved features and loads ``weights.pt`` into it.

        Raises:
            ValueError: the file is not listed, or holds another network's tensors.
        """
        path = folder / WEIGHTS_FILE
        if WEIGHTS_FILE not in manifest["files"] or self.feature_names_ is None:
            raise UnreadableFileError(f"{path}: not listed in the manifest, or no feature names")
        self._build(len(self.feature_names_))
        state = load_tensors(path)
        try:
            self.load_state_dict(state)
        except Exception as error:  # not this network's tensors
            reason = next(iter(str(error).splitlines()), "")  # torch's messages run long
            raise UnreadableFileError(f"{path}: not readable weights of this ranker "
                                      f"({type(error).__name__}: {reason})") from None
        self.best_epoch_ = manifest["best_epoch"]
        self.history_ = manifest["history"]
        self.eval()


WEIGHTS_FILE = "weights.pt"
"""Name of the weights (a plain dict of tensors) in a saved neural ranker's folder."""

def _config_of(name: str, factory: Any) -> dict[str, Any] | None:
    """The Hydra config dict of a ``functools.partial`` of a class (None stays None).

    Example:
        >>> _config_of("optimizer", functools.partial(torch.optim.SGD, lr=0.1))
        {'_target_': 'torch.optim.sgd.SGD', '_partial_': True, 'lr': 0.1}
    """
    if factory is None:
        return None
    if not (isinstance(factory, functools.partial) and isinstance(factory.func, type)
            and not factory.args):
        raise ValueError(f"NeuralRanker setting {name!r} cannot be saved: it must be a "
                         f"functools.partial of a class with keyword arguments only (a Hydra "
                         f"`_partial_: true` config), got {factory!r}")
    target = f"{factory.func.__module__}.{factory.func.__qualname__}"
    return {"_target_": target, "_partial_": True, **plain_json(factory.keywords)}
