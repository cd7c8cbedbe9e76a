"""TagRec's own output as the oracle of ``task=posts``'s baselines (issue 51).

The fixtures in ``tests/fixtures/tagrec/`` are the metric files TagRec's ``test.Pipeline``
(learning-layers/TagRec at 811793f, OpenJDK 17; only its outputs are stored, none of its code)
wrote for each split; their README says how they were made. For the HetRec 3-cores and the
synthetic set, tagtorch writes the folksonomy in TagRec's format (as TagRec was given it),
reads it back and makes the 3-core and the leave-last split itself with its default settings;
for the one-post-per-user samples it reads TagRec's own random split (unseeded, so stored).
Every method must give TagRec's recall, precision, F1, MRR, MAP, nDCG and coverage at every
``k`` from 1 to 10 (within 1e-6; Last.fm 0.001: :data:`TOLERANCE`).

``test_the_fixtures_are_what_the_jar_writes`` (slow) rebuilds the fixtures with the jar where
``TAGREC_HOME`` names a built TagRec (``classes/`` with ``../shared/tagrec-oracle``'s drivers).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

import tagtorch as tt
from tagtorch.data.loaders.tagrec import load_tagrec, write_tagrec
from tagtorch.posts.data import PostData, personalized_split
from tagtorch.posts.metrics import mean_metrics, post_metrics

FIXTURES = Path(__file__).parent / "fixtures" / "tagrec"
CONF = Path(tt.__file__).parent / "conf" / "model"
TAGREC_NAMES = {"mp": "mp", "mp_u": "mp_u_5", "mp_r": "mp_r_5", "mp_ur": "mp_ur_5",
                "cf": "usercf_5", "apr": "apr", "folkrank": "fr", "girp": "girp",
                "girptm": "girptm", "bll": "bll_5_0.5", "bll_c": "bll_c_5_0.5"}
"""tagtorch's config -> the name TagRec's Pipeline gives its output."""
COGNITIVE = {"three_layers": ("layers_5_5", {}),
             "three_layers_user": ("userlayers_5_5", {"resource": False}),
             "three_lt": ("layerstagbll_5_5", {}),
             "three_lt_user": ("userlayerstagbll_5_5", {"resource": False}),
             "three_lt_topic": ("layerstopicbll_5_5", {}),
             "three_lt_topic_user": ("userlayerstopicbll_5_5", {"resource": False}),
             "bll_ac": ("bll_ac_5_0.5", {}), "bll_c_ac": ("bll_c_ac_5_0.5", {})}
"""TagRec's cognitive algorithms (issue 71): name -> (its output, overrides of the config named
without ``_user``), on the fixtures its jar ran them on (:data:`COGNITIVE_SPLITS`)."""
COGNITIVE_SPLITS = ("movielens", "ml_random_tagged", "ml_random")
COLUMNS = ("tagrec_recall", "tagrec_precision", "tagrec_f1", "tagrec_mrr", "tagrec_map",
           "tagrec_ndcg", "coverage")
"""The first seven columns of TagRec's ``*_metrics_avg.txt`` (one line per k = 1..10)."""
LEAVE_LAST = {"movielens": {}, "lastfm": {}, "synthetic": {"n_objects": 3000}}
"""Splits tagtorch makes itself (3-core, each user's last post): dataset -> loader options."""
GIVEN = {"bib_random": "bib_s", "cul_random": "cul_s", "ml_random_tagged": "ml_t",
         "ml_random": "ml_r"}
"""TagRec's stored random splits: folder -> file stem. The public one-post-per-user samples, and
a shuffled HetRec MovieLens sample with users of many posts and cold test users (issue 71)."""
DEFECT = {"ml_random": {"apr": {"tagrec_preference_ids": True},
                        "folkrank": {"tagrec_preference_ids": True}}}
"""Settings that copy a TagRec defect, where the split triggers it: its graph's user and
resource nodes shifted by training lines without tags (``tagtorch.posts.folkrank``)."""
TOLERANCE = {"lastfm": 0.001}
"""Largest allowed difference (the issue asks 0.005; the lists are TagRec's to the last digit
but on Last.fm, whose core keeps two training posts TagRec's reader drops (negative times), and
where BLL+C's float sums differ in the last bit: 0.0003). Elsewhere 1e-6: a wrong tie order
moves the means by 1e-4 to 1e-3."""


