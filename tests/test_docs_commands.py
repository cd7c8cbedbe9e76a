"""Every command the README and the docs pages show is run, or composed and marked as not run.

Each ``python -m tagtorch.train ...`` of README.md and docs/*.md (code blocks, with their ``\\``
continuations, and inline code spans) is composed through Hydra with its overrides and checked
by :func:`~tagtorch.config_checks.check_config`, as a run does before loading data: a config name
that does not exist, a setting the task does not take or a method of the wrong task fails here.
A command that cannot be composed on purpose carries a ``# not run`` comment, and a pattern with
a placeholder method (``model=NAME``) is skipped; ``trainer=gpu`` is checked with
``trainer=cpu`` on a machine without CUDA; sweep expressions of a ``-m`` command
(``range(...)``, ``choice(...)``) are left to the sweeper.

Every command on the synthetic generator that needs no GPU, cluster, sweep or placeholder is
then run end to end, as written (its run folder in a temporary directory); every other one is
marked as not run, with the reason, on ``docs/commands.md``, which this module renders
(``python tests/test_docs_commands.py`` writes it; the test fails when the page differs). Every
``benchmarks/*.py`` a page runs and every ``tagtorch/conf/...`` file it names exists, and every
relative link of the README points to a file.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_train import compose_cfg

from tagtorch.config_checks import check_config, drop_unselected_settings

pytestmark = pytest.mark.integration  # CI's second step (the default run keeps its 8 minutes)

ROOT = Path(__file__).resolve().parents[1]
COMMANDS_PAGE = ROOT / "docs" / "commands.md"
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p != COMMANDS_PAGE)]
SYNTHETIC = "tagtorch.data.synthetic.generate_folksonomy"
_PLACEHOLDER = re.compile(r"\b(NAME|FOLDER|FILE|HOST|M|X)\b|\.\.\./")
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


RUN_ELSEWHERE = {
    "python -m tagtorch.train task=letor data=letor data.path=FOLDER":
        "tests/test_letor.py::test_the_readmes_letor_command_runs_as_written_with_lambdamart_"
        "by_default (a synthetic LETOR folder for FOLDER)",
}
"""Commands with a placeholder that another test runs, with a value for it."""


def why_not_run(command: str, tmp_path: Path) -> str | None:
    """Why a shown command is not run end to end by the tests (None: it is)."""
    words = shlex.split(command.split(" #")[0])[3:]
    if "# not run" in command:
        return "marked `# not run` on its page"
    if _PLACEHOLDER.search(command):
        return "a pattern: a placeholder stands for your value"
    if "-m" in words or "--multirun" in words:
        return "a sweep (several runs)"
    if "trainer=gpu" in words:
        return "needs a GPU"
    if any(w.startswith(("task.backend=", "task.address=", "trainer.devices=")) for w in words):
        return "needs a cluster or several devices"
    target = compose_cfg(tmp_path, _overrides(command)).data._target_
    if target != SYNTHETIC:
        return f"real data (`{target.rsplit('.', 1)[-1]}`)"
    return None


def _traced() -> dict[str, str]:
    """Provenance record name by its run's command (``docs/runs/``; where and logger left out)."""
    return {_what(json.loads(record.read_text(encoding="utf-8"))["command"]): record.stem
            for record in sorted((ROOT / "docs" / "runs").glob("*.json"))}


def _what(command: str) -> str:
    """A command's words that say what it runs (not where it writes, nor its logger)."""
    return shlex.join(w for w in shlex.split(command.split(" #")[0])
                      if not w.startswith(("hydra.run.dir=", "logger=")))


def commands_page(tmp_path: Path) -> str:
    """``docs/commands.md``: each page's commands, and whether the tests run them."""
    lines = ["# The commands of these pages, and how they are checked", "",
             "Rendered by `python tests/test_docs_commands.py`; do not edit by hand. Every "
             "`python -m tagtorch.train` command of the README and the docs pages is composed "
             "and passes the run's config checks in CI (`tests/test_docs_commands.py`); those "
             "marked *run* also run end to end there, as written, on the synthetic generator. "
             "The others are not run by the tests, for the reason given: most need the real "
             "data, and the studies' own runs are on [provenance](provenance.md).", ""]
    page_of, traced = None, _traced()
    for page, command in COMMANDS:
        if page != page_of:
            lines += [*([""] if page_of else []), f"## {page}", "", "| command | checked |",
                      "|---|---|"]
            page_of = page
        reason = why_not_run(command, tmp_path)
        elsewhere = RUN_ELSEWHERE.get(command.split(" #")[0].strip())
        record = traced.get(_what(command))
        if reason is not None and record is not None:
            reason += f"; its run: [`{record}`](provenance.md#{record})"
        shown = command.split(" #")[0].strip().replace("|", "\\|")
        checked = ("*run*" if reason is None else f"*run* by `{elsewhere}`" if elsewhere
                   else "not run: " + reason)
        lines.append(f"| `{shown}` | {checked} |")
    return "\n".join(lines) + "\n"


UNIQUE = list(dict.fromkeys(shlex.join(shlex.split(c.split(" #")[0])) for _, c in COMMANDS
                           if "# not run" not in c))


def test_the_pages_show_commands():
    assert len(COMMANDS) >= 60  # the extraction itself works (87 when written)


@pytest.mark.parametrize("page, command", COMMANDS, ids=[f"{p}:{c[24:70]}" for p, c in COMMANDS])
def test_every_shown_command_composes_and_passes_the_checks(tmp_path, page, command):
    if "# not run" in command or re.search(r"\bNAME\b", command):
        pytest.skip(f"{page}: marked as not run, or a pattern with a placeholder NAME")
    cfg = compose_cfg(tmp_path, _overrides(command))
    drop_unselected_settings(cfg)
    check_config(cfg)


@pytest.mark.parametrize("command", UNIQUE, ids=[c[24:70] or "main job" for c in UNIQUE])
def test_every_synthetic_command_runs_end_to_end(tmp_path, command):
    """Those marked *run* on the commands page; the others skip with the page's reason."""
    reason = why_not_run(command, tmp_path)
    if reason is not None:
        pytest.skip(f"not run: {reason}")
    words = shlex.split(command)[3:]
    done = subprocess.run([sys.executable, "-m", "tagtorch.train", *words,
                           f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    written = {path.name for path in tmp_path.rglob("*")}
    assert "report.md" in written or "manifest.json" in written  # a report, or a fitted model


def test_the_commands_page_is_rendered_from_the_pages(tmp_path):
    assert COMMANDS_PAGE.read_text(encoding="utf-8") == commands_page(tmp_path), \
        "docs/commands.md is stale: python tests/test_docs_commands.py"


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


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        COMMANDS_PAGE.write_text(commands_page(Path(folder)), encoding="utf-8")
        run = [c for c in UNIQUE if why_not_run(c, Path(folder)) is None]
    print(f"{COMMANDS_PAGE}: {len(COMMANDS)} commands ({len(UNIQUE)} distinct), {len(run)} of "
          "them run end to end")


def test_the_tests_that_run_placeholder_commands_exist():
    for command, where in RUN_ELSEWHERE.items():
        file, name = where.split(" (")[0].split("::")
        assert f"def {name}(" in (ROOT / file).read_text(encoding="utf-8"), command
        assert any(shown == command for _, shown in COMMANDS), command
