"""``/mcp`` over HTTP: the SDK's streamable-HTTP session manager behind the gateway's app.

With the fast paths on (``server.fast.ENABLED``) the manager is ``fast.json_first``'s
``LeanSessionManager``: a quick request of a 2025 session answered with JSON, a 2026-07-28 request
run in its own task. Otherwise it is the one the SDK's public builder makes (its answers: SSE for a
2025 session's requests), so an SDK release the fast paths were not tested with costs speed, never
correctness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_TIMEOUT,
    StreamableHTTPASGIApp,
    StreamableHTTPSessionManager,
)
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route

from . import fast

__all__ = ["LEAN_SDK", "streamable_http_app"]

LEAN_SDK: Final = fast.ENABLED
"""Whether the fast paths serve ``/mcp`` (``server.fast``): they override private methods of the SDK's
transport and manager and call its private wire helpers, which a minor release may change. Otherwise
``streamable_http_app`` builds the SDK's own manager (its answers: SSE for a 2025 session's requests)."""


def streamable_http_app(
    server: MCPServer,
    *,
    path: str,
    routes: Sequence[BaseRoute] = (),
    security: TransportSecuritySettings | None = None,
    max_sessions: int | None = DEFAULT_MAX_SESSIONS,
    session_idle_timeout: float | None = DEFAULT_SESSION_IDLE_TIMEOUT,
    lean: bool = LEAN_SDK,
) -> tuple[Starlette, StreamableHTTPSessionManager]:
    """What ``server.streamable_http_app`` builds without auth (the session manager at ``path``, ``routes``
    beside it, the manager run by the app's lifespan), with ``LeanSessionManager`` (the SDK's own
    without ``lean``); and the manager, whose ``handle_request`` serves ``path`` without the app's router."""
    manager: StreamableHTTPSessionManager
    if lean:
        from .fast.json_first import lean_manager  # the SDK's private methods overridden

        manager = lean_manager(
            server, security=security, max_sessions=max_sessions, session_idle_timeout=session_idle_timeout
        )
    else:  # the public API alone: the SDK's builder makes its manager (its app is not served, the manager is)
        server.streamable_http_app(
            streamable_http_path=path,
            transport_security=security,
            max_sessions=max_sessions,
            session_idle_timeout=session_idle_timeout,
        )
        manager = server.session_manager
    app = Starlette(
        routes=[Route(path, endpoint=StreamableHTTPASGIApp(manager)), *routes], lifespan=lambda _: manager.run()
    )
    return app, manager
