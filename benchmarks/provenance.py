"""The provenance table of the headline numbers: run folders -> docs/runs/ -> docs/provenance.md.

Each ``NAME=RUN_FOLDER`` given is read by
:func:`tagtorch.evaluation.provenance.headline_record` (its ``provenance.json``, ``config.yaml``
and the report's best-first and metric tables) and kept as ``docs/runs/NAME.json``; then every
record under ``docs/runs/`` is rendered into ``docs/provenance.md``. With no folder it only renders
(what ``tests/test_provenance.py`` checks: the page equals its records, and each headline number
of the README is in the record it names).

The docs pages with results (:data:`RESULT_PAGES`) are read too: each paragraph, list item or
table with a
figure (a decimal of four digits) either links a record (``provenance.md#NAME``; a table also
takes the links of the paragraph above it), and every figure of it is in the records it links,
or is counted as not traced; the page ends with those counts and the untraced paragraphs'
first words (what ``tests/test_provenance.py`` checks: a paragraph with figures that links
no record, or a linked figure that its record lacks, fails).

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

from tagtorch.evaluation.provenance import (
    PROVENANCE_FILE,
    TABLE_PARTS,
    headline_record,
    provenance_markdown,
)

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "runs"
PAGE = ROOT / "docs" / "provenance.md"
RESULT_PAGES = ["index.md", "getting_started.md", "choosing.md", "tag_recommendation.md",
                "diversity.md", "extended_candidates.md", "item_recommendation.md",
                "dorank_results.md", "personalized.md", "personalized_tags.md",
                "resource_ranking.md"]
"""The docs pages whose figures are results of runs (the speed pages hold benchmarks')."""
FIGURE = re.compile(r"(?<![\w.])\d\.\d{4}(?!\d)")
LINK = re.compile(r"provenance\.md#([\w-]+)")


def page_blocks(text: str) -> list[str]:
    """A page's paragraphs, list items and tables, code blocks left out."""
    prose = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.M | re.S)
    parts = re.split(r"\n\s*\n|\n(?=- |\* |\d+\. )", prose)  # blank lines; list items
    return [block.strip() for block in parts if block.strip()]


def traced_blocks(text: str, records: dict[str, dict[str, Any]]
                  ) -> list[tuple[str, list[str], list[str]]]:
    """Each block of ``text`` with figures: its first words, the records it links and its
    figures missing from them (every figure, when it links none).

    A figure is looked up as text in the linked records' tables, not by method and metric: the
    check catches a linked paragraph whose figures drift from its run, not a link to the wrong
    run whose tables happen to hold the same four digits.
    """
    out, above = [], []
    for block in page_blocks(text):
        names = LINK.findall(block) or (above if block.startswith("|") else [])
        above = names
        figures = FIGURE.findall(block)
        if not figures:
            continue
        tables = "\n".join(line for name in names if name in records
                           for part in TABLE_PARTS for line in records[name].get(part, []))
        missing = [f for f in figures if not names or f not in tables]
        out.append((" ".join(block.split()[:8]), names, missing))
    return out


def tracing_markdown(records: dict[str, dict[str, Any]]) -> list[str]:
    """The page's last section: per results page, its paragraphs with figures traced or not."""
    lines = ["## Figures on the docs pages", "",
             "Paragraphs and tables with figures on the results pages: those that link a record "
             "above (every figure of them is in it), and those not traced "
             "(`tests/test_provenance.py` fails on one).", "",
             "| page | traced | not traced | first words of those not traced |",
             "|---|---|---|---|"]
    for page in RESULT_PAGES:
        blocks = traced_blocks((ROOT / "docs" / page).read_text(encoding="utf-8"), records)
        untraced = [words for words, names, _ in blocks if not names]
        lines.append(f"| {page} | {len(blocks) - len(untraced)} | {len(untraced)} | "
                     + "; ".join(w.replace("|", "").replace("`", "")[:60] for w in untraced)
                     + " |")
    traced, total = tracing_counts(records)
    return [*lines, f"| all | {traced} | {total - traced} | |"]


def tracing_counts(records: dict[str, dict[str, Any]]) -> tuple[int, int]:
    """How many paragraphs with figures the results pages have, and how many are traced."""
    blocks = [block for page in RESULT_PAGES for block in
              traced_blocks((ROOT / "docs" / page).read_text(encoding="utf-8"), records)]
    return sum(bool(names) for _, names, _ in blocks), len(blocks)


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


def provenance_page(records: dict[str, dict[str, Any]]) -> str:
    """``docs/provenance.md``: the records, then the tracing of the results pages."""
    return provenance_markdown(records) + "\n".join(tracing_markdown(records)) + "\n"


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
    PAGE.write_text(provenance_page(records), encoding="utf-8")
    print(f"{PAGE.relative_to(ROOT)}: {len(records)} runs")


if __name__ == "__main__":
    main()
