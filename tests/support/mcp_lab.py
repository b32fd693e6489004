"""A small, fully controllable upstream MCP server for the gateway's MCP source tests.

    python -m tests.support.mcp_lab stdio
    python -m tests.support.mcp_lab streamable-http PORT
    python -m tests.support.mcp_lab sse PORT

Built on the official SDK's ``MCPServer``; HTTP modes listen on 127.0.0.1 only. Its tools cover what
``server-everything`` does not: a destructive annotation (``wipe``, which fails on ``/busy``), a
tool with no annotations, a tool that sleeps (a hung upstream), an ``isError`` result, audio and
embedded blobs, names that need mapping to action paths, and its ``tools/list`` is paginated
(``PAGE`` tools a page) so the gateway's pagination is exercised. ``whoami`` reports ``LAB_TOKEN``
from its environment and the ``Authorization`` header it received, so tests can check where the
gateway put a credential (and that it is redacted on the way back). With
``LAB_REQUIRE_BEARER=<token>`` in its environment an HTTP mode answers 401 to any request without
that bearer token. With ``LAB_LEAK=1``, stdio mode first prints ``LAB_TOKEN`` on a non-JSON stdout
line (the client SDK logs that line). With ``LAB_SPAM=<n>``, stdio mode first writes ``n`` long
non-JSON lines to stdout (far more log lines than a stderr pipe holds).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import sys
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

PAGE = 3
WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(range(32))).decode()
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(64))).decode()

# "Files/Read.v2" below is a non-conforming name on purpose; the SDK's warning about it is noise here.
logging.getLogger("mcp.shared.tool_name_validation").setLevel(logging.ERROR)
lab = MCPServer("lab")


@lab.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def peek(key: str) -> dict[str, Any]:
    """Read one value by its key (returns structured content)."""
    return {"key": key, "value": len(key)}


@lab.tool(annotations=types.ToolAnnotations(destructive_hint=True, read_only_hint=False))
def wipe(target: str) -> str:
    """Delete everything under a target."""
    if target == "/busy":
        # The SDK answers isError with only "Error executing tool wipe": the reason stays here.
        raise RuntimeError("deleted part of /busy before the disk failed")
    return f"wiped {target}"


@lab.tool()
def note(text: str) -> str:
    """Write a note (no annotations at all)."""
    return f"noted: {text}"


@lab.tool(annotations=types.ToolAnnotations(read_only_hint=True))
async def slow(seconds: float) -> str:
    """Sleep, then answer: a hung upstream when the sleep outlasts the gateway's timeout."""
    await asyncio.sleep(seconds)
    return "done"


@lab.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def fail() -> types.CallToolResult:
    """Always fails with a tool error (isError)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="the widget is broken; pass a smaller size")], is_error=True
    )


@lab.tool(annotations=types.ToolAnnotations(read_only_hint=True), structured_output=False)
def media() -> list[Any]:
    """Image, audio, an embedded text resource, an embedded blob and a resource link."""
    return [
        types.TextContent(type="text", text="here it comes"),
        types.ImageContent(type="image", data=PNG, mime_type="image/png"),
        types.AudioContent(type="audio", data=WAV, mime_type="audio/wav"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(uri="lab://notes/1", mime_type="text/plain", text="note one"),
        ),
        types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(uri="lab://blobs/1", mime_type="application/octet-stream", blob=PNG),
        ),
        types.ResourceLink(type="resource_link", uri="lab://notes/2", name="note two", mime_type="text/plain"),
    ]


@lab.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def whoami(ctx: Context) -> dict[str, Any]:
    """Which credential reached this server: LAB_TOKEN from the environment, Authorization from HTTP."""
    headers = ctx.headers or {}
    return {"env_token": os.environ.get("LAB_TOKEN"), "authorization": headers.get("authorization")}


@lab.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def pid() -> int:
    """This server process's id (tests use it to see a respawn)."""
    return os.getpid()


@lab.tool(name="Files/Read.v2", annotations=types.ToolAnnotations(read_only_hint=True))
def files_read_v2(path: str) -> str:
    """A namespaced tool name with a slash, a dot and capitals."""
    return f"contents of {path}"


@lab.tool(name="files.read.v2", annotations=types.ToolAnnotations(read_only_hint=True))
def files_read_v2_plain(path: str) -> str:
    """Maps to the same action path as ``Files/Read.v2``, so it gets a suffix."""
    return f"plain {path}"


async def _paginated_list(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    tools = await lab.list_tools()
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + PAGE
    return types.ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)


lab._lowlevel_server.add_request_handler("tools/list", types.PaginatedRequestParams, _paginated_list)


def _require_bearer(app: Any, token: str) -> Any:
    """Answer 401 to HTTP requests without ``Authorization: Bearer <token>`` (an upstream with auth)."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"bad token"})
            return
        await app(scope, receive, send)

    return guarded


def main(argv: list[str]) -> None:
    mode = argv[0] if argv else "stdio"
    if mode == "stdio":
        if os.environ.get("LAB_LEAK"):  # a careless server: its secret on a non-JSON stdout line
            print(f"starting with token {os.environ.get('LAB_TOKEN')}", flush=True)
        for n in range(int(os.environ.get("LAB_SPAM") or 0)):
            print(f"spam line {n} " + "x" * 200, flush=n % 100 == 99)
        sys.stdout.flush()
        lab.run("stdio")
        return
    if mode not in ("streamable-http", "sse"):
        raise SystemExit(f"usage: python -m tests.support.mcp_lab stdio | streamable-http PORT | sse PORT (not {mode})")
    import uvicorn

    app = lab.streamable_http_app() if mode == "streamable-http" else lab.sse_app()
    token = os.environ.get("LAB_REQUIRE_BEARER")
    uvicorn.run(_require_bearer(app, token) if token else app, host="127.0.0.1", port=int(argv[1]), log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1:])
