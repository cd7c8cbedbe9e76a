"""Every command the README and the docs pages show is run end to end, or says why not.

Each ``python -m tagtorch.train ...`` of README.md and docs/*.md (code blocks, with their ``\\``
continuations, and inline code spans) is composed through Hydra with its overrides and checked
by :func:`~tagtorch.config_checks.check_config`, as a run does before loading data: a config name
that does not exist, a setting the task does not take or a method of the wrong task fails here.
``trainer=gpu`` is checked with ``trainer=cpu`` on a machine without CUDA; sweep expressions of
a ``-m`` command (``range(...)``, ``choice(...)``) are left to the sweeper.

Every command is then run end to end as written, on stand-in data where it names real data
(``tests/stand_in_data.py``: a small synthetic folksonomy in each release's file layout, and the
files a command names written where it runs), with the stand-ins of :func:`stand_ins` that keep
CI's time (one method of several, one seed, one fold, two trials of a sweep), and the cluster it
names started with its own commands (a Dask scheduler and worker on 127.0.0.1 for
``tcp://HOST:8786``, ``ray start --head`` for ``address=auto``). What cannot run on a machine
without a GPU (a sweep that names GPUs) is marked as not run, with the reason, on
``docs/commands.md``, which this module renders (``python tests/test_docs_commands.py``
writes it; the test fails when the page differs). Every ``benchmarks/*.py`` a page runs and
every ``tagtorch/conf/...`` file it names exists, and every relative link of the README points
to a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from stand_in_data import NAMED_FILES, write_data_home, write_named_file
from test_train import compose_cfg

from tagtorch.config_checks import check_config, drop_unselected_settings

pytestmark = pytest.mark.integration  # CI's second step (the default run keeps its 8 minutes)

ROOT = Path(__file__).resolve().parents[1]
COMMANDS_PAGE = ROOT / "docs" / "commands.md"
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p != COMMANDS_PAGE)]
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


STAND_IN_OBJECTS = 10_000
"""A generator run of more objects than this runs on this many (the sizes: docs/scale.md)."""

_HOST = "tcp://HOST:8786"
"""The scheduler a cluster command names; the test starts one on 127.0.0.1 (Dask's commands)."""


def why_not_run(command: str) -> str | None:
    """Why a shown command is not run end to end by the tests (None: it is)."""
    words = shlex.split(command.split(" #")[0])[3:]
    if "# not run" in command:
        return "marked `# not run` on its page"
    gpus = [w for w in words if w.startswith(("hydra.sweeper.devices=", "hydra.launcher.gpus"))]
    if gpus and not torch.cuda.is_available():
        return f"needs a GPU (`{gpus[0]}`)"
    return None


def _sweep(words: list[str]) -> bool:
    return "-m" in words or "--multirun" in words


def stand_ins(command: str, tmp_path: Path) -> dict[str, str]:
    """The settings a test run of a shown command replaces or adds, to fit the tests' time.

    One method of several (``search_method``, the run's own way to keep one), or with targets
    their method and first baseline; the first seed and the first fold; two trials of a sweep;
    :data:`STAND_IN_OBJECTS` objects of a larger generator. The data are the stand-in files
    (``tests/stand_in_data.py``); ``trainer=gpu`` runs as ``trainer=cpu`` where there is no GPU.
    """
    cfg = compose_cfg(tmp_path, _overrides(command))
    drop_unselected_settings(cfg)
    added: dict[str, str] = {}
    models = list(cfg.get("model") or {})
    targets = cfg.task.get("targets") or {}
    if targets and len(models) > 2:
        keep = [targets["method"], targets["baselines"][0]]
        added["model"] = f"[{','.join(keep)}]"
        added.update({f"~task.tune.{name}": "" for name in cfg.task.get("tune") or {}
                      if name not in keep})
    elif len(models) > 1 and cfg.get("search_method") is None:
        added["search_method"] = models[0]
    if len(cfg.task.get("seeds") or []) > 1:
        added["task.seeds"] = f"[{cfg.task.seeds[0]}]"
    if "n_folds" in cfg.task and (cfg.task.folds is None or len(cfg.task.folds) > 1):
        added["task.folds"] = f"[{(cfg.task.folds or [0])[0]}]"
    if cfg.data.get("n_objects", 0) > STAND_IN_OBJECTS:
        added["data.n_objects"] = str(STAND_IN_OBJECTS)
    if _sweep(shlex.split(command.split(" #")[0])[3:]):
        added["hydra.sweeper.n_trials"] = "2"
    return added


def run_words(command: str, tmp_path: Path) -> list[str]:
    """What a test runs for a shown command: its words (gpu made cpu), the stand-ins in place."""
    words = shlex.split(command.split(" #")[0])[3:]
    if not torch.cuda.is_available():
        words = ["trainer=cpu" if w == "trainer=gpu" else w for w in words]
    added = stand_ins(command, tmp_path)
    kept = [w for w in words if w.partition("=")[0].lstrip("+~") not in added
            and not w.startswith(("hydra.run.dir=", "hydra.sweep.dir="))]  # the test's folder
    return kept + [key if key.startswith("~") else f"{key}={value}"
                   for key, value in added.items()]


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
             "marked *run* also run end to end there, as written, on stand-in data: a small "
             "synthetic folksonomy written in each real release's file layout "
             "(`tests/stand_in_data.py`; `TAGTORCH_DATA_DIR` points at it, and a file a command "
             "names is written where it runs), with the overrides shown (one method of several, or "
             "the targets' method and first baseline; one seed, one fold, two trials of a sweep; "
             "`trainer=cpu` where there is no GPU; a Dask scheduler and worker on 127.0.0.1 "
             "for `tcp://HOST:8786`, `ray start --head` for `address=auto`). "
             "The studies' own runs, on the real data, are on [provenance](provenance.md).", ""]
    page_of, traced = None, _traced()
    for page, command in COMMANDS:
        if page != page_of:
            lines += [*([""] if page_of else []), f"## {page}", "", "| command | checked |",
                      "|---|---|"]
            page_of = page
        shown = command.split(" #")[0].strip().replace("|", "\\|")
        lines.append(f"| `{shown}` | {_checked(command, tmp_path, traced)} |")
    return "\n".join(lines) + "\n"


