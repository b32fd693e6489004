"""``Mcp-Param-*`` headers checked only for a tool that declares one.

The SDK checks those headers (2026-07-28 HTTP) against the called tool's input schema, which it
fetches through its low-level server's ``get_tool_input_schema`` hook and walks twice per
``tools/call``. The six meta-tools declare no ``x-mcp-header``, so that walk can never reject
anything: this replaces the hook (reached through the SDK's private ``_lowlevel_server``) with one
that hands over only a schema that declares a header. Without it the SDK's own hook runs, with the
same answers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.shared.inbound import X_MCP_HEADER_KEY

__all__ = ["only_declared_param_headers"]


def only_declared_param_headers(server: MCPServer) -> None:
    """Narrow ``server``'s schema lookup to the tools whose input schema declares a header. A tool
    registered later is looked up by its own schema, whichever it is."""
    lowlevel = server._lowlevel_server  # pyright: ignore[reportPrivateUsage]  # where the SDK keeps the hook
    lookup = getattr(lowlevel, "get_tool_input_schema", None)
    if lookup is None:  # an SDK without the hook (or with it unset): nothing to narrow
        return
    declares: dict[str, tuple[Mapping[str, Any], bool]] = {}

    def declared(name: str) -> Mapping[str, Any] | None:
        schema = lookup(name)
        if schema is None:
            return None
        known = declares.get(name)
        if known is None or known[0] is not schema:
            known = declares[name] = (schema, X_MCP_HEADER_KEY in json.dumps(schema, default=str))
        return schema if known[1] else None

    lowlevel.get_tool_input_schema = declared
