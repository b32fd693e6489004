"""Transports: the streamable HTTP app (MCP at ``/mcp`` + human pages) and the stdio runner.

HTTP: every request to ``/mcp`` needs ``Authorization: Bearer <token>`` minted by ``token
create``; anything else gets a bare 401 (no detail to probe with). Host and Origin are checked
against DNS rebinding on every route (``HostGuard``: pages, operator, OAuth callback, health) and
by the SDK's transport security on ``/mcp``, both from one allow-list for the address we bind.
stdio: stdout belongs to the protocol; the human pages are served on loopback at ``public_url``,
started the first time a link is minted, so every link the gateway hands out works.

Stopping: SIGTERM or SIGINT over HTTP stops uvicorn gracefully and then unwinds ``open_gateway``
like any close (the audit queue is written, the store closed) and exits 0. On stdio, EOF on stdin
unwinds the same way; a signal cannot (see ``_end_on_signals``), so it writes the audit queue and
then ends the process as the signal asks.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from types import FrameType
from urllib.parse import urlsplit

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from ..core import Gateway
from ..identity import Principal
from ..tokens import TokenService
from .host_guard import HostGuard, allow_list
from .tools import PRINCIPAL_SCOPE_KEY, build_mcp_server
from .web import web_routes

__all__ = ["BearerGate", "build_http_app", "run_http", "run_stdio"]

logger = logging.getLogger(__name__)
MCP_PATH = "/mcp"


class BearerGate:
    """ASGI middleware: ``/mcp`` requires a valid bearer token; the principal goes into the scope."""

    def __init__(self, app: ASGIApp, tokens: TokenService) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].rstrip("/") == MCP_PATH:
            await self.app(scope, receive, send)
            return
        principal = await self.tokens.verify(_bearer(scope))
        if principal is None:
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"www-authenticate", b"Bearer"), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        scope[PRINCIPAL_SCOPE_KEY] = principal
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


def build_http_app(
    gateway: Gateway, tokens: TokenService, *, host: str, port: int, request_state_key: bytes | None = None
) -> ASGIApp:
    # Over HTTP every request names its principal; the default is never used.
    nobody = Principal(user="anonymous", agent="\0none")
    server = build_mcp_server(gateway, default_principal=nobody, request_state_key=request_state_key)
    for route in web_routes(gateway):
        server.custom_route(route.path, methods=sorted(route.methods or ["GET"]))(route.endpoint)
    allowed = allow_list(host, port, gateway.links.public_url)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=allowed.transport_security(),
        host=host,
    )
    return HostGuard(BearerGate(app, tokens), allowed)


class _Server(uvicorn.Server):
    """uvicorn, minus re-raising the stop signal once it has shut down.

    uvicorn re-delivers a captured SIGTERM/SIGINT after ``serve()`` returns, with the handler that
    was there before it: by default that kills the process on the spot, before ``open_gateway``
    unwinds, and the audit rows still queued would be lost. Here the signal only asks for the
    graceful stop; the caller's unwinding then ends the process.
    """

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: stop waiting for open connections
        self.should_exit = True


def _uvicorn(app: ASGIApp, host: str, port: int) -> uvicorn.Server:
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on")
    return _Server(config)


async def run_http(
    gateway: Gateway, tokens: TokenService, *, host: str, port: int, request_state_key: bytes | None = None
) -> None:
    app = build_http_app(gateway, tokens, host=host, port=port, request_state_key=request_state_key)
    await _uvicorn(app, host, port).serve()


async def run_stdio(server: MCPServer, gateway: Gateway, pages_requested: anyio.Event) -> None:
    """Serve MCP on stdio; serve the human pages on loopback once the first link is minted."""

    async def pages() -> None:
        await pages_requested.wait()
        url = urlsplit(gateway.links.public_url)
        host, port = url.hostname or "127.0.0.1", url.port or 80
        app = HostGuard(Starlette(routes=web_routes(gateway)), allow_list(host, port, gateway.links.public_url))
        try:
            await _uvicorn(app, host, port).serve()
        except (OSError, SystemExit) as exc:
            logger.warning("cannot serve the link pages at %s: %s", gateway.links.public_url, exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(pages)
        if threading.current_thread() is threading.main_thread():
            tg.start_soon(_end_on_signals, gateway)
        await server.run_stdio_async()
        tg.cancel_scope.cancel()


async def _end_on_signals(gateway: Gateway) -> None:
    """On SIGTERM or SIGINT under stdio: write the queued audit rows, then end as the signal asks.

    The SDK reads stdin on a worker thread that cancellation cannot interrupt, so the server cannot
    unwind until stdin closes, which is what a client does first (the MCP shutdown sequence: close
    stdin, then SIGTERM after a grace period). A signal therefore ends the process as it did before,
    but only after every row recorded so far is written: rows of calls still in flight are written
    by those calls themselves, up to the moment the process ends.
    """
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            await gateway.auditor.close()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
