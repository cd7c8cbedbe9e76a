"""A saved model never runs code (issue 69): config nodes planted in every kind of artifact.

The probe is the chain a hostile replay found: settings whose ``_target_`` nodes, built by
Hydra's generic factory, call ``pandas.read_pickle`` on the bytes of a pickle whose payload
here creates a marker file. Each case plants it (or a variant) in a saved folder, re-pins the
manifests' digests as an attacker who can write the folder would, and loads the folder the
way a user does (``Recommender.load``, ``load_ranker``, ``python -m tagtorch.recommend``):
the load must be refused in one line naming the manifest, and the marker must not exist.
``test_the_probe_runs_code_through_hydra`` shows that the probe does run code where a config
reaches ``hydra.utils.instantiate``, so that a refused load is a refusal, not a broken probe.
"""

from __future__ import annotations

import json
import pickle
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hydra.utils import instantiate
from test_gp import toy_lists

from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor
from tagtorch.errors import UnreadableFileError
from tagtorch.itemrec.baselines import TwoDimensional
from tagtorch.posts.baselines import MostPopularUserResource
from tagtorch.rankers.base import load_ranker
from tagtorch.rankers.latre import LatreWTS
from tagtorch.rankers.neural import NeuralRanker
from tagtorch.resources.bm25 import BM25
from tagtorch.serving import (
    ItemRecommender,
    PostRecommender,
    Recommender,
    ResourceRecommender,
    TagRecommender,
)
from tagtorch.serving import cli as recommend
from tagtorch.serving.tags import RANKER_FOLDER
from tagtorch.storage import file_record

MANIFEST = "manifest.json"
REFUSALS = re.compile(r"a config node|is not in \(|`_partial_` config")
"""What the refusals of planted nodes say (another failure would not show the check works)."""


class _Touch:
    """A pickle payload: unpickling it creates ``path`` (the marker of code that ran)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return open, (self.path, "w")


def pickle_chain(marker: Path) -> dict[str, Any]:
    """``pandas.read_pickle(io.BytesIO(codecs.encode(<pickle text>, "latin-1")))`` as nodes."""
    text = pickle.dumps(_Touch(marker)).decode("latin-1")
    return {"_target_": "pandas.read_pickle",
            "filepath_or_buffer": {"_target_": "io.BytesIO", "initial_bytes": {
                "_target_": "codecs.encode", "obj": text, "encoding": "latin-1"}}}


def test_the_probe_runs_code_through_hydra(tmp_path):
    instantiate(pickle_chain(tmp_path / "ran"))
    assert (tmp_path / "ran").exists()


# ------------------------------------------------------------------------------ artifacts
@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    """One small folder of each kind: the four recommenders and three tag rankers."""
    root = tmp_path_factory.mktemp("saved")
    processor = TextProcessor(cache=False)
    folk = processor.apply(generate_folksonomy(n_objects=300, seed=3))
    PostRecommender.fit(folk, processor, MostPopularUserResource(), p=2).save(root / "posts")
    ResourceRecommender.fit(folk, processor, BM25(device="cpu")).save(root / "resources")
    ItemRecommender.fit(folk, processor, TwoDimensional(), p=3, val_fraction=0.2,
                        seed=1).save(root / "items")
    object_tags = folk.object_tags()
    TagRecommender(processor, TermIndex.from_folksonomy(folk), object_tags,
                   np.flatnonzero(object_tags.lengths > 0), list(folk.tags),
                   {"max_rule_candidates": 50, "device": "cpu"}, LatreWTS(alpha=0.9),
                   object_ids=[str(o) for o in folk.objects]).save(root / "tags")
    shutil.copytree(root / "tags" / RANKER_FOLDER, root / "latre")  # a saved LATRE+wTS
    NeuralRanker(loss="listnet", trainer=_trainer(), seed=0).fit(toy_lists(12, 1)) \
        .save(root / "neural")
    return root


def _trainer() -> Any:
    import functools

    import pytorch_lightning as pl

    return functools.partial(pl.Trainer, max_epochs=1, accelerator="cpu", logger=False,
                             enable_progress_bar=False, enable_model_summary=False)


def plant(folder: Path, inner: str, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edits the manifest of ``folder/inner`` and re-pins every manifest above it."""
    path = folder / inner / MANIFEST
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    parts = Path(inner).parts
    for depth in range(len(parts), 0, -1):  # the parent's record of each child folder
        parent, child = folder.joinpath(*parts[:depth - 1]), parts[depth - 1]
        record = json.loads((parent / MANIFEST).read_text())
        record["files"][child] = {"folder": True, **file_record(parent / child / MANIFEST)}
        (parent / MANIFEST).write_text(json.dumps(record))


