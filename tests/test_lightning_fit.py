"""The shared Lightning loop (tagtorch.lightning_fit): best checkpoint, early stopping, restore."""

from __future__ import annotations

import functools

import pytest
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from tagtorch.lightning_fit import fit_best

SCRIPT = [0.1, 0.5, 0.3, 0.5, 0.2, 0.9]  # the monitored value of each epoch


class Scripted(pl.LightningModule):
    """Its weight is the epoch number; it reports the scripted validation value."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        with torch.no_grad():
            self.weight.fill_(self.current_epoch)
        return (self.weight * 0).sum()

    def validation_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        pass

    def on_validation_epoch_end(self) -> None:
        self.log("val/score", SCRIPT[self.current_epoch])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)


def loader() -> DataLoader:
    return DataLoader(torch.zeros(2, 1), batch_size=2)


@pytest.mark.parametrize(("patience", "epochs_run", "best"), [(2, 4, 1), (None, 6, 5)])
def test_fit_best_stops_early_and_restores_the_first_best_epoch(tmp_path, patience, epochs_run,
                                                                best):
    module = Scripted()
    ran = []
    trainer = functools.partial(pl.Trainer, accelerator="cpu", enable_progress_bar=False,
                                max_epochs=len(SCRIPT))
    result = fit_best(module, loader(), loader(), monitor="val/score", folder=tmp_path,
                      best_name="best", patience=patience, trainer=trainer, max_epochs=99,
                      fit_context=lambda: _Recorder(ran))
    assert ran == ["in", "out"]
    assert module.current_epoch == epochs_run
    assert result.path == tmp_path / "best.ckpt" and result.epoch == best
    assert result.score == pytest.approx(SCRIPT[best])
    assert module.weight.item() == best  # the best epoch's weights are back


class _Recorder:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def __enter__(self) -> None:
        self.log.append("in")

    def __exit__(self, *exc: object) -> None:
        self.log.append("out")
