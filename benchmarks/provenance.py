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
were given by hand. Every record is checked before it is rendered, and its strings are escaped
(:func:`tagtorch.evaluation.provenance.check_record`); files are written through
:func:`tagtorch.storage.atomic_write` (a link at ``docs/runs/NAME.json`` or
``docs/provenance.md`` is replaced, never written through). A bad argument or record ends the
script with one line naming it (exit status 2).

Usage::

    python benchmarks/provenance.py card=outputs/2026-11-27/14-37-31
    python benchmarks/provenance.py                       # render docs/provenance.md only
    python benchmarks/provenance.py --check               # exit 1 if the page is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from tagtorch.errors import UnreadableFileError
from tagtorch.evaluation.provenance import (
    PROVENANCE_FILE,
    RECORD_NAME,
    TABLE_PARTS,
    headline_record,
    provenance_markdown,
    read_records,
)
from tagtorch.storage import atomic_write

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
"""The docs folder: the records in ``runs/``, the page ``provenance.md``, the results pages."""
RESULT_PAGES = ["index.md", "getting_started.md", "choosing.md", "tag_recommendation.md",
                "diversity.md", "extended_candidates.md", "item_recommendation.md",
                "dorank_results.md", "personalized.md", "personalized_tags.md",
                "resource_ranking.md", "neural_vs_trees.md"]
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


def tracing_markdown(records: dict[str, dict[str, Any]], docs: Path = DOCS) -> list[str]:
    """The page's last section: per results page, its paragraphs with figures traced or not."""
    lines = ["## Figures on the docs pages", "",
             "Paragraphs and tables with figures on the results pages: those that link a record "
             "above (every figure of them is in it), and those not traced "
             "(`tests/test_provenance.py` fails on one).", "",
             "| page | traced | not traced | first words of those not traced |",
             "|---|---|---|---|"]
    for page in RESULT_PAGES:
        blocks = traced_blocks((docs / page).read_text(encoding="utf-8"), records)
        untraced = [words for words, names, _ in blocks if not names]
        lines.append(f"| {page} | {len(blocks) - len(untraced)} | {len(untraced)} | "
                     + "; ".join(w.replace("|", "").replace("`", "")[:60] for w in untraced)
                     + " |")
    traced, total = tracing_counts(records, docs)
    return [*lines, f"| all | {traced} | {total - traced} | |"]


def tracing_counts(records: dict[str, dict[str, Any]], docs: Path = DOCS) -> tuple[int, int]:
    """How many paragraphs with figures the results pages have, and how many are traced."""
    blocks = [block for page in RESULT_PAGES for block in
              traced_blocks((docs / page).read_text(encoding="utf-8"), records)]
    return sum(bool(names) for _, names, _ in blocks), len(blocks)


def _pairs(parser: argparse.ArgumentParser, values: list[str], what: str) -> dict[str, str]:
    """``NAME=VALUE`` arguments by name; a malformed one ends the script (exit status 2)."""
    pairs = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            parser.error(f"{what} must be NAME=VALUE, got {value!r:.80}")
        if not RECORD_NAME.fullmatch(name):
            parser.error(f"{what}: a record's name is letters, digits, _ and -, got {name!r:.80}")
        pairs[name] = rest
    return pairs


def record_of(folder: Path, commit: str | None, command: str | None) -> dict[str, Any]:
    """The run's record; a run without ``provenance.json`` needs ``commit`` and ``command``.

    Raises:
        UnreadableFileError: the folder lacks ``provenance.json`` and no commit and command are
            given, or a file of it cannot be read (:func:`headline_record`).
    """
    if (folder / PROVENANCE_FILE).is_file():
        return headline_record(folder)
    if commit is None or command is None:
        raise UnreadableFileError(f"{folder} has no {PROVENANCE_FILE}: give its commit and "
                                  "command (--given, --given-command)")
    return headline_record(folder, {"command": command, "commit": commit,
                                    "uncommitted_changes": None, "tagtorch": "not recorded",
                                    "started": "not recorded"})


def provenance_page(records: dict[str, dict[str, Any]], docs: Path = DOCS) -> str:
    """``docs/provenance.md``: the records, then the tracing of the results pages."""
    return provenance_markdown(records) + "\n".join(tracing_markdown(records, docs)) + "\n"


def _parser() -> argparse.ArgumentParser:
    """The command line's arguments."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="NAME=RUN_FOLDER of each run to record")
    parser.add_argument("--given", nargs="*", default=[], help="NAME=COMMIT of an old run")
    parser.add_argument("--given-command", nargs="*", default=[],
                        help="NAME=COMMAND of an old run")
    parser.add_argument("--docs", type=Path, default=DOCS,
                        help="the docs folder: records in DOCS/runs, the page "
                             "DOCS/provenance.md (default: this checkout's docs/)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing: exit 1 if the page differs from its records'")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Records the runs given, renders the page; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    given = _pairs(parser, args.given, "--given")
    commands = _pairs(parser, args.given_command, "--given-command")
    runs = _pairs(parser, args.runs, "a run")
    if args.check and runs:
        parser.error("--check writes nothing: give no run to record")
    folder, page = args.docs / "runs", args.docs / "provenance.md"
    try:
        for name, run in runs.items():
            record = record_of(Path(run), given.get(name), commands.get(name))
            with atomic_write(folder / f"{name}.json") as partial:
                partial.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
            print(f"recorded {name}: {run}")
        records = read_records(folder)
        text = provenance_page(records, args.docs)
    except (UnreadableFileError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.check:
        stale = not page.is_file() or page.read_text(encoding="utf-8") != text
        print(f"{page}: {'stale: run python benchmarks/provenance.py' if stale else 'current'}"
              f" ({len(records)} runs)")
        return int(stale)
    with atomic_write(page) as partial:
        partial.write_text(text, encoding="utf-8")
    print(f"{page}: {len(records)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