def at(keys: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit setting the dotted ``keys`` of a manifest to ``value``."""
    def edit(manifest: dict[str, Any]) -> None:
        *path, last = keys.split(".")
        node = manifest
        for key in path:
            node = node.setdefault(key, {})
        node[last] = value
    return edit


def as_class(name: str, settings: dict[str, Any], key: str | None = None
             ) -> Callable[[dict[str, Any]], None]:
    """An edit making a model folder's manifest name class ``name`` with ``settings``."""
    def edit(manifest: dict[str, Any]) -> None:
        manifest["class"], manifest["settings"] = name, settings
    return edit


HYBRID = "tagtorch.posts.hybrid.Hybrid"
LAMBDAMART = "tagtorch.rankers.trees.LambdaMARTRanker"
ENSEMBLE = "tagtorch.itemrec.ensemble.ItemEnsemble"


def _cases(chain: dict[str, Any]) -> dict[str, tuple[str, str, list[tuple[str, Any]]]]:
    """``name -> (artifact, inner folder, [(edit target, edit)])``: where the chain goes."""
    sgd = {"_target_": "torch.optim.SGD", "_partial_": True, "lr": chain}
    return {
        "posts: the hybrid's ranker": ("posts", "model", [
            ("", at("model_class", HYBRID)), ("model", as_class(HYBRID, {"ranker": chain}))]),
        "posts: a setting of the hybrid's ranker": ("posts", "model", [
            ("", at("model_class", HYBRID)),
            ("model", as_class(HYBRID, {"ranker": {"_target_": LAMBDAMART,
                                                   "n_leaves": chain}}))]),
        "posts: the hybrid's neural ranker's trainer": ("posts", "model", [
            ("", at("model_class", HYBRID)),
            ("model", as_class(HYBRID, {"ranker": {
                "_target_": "tagtorch.rankers.neural.NeuralRanker",
                "trainer": {**chain, "_partial_": True}}}))]),
        "posts: a baseline's setting": ("posts", "model", [("model", at("settings.beta",
                                                                        chain))]),
        "posts: the artifact's settings": ("posts", "", [("", at("settings.extra", chain))]),
        "tags: the ranker's setting": ("tags", "ranker", [("ranker", at("settings.alpha",
                                                                       chain))]),
        "tags: the text pipeline": ("tags", "", [("", at("settings.processor.stemmer",
                                                         chain))]),
        "items: the model's setting": ("items", "model", [("model", at("settings.beta",
                                                                       chain))]),
        "items: an ensemble member": ("items", "model", [
            ("", at("model_class", ENSEMBLE)),
            ("model", as_class(ENSEMBLE, {"members": {"m": chain}}))]),
        "items: an ensemble member's optimizer": ("items", "model", [
            ("", at("model_class", ENSEMBLE)),
            ("model", as_class(ENSEMBLE, {"members": {"m": {
                "_target_": "tagtorch.itemrec.dorank.DoRank", "optimizer": sgd}}}))]),
        "resources: the ranker's setting": ("resources", "model", [
            ("model", at("settings.k1", [1.2, {"deep": chain}]))]),
        "resources: the artifact's settings": ("resources", "", [("", at("settings.processor",
                                                                         chain))]),
        "letor: a ranker's setting": ("latre", "", [("", at("settings.k", chain))]),
        "letor: xTReD's base": ("latre", "", [
            ("", as_class("tagtorch.rankers.xtred.XTReD", {"base": chain}))]),
        "letor: xTReD's base's setting": ("latre", "", [
            ("", as_class("tagtorch.rankers.xtred.XTReD", {"base": {
                "_target_": "tagtorch.rankers.latre.LatreWTS", "alpha": chain}}))]),
        "letor: the neural ranker's optimizer": ("neural", "", [("", at("settings.optimizer",
                                                                        {**chain,
                                                                         "_partial_": True}))]),
        "letor: the neural optimizer's setting": ("neural", "", [("", at("settings.optimizer",
                                                                         sgd))]),
        "letor: the neural ranker's loss parameters": ("neural", "", [
            ("", at("settings.loss_params", {"k": chain}))]),
    }


CASES = sorted(_cases({}))


def _load(artifact: str) -> Callable[[Path], Any]:
    """How a user loads a folder of this kind."""
    return load_ranker if artifact in ("latre", "neural") else Recommender.load


@pytest.mark.parametrize("case", CASES)
def test_a_planted_pickle_chain_is_refused_and_runs_nothing(artifacts, tmp_path, case):
    marker = tmp_path / "ran"
    artifact, _, edits = _cases(pickle_chain(marker))[case]
    folder = Path(shutil.copytree(artifacts / artifact, tmp_path / artifact))
    for inner, edit in edits:
        plant(folder, inner, edit) if inner else _edit_top(folder, edit)
    with pytest.raises(UnreadableFileError, match=MANIFEST) as caught:
        _load(artifact)(folder)
    message = str(caught.value)
    assert "\n" not in message and REFUSALS.search(message), message
    assert not marker.exists(), f"{case}: the payload ran"


def _edit_top(folder: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edits ``folder``'s own manifest (nothing above it to re-pin)."""
    manifest = json.loads((folder / MANIFEST).read_text())
    edit(manifest)
    (folder / MANIFEST).write_text(json.dumps(manifest))


def test_the_recommend_command_refuses_a_hybrid_carrying_the_chain(artifacts, tmp_path,
                                                                    capsys):
    marker = tmp_path / "ran"
    folder = Path(shutil.copytree(artifacts / "posts", tmp_path / "posts"))
    _edit_top(folder, at("model_class", HYBRID))
    plant(folder, "model", as_class(HYBRID, {"ranker": pickle_chain(marker)}))
    code = recommend.main([str(folder), "--user", "u1", "--resource", "r1"])
    error = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in error and len(error.splitlines()) == 1, error
    assert not marker.exists()


def test_saved_configs_of_trusted_classes_still_load(artifacts, tmp_path):
    """The check refuses nodes, not models: a neural ranker's saved factories load back."""
    ranker = load_ranker(artifacts / "neural")
    assert isinstance(ranker, NeuralRanker) and ranker.init_args["trainer"] is not None
    lists = toy_lists(4, 2)
    assert ranker.score(lists).shape == lists.mask.shape


@pytest.mark.parametrize("seed", range(200))
def test_fuzzed_manifests_are_refused_in_one_line_or_load(artifacts, tmp_path, seed):
    """Random changes to every kind's manifests: a load ends in a model or one line."""
    rng = random.Random(seed)
    artifact = rng.choice(["posts", "items", "resources", "tags", "latre", "neural"])
    folder = Path(shutil.copytree(artifacts / artifact, tmp_path / artifact))
    inner = "" if artifact in ("latre", "neural") else rng.choice(["", "model" if artifact
                                                                   != "tags" else "ranker"])
    for _ in range(rng.randint(1, 3)):
        mutate = _mutation(rng, pickle_chain(tmp_path / "ran"))
        plant(folder, inner, mutate) if inner else _edit_top(folder, mutate)
    try:
        _load(artifact)(folder)
    except UnreadableFileError as error:
        assert "\n" not in str(error)
    assert not (tmp_path / "ran").exists()


FUZZ_VALUES: list[Any] = [None, True, -1, 0, 2**63, 1e308, float("nan"), "", "x" * 10_000,
                          [], {}, [[[]]], {"_target_": "os.getcwd"}, {"_partial_": True},
                          {"_args_": [1]}, "tagtorch.rankers.latre.LatreWTS", -(10**30)]


def _mutation(rng: random.Random, chain: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """One random change to a manifest: a value replaced, a key removed, or the chain added."""
    def edit(manifest: dict[str, Any]) -> None:
        node: Any = manifest
        while isinstance(node, dict) and node and rng.random() < 0.6:
            key = rng.choice(sorted(node))
            if not isinstance(node[key], dict):
                break
            node = node[key]
        if not isinstance(node, dict) or not node:
            return
        key = rng.choice(sorted(node))
        choice = rng.random()
        if choice < 0.2:
            del node[key]
        else:
            node[key] = chain if choice < 0.4 else rng.choice(FUZZ_VALUES)
    return edit


# ----------------------------------------------------------------- other state read back
def test_a_gzip_bomb_planted_as_a_run_piece_is_run_again_without_inflating(tmp_path, caplog):
    """A run folder's piece inflating 1000-fold is refused after reading a bounded prefix."""
    import gzip
    import logging
    import tracemalloc

    from tagtorch.evaluation.runs import PIECE_RATIO, RunPieces

    pieces = RunPieces(tmp_path / "pieces", {"m": "settings"})
    path = pieces._path(0, "m")
    path.parent.mkdir(parents=True)
    with gzip.open(path, "wb", compresslevel=9) as handle:
        for _ in range(50):
            handle.write(b" " * 2**20)  # 50 MiB of JSON whitespace
    assert path.stat().st_size * PIECE_RATIO < 50 * 2**20
    tracemalloc.start()
    with caplog.at_level(logging.WARNING):
        assert pieces.read(0, "m") is None
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1.5 * PIECE_RATIO * path.stat().st_size + 4 * 2**20, peak  # not 50 MiB
    assert "inflates past" in caplog.text


def test_a_hybrid_read_back_never_writes_where_its_manifest_says(tmp_path):
    """Loading a hybrid refits its ranker: folders from its manifest are not used."""
    from tagtorch.posts.hybrid import Hybrid

    elsewhere = str(tmp_path / "elsewhere")
    ranker = Hybrid({"_target_": "tagtorch.rankers.neural.NeuralRanker", "log_dir": elsewhere,
                     "checkpoint_dir": elsewhere, "seed": 3}, seed=5)._build_ranker()
    assert isinstance(ranker, NeuralRanker)
    assert ranker.init_args["log_dir"] is None and ranker.init_args["checkpoint_dir"] is None
    assert ranker.init_args["seed"] == 5
