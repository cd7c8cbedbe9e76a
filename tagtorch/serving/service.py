"""The HTTP service of ``python -m tagtorch.serve PATH``: a fitted recommender over HTTP.

The app and its routes (:func:`create_app`); the command that loads a folder and serves it is
:mod:`tagtorch.serving.command`, the demo page of ``/`` :mod:`tagtorch.serving.demo`.

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
- ``POST /v1/resources`` (resource recommenders): ``{"tags": [...], "k": 10}`` ->
  ``{"resources": [{"resource", "title", "score"}], "unknown_tags", "reason"}``
  (:meth:`~tagtorch.serving.resources.ResourceRecommender.recommend_resources`);
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
store a batch (a full disk, a file-size limit) gets 503 with the reason, logged in one line, and
the batch is neither acknowledged nor applied. ``docs/serving.md`` has a deployment example.

An endpoint of the other kind of recommender answers 404 with a message naming the right one.
The artifact is loaded once and warmed up (kernels compiled) by one request before the server
accepts connections. Recommendations run on the event loop: they are short, CPU-bound and
hold the GIL, so handing them to a thread pool only adds hand-offs (``benchmarks/bench_serve.py``
on Last.fm, 8 clients: 313 requests/s and p99 49 ms in the thread pool, 631 requests/s and p99
28 ms on the loop). Posts are checked and journaled on the loop too (tens of microseconds a
post and one fsync); the mining pass that applies them runs in a background thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from tagtorch.extras import MissingExtraError

try:
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse
    from starlette.middleware.trustedhost import TrustedHostMiddleware
except ModuleNotFoundError as missing:  # the [serve] extra (python -m tagtorch.serve says so)
    raise MissingExtraError("serve", missing.name) from None

from tagtorch.serving import (
    AnyRecommender,
    ItemRecommender,
    PostRecommender,
    ResourceRecommender,
    TagRecommender,
)
from tagtorch.serving.demo import demo_page
from tagtorch.serving.guards import BodyGuard, WriteGuard
from tagtorch.serving.ingest import PostQueue, QueueFullError, TooManyNewTagsError
from tagtorch.serving.journal import (
    JournalWriteError,
)
from tagtorch.serving.schema import (
    ItemRequest,
    ItemResponse,
    PostBatch,
    ResourceRequest,
    ResourceResponse,
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

def _wrong_kind(recommender: AnyRecommender) -> JSONResponse:
    """The 404 of an endpoint of the other kind of recommender."""
    if isinstance(recommender, TagRecommender):
        return JSONResponse({"detail": "this service holds a tag recommender: POST /v1/tags "
                                       "(and /v1/posts)"}, 404)
    if isinstance(recommender, PostRecommender):
        return JSONResponse({"detail": "this service holds a personalized tag recommender: "
                                       "POST /v1/tags with user and resource (and /v1/posts)"},
                            404)
    if isinstance(recommender, ResourceRecommender):
        return JSONResponse({"detail": "this service holds a resource recommender: POST "
                                       "/v1/resources"}, 404)
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
        if not isinstance(recommender, TagRecommender | PostRecommender):
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
        except JournalWriteError as error:  # the operator's to fix (a full disk, a limit)
            log.error("%s", error)
            return JSONResponse({"detail": _refusal(error)}, 503, {"retry-after": "5"})
        except QueueFullError as error:
            return JSONResponse({"detail": _refusal(error)}, 503, {"retry-after": "5"})
        return {"added": added, "pending": queue.pending}


def _described(recommender: AnyRecommender, settings: ServiceSettings,
               queue: PostQueue | None) -> dict[str, Any]:
    """``GET /v1/info``: what the service holds, its writes and the posts pending."""
    kind = {TagRecommender: "tags", PostRecommender: "posts",
            ResourceRecommender: "resources"}.get(type(recommender), "items")
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
    if isinstance(recommender, ResourceRecommender):
        return {**described, "resources": len(recommender.resources),
                "tags": len(recommender.tags)}
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
    kind = {TagRecommender: "tags", PostRecommender: "tags for posts",
            ResourceRecommender: "resources for tag queries"}.get(type(recommender), "items")
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
        if not isinstance(recommender, TagRecommender | PostRecommender):
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

    _resources_route(app, recommender)
    return app


def _resources_route(app: FastAPI, recommender: AnyRecommender) -> None:
    """``POST /v1/resources``: resources for a tag query (a resource recommender's)."""

    @app.post("/v1/resources", response_model=ResourceResponse,
              responses={422: {"description": "input the recommender refuses"},
                         404: {"description": "the service holds another kind"}})
    async def resources(request: ResourceRequest) -> Any:
        if not isinstance(recommender, ResourceRecommender):
            return _wrong_kind(recommender)
        try:
            result = recommender.recommend_resources(request.tags, k=request.k)
        except ValueError as error:
            return JSONResponse({"detail": _refusal(error)}, 422)
        return JSONResponse(result.as_dict())
