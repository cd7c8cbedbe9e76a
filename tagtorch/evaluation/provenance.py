"""Where a run's numbers come from: the run folder's ``provenance.json`` and the headline record.

Every run of :func:`tagtorch.train.run_task` writes ``provenance.json`` beside ``config.yaml``:
the command line, the git commit of the tagtorch checkout (and whether it had uncommitted
changes), the versions, torch's thread count (a neural ranker's float sums, and so its last
digits, depend on it) and the start time (:func:`run_provenance`). :func:`headline_record`
reads a finished run folder back into one small record (command, commit, data, seeds or folds,
the paired test and its correction, the report's best-first table, the tables of every
metric's means, the every-pair tests and each fold's value of the headline metric,
``targets.csv``'s tests, the settings chosen on validation and the learning curves' first,
best and last epochs) that
``benchmarks/provenance.py`` keeps under ``docs/runs/`` and renders into ``docs/provenance.md``
(:func:`provenance_markdown`, then the script's count of the docs paragraphs traced to a
record): the records the README's headline numbers are traced to.
"""

from __future__ import annotations

import datetime
import json
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from tagtorch.errors import UnreadableFileError
from tagtorch.evaluation.report import headline_section, markdown_table
from tagtorch.storage import read_json
from tagtorch.version import __version__

__all__ = ["PROVENANCE_FILE", "TABLE_PARTS", "chosen_rows", "command_line", "curve_rows",
           "headline_metric", "headline_record", "paired_rows", "per_fold_rows",
           "provenance_markdown", "run_provenance", "targets_rows"]

PROVENANCE_FILE = "provenance.json"
"""The file of :func:`run_provenance` in a run folder."""

TABLE_PARTS = ("best_first", "metrics", "paired", "targets", "per_fold", "chosen", "curves")
"""The parts of a :func:`headline_record` that hold a run's tables (where its figures are)."""

_CHECKOUT = Path(__file__).resolve().parents[2]


def _git(*arguments: str) -> str | None:
    """The output of ``git arguments`` in the tagtorch checkout (None: not a checkout)."""
    if not (_CHECKOUT / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "-C", str(_CHECKOUT), *arguments], capture_output=True,
                              text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def run_provenance(command: str) -> dict[str, Any]:
    """The facts a run's numbers depend on beyond its ``config.yaml``.

    Args:
        command: how the run was started (:func:`command_line` for the command line).
    """
    import torch

    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "command": command,
        "commit": _git("rev-parse", "HEAD"),
        "uncommitted_changes": None if status is None else bool(status),
        "tagtorch": __version__, "python": platform.python_version(),
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def command_line() -> str:
    """This process's ``python -m tagtorch.train ...`` command, quoted for a shell to run again."""
    return " ".join(["python -m tagtorch.train", *map(shlex.quote, sys.argv[1:])])


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise UnreadableFileError(f"{path}: {error.strerror or error}") from error