def tagrec_means(split: str, output: str) -> np.ndarray:
    """``[10, 7]`` TagRec's means at k = 1..10 (NaN, where no post had a list, read as 0)."""
    lines = (FIXTURES / split / f"{output}_metrics_avg.txt").read_text().split()
    rows = [[float(v.replace(",", ".")) for v in line.split(";")[:7]] for line in lines]
    assert len(rows) == 10
    return np.nan_to_num(np.array(rows))


@pytest.fixture(scope="module", params=[*LEAVE_LAST, *GIVEN])
def split(request, tmp_path_factory) -> tuple[str, PostData]:
    name = request.param
    if name in GIVEN:
        stem = FIXTURES / name / GIVEN[name]
        folk = load_tagrec(f"{stem}_train.txt.gz", test_path=f"{stem}_test.txt.gz",
                           integer_ids=True)
        return name, personalized_split(folk, p=1, split="given")
    if not os.environ.get("TAGTORCH_DATA_DIR") and name != "synthetic":
        pytest.skip("TAGTORCH_DATA_DIR (HetRec) not set")
    path = write_tagrec(tt.load(name, **LEAVE_LAST[name]),
                        tmp_path_factory.mktemp(name) / f"{name}.txt")
    return name, personalized_split(load_tagrec(path))  # p = 3, leave-last


def assert_equals_tagrec(model, data: PostData, split: str, output: str) -> None:
    """The model's TagRec metrics at k = 1..10 are TagRec's ``output`` on the split."""
    ranked = model.fit(data).top_tags(data.test, 10)
    means = mean_metrics(post_metrics(ranked, data.test.tags, range(1, 11)))
    ours = np.array([[means[f"{c}@{k}" if c != "coverage" else c] for c in COLUMNS]
                     for k in range(1, 11)])
    theirs = tagrec_means(split, output)
    difference = np.abs(ours - theirs)
    worst = np.unravel_index(np.argmax(difference), difference.shape)
    assert difference.max() <= TOLERANCE.get(split, 1e-6), (
        f"{COLUMNS[worst[1]]}@{worst[0] + 1}: ours {ours[worst]:.6f}, TagRec {theirs[worst]:.6f}")


@pytest.mark.parametrize("method", list(TAGREC_NAMES))
def test_every_baseline_equals_tagrecs_output(split, method):
    name, data = split
    node = OmegaConf.merge(OmegaConf.load(CONF / f"{method}.yaml")[method],
                           DEFECT.get(name, {}).get(method, {}))
    assert_equals_tagrec(instantiate(node), data, name, TAGREC_NAMES[method])


@pytest.mark.parametrize("solver", ["per_post", "by_tag"])
@pytest.mark.parametrize("method", ["apr", "folkrank"])
def test_both_of_folkranks_solvers_equal_tagrecs_output(split, method, solver):
    """Each post's own run (TagRec's sums) and the tags' columns (issue 73) give its lists."""
    name, data = split
    node = OmegaConf.merge(OmegaConf.load(CONF / f"{method}.yaml")[method],
                           DEFECT.get(name, {}).get(method, {}), {"solver": solver})
    assert_equals_tagrec(instantiate(node), data, name, TAGREC_NAMES[method])


@pytest.mark.parametrize("method", ["apr", "folkrank"])
def test_folkranks_default_graph_ignores_lines_without_tags(method):
    """Without TagRec's defect, a training line without tags changes nothing in the graph.

    ``ml_random_tagged`` is ``ml_random`` with its lines without tags dropped: the default
    FolkRank on ``ml_random``, scored on its test posts that have tags, gives TagRec's figures
    on ``ml_random_tagged`` (where TagRec's defect has nothing to shift).
    """
    stem = FIXTURES / "ml_random" / "ml_r"
    folk = load_tagrec(f"{stem}_train.txt.gz", test_path=f"{stem}_test.txt.gz", integer_ids=True)
    data = personalized_split(folk, p=1, split="given")
    tagged = data.test.take(np.flatnonzero(data.test.tags.lengths > 0))
    node = OmegaConf.load(CONF / f"{method}.yaml")[method]
    assert_equals_tagrec(instantiate(node), PostData(data.train, tagged, data.n_users,
                                                     data.n_resources, data.n_tags, None),
                         "ml_random_tagged", TAGREC_NAMES[method])


