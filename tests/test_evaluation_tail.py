"""The shared tail of every evaluation: atomic writes, TREC lines, outcomes, run pieces, the
folksonomy fingerprint and item-recommendation resumption from pieces."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf
from test_itemrec import toy_folksonomy

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.evaluation import runs
from tagtorch.evaluation.item_recommendation import ItemRecommendationTask
from tagtorch.evaluation.runs import MethodOutcome, RunPieces, write_run
from tagtorch.evaluation.trec import qrels_lines, ranked_lines
from tagtorch.storage import atomic_write

# -- atomic writes ----------------------------------------------------------------------------

def test_atomic_write_replaces_only_on_success(tmp_path):
    target = tmp_path / "sub" / "file.txt"
    with atomic_write(target) as partial:
        partial.write_text("first")
        assert not target.exists()
    assert target.read_text() == "first"
    with pytest.raises(RuntimeError), atomic_write(target) as partial:
        partial.write_text("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "first"  # the old file is untouched
    assert [p.name for p in target.parent.iterdir()] == ["file.txt"]  # no temporary left


def test_a_failing_run_writer_leaves_no_half_file(tmp_path, monkeypatch):
    results = pd.DataFrame({"method": ["m"], "fold": [0], "metric": ["p@1"], "value": [0.5]})
    objects = pd.DataFrame({"method": ["m"], "fold": [0], "object": [3], "metric": ["p@1"],
                            "value": [0.5]})

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    with pytest.raises(OSError):
        write_run(tmp_path, results, objects, "t")
    assert list(tmp_path.iterdir()) == []


# -- TREC lines -------------------------------------------------------------------------------

def test_ranked_and_qrels_lines_by_hand():
    documents = np.array([[5, 2, 9], [1, 4, 0]])
    keep = np.array([[True, False, True], [True, True, False]])
    assert ranked_lines(["a", "b"], documents, keep, "run", 10) == [
        "a Q0 5 1 10 run\n", "a Q0 9 3 8 run\n", "b Q0 1 1 10 run\n", "b Q0 4 2 9 run\n"]
    assert qrels_lines(["a", "b"], [np.array([2]), np.array([0, 4])]) == [
        "a 0 2 1\n", "b 0 0 1\n", "b 0 4 1\n"]


def test_run_writer_writes_trec_files_and_drops_stale_ones(tmp_path):
    results = pd.DataFrame({"method": ["m"], "fold": [0], "metric": ["p@1"], "value": [0.5]})
    objects = pd.DataFrame({"method": ["m"], "fold": [0], "object": [3], "metric": ["p@1"],
                            "value": [0.5]})
    (tmp_path / "run.old.trec").write_text("stale\n")
    write_run(tmp_path, results, objects, "t", qrels=["3 0 1 1\n"],
              runs={"run.trec": ["3 Q0 1 1 1 m\n"]})
    assert sorted(p.name for p in tmp_path.glob("*.trec")) == ["qrels.trec", "run.trec"]
    assert (tmp_path / "run.trec").read_text() == "3 Q0 1 1 1 m\n"
    with gzip.open(tmp_path / "per_object.csv.gz", "rt") as handle:  # really gzipped
        assert handle.readline().strip() == "method,fold,object,metric,value"
    write_run(tmp_path, results, objects, "t")  # no TREC files this time: none are left
    assert not list(tmp_path.glob("*.trec"))


# -- outcomes and pieces ----------------------------------------------------------------------

def test_outcome_rows_means_and_melt_by_hand():
    values = {"p@1": torch.tensor([1.0, 0.0, 1.0]), "map": torch.tensor([0.5, float("nan"), 1.0])}
    out = MethodOutcome.from_values("m", 2, np.array([10, 11, 12]), values,
                                    extra={"fit_seconds": 4.0}, run_lines=["x\n"])
    assert out.means == {"m": {"p@1": pytest.approx(2 / 3), "map": 0.75, "fit_seconds": 4.0}}
    assert [(r["metric"], r["fold"]) for r in out.results] == [
        ("p@1", 2), ("map", 2), ("fit_seconds", 2)]
    results, per_object = out.frames()
    assert results["value"].tolist() == [out.means["m"][k] for k in ("p@1", "map", "fit_seconds")]
    assert list(per_object.columns) == ["method", "fold", "object", "metric", "value"]
    assert per_object["object"].tolist() == [10, 11, 12, 10, 11, 12]
    assert per_object["metric"].tolist() == ["p@1"] * 3 + ["map"] * 3
    assert per_object["value"].iloc[:3].tolist() == [1.0, 0.0, 1.0]
    assert np.isnan(per_object["value"].iloc[4])
    assert out.run_lines == {"m": ["x\n"]}


def test_a_piece_keeps_its_learning_curve(tmp_path):
    curve = pd.DataFrame({"epoch": [0.0, 1.0], "val_dcg@10": np.array([0.25, 0.5], "float32"),
                          "method": "m", "seed": 3})
    out = MethodOutcome.from_values("m", 3, np.arange(2), {"p@1": torch.tensor([1.0, 0.0])},
                                    curve=curve)
    pieces = RunPieces(tmp_path / "pieces", {"m": "key"}, unit="seed")
    pieces.write(3, "m", out)
    assert [p.name for p in (tmp_path / "pieces").iterdir()] == ["seed3.m.json.gz"]
    back = pieces.read(3, "m")
    pd.testing.assert_frame_equal(back.curves[0], curve)
    assert back.means == out.means


# -- fingerprint ------------------------------------------------------------------------------

def base_folksonomy(**changes) -> Folksonomy:
    frame = pd.DataFrame({"user": ["u1", "u1", "u2"], "object": ["a", "b", "a"],
                          "tag": ["rock", "pop", "rock"], "timestamp": [1, 2, 3]})
    texts = pd.DataFrame({"title": ["one", "two"]}, index=["a", "b"])
    categories = pd.DataFrame({"object": ["a"], "category": ["music"]})
    kwargs = {"texts": texts, "categories": categories, "name": "x"} | changes
    return Folksonomy.from_frame(changes.pop("frame", frame), **{
        k: v for k, v in kwargs.items() if k != "frame"})


def test_fingerprint_covers_every_part_but_the_name():
    base = base_folksonomy().fingerprint()
    assert base_folksonomy(name="other").fingerprint() == base
    frame = pd.DataFrame({"user": ["u1", "u1", "u2"], "object": ["a", "b", "a"],
                          "tag": ["rock", "pop", "rock"], "timestamp": [1, 2, 4]})
    others = {
        "timestamp": base_folksonomy(frame=frame),
        "raw user id": base_folksonomy(frame=frame.assign(timestamp=[1, 2, 3],
                                                          user=["u1", "u1", "u3"])),
        "text": base_folksonomy(texts=pd.DataFrame({"title": ["one", "three"]},
                                                   index=["a", "b"])),
        "text field name": base_folksonomy(texts=pd.DataFrame({"name": ["one", "two"]},
                                                              index=["a", "b"])),
        "category": base_folksonomy(categories=pd.DataFrame({"object": ["b"],
                                                             "category": ["music"]})),
        "category name": base_folksonomy(categories=pd.DataFrame({"object": ["a"],
                                                                  "category": ["jazz"]})),
    }
    for what, folksonomy in others.items():
        assert folksonomy.fingerprint() != base, what
    assert len({f.fingerprint() for f in others.values()}) == len(others)


# -- item recommendation resumes from its pieces ----------------------------------------------

def item_models() -> dict:
    trainer = {"_target_": "pytorch_lightning.Trainer", "_partial_": True, "max_epochs": 3,
               "accelerator": "cpu", "enable_progress_bar": False}
    return {"model": {
        "dorank": {"_target_": "tagtorch.itemrec.dorank.DoRank", "trainer": trainer, "rank": 4,
                   "patience": 10, "seed": 0, "checkpoint_dir": None},
        "most_popular": {"_target_": "tagtorch.itemrec.baselines.TagPopularity"}}}


def test_item_recommendation_reuses_finished_pieces(tmp_path, monkeypatch):
    folksonomy = toy_folksonomy()
    cfg = OmegaConf.create(item_models())

    def task(resume: bool) -> ItemRecommendationTask:
        return ItemRecommendationTask(seeds=[0, 1], p=1, trec_depth=5, resume=resume)

    monkeypatch.setattr(runs.RunPieces, "clear", lambda self: None)  # as if interrupted
    first = task(False).run(folksonomy, cfg, tmp_path).results
    written = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    pieces = tmp_path / "pieces"
    assert sorted(p.name for p in pieces.iterdir()) == [
        "seed0.dorank.json.gz", "seed0.most_popular.json.gz", "seed1.dorank.json.gz",
        "seed1.most_popular.json.gz"]
    (pieces / "seed1.dorank.json.gz").unlink()  # stopped before this one was finished
    (pieces / "seed0.most_popular.json.gz").write_bytes(b"garbage")  # and this one is damaged
    monkeypatch.undo()
    fitted = []
    original = ItemRecommendationTask._run_model

    def counting(self, folksonomy, data, seed, name, *args):
        fitted.append((seed, name))
        return original(self, folksonomy, data, seed, name, *args)

    monkeypatch.setattr(ItemRecommendationTask, "_run_model", counting)
    resumed = task(True).run(folksonomy, cfg, tmp_path).results
    assert sorted(fitted) == [(0, "most_popular"), (1, "dorank")]
    timing = ["fit_seconds", "ms_model"]
    pd.testing.assert_frame_equal(resumed[~resumed["metric"].isin(timing)],
                                  first[~first["metric"].isin(timing)], check_exact=True)
    for name in ["per_object.csv.gz", "curves.csv", "qrels.trec", "run.dorank.trec",
                 "run.most_popular.trec"]:
        if name.endswith(".gz"):
            assert gzip.decompress((tmp_path / name).read_bytes()) == gzip.decompress(
                written[name]), name
        else:
            assert (tmp_path / name).read_bytes() == written[name], name
    assert not pieces.exists()
    # other settings: nothing is reused
    monkeypatch.setattr(runs.RunPieces, "clear", lambda self: None)
    task(False).run(folksonomy, cfg, tmp_path)
    fitted.clear()
    other = OmegaConf.create(item_models())
    other.model.dorank.rank = 3
    task(True).run(folksonomy, other, tmp_path)
    assert sorted(fitted) == [(0, "dorank"), (1, "dorank")]
    key = json.loads(gzip.decompress((pieces / "seed0.dorank.json.gz").read_bytes()))["key"]
    assert json.loads(key)["data"] == folksonomy.fingerprint()
