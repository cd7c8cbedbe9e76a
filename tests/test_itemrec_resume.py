"""Item models: exact resumption, unreadable checkpoints, planted pickle payloads."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import pytorch_lightning as pl
import torch
from omegaconf import OmegaConf
from test_itemrec import interrupted_trainer, toy_folksonomy, trainer

from tagtorch.errors import UnreadableFileError
from tagtorch.evaluation.item_recommendation import ItemRecommendationTask
from tagtorch.itemrec.base import FactorModel, dcg_at_k
from tagtorch.itemrec.baselines import TagPopularity
from tagtorch.itemrec.data import item_recommendation_data
from tagtorch.itemrec.dorank import DoRank
from tagtorch.itemrec.pitf import PITF
from tagtorch.storage import file_record


@pytest.fixture(scope="module")
def toy_data():
    return item_recommendation_data(toy_folksonomy(), p=1, seed=0, split="triples")


def adam(lr: float) -> functools.partial:
    return functools.partial(torch.optim.Adam, lr=lr)


# (model, settings, interrupted at the start of this epoch): with these settings early stopping
# ends the uninterrupted training after the interruption and before its 12 epochs, so the
# early-stopping state must come back too (PITF: interrupted while waiting for a better epoch)
CASES = {
    "dorank": (DoRank, {"optimizer": adam(0.1), "patience": 1}, 6),
    "pitf": (PITF, {"optimizer": adam(0.1), "patience": 2}, 9),
}


def interrupt_and_resume(cls, settings, crash_at, folder, toy_data, caplog):
    """Runs a training interrupted at ``crash_at``, then resumes it; returns both models."""
    first = cls(rank=4, trainer=interrupted_trainer(crash_at, 12), checkpoint_dir=folder,
                **settings)
    with pytest.raises(RuntimeError, match="simulated"):
        first.fit(toy_data)
    assert len(first.history_) == crash_at
    resumed = cls(rank=4, trainer=trainer(12), checkpoint_dir=folder, **settings)
    caplog.clear()
    with caplog.at_level("INFO", logger="tagtorch.itemrec.base"):
        resumed.fit(toy_data)
    assert f"resuming from {first.run_folder(toy_data) / 'last.ckpt'}" in caplog.text
    return first, resumed


def scores_of_test_queries(model, data) -> torch.Tensor:
    q = data.test_queries
    return model.score(torch.from_numpy(q.users), torch.from_numpy(q.tags))


@pytest.mark.parametrize("case", list(CASES))
def test_a_resumed_training_equals_the_uninterrupted_one(tmp_path, toy_data, caplog, case):
    cls, settings, crash_at = CASES[case]
    reference = cls(rank=4, trainer=trainer(12), **settings).fit(toy_data)
    assert crash_at < len(reference.history_) < 12  # early stopping after the interruption
    _, resumed = interrupt_and_resume(cls, settings, crash_at, tmp_path, toy_data, caplog)
    # every per-epoch figure (training loss, train and validation DCG@10), exactly
    assert resumed.history_ == reference.history_
    assert resumed.best_epoch_ == reference.best_epoch_
    ours, theirs = resumed.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    q = toy_data.test_queries
    labels, mask = q.batch(np.arange(len(q)), toy_data.n_items)
    ours, theirs = (scores_of_test_queries(m, toy_data) for m in (resumed, reference))
    assert torch.equal(ours, theirs)
    assert torch.equal(dcg_at_k(ours, labels, mask), dcg_at_k(theirs, labels, mask))
    # the epochs after the interruption are not copies of the one before it
    losses = [row["train_loss"] for row in reference.history_[crash_at - 1:]]
    assert len(set(losses)) == len(losses)


@pytest.mark.parametrize(("case", "restore"), [
    ("dorank", "nothing"), ("pitf", "nothing"), ("pitf", "loader only")])
def test_without_the_random_state_a_resumed_training_differs(tmp_path, toy_data, caplog,
                                                              monkeypatch, case, restore):
    """The check above can fail: resuming without the generators' states changes the epochs."""
    cls, settings, crash_at = CASES[case]
    reference = cls(rank=4, trainer=trainer(12), **settings).fit(toy_data)
    if restore == "nothing":
        monkeypatch.setattr(FactorModel, "_restore_random_state", lambda self, state: None)
    else:  # the batch order's generator, not torch's global one (PITF draws its negatives)
        original = FactorModel._restore_random_state

        def loader_only(self, state):
            kept = torch.get_rng_state()
            original(self, state)
            torch.set_rng_state(kept)

        monkeypatch.setattr(FactorModel, "_restore_random_state", loader_only)
    _, resumed = interrupt_and_resume(cls, settings, crash_at, tmp_path, toy_data, caplog)
    assert resumed.history_[:crash_at] == reference.history_[:crash_at]
    assert resumed.history_[crash_at]["train_loss"] != reference.history_[crash_at]["train_loss"]