@pytest.mark.parametrize("method", list(COGNITIVE))
@pytest.mark.parametrize("split", COGNITIVE_SPLITS, indirect=True)
def test_tagrecs_cognitive_algorithms_equal_its_output(split, method):
    name, data = split
    output, overrides = COGNITIVE[method]
    config = method.removesuffix("_user")
    node = OmegaConf.merge(OmegaConf.load(CONF / f"{config}.yaml")[config], overrides)
    assert_equals_tagrec(instantiate(node), data, name, output)


@pytest.mark.parametrize("method", ["cf", "girp", "apr"])
def test_a_saved_model_keeps_the_lines_without_tags_in_place(method, tmp_path):
    """A training post without tags counts in TagRec's CF slots, GIRP positions and (its
    defect) FolkRank's ids: a model saved and loaded keeps those posts and their lines."""
    stem = FIXTURES / "ml_random" / "ml_r"
    folk = load_tagrec(f"{stem}_train.txt.gz", test_path=f"{stem}_test.txt.gz", integer_ids=True)
    data = personalized_split(folk, p=1, split="given")
    node = OmegaConf.merge(OmegaConf.load(CONF / f"{method}.yaml")[method],
                           DEFECT["ml_random"].get(method, {}))
    instantiate(node).fit(data).save(tmp_path / method)
    loaded = type(instantiate(node)).load(tmp_path / method)
    means = mean_metrics(post_metrics(loaded.top_tags(data.test, 10), data.test.tags, [10]))
    assert means["tagrec_mrr@10"] == pytest.approx(tagrec_means("ml_random", TAGREC_NAMES[
        method])[9, COLUMNS.index("tagrec_mrr")], abs=1e-12)


def test_the_split_is_tagrecs(split):
    """As many training and test posts as TagRec's split files held (the fixtures' README).

    Last.fm: TagRec's 3-core keeps 58,413 training posts, ours 58,415 (the same 1,277 test
    posts; the two posts are not traced yet).
    """
    name, data = split
    sizes = {"movielens": (17771, 656), "lastfm": (58415, 1277), "synthetic": (13549, 579),
             "bib_random": (4391, 1097), "cul_random": (6658, 1664),
             "ml_random_tagged": (1453, 362), "ml_random": (1464, 365)}
    assert (len(data.train), len(data.test)) == sizes[name]


@pytest.mark.slow
def test_the_fixtures_are_what_the_jar_writes(tmp_path):
    home = Path(os.environ.get("TAGREC_HOME", "/nonexistent"))
    if not (home / "classes" / "SplitDriver.class").exists() or shutil.which("java") is None:
        pytest.skip("TAGREC_HOME (a built TagRec with the oracle drivers) or java missing")
    classpath = ":".join([str(home / "classes"), *map(str, sorted((home / "lib").glob("*.jar")))])
    data = home / "data"
    for folder in ("csv", "results", "metrics"):
        shutil.rmtree(data / folder / "ml_core", ignore_errors=True)
        (data / folder / "ml_core").mkdir(parents=True)
    write_tagrec(tt.load("synthetic", n_objects=3000), data / "csv" / "ml_core" / "ml_p3.txt")

    def java(*args: str) -> None:
        subprocess.run(["java", "-Xmx3g", "-cp", classpath, *args], cwd=home, check=True,
                       capture_output=True, timeout=600)

    java("test.Pipeline", "core", "ml", "ml_p3")
    java("SplitDriver", "l1o", "ml_core/ml_p3")
    for algorithm in ("mp", "mp_ur", "cf", "fr", "girptm", "bll_c"):
        java("test.Pipeline", algorithm, "ml", "ml_p3")
    for method, stem in TAGREC_NAMES.items():
        written = (data / "metrics" / "ml_core" / f"{stem}_metrics_avg.txt").read_text()
        assert written == (FIXTURES / "synthetic" / f"{stem}_metrics_avg.txt").read_text(), method
