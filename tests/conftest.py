import contextlib
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tagtorch.candidates.latre import LatreCandidates
from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.splits import tag_recommendation_folds
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor
from tagtorch.rankers.latre import LatreWTS
from tagtorch.serve import start_service
from tagtorch.serving.tags import TagRecommender, display_names

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("TAGTORCH_TIMINGS", "off")  # no test writes the user's timing cache
CANDIDATES = {"max_rule_candidates": 50, "device": "cpu"}


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real HetRec files (TAGTORCH_DATA_DIR); tests needing them skip when it is unset."""
    value = os.environ.get("TAGTORCH_DATA_DIR")
    if not value:
        pytest.skip("TAGTORCH_DATA_DIR is not set: no real data to test on")
    path = Path(value)
    if not path.is_dir():
        pytest.skip(f"TAGTORCH_DATA_DIR={value} is not a folder")
    return path


@pytest.fixture(scope="session")
def with_profiles():
    """A synthetic folksonomy whose objects have random listener profiles (some none)."""
    raw = generate_folksonomy(n_objects=300, seed=1)
    rng = np.random.default_rng(0)
    objects = np.repeat(raw.objects, rng.integers(0, 6, len(raw.objects)))
    profiles = pd.DataFrame({"object": objects, "key": rng.integers(0, 40, len(objects)),
                             "weight": rng.integers(1, 1000, len(objects))})
    folksonomy = Folksonomy.from_frame(
        raw.assignments.assign(user=raw.users[raw.assignments["user"]],
                               object=raw.objects[raw.assignments["object"]],
                               tag=raw.tags[raw.assignments["tag"]]),
        texts=raw.texts.set_index(raw.objects), profiles=profiles)
    folksonomy = TextProcessor(cache=False).apply(folksonomy)
    return tag_recommendation_folds(folksonomy, n_folds=5, seed=0)[0], \
        TermIndex.from_folksonomy(folksonomy), folksonomy


@pytest.fixture(scope="session")
def fitted(tmp_path_factory):
    """A LATRE+wTS tag recommender on 400 synthetic objects.

    ``(raw, folksonomy, recommender, saved folder)``; copy the folder before posting to it.
    """
    raw = generate_folksonomy(n_objects=400, seed=5)
    processor = TextProcessor(cache=False)
    folksonomy = processor.apply(raw)
    recommender = TagRecommender.fit(folksonomy, processor, LatreCandidates(**CANDIDATES),
                                     LatreWTS(alpha=0.9),
                                     display=display_names(raw, processor, folksonomy),
                                     val_fraction=0.25, seed=3)
    folder = recommender.save(tmp_path_factory.mktemp("artifact") / "synthetic-latre_wts")
    return raw, folksonomy, recommender, folder


TOKEN = "test-token-0123456789abcdef"
AUTH = {"authorization": f"Bearer {TOKEN}"}


@contextlib.contextmanager
def serving(folder, *options, token=True):
    """:func:`start_server` as a block: yields the url, stops the server after the block."""
    process, url = start_server(folder, *options, token=token)
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def start_server(folder, *options, token=True):
    """The real service, started as a user starts it, on 127.0.0.1: ``(process, url)``.

    With ``token``, it takes posts with the token ``TOKEN`` (``AUTH`` is the header).
    """
    import subprocess

    if token:
        token_file = folder.parent / f"{folder.name}.token"
        token_file.write_text(TOKEN)
        options = ("--token-file", str(token_file), *options)
    try:
        return start_service(folder, "--max-body", "20000", *options, timeout=120,
                             output=subprocess.PIPE)
    except RuntimeError as error:
        pytest.fail(str(error))
