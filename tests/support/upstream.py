"""A real upstream on loopback for end-to-end tests: uvicorn in a thread, plus a recording echo app.

    echo = echo_app()
    with serve_asgi(echo) as base_url:          # http://127.0.0.1:<free port>
        ...                                     # real sockets, real HTTP/1.1
    echo.requests[-1].headers["authorization"]  # what actually reached the upstream

The socket is bound before the server starts, so the port is known without racing another
process for it. ``echo_app`` answers every path with a JSON echo of the request; a few paths
behave like awkward upstreams (see ``EchoApp.routes``). Pass uvicorn options through, e.g.
``serve_asgi(app, ssl_certfile=..., ssl_keyfile=...)`` for TLS (the base URL becomes https).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.cookies import SimpleCookie
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl

import uvicorn

__all__ = ["EchoApp", "LoopbackServer", "RecordedRequest", "echo_app", "reply_json", "serve_asgi"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class LoopbackServer:
    """Runs an ASGI app with uvicorn on 127.0.0.1 in a background thread."""

    def __init__(self, app: ASGIApp, **uvicorn_options: Any) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        scheme = "https" if uvicorn_options.get("ssl_certfile") else "http"
        self.base_url = f"{scheme}://127.0.0.1:{self.port}"
        options: dict[str, Any] = {
            "log_level": "warning",
            "lifespan": "off",
            "ws": "none",
            "http": "h11",
            # A test that abandons a slow request must not hold teardown for long.
            "timeout_graceful_shutdown": 1,
            **uvicorn_options,
        }
        self._server = uvicorn.Server(uvicorn.Config(app, **options))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def start(self, timeout: float = 10.0) -> None:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"loopback server on port {self.port} did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextmanager
def serve_asgi(app: ASGIApp, **uvicorn_options: Any) -> Iterator[str]:
    """Serve ``app`` on a free loopback port for the duration of the block; yields the base URL."""
    with LoopbackServer(app, **uvicorn_options) as server:
        yield server.base_url


async def read_body(receive: Receive) -> bytes:
    """An ASGI request's whole body (for the small apps of other test upstreams)."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def reply_json(send: Send, status: int, payload: Any) -> None:
    """Answer an ASGI request with ``payload`` as JSON (for the small apps of other test upstreams)."""
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


# -- the echo upstream -----------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """One request exactly as it reached the upstream."""

    method: str
    path: str
    """Percent-decoded, as routers see it."""
    raw_path: str
    """As sent on the wire, escapes intact (``/users/a%2Fb``)."""
    query: str
    """The raw query string, without ``?``."""
    headers: dict[str, str]
    """Lower-case names; repeated headers joined with ``, ``."""
    cookies: dict[str, str]
    body: bytes

    @property
    def query_params(self) -> list[tuple[str, str]]:
        return parse_qsl(self.query, keep_blank_values=True)

    def json(self) -> Any:
        return json.loads(self.body)

    def as_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "raw_path": self.raw_path,
            "query": self.query,
            "headers": self.headers,
            "cookies": self.cookies,
            "body": self.body.decode("utf-8", "replace"),
        }


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    chunks: tuple[bytes, ...] = ()
    """When set, the body is streamed in these pieces instead of ``body``."""


Route = Callable[[RecordedRequest, str], Awaitable[Reply]]


def _json(status: int, data: Any) -> Reply:
    return Reply(status, json.dumps(data).encode())


def _param(request: RecordedRequest, name: str, default: str) -> str:
    return dict(request.query_params).get(name, default)


async def _echo(request: RecordedRequest, _: str) -> Reply:
    return _json(200, request.as_json())


async def _status(request: RecordedRequest, code: str) -> Reply:
    status = int(code)
    if status in (204, 304) or status < 200:
        return Reply(status, content_type="")
    return _json(status, {"message": _param(request, "message", f"the echo upstream answered {status}")})


async def _text(request: RecordedRequest, _: str) -> Reply:
    return Reply(200, b"x" * int(_param(request, "n", "0")) or b"hello from echo", "text/plain; charset=utf-8")


