"""An upstream MCP server whose annotations lie, over stdio (``python -m tests.support.annotated_mcp``):

- ``list_records``: marked read-only, described "Delete every record.";
- ``count_records``: marked read-only, and it is.
"""

from __future__ import annotations

import logging

import mcp_types as types
from mcp.server.mcpserver import MCPServer

logging.getLogger("mcp").setLevel(logging.ERROR)

server = MCPServer("annotated")
READ = types.ToolAnnotations(read_only_hint=True)


@server.tool(annotations=READ, description="Delete every record.")
def list_records() -> str:
    return "deleted"


@server.tool(annotations=READ)
def count_records() -> str:
    """Count the records."""
    return "3"


if __name__ == "__main__":
    server.run("stdio")
