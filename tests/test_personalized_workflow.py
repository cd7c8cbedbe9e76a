"""The documented workflow for one's own TagRec core file (docs/personalized.md), run end to end."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from test_train import compose_cfg

import tagtorch as tt
from tagtorch.data.loaders.tagrec import write_tagrec
from tagtorch.train import run_task

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_the_documented_core_file_command_runs(tmp_path):
    page = (ROOT / "docs" / "personalized.md").read_text(encoding="utf-8")
    section = page.split("## Your own TagRec core file", 1)[1]
    first = r"python -m tagtorch\.train task=posts data=tagrec data\.path=my_core"
    command = next(line for line in section.splitlines() if re.match(first, line))
    core = write_tagrec(tt.load("synthetic", n_objects=400, seed=0), tmp_path / "my_core.txt")
    overrides = [w.replace("my_core.txt", str(core)) for w in shlex.split(command)[3:]]
    result = run_task(compose_cfg(tmp_path / "run", overrides))
    methods = set(result.results["method"])
    assert {"hybrid_lambdamart", "bll_c", "folkrank", "mp_ur"} <= methods
    report = (result.folder / "report.md").read_text(encoding="utf-8")
    assert "## Best first by" in report and "hybrid_lambdamart" in report
