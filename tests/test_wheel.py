"""The wheel installs into a fresh virtual environment and runs the main job there.

Slow (``python -m build --wheel``, a venv and the main job: about a minute); ``.ci/run`` runs
it as a step of its own before the test command. The fresh environment borrows this
interpreter's installed dependencies through a ``.pth`` line (nothing is downloaded), but not
tagtorch: the editable install's import hook lives in a ``.pth`` file of this environment,
which a ``.pth`` line does not execute, so ``import tagtorch`` there can only find the wheel's
copy (the test checks it).
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_installs_and_runs_the_main_job(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir",
                            str(tmp_path / "dist"), str(ROOT)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("tagtorch-*.whl"))
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True, check=True)
    site = Path(purelib.stdout.strip())
    (site / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                                "--no-deps", "-q", str(wheel)], capture_output=True, text=True,
                               timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    work = tmp_path / "work"
    work.mkdir()
    where = subprocess.run([str(python), "-c", "import tagtorch; print(tagtorch.__file__)"],
                           cwd=work, capture_output=True, text=True, check=True)
    assert where.stdout.strip().startswith(str(site)), where.stdout
    job = subprocess.run([str(python), "-m", "tagtorch.train", "logger=none",
                          f"hydra.run.dir={work / 'run'}"], cwd=work, capture_output=True,
                         text=True, timeout=900)
    assert job.returncode == 0, (job.stdout + job.stderr)[-3000:]
    assert (work / "run" / "report.md").is_file()
