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


@pytest.mark.integration
def test_a_run_file_does_not_change_with_the_test_posts_tags(tmp_path):
    """Issue 71: the tag codes came from the training and test tags sorted together, so a test
    tag that sorts first renumbered every run file (the lists themselves unchanged)."""
    import gzip

    given = ROOT / "tests" / "fixtures" / "tagrec" / "ml_random_tagged"
    train = tmp_path / "x_train.txt"
    train.write_bytes(gzip.decompress((given / "ml_t_train.txt.gz").read_bytes()))
    lines = gzip.decompress((given / "ml_t_test.txt.gz").read_bytes()).decode().splitlines()
    runs = []
    for name, first_tag in (("plain", None), ("renamed", "0000 a new tag")):
        test = tmp_path / f"{name}_test.txt"
        fields = lines[0].split('";"')
        if first_tag:
            fields[3] = first_tag  # a tag no training post holds, sorting before every other
        test.write_text("\n".join(['";"'.join(fields), *lines[1:]]) + "\n")
        result = run_task(compose_cfg(tmp_path / name, [
            "task=posts", "data=tagrec", f"data.path={train}", f"data.test_path={test}",
            "task.split=given", "task.p=1", "model=[mp_ur]", "task.seeds=[0]"]))
        runs.append((result.folder / "run.trec").read_text())
        qrels = (result.folder / "qrels.trec").read_text()
    assert runs[0] == runs[1] and len(runs[0].splitlines()) > 1000
    listed = {int(line.split()[2]) for line in runs[0].splitlines()}
    assert int(qrels.splitlines()[0].split()[2]) > max(listed)  # the new tag: after training's
