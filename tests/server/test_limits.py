"""Connection limits of the HTTP transport (issue 12): slow clients are closed, idle ones too, and
a complete request is not affected however long its answer takes (``server/limits.py``).

A real uvicorn server on loopback, real sockets; the timeouts are short so the test is quick.
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from starlette.types import Receive, Scope, Send

from mcp_gateway.server.app import _uvicorn  # pyright: ignore[reportPrivateUsage]
from mcp_gateway.server.limits import ConnectionLimits
from tests.support.ports import free_port as _port
from tests.support.serving import serving

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def slow_app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await anyio.sleep(1.5)  # longer than the request timeout: answering is not reading
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@asynccontextmanager
async def served(limits: ConnectionLimits) -> AsyncIterator[int]:
    port = _port()
    server = _uvicorn(slow_app, "127.0.0.1", port, limits)
    server.config.lifespan = "off"
    async with serving(server):
        yield port


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


async def test_fifty_clients_that_never_finish_their_headers_are_closed() -> None:
    async with served(ConnectionLimits(request_timeout=1.0)) as port:
        clients = []
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
            clients.append(s)
        started = time.monotonic()
        closed = await anyio.to_thread.run_sync(lambda: sum(_closed_within(s, 4.0) for s in clients))
        elapsed = time.monotonic() - started
        for s in clients:
            s.close()
    assert closed == 50
    assert elapsed < 4.0


async def test_a_slow_body_is_closed_and_a_slow_answer_is_not() -> None:
    async with served(ConnectionLimits(request_timeout=1.0, keep_alive=1.0)) as port:
        slow_body = socket.create_connection(("127.0.0.1", port))
        slow_body.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        complete = socket.create_connection(("127.0.0.1", port))
        complete.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")

        def answer() -> bytes:
            complete.settimeout(5)
            data = b""
            while not data.endswith(b"ok"):
                chunk = complete.recv(1024)
                if not chunk:
                    break
                data += chunk
            return data

        assert await anyio.to_thread.run_sync(lambda: _closed_within(slow_body, 3.0))
        got = await anyio.to_thread.run_sync(answer)
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"ok")  # 1.5 s to answer, not cut at 1 s
        # Then idle on a kept-alive connection: closed after the keep-alive timeout.
        assert await anyio.to_thread.run_sync(lambda: _closed_within(complete, 3.0))
        slow_body.close()
        complete.close()
