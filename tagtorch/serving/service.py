"""The HTTP service of ``python -m tagtorch.serve PATH``: a fitted recommender over HTTP.

Example:
    python -m tagtorch.serve checkpoints/recommenders/lastfm-latre_wts --port 8000
    python -m tagtorch.serve FOLDER --token-file /run/secrets/tagtorch-token  # takes posts

Endpoints (schemas on the OpenAPI page, ``/docs``; a one-page demo form at ``/``):

- ``POST /v1/tags`` (tag recommenders): ``{"tags": [...], "title": ..., "description": ...,
  "texts": {field: text}, "k": 5}`` -> ``{"tags": [{"tag", "score"}], "reason",
  "unknown_tags", "unknown_words"}``;
- ``POST /v1/posts`` (tag recommenders; a write): ``{"posts": [{"user", "object", "tags",
  "title", ...}]}`` adds tag assignments, all or none: the batch is journaled as one record
  (fsync) before the answer ``{"added", "pending"}`` and applied to D in the background
  within about ``--apply-interval`` seconds (:mod:`tagtorch.serving.ingest`,
  :mod:`tagtorch.serving.journal`); a restart replays the journal and compacts it into the
  data;
- ``POST /v1/items`` (item recommenders): ``{"user": ..., "tag": null, "k": 10}`` ->
  ``{"items": [{"item", "title", "score"}], "reason"}`` (:meth:`ItemRecommender
  .recommend_items`);
- ``GET /health`` and ``GET /v1/info`` (kind, method, data, fingerprint, tagtorch version,
  writes, posts pending).

Writes are off unless the service has a token (``--token-file``, or the environment variable
``TAGTORCH_SERVE_TOKEN``; requests then need ``Authorization: Bearer TOKEN``, else 401) or
``--allow-anonymous-writes``; with writes off ``POST /v1/posts`` answers 403, and with
``--read-only`` it does not exist. Only the ``Host`` headers of ``--allowed-hosts`` are answered
(default: the bound host and localhost; others get 400, against DNS rebinding). A writing
service holds an exclusive lock on its folder, a read-only one a shared lock, and a writing
service refuses at the start a folder it could not journal into. Connections, headers and
bodies are bounded (:mod:`tagtorch.serving.guards`): a body over ``--max-body`` bytes gets
413 as soon as it passes the limit, chunked or not. A request the schema or the recommender
refuses gets 4xx with the reason (never its input echoed), never a 5xx; a journal that cannot
store a batch gets 503 with the reason. ``docs/serving.md`` has a deployment example.

An endpoint of the other kind of recommender answers 404 with a message naming the right one.
The artifact is loaded once and warmed up (kernels compiled) by one request before the server
accepts connections. Recommendations run on the event loop: they are short, CPU-bound and
hold the GIL, so handing them to a thread pool only adds hand-offs (``benchmarks/bench_serve.py``
on Last.fm, 8 clients: 313 requests/s and p99 49 ms in the thread pool, 631 requests/s and p99
28 ms on the loop). Posts are checked and journaled on the loop too (tens of microseconds a
post and one fsync); the mining pass that applies them runs in a background thread.
"""

from __future__ import annotations

import argparse
import html
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tagtorch.extras import MissingExtraError

try:
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse
    from starlette.middleware.trustedhost import TrustedHostMiddleware
except ModuleNotFoundError as missing:  # the [serve] extra (python -m tagtorch.serve says so)
    raise MissingExtraError("serve", missing.name) from None

from tagtorch.errors import UnreadableFileError
from tagtorch.serving import (
    AnyRecommender,
    ItemRecommender,
    PostRecommender,
    Recommender,
    TagRecommender,
)
from tagtorch.serving.guards import BodyGuard, WriteGuard, guarded_protocol
from tagtorch.serving.ingest import PostQueue, QueueFullError, TooManyNewTagsError
from tagtorch.serving.journal import (
    JournalWriteError,
    check_writable,
    finish_compaction,
    lock_folder,
)
from tagtorch.serving.schema import (
    ItemRequest,
    ItemResponse,
    PostBatch,
    TagRequest,
    TagResponse,
)
from tagtorch.version import __version__

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20
"""Default largest request body (bytes)."""
TOKEN_VARIABLE = "TAGTORCH_SERVE_TOKEN"
"""The environment variable that may hold the write token (``--token-file`` wins)."""
WRITE_PATHS = frozenset({"/v1/posts"})
"""The endpoints that change the service's data."""

