"""``python -m tagtorch.recommend PATH``: ask a fitted recommender (``task=fit``) for tags.

Examples:
    python -m tagtorch.recommend checkpoints/recommenders/lastfm-latre_wts --tags grunge,90s
    python -m tagtorch.recommend FOLDER --title "Nevermind" --tags grunge -k 10 --json
    python -m tagtorch.recommend FOLDER --csv objects.csv --json

One object prints a table of tags and scores; ``--json`` prints JSON for scripts (one object:
an object; ``--csv``: a list, one entry per row). A CSV has a ``tags`` column (tags separated
by commas) and a column per text field of the recommender; other columns are refused. Bad input
ends with one line on standard error and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tagtorch.serving.tags import Recommendations, TagRecommender
from tagtorch.storage import UnreadableFileError

MAX_CSV_ROWS = 100_000


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m tagtorch.recommend",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("path", help="a recommender folder written by task=fit")
    parser.add_argument("--tags", default="", help="the object's tags, separated by commas")
    parser.add_argument("--title", help="the object's title")
    parser.add_argument("--description", help="the object's description")
    parser.add_argument("--text", action="append", default=[], metavar="FIELD=TEXT",
                        help="any text field of the recommender (repeatable)")
    parser.add_argument("-k", type=int, default=5, help="tags to recommend (default 5)")
    parser.add_argument("--csv", help="recommend for every row of this CSV file")
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser.parse_args(argv)


def split_tags(text: str) -> list[str]:
    """Tags separated by commas, blanks dropped.

    Example:
        >>> split_tags(" grunge, 90s,,")
        ['grunge', '90s']
    """
    return [t.strip() for t in str(text).split(",") if t.strip()]


def objects_of(args: argparse.Namespace) -> list[dict[str, object]]:
    """The objects asked for: the CSV's rows, or the one object of the options."""
    if args.csv:
        frame = pd.read_csv(args.csv, dtype=str, keep_default_na=False, nrows=MAX_CSV_ROWS + 1)
        if len(frame) > MAX_CSV_ROWS:
            raise ValueError(f"{args.csv}: more than {MAX_CSV_ROWS:,} rows")
        return [{name: (split_tags(value) if name == "tags" else value)
                 for name, value in row.items()} for row in frame.to_dict("records")]
    texts: dict[str, object] = {}
    for item in args.text:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--text {item!r}: expected FIELD=TEXT")
        texts[name] = value
    for name in ("title", "description"):
        if getattr(args, name) is not None:
            texts[name] = getattr(args, name)
    return [{"tags": split_tags(args.tags), **texts}]


def table(result: Recommendations) -> str:
    """The recommendations as a two-column text table (or the reason there are none)."""
    lines = []
    if result.tags:
        width = max(len("tag"), *(len(tag) for tag, _ in result.tags))
        lines.append(f"{'tag':<{width}}  score")
        lines += [f"{tag:<{width}}  {score:.4f}" for tag, score in result.tags]
    else:
        lines.append(f"no recommendation: {result.reason}")
    if result.unknown_tags:
        lines.append(f"unknown tags (left out): {', '.join(result.unknown_tags)}")
    if result.unknown_words:
        lines.append(f"unknown words (left out): {', '.join(result.unknown_words)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command; returns the exit status."""
    args = parse_args(argv)
    try:
        objects = objects_of(args)
        recommender = TagRecommender.load(Path(args.path))
        results = recommender.recommend_tags_batch(objects, k=args.k)
    except (ValueError, UnreadableFileError, FileNotFoundError, pd.errors.ParserError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.json:
        payload = [r.as_dict() for r in results]
        print(json.dumps(payload if args.csv else payload[0], indent=1))
    else:
        for i, result in enumerate(results):
            if args.csv:
                print(f"# row {i}")
            print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
