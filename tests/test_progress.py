"""Progress bars (tagtorch/progress.py): shown on a terminal, absent otherwise, results unchanged.

A pseudo-terminal with a window size stands in for a user's terminal; a pipe for CI logs.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

LIGHTGBM = ("import torch\n"
            "from tagtorch.candidates.candidate_set import CandidateSet\n"
            "from tagtorch.rankers.trees import MARTRanker\n"
            "g = torch.Generator().manual_seed(0)\n"
            "n = 200\n"
            "lists = CandidateSet.from_flat(objects=torch.arange(20),\n"
            "    rows=torch.arange(n) // 10, tags=torch.arange(n) % 10,\n"
            "    features=torch.rand(n, 3, generator=g),\n"
            "    labels=(torch.arange(n) % 3 == 0).float(),\n"
            "    n_relevant=torch.full((20,), 4), feature_names=('a', 'b', 'c'))\n"
            "MARTRanker(n_iterations=40, n_jobs=1).fit(lists)\n")
GRID = ("import time\nfrom tagtorch.progress import progress\n"
        "for _ in progress(range(3), 'grid', unit='setting'): time.sleep(0.15)\n")


def _output(code: str | list[str], terminal: bool) -> str:
    """What ``python -c code`` (or ``python ARGS``) writes, on a 120-column terminal or into
    a pipe."""
    argv = [sys.executable, *(["-c", code] if isinstance(code, str) else code)]
    if not terminal:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout + done.stderr
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(argv, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert process.wait(timeout=240) == 0
    os.close(master)
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.integration
@pytest.mark.parametrize("code, shown", [(GRID, "grid:"), (LIGHTGBM, "MART:")])
def test_a_bar_on_a_terminal_and_none_in_a_log(code, shown):
    on_terminal = _output(code, terminal=True)
    assert shown in on_terminal and "%|" in on_terminal
    assert shown not in _output(code, terminal=False)


@pytest.mark.integration
def test_a_lightning_fit_shows_its_epochs_on_a_terminal(tmp_path):
    shown = _output(["-m", "tagtorch.train", "task=itemrec", "model=dorank", "data.n_objects=300",
                     "task.p=2", "task.seeds=[0]", "trainer.max_epochs=2", "model.dorank.rank=4",
                     "logger=none", f"hydra.run.dir={tmp_path}"], terminal=True)
    assert "DoRank:" in shown and "epoch" in shown, shown[-3000:]
