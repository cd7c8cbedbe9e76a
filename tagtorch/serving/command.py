"""The command ``python -m tagtorch.serve PATH``: load a fitted recommender, serve it over HTTP.

Example:
    python -m tagtorch.serve checkpoints/recommenders/lastfm-latre_wts --port 8000
    python -m tagtorch.serve FOLDER --token-file /run/secrets/tagtorch-token  # takes posts

The folder is locked (a writer alone, readers shared), a compaction a crash cut short is
finished and the journal written into the data (with writes on), the artifact is loaded and
warmed up by one request, then uvicorn serves :func:`tagtorch.serving.service.create_app`
behind the connection and header guards (:mod:`tagtorch.serving.guards`). A numeric option out
of its range (:data:`OPTION_RANGES`), a folder that cannot be read or written, and a compaction
that cannot write (a full disk, a file-size limit) end the command with one line on standard
error and exit status 2; the journal keeps every acknowledged post.
:func:`start_service` starts the real command on a free port of 127.0.0.1 (tests, benchmarks).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tagtorch.errors import UnreadableFileError
from tagtorch.extras import MissingExtraError
from tagtorch.serving import (
    AnyRecommender,
    ItemRecommender,
    PostRecommender,
    Recommender,
    TagRecommender,
)
from tagtorch.serving.ingest import PostQueue
from tagtorch.serving.journal import check_writable, finish_compaction, lock_folder
from tagtorch.serving.service import MAX_BODY_BYTES, TOKEN_VARIABLE, ServiceSettings, create_app

__all__ = ["OPTION_RANGES", "check_options", "main", "open_folder", "service_settings",
           "start_service"]

log = logging.getLogger(__name__)

MOST_SECONDS = 86_400.0
"""The longest interval or timeout an option takes (a day): a longer one is a typo."""
MOST_COUNT = 10**9
"""The largest count an option takes (posts, tags, cache entries)."""
OPTION_RANGES: dict[str, tuple[type, float, float]] = {
    "--port": (int, 1, 65_535),
    "--max-new-tags-per-request": (int, 0, MOST_COUNT),
    "--max-new-tags": (int, 0, MOST_COUNT),
    "--max-pending-posts": (int, 1, MOST_COUNT),
    "--apply-interval": (float, 0.0, MOST_SECONDS),
    "--compact-after": (int, 1, MOST_COUNT),
    "--max-body": (int, 1, 2**30),
    "--body-timeout": (float, 0.01, MOST_SECONDS),
    "--header-timeout": (float, 0.01, MOST_SECONDS),
    "--max-connections": (int, 1, 1_000_000),
    "--rule-cache": (int, 0, MOST_COUNT),
}
"""Each numeric option's type, least and largest value (:func:`check_options`)."""


