"""Which MCP session a request belongs to, for the caps one session may hold (calls, watchers).

The SDK builds a new ``ServerSession`` for every request, so its identity names the request, not the
session. Over streamable HTTP a session is its ``Mcp-Session-Id`` header; otherwise (stdio, the
in-memory client) it is the connection, known by the ``initialize`` parameters it keeps for its whole
life. A request of the stateless protocol revision, with neither, is a session of its own.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext

__all__ = ["session_key"]


def session_key(request_context: ServerRequestContext[Any, Any]) -> str:
    headers = getattr(request_context.request, "headers", None)
    if headers is not None and (session_id := headers.get("mcp-session-id")):
        return f"session:{session_id}"
    params = request_context.session.client_params
    return f"session:{id(params) if params is not None else id(request_context)}"
