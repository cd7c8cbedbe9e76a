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
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tagtorch.errors import ConfigError, DataFormatError

if TYPE_CHECKING:
    from tagtorch.candidates.letor import LetorData
    from tagtorch.data.folksonomy import Folksonomy

__all__ = ["main"]


def _short(value: Any, most: int = 60) -> Any:
    """``value`` (an option's key or value) for a message, its text cut to ``most`` characters."""
    text = str(value)
    return value if len(text) <= most else f"{text[:most]}…"


_PLAIN = (str, int, float, bool, type(None))
"""The scalars of a plain YAML value (a date, bytes or a set is not one)."""


def _not_plain(value: Any) -> str | None:
    """What makes ``value`` other than plain data (None: it is plain).

    Plain: scalars of :data:`_PLAIN` in lists and mappings, no container twice (a YAML alias
    that repeats one, or a cycle, would be expanded without bound by the config merge).
    """
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list | dict):
            if id(item) in seen:
                return "an alias repeating a list or mapping (or a recursive one)"
            seen.add(id(item))
            stack += [*item.keys(), *item.values()] if isinstance(item, dict) else item
        elif not isinstance(item, _PLAIN):
            return f"a {type(item).__name__}"
    return None


def _options(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` loader options, values read as plain YAML (``500`` is a number).

    Only plain data is read (``yaml.safe_load``: a ``!!python/...`` tag constructs nothing;
    :func:`_not_plain`), and a config node (``_target_``, ...), which the loader's config would
    build, is refused.

    Raises:
        ConfigError: naming the option: not ``KEY=VALUE``, a value that is not plain YAML
            (unparsable, a tag, a date, a repeated alias), or a config node.

    Example:
        >>> _options(["n_objects=500", "name=my data"])
        {'n_objects': 500, 'name': 'my data'}
        >>> _options(["x=!!python/object/apply:os.system ['echo hi']"])
        Traceback (most recent call last):
        ...
        tagtorch.errors.ConfigError: config key --option x="!!python/object/apply:os.system \
['echo hi']": expected a plain YAML value (a number, a string, a list, a mapping), found a \
python tag
    """
    from tagtorch.storage import CONFIG_KEYS, refuse_config_nodes

    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ConfigError("--option", _short(pair), "KEY=VALUE")
        problem: str | None
        try:
            value = yaml.safe_load(text)
        except (yaml.YAMLError, ValueError, RecursionError) as error:  # ValueError: 4300 digits
            first = (str(error).splitlines() or [type(error).__name__])[0]
            problem = ("a python tag" if "python/" in str(error)
                       else f"YAML it cannot parse ({_short(first)})")
        else:
            problem = _not_plain(value)
        if problem is not None:
            raise ConfigError(f"--option {_short(key)}", _short(text), "a plain YAML value (a "
                              f"number, a string, a list, a mapping), found {problem}")
        try:
            refuse_config_nodes({key: value}, "value")
        except ValueError:
            raise ConfigError(f"--option {_short(key)}", _short(text),
                              f"a loader setting, not a config node "
                              f"({', '.join(sorted(CONFIG_KEYS))}): it would build an object"
                              ) from None
        options[key] = value
    return options


def _stem(name: str, what: str) -> str:
    """``name`` if it is safe as the files' stem (:func:`~tagtorch.evaluation.trec.check_name`).

    Raises:
        ConfigError: naming ``what``, for a path (``../x``, ``a/b``) or another unsafe name.
    """
    from tagtorch.evaluation.trec import NAME_RULE, check_name

    try:
        return check_name(name, what)
    except ValueError:
        raise ConfigError(what, _short(name), f"a file name's stem of {NAME_RULE}") from None


def _load(source: str, options: dict[str, Any]) -> Folksonomy | LetorData:
    """:func:`tagtorch.load` of ``source`` with the loader ``options``.

    Raises:
        ConfigError: the loader refuses the options (an unknown one, a value of another type),
            naming the option (all of them when the loader's message names none).
    """
    from tagtorch.api import load

    try:
        return load(source, **options)
    except TypeError as error:  # what a loader's call raises for its keyword arguments
        if not options:
            raise
        reason = (str(error).splitlines() or [type(error).__name__])[0]
        named = re.search(r"keyword argument '(\w+)'", reason)
        keys = [named.group(1)] if named and named.group(1) in options else list(options)
        raise ConfigError(f"--option {_short(', '.join(keys))}",
                          _short(options[keys[0]] if len(keys) == 1 else options),
                          f"a setting the loader of {source!r} takes ({_short(reason, 200)})"
                          ) from None


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
    from tagtorch.data.folksonomy import Folksonomy
    from tagtorch.data.loaders.tagrec import (
        given_test_posts,
        last_post_per_user,
        write_tagrec,
        write_tagrec_split,
    )

    try:
        if args.name is not None:  # before any work
            _stem(args.name, "--name")
        folk = _load(args.source, _options(args.option))
        if not isinstance(folk, Folksonomy):
            raise ValueError(f"{args.source}: a LETOR folder; export writes a folksonomy's "
                             "files (TagRec, a fold's LETOR lists)")
        name = _stem(args.name or folk.name, "--name" if args.name else "the data's name")
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
