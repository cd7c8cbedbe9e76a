"""Every command the README and the docs pages show composes, and every path they name exists.

Each ``python -m tagtorch.train ...`` of README.md and docs/*.md (code blocks, with their ``\\``
continuations, and inline code spans) is composed through Hydra with its overrides and checked
by :func:`~tagtorch.config_checks.check_config`, as a run does before loading data: a config name
that does not exist, a setting the task does not take or a method of the wrong task fails here.
A command that cannot be composed on purpose carries a ``# not run`` comment, and a pattern with
a placeholder method (``model=NAME``) is skipped; ``trainer=gpu`` is checked with
``trainer=cpu`` on a machine without CUDA; sweep expressions of a ``-m`` command
(``range(...)``, ``choice(...)``) are left to the sweeper. The commands actually run end to end
are those of the integration tests (the main job, the experiments on the synthetic generator,
the notebooks); the others are composed, not run. Every ``benchmarks/*.py`` a page runs and
every ``tagtorch/conf/...`` file it names exists, and every relative link of the README points
to a file.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import torch
from test_train import compose_cfg

from tagtorch.config_checks import check_config, drop_unselected_settings

pytestmark = pytest.mark.integration  # CI's second step (the default run keeps its 8 minutes)

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_TRAIN = r"python3? -m tagtorch\.train\b"
_SWEEP = re.compile(r"=(range|choice|interval|glob)\(")


def _commands(text: str) -> list[str]:
    """The train commands of a page: code-block lines and inline code spans."""
    text = re.sub(r"\\\n\s*", " ", text)  # shell continuations
    found = [" ".join(span.split()) for span in re.findall(rf"`({_TRAIN}[^`]*)`", text)]
    in_block = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_block = not in_block
        elif in_block and re.match(rf"\s*{_TRAIN}", line):
            found.append(line.strip())
    return found


COMMANDS = sorted({(page.relative_to(ROOT).as_posix(), command)
                   for page in PAGES for command in _commands(page.read_text(encoding="utf-8"))})


def _overrides(command: str) -> list[str]:
    words = shlex.split(command.split(" #")[0])[3:]
    if not torch.cuda.is_available():
        words = ["trainer=cpu" if w == "trainer=gpu" else w for w in words]
    return [w for w in words if w not in ("-m", "--multirun") and not _SWEEP.search(w)]


def test_the_pages_show_commands():
    assert len(COMMANDS) >= 60  # the extraction itself works (87 when written)


@pytest.mark.parametrize("page, command", COMMANDS, ids=[f"{p}:{c[24:70]}" for p, c in COMMANDS])
def test_every_shown_command_composes_and_passes_the_checks(tmp_path, page, command):
    if "# not run" in command or re.search(r"\bNAME\b", command):
        pytest.skip(f"{page}: marked as not run, or a pattern with a placeholder NAME")
    cfg = compose_cfg(tmp_path, _overrides(command))
    drop_unselected_settings(cfg)
    check_config(cfg)


def test_every_named_script_config_and_readme_link_exists():
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for path in re.findall(r"python3? (benchmarks/[\w./-]+\.py)", text):
            missing += [] if (ROOT / path).is_file() else [f"{page.name}: {path}"]
        for path in re.findall(r"(?<![\w/])(tagtorch/conf/[\w/.-]*\w)", text):
            if "NAME" not in path and not path.endswith("_"):  # a pattern, not a file
                missing += [] if (ROOT / path).exists() else [f"{page.name}: {path}"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for link in re.findall(r"\]\(([^)#:]+)\)", readme):
        missing += [] if (ROOT / link).exists() else [f"README.md: {link}"]
    assert not missing, missing
