"""An upstream MCP server over stdio that quotes its ``ECHO_TOKEN`` environment variable (the connector's
credential, rendered into the child's environment) back in another Unicode spelling:

    python -m tests.support.echo_env_mcp

- ``in_use``: answers ``token in use: <token>`` with the token decomposed (NFD), which reads the same;
- ``refused``: fails with ``bad token <token>``, the token decomposed and its letters beyond ASCII as ``?``.
"""

from __future__ import annotations

import logging
import os
import unicodedata

import mcp_types as types
from mcp.server.mcpserver import MCPServer

logging.getLogger("mcp").setLevel(logging.ERROR)

server = MCPServer("echo-env")
READ = types.ToolAnnotations(read_only_hint=True)


def _token() -> str:
    return os.environ.get("ECHO_TOKEN", "")


@server.tool(annotations=READ)
def in_use() -> str:
    """Say which token the server was given."""
    return "token in use: " + unicodedata.normalize("NFD", _token())


@server.tool(annotations=READ)
def refused() -> types.CallToolResult:
    """Always fails, quoting the token."""
    token = _token()
    asked = "".join(c if c.isascii() else "?" for c in token)
    text = f"bad token {unicodedata.normalize('NFD', token)} (as ASCII: {asked})"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


if __name__ == "__main__":
    server.run("stdio")
