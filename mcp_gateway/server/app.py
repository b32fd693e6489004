"""Transports: the streamable HTTP app (MCP at ``/mcp`` + human pages) and the stdio runner.

HTTP: every request to ``/mcp`` needs ``Authorization: Bearer <token>`` minted by ``token
create``; anything else gets a bare 401 (no detail to probe with). Host and Origin are checked
against DNS rebinding by the SDK's transport security, configured here for the address we bind.
stdio: stdout belongs to the protocol; the human pages are served on loopback at ``public_url``,
started the first time a link is minted, so every link the gateway hands out works.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from ..gateway import Gateway
from ..identity import Principal, TokenService
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


def _security(host: str, port: int, public_url: str) -> TransportSecuritySettings:
    public = urlsplit(public_url)
    hosts = {f"{host}:{port}", "127.0.0.1:*", "localhost:*", "[::1]:*"}
    origins = {"http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*", f"{public.scheme}://{public.netloc}"}
    if public.netloc:
        hosts.add(public.netloc)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=sorted(hosts), allowed_origins=sorted(origins)
    )


def build_http_app(
    gateway: Gateway, tokens: TokenService, *, host: str, port: int, request_state_key: bytes | None = None
) -> ASGIApp:
    # Over HTTP every request names its principal; the default is never used.
    nobody = Principal(user="anonymous", agent="\0none")
    server = build_mcp_server(gateway, default_principal=nobody, request_state_key=request_state_key)
    for route in web_routes(gateway):
        server.custom_route(route.path, methods=sorted(route.methods or ["GET"]))(route.endpoint)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=_security(host, port, gateway.links.public_url),
        host=host,
    )
    return BearerGate(app, tokens)


def _uvicorn(app: ASGIApp, host: str, port: int) -> uvicorn.Server:
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on")
    return uvicorn.Server(config)


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
        app = Starlette(routes=web_routes(gateway))
        try:
            await _uvicorn(app, host, port).serve()
        except (OSError, SystemExit) as exc:
            logger.warning("cannot serve the link pages at %s: %s", gateway.links.public_url, exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(pages)
        await server.run_stdio_async()
        tg.cancel_scope.cancel()
