"""One command for the GPU table: each benchmark's CUDA path beside its CPU path (issue 34).

Runs, in one process tree, every part below on ``cpu`` and on ``cuda``. Each part runs as its own
subprocess with a time budget. Its whole output goes to ``OUT/raw/PART-DEVICE.txt``, and
``OUT/table.md`` gets one Markdown table of every part and device (status, seconds, what it
measures) plus each run's own summary block.

A part is skipped, with the reason in the table, when CUDA is missing (its ``cuda`` row), when
it needs the HetRec files and ``$TAGTORCH_DATA_DIR`` is unset, or when ``--parts`` leaves it
out. ``--dry-run`` runs every part on the CPU at small sizes, in about a minute. The tests run
it that way, so that the script cannot rot before a GPU is lent.

Parts (budgets calibrated on an H200 machine with 16 cores, 2026-11-26; both devices of every part
sum to 66 minutes, more than one 10-minute device call: run it in several with ``--parts``
and ``--devices``; a run over its budget is stopped and marked so):

- ``candidates-150k``, ``candidates-1m``: LATRE candidates and the 13 features
  (``bench_candidates.py``) at 150,000 and 1,000,000 synthetic objects. The rule kernels are
  CPU-only: the ``cuda`` row mines rules on the CPU and computes the features on CUDA.
- ``lda``: the batched collapsed Gibbs sampler (``bench_lda.py``) beside tomotopy on all CPU
  cores (the same run prints both).
- ``losses``: the six ranking losses with the MLP scorer (``bench_neural.py``), forward and
  backward per batch, fp32, plus bf16-mixed on CUDA.
- ``item-models``: epoch seconds of Do-Rank's fast learning, the regular approach, Do-Rank+ and
  PITF (``bench_dorank.py``).
- ``sweep``: a LambdaRank sweep of 8 trials on Last.fm (``hparams_search=lambdarank``) through the
  Ray launcher, with two trials per GPU (``gpus_per_job=0.5``) against the same sweep on the CPU
  cores.

- ``sweep-deep``: an Optuna sweep of our deep tag ranker (``hparams_search=tag_context``) on
  Last.fm's fold 0, 8 trials one after another through Hydra's basic launcher (no Ray on the
  device), on the GPU (``trainer=gpu``) against the CPU cores; its summary gives trials per hour.

- ``item-scale``: item models past HetRec (``bench_dorank.py --scale``, 50,000 users, 100,000
  items, 2 million triples): a training epoch (sampled negatives; fast learning on a sample of
  sets, scaled) and the top 10 items for all users (timed on a sample, scaled).
- ``resume``: Do-Rank and PITF interrupted and resumed against uninterrupted, bit for bit
  (``check_resume.py``): on CUDA, the one resume path never tested on a GPU.

Usage::

    TAGTORCH_DATA_DIR=/path/to/data python benchmarks/gpu_table.py --out gpu-table
    python benchmarks/gpu_table.py --dry-run --out /tmp/gpu-table   # CPU, small sizes
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tagtorch.storage import atomic_write

HERE = Path(__file__).resolve().parent
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Part:
    """One benchmark of the table.

    Attributes:
        name: the row's name (and ``--parts`` key).
        what: what it measures, for the table.
        command: ``(device, dry_run, folder) -> argv``: the subprocess of one device.
        budget_s: seconds a device's run may take (a run over it is stopped and marked).
        needs_data: it reads HetRec files from ``$TAGTORCH_DATA_DIR`` (not in a dry run).
        in_dry_run: whether ``--dry-run`` runs it (False: its command is another part's at
            another size).
        result: ``(device, folder) -> file`` whose text is the run's summary (None: the
            closing block of its output).
    """

    name: str
    what: str
    command: Callable[[str, bool, Path], list[str]]
    budget_s: float
    needs_data: bool = False
    in_dry_run: bool = True
    result: Callable[[str, Path], Path] | None = None


def _script(name: str, *arguments: str) -> list[str]:
    return [sys.executable, str(HERE / name), *arguments]


def _candidates(objects: int) -> Callable[[str, bool, Path], list[str]]:
    def command(device: str, dry: bool, folder: Path) -> list[str]:
        size = ["--objects", "3000", "--reference-objects", "20", "--batched-objects", "256",
                "--latency-objects", "20"] if dry else ["--objects", str(objects)]
        # the plain-Python reference runs on the CPU on either device: 30 s of it is enough
        return _script("bench_candidates.py", "--skip-lastfm", "--heavy-tags", "", "--device",
                       device, "--reference-seconds", "30", *size)
    return command


def _lda(device: str, dry: bool, folder: Path) -> list[str]:
    size = ["--tokens", "20000", "--topics", "10", "--iterations", "1", "--min-tokens", "0",
            "--skip-gensim"] if dry else ["--skip-gensim"]
    return _script("bench_lda.py", "--device", device, *size)


def _losses(device: str, dry: bool, folder: Path) -> list[str]:
    size = ["--lengths", "8", "--candidates", "64", "--seconds", "0.1"] if dry else []
    return _script("bench_neural.py", "--devices", device, *size)


def _item_models(device: str, dry: bool, folder: Path) -> list[str]:
    size = (["--synthetic", "--fractions", "0.1", "--rank", "8", "--regular-sets", "4"] if dry
            else [])
    return _script("bench_dorank.py", "--device", device, *size)


def _item_scale(device: str, dry: bool, folder: Path) -> list[str]:
    size = (["--scale-users", "2000", "--scale-items", "3000", "--scale-tags", "100",
             "--scale-triples", "50000", "--scale-users-scored", "128", "--scale-fast-sets", "64",
             "--rank", "8"] if dry else
            ["--scale-users", "50000", "--scale-items", "100000", "--scale-triples", "2000000"])
    return _script("bench_dorank.py", "--scale", "--device", device, *size)


def _resume(device: str, dry: bool, folder: Path) -> list[str]:
    size = (["--epochs", "6", "--interrupt-at", "3", "--objects", "300", "--rank", "4"] if dry
            else [])
    return _script("check_resume.py", "--device", device, *size)


def _sweep(device: str, dry: bool, folder: Path) -> list[str]:
    # two trials at a time: on CUDA both on GPU 0 (the sweeper's trials per device, the
    # launcher's half GPU per job), on the CPU two jobs over the cores
    on_device = (["hydra.launcher.gpus_per_job=0.5", "trainer=gpu", "hydra.sweeper.devices=[0]",
                  "hydra.sweeper.trials_per_device=2"] if device == "cuda"
                 else ["hydra.launcher.gpus_per_job=0", "trainer=cpu", "hydra.sweeper.n_jobs=2"])
    size = (["hydra.sweeper.n_trials=2", "trainer.max_epochs=1", "task.folds=[0]"]
            if dry else ["data=lastfm", "hydra.sweeper.n_trials=8"])
    return [sys.executable, "-m", "tagtorch.train", "-m", "hparams_search=lambdarank",
            "hydra/launcher=tagtorch_ray", "logger=none", *on_device, *size,
            f"hydra.sweep.dir={folder / f'sweep-{device}'}"]


def _sweep_deep(device: str, dry: bool, folder: Path) -> list[str]:
    on_device = (["trainer=gpu", "hydra.sweeper.devices=[0]"] if device == "cuda"
                 else ["trainer=cpu"])
    size = (["hydra.sweeper.n_trials=2", "trainer.max_epochs=1",
             "model.tag_context.pretrain_epochs=1"] if dry
            else ["data=lastfm", "hydra.sweeper.n_trials=8"])
    return [sys.executable, "-m", "tagtorch.train", "-m", "hparams_search=tag_context",
            "logger=none", "task.folds=[0]", *on_device, *size,
            f"hydra.sweep.dir={folder / f'sweep-deep-{device}'}"]


def trials_per_hour(trials: Path, seconds: float) -> str:
    """The line of a sweep's pace: its finished trials (``trials.csv``) per hour of the run."""
    import pandas as pd

    states = pd.read_csv(trials)["state"] if trials.is_file() else pd.Series([], dtype=str)
    done = int(states.isin(["COMPLETE", "PRUNED"]).sum())
    return (f"trials per hour: {done / max(seconds, 1e-9) * 3600:.1f} ({done} trials finished "
            f"in {seconds:.0f} s, start-up included)")


