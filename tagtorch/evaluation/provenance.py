"""Where a run's numbers come from: the run folder's ``provenance.json`` and the headline record.

Every run of :func:`tagtorch.train.run_task` writes ``provenance.json`` beside ``config.yaml``:
the command line, the git commit of the tagtorch checkout (and whether it had uncommitted
changes), the versions, torch's thread count (a neural ranker's float sums, and so its last
digits, depend on it) and the start time (:func:`run_provenance`). :func:`headline_record`
reads a finished run folder back into one small record (command, commit, data, seeds or folds,
the paired test and its correction, the report's best-first table, the tables of every
metric's means, the timing table, the every-pair tests and each fold's value of the headline
metric, ``targets.csv``'s tests, the settings chosen on validation and the learning curves' first,
best and last epochs) that
``benchmarks/provenance.py`` keeps under ``docs/runs/`` and renders into ``docs/provenance.md``
(:func:`provenance_markdown`, then the script's count of the docs paragraphs traced to a
record): the records the README's headline numbers are traced to.

Records and run folders are read as hostile input: :func:`read_records` and
:func:`headline_record` check every field a page shows (:func:`check_record`; a malformed one
is an :class:`~tagtorch.errors.UnreadableFileError` naming the file and the field), and the page
copies a record's strings escaped, so that a record cannot add HTML or a link to it.
"""

from __future__ import annotations

import datetime
import html
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from tagtorch.errors import UnreadableFileError
from tagtorch.evaluation.report import TIMING_HEADING, headline_section, markdown_table
from tagtorch.storage import read_json, reading
from tagtorch.version import __version__

__all__ = ["MAX_TEXT", "PROVENANCE_FILE", "RECORD_FIELDS", "RECORD_NAME", "TABLE_PARTS",
           "check_record", "chosen_rows", "command_line", "curve_rows", "headline_metric",
           "headline_record", "paired_rows", "per_fold_rows", "provenance_markdown",
           "read_records", "run_provenance", "targets_rows", "timing_rows"]

PROVENANCE_FILE = "provenance.json"
"""The file of :func:`run_provenance` in a run folder."""

TABLE_PARTS = ("best_first", "metrics", "paired", "targets", "per_fold", "chosen", "curves",
               "timings")
"""The parts of a :func:`headline_record` that hold a run's tables (where its figures are)."""

MAX_TEXT = 100_000
"""The most characters one string of a record may hold (a command, a table row): a longer one
is not a record tagtorch wrote, and would not be copied into a page."""

RECORD_NAME = re.compile(r"[\w-]+")
"""A record's name (its file's stem, the page's anchor): letters, digits, ``_`` and ``-``."""


def _is_count(value: Any) -> bool:
    """An integer >= 0 (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "text": (lambda v: isinstance(v, str), "a string"),
    "text or null": (lambda v: isinstance(v, str | None), "a string or null"),
    "flag": (lambda v: isinstance(v, bool | None), "true, false or null"),
    "count": (_is_count, "an integer >= 0"),
    "object": (lambda v: isinstance(v, dict), "an object"),
    "repeats": (lambda v: isinstance(v, str | list), "a list of integers or a string"),
    "repeats or null": (lambda v: isinstance(v, str | list | None),
                        "a list of integers, a string or null"),
    "scalar": (lambda v: isinstance(v, str | int | float | bool | None),
               "a number, a string or null"),
    "lines": (lambda v: isinstance(v, list), "a list of strings"),
    "runs": (lambda v: isinstance(v, list), "a list of the merged runs"),
}
"""Each kind of field of a record: its test and what the messages say is expected."""

_ITEMS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "repeats": (_is_count, "an integer >= 0"),
    "repeats or null": (_is_count, "an integer >= 0"),
    "lines": (lambda v: isinstance(v, str), "a string"),
}
"""The kinds that are lists: the test and expectation of each item."""

_RUN_FIELDS = {"folder": "text", "commit": "text or null", "command": "text or null"}
"""The fields of a merged run's entry (``merged_from``) that a page shows."""

PROVENANCE_FIELDS = {"command": "text", "commit": "text or null",
                     "uncommitted_changes": "flag", "given_by_hand": "flag",
                     "tagtorch": "text", "python": "text", "torch": "text", "threads": "count",
                     "started": "text", "merged_from": "runs"}
