"""2026-07-28 requests over HTTP: the SDK's single exchange, its handler run in the request's own task.

The SDK (``mcp.server._streamable_http_modern.handle_modern_request``) runs every request's handler
as a sibling task, beside a second task waiting for the client to disconnect, joined by a task group
and a memory stream the handler's notifications go through: three tasks, a task group, a stream and
a timeout scope set up and torn down per request, several passes of the event loop each, for a
request that in the common case writes only its response.

``serve_single_exchange`` keeps the SDK's decisions and changes where the handler runs: in the
request's task, under a cancel scope. One small task waits for the client to go away (closing the
response is how a 2026-07-28 client cancels: the scope is cancelled, as the SDK's task group was);
a timer commits the answer to ``text/event-stream`` after ``_SSE_PING_INTERVAL`` seconds of silence
and keeps pinging, as the SDK does; a notification (progress) commits it at once and is written
from the handler's task directly. A handler that completes silently is answered with
``application/json`` and the table-mapped status, as before.

Everything this path does not vouch for goes to the SDK's handler with the body handed back to it:
a method other than POST, an ``Accept`` without both types, a body that is not one JSON-RPC request
(parse errors, notifications, batches), ``subscriptions/listen``, a duplicated routing header, a
rejected envelope or ``Mcp-Param-*`` header, and a server configured for JSON responses.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server import _streamable_http_modern as sdk  # private: its wire helpers, the same bytes as the SDK's
from mcp.server.connection import Connection
from mcp.server.runner import serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request, find_duplicated_routing_header
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server

__all__ = ["serve_single_exchange"]

_START_SSE: Message = {"type": "http.response.start", "status": 200, "headers": sdk._SSE_HEADERS}  # pyright: ignore[reportPrivateUsage]
_PING = b": ping\r\n\r\n"


async def serve_single_exchange(
    app: Server[Any],
    security_settings: TransportSecuritySettings | None,
    json_response: bool,
    lifespan_state: Any,
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    """``handle_modern_request``'s contract (same arguments, same answers), the handler in this task."""
    if json_response or scope["method"] != "POST":
        await sdk.handle_modern_request(app, security_settings, json_response, lifespan_state, scope, receive, send)
        return
    request = Request(scope, receive)
    refused = await TransportSecurityMiddleware(security_settings).validate_request(request, is_post=True)
    if refused is not None:
        await refused(scope, receive, send)
        return
    has_json, has_sse = check_accept_headers(request)
    if not (has_json and has_sse):
        await sdk.handle_modern_request(app, security_settings, json_response, lifespan_state, scope, receive, send)
        return
    body = await request.body()
    req, verdict = await _vouched(app, request, body, lifespan_state)
    if req is None or verdict is None:
        replay = _replaying(body, receive)
        await sdk.handle_modern_request(app, security_settings, json_response, lifespan_state, scope, replay, send)
        return
    connection = Connection.from_envelope(verdict.protocol_version, verdict.client_info, verdict.client_capabilities)
    exchange = _Exchange(send)
    dctx = sdk._SingleExchangeDispatchContext(  # pyright: ignore[reportPrivateUsage]
        transport=TransportContext(kind="streamable-http", can_send_request=False, headers=request.headers),
        request_id=req.id,
        message_metadata=ServerMessageMetadata(request_context=request),
        progress_token=progress_token_from_params(req.params),
        sink=cast("MemoryObjectSendStream[bytes]", exchange),  # it only calls ``send``
    )
    msg: JSONRPCResponse | JSONRPCError | None = None
    with anyio.CancelScope() as cancel:
        exchange.begin(receive, cancel)
        try:
            msg = await sdk._to_jsonrpc_response(  # pyright: ignore[reportPrivateUsage]
                req.id,
                serve_one(app, dctx, req.method, req.params, connection=connection, lifespan_state=lifespan_state),
            )
        finally:
            exchange.stop()
    if msg is None:
        return  # the client went away: nothing is owed (the SDK's task group ended the same way)
    await exchange.finish(msg, scope, receive)


async def _vouched(
    app: Server[Any], request: Request, body: bytes, lifespan_state: Any
) -> tuple[JSONRPCRequest | None, Any]:
    """The request and the classifier's route when this path serves it as the SDK would; else Nones."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(decoded, dict) or "id" not in decoded:
        return None, None
    try:
        req = JSONRPCRequest.model_validate(decoded)
    except ValidationError:
        return None, None
    if req.method == "subscriptions/listen" or find_duplicated_routing_header(request.headers.items()) is not None:
        return None, None
    verdict = classify_inbound_request(decoded, headers=dict(request.headers))
    if isinstance(verdict, InboundLadderRejection):
        return None, None
    mcp_param_rejection = sdk._mcp_param_rejection  # pyright: ignore[reportPrivateUsage]
    if await mcp_param_rejection(app, request, req, verdict, lifespan_state) is not None:
        return None, None
    return req, verdict


def _replaying(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read handed out once more, for the SDK's handler."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


class _Exchange:
    """One request's answer: JSON unless something is written before the response, then SSE.

    The handler's notifications arrive through ``send`` (the SDK's dispatch context calls its sink's
    ``send`` only, catching ``ClosedResourceError`` once the answer is over)."""

    def __init__(self, wire: Send) -> None:
        self._wire = wire
        self._streaming = False
        self._over = False
        self._lock = asyncio.Lock()  # a ping and a notification never interleave their writes
        self._watcher: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._pinger: asyncio.Task[None] | None = None

    def begin(self, receive: Receive, cancel: anyio.CancelScope) -> None:
        loop = asyncio.get_running_loop()
        self._watcher = loop.create_task(_cancel_on_disconnect(receive, cancel))
        self._timer = loop.call_later(sdk._SSE_PING_INTERVAL, self._start_pinging)  # pyright: ignore[reportPrivateUsage]

    def stop(self) -> None:
        self._over = True
        for task in (self._watcher, self._pinger):
            if task is not None:
                task.cancel()
        if self._timer is not None:
            self._timer.cancel()

    async def send(self, event: bytes) -> None:
        if self._over:
            raise anyio.ClosedResourceError
        await self._write(event)

    async def finish(self, msg: JSONRPCResponse | JSONRPCError, scope: Scope, receive: Receive) -> None:
        if not self._streaming:
            await sdk._write(msg, scope, receive, self._wire)  # pyright: ignore[reportPrivateUsage]
            return
        async with self._lock:
            await self._wire({"type": "http.response.body", "body": sdk._sse_event(msg), "more_body": False})  # pyright: ignore[reportPrivateUsage]

    async def _write(self, chunk: bytes) -> None:
        async with self._lock:
            if not self._streaming:
                self._streaming = True
                await self._wire(_START_SSE)
            await self._wire({"type": "http.response.body", "body": chunk, "more_body": True})

    def _start_pinging(self) -> None:
        if not self._over:
            self._pinger = asyncio.get_running_loop().create_task(self._ping())

    async def _ping(self) -> None:
        while not self._over:
            await self._write(_PING)  # a client gone meanwhile: uvicorn drops the write
            await asyncio.sleep(sdk._SSE_PING_INTERVAL)  # pyright: ignore[reportPrivateUsage]


async def _cancel_on_disconnect(receive: Callable[[], Awaitable[Message]], cancel: anyio.CancelScope) -> None:
    while (await receive()).get("type") != "http.disconnect":
        pass
    cancel.cancel()
