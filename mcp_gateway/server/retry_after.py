"""``Retry-After`` on ``/mcp`` answers that tell the agent to come back later.

A call or discovery over a rate limit (or to an upstream whose circuit is open) is answered as a
tool result, as MCP wants: ``status: error``, ``reason: rate_limited`` (``upstream_unavailable``)
and ``retry_after`` seconds in the body. HTTP clients, proxies and load balancers read the
``Retry-After`` header, not a tool result, so a JSON answer that carries such a result gets the
header too (whole seconds, rounded up). An answer streamed as server-sent events has sent its
headers before the result exists and keeps them as they are.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["retry_after_header", "with_retry_after"]

_REASONS = frozenset({"rate_limited", "upstream_unavailable"})
_MARKERS = (b'"rate_limited"', b'"upstream_unavailable"')


def with_retry_after(app: ASGIApp) -> ASGIApp:
    """``app``, whose whole-body JSON answers holding a rate-limited tool result carry ``Retry-After``."""

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        held: Message | None = None

        async def sending(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and _json(message):
                held = message  # until the body shows whether it says when to come back
                return
            if held is not None and message["type"] == "http.response.body":
                start, held = held, None
                if not message.get("more_body", False):
                    start = _with_header(start, message.get("body", b""))
                await send(start)
            await send(message)

        await app(scope, receive, sending)
        if held is not None:
            await send(held)

    return answer


def retry_after_header(body: bytes) -> str | None:
    """The ``Retry-After`` value for a JSON-RPC answer ``body`` whose tool result is a
    ``rate_limited`` or ``upstream_unavailable`` error with ``retry_after``; None otherwise."""
    if not any(marker in body for marker in _MARKERS):
        return None  # the common case, decided without parsing the answer
    try:
        decoded: Any = json.loads(body)
    except ValueError:
        return None
    result = decoded.get("result") if isinstance(decoded, dict) else None
    shown = result.get("structuredContent") if isinstance(result, dict) else None
    if not isinstance(shown, dict) or shown.get("reason") not in _REASONS:
        return None
    seconds = shown.get("retry_after")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return None
    return str(max(1, math.ceil(seconds)))


def _json(start: Message) -> bool:
    return any(k == b"content-type" and v.startswith(b"application/json") for k, v in start.get("headers", ()))


def _with_header(start: Message, body: bytes) -> Message:
    value = retry_after_header(body)
    if value is None:
        return start
    return {**start, "headers": [*start.get("headers", ()), (b"retry-after", value.encode("ascii"))]}