"""The fields of :func:`run_provenance` (a run folder's ``provenance.json``) and their kinds."""

RECORD_FIELDS = {**PROVENANCE_FIELDS, "data": "text", "seeds": "repeats", "folds": "repeats",
                 "split": "object", "test": "text", "correction": "text",
                 **dict.fromkeys(TABLE_PARTS, "lines")}
"""The fields of a :func:`headline_record` and their kinds (``_KINDS``)."""

_TASK_FIELDS = {"seeds": "repeats or null", "folds": "repeats or null",
                **dict.fromkeys(("p", "split", "query", "aggregate", "n_folds"), "scalar")}
"""The settings of a run's ``config.yaml`` (under ``task``) that a record copies."""

_REQUIRED = ("command", "commit", "tagtorch", "started")
"""The provenance fields every record has (the others are optional)."""

_CHECKOUT = Path(__file__).resolve().parents[2]


def _json_kind(value: Any) -> str:
    """What a JSON value is, for a message (never the value: it may be huge or hostile)."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _long_text(value: Any, where: str) -> tuple[str, int] | None:
    """The place and length of the first string (key or value) over :data:`MAX_TEXT`."""
    stack = [(where, value)]
    while stack:
        place, item = stack.pop()
        if isinstance(item, str) and len(item) > MAX_TEXT:
            return place, len(item)
        if isinstance(item, dict):
            stack += [(f"{place}.{str(key)[:40]}", key) for key in item]
            stack += [(f"{place}.{str(key)[:40]}", child) for key, child in item.items()]
        elif isinstance(item, list):
            stack += [(f"{place}[{i}]", child) for i, child in enumerate(item)]
    return None


def _check_fields(record: Any, where: str | Path, fields: Mapping[str, str],
                  required: tuple[str, ...], prefix: str = "") -> dict[str, Any]:
    """``record`` if it is an object whose ``fields`` have their kinds (see check_record).

    ``prefix``: the place of ``record`` in its file (``merged_from[0].``), for the messages.
    """
    if not isinstance(record, dict):
        raise UnreadableFileError(f"{where}: " + (f"field {prefix[:-1]!r}: " if prefix else "")
                                  + f"expected an object, found {_json_kind(record)}")
    for name in required:
        if name not in record:
            raise UnreadableFileError(f"{where}: field {prefix + name!r}: missing")
    for name, kind in fields.items():
        if name not in record:
            continue
        test, expected = _KINDS[kind]
        if not test(record[name]):
            raise UnreadableFileError(f"{where}: field {prefix + name!r}: expected {expected}, "
                                      f"found {_json_kind(record[name])}")
        if kind == "runs":
            for i, run in enumerate(record[name]):
                _check_fields(run, where, _RUN_FIELDS, ("folder",), f"{prefix}{name}[{i}].")
        elif isinstance(record[name], list) and kind in _ITEMS:
            test, expected = _ITEMS[kind]
            for i, item in enumerate(record[name]):
                if not test(item):
                    raise UnreadableFileError(f"{where}: field {f'{prefix}{name}[{i}]'!r}: "
                                              f"expected {expected}, found {_json_kind(item)}")
        long = _long_text(record[name], prefix + name)
        if long is not None:
            raise UnreadableFileError(f"{where}: field {long[0]!r}: a string of {long[1]:,} "
                                      f"characters, more than the {MAX_TEXT:,} a record holds")
    return record


def check_record(record: Any, where: str | Path) -> dict[str, Any]:
    """A run record read from a file (``docs/runs/NAME.json``), checked before it is rendered.

    Every field :func:`provenance_markdown` reads has its kind (:data:`RECORD_FIELDS`); other
    fields are left as they are.

    Args:
        record: the parsed JSON.
        where: the file, for the messages.

    Returns:
        ``record``, unchanged.

    Raises:
        UnreadableFileError: ``"{where}: field 'NAME': ..."``, for a missing field, a field
            of another kind (a list item's index named), an empty best-first table, neither
            seeds nor folds, or a string longer than :data:`MAX_TEXT`.

    Example:
        >>> try:
        ...     check_record({"command": "x", "commit": None, "tagtorch": "1",
        ...                   "started": "now", "data": "d", "split": {}, "folds": [0],
        ...                   "test": "ttest", "correction": "Holm", "best_first": [3]},
        ...                  "docs/runs/x.json")
        ... except UnreadableFileError as error:
        ...     print(error)
        docs/runs/x.json: field 'best_first[0]': expected a string, found a number
    """
    _check_fields(record, where, RECORD_FIELDS, (*_REQUIRED, "data", "split", "test",
                                                 "correction", "best_first"))
    if "seeds" not in record and "folds" not in record:
        raise UnreadableFileError(f"{where}: field 'folds' (or 'seeds'): missing")
    if not record["best_first"]:
        raise UnreadableFileError(f"{where}: field 'best_first': expected the best-first "
                                  "table's lines, found an empty list")
    return record


def read_records(folder: str | Path) -> dict[str, dict[str, Any]]:
    """The run records of ``folder`` (``NAME.json`` each), by name, each checked.

    Raises:
        UnreadableFileError: naming the file: a name other than :data:`RECORD_NAME`'s, not a
            regular file, not JSON, or a record :func:`check_record` refuses.
    """
    records = {}
    for path in sorted(Path(folder).glob("*.json")):
        if not RECORD_NAME.fullmatch(path.stem):
            raise UnreadableFileError(f"{path}: a record's name is letters, digits, _ and -")
        if not path.is_file():
            raise UnreadableFileError(f"{path}: not a regular file")
        records[path.stem] = check_record(read_json(path), path)
    return records


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
    commit = _git("rev-parse", "HEAD")
    return {
        "command": command,
        "commit": commit,
        "uncommitted_changes": None if status is None else bool(status),
        "tagtorch": _run_version(commit, bool(status)), "python": platform.python_version(),
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def _run_version(commit: str | None, dirty: bool) -> str:
    """The version of tagtorch as of the checkout at run time, setuptools-scm's way.

    The installed ``__version__`` is fixed when the package is installed (an editable install
    keeps it through later commits); in a checkout the version is made again from the commit
    that runs: ``BASE.devN+gHASH`` (N commits), ``.dirty`` with uncommitted changes.

    Example:
        >>> _run_version(None, False) == __version__
        True
    """
    count = _git("rev-list", "--count", "HEAD") if commit else None
    if commit is None or count is None:
        return __version__
    base = __version__.split(".dev")[0].split("+")[0]
    return f"{base}.dev{count}+g{commit[:9]}{'.dirty' if dirty else ''}"


def command_line() -> str:
    """This process's ``python -m tagtorch.train ...`` command, quoted for a shell to run again.

    Without the ``hydra.run.dir=`` and ``hydra.sweep.dir=`` overrides: where a run went on the
    machine that made it, not what it ran (a reader runs the command into a folder of theirs).
    A value inside the data home ``TAGTORCH_DATA_DIR`` is written relative to it
    (``data.path=${oc.env:TAGTORCH_DATA_DIR}/x.txt``), which the reader's data home resolves.
    """
    home = os.environ.get("TAGTORCH_DATA_DIR", "").rstrip("/")
    words = [w for w in sys.argv[1:] if not w.startswith(("hydra.run.dir=", "hydra.sweep.dir="))]
    if home:
        words = [re.sub(rf"=(?:{re.escape(home)})(?=/)", "=${oc.env:TAGTORCH_DATA_DIR}", w, count=1)
                 for w in words]
    return " ".join(["python -m tagtorch.train", *map(shlex.quote, words)])


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
    headings; empty when the report has none), the rows of the report's timing table (fit
    seconds and ms per test object: ``timings``, :func:`timing_rows`; left out when the report
    has none), the paired tests of every pair of methods on the best-first table's metric
    (``paired``, :func:`paired_rows`), that metric in each fold or seed (``per_fold``,
    :func:`per_fold_rows`) and, when the run wrote them, ``targets.csv``'s tests (``targets``,
    :func:`targets_rows`), the settings ``tuning.csv`` marks chosen (``chosen``,
    :func:`chosen_rows`) and the first, best and last epochs of ``curves.csv``'s learning curves
    (``curves``, :func:`curve_rows`).

    Args:
        folder: the run folder.
        provenance: in place of its ``provenance.json`` (a run older than that file; the
            record then says it was given by hand).

    Raises:
        UnreadableFileError: the folder lacks ``provenance.json`` (and none is given),
            ``config.yaml`` or a report with a best-first table, or one of its files holds a
            field of another kind (:func:`check_record`'s message: the file and the field), or
            a table it cannot read.
    """
    folder = Path(folder)
    if provenance is None:
        provenance = _check_fields(read_json(folder / PROVENANCE_FILE),
                                   folder / PROVENANCE_FILE, PROVENANCE_FIELDS, _REQUIRED)
    else:
        provenance = {**provenance, "given_by_hand": True}
    setting = _run_setting(folder / "config.yaml")
    report = _read(folder / "report.md")
    table = headline_section(report)
    if not table:
        raise UnreadableFileError(f"{folder / 'report.md'}: no best-first table")
    after = report[report.index(table) + len(table):].split("\n## ", 1)[0]
    metrics = [line for line in after.splitlines() if line.startswith(("|", "### "))]
    metric = headline_metric(table.splitlines())
    with reading(folder / "results.csv", "results table"):
        extra = {"paired": paired_rows(report, metric),
                 "per_fold": per_fold_rows(folder / "results.csv", metric)}
    if timings := timing_rows(report):
        extra["timings"] = timings
    for part, name, rows_of in (("targets", "targets.csv", targets_rows),
                                ("chosen", "tuning.csv", chosen_rows),
                                ("curves", "curves.csv", curve_rows)):
        if (folder / name).is_file():
            with reading(folder / name, f"{part} table"):
                extra[part] = rows_of(folder / name)
    return {**provenance, **setting, "correction": "Holm", "best_first": table.splitlines(),
            "metrics": metrics, **extra}


def _run_setting(path: Path) -> dict[str, Any]:
    """The data, seeds or folds, split and test of a run's ``config.yaml``, checked.

    Raises:
        UnreadableFileError: naming the file and the field, for one of another kind.
    """
    try:
        config = yaml.safe_load(_read(path))
    except yaml.YAMLError as error:
        raise UnreadableFileError(f"{path}: not YAML ({str(error).splitlines()[0]})") from None
    data = _check_fields(config, path, {}, ("data",)).get("data")
    target = data.get("_target_") if isinstance(data, dict) else None
    if not isinstance(target, str):
        raise UnreadableFileError(f"{path}: field 'data._target_': expected a string (the "
                                  f"loader), found {_json_kind(target)}")
    task = _check_fields(config.get("task") or {}, path, _TASK_FIELDS, (), "task.")
    significance = _check_fields(task.get("significance") or {}, path, {"test": "text"}, (),
                                 "task.significance.")
    repeats = ({"seeds": task["seeds"]} if task.get("seeds") is not None
               else {"folds": task.get("folds") or f"all {task.get('n_folds', '')}".strip()})
    split = {k: task[k] for k in ("p", "split", "query", "aggregate", "n_folds") if k in task}
    test = significance.get("test", "ttest")
    return {"data": target, **repeats, "split": split, "test": test}


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


def timing_rows(report: str) -> list[str]:
    r"""The rows of the report's timing table (its section headed :data:`TIMING_HEADING`).

    Every line of the section that starts with ``|``; empty when the report has no such section.

    Example:
        >>> timing_rows("## Time per test object (ms; fit in seconds)\n\n`ms_model`: per query."
        ...             "\n\n| method | fit_seconds |\n|---|---|\n| rf | 2.5324 ± n/a |\n\n## Next")
        ['| method | fit_seconds |', '|---|---|', '| rf | 2.5324 ± n/a |']
    """
    lines = report.splitlines()
    if TIMING_HEADING not in lines:
        return []
    section = lines[lines.index(TIMING_HEADING) + 1:]
    end = next((i for i, line in enumerate(section) if line.startswith("## ")), len(section))
    return [line for line in section[:end] if line.startswith("|")]


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
    """``docs/provenance.md``: one section per run record (name -> :func:`headline_record`).

    A record's strings are copied escaped (:func:`_text`, :func:`_code`): a record cannot add
    HTML, a link or a line to the page.
    """
    lines = ["# Provenance of the headline numbers", "",
             "Generated by `python benchmarks/provenance.py` from the run folders' "
             "`provenance.json`, `config.yaml` and `report.md` (the records are kept in "
             "`docs/runs/`); do not edit by hand. Every headline number of the README is in one "
             "of these records; the last section says which paragraphs of the docs pages' "
             "results are traced to one.", ""]
    for name, record in sorted(records.items()):
        lines += _record_lines(name, record)
    return "\n".join(lines)


def _record_lines(name: str, record: dict[str, Any]) -> list[str]:
    """The section of one record (checked by :func:`check_record`), its strings escaped."""
    repeats = (f"seeds {_repeats(record['seeds'])}" if "seeds" in record
               else f"folds {_repeats(record['folds'])}")
    dirty = " (with uncommitted changes)" if record.get("uncommitted_changes") else ""
    if record.get("given_by_hand"):
        dirty += " (command and commit given by hand: the run predates provenance.json)"
    threads = f", {record['threads']} torch threads" if "threads" in record else ""
    metric = _text(headline_metric(record["best_first"]))
    return [f"## {_text(name)}", "",
            f"- command: {_code(_where_left_out(record['command']))}",
            f"- commit: {_code(record.get('commit') or 'not recorded')}{dirty}; tagtorch "
            f"{_text(record['tagtorch'])}{threads}, started {_text(record['started'])}",
            *(f"- merged from: commit {_code(str(run.get('commit') or 'not recorded')[:12])}, "
              f"{_code(_where_left_out(run.get('command') or run['folder']))}"
              for run in record.get("merged_from", [])),
            f"- data: {_code(record['data'])}, {_text(json.dumps(record['split']))}, {repeats}",
            f"- test: paired {_text(record['test'])} over the per-query values, "
            f"{_text(record['correction'])}-corrected", "",
            *(f"**{_text(line[3:])}**" if line.startswith("## ") else _text(line)
              for line in record["best_first"]), "",
            *_metric_lines(record.get("metrics", [])),
            *_titled(TIMING_HEADING[3:], record.get("timings", [])),
            *_titled(f"Paired tests on {metric}", record.get("paired", [])),
            *_titled("Targets (targets.csv)", record.get("targets", [])),
            *_titled(f"Each fold or seed: {metric}", record.get("per_fold", [])),
            *_titled("Settings chosen on validation (tuning.csv)", record.get("chosen", [])),
            *_titled("Learning curves at the first, best (validation) and last epoch "
                     "(curves.csv)", record.get("curves", []))]


_LINE_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")
"""What ends a line (``str.splitlines``): a record's string stays on its line of the page."""


def _text(value: Any) -> str:
    r"""``value`` as markdown text on one line: ``&``, ``<``, ``>``, ``\``, ``[``, ``]`` escaped.

    Example:
        >>> print(_text("<img src=x onerror=alert(1)> [click](javascript:x)"))
        &lt;img src=x onerror=alert(1)&gt; \[click\](javascript:x)
    """
    text = _LINE_BREAKS.sub(" ", str(value)).replace("\\", "\\\\")
    return html.escape(text, quote=False).replace("[", "\\[").replace("]", "\\]")


def _code(value: Any) -> str:
    """``value`` as a markdown code span on one line, fenced longer than any backticks it holds.

    Example:
        >>> _code("a`b"), _code("plain")
        ('``a`b``', '`plain`')
    """
    text = _LINE_BREAKS.sub(" ", str(value))
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _repeats(value: list[int] | str) -> str:
    """Seeds or folds: a checked list of integers as it is, a phrase escaped."""
    return str(value) if isinstance(value, list) else _text(value)


def _where_left_out(command: str) -> str:
    """A recorded command without its ``hydra.run.dir=`` (where a run went, not what it ran)."""
    return " ".join(w for w in command.split() if not w.startswith("hydra.run.dir="))


def headline_metric(best_first: list[str]) -> str:
    """The metric a best-first table sorts by (its heading: ``## Best first by METRIC``)."""
    return best_first[0].split(" by ")[-1].strip()


def _titled(title: str, rows: list[str]) -> list[str]:
    """A bold title, then the table ``rows`` escaped (nothing without rows past its rule)."""
    return [f"**{title}**", "", *map(_text, rows), ""] if len(rows) > 2 else []


def _metric_lines(rows: list[str]) -> list[str]:
    """A record's ``metrics`` as markdown: ``###`` headings bold, a blank line after a table."""
    lines: list[str] = []
    for i, row in enumerate(rows):
        lines += [f"**{_text(row[4:])}**", ""] if row.startswith("### ") else [_text(row)]
        if row.startswith("|") and (i + 1 == len(rows) or not rows[i + 1].startswith("|")):
            lines.append("")
    return lines