PARTS = (
    Part("candidates-150k", "LATRE candidates + 13 features, 150,000 synthetic objects (rules "
         "on the CPU; features on the device)", _candidates(150_000), 240),
    Part("candidates-1m", "the same at 1,000,000 synthetic objects", _candidates(1_000_000),
         420, in_dry_run=False),
    Part("lda", "batched Gibbs sampler tokens/s, beside tomotopy on all CPU cores", _lda, 240),
    Part("losses", "six ranking losses + MLP scorer, forward+backward lists/s (bf16 on CUDA)",
         _losses, 150),
    Part("item-models", "epoch seconds: Do-Rank fast, regular, Do-Rank+, PITF (Last.fm 5-core)",
         _item_models, 300, needs_data=True),
    Part("item-scale", "item models past HetRec (50,000 users, 100,000 items, 2M triples): an "
         "epoch (sampled, fast) and top-10 for all users, scaled from a sample", _item_scale,
         420),
    Part("sweep", "LambdaRank sweep, 8 trials on Last.fm, Ray launcher (2 trials per GPU)",
         _sweep, 200, needs_data=True,
         result=lambda device, folder: folder / f"sweep-{device}" / "trials.csv"),
    Part("sweep-deep", "TagContextRanker sweep, 8 trials on Last.fm fold 0, no Ray (basic "
         "launcher, trials one after another)", _sweep_deep, 400, needs_data=True,
         result=lambda device, folder: folder / f"sweep-deep-{device}" / "trials.csv"),
    Part("resume", "Do-Rank and PITF interrupted and resumed == uninterrupted, bit for bit "
         "(the device's random state restored)", _resume, 120),
)