DEMO_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tagtorch: recommend {what}</title>
<style>
body {{ font-family: sans-serif; max-width: 40em; margin: 2em auto; }}
label {{ display: block; margin-top: 0.8em; }}
input {{ width: 100%; padding: 0.3em; }}
table {{ margin-top: 1em; border-collapse: collapse; }}
td, th {{ padding: 0.2em 1em; border-bottom: 1px solid #ccc; text-align: left; }}
#note {{ color: #a33; margin-top: 1em; }}
</style></head>
<body>
<h1>Recommend {what}</h1>
<p>{about}</p>
<form id="ask">
{inputs}
<label>How many <input id="k" name="k" type="number" value="{k}" min="1" max="1000"></label>
<p><button type="submit">Recommend</button></p>
</form>
<table id="result"></table>
<div id="note"></div>
<script>
const value = (id) => document.getElementById(id).value;
document.getElementById("ask").addEventListener("submit", async (event) => {{
  event.preventDefault();
  const body = {body};
  const response = await fetch("{endpoint}", {{method: "POST",
    headers: {{"content-type": "application/json"}}, body: JSON.stringify(body)}});
  const data = await response.json();
  const table = document.getElementById("result");
  const note = document.getElementById("note");
  table.textContent = ""; note.textContent = "";
  if (!response.ok) {{ note.textContent = JSON.stringify(data.detail); return; }}
  const columns = {columns};
  const head = table.insertRow();
  for (const name of columns) {{
    head.appendChild(document.createElement("th")).textContent = name;
  }}
  for (const entry of data.{what}) {{
    const row = table.insertRow();
    for (const name of columns) {{
      const cell = entry[name];
      row.insertCell().textContent = name === "score" ? cell.toFixed(4) : cell;
    }}
  }}
  const left = [...(data.unknown_tags || []), ...(data.unknown_words || [])];
  note.textContent = (data.reason || "") + (left.length ? " Left out: " + left.join(", ") : "");
}});
</script>
</body></html>
"""
"""The demo form, filled in by :func:`demo_page` for the artifact's kind."""


def demo_page(recommender: AnyRecommender) -> str:
    """The one-page demo of ``/``: a form for the artifact's kind and a table of answers."""
    method, data = (html.escape(str(recommender.info.get(key))) for key in ("method", "data"))
    if isinstance(recommender, TagRecommender):
        inputs = ('<label>Title <input id="title" name="title"></label>\n'
                  '<label>Tags, separated by commas <input id="tags" name="tags"></label>')
        body = ('{tags: value("tags").split(",").map(t => t.trim()).filter(t => t), '
                'title: value("title"), k: Number(value("k"))}')
        return DEMO_PAGE.format(what="tags", inputs=inputs, body=body, k=5,
                                endpoint="/v1/tags", columns='["tag", "score"]',
                                about=f"{method} fitted on {data}: tags for an object.")
    if isinstance(recommender, PostRecommender):
        inputs = ('<label>User <input id="user" name="user"></label>\n'
                  '<label>Resource <input id="resource" name="resource"></label>')
        body = '{user: value("user"), resource: value("resource"), k: Number(value("k"))}'
        return DEMO_PAGE.format(what="tags", inputs=inputs, body=body, k=5,
                                endpoint="/v1/tags", columns='["tag", "score"]',
                                about=f"{method} fitted on {data}: tags for a user's post.")
    inputs = ('<label>User <input id="user" name="user"></label>\n'
              '<label>Tag (optional) <input id="tag" name="tag"></label>')
    body = '{user: value("user"), tag: value("tag") || null, k: Number(value("k"))}'
    return DEMO_PAGE.format(what="items", inputs=inputs, body=body, k=10, endpoint="/v1/items",
                            columns='["item", "title", "score"]',
                            about=f"{method} fitted on {data}: items for a user.")


def _wrong_kind(recommender: AnyRecommender) -> JSONResponse:
    """The 404 of an endpoint of the other kind of recommender."""
    if isinstance(recommender, TagRecommender):
        return JSONResponse({"detail": "this service holds a tag recommender: POST /v1/tags "
                                       "(and /v1/posts)"}, 404)
    if isinstance(recommender, PostRecommender):
        return JSONResponse({"detail": "this service holds a personalized tag recommender: "
                                       "POST /v1/tags with user and resource (and /v1/posts)"},
                            404)
    return JSONResponse({"detail": "this service holds an item recommender: POST /v1/items"},
                        404)


@dataclass(frozen=True)
class ServiceSettings:
    """How the service guards itself (``python -m tagtorch.serve --help`` for each).

    Attributes:
        token: the bearer token of write requests (None: no token).
        anonymous_writes: take posts without a token (``--allow-anonymous-writes``).
        read_only: no write endpoint at all (``--read-only``).
        allowed_hosts: ``Host`` headers answered (others get 400: DNS rebinding).
        max_body: largest request body (bytes).
        body_timeout: seconds to receive a request body.
        header_timeout: seconds to receive a request's headers.
        max_connections: most open connections.
    """

    token: str | None = None
    anonymous_writes: bool = False
    read_only: bool = False
    allowed_hosts: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")
    max_body: int = MAX_BODY_BYTES
    body_timeout: float = 30.0
    header_timeout: float = 10.0
    max_connections: int = 256

    @property
    def writes(self) -> str:
        """``"none"`` (read-only), ``"token"``, ``"anonymous"`` or ``"off"`` (the default)."""
        if self.read_only:
            return "none"
        if self.token is not None:
            return "token"
        return "anonymous" if self.anonymous_writes else "off"

    @property
    def takes_posts(self) -> bool:
        """Whether ``POST /v1/posts`` changes the data (a token or anonymous writes)."""
        return self.writes in ("token", "anonymous")


def _refusal(error: Exception) -> str:
    """An error's message for a response: printable, at most 500 characters."""
    text = str(error).encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= 500 else text[:500] + "..."


def _validation_problems(error: RequestValidationError) -> list[dict[str, Any]]:
    """The first problems of a refused request, without echoing its input."""
    return [{"loc": [_refusal(part)[:64] for part in problem["loc"]][:8],
             "msg": _refusal(problem["msg"]), "type": problem["type"]}
            for problem in error.errors()[:10]]


def _guarded(app: FastAPI, settings: ServiceSettings) -> None:
    """Adds the body, token and host guards, outermost last (:mod:`tagtorch.serving.guards`)."""
    app.add_middleware(BodyGuard, max_body=settings.max_body,
                       body_timeout=settings.body_timeout)
    if settings.writes == "token":
        app.add_middleware(WriteGuard, token=settings.token, paths=WRITE_PATHS)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(settings.allowed_hosts))

    @app.exception_handler(RequestValidationError)
    async def refused(request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _validation_problems(error)}, 422)