def _checked(command: str, tmp_path: Path, traced: dict[str, str]) -> str:
    """The commands page's second column: run (with which stand-ins), or why not."""
    record = traced.get(_what(command))
    its_run = f"; its run: [`{record}`](provenance.md#{record})" if record else ""
    reason = why_not_run(command)
    if reason is not None:
        return f"not run: {reason}{its_run}"
    added = " ".join(key if key.startswith("~") else f"{key}={value}"
                     for key, value in stand_ins(command, tmp_path).items())
    on_cpu = " on the CPU" if "trainer=cpu" in _overrides(command) and "trainer=gpu" in command \
        else ""
    return f"*run*{on_cpu}" + (f" with `{added}`" if added else "") + its_run


UNIQUE = list(dict.fromkeys(_what(c) for _, c in COMMANDS if "# not run" not in c))
"""The distinct commands, the logger left out (the tests run each with ``logger=none``)."""


@pytest.fixture(scope="module")
def stand_in_home(tmp_path_factory) -> Path:
    """The stand-in data home: every real data set the docs name, small and synthetic."""
    return write_data_home(tmp_path_factory.mktemp("data"))


def test_the_pages_show_commands():
    assert len(COMMANDS) >= 60  # the extraction itself works (87 when written)


@pytest.mark.parametrize("page, command", COMMANDS, ids=[f"{p}:{c[24:70]}" for p, c in COMMANDS])
def test_every_shown_command_composes_and_passes_the_checks(tmp_path, monkeypatch, stand_in_home,
                                                           page, command):
    monkeypatch.setenv("TAGTORCH_DATA_DIR", str(stand_in_home))  # as the runs below
    if "# not run" in command:
        pytest.skip(f"{page}: marked as not run")
    cfg = compose_cfg(tmp_path, _overrides(command))
    drop_unselected_settings(cfg)
    check_config(cfg)


@contextlib.contextmanager
def _dask_cluster(folder: Path, env: dict[str, str]) -> Iterator[str]:
    """A Dask scheduler and one worker on 127.0.0.1, started with Dask's commands in ``folder``."""
    from distributed import Client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    dask = str(Path(sys.executable).parent / "dask")
    started = [subprocess.Popen([dask, *words, "--no-dashboard"], cwd=folder, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for words in (["scheduler", "--host", "127.0.0.1", "--port",
                              address.rsplit(":", 1)[1]],
                             ["worker", address, "--nthreads", "1", "--host", "127.0.0.1"])]
    try:
        with Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
        yield address
    finally:
        for process in reversed(started):
            process.terminate()
            process.wait(timeout=30)


@contextlib.contextmanager
def _ray_cluster(env: dict[str, str]) -> Iterator[None]:
    """A Ray head node of 2 CPUs, started with Ray's command (``address=auto`` finds it)."""
    ray = str(Path(sys.executable).parent / "ray")
    subprocess.run([ray, "start", "--head", "--num-cpus", "2", "--include-dashboard", "false",
                    "--disable-usage-stats"], env=env, check=True, capture_output=True,
                   timeout=120)
    try:
        yield
    finally:
        subprocess.run([ray, "stop", "--force"], env=env, capture_output=True, timeout=120)


def _cluster(command: str, folder: Path, env: dict[str, str]
             ) -> contextlib.AbstractContextManager[str | None]:
    """The cluster a command names, started for it: Dask's scheduler address, or Ray's head."""
    if _HOST in command:
        return _dask_cluster(folder, env)
    if "address=auto" in command:
        return _ray_cluster(env)
    return contextlib.nullcontext()


@pytest.mark.parametrize("command", UNIQUE, ids=[c[24:70] or "main job" for c in UNIQUE])
def test_every_shown_command_runs_end_to_end(tmp_path, stand_in_home, command):
    """As the commands page says: on stand-in data, with its overrides; the others skip."""
    reason = why_not_run(command)
    if reason is not None:
        pytest.skip(f"not run here: {reason}")
    words = run_words(command, tmp_path)
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # the paths the pages give from the checkout
    for word in words:
        name = word.partition("=")[2]
        if word.startswith(("data.path=", "data.test_path=")) and name in NAMED_FILES:
            write_named_file(tmp_path, name)
    folder = "hydra.sweep.dir" if _sweep(words) else "hydra.run.dir"
    env = {**os.environ, "TAGTORCH_DATA_DIR": str(stand_in_home)}
    with _cluster(command, tmp_path, env) as host:
        done = subprocess.run([sys.executable, "-m", "tagtorch.train",
                               *[w.replace(_HOST, host or _HOST) for w in words],
                               "logger=none", f"{folder}={tmp_path / 'run'}"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    written = {path.name for path in tmp_path.rglob("*")}
    assert written & {"report.md", "manifest.json", "describe.json"}  # a report, model or summary


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
        run = [c for c in UNIQUE if why_not_run(c) is None]
    print(f"{COMMANDS_PAGE}: {len(COMMANDS)} commands ({len(UNIQUE)} distinct), {len(run)} of "
          "them run end to end")

