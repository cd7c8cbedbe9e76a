"""The Lightning training loop shared by the neural rankers and the item factorization models.

:class:`~tagtorch.rankers.neural.NeuralRanker` (tag ranking) and
:class:`~tagtorch.itemrec.base.FactorModel` (item recommendation) train the same way: a
Lightning ``Trainer`` built from the model's ``trainer`` setting (a ``_partial_`` config), a
checkpoint of the best epoch by a validation quantity to maximize, early stopping on the same
quantity, and, once training ends, the best epoch's weights restored from that checkpoint, read
safely (``weights_only=True``, :func:`tagtorch.storage.read_checkpoint`). :func:`fit_best`
does all of that; the models keep what is theirs: the loaders, the validation metrics, the
checkpoint folder's layout and, for :class:`~tagtorch.itemrec.base.FactorModel`, the
resumption from ``last.ckpt`` (an extra callback and ``ckpt_path``) and the random states.

Data-parallel training (Lightning DDP): ``trainer.strategy=ddp_spawn`` (any accelerator) or
``ddp_fork`` (CPU; no pickling) with ``trainer.devices=N`` trains in ``N`` processes, each on
``1/N`` of every epoch's batches (Lightning's ``DistributedSampler``), gradients averaged across
them (gloo on CPU, NCCL on GPUs): with ``batch_size`` per process, the effective batch is
``N * batch_size``. The validation metrics are torchmetrics ``Metric`` objects, summed over the
processes before early stopping reads them. ``trainer.strategy=ddp`` would start the whole
command again in every process (Lightning's script launcher), which a protocol run inside one
command cannot do: it is run as ``ddp_spawn`` (logged). The trained model comes back to this
process through the best checkpoint, as without DDP, and so does the model's learning curve
(``on_load_checkpoint``): in a DDP run, the curve ends at the best epoch. Tensors reach the
spawned processes through files in shared memory (torch's ``file_system`` sharing strategy,
for the fit only): this project's machines refuse the default file-descriptor passing.

DESIGN: a top-level module, like :mod:`tagtorch.storage`, so that ``rankers/`` and
``itemrec/`` (siblings) may both import it.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NamedTuple

import pytorch_lightning as pl
import torch.multiprocessing
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
from pytorch_lightning.loggers import Logger
from pytorch_lightning.strategies.launchers import _SubprocessScriptLauncher
from pytorch_lightning.strategies.launchers.multiprocessing import _MultiProcessingLauncher
from torch.utils.data import DataLoader
from torchmetrics import Metric

from tagtorch.progress import EpochBar
from tagtorch.storage import read_checkpoint
from tagtorch.sweeps import pruning_callbacks

__all__ = ["BestEpoch", "epoch_mean", "fit_best"]

log = logging.getLogger(__name__)


def epoch_mean(metric: Metric) -> float:
    """A validation metric's value over the epoch, 0.0 if it saw no batch.

    The validation hooks log it and keep it in the models' ``history_`` (a Python float, as
    the early-stopping monitor).

    Example:
        >>> from torchmetrics import MeanMetric
        >>> metric = MeanMetric()
        >>> epoch_mean(metric)
        0.0
        >>> metric.update(0.5, 2)
        >>> metric.update(0.2, 3)
        >>> round(epoch_mean(metric), 4)
        0.32
    """
    return float(metric.compute()) if metric.update_count else 0.0


class BestEpoch(NamedTuple):
    """What :func:`fit_best` restored.

    Attributes:
        path: the best epoch's checkpoint, or None if none was written (e.g. ``fast_dev_run``).
        epoch: the epoch of that checkpoint (0-based), or None.
        score: the monitored value of that epoch, or None.
    """

    path: Path | None
    epoch: int | None
    score: float | None


def fit_best(
    module: pl.LightningModule,
    train_loader: DataLoader,
    val_loaders: DataLoader | Sequence[DataLoader],
    *,
    monitor: str,
    folder: Path,
    best_name: str,
    patience: int | None,
    trainer: Callable[..., pl.Trainer] | None,
    max_epochs: int,
    logger: Logger | bool = False,
    extra_callbacks: Sequence[pl.Callback] = (),
    ckpt_path: str | Path | None = None,
    fit_context: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
    **trainer_settings: Any,
) -> BestEpoch:
    """Trains ``module``, keeping its best epoch by ``monitor`` (maximized), and restores it.

    The callbacks are, in this order: a :class:`ModelCheckpoint` of the best epoch
    (``{folder}/{best_name}.ckpt``, ``save_top_k=1``, the first of equal scores kept), the
    ``extra_callbacks``, and :class:`EarlyStopping` on ``monitor`` (unless ``patience`` is
    None). When training ends, the weights of ``{folder}/{best_name}.ckpt`` (if it was
    written) are read with ``weights_only=True`` and loaded into ``module``.

    Args:
        module: the Lightning module to train; it logs ``monitor`` after each validation.
        train_loader: the training batches.
        val_loaders: the validation loader(s).
        monitor: the logged quantity to maximize (e.g. ``"val/ndcg@5"``).
        folder: where the best checkpoint goes (created if missing).
        best_name: the best checkpoint's file name, without ``.ckpt``.
        patience: validations without a better ``monitor`` before training stops; None: never.
        trainer: builds the ``Trainer`` from keyword arguments (a ``_partial_`` config); None:
            ``pl.Trainer(max_epochs=max_epochs, ...)``.
        max_epochs: the default trainer's number of epochs.
        logger: the Lightning logger (False: none).
        extra_callbacks: more callbacks, between the best checkpoint and early stopping.
        ckpt_path: a checkpoint to resume training from (None: a fresh training). It is read
            with ``weights_only=True`` where the Lightning version allows it.
        fit_context: a context entered around ``Trainer.fit`` only, after the ``Trainer`` is
            built (building one with ``deterministic=False`` turns torch's deterministic
            algorithms off, so a context that turns them on must come after).
        **trainer_settings: further ``Trainer`` keyword arguments (e.g.
            ``num_sanity_val_steps=0``).

    Returns:
        The restored best epoch (:class:`BestEpoch`).

    Raises:
        tagtorch.errors.UnreadableFileError: if the best checkpoint cannot be read safely.
    """
    best = ModelCheckpoint(dirpath=folder, filename=best_name, monitor=monitor, mode="max",
                           save_top_k=1, enable_version_counter=False)
    callbacks: list[pl.Callback] = [best, *extra_callbacks, *pruning_callbacks(monitor),
                                    EpochBar(type(module).__name__, monitor)]
    if patience is not None:
        callbacks.append(EarlyStopping(monitor, mode="max", patience=patience))
    make = trainer or (lambda **kw: pl.Trainer(max_epochs=max_epochs, **kw))
    settings = dict(callbacks=callbacks, logger=logger, enable_checkpointing=True,
                    enable_model_summary=False, **trainer_settings)
    fitter = make(**settings)
    if isinstance(fitter.strategy.launcher, _SubprocessScriptLauncher):
        log.info("trainer.strategy=ddp would run the whole command again in each process: "
                 "the fit runs as ddp_spawn")
        fitter = make(**{**settings, "strategy": "ddp_spawn"})
    elsewhere = isinstance(fitter.strategy.launcher, _MultiProcessingLauncher)
    safe: dict[str, Any] = ({"weights_only": True}
                            if "weights_only" in inspect.signature(fitter.fit).parameters else {})
    with fit_context(), _sharing_files() if elsewhere else contextlib.nullcontext():
        fitter.fit(module, train_loader, val_loaders,
                   ckpt_path=None if ckpt_path is None else str(ckpt_path), **safe)
    path = Path(folder) / f"{best_name}.ckpt"
    if not path.is_file():
        return BestEpoch(None, None, None)
    state = read_checkpoint(path)
    module.load_state_dict(state["state_dict"])
    if elsewhere:  # trained in other processes: what the module kept, from its checkpoint
        module.on_load_checkpoint(state)
    score = best.best_model_score
    if score is None:  # a spawned fit: the score is in the best checkpoint callback's state
        score = next((value.get("best_model_score") for value in state.get("callbacks", {})
                      .values() if isinstance(value, dict) and value.get("monitor") == monitor),
                     None)
    return BestEpoch(path, int(state["epoch"]), None if score is None else float(score))


@contextlib.contextmanager
def _sharing_files() -> Iterator[None]:
    """Shares tensors with other processes through files in the block (module docstring)."""
    before = torch.multiprocessing.get_sharing_strategy()
    torch.multiprocessing.set_sharing_strategy("file_system")
    try:
        yield
    finally:
        torch.multiprocessing.set_sharing_strategy(before)
