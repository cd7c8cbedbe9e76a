import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tagtorch.data.folksonomy import Folksonomy
from tagtorch.data.splits import tag_recommendation_folds
from tagtorch.data.synthetic import generate_folksonomy
from tagtorch.data.terms import TermIndex
from tagtorch.data.text import TextProcessor

ROOT = Path(__file__).resolve().parents[1]


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
