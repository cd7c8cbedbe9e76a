"""Whether two run folders hold identical results: the check that a refactor changed no figure.

Compares, between the folders of two runs of the same command (say, before and after a
refactor, each from its own checkout):

- ``results.csv``: every row but the timing metrics (``*seconds*``, ``*ms_*``), values exactly;
- ``per_object.csv.gz``: the decompressed bytes (gzip headers hold a time stamp);
- every TREC file (``qrels.trec``, ``run*.trec``): the bytes.

Usage (each run from its own checkout, no cache, one fold)::

    python -m tagtorch.train +experiment=latre_lastfm 'task.folds=[0]' \\
        task.cache=false logger=none hydra.run.dir=/tmp/before
    ... the same at the other commit, hydra.run.dir=/tmp/after
    python benchmarks/check_identical.py /tmp/before /tmp/after

Prints one line per file and exits 1 if anything differs or is missing.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

import pandas as pd

TIMING = r"seconds|(?:^|_)ms(?:_|$)"  # fit_seconds, ms_rules, online_ms_median, ...


def _results(folder: Path) -> pd.DataFrame:
    frame = pd.read_csv(folder / "results.csv")
    return frame[~frame["metric"].str.contains(TIMING, regex=True)].reset_index(drop=True)


def compare(before: Path, after: Path) -> list[tuple[str, bool, str]]:
    """``(file, identical, detail)`` for every file compared."""
    rows = []
    a, b = _results(before), _results(after)
    rows.append(("results.csv", a.equals(b), f"{len(a)} rows without timing"))
    objects = [gzip.decompress((folder / "per_object.csv.gz").read_bytes())
               for folder in (before, after)]
    rows.append(("per_object.csv.gz", objects[0] == objects[1], f"{len(objects[0])} bytes"))
    names = sorted({p.name for folder in (before, after) for p in folder.glob("*.trec")})
    for name in names:
        first, second = before / name, after / name
        same = first.is_file() and second.is_file() and (
            first.read_bytes() == second.read_bytes())
        rows.append((name, same, "" if first.is_file() and second.is_file() else "missing"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    rows = compare(args.before, args.after)
    for name, same, detail in rows:
        print(f"{'identical' if same else 'DIFFERENT':<9}  {name}  {detail}".rstrip())
    return 0 if all(same for _, same, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
