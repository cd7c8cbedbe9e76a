"""``python -m tagtorch.recommend PATH``: ask a fitted recommender (``task=fit``).

Examples:
    python -m tagtorch.recommend checkpoints/recommenders/lastfm-latre_wts --tags grunge,90s
    python -m tagtorch.recommend FOLDER --title "Nevermind" --tags grunge -k 10 --json
    python -m tagtorch.recommend FOLDER --csv objects.csv --json
    python -m tagtorch.recommend checkpoints/recommenders/lastfm-dorank --user 2 --tag rock

A tag recommender takes an object (``--tags``, ``--title``, ``--description``, ``--text``); an
item recommender takes a user (``--user``, and ``--tag`` for the items of one tag). One query
prints a table; ``--json`` prints JSON for scripts (one query: an object; ``--csv``: a list,
one entry per row). A tag recommender's CSV has a ``tags`` column (tags separated by commas)
and a column per text field; an item recommender's CSV has ``user`` and ``tag`` columns; other
columns are refused. Bad input ends with one line on standard error and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tagtorch.serving import ItemRecommendations, Recommendations, Recommender, TagRecommender
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
    parser.add_argument("--user", help="item recommenders: the user's id")
    parser.add_argument("--tag", help="item recommenders: the items for this tag")
    parser.add_argument("-k", type=int, help="how many to recommend (default: 5 tags, 10 "
                                             "items)")
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


def csv_rows(path: str) -> list[dict[str, str]]:
    """The rows of a CSV file (all strings, blanks as ""), at most :data:`MAX_CSV_ROWS`."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, nrows=MAX_CSV_ROWS + 1)
    if len(frame) > MAX_CSV_ROWS:
        raise ValueError(f"{path}: more than {MAX_CSV_ROWS:,} rows")
    return frame.to_dict("records")


def objects_of(args: argparse.Namespace) -> list[dict[str, object]]:
    """A tag recommender's objects: the CSV's rows, or the one object of the options."""
    if args.user is not None or args.tag is not None:
        raise ValueError("--user and --tag ask an item recommender; this one recommends tags "
                         "for objects (--tags, --title, --description, --text)")
    if args.csv:
        return [{name: (split_tags(value) if name == "tags" else value)
                 for name, value in row.items()} for row in csv_rows(args.csv)]
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


def queries_of(args: argparse.Namespace) -> list[dict[str, object]]:
    """An item recommender's queries: the CSV's rows, or the one query of the options."""
    if args.tags or args.title is not None or args.description is not None or args.text:
        raise ValueError("--tags, --title, --description and --text describe an object for a "
                         "tag recommender; this one recommends items (--user, --tag)")
    if args.csv:
        return [{name: (value or None if name == "tag" else value)
                 for name, value in row.items()} for row in csv_rows(args.csv)]
    if args.user is None:
        raise ValueError("an item recommender needs --user (and --tag for one tag's items)")
    return [{"user": args.user, "tag": args.tag}]


def item_table(result: ItemRecommendations) -> str:
    """Item recommendations as a table of items, titles and scores (or the reason)."""
    if not result.items:
        return f"no recommendation: {result.reason}"
    width = max(len("item"), *(len(item) for item, _ in result.items))
    title_width = min(40, max(len("title"), *(len(t) for t in result.titles)))
    lines = [f"{'item':<{width}}  {'title':<{title_width}}  score"]
    lines += [f"{item:<{width}}  {title[:title_width]:<{title_width}}  {score:.4f}"
              for (item, score), title in zip(result.items, result.titles, strict=True)]
    return "\n".join(lines)


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
    results: Sequence[Recommendations | ItemRecommendations]
    try:
        recommender = Recommender.load(Path(args.path))
        if isinstance(recommender, TagRecommender):
            k = 5 if args.k is None else args.k
            results = recommender.recommend_tags_batch(objects_of(args), k=k)
        else:
            k = 10 if args.k is None else args.k
            results = recommender.recommend_items_batch(queries_of(args), k=k)
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
            print(table(result) if isinstance(result, Recommendations) else item_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