def _posts_route(app: FastAPI, recommender: AnyRecommender,
                 settings: ServiceSettings, queue: PostQueue | None) -> None:
    """``POST /v1/posts``: absent when read-only, 403 while writes are off."""
    if settings.read_only:
        return

    @app.post("/v1/posts", responses={
        401: {"description": "no or a wrong token"}, 403: {"description": "writes are off"},
        413: {"description": "too many new tags"}, 422: {"description": "a refused post"},
        503: {"description": "the journal cannot store it, or too many posts wait"}})
    async def posts(request: PostBatch) -> Any:
        # on the loop, like recommendations: checking and journaling a batch is short
        # (tens of microseconds a post and one fsync), and a thread hop costs more
        if isinstance(recommender, ItemRecommender):
            return _wrong_kind(recommender)
        if queue is None:
            return JSONResponse({"detail": "writes are off: start the service with "
                                           "--token-file (or TAGTORCH_SERVE_TOKEN), or "
                                           "--allow-anonymous-writes"}, 403)
        try:
            added = queue.submit([post.plain() for post in request.posts])
        except TooManyNewTagsError as error:
            return JSONResponse({"detail": _refusal(error)}, 413)
        except ValueError as error:
            return JSONResponse({"detail": _refusal(error)}, 422)
        except (QueueFullError, JournalWriteError) as error:
            return JSONResponse({"detail": _refusal(error)}, 503, {"retry-after": "5"})
        return {"added": added, "pending": queue.pending}


