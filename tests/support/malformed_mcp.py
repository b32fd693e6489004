"""An MCP server over stdio whose answers the MCP SDK cannot read whole:

    python -m tests.support.malformed_mcp [some | none]

``some`` (the default) lists ``ok`` and ``deep_result`` beside three tools the SDK rejects: ``stringly``
(an ``inputSchema`` of type string), one without a name, and ``abyss`` (a schema nested 300 levels,
deeper than the SDK's JSON parser goes). ``none`` lists only the rejected ones. ``deep_result`` answers
with structured content nested ``n`` levels. It speaks JSON-RPC lines without the SDK, which would
not send such tools.
"""

from __future__ import annotations

import json
import sys
from typing import Any

READ = {"readOnlyHint": True}
OBJECT = {"type": "object", "properties": {"n": {"type": "integer"}}}


def nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def tools(mode: str) -> list[dict[str, Any]]:
    bad: list[dict[str, Any]] = [
        {"name": "stringly", "inputSchema": {"type": "string"}, "annotations": READ},
        {"description": "a tool without a name", "inputSchema": OBJECT},
        {"name": "abyss", "inputSchema": nested(150), "annotations": READ},
    ]
    if mode == "none":
        return bad
    good = [
        {"name": "ok", "description": "Says ok.", "inputSchema": OBJECT, "annotations": READ},
        {"name": "deep_result", "description": "Nested data.", "inputSchema": OBJECT, "annotations": READ},
    ]
    return [good[0], *bad, good[1]]


def answer(request: dict[str, Any], mode: str) -> dict[str, Any]:
    method = request.get("method")
    if method == "initialize":
        return {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "malformed", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": tools(mode)}
    if method == "tools/call":
        name = request["params"]["name"]
        if name == "deep_result":
            levels = int(request["params"].get("arguments", {}).get("n", 10))
            data: Any = "bottom"
            for _ in range(levels):
                data = {"d": data}
            return {"content": [{"type": "text", "text": "deep"}], "structuredContent": {"root": data}}
        return {"content": [{"type": "text", "text": "ok"}]}
    return {}


def main(mode: str) -> None:
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request or "method" not in request:
            continue
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer(request, mode)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "some")