@dataclass
class Outcome:
    """One part on one device: ``status`` is ``ok``, ``failed (rc N)``, ``over budget`` or
    ``skipped: why``; ``summary`` is the closing block of its output."""

    part: Part
    device: str
    status: str
    seconds: float = 0.0
    summary: str = ""


def skip_reason(part: Part, device: str, dry: bool, cuda: bool) -> str | None:
    """Why ``part`` does not run on ``device`` here (None: it runs)."""
    if dry and not part.in_dry_run:
        return "dry run: the command of another part at another size"
    if device == "cuda" and not cuda:
        return "no CUDA device" if not dry else "dry run (CPU only)"
    if part.needs_data and not dry and not os.environ.get("TAGTORCH_DATA_DIR"):
        return "TAGTORCH_DATA_DIR is not set (it reads the HetRec files)"
    return None


def summary_of(output: str, lines: int = 14) -> str:
    """The closing block of a benchmark's output: from its last ``=== summary`` line, or its
    last ``lines`` non-empty lines."""
    kept = [line for line in output.splitlines() if line.strip()]
    marks = [i for i, line in enumerate(kept) if line.startswith("=== summary")]
    return "\n".join(kept[marks[-1]:] if marks else kept[-lines:])


def run_part(part: Part, device: str, dry: bool, folder: Path) -> Outcome:
    """Runs one part on one device within its budget; its output goes to ``folder/raw``."""
    budget = 120.0 if dry else part.budget_s
    raw = folder / "raw" / f"{part.name}-{device}.txt"
    start = time.perf_counter()
    try:
        done = subprocess.run(part.command(device, dry, folder), capture_output=True,
                              text=True, timeout=budget, cwd=HERE.parent)
        output, status = done.stdout + done.stderr, ("ok" if done.returncode == 0
                                                     else f"failed (rc {done.returncode})")
    except subprocess.TimeoutExpired as stopped:
        output = "".join(part.decode(errors="replace") if isinstance(part, bytes) else part or ""
                         for part in (stopped.stdout, stopped.stderr))
        status = f"over budget ({budget:g} s)"
    with atomic_write(raw) as partial:
        partial.write_text(output)
    result = None if part.result is None else part.result(device, folder)
    summary = result.read_text() if result is not None and result.is_file() else (
        summary_of(output))
    seconds = time.perf_counter() - start
    if result is not None and result.name == "trials.csv":
        summary = f"{trials_per_hour(result, seconds)}\n{summary}"
    return Outcome(part, device, status, seconds, summary)


def markdown(outcomes: list[Outcome], card: str, command: str) -> str:
    """The table (a row a part and device) and each run's summary block."""
    rows = ["| part | device | status | seconds | measures |", "|---|---|---|---|---|"]
    rows += [f"| {o.part.name} | {o.device} | {o.status} | {o.seconds:.0f} | {o.part.what} |"
             for o in outcomes]
    blocks = [f"### {o.part.name} on {o.device}\n\n```\n{o.summary}\n```"
              for o in outcomes if o.summary]
    return "\n".join([f"# GPU table\n\nCard: {card}. Command: `{command}`.\n", *rows, "",
                      *blocks]) + "\n"


def card_name() -> tuple[bool, str]:
    """``(CUDA available, the card's name or why not)``."""
    import torch

    if not torch.cuda.is_available():
        return False, "no CUDA device (CPU only)"
    return True, torch.cuda.get_device_name(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the folder it writes")
    parser.add_argument("--dry-run", action="store_true", help="CPU only, small sizes")
    parser.add_argument("--parts", default=",".join(p.name for p in PARTS),
                        help="comma-separated parts, run in this order (default: all)")
    parser.add_argument("--devices", default=",".join(DEVICES),
                        help="comma-separated devices of each part (default: cpu,cuda)")
    args = parser.parse_args(argv)
    chosen = args.parts.split(",")
    unknown = set(chosen) - {p.name for p in PARTS}
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}; the parts are "
                     f"{[p.name for p in PARTS]}")
    (args.out / "raw").mkdir(parents=True, exist_ok=True)
    cuda, card = card_name()
    command = "python benchmarks/gpu_table.py " + " ".join(argv or sys.argv[1:])
    by_name = {p.name: p for p in PARTS}
    outcomes = []
    for part in (by_name[name] for name in chosen):
        for device in args.devices.split(","):
            reason = skip_reason(part, device, args.dry_run, cuda)
            outcome = (Outcome(part, device, f"skipped: {reason}") if reason
                       else run_part(part, device, args.dry_run, args.out))
            print(f"{part.name:<16} {device:<5} {outcome.status} ({outcome.seconds:.0f} s)",
                  flush=True)
            outcomes.append(outcome)
            # written after every run: a table cut short still holds the rows done
            with atomic_write(args.out / "table.md") as partial:
                partial.write_text(markdown(outcomes, card, command))
    print(f"table: {args.out / 'table.md'}")
    return 0 if all(o.status == "ok" or o.status.startswith("skipped") for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
