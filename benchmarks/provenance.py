"""The provenance table of the headline numbers: run folders -> docs/runs/ -> docs/provenance.md.

Each ``NAME=RUN_FOLDER`` given is read by
:func:`tagtorch.evaluation.provenance.headline_record` (its ``provenance.json``, ``config.yaml``
and the report's best-first table) and kept as ``docs/runs/NAME.json``; then every record
under ``docs/runs/`` is rendered into ``docs/provenance.md``. With no folder it only renders
(what ``tests/test_provenance.py`` checks: the page equals its records, and each headline number
of the README is in the record it names).

A run made before ``provenance.json`` existed can be recorded with ``--given
NAME=COMMIT`` and ``--given-command NAME=COMMAND``: the record then says the commit and command
were given by hand.

Usage::

    python benchmarks/provenance.py card=outputs/2026-11-27/14-37-31
    python benchmarks/provenance.py                       # render docs/provenance.md only
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from tagtorch.evaluation.provenance import PROVENANCE_FILE, headline_record, provenance_markdown

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "runs"
PAGE = ROOT / "docs" / "provenance.md"


def _pairs(values: list[str], what: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise SystemExit(f"error: {what} must be NAME=VALUE, got {value!r}")
        pairs[name] = rest
    return pairs


def record_of(folder: Path, commit: str | None, command: str | None) -> dict[str, Any]:
    """The run's record; a run without ``provenance.json`` needs ``commit`` and ``command``."""
    if (folder / PROVENANCE_FILE).is_file():
        return headline_record(folder)
    if commit is None or command is None:
        raise SystemExit(f"error: {folder} has no {PROVENANCE_FILE}: give its commit and "
                         "command (--given, --given-command)")
    return headline_record(folder, {"command": command, "commit": commit,
                                    "uncommitted_changes": None, "tagtorch": "not recorded",
                                    "started": "not recorded"})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="NAME=RUN_FOLDER of each run to record")
    parser.add_argument("--given", nargs="*", default=[], help="NAME=COMMIT of an old run")
    parser.add_argument("--given-command", nargs="*", default=[],
                        help="NAME=COMMAND of an old run")
    args = parser.parse_args(argv)
    given, commands = _pairs(args.given, "--given"), _pairs(args.given_command, "--given-command")
    RUNS.mkdir(parents=True, exist_ok=True)
    for name, folder in _pairs(args.runs, "a run").items():
        if not re.fullmatch(r"[\w-]+", name):
            raise SystemExit(f"error: a record's name is letters, digits, _ and -: {name!r}")
        record = record_of(Path(folder), given.get(name), commands.get(name))
        (RUNS / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"recorded {name}: {folder}")
    records = {p.stem: json.loads(p.read_text(encoding="utf-8"))
               for p in sorted(RUNS.glob("*.json"))}
    PAGE.write_text(provenance_markdown(records), encoding="utf-8")
    print(f"{PAGE.relative_to(ROOT)}: {len(records)} runs")


if __name__ == "__main__":
    main()
