"""An agent's MCP session over plain HTTP, for load tests that post many calls: the headers, the
handshake, and the JSON-RPC message of an answer sent as JSON or as one SSE event."""

from __future__ import annotations

import json
from typing import Any

import httpx2

__all__ = ["HEADERS", "INITIALIZE", "message", "open_session"]

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "load", "version": "1"}},
}


async def open_session(http: httpx2.AsyncClient, url: str, token: str) -> dict[str, str]:
    """Initialize a session on the gateway at ``url``; the headers every later request sends."""
    auth = HEADERS | {"Authorization": f"Bearer {token}"}
    init = await http.post(f"{url}/mcp", json=INITIALIZE, headers=auth)
    assert init.status_code == 200, init.text
    if session := init.headers.get("mcp-session-id"):
        auth = auth | {"mcp-session-id": session}
    await http.post(f"{url}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=auth)
    return auth


def message(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message an answer carries, as JSON or as the first SSE event with data."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])
        return {}
    return response.json()
