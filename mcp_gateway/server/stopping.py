"""What the HTTP server says as it stops: to the operator, and to an agent whose request it cuts.

uvicorn cuts the requests still running when the drain ends (or at once, on a second Ctrl-C) by
cancelling their tasks: the cancellation reached uvicorn as an "Exception in ASGI application" with a
50-line traceback at ERROR, and the agent got a plain-text 500 it could not tell from a crash.
``CutAnswers`` answers such a request instead: a JSON-RPC error saying the gateway stopped and that
the call may have taken effect, with the request's id when its body showed one (a stream already
started is ended cleanly). The calls themselves are named and audited by ``core.in_flight``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CUT_MESSAGE", "CutAnswers"]

CUT_MESSAGE = (
    "The gateway is shutting down and cut this request before its answer came. If it was a call, its "
    "request may have reached the upstream and taken effect: check before you retry, once the gateway is back."
)
_KEPT_BODY = 64 * 1024
"""Bytes of a request's body kept to read its JSON-RPC id from, should it be cut."""


class CutAnswers:
    """ASGI middleware: once ``stopping``, a request cancelled by the server's stop is answered (or ended)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.stopping = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        kept: list[bytes] = []
        started = completed = False

        async def keeping() -> Message:
            message = await receive()
            if message["type"] == "http.request" and sum(map(len, kept)) < _KEPT_BODY:
                kept.append(message.get("body", b""))
            return message

        async def sending(message: Message) -> None:
            nonlocal started, completed
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                completed = True
            await send(message)

        try:
            await self.app(scope, keeping, sending)
        except asyncio.CancelledError:
            if not self.stopping:
                raise
            try:
                if not started:
                    await _answer_cut(send, _request_id(b"".join(kept)))
                elif not completed:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
            except Exception:  # the client is gone: nothing is left to tell it
                pass


def _request_id(body: bytes) -> Any:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


async def _answer_cut(send: Send, request_id: Any) -> None:
    error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": CUT_MESSAGE}}
    body = json.dumps(error).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
