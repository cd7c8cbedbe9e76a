"""Nothing tagtorch reads from disk runs code, and a damaged file is never trusted.

A planted pickle whose ``__reduce__`` creates a marker file is put in every place tagtorch reads
(text cache, candidate cache, each ranker type's saved files, a run's resume pieces): the marker
must never appear, and the error (or, for caches, the warning) names the file. Truncated and
garbled cache entries are discarded with a warning and rebuilt; truncated and byte-flipped model
files are refused before a library parses them.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import logging
import pickle
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import pytorch_lightning as pl
import torch

from tagtorch.candidates.cache import CandidateCache
from tagtorch.candidates.candidate_set import CandidateSet
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.text import TextProcessor
from tagtorch.errors import UnreadableFileError
from tagtorch.evaluation.runs import MethodOutcome, RunPieces
from tagtorch.rankers.adarank import AdaRank
from tagtorch.rankers.gp import GPRanker
from tagtorch.rankers.latre import LatreWTS
from tagtorch.rankers.neural import ListScorer, NeuralRanker
from tagtorch.rankers.rankboost import RankBoost
from tagtorch.rankers.ranksvm import RankSVM
from tagtorch.rankers.single_feature import FeatureRanker
from tagtorch.rankers.trees import LambdaMARTRanker, MARTRanker, RandomForestRanker
from tagtorch.storage import MANIFEST_FILE


class Payload:
    """Unpickling this creates the file ``marker`` (stands for any code an attacker runs)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def plant(path: Path, marker: Path, kind: str = "pickle") -> None:
    """Writes a payload to ``path``: a plain pickle, or a torch file holding the pickle."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "pickle":
        path.write_bytes(pickle.dumps(Payload(marker)))
    else:
        buffer = io.BytesIO()
        torch.save({"state": Payload(marker)}, buffer)
        path.write_bytes(buffer.getvalue())


@pytest.mark.parametrize("kind", ["pickle", "torch"])
def test_the_payload_is_live(tmp_path, kind):
    """The planted files really run code when unpickled the unsafe way."""
    marker = tmp_path / "marker"
    plant(tmp_path / "file", marker, kind)
    if kind == "pickle":
        pickle.loads((tmp_path / "file").read_bytes())
    else:
        torch.load(tmp_path / "file", weights_only=False)
    assert marker.exists()


def damage(path: Path, how: str) -> None:
    """Truncates a file to half its size, or flips one byte in each eighth of it."""
    data = bytearray(path.read_bytes())
    if how == "truncate":
        data = data[: len(data) // 2]
    else:
        for position in range(len(data) // 16, len(data), max(len(data) // 8, 1)):
            data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def warned_about(caplog: pytest.LogCaptureFixture, path: Path) -> bool:
    return any(record.levelno == logging.WARNING and str(path) in record.getMessage()
               for record in caplog.records)


# -- text cache -------------------------------------------------------------------------------

def small_folksonomy() -> Folksonomy:
    frame = pd.DataFrame({"user": [1, 2, 2], "object": ["a", "b", "b"],
                          "tag": ["Rocks", "Jazz", "Hard Rocks"]})
    texts = pd.DataFrame({"title": ["Rolling Stones", "Miles Davis Café"]}, index=["a", "b"])
    return Folksonomy.from_frame(frame, texts=texts)


def assert_processed(folksonomy: Folksonomy) -> None:
    # by hand: lowercase, stopwords out, Porter stems ("rolling" -> "roll", "miles" -> "mile")
    assert sorted(folksonomy.tags) == ["hard rock", "jazz", "rock"]
    assert list(folksonomy.texts["title"]) == ["roll stone", "mile davi café"]


@pytest.mark.parametrize("how", ["pickle", "torch", "truncate", "garble"])
def test_a_planted_or_damaged_text_cache_entry_is_rebuilt_with_a_warning(tmp_path, caplog,
                                                                         how):
    f = small_folksonomy()
    processor = TextProcessor(cache_dir=str(tmp_path / "cache"))
    entry = processor._cache_path(f)
    marker = tmp_path / "marker"
    if how in ("pickle", "torch"):
        plant(entry, marker, how)
    else:
        processor.apply(f)
        damage(entry, how)
    with caplog.at_level(logging.WARNING):
        assert_processed(TextProcessor(cache_dir=str(tmp_path / "cache")).apply(f))
    assert not marker.exists()
    assert warned_about(caplog, entry)
    # the entry was rebuilt: the next run reads it without a warning
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert_processed(TextProcessor(cache_dir=str(tmp_path / "cache")).apply(f))
    assert not warned_about(caplog, entry)
    with np.load(entry, allow_pickle=False) as stored:
        assert "tags.data" in stored.files


# -- candidate cache --------------------------------------------------------------------------

def hand_made_candidates() -> CandidateSet:
    return CandidateSet(objects=torch.tensor([3, 9]), tags=torch.tensor([[4, 1, 7], [2, -1, -1]]),
                        features=torch.tensor([[[0.5, 1.0], [0.25, 0.0], [2.0, 3.0]],
                                               [[1.5, 0.5], [0.0, 0.0], [0.0, 0.0]]]),
                        labels=torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]),
                        mask=torch.tensor([[True, True, True], [True, False, False]]),
                        n_relevant=torch.tensor([2, 1]), feature_names=("sum_l", "wts"))


def assert_same_candidates(got: CandidateSet, expected: CandidateSet) -> None:
    for name, value in expected.state().items():
        if isinstance(value, torch.Tensor):
            torch.testing.assert_close(getattr(got, name), value, rtol=0, atol=0)
        else:
            assert getattr(got, name) == value


@pytest.mark.parametrize("how", ["pickle", "torch", "truncate", "garble"])
def test_a_planted_or_damaged_candidate_cache_entry_is_rebuilt_with_a_warning(tmp_path, caplog,
                                                                              how):
    cache = CandidateCache(tmp_path / "cache", {"data": "x"})
    entry = cache.path(0, "test")
    marker = tmp_path / "marker"
    builds = []

    def build() -> CandidateSet:
        builds.append(1)
        return hand_made_candidates()

    if how in ("pickle", "torch"):
        plant(entry, marker, how)
    else:
        cache.get(0, "test", build)
        damage(entry, how)
    with caplog.at_level(logging.WARNING):
        assert_same_candidates(cache.get(0, "test", build), hand_made_candidates())
    assert not marker.exists()
    assert warned_about(caplog, entry)
    built = len(builds)
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # rebuilt: read back without a warning
        assert_same_candidates(cache.get(0, "test", build), hand_made_candidates())
    assert len(builds) == built and not warned_about(caplog, entry)


# -- resume pieces ----------------------------------------------------------------------------

def hand_made_outcome() -> MethodOutcome:
    frame = pd.DataFrame({"object": np.array([5, 8], dtype=np.int64), "metric": ["ndcg@5"] * 2,
                          "value": np.array([0.25, np.nan], dtype=np.float32)})
    return MethodOutcome(results=[{"method": "m", "fold": 0, "metric": "ndcg@5", "value": 0.25}],
                        per_object=[frame.assign(method="m", fold=0)],
                        means={"m": {"ndcg@5": 0.25}}, run_lines={"m": ["5 Q0 t 1 2.0 m\n"]})


def test_a_run_piece_is_json_and_reads_back_the_same_outcome(tmp_path):
    journal = RunPieces(tmp_path / "pieces", {"m": "settings"})
    journal.write(0, "m", hand_made_outcome())
    [path] = (tmp_path / "pieces").iterdir()
    with gzip.open(path, "rt") as handle:
        assert json.load(handle)["key"] == "settings"
    back = journal.read(0, "m")
    expected = hand_made_outcome()
    assert (back.results, back.means, back.run_lines) == (
        expected.results, expected.means, expected.run_lines)
    pd.testing.assert_frame_equal(back.per_object[0], expected.per_object[0])
    assert RunPieces(tmp_path / "pieces", {"m": "other settings"}).read(0, "m") is None


@pytest.mark.parametrize("how", ["pickle", "torch", "truncate", "garble"])
def test_a_planted_or_damaged_run_piece_is_run_again_with_a_warning(tmp_path, caplog, how):
    journal = RunPieces(tmp_path / "pieces", {"m": "settings"})
    path = journal._path(0, "m")
    marker = tmp_path / "marker"
    if how in ("pickle", "torch"):
        plant(path, marker, how)
        # the piece name of earlier versions (a gzipped pickle) is never read either
        legacy = path.with_name(path.name.replace(".json.gz", ".pkl.gz"))
        legacy.write_bytes(gzip.compress(pickle.dumps(Payload(marker))))
    else:
        journal.write(0, "m", hand_made_outcome())
        damage(path, how)
    with caplog.at_level(logging.WARNING):
        assert journal.read(0, "m") is None
    assert not marker.exists()
    assert warned_about(caplog, path)


# -- saved rankers ----------------------------------------------------------------------------

def ranker_lists(n_lists: int = 24, seed: int = 0) -> CandidateSet:
    """Lists of 6 candidates whose relevant ones have the largest ``sum_l`` (``wts``: noise)."""
    g = torch.Generator().manual_seed(seed)
    features = torch.rand(n_lists, 6, 2, generator=g)
    labels = (features[..., 0] > 0.6).float()
    return CandidateSet(objects=torch.arange(n_lists), tags=torch.arange(6).repeat(n_lists, 1),
                        features=features, labels=labels,
                        mask=torch.ones(n_lists, 6, dtype=torch.bool),
                        n_relevant=labels.sum(1).long(), feature_names=("sum_l", "wts"))


RANKERS = {
    "rf-sklearn": lambda: RandomForestRanker(n_trees=5, n_leaves=8, n_jobs=1),
    "rf-lightgbm": lambda: RandomForestRanker(n_trees=5, n_leaves=8, backend="lightgbm",
                                              n_jobs=1),
    "mart-xgboost": lambda: MARTRanker(n_iterations=5, backend="xgboost", n_jobs=1),
    "lambdamart-lightgbm": lambda: LambdaMARTRanker(n_iterations=5, n_jobs=1),
    "lambdamart-xgboost": lambda: LambdaMARTRanker(n_iterations=5, backend="xgboost", n_jobs=1),
    "neural": lambda: NeuralRanker(
        scorer=functools.partial(ListScorer, hidden=[4]), holdout_fraction=0.25,
        trainer=functools.partial(pl.Trainer, max_epochs=1, accelerator="cpu", devices=1,
                                  enable_progress_bar=False)),
    "latre": lambda: LatreWTS(),
    "feature": lambda: FeatureRanker("sum_l"),
    "gp": lambda: GPRanker(population=6, generations=1, progress=False),
    "adarank": lambda: AdaRank(n_iterations=3),
    "rankboost": lambda: RankBoost(n_rounds=3),
    "ranksvm": lambda: RankSVM(max_iter=200),
}
FOLDERS = tuple(name for name in RANKERS if name != "feature")  # one model file each (the
# feature ranker learns nothing: its folder holds the manifest alone)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, tuple[type, Path, torch.Tensor]]:
    """Every ranker type fitted and saved: name -> (class, saved path, its test scores)."""
    folder = tmp_path_factory.mktemp("saved")
    train, test = ranker_lists(), ranker_lists(6, seed=1)
    out = {}
    for name, make in RANKERS.items():
        ranker = make().fit(train)
        ranker.save(folder / name)
        out[name] = (type(ranker), folder / name, ranker.score(test))
    return out


def saved_files(path: Path) -> list[Path]:
    return sorted(path.iterdir()) if path.is_dir() else [path]


def copy_saved(path: Path, to: Path) -> Path:
    if path.is_dir():
        shutil.copytree(path, to)
    else:
        shutil.copy(path, to)
    return to


def resign(file: Path) -> None:
    """Records a file's new size and SHA-256 in its folder's manifest, as an attacker could."""
    manifest = json.loads((file.parent / MANIFEST_FILE).read_text())
    manifest["files"][file.name] = {"size": file.stat().st_size,
                                    "sha256": hashlib.sha256(file.read_bytes()).hexdigest()}
    (file.parent / MANIFEST_FILE).write_text(json.dumps(manifest))


@pytest.mark.parametrize("name", list(RANKERS))
def test_every_saved_ranker_loads_to_the_same_scores(saved, name):
    cls, path, scores = saved[name]
    torch.testing.assert_close(cls.load(path).score(ranker_lists(6, seed=1)), scores)
    for file in saved_files(path):  # JSON, tensors, library-native or .npz files only
        if file.suffix != ".txt":
            assert file.read_bytes()[:2] in (b"{\n", b'{"', b"PK"), file


@pytest.mark.parametrize("name", list(RANKERS))
def test_a_ranker_manifest_that_pins_no_file_is_refused(saved, tmp_path, name):
    """A rewritten manifest with ``"files": {}`` would let any file beside it be read."""
    cls, path, _ = saved[name]
    if not path.is_dir() or len(saved_files(path)) < 2:
        pytest.skip(f"{name} saves no file besides its manifest")
    copy = copy_saved(path, tmp_path / name)
    manifest = json.loads((copy / MANIFEST_FILE).read_text())
    manifest["files"] = {}
    (copy / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(UnreadableFileError, match="does not list"):
        cls.load(copy)


@pytest.mark.parametrize("kind", ["pickle", "torch"])
@pytest.mark.parametrize("name", list(RANKERS))
def test_a_payload_planted_in_any_saved_ranker_file_never_runs(saved, tmp_path, name, kind):
    cls, path, _ = saved[name]
    marker = tmp_path / "marker"
    for i, original in enumerate(saved_files(path)):
        model_file = path.is_dir() and original.name != MANIFEST_FILE
        for resigned in (False, True) if model_file else (False,):
            copy = copy_saved(path, tmp_path / f"{i}-{resigned}-{name}")
            planted = copy / original.name if copy.is_dir() else copy
            plant(planted, marker, kind)
            if resigned:  # the attacker rewrites the manifest's digest too
                resign(planted)
            with pytest.raises(ValueError, match=re.escape(str(planted))):
                cls.load(copy)
            assert not marker.exists()


def test_a_saved_gp_expression_cannot_evaluate_python(saved, tmp_path):
    _, path, _ = saved["gp"]
    copy = copy_saved(path, tmp_path / "gp")
    state = json.loads((copy / "model.json").read_text())
    state["expression"] = "add(sum_l, __import__)"
    (copy / "model.json").write_text(json.dumps(state))
    resign(copy / "model.json")
    with pytest.raises(ValueError, match=r"model\.json.*__import__"):
        GPRanker.load(copy)


@pytest.mark.parametrize("how", ["truncate", "garble"])
@pytest.mark.parametrize("name", FOLDERS)
def test_a_truncated_or_flipped_model_file_is_refused_before_the_library_reads_it(
        saved, tmp_path, name, how):
    cls, path, _ = saved[name]
    copy = copy_saved(path, tmp_path / name)
    [model_file] = [f for f in copy.iterdir() if f.name != MANIFEST_FILE]
    damage(model_file, how)
    with pytest.raises(ValueError, match=re.escape(str(model_file)) + ".*truncated or altered"):
        cls.load(copy)


def test_a_forest_file_with_malformed_trees_is_refused(saved, tmp_path):
    """Even with matching digests, trees whose children loop or leave the array never reach
    the compiled scorer (a loop would hang it, an index out of range crash it)."""
    _, path, _ = saved["rf-sklearn"]
    for field, value in (("left", 0), ("right", 10**6), ("feature", 10**3), ("roots", -10**6)):
        copy = copy_saved(path, tmp_path / field)
        forest = copy / "forest.npz"
        with np.load(forest, allow_pickle=False) as stored:
            arrays = {name: stored[name].copy() for name in stored.files}
        arrays[field][0] = value  # the root of the first tree (a split: the lists vary)
        with open(forest, "wb") as out:
            np.savez(out, **arrays)
        resign(forest)
        with pytest.raises(ValueError, match=re.escape(str(forest)) + ": not a readable forest"):
            RandomForestRanker.load(copy)


def test_a_save_that_dies_half_way_leaves_the_earlier_file_whole(tmp_path, monkeypatch):
    from tagtorch import storage

    path = tmp_path / "model" / "weights.pt"
    path.parent.mkdir()
    storage.save_tensors({"w": torch.ones(3)}, path)
    before = path.read_bytes()

    def dying_save(obj, target):  # writes part of a file, then the process "dies"
        Path(target).write_bytes(b"PK\x03\x04 half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(storage.torch, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        storage.save_tensors({"w": torch.zeros(3)}, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["weights.pt"]
    assert torch.equal(storage.load_tensors(path)["w"], torch.ones(3))
