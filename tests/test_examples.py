"""Every notebook of ``examples/`` runs from top to bottom, as a reader runs it.

The code cells of each notebook are joined in order and run by a fresh Python process in a
temporary folder (nothing needs Jupyter); a failing cell fails the test with the output's end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))


def code_of(notebook: Path) -> str:
    """The notebook's code cells, in order, as one script."""
    cells = json.loads(notebook.read_text())["cells"]
    return "\n\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")


def test_there_is_a_notebook_per_task():
    assert {p.stem for p in NOTEBOOKS} >= {"tag_recommendation", "item_recommendation",
                                          "resource_ranking", "personalized_tags", "letor",
                                          "serving"}


@pytest.mark.integration
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_notebook_runs(notebook: Path, tmp_path: Path):
    done = subprocess.run([sys.executable, "-c", code_of(notebook)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "WANDB_MODE": "disabled"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