async def _sse(request: RecordedRequest, _: str) -> Reply:
    events = (b'data: {"n": 1}\n\n', b'event: tick\ndata: {"n": 2}\n\n', b"data: done\n\n")
    return Reply(200, content_type="text/event-stream", chunks=events)


async def _binary(request: RecordedRequest, _: str) -> Reply:
    n = int(_param(request, "n", "256"))
    return Reply(200, bytes(i % 256 for i in range(n)), "application/octet-stream")


async def _big(request: RecordedRequest, _: str) -> Reply:
    # Streamed in 64 KiB pieces so a reader that stops early really stops mid-body.
    n = int(_param(request, "n", "1000000"))
    body = json.dumps({"data": "a" * n}).encode()
    return Reply(
        200, content_type="application/json", chunks=tuple(body[i : i + 65536] for i in range(0, len(body), 65536))
    )


async def _redirect(request: RecordedRequest, _: str) -> Reply:
    status = int(_param(request, "status", "302"))
    return Reply(status, b"", "text/plain", headers=(("location", _param(request, "to", "/")),))


async def _slow(request: RecordedRequest, _: str) -> Reply:
    await asyncio.sleep(float(_param(request, "s", "1")))
    return _json(200, request.as_json())


async def _headers_error(request: RecordedRequest, _: str) -> Reply:
    # Like an upstream that dumps the request into its error page: canary tests make sure the
    # gateway never passes such text on with a credential in it.
    return _json(500, {"message": "internal error", "request_headers": request.headers})


class EchoApp:
    """A raw ASGI upstream that records every request in ``requests`` and echoes it back as JSON."""

    routes: tuple[tuple[str, Route], ...] = (
        ("/status/", _status),  # /status/{code}[?message=...]: that status, {"message": ...}
        ("/text", _text),  # text/plain; ?n= bytes of "x"
        ("/sse", _sse),  # text/event-stream with three data: events
        ("/binary", _binary),  # application/octet-stream; ?n= bytes
        ("/big", _big),  # {"data": "aaa..."} with ?n= a's, streamed
        ("/redirect", _redirect),  # ?to=<url>[&status=302]
        ("/slow", _slow),  # ?s=<seconds>, then the echo
        ("/echo-headers-error", _headers_error),  # 500 echoing every request header
    )
    """Prefix -> handler; the rest of the path is the handler's argument. Anything else echoes."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = await self._record(scope, receive)
        if request is None:
            return  # the client died before its body arrived (a kill -9 test): nothing reached us
        self.requests.append(request)
        route, rest = next(
            ((h, request.path[len(p) :]) for p, h in self.routes if request.path.startswith(p)), (_echo, "")
        )
        reply = await self._unless_disconnected(route(request, rest), receive)
        if reply is None:
            return  # the client gave up (a timeout test): nothing to answer, nothing to wait for
        headers = [(b"content-type", reply.content_type.encode())] if reply.content_type else []
        headers += [(k.encode(), v.encode()) for k, v in reply.headers]
        if not reply.chunks:
            headers.append((b"content-length", str(len(reply.body)).encode()))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        for chunk in reply.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"" if reply.chunks else reply.body})

    @staticmethod
    async def _unless_disconnected(reply: Awaitable[Reply], receive: Receive) -> Reply | None:
        # After the body, receive() only returns once the client disconnects; racing it lets a
        # slow route stop at once instead of holding the server's shutdown.
        answer, gone = asyncio.ensure_future(reply), asyncio.ensure_future(receive())
        await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
        gone.cancel()
        if not answer.done():
            answer.cancel()
            return None
        return answer.result()

    @staticmethod
    async def _record(scope: Scope, receive: Receive) -> RecordedRequest | None:
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("utf-8", "replace")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        cookie = SimpleCookie()
        cookie.load(headers.get("cookie", ""))
        return RecordedRequest(
            method=scope["method"],
            path=scope["path"],
            raw_path=(scope.get("raw_path") or scope["path"].encode()).decode("latin-1"),
            query=scope["query_string"].decode("latin-1"),
            headers=headers,
            cookies={k: m.value for k, m in cookie.items()},
            body=body,
        )


def echo_app() -> EchoApp:
    """A fresh recording echo upstream (one per test, so ``requests`` starts empty)."""
    return EchoApp()