def _described(recommender: AnyRecommender, settings: ServiceSettings,
               queue: PostQueue | None) -> dict[str, Any]:
    """``GET /v1/info``: what the service holds, its writes and the posts pending."""
    kind = {TagRecommender: "tags", PostRecommender: "posts"}.get(type(recommender), "items")
    described = {"kind": kind,
                 "method": recommender.info.get("method"), "data": recommender.info.get("data"),
                 "fingerprint": recommender.info.get("fingerprint"),
                 "tagtorch_version": __version__,
                 "artifact_version": recommender.info.get("tagtorch_version"),
                 "writes": settings.writes}
    if isinstance(recommender, TagRecommender):
        return {**described, "text_fields": recommender.text_fields,
                "d_objects": len(recommender.train_objects),
                "pending_posts": 0 if queue is None else queue.pending}
    if isinstance(recommender, PostRecommender):
        return {**described, "p": recommender.info.get("p"), "users": len(recommender.users),
                "resources": len(recommender.resources), "tags": len(recommender.tags),
                "pending_posts": 0 if queue is None else queue.pending}
    return {**described, **{key: recommender.info.get(key)
                            for key in ("p", "users", "items", "tags")}}


def create_app(recommender: AnyRecommender,
               settings: ServiceSettings | None = None,
               queue: PostQueue | None = None) -> FastAPI:
    """The service around one loaded recommender (either kind).

    Args:
        recommender: the recommender.
        settings: the guards (default: :class:`ServiceSettings`).
        queue: takes posts (None: writes are off or read-only).
    """
    settings = settings or ServiceSettings()
    kind = {TagRecommender: "tags", PostRecommender: "tags for posts"}.get(type(recommender),
                                                                          "items")
    app = FastAPI(title="tagtorch", version=__version__,
                  description=f"Recommendation of {kind} by a fitted tagtorch recommender.")
    _guarded(app, settings)
    page = demo_page(recommender)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def demo() -> str:
        return page

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/info")
    def info() -> dict[str, Any]:
        return _described(recommender, settings, queue)

    @app.post("/v1/tags", response_model=TagResponse,
              responses={422: {"description": "input the recommender refuses"},
                         413: {"description": "body too large"}})
    async def tags(request: TagRequest) -> Any:
        if isinstance(recommender, ItemRecommender):
            return _wrong_kind(recommender)
        try:
            if isinstance(recommender, PostRecommender):
                result = recommender.recommend_tags_batch([request.post_fields()], request.k)[0]
            else:
                result = recommender.recommend_tags_batch([request.object_fields()],
                                                          request.k)[0]
        except ValueError as error:
            return JSONResponse({"detail": _refusal(error)}, 422)
        return JSONResponse(result.as_dict())

    _posts_route(app, recommender, settings, queue)

    @app.post("/v1/items", response_model=ItemResponse,
              responses={422: {"description": "input the recommender refuses"},
                         404: {"description": "the service holds a tag recommender"}})
    async def items(request: ItemRequest) -> Any:
        if not isinstance(recommender, ItemRecommender):
            return _wrong_kind(recommender)
        try:
            result = recommender.recommend_items(user=request.user, tag=request.tag,
                                                 k=request.k)
        except ValueError as error:
            return JSONResponse({"detail": _refusal(error)}, 422)
        return JSONResponse(result.as_dict())

    return app


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
    parser = argparse.ArgumentParser(prog="python -m tagtorch.serve",
                                     description=__doc__.splitlines()[0])
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
    if writes and not isinstance(recommender, ItemRecommender) and recommender.compact():
        log.info("%s: the journaled posts written into the data", folder)
    if isinstance(recommender, TagRecommender):
        recommender.rule_cache = rule_cache
        recommender.recommend_tags(tags=recommender.display[:1])  # compiles the kernels
        recommender.rule_cache = rule_cache  # and empties the cache
    elif isinstance(recommender, PostRecommender):
        recommender.recommend_tags(user="warm-up", resource="warm-up")  # a newcomer's answer
    else:
        recommender.recommend_items(user=recommender.users[0])
    return recommender


def main(argv: Sequence[str] | None = None) -> int:
    """Loads the artifact, warms it up and serves until interrupted."""
    try:
        import uvicorn
    except ModuleNotFoundError as missing:  # the [serve] extra
        print(f"error: {MissingExtraError('serve', missing.name)}", file=sys.stderr)
        return 2

    args = _parser().parse_args(argv)
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
    if not isinstance(recommender, ItemRecommender) and settings.takes_posts:
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