KILLED_RUN = """
import functools, os, signal, sys
import pytorch_lightning as pl, torch
sys.path.insert(0, {tests!r})
from test_itemrec import toy_folksonomy
from tagtorch.itemrec.data import item_recommendation_data
from tagtorch.itemrec.pitf import PITF

class Kill(pl.Callback):
    def on_train_epoch_start(self, trainer, module):
        if trainer.current_epoch == {kill_at}:
            os.kill(os.getpid(), signal.SIGKILL)

def make(**kwargs):
    kwargs["callbacks"] = [*kwargs["callbacks"], Kill()]
    return pl.Trainer(max_epochs=12, accelerator="cpu", enable_progress_bar=False, **kwargs)

data = item_recommendation_data(toy_folksonomy(), p=1, seed=0, split="triples")
PITF(rank=4, trainer=make, checkpoint_dir={folder!r}, patience=2,
     optimizer=functools.partial(torch.optim.Adam, lr=0.1)).fit(data)
"""


@pytest.mark.integration  # an end-to-end run (the default run keeps its 8 minutes)
def test_a_training_killed_in_another_process_resumes_exactly(tmp_path, toy_data, caplog):
    """The real case: the process dies (SIGKILL) and a new one resumes the training."""
    import subprocess
    import sys

    cls, settings, kill_at = CASES["pitf"]
    script = KILLED_RUN.format(tests=str(Path(__file__).parent), kill_at=kill_at,
                               folder=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == -9, done.stderr[-2000:]
    resumed = cls(rank=4, trainer=trainer(12), checkpoint_dir=tmp_path, **settings)
    with caplog.at_level("INFO", logger="tagtorch.itemrec.base"):
        resumed.fit(toy_data)
    assert "resuming from" in caplog.text
    reference = cls(rank=4, trainer=trainer(12), **settings).fit(toy_data)
    assert resumed.history_ == reference.history_
    assert all(torch.equal(a, b) for a, b in zip(resumed.state_dict().values(),
                                                 reference.state_dict().values(), strict=True))


def crashing_pl_trainer(crash_at: int, epochs: int, **kwargs) -> pl.Trainer:
    """``interrupted_trainer`` as a module-level function, for a config's ``_target_``."""
    return interrupted_trainer(crash_at, epochs)(**kwargs)


def task_models(pitf_trainer: dict) -> dict:
    plain = {"_target_": "pytorch_lightning.Trainer", "_partial_": True, "max_epochs": 5,
             "accelerator": "cpu", "enable_progress_bar": False}
    common = {"rank": 4, "patience": 10, "seed": 0, "checkpoint_dir": None}
    return {"model": {
        "dorank": {"_target_": "tagtorch.itemrec.dorank.DoRank", "trainer": plain, **common},
        "pitf": {"_target_": "tagtorch.itemrec.pitf.PITF", "trainer": pitf_trainer, **common}}}


def test_an_interrupted_evaluation_rerun_reports_the_uninterrupted_figures(tmp_path, caplog):
    """The issue's case: a run killed during training, then rerun, reports the same figures."""
    folksonomy = toy_folksonomy()
    plain = task_models({"_target_": "pytorch_lightning.Trainer", "_partial_": True,
                         "max_epochs": 5, "accelerator": "cpu", "enable_progress_bar": False})
    crash = task_models({"_target_": f"{__name__}.crashing_pl_trainer", "_partial_": True,
                         "crash_at": 2, "epochs": 5})

    def task(name: str) -> ItemRecommendationTask:
        return ItemRecommendationTask(seeds=[0, 1], p=1, trec=False,
                                      checkpoint_dir=tmp_path / name / "checkpoints")

    expected = task("whole").run(folksonomy, OmegaConf.create(plain), tmp_path / "whole").results
    with pytest.raises(RuntimeError, match="simulated"):  # PITF killed in its epoch 2
        task("killed").run(folksonomy, OmegaConf.create(crash), tmp_path / "killed")
    with caplog.at_level("INFO", logger="tagtorch.itemrec.base"):
        got = task("killed").run(folksonomy, OmegaConf.create(plain),
                                 tmp_path / "killed").results
    assert caplog.text.count("pitf: resuming from") == 1
    timing = ["fit_seconds", "ms_model"]
    pd.testing.assert_frame_equal(got[~got["metric"].isin(timing)],
                                  expected[~expected["metric"].isin(timing)], check_exact=True)
    curves = [pd.read_csv(tmp_path / name / "curves.csv") for name in ("killed", "whole")]
    pd.testing.assert_frame_equal(*curves, check_exact=True)
    assert len(curves[0].query("method == 'pitf' and seed == 0")) == 5


def test_a_checkpoint_holds_no_pickled_objects(tmp_path, toy_data):
    model = DoRank(rank=4, trainer=interrupted_trainer(2, 4), checkpoint_dir=tmp_path,
                   optimizer=adam(0.01))
    with pytest.raises(RuntimeError, match="simulated"):
        model.fit(toy_data)
    for name in ("last.ckpt", "best.ckpt"):
        state = torch.load(model.run_folder(toy_data) / name, weights_only=True)
        assert "hyper_parameters" not in state
    settings = json.loads((model.run_folder(toy_data) / "settings.json").read_text())
    assert settings["settings"]["rank"] == 4 and settings["data"] == toy_data.fingerprint()


# ----------------------------------------------------------------------------- unreadable files
def corrupt(path: Path, how: str) -> None:
    content = path.read_bytes()
    if how == "truncated":
        path.write_bytes(content[: len(content) // 2])
    elif how == "garbage":
        path.write_bytes(np.random.default_rng(0).bytes(len(content)))
    else:
        path.write_bytes(b"")


@pytest.mark.parametrize(("name", "how"), [
    ("last.ckpt", "truncated"), ("last.ckpt", "garbage"), ("last.ckpt", "empty"),
    ("best.ckpt", "truncated")])
def test_an_unreadable_checkpoint_is_discarded_and_training_starts_over(tmp_path, toy_data,
                                                                         caplog, name, how):
    first = DoRank(rank=4, trainer=interrupted_trainer(2, 4), checkpoint_dir=tmp_path)
    with pytest.raises(RuntimeError, match="simulated"):
        first.fit(toy_data)
    folder = first.run_folder(toy_data)
    corrupt(folder / name, how)
    again = DoRank(rank=4, trainer=trainer(4), checkpoint_dir=tmp_path)
    with caplog.at_level("INFO", logger="tagtorch.itemrec.base"):
        again.fit(toy_data)
    assert f"{folder / name}: " in caplog.text and "starting over" in caplog.text
    assert "resuming" not in caplog.text
    fresh = DoRank(rank=4, trainer=trainer(4)).fit(toy_data)
    assert again.history_ == fresh.history_  # a full training from epoch 0
    assert not (folder / "last.ckpt").exists()
    caplog.clear()  # and the next run is not blocked
    with caplog.at_level("INFO", logger="tagtorch.itemrec.base"):
        DoRank(rank=4, trainer=trainer(2), checkpoint_dir=tmp_path).fit(toy_data)
    assert "starting over" not in caplog.text


# ----------------------------------------------------------------------------- planted payloads
class Payload:
    """Unpickling it creates ``marker``: the proof that a file ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def plant_torch(path: Path, marker: Path) -> None:
    torch.save({"state_dict": Payload(marker), "epoch": 0}, path)


def plant_npz(path: Path, marker: Path) -> None:
    np.savez(path, tag_item=np.array([Payload(marker)], dtype=object),
             item=np.zeros(3, dtype=np.float32))


def test_the_payloads_run_code_when_unpickled(tmp_path):
    """Without this, the tests below could pass with a payload that does nothing."""
    marker = tmp_path / "ran"
    plant_torch(tmp_path / "a.pt", marker)
    torch.load(tmp_path / "a.pt", weights_only=False)
    assert marker.exists()
    marker.unlink()
    plant_npz(tmp_path / "a.npz", marker)
    with np.load(tmp_path / "a.npz", allow_pickle=True) as arrays:
        arrays["tag_item"]
    assert marker.exists()


def test_a_planted_last_checkpoint_never_runs(tmp_path, toy_data, caplog):
    marker = tmp_path / "ran"
    model = DoRank(rank=4, trainer=trainer(2), checkpoint_dir=tmp_path / "ckpt")
    folder = model.run_folder(toy_data)
    folder.mkdir(parents=True)
    plant_torch(folder / "last.ckpt", marker)
    with caplog.at_level("INFO", logger="tagtorch.itemrec.base"):
        model.fit(toy_data)
    assert not marker.exists()
    assert f"{folder / 'last.ckpt'}: cannot be read safely" in caplog.text
    assert "resuming" not in caplog.text
    assert model.history_ == DoRank(rank=4, trainer=trainer(2)).fit(toy_data).history_


@pytest.mark.parametrize("beside", ["an interrupted run", "nothing"])
def test_a_planted_best_checkpoint_never_runs(tmp_path, toy_data, caplog, beside):
    marker = tmp_path / "ran"
    checkpoints = tmp_path / "ckpt"
    model = DoRank(rank=4, trainer=interrupted_trainer(2, 4), checkpoint_dir=checkpoints)
    folder = model.run_folder(toy_data)
    if beside == "an interrupted run":
        with pytest.raises(RuntimeError, match="simulated"):
            model.fit(toy_data)
    else:
        folder.mkdir(parents=True)
    plant_torch(folder / "best.ckpt", marker)
    again = DoRank(rank=4, trainer=trainer(4), checkpoint_dir=checkpoints)
    with caplog.at_level("INFO", logger="tagtorch.itemrec.base"):
        again.fit(toy_data)
    assert not marker.exists()
    assert "resuming" not in caplog.text
    if beside == "an interrupted run":
        assert f"{folder / 'best.ckpt'}: cannot be read safely" in caplog.text
    assert again.history_ == DoRank(rank=4, trainer=trainer(4)).fit(toy_data).history_


def replant(folder: Path, name: str, plant, marker: Path) -> None:
    """Replaces a saved model's file by a payload and updates the manifest's digest."""
    plant(folder / name, marker)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"][name] = file_record(folder / name)
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("cls", [DoRank, PITF])
def test_planted_model_weights_never_run(tmp_path, toy_data, cls):
    marker = tmp_path / "ran"
    folder = tmp_path / "model"
    cls(rank=4, trainer=trainer(1)).fit(toy_data).save(folder)
    weights = folder / "weights.pt"
    plant_torch(weights, marker)
    with pytest.raises(UnreadableFileError, match=re.escape(f"{weights}: its size and SHA-256")):
        cls.load(folder)
    replant(folder, "weights.pt", plant_torch, marker)  # the manifest forged too
    with pytest.raises(UnreadableFileError, match=re.escape(f"{weights}: cannot be read safely")):
        cls.load(folder)
    assert not marker.exists()


def test_planted_count_arrays_never_run(tmp_path, toy_data):
    marker = tmp_path / "ran"
    folder = tmp_path / "model"
    TagPopularity().fit(toy_data).save(folder)
    replant(folder, "arrays.npz", plant_npz, marker)
    expected = re.escape(f"{folder / 'arrays.npz'}: ") + "(cannot be read|.*pickles)"
    with pytest.raises(UnreadableFileError, match=expected):
        TagPopularity.load(folder)
    assert not marker.exists()


def test_a_model_folder_is_checked_before_loading(tmp_path, toy_data):
    folder = tmp_path / "model"
    folder.write_bytes(b"a model file of the older, pickled format")
    model = DoRank(rank=4, trainer=trainer(1)).fit(toy_data)
    model.save(folder)  # replaces the file by a folder
    users, tags = torch.tensor([0, 1]), torch.tensor([2, 3])
    assert torch.equal(DoRank.load(folder).score(users, tags), model.score(users, tags))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["class"] == "tagtorch.itemrec.dorank.DoRank"
    assert manifest["settings"]["rank"] == 4 and manifest["sizes"] == [
        toy_data.n_users, toy_data.n_items, toy_data.n_tags]
    assert manifest["history"] == model.history_
    expected = re.escape(f"{folder / 'manifest.json'}: holds a ")
    with pytest.raises(UnreadableFileError, match=expected):
        PITF.load(folder)
    with pytest.raises(UnreadableFileError, match=re.escape("manifest.json: no such file")):
        DoRank.load(tmp_path / "elsewhere")
    (folder / "weights.pt").unlink()
    with pytest.raises(UnreadableFileError, match=re.escape("weights.pt: listed in")):
        DoRank.load(folder)
