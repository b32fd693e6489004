"""``/mcp``'s plain-text refusals, answered as JSON-RPC errors an MCP client shows its agent.

Some refusals on ``/mcp`` are written before any JSON-RPC is read, as a line of text: the MCP
SDK's 413 "Request body too large" (its request body limit), its 400 "Invalid Content-Type header",
and the 421 / 403 of a foreign ``Host`` or ``Origin`` (``host_guard`` and the SDK's own check). An
MCP client surfaces a JSON-RPC error body at any status (the SDK's streamable HTTP client does);
a text body reaches the agent as "Server returned an error response", without the reason or what
to do, and the agent retries the same call. ``json_rpc_refusals`` rewrites such an answer, on
``/mcp`` only, into a JSON-RPC error saying what to do, keeping its status and headers. The human
pages keep their plain answers: a browser shows the text.
"""

from __future__ import annotations

import json
from typing import Final

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MAX_REQUEST_MB", "json_rpc_refusals", "refusal_body"]

MCP_PATH: Final = "/mcp"
MAX_REQUEST_MB: Final = DEFAULT_MAX_REQUEST_BODY_SIZE / (1024 * 1024)
"""The largest HTTP request body ``/mcp`` takes (the MCP SDK's limit), in MiB."""

_SAY: Final[dict[tuple[int, bytes], tuple[str, str]]] = {
    (413, b"Request body too large"): (
        "request_too_large",
        f"the request is larger than the {MAX_REQUEST_MB:g} MB one HTTP request to this gateway may carry: "
        "send less per call (fewer or shorter arguments, or split the work over several calls)",
    ),
    (400, b"Invalid Content-Type header"): (
        "invalid_content_type",
        "an MCP request must be sent with Content-Type: application/json",
    ),
    (421, b"Invalid Host header"): (
        "invalid_host",
        "the Host header names no address this gateway answers to: connect with the gateway's own URL "
        "(its public_url, or the address it serves on)",
    ),
    (403, b"Invalid Origin header"): (
        "invalid_origin",
        "requests from this Origin are refused (protection against DNS rebinding): connect from the "
        "gateway's own origin, or send no Origin header",
    ),
}
_TEXT_LIMIT: Final = 300
"""Characters of an unforeseen refusal's text kept in its message."""


def refusal_body(status: int, text: bytes) -> bytes:
    """The JSON-RPC error (id null: no request was read) for a plain-text refusal ``text`` at ``status``."""
    reason, message = _SAY.get((status, text.strip()), (None, None))
    if reason is None or message is None:
        shown = text.decode("utf-8", "replace").strip()[:_TEXT_LIMIT] or "no reason given"
        reason, message = "http_error", f"the gateway refused the request (HTTP {status}): {shown}"
    error = {
        "code": INTERNAL_ERROR if status >= 500 else INVALID_REQUEST,
        "message": f"{reason}: {message}",
        "data": {"reason": reason, "http_status": status},
    }
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()


def json_rpc_refusals(app: ASGIApp) -> ASGIApp:
    """``app``, whose refusals on ``/mcp`` with a body other than JSON or an event stream are JSON-RPC errors."""

    async def door(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != MCP_PATH:
            await app(scope, receive, send)
            return
        held: Message | None = None
        text = bytearray()

        async def sending(message: Message) -> None:
            nonlocal held
            if held is None:
                if message["type"] == "http.response.start" and message["status"] >= 400 and _plain(message):
                    held = message  # until its whole text is known
                    return
                await send(message)
                return
            if message["type"] != "http.response.body":
                return
            text.extend(message.get("body", b""))
            if message.get("more_body", False):
                return
            await _answer(send, held, bytes(text))

        await app(scope, receive, sending)

    return door


def _plain(start: Message) -> bool:
    for name, value in start.get("headers", ()):
        if name.lower() == b"content-type":
            return not value.lower().startswith((b"application/json", b"text/event-stream"))
    return True  # the SDK's text refusals name no content type at all


async def _answer(send: Send, start: Message, text: bytes) -> None:
    body = refusal_body(start["status"], text)
    kept = [(k, v) for k, v in start.get("headers", ()) if k.lower() not in (b"content-type", b"content-length")]
    headers = [*kept, (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({**start, "headers": headers})
    await send({"type": "http.response.body", "body": body})
