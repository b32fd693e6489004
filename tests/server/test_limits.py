"""Connection limits of the HTTP transport (issue 12): slow clients are closed, idle ones too, and
a complete request is not affected however long its answer takes (``server/limits.py``); the
connection limit stays above the session limit (by default, and refused when told otherwise).

A real uvicorn server on loopback, real sockets; the timeouts are short so the test is quick.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from starlette.types import Receive, Scope, Send

from mcp_gateway import cli
from mcp_gateway.server.app import _uvicorn  # pyright: ignore[reportPrivateUsage]
from mcp_gateway.server.limits import ConnectionLimits
from mcp_gateway.services.logs import LogThrottle
from mcp_gateway.vocabulary.errors import GatewayError
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


def test_by_default_every_session_can_hold_a_stream_and_a_request() -> None:
    assert ConnectionLimits().max_sessions == 1000
    for sessions in (1, 1000, 5000):
        limits = ConnectionLimits(max_sessions=sessions)
        assert limits.connection_limit >= 2 * sessions + 1
    server = _uvicorn(slow_app, "127.0.0.1", _port(), ConnectionLimits())
    assert server.config.limit_concurrency == ConnectionLimits().connection_limit > 2 * 1000
    told = _uvicorn(slow_app, "127.0.0.1", _port(), ConnectionLimits(max_connections=1001, max_sessions=1000))
    assert told.config.limit_concurrency == 1001  # an explicit limit above the sessions' is kept


def test_a_connection_limit_at_or_below_the_session_limit_is_refused() -> None:
    for connections in (1000, 500):
        with pytest.raises(GatewayError) as refused:
            ConnectionLimits(max_connections=connections, max_sessions=1000)
        message = str(refused.value)
        assert "--max-connections" in message and "--max-sessions" in message and "2100" in message


def test_serve_refuses_such_limits_in_one_line_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCP_GATEWAY_MANIFEST", raising=False)
    monkeypatch.setenv("MCP_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    argv = ["serve", "--transport", "http", "--port", str(_port()), "--max-connections", "50", "--max-sessions", "100"]
    assert cli.main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "--max-connections 50 does not exceed --max-sessions 100" in err
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").glob("*.db"))  # nothing opened


async def test_malformed_requests_are_logged_once_a_window_with_the_client_and_a_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Any client reaching the port could make uvicorn log a line per malformed request (hundreds a
    # second), without saying from where; and a WebSocket upgrade was told to pip install a library.
    from mcp_gateway.server import limits

    monkeypatch.setattr(limits, "_noise", LogThrottle(3600.0))  # however slow the machine, one window
    said: list[str] = []

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                said.append(record.getMessage())

    # A handler of its own: uvicorn's logging set-up (another test's server) may stop propagation.
    lines = Lines()
    logging.getLogger("uvicorn.error").addHandler(lines)

    def send(payload: bytes) -> None:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(payload)
            s.settimeout(4.0)
            s.recv(1024)  # answered

    try:
        async with served(ConnectionLimits(request_timeout=2.0)) as port:
            for _ in range(30):
                await anyio.to_thread.run_sync(send, b"NOT HTTP AT ALL\r\n\r\n")
            upgrade = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
            for _ in range(3):
                await anyio.to_thread.run_sync(send, upgrade)
            monkeypatch.setattr(limits._noise, "last", {})  # the window passes
            await anyio.to_thread.run_sync(send, b"NOT HTTP AT ALL\r\n\r\n")
    finally:
        logging.getLogger("uvicorn.error").removeHandler(lines)
    assert len(said) == 3, said
    assert said[0].startswith("an invalid HTTP request from 127.0.0.1:") and said[0].endswith("answered 400")
    assert said[1].startswith("an upgrade request (WebSocket) from 127.0.0.1:")
    assert said[1].endswith("answered as plain HTTP")
    assert said[2].endswith("; 29 more in the last 3600+ s not logged")
    assert not any("pip install" in line for line in said)