def headline_record(folder: str | Path, provenance: dict[str, Any] | None = None
                    ) -> dict[str, Any]:
    """A finished run folder as one record: its provenance, setting and report tables.

    The tables: the best-first table (``best_first``), the tables of every metric's means
    that follow it up to the report's next section (``metrics``: their rows and ``###``
    headings; empty when the report has none), the paired tests of every pair of methods on
    the best-first table's metric (``paired``, :func:`paired_rows`), that metric in each fold or
    seed (``per_fold``, :func:`per_fold_rows`) and, when the run wrote them, ``targets.csv``'s
    tests (``targets``, :func:`targets_rows`), the settings ``tuning.csv`` marks chosen
    (``chosen``, :func:`chosen_rows`) and the first, best and last epochs of ``curves.csv``'s
    learning curves (``curves``, :func:`curve_rows`).

    Args:
        folder: the run folder.
        provenance: in place of its ``provenance.json`` (a run older than that file; the
            record then says it was given by hand).

    Raises:
        UnreadableFileError: the folder lacks ``provenance.json`` (and none is given),
            ``config.yaml`` or a report with a best-first table.
    """
    folder = Path(folder)
    if provenance is None:
        provenance = read_json(folder / PROVENANCE_FILE, keys=["command", "commit"])
    else:
        provenance = {**provenance, "given_by_hand": True}
    config = yaml.safe_load(_read(folder / "config.yaml"))
    report = _read(folder / "report.md")
    table = headline_section(report)
    if not table:
        raise UnreadableFileError(f"{folder / 'report.md'}: no best-first table")
    after = report[report.index(table) + len(table):].split("\n## ", 1)[0]
    metrics = [line for line in after.splitlines() if line.startswith(("|", "### "))]
    metric = headline_metric(table.splitlines())
    extra = {"paired": paired_rows(report, metric),
             "per_fold": per_fold_rows(folder / "results.csv", metric)}
    for part, name, rows_of in (("targets", "targets.csv", targets_rows),
                                ("chosen", "tuning.csv", chosen_rows),
                                ("curves", "curves.csv", curve_rows)):
        if (folder / name).is_file():
            extra[part] = rows_of(folder / name)
    task = config.get("task", {})
    repeats = ({"seeds": task["seeds"]} if "seeds" in task
               else {"folds": task.get("folds") or f"all {task.get('n_folds', '')}".strip()})
    significance = task.get("significance") or {}
    return {**provenance, "data": config["data"]["_target_"], **repeats,
            "split": {k: task[k] for k in ("p", "split", "query", "aggregate", "n_folds")
                      if k in task},
            "test": significance.get("test", "ttest"), "correction": "Holm",
            "best_first": table.splitlines(), "metrics": metrics, **extra}


def paired_rows(report: str, metric: str) -> list[str]:
    """The rows of the report's every-pair test table on ``metric``.

    The header and rule come first; empty when the report has no such table.
    """
    start = report.find("\n## Paired ")
    if start < 0:
        return []
    section = report[start + 1:].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return rows[:2] + [row for row in rows[2:] if row.split("|")[3].strip() == metric]


def _csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (OSError, ValueError) as error:
        raise UnreadableFileError(f"{path}: {error}") from error


def per_fold_rows(path: Path, metric: str) -> list[str]:
    """``metric`` of every method in each fold or seed of ``results.csv``, to 4 decimals.

    A method per row, a fold or seed per column; empty without the file or the metric.
    """
    if not path.is_file():
        return []
    results = _csv(path)
    if not {"method", "fold", "metric", "value"} <= set(results.columns):
        return []
    results = results[results["metric"] == metric]
    if results.empty:
        return []
    table = results.pivot_table(index="method", columns="fold", values="value", sort=False)
    table.columns = [f"fold {c}" for c in table.columns]
    return markdown_table(table.round(4).reset_index()).splitlines()


def chosen_rows(path: Path) -> list[str]:
    """The settings ``tuning.csv`` marks chosen, with their validation figures (4 decimals)."""
    tuning = _csv(path)
    if "chosen" not in tuning:
        return []
    chosen = tuning[tuning["chosen"].astype(str) == "True"].drop(columns="chosen")
    return markdown_table(chosen.round(4)).splitlines()


def curve_rows(path: Path) -> list[str]:
    """Each learning curve of ``curves.csv`` at its first, best and last epoch.

    A (method, seed) per row: the validation DCG@10 and, where the curve has it, the training
    DCG@10 at the first epoch recorded (epoch 0, before any step, for a model that records it),
    at the epoch of the highest validation DCG@10 (the first such epoch, the one early stopping
    keeps) and at the last epoch run; 4 decimals (epochs without a validation DCG@10 left out).
    Empty when the file lacks the columns ``method``, ``seed``, ``epoch`` and ``val_dcg@10`` (a
    topic model's curves).
    """
    curves = _csv(path)
    if not {"method", "seed", "epoch", "val_dcg@10"} <= set(curves.columns):
        return []
    curves = curves.dropna(subset=["epoch", "val_dcg@10"])
    columns = [c for c in ("val_dcg@10", "train_dcg@10") if c in curves]
    rows = []
    for (method, seed), curve in curves.groupby(["method", "seed"], sort=False):
        curve = curve.sort_values("epoch")
        row: dict[str, Any] = {"method": method, "seed": seed}
        for name, epoch in (("first", curve.iloc[0]),
                            ("best", curve.loc[curve["val_dcg@10"].idxmax()]),
                            ("last", curve.iloc[-1])):
            row |= {f"{name} epoch": int(epoch["epoch"]),
                    **{f"{c} {name}": epoch[c] for c in columns}}
        rows.append(row)
    return markdown_table(pd.DataFrame(rows).round(4)).splitlines()


