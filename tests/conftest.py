import os
from pathlib import Path

import pytest

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
