"""Progress bars on the long steps: one helper, so that every bar behaves the same.

A bar is shown on a terminal only (``disable=None``: tqdm turns itself off when the output is
not a TTY, as in tests, CI logs and ``logger=none`` batch runs), is removed when its step ends
(``leave=False``: the fold- and seed-level bars stay the run's record) and never changes a
result. :class:`EpochBar` is the Lightning callback that shows the epochs of a fit (Lightning's
own per-step bar is off in ``conf/trainer``).

Layer 0 (no tagtorch import).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import pytorch_lightning as pl
from tqdm.auto import tqdm

__all__ = ["EpochBar", "batch_ranges", "progress"]

T = TypeVar("T")


def progress(iterable: Iterable[T] | None, desc: str, unit: str = "it",
             total: int | None = None, enabled: bool = True, **settings: Any) -> tqdm:
    """``tqdm(iterable)`` as every long step of tagtorch shows it (see the module docstring).

    ``enabled=False`` never shows it (a one-point grid); ``settings`` go to tqdm.

    Example:
        >>> [x for x in progress(range(3), "grid")]  # no terminal here: no bar, same items
        [0, 1, 2]
    """
    return tqdm(iterable, desc=desc, unit=unit, total=total, leave=False,
                disable=None if enabled else True, dynamic_ncols=True, **settings)


def batch_ranges(total: int, batch_size: int, desc: str,
                 unit: str = "query") -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of ``range(total)`` in batches, with a bar counting ``unit``s.

    Example:
        >>> list(batch_ranges(5, 2, "scoring"))
        [(0, 2), (2, 4), (4, 5)]
    """
    with progress(None, desc, unit=unit, total=total, enabled=total > batch_size) as bar:
        for start in range(0, total, batch_size):
            stop = min(start + batch_size, total)
            yield start, stop
            bar.update(stop - start)


class EpochBar(pl.Callback):
    """A bar over a Lightning fit's epochs, with the monitored value after each validation.

    Args:
        desc: the bar's label (the model's name).
        monitor: the logged quantity shown (e.g. ``val/ndcg@5``).
    """

    def __init__(self, desc: str, monitor: str) -> None:
        self.desc, self.monitor = desc, monitor
        self._bar: tqdm | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Opens the bar at the current epoch (a resumed fit starts past 0)."""
        total = trainer.max_epochs if trainer.max_epochs and trainer.max_epochs > 0 else None
        self._bar = progress(None, self.desc, unit="epoch", total=total,
                             initial=trainer.current_epoch)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Shows the monitored value of the validation just ended."""
        value = trainer.callback_metrics.get(self.monitor)
        if self._bar is not None and value is not None:
            self._bar.set_postfix({self.monitor: f"{float(value):.4f}"}, refresh=False)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Counts the epoch."""
        if self._bar is not None:
            self._bar.update(1)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Closes the bar."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