def start_service(folder: str | Path, *options: str, timeout: float = 300.0,
                  output: int | None = subprocess.DEVNULL) -> tuple[subprocess.Popen, str]:
    """Starts ``python -m tagtorch.serve FOLDER`` on a free port of 127.0.0.1 and waits for it.

    For tests, benchmarks and scripts: the real service in its own process, as a user starts
    it. Stop it with ``process.terminate()``.

    Args:
        folder: the artifact folder.
        *options: further command-line options (``--max-body``, ...).
        timeout: seconds to wait for ``GET /health`` to answer (loading, warm-up).
        output: where the server's output goes (``subprocess.PIPE`` to read it).

    Returns:
        ``(process, url)``.

    Raises:
        RuntimeError: the server exited or did not answer in time (with its output's end).
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "tagtorch.serve", str(folder),
                                "--port", str(port), *options],
                               stdout=output, stderr=subprocess.STDOUT if output else None)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            said = process.communicate()[0] if output == subprocess.PIPE else b""
            raise RuntimeError(f"the server did not start: {(said or b'').decode()[-2000:]}")
        time.sleep(0.3)


def _parser() -> argparse.ArgumentParser:
    """The command line (a bad value is an ``ArgumentError``, shown by :func:`main` in one line)."""
    parser = argparse.ArgumentParser(prog="python -m tagtorch.serve",
                                     description=__doc__.splitlines()[0], exit_on_error=False)
    parser.add_argument("path", help="a recommender folder written by task=fit")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    writes = parser.add_argument_group("writes (POST /v1/posts; off unless a token or "
                                       "--allow-anonymous-writes is given)")
    writes.add_argument("--token-file", type=Path,
                        help=f"a file holding the bearer token of write requests (or set "
                             f"{TOKEN_VARIABLE})")
    writes.add_argument("--allow-anonymous-writes", action="store_true",
                        help="take posts from anyone who reaches the port")
    writes.add_argument("--read-only", action="store_true",
                        help="no write endpoint at all; the folder is only read")
    writes.add_argument("--max-new-tags-per-request", type=int, default=1000)
    writes.add_argument("--max-new-tags", type=int, default=100_000,
                        help="new tags taken since the start")
    writes.add_argument("--max-pending-posts", type=int, default=100_000,
                        help="posts acknowledged and waiting to be applied")
    writes.add_argument("--apply-interval", type=float, default=1.0,
                        help="fewest seconds between two passes that apply posts to D")
    writes.add_argument("--compact-after", type=int, default=10_000,
                        help="posts journaled since the last compaction that start the next "
                             "one (the journal is written into the data while serving)")
    writes.add_argument("--finish-compaction", action="store_true",
                        help="finish a compaction a crash cut short, write the journal into "
                             "the data, and exit (no serving)")
    guards = parser.add_argument_group("guards")
    guards.add_argument("--allowed-hosts", default=None,
                        help="comma-separated Host headers answered (default: the bound host, "
                             "localhost, 127.0.0.1, ::1)")
    guards.add_argument("--max-body", type=int, default=MAX_BODY_BYTES,
                        help="largest request body in bytes")
    guards.add_argument("--body-timeout", type=float, default=30.0)
    guards.add_argument("--header-timeout", type=float, default=10.0)
    guards.add_argument("--max-connections", type=int, default=256)
    parser.add_argument("--rule-cache", type=int, default=1024,
                        help="tag recommenders: one-object rule results kept for repeated "
                             "requests (0: off)")
    return parser


def check_options(args: argparse.Namespace) -> None:
    """Refuses a numeric option's value out of its range (:data:`OPTION_RANGES`), before any work.

    Raises:
        ValueError: naming the option, the value and the range, in one line.

    Example:
        >>> check_options(_parser().parse_args(["FOLDER", "--compact-after", "0"]))
        Traceback (most recent call last):
        ...
        ValueError: --compact-after 0: expected an integer from 1 to 1,000,000,000
    """
    for option, (kind, least, most) in OPTION_RANGES.items():
        value = getattr(args, option.removeprefix("--").replace("-", "_"))
        in_range = isinstance(value, int | float) and least <= value <= most  # NaN: False
        if not in_range or not isinstance(value, kind):  # "--port=--" gives []
            expected = (f"an integer from {least:,} to {most:,}" if kind is int
                        else f"a number of seconds from {least:g} to {most:g}")
            raise ValueError(f"{option} {value!r:.40}: expected {expected}")


def service_settings(args: argparse.Namespace) -> ServiceSettings:
    """The guards of the command line (token from ``--token-file`` or the environment).

    Raises:
        ValueError: contradicting options, or an unusable token, in one line.
    """
    token = os.environ.get(TOKEN_VARIABLE) or None
    if args.token_file is not None:
        try:
            token = args.token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"--token-file {args.token_file}: cannot be read ({error})") from None
    if token is not None and (len(token) < 16 or not token.isascii() or not token.isprintable()):
        raise ValueError("the write token must be at least 16 printable ASCII characters "
                         "(e.g. python -c 'import secrets; print(secrets.token_urlsafe())')")
    if args.read_only and (token is not None or args.allow_anonymous_writes
                           or args.finish_compaction):
        raise ValueError("--read-only takes no write token, no --allow-anonymous-writes and "
                         "no --finish-compaction")
    hosts = (args.allowed_hosts.split(",") if args.allowed_hosts
             else [args.host, "localhost", "127.0.0.1", "::1"])
    return ServiceSettings(token=token, anonymous_writes=args.allow_anonymous_writes,
                           read_only=args.read_only,
                           allowed_hosts=tuple(h.strip() for h in hosts if h.strip()),
                           max_body=args.max_body, body_timeout=args.body_timeout,
                           header_timeout=args.header_timeout,
                           max_connections=args.max_connections)


def open_folder(folder: Path, writes: bool, rule_cache: int) -> AnyRecommender:
    """Locks the folder, checks it can take posts (``writes``), loads and warms it up.

    With ``writes``, a compaction a crash cut short is finished and the journal is written
    into the data first.

    Raises:
        RuntimeError, UnreadableFileError, FileNotFoundError: in one line.
    """
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder")
    lock_folder(folder, exclusive=writes)  # its descriptor stays open: held until the exit
    if writes:
        finish_compaction(folder)
        check_writable(folder)
    recommender = Recommender.load(folder)
    if writes and isinstance(recommender, TagRecommender | PostRecommender) \
            and recommender.compact():
        log.info("%s: the journaled posts written into the data", folder)
    if isinstance(recommender, TagRecommender):
        recommender.rule_cache = rule_cache
        recommender.recommend_tags(tags=recommender.display[:1])  # compiles the kernels
        recommender.rule_cache = rule_cache  # and empties the cache
    elif isinstance(recommender, PostRecommender):
        recommender.recommend_tags(user="warm-up", resource="warm-up")  # a newcomer's answer
    elif isinstance(recommender, ItemRecommender):
        recommender.recommend_items(user=recommender.users[0])
    else:
        recommender.recommend_resources(recommender.tags[:1])
    return recommender


def main(argv: Sequence[str] | None = None) -> int:
    """Loads the artifact, warms it up and serves until interrupted; returns the exit status.

    Bad input (an option's value, the folder, its files) and a folder that cannot be written
    end with one line on standard error and exit status 2.
    """
    try:
        import uvicorn

        from tagtorch.serving.guards import guarded_protocol  # it reads uvicorn's protocol
    except ModuleNotFoundError as missing:  # the [serve] extra
        print(f"error: {MissingExtraError('serve', missing.name)}", file=sys.stderr)
        return 2

    try:
        args = _parser().parse_args(argv)
        check_options(args)
    except (argparse.ArgumentError, ValueError) as error:
        print(f"error: {error!s:.500}", file=sys.stderr)  # a value echoed, cut
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        settings = service_settings(args)
        recommender = open_folder(Path(args.path), settings.takes_posts or
                                  args.finish_compaction, args.rule_cache)
    except (ValueError, RuntimeError, UnreadableFileError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.finish_compaction:
        print(f"{args.path}: the data holds every journaled post")
        return 0
    queue = None
    if isinstance(recommender, TagRecommender | PostRecommender) and settings.takes_posts:
        queue = PostQueue(recommender, args.max_new_tags_per_request, args.max_new_tags,
                          args.max_pending_posts, args.apply_interval, args.compact_after)
    log.info("serving %s on http://%s:%d (writes: %s)", args.path, args.host, args.port,
             settings.writes)
    uvicorn.run(create_app(recommender, settings, queue), host=args.host, port=args.port,
                log_level="warning", timeout_keep_alive=5,
                http=guarded_protocol(settings.header_timeout, settings.max_connections))
    if queue is not None:
        queue.close()
    return 0
