"""``python -m tagtorch.cache info|clear``: what the on-disk caches hold, and removing it.

Examples:
    python -m tagtorch.cache info                          # each cache folder: entries, size
    python -m tagtorch.cache clear --what candidates --yes # remove the candidate sets
    python -m tagtorch.cache clear                         # every cache, after asking

The cache root is the user cache folder (``$XDG_CACHE_HOME/tagtorch``, else
``~/.cache/tagtorch``); it may also hold downloaded datasets, which are never touched: only the
files a cache writes (:data:`tagtorch.cache.KINDS`) are counted and removed, and symbolic links
are not followed. Folders set by a ``cache_dir`` setting are not looked at.

A CLI (layer 5): it reads the cache root from :mod:`tagtorch.data.download`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from tagtorch.cache import KINDS, CacheUsage, cache_usage, clear_caches
from tagtorch.data.download import user_cache_dir


def _parser() -> argparse.ArgumentParser:
    """The command line: ``info`` and ``clear [--what KIND] [--yes]``."""
    parser = argparse.ArgumentParser(
        prog="python -m tagtorch.cache",
        description="Show or remove tagtorch's on-disk caches (candidate sets, processed "
                    "texts) in the user cache folder ($XDG_CACHE_HOME/tagtorch or "
                    "~/.cache/tagtorch). Entries are keyed by the code that wrote them: "
                    "entries of older versions are never read again and only take space.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{info,clear}")
    commands.add_parser("info", help="print each cache folder, its entry count and size")
    clear = commands.add_parser(
        "clear", help="remove cache entries (only files a cache wrote; datasets stay)")
    clear.add_argument("--what", choices=[*KINDS, "all"], default="all",
                       help="which cache to clear (default: all)")
    clear.add_argument("--yes", action="store_true", help="remove without asking")
    return parser


def _info(root: Path) -> int:
    """Prints each cache folder's entry count and size."""
    print(f"cache root: {root}")
    usage = cache_usage(root)
    for u in usage:
        print(f"{u.kind}: {u.summary()}, {KINDS[u.kind].what}")
    total = CacheUsage("total", sum(u.entries for u in usage), sum(u.size for u in usage))
    print(f"total: {total.summary()}")
    return 0


def _confirmed(question: str) -> bool:
    """Asks on standard input; no answer (end of input) is no."""
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        print()
        return False


def _clear(root: Path, what: str, yes: bool) -> int:
    """Removes the entries of one cache kind or all of them, after asking unless ``yes``."""
    kinds = list(KINDS) if what == "all" else [what]
    found = [u for u in cache_usage(root) if u.kind in kinds]
    total = CacheUsage("+".join(kinds), sum(u.entries for u in found), sum(u.size for u in found))
    if total.entries == 0:
        print(f"nothing to remove: no {' or '.join(kinds)} cache entries in {root}")
        return 0
    question = f"remove {total.summary()} of {' and '.join(kinds)} from {root}?"
    if not yes and not _confirmed(question):
        print("nothing removed (answer y, or pass --yes)", file=sys.stderr)
        return 1
    try:
        removed = clear_caches(root, kinds)
    except OSError as error:
        print(f"error: could not remove {error.filename}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"removed {removed.summary()} from {root}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")
    root = user_cache_dir()
    if root.exists() and not root.is_dir():
        print(f"error: the cache root {root} is not a folder", file=sys.stderr)
        return 2
    if args.command == "info":
        return _info(root)
    return _clear(root, args.what, args.yes)


if __name__ == "__main__":
    sys.exit(main())
