"""The documentation site builds with ``mkdocs build --strict``: a broken link, a missing page or
README section, or a docstring mkdocstrings cannot render fails the test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    pages = {p.parent.name for p in (tmp_path / "site").glob("*/index.html")}
    assert {"getting_started", "api", "item_recommendation", "choosing", "benchmarks"} <= pages