def targets_rows(path: Path) -> list[str]:
    """``targets.csv`` (a method against named baselines) as a table, figures to 4 decimals."""
    tests = _csv(path)
    tests = tests.assign(**{c: tests[c].map(lambda p: f"{p:.2e}")
                            for c in ("p_value", "p_holm") if c in tests})
    return markdown_table(tests.round(4)).splitlines()


def provenance_markdown(records: dict[str, dict[str, Any]]) -> str:
    """``docs/provenance.md``: one section per run record (name -> :func:`headline_record`)."""
    lines = ["# Provenance of the headline numbers", "",
             "Generated by `python benchmarks/provenance.py` from the run folders' "
             "`provenance.json`, `config.yaml` and `report.md` (the records are kept in "
             "`docs/runs/`); do not edit by hand. Every headline number of the README is in one "
             "of these records; the last section says which paragraphs of the docs pages' "
             "results are traced to one.", ""]
    for name, record in sorted(records.items()):
        repeats = (f"seeds {record['seeds']}" if "seeds" in record
                   else f"folds {record['folds']}")
        commit = record.get("commit") or "not recorded"
        dirty = " (with uncommitted changes)" if record.get("uncommitted_changes") else ""
        if record.get("given_by_hand"):
            dirty += " (command and commit given by hand: the run predates provenance.json)"
        threads = f", {record['threads']} torch threads" if "threads" in record else ""
        lines += [f"## {name}", "", f"- command: `{_where_left_out(record['command'])}`",
                  f"- commit: `{commit}`{dirty}; tagtorch {record['tagtorch']}{threads}, "
                  f"started {record['started']}",
                  *(f"- merged from: commit `{str(run.get('commit') or 'not recorded')[:12]}`, "
                    f"`{_where_left_out(run.get('command') or run['folder'])}`"
                    for run in record.get("merged_from", [])),
                  f"- data: `{record['data']}`, {json.dumps(record['split'])}, {repeats}",
                  f"- test: paired {record['test']} over the per-query values, "
                  f"{record['correction']}-corrected", "",
                  *(f"**{line[3:]}**" if line.startswith("## ") else line
                    for line in record["best_first"]), "",
                  *_metric_lines(record.get("metrics", [])),
                  *_titled(f"Paired tests on {headline_metric(record['best_first'])}",
                           record.get("paired", [])),
                  *_titled("Targets (targets.csv)", record.get("targets", [])),
                  *_titled(f"Each fold or seed: {headline_metric(record['best_first'])}",
                           record.get("per_fold", [])),
                  *_titled("Settings chosen on validation (tuning.csv)",
                           record.get("chosen", [])),
                  *_titled("Learning curves at the first, best (validation) and last epoch "
                           "(curves.csv)", record.get("curves", []))]
    return "\n".join(lines)


def _where_left_out(command: str) -> str:
    """A recorded command without its ``hydra.run.dir=`` (where a run went, not what it ran)."""
    return " ".join(w for w in command.split() if not w.startswith("hydra.run.dir="))


def headline_metric(best_first: list[str]) -> str:
    """The metric a best-first table sorts by (its heading: ``## Best first by METRIC``)."""
    return best_first[0].split(" by ")[-1].strip()


def _titled(title: str, rows: list[str]) -> list[str]:
    """A bold title, then the table ``rows`` (nothing when a table has no rows past its rule)."""
    return [f"**{title}**", "", *rows, ""] if len(rows) > 2 else []


def _metric_lines(rows: list[str]) -> list[str]:
    """A record's ``metrics`` as markdown: ``###`` headings bold, a blank line after a table."""
    lines: list[str] = []
    for i, row in enumerate(rows):
        lines += [f"**{row[4:]}**", ""] if row.startswith("### ") else [row]
        if row.startswith("|") and (i + 1 == len(rows) or not rows[i + 1].startswith("|")):
            lines.append("")
    return lines
