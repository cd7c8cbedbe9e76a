"""What stands between the network and the service: connections, headers, bodies, tokens.

- :func:`guarded_protocol`: uvicorn's HTTP/1.1 protocol with a connection limit (a connection
  past it gets 503 and is closed at once) and a header timeout (a client that has not sent a
  request's headers within ``header_timeout`` seconds, on a new or a kept-alive connection,
  gets 408 and is closed), so half-sent headers cannot hold the server's sockets.
- :class:`WriteGuard`: a write endpoint answers 401 unless the request carries
  ``Authorization: Bearer TOKEN`` (compared in constant time), before its body is read.
- :class:`BodyGuard`: a request body is read as it streams, counted byte by byte (chunked
  bodies too): past ``max_body`` bytes the request gets 413 at once, past ``body_timeout``
  seconds 408; a client that leaves mid-body is dropped quietly. The app then reads the
  buffered body.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["BodyGuard", "WriteGuard", "guarded_protocol", "send_json"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def _raw_response(status: int, phrase: str, detail: str) -> bytes:
    body = json.dumps({"detail": detail}).encode()
    return (f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


def guarded_protocol(header_timeout: float, max_connections: int) -> type[H11Protocol]:
    """The h11 protocol of uvicorn with a connection limit and a header timeout (module docstring).

    Args:
        header_timeout: seconds a client has to send a request's headers.
        max_connections: most open connections; one more gets 503 and is closed.
    """
    too_many = _raw_response(503, "Service Unavailable",
                             f"more than {max_connections} open connections")
    too_slow = _raw_response(408, "Request Timeout",
                             f"request headers not received within {header_timeout:g} s")

    class GuardedH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.write(too_many)
                transport.close()
                return
            self._arm()

        def _arm(self) -> None:
            self._header_timer = self.loop.call_later(header_timeout, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.write(too_slow)
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._header_timer is not None and self.conn.their_state is not h11.IDLE:
                self._disarm()  # the headers are in: the body guard times the body

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._header_timer is None and not self.transport.is_closing():
                self._arm()  # the next request's headers, on a kept-alive connection

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return GuardedH11Protocol


async def send_json(send: Send, status: int, detail: str,
                    headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    """Answers ``{"detail": detail}`` with ``status`` and closes the connection."""
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": body})


class WriteGuard:
    """401 for a request to ``paths`` without the bearer token (module docstring).

    Args:
        app: the ASGI app behind.
        token: the token; None lets every request through (anonymous writes).
        paths: the write endpoints.
    """

    def __init__(self, app: App, token: str | None, paths: frozenset[str]) -> None:
        self.app, self.paths = app, paths
        self.expected = None if token is None else b"Bearer " + token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answers 401 to a write without the token; passes every other request on."""
        if (scope["type"] == "http" and self.expected is not None
                and scope["path"] in self.paths):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await send_json(send, 401, "this endpoint needs Authorization: Bearer <token>",
                                ((b"www-authenticate", b"Bearer"),))
                return
        await self.app(scope, receive, send)


class BodyGuard:
    """Reads request bodies with a size and a time bound (module docstring).

    Args:
        app: the ASGI app behind.
        max_body: largest body in bytes.
        body_timeout: seconds to receive a whole body.
    """

    def __init__(self, app: App, max_body: int, body_timeout: float) -> None:
        self.app, self.max_body, self.body_timeout = app, max_body, body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Passes a request on with its body read whole, or answers 408 / 413."""
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await send_json(send, 413, f"request body over {self.max_body} bytes")
            return
        body = await self._read(receive, send)
        if body is None:
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None once the request got its 408 / 413 or the client left."""
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None  # the client left: nobody to answer
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body:
                        break
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            await send_json(send, 408, f"request body not received within "
                                       f"{self.body_timeout:g} s")
            return None
        await send_json(send, 413, f"request body over {self.max_body} bytes")
        return None
