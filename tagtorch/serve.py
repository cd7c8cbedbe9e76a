"""``python -m tagtorch.serve PATH``: a fitted recommender (``task=fit``) over HTTP.

Example:
    python -m tagtorch.serve checkpoints/recommenders/lastfm-latre_wts --port 8000

Endpoints (schemas on the OpenAPI page, ``/docs``; a one-page demo form at ``/``):

- ``POST /v1/tags`` (tag recommenders): ``{"tags": [...], "title": ..., "description": ...,
  "texts": {field: text}, "k": 5}`` -> ``{"tags": [{"tag", "score"}], "reason",
  "unknown_tags", "unknown_words"}``;
- ``POST /v1/posts`` (tag recommenders): ``{"posts": [{"user", "object", "tags", "title",
  ...}]}`` adds tag assignments; they are journaled (fsync) before the answer, and the next
  recommendation uses them (:meth:`TagRecommender.add_posts`); a restart replays the journal;
- ``POST /v1/items`` (item recommenders): ``{"user": ..., "tag": null, "k": 10}`` ->
  ``{"items": [{"item", "title", "score"}], "reason"}`` (:meth:`ItemRecommender
  .recommend_items`);
- ``GET /health`` and ``GET /v1/info`` (kind, method, data, fingerprint, tagtorch version).

An endpoint of the other kind of recommender answers 404 with a message naming the right one.
The artifact is loaded once and warmed up (kernels compiled) by one request before the server
accepts connections. Recommendations run on the event loop: they are short, CPU-bound and
hold the GIL, so handing them to a thread pool only adds hand-offs (``benchmarks/bench_serve.py``
on Last.fm, 8 clients: 313 requests/s and p99 49 ms in the thread pool, 631 requests/s and p99
28 ms on the loop). Posts, which mine D again (a fraction of a second to seconds), run in the
thread pool, so recommendations go on meanwhile from the previous state. A body over
``--max-body`` bytes gets 413; a request the schema or the recommender refuses gets 422 with
the reason, never a 5xx.
"""

from __future__ import annotations

import argparse
import html
import logging
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field

import tagtorch
from tagtorch.serving import ItemRecommender, Recommender, TagRecommender
from tagtorch.serving.items import MAX_ID_CHARS
from tagtorch.serving.tags import MAX_TAGS, MAX_TEXT_CHARS
from tagtorch.storage import UnreadableFileError

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20
"""Default largest request body (bytes)."""
MAX_K = 1000

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


def demo_page(recommender: TagRecommender | ItemRecommender) -> str:
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
    inputs = ('<label>User <input id="user" name="user"></label>\n'
              '<label>Tag (optional) <input id="tag" name="tag"></label>')
    body = '{user: value("user"), tag: value("tag") || null, k: Number(value("k"))}'
    return DEMO_PAGE.format(what="items", inputs=inputs, body=body, k=10, endpoint="/v1/items",
                            columns='["item", "title", "score"]',
                            about=f"{method} fitted on {data}: items for a user.")


class TagRequest(BaseModel):
    """One object to recommend tags for."""

    model_config = ConfigDict(extra="forbid")

    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS,
                            description="the object's tags so far (raw strings)")
    title: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    description: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    texts: dict[str, str] = Field(default_factory=dict,
                                  description="other text fields of the recommender by name")
    k: int = Field(5, ge=1, le=MAX_K, description="how many tags to return")


class Post(BaseModel):
    """Tags a user gave an object (a known object id, or a new one with its texts)."""

    model_config = ConfigDict(extra="forbid")

    user: str = Field(min_length=1, max_length=1000)
    object: str = Field(min_length=1, max_length=1000)
    tags: list[str] = Field(min_length=1, max_length=MAX_TAGS)
    title: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    description: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    texts: dict[str, str] = Field(default_factory=dict)


class Posts(BaseModel):
    """Posts to add."""

    model_config = ConfigDict(extra="forbid")

    posts: list[Post] = Field(min_length=1, max_length=1000)


class ItemRequest(BaseModel):
    """A user (and a tag) to recommend items for."""

    model_config = ConfigDict(extra="forbid")

    user: str = Field(min_length=1, max_length=MAX_ID_CHARS, description="the user's raw id")
    tag: str | None = Field(None, min_length=1, max_length=MAX_ID_CHARS,
                            description="the items for this tag (null: the user's ranking "
                                        "over tags)")
    k: int = Field(10, ge=1, le=MAX_K, description="how many items to return")


class ScoredItem(BaseModel):
    """A recommended item."""

    item: str
    title: str
    score: float


class ItemResponse(BaseModel):
    """The recommended items, best first."""

    items: list[ScoredItem]
    reason: str | None = Field(None, description="why the list is empty")


