"""``python -m tagtorch.export``: a folksonomy written in another tool's format.

Two formats. TagRec's (:mod:`tagtorch.data.loaders.tagrec`), so that a dataset loaded by
tagtorch, or a split of it, can be run through TagRec itself and the results compared::

    python -m tagtorch.export tagrec lastfm out/                      # out/lastfm.txt
    python -m tagtorch.export tagrec my.tsv out/ --split leave_last    # out/my_train.txt, ...
    python -m tagtorch.export tagrec synthetic out/ --name synth --option n_objects=500

And LETOR / SVMlight (:mod:`tagtorch.candidates.letor`): the candidate sets of one fold of the tag
recommendation protocol, with their 13 features, for RankLib, allRank, LightGBM or XGBoost::

    python -m tagtorch.export letor lastfm out/ --fold 0   # out/lastfm_fold0_{train,test}.txt

``train`` holds V's candidate lists (what tagtorch's rankers learn on), ``test`` T's; ``qid``
is the object code; the protocol and the candidates are the default configuration's
(``--override`` adds Hydra overrides, e.g. ``candidates=extended``).

``SOURCE`` is what :func:`tagtorch.load` takes: a dataset name (``tagtorch.datasets()``) or a
file (TagRec's format, or a CSV/TSV/Parquet table). ``--split leave_last`` writes TagRec's
leave-last-post-out split (each user's latest post, for users of two posts or more, in
``NAME_test.txt``; the rest in ``NAME_train.txt``; both in ``NAME.txt``); ``--split given``
writes the split the source gave (``--option test_path=X_test.txt``). Errors are one line on
stderr with exit status 2.

Layer: an entry point beside ``train`` (it uses :mod:`tagtorch.api`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from tagtorch.data.folksonomy import Folksonomy

__all__ = ["main"]


def _options(pairs: list[str]) -> dict[str, object]:
    """``KEY=VALUE`` loader options, values read as YAML (``500`` is a number)."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--option takes KEY=VALUE, got {pair!r}")
        options[key] = yaml.safe_load(value)
    return options


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tagtorch.export",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("format", choices=["tagrec", "letor"], help="the format written")
    parser.add_argument("source", help="a dataset name or a file (as tagtorch.load takes)")
    parser.add_argument("out", type=Path, help="the folder written")
    parser.add_argument("--name", help="the files' stem (default: the dataset's name)")
    parser.add_argument("--split", choices=["none", "leave_last", "given"], default="none",
                        help="write a train/test split as TagRec's three files: each user's "
                             "last post, or the split the source gave (data.test_path)")
    parser.add_argument("--fold", type=int, default=0, help="letor: the protocol's fold")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="letor: a Hydra override of the configuration, e.g. "
                             "candidates=extended")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a loader setting (conf/data/NAME.yaml), e.g. n_objects=500")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.out.is_dir():  # before any work (LETOR builds candidates)
        print(f"error: {args.out} exists and is not a folder: name a folder to write into",
              file=sys.stderr)
        return 2
    from tagtorch.api import load
    from tagtorch.data.folksonomy import Folksonomy
    from tagtorch.data.loaders.tagrec import (
        given_test_posts,
        last_post_per_user,
        write_tagrec,
        write_tagrec_split,
    )
    from tagtorch.errors import DataFormatError

    try:
        folk = load(args.source, **_options(args.option))
        if not isinstance(folk, Folksonomy):
            raise ValueError(f"{args.source}: a LETOR folder; export writes a folksonomy's "
                             "files (TagRec, a fold's LETOR lists)")
        name = args.name or folk.name
        if args.format == "letor":
            paths = _write_letor_fold(folk, args.out, name, args.fold, args.override)
        elif args.split == "none":
            paths = [write_tagrec(folk, args.out / f"{name}.txt")]
        else:
            test = (last_post_per_user(folk) if args.split == "leave_last"
                    else given_test_posts(folk))
            paths = write_tagrec_split(folk, args.out, name, test)
    except (DataFormatError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


def _write_letor_fold(folk: Folksonomy, out: Path, name: str, fold: int,
                      overrides: list[str]) -> list[Path]:
    """Writes ``NAME_foldK_train.txt`` (V) and ``NAME_foldK_test.txt`` (T) in LETOR format."""
    from hydra.utils import instantiate

    from tagtorch.api import compose
    from tagtorch.candidates.letor import write_letor

    cfg = compose(["task=tagrec", *overrides])
    protocol = instantiate(cfg.task)
    val, test, _ = protocol.fold_candidates(folk, instantiate(cfg.candidates), fold)
    out.mkdir(parents=True, exist_ok=True)
    return [write_letor(val, out / f"{name}_fold{fold}_train.txt"),
            write_letor(test, out / f"{name}_fold{fold}_test.txt")]


if __name__ == "__main__":
    sys.exit(main())
