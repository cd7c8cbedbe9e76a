r"""``python -m tagtorch.recommend PATH``: ask a fitted recommender (``task=fit``).

Examples:
    python -m tagtorch.recommend checkpoints/recommenders/lastfm-latre_wts --tags grunge,90s
    python -m tagtorch.recommend FOLDER --title "Nevermind" --tags grunge -k 10 --json
    python -m tagtorch.recommend FOLDER --csv objects.csv --json
    python -m tagtorch.recommend checkpoints/recommenders/lastfm-dorank --user 2 --tag rock
    python -m tagtorch.recommend checkpoints/recommenders/movielens-bll_c --user 75 --resource 353
    python -m tagtorch.recommend checkpoints/recommenders/lastfm-bm25 --tags grunge,90s

A tag recommender takes an object (``--tags``, ``--title``, ``--description``, ``--text``); an
item recommender takes a user (``--user``, and ``--tag`` for the items of one tag); a
personalized tag recommender takes a post (``--user``, ``--resource``, ``--time``); a resource
recommender a tag query (``--tags``; its CSV a ``tags`` column). One query
prints a table; ``--json`` prints JSON for scripts (one query: an object; ``--csv``: a list,
one entry per row). A tag recommender's CSV has a ``tags`` column (tags separated by commas)
and a column per text field; an item recommender's CSV has ``user`` and ``tag`` columns, a
personalized one ``user``, ``resource`` and ``time`` (may be empty); other columns are
refused. Bad input ends with one line on standard error and exit status 2: an option's value
too (``-k`` an integer from 1 to :data:`~tagtorch.serving.schema.MAX_K`, as the service takes,
checked before the recommender is read; ``--time`` Unix seconds, an integer).

What it prints may come from others (posted tags, item titles, the CSV): the tables and the
error line show control characters escaped (``\x1b`` for ESC: C0, DEL and C1 alike), so no
escape sequence reaches the terminal; ``--json`` escapes them as JSON does (``\u001b``). A
``--csv`` file is read only if it is a regular file of at most :data:`MAX_CSV_BYTES` bytes and
:data:`MAX_CSV_ROWS` rows, in UTF-8, every row with the header's number of fields; errors name
the file and the line.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from tagtorch.errors import UnreadableFileError
from tagtorch.metrics.functional import check_k
from tagtorch.serving import (
    ItemRecommendations,
    ItemRecommender,
    PostRecommender,
    Recommendations,
    Recommender,
    ResourceRecommendations,
    TagRecommender,
)
from tagtorch.serving.schema import MAX_K

MAX_CSV_ROWS = 100_000
"""Most rows of a ``--csv`` file."""
MAX_CSV_BYTES = 64 * 2**20
"""Largest ``--csv`` file read (bytes): no more is ever read from it."""
_ESCAPES = {code: f"\\x{code:02x}" for code in [*range(0x20), *range(0x7F, 0xA0)]}


def printable(text: str) -> str:
    r"""``text`` with its control characters (C0, DEL, C1) escaped, safe to print on a terminal.

    Example:
        >>> print(printable("rock\x1b[2J\x9b31m\n"))
        rock\x1b[2J\x9b31m\x0a
    """
    return str(text).translate(_ESCAPES)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line.

    Raises:
        argparse.ArgumentError: a value of the wrong type or a missing one (:func:`main` shows
            it in one line); a value out of range is :func:`check_options`'.
    """
    parser = argparse.ArgumentParser(prog="python -m tagtorch.recommend",
                                     description=__doc__.splitlines()[0], exit_on_error=False)
    parser.add_argument("path", help="a recommender folder written by task=fit")
    parser.add_argument("--tags", default="", help="the object's tags, separated by commas")
    parser.add_argument("--title", help="the object's title")
    parser.add_argument("--description", help="the object's description")
    parser.add_argument("--text", action="append", default=[], metavar="FIELD=TEXT",
                        help="any text field of the recommender (repeatable)")
    parser.add_argument("--user", help="item and personalized tag recommenders: the user's id")
    parser.add_argument("--tag", help="item recommenders: the items for this tag")
    parser.add_argument("--resource", help="personalized tag recommenders: the resource's id")
    parser.add_argument("--time", type=int, help="personalized tag recommenders: the post's "
                                                 "Unix time (default: now)")
    parser.add_argument("-k", type=int, help=f"how many to recommend, 1 to {MAX_K} (default: 5 "
                                             "tags, 10 items)")
    parser.add_argument("--csv", help="recommend for every row of this CSV file")
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser.parse_args(argv)


def check_options(args: argparse.Namespace) -> None:
    """Refuses an option's value out of range, before any work.

    Raises:
        ValueError: naming the option, the value and the range, in one line.
    """
    if args.k is not None:
        check_k(args.k, "-k", at_most=MAX_K)


def split_tags(text: str) -> list[str]:
    """Tags separated by commas, blanks dropped.

    Example:
        >>> split_tags(" grunge, 90s,,")
        ['grunge', '90s']
    """
    return [t.strip() for t in str(text).split(",") if t.strip()]


def read_bounded(path: str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (no more is read).

    Raises:
        ValueError: naming the file: a folder, a device or pipe (``/dev/zero``), a missing,
            unreadable or larger file.
    """
    file = Path(path)
    if not file.is_file():
        what = ("a folder" if file.is_dir() else "not a regular file" if file.exists()
                else "no such file")
        raise ValueError(f"{path}: {what}; expected a CSV file")
    try:
        with open(file, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror or error})") from None
    if len(data) > limit:
        raise ValueError(f"{path}: more than {limit:,} bytes (the most a CSV file may hold)")
    return data


def csv_rows(path: str) -> list[dict[str, str]]:
    """The rows of a CSV file (all strings, blank lines skipped), at most :data:`MAX_CSV_ROWS`.

    Raises:
        ValueError: naming the file (and the line): see :func:`read_bounded`, not UTF-8, no
            header, a repeated column, a row with another number of fields than the header.
    """
    data = read_bounded(path, MAX_CSV_BYTES).removeprefix(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"{path}, line {line}: not UTF-8 (byte 0x{data[error.start]:02x})"
                         ) from None
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[dict[str, str]] = []
    try:
        header = next(reader, [])
        if not header:
            raise ValueError(f"{path}: no header row")
        if len(set(header)) != len(header):
            raise ValueError(f"{path}, line 1: a repeated column in {header}")
        for row in reader:
            if len(rows) == MAX_CSV_ROWS:
                raise ValueError(f"{path}: more than {MAX_CSV_ROWS:,} rows")
            if row and len(row) != len(header):
                raise ValueError(f"{path}, line {reader.line_num}: {len(row)} field"
                                 f"{'' if len(row) == 1 else 's'}, expected {len(header)} as "
                                 f"in the header")
            if row:
                rows.append(dict(zip(header, row, strict=True)))
    except csv.Error as error:
        raise ValueError(f"{path}, line {reader.line_num}: {error}") from None
    return rows


def objects_of(args: argparse.Namespace) -> list[dict[str, object]]:
    """A tag recommender's objects: the CSV's rows, or the one object of the options."""
    if any(v is not None for v in (args.user, args.tag, args.resource, args.time)):
        raise ValueError("--user, --tag, --resource and --time ask an item or personalized "
                         "recommender; this one recommends tags for objects (--tags, --title, "
                         "--description, --text)")
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


def _no_object(args: argparse.Namespace, recommends: str) -> None:
    """Refuses the options of an object (a tag recommender's) for another kind."""
    if args.tags or args.title is not None or args.description is not None or args.text:
        raise ValueError("--tags, --title, --description and --text describe an object for a "
                         f"tag recommender; this one recommends {recommends}")


def post_queries_of(args: argparse.Namespace) -> list[dict[str, object]]:
    """A personalized tag recommender's posts: the CSV's rows, or the options' one post."""
    _no_object(args, "tags for a post (--user, --resource, --time)")
    if args.tag is not None:
        raise ValueError("--tag asks an item recommender; this one takes --user and --resource")
    if args.csv:
        rows = csv_rows(args.csv)
        for i, row in enumerate(rows):
            moment = row.get("time") or None
            if moment is not None and not moment.isdigit():
                raise ValueError(f"{args.csv}: row {i + 1}: time must be Unix seconds, got "
                                 f"{moment!r:.40}")
            row["time"] = None if moment is None else int(moment)  # type: ignore[assignment]
        return [dict(row) for row in rows]
    if args.user is None or args.resource is None:
        raise ValueError("a personalized tag recommender needs --user and --resource")
    return [{"user": args.user, "resource": args.resource, "time": args.time}]


def queries_of(args: argparse.Namespace) -> list[dict[str, object]]:
    """An item recommender's queries: the CSV's rows, or the one query of the options."""
    _no_object(args, "items (--user, --tag)")
    if args.resource is not None or args.time is not None:
        raise ValueError("--resource and --time ask a personalized tag recommender; this one "
                         "recommends items (--user, --tag)")
    if args.csv:
        return [{name: (value or None if name == "tag" else value)
                 for name, value in row.items()} for row in csv_rows(args.csv)]
    if args.user is None:
        raise ValueError("an item recommender needs --user (and --tag for one tag's items)")
    return [{"user": args.user, "tag": args.tag}]


def resource_queries_of(args: argparse.Namespace) -> list[list[str]]:
    """A resource recommender's tag queries: the CSV's ``tags`` column, or ``--tags``."""
    if any(v is not None for v in (args.user, args.tag, args.resource, args.time, args.title,
                                   args.description)) or args.text:
        raise ValueError("this one recommends resources for a tag query: --tags only (or a "
                         "--csv with a 'tags' column)")
    if args.csv:
        rows = csv_rows(args.csv)
        if rows and "tags" not in rows[0]:
            raise ValueError(f"{args.csv}: no 'tags' column")
        return [split_tags(row["tags"]) for row in rows]
    if not args.tags:
        raise ValueError("a resource recommender needs --tags (the query, separated by commas)")
    return [split_tags(args.tags)]


def ranked_table(result: ItemRecommendations | ResourceRecommendations) -> str:
    """Items or resources as a table of ids, titles and scores (or the reason).

    Every string is shown through :func:`printable` (control characters escaped).
    """
    what = "item" if isinstance(result, ItemRecommendations) else "resource"
    ranked = result.items if isinstance(result, ItemRecommendations) else result.resources
    left = getattr(result, "unknown_tags", [])
    tail = [f"unknown tags (left out): {printable(', '.join(left))}"] if left else []
    if not ranked:
        return "\n".join([f"no recommendation: {printable(result.reason or '')}", *tail])
    rows = [(printable(name), score) for name, score in ranked]
    titles = [printable(title) for title in result.titles]
    width = max(len(what), *(len(name) for name, _ in rows))
    title_width = min(40, max(len("title"), *(len(t) for t in titles)))
    lines = [f"{what:<{width}}  {'title':<{title_width}}  score"]
    lines += [f"{name:<{width}}  {title[:title_width]:<{title_width}}  {score:.4f}"
              for (name, score), title in zip(rows, titles, strict=True)]
    return "\n".join([*lines, *tail])


def table(result: Recommendations) -> str:
    """The recommendations as a two-column text table (or the reason there are none).

    Every string is shown through :func:`printable` (control characters escaped).
    """
    lines = []
    tags = [(printable(tag), score) for tag, score in result.tags]
    if tags:
        width = max(len("tag"), *(len(tag) for tag, _ in tags))
        lines.append(f"{'tag':<{width}}  score")
        lines += [f"{tag:<{width}}  {score:.4f}" for tag, score in tags]
    else:
        lines.append(f"no recommendation: {printable(result.reason or '')}")
    if result.unknown_tags:
        lines.append(f"unknown tags (left out): {printable(', '.join(result.unknown_tags))}")
    if result.unknown_words:
        lines.append(f"unknown words (left out): {printable(', '.join(result.unknown_words))}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command; returns the exit status."""
    try:
        args = parse_args(argv)
        check_options(args)
    except (argparse.ArgumentError, ValueError) as error:
        print(f"error: {printable(str(error)):.500}", file=sys.stderr)  # a value echoed, cut
        return 2
    results: list[Recommendations | ItemRecommendations | ResourceRecommendations]
    try:
        recommender = Recommender.load(Path(args.path))
        if isinstance(recommender, TagRecommender):
            k = 5 if args.k is None else args.k
            results = [*recommender.recommend_tags_batch(objects_of(args), k=k)]
        elif isinstance(recommender, PostRecommender):
            k = 5 if args.k is None else args.k
            results = [*recommender.recommend_tags_batch(post_queries_of(args), k=k)]
        elif isinstance(recommender, ItemRecommender):
            k = 10 if args.k is None else args.k
            results = [*recommender.recommend_items_batch(queries_of(args), k=k)]
        else:
            k = 10 if args.k is None else args.k
            results = [*recommender.recommend_resources_batch(resource_queries_of(args), k=k)]
    except (ValueError, UnreadableFileError, FileNotFoundError) as error:
        print(f"error: {printable(str(error))}", file=sys.stderr)
        return 2
    if args.json:
        payload = [r.as_dict() for r in results]
        print(json.dumps(payload if args.csv else payload[0], indent=1))
    else:
        for i, result in enumerate(results):
            if args.csv:
                print(f"# row {i}")
            print(table(result) if isinstance(result, Recommendations)
                  else ranked_table(result))
    return 0