class ScoredTag(BaseModel):
    """A recommended tag."""

    tag: str
    score: float


class TagResponse(BaseModel):
    """The recommended tags, best first, and what was left out of the input."""

    tags: list[ScoredTag]
    reason: str | None = Field(None, description="why the list is empty")
    unknown_tags: list[str]
    unknown_words: list[str]


def _texts(request: TagRequest | Post) -> dict[str, str]:
    """A request's text fields: ``texts`` plus ``title`` and ``description`` when given."""
    texts = dict(request.texts)
    for name in ("title", "description"):
        value = getattr(request, name)
        if value is not None:
            texts[name] = value
    return texts


def _wrong_kind(recommender: TagRecommender | ItemRecommender) -> JSONResponse:
    """The 404 of an endpoint of the other kind of recommender."""
    if isinstance(recommender, TagRecommender):
        return JSONResponse({"detail": "this service holds a tag recommender: POST /v1/tags "
                                       "(and /v1/posts)"}, 404)
    return JSONResponse({"detail": "this service holds an item recommender: POST /v1/items"},
                        404)


def create_app(recommender: TagRecommender | ItemRecommender,
               max_body: int = MAX_BODY_BYTES) -> FastAPI:
    """The service around one loaded recommender (either kind)."""
    kind = "tags" if isinstance(recommender, TagRecommender) else "items"
    app = FastAPI(title="tagtorch", version=tagtorch.__version__,
                  description=f"Recommendation of {kind} by a fitted tagtorch recommender.")
    page = demo_page(recommender)

    @app.middleware("http")
    async def limit_body(request: Request, call_next: Any) -> Any:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > max_body):
            return JSONResponse({"detail": f"request body over {max_body} bytes"}, 413)
        if request.method == "POST":
            body = await request.body()  # also bounds bodies sent without a length
            if len(body) > max_body:
                return JSONResponse({"detail": f"request body over {max_body} bytes"}, 413)
        return await call_next(request)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def demo() -> str:
        return page

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/info")
    def info() -> dict[str, Any]:
        described = {"kind": kind, "method": recommender.info.get("method"),
                     "data": recommender.info.get("data"),
                     "fingerprint": recommender.info.get("fingerprint"),
                     "tagtorch_version": tagtorch.__version__,
                     "artifact_version": recommender.info.get("tagtorch_version")}
        if isinstance(recommender, TagRecommender):
            return {**described, "text_fields": recommender.text_fields,
                    "d_objects": len(recommender.train_objects)}
        return {**described, **{key: recommender.info.get(key)
                                for key in ("p", "users", "items", "tags")}}

    @app.post("/v1/tags", response_model=TagResponse,
              responses={422: {"description": "input the recommender refuses"},
                         413: {"description": "body too large"}})
    async def tags(request: TagRequest) -> Any:
        if not isinstance(recommender, TagRecommender):
            return _wrong_kind(recommender)
        try:
            result = recommender.recommend_tags(tags=request.tags, k=request.k,
                                                **_texts(request))
        except ValueError as error:
            return JSONResponse({"detail": str(error)}, 422)
        return JSONResponse(result.as_dict())

    @app.post("/v1/posts", responses={422: {"description": "a post the recommender refuses"}})
    def posts(request: Posts) -> Any:
        if not isinstance(recommender, TagRecommender):
            return _wrong_kind(recommender)
        plain = [{"user": post.user, "object": post.object, "tags": post.tags,
                  **_texts(post)} for post in request.posts]
        try:
            added = recommender.add_posts(plain)
        except ValueError as error:
            return JSONResponse({"detail": str(error)}, 422)
        return {"added": added, "d_objects": len(recommender.train_objects)}

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
            return JSONResponse({"detail": str(error)}, 422)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Loads the artifact, warms it up and serves until interrupted."""
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m tagtorch.serve",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("path", help="a recommender folder written by task=fit")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-body", type=int, default=MAX_BODY_BYTES,
                        help="largest request body in bytes")
    parser.add_argument("--rule-cache", type=int, default=1024,
                        help="tag recommenders: one-object rule results kept for repeated "
                             "requests (0: off)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        recommender = Recommender.load(Path(args.path))
    except (UnreadableFileError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if isinstance(recommender, TagRecommender):
        recommender.generator.rules.cache_size = args.rule_cache
        recommender.recommend_tags(tags=recommender.display[:1])  # compiles the kernels
        recommender.generator.rules.clear_cache()
    else:
        recommender.recommend_items(user=recommender.users[0])
    log.info("serving %s on http://%s:%d", args.path, args.host, args.port)
    uvicorn.run(create_app(recommender, args.max_body), host=args.host, port=args.port,
                log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
