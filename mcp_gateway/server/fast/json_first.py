"""``/mcp``'s fast path: the SDK's streamable-HTTP session manager, answering a quick request with JSON.

The SDK answers every request POST of a 2025 session (``Mcp-Session-Id``) with an SSE stream: an
``EventSourceResponse`` whose task group runs five tasks (the stream, a keep-alive ping, a shutdown
listener, a disconnect listener, the writer feeding it), each started and cancelled per request,
for a stream that in the common case carries one event, the response. The streamable-HTTP
specification lets the server answer a request POST with either ``text/event-stream`` or
``application/json``, and every conforming client accepts both.

``JsonFirstTransport`` decides once it knows: the request goes to the session exactly as before;
if the first message the session writes for it is its response, that response is the HTTP
answer, as ``application/json``. If it is anything else (a progress notification, a log message,
an elicitation or other request to the client), or nothing comes within ``SSE_COMMIT_AFTER``
seconds (a call waiting for a human), the answer becomes the SDK's own SSE stream, starting with
that message: what a client sees then is what it saw before. Notifications and responses get the
SDK's 202, here, so that one whose session ends while it is read is dropped rather than answered
twice. ``initialize``, a session with an event store or in JSON-response mode, and anything the
transport would refuse take the SDK's path unchanged. 2026-07-28 requests (no session; the SDK already answers those
with JSON when it can) go to ``single_exchange``, which runs their handler in the request's own task.

Semantics kept: the session id and protocol-version checks, the credential a session is bound to
(the manager's), ``notifications/cancelled`` (the session answers the cancelled request with its
error, which becomes the JSON answer), a DELETE while a request waits (its stream closes: an empty
SSE stream, as before), elicitation and progress (SSE, as before). The one difference: while no
byte has been written, a client that goes away is noticed when the response is ready (at most
``SSE_COMMIT_AFTER`` seconds) rather than at once; the tool ran on either way.

It overrides private methods of the SDK's transport and session manager (mcp 2.3's
``_handle_post_request``, ``_handle_request``, ``_admit_session`` and the state they read), so it
is used only when ``server.fast.ENABLED``: ``server.mcp_endpoint`` builds the SDK's own manager
otherwise, through its public API.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from functools import partial
from http import HTTPStatus
from typing import Any, Final
from uuid import uuid4

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http import (
    MCP_SESSION_ID_HEADER,
    REQUEST_STREAM_BUFFER_SIZE,
    EventMessage,
    StreamableHTTPServerTransport,
    check_accept_headers,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.message import SessionMessage
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from sse_starlette import EventSourceResponse
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope, Send

from ..request_ids import invalid_id_error

__all__ = ["SSE_COMMIT_AFTER", "JsonFirstTransport", "LeanSessionManager", "lean_manager"]

logger = logging.getLogger(__name__)
_VERSION_HEADER: Final = MCP_PROTOCOL_VERSION_HEADER.lower().encode("ascii")

SSE_COMMIT_AFTER: Final = 15.0
"""Seconds a request may run without writing anything before its answer becomes an SSE stream (whose
keep-alive pings then hold the connection open behind a proxy's idle-read timeout): the SDK's own
choice for the 2026-07-28 revision (``_SSE_PING_INTERVAL``)."""


class JsonFirstTransport(StreamableHTTPServerTransport):
    """The SDK's transport of one session, answering a request whose first message is its response with JSON."""

    sse_commit_after: float = SSE_COMMIT_AFTER

    async def _handle_post_request(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        writer = self._read_stream_writer
        if writer is None or self.is_json_response_enabled or self._event_store is not None:
            await super()._handle_post_request(scope, request, receive, send)
            return
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse) or not self._check_content_type(request):
            await super()._handle_post_request(scope, request, receive, send)  # its 406 / 415
            return
        try:
            body = await request.body()  # kept by ``request``: the SDK's path reads the same bytes
        except ClientDisconnect:
            # A client gone before its body arrived (cut off by the request timeout, or a dropped
            # connection): the peer's doing, nothing to answer, and no traceback for the operator.
            logger.debug("an MCP client went away before its request body arrived")
            return
        try:
            message = jsonrpc_message_adapter.validate_python(pydantic_core.from_json(body), by_name=False)
        except (ValueError, ValidationError):
            message = None
        if isinstance(message, JSONRPCNotification) and (refused := invalid_id_error(body)) is not None:
            # A request whose id is no string and no integer, read as a notification: never answered
            # nor run, where the client waits for its answer.
            if await self._validate_request_headers(request, send):
                error = refused["error"]
                response = self._create_error_response(error["message"], HTTPStatus.BAD_REQUEST, error["code"])
                await response(scope, receive, send)
            return
        if isinstance(message, JSONRPCNotification | JSONRPCResponse | JSONRPCError):
            await self._accept(scope, request, receive, send, message)
            return
        if not isinstance(message, JSONRPCRequest) or message.method == "initialize":
            await super()._handle_post_request(scope, request, receive, send)  # its 400s, initialize
            return
        try:
            if not await self._validate_request_headers(request, send):
                return
            await self._answer(scope, request, receive, send, message)
        except Exception as err:
            # As the SDK's transport does: a 500, and the session's reader learns of the error. Every
            # path of ``_answer`` that can fail after its answer started handles that failure itself.
            logger.exception("Error handling POST request")
            response = self._create_error_response(
                "Error handling POST request", HTTPStatus.INTERNAL_SERVER_ERROR, INTERNAL_ERROR
            )
            await response(scope, receive, send)
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await writer.send(Exception(err))

    async def _accept(
        self,
        scope: Scope,
        request: Request,
        receive: Receive,
        send: Send,
        message: JSONRPCNotification | JSONRPCResponse | JSONRPCError,
    ) -> None:
        """A notification or a response: 202, then it goes to the session, as on the SDK's path. The
        session may have ended meanwhile (a DELETE or its idle timeout while the body was read, or
        while the 202 was written): the message then has nowhere to go. The SDK's path fails there
        and answers a second time, a 500 after the 202 (the server logs a ClosedResourceError and
        "Unexpected ASGI message 'http.response.start' sent, after response already completed")."""
        if not await self._validate_request_headers(request, send):
            return
        await self._create_json_response(None, HTTPStatus.ACCEPTED)(scope, receive, send)
        writer = self._read_stream_writer
        try:
            if writer is None:
                raise anyio.ClosedResourceError
            await writer.send(SessionMessage(message, metadata=self._message_metadata(request)))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("session %s ended before a %s reached it", self.mcp_session_id, type(message).__name__)

    async def _answer(
        self, scope: Scope, request: Request, receive: Receive, send: Send, message: JSONRPCRequest
    ) -> None:
        writer = self._read_stream_writer
        assert writer is not None
        request_id = str(message.id)
        version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
        sender, reader = anyio.create_memory_object_stream[EventMessage](REQUEST_STREAM_BUFFER_SIZE)
        self._request_streams[request_id] = sender, reader
        first: EventMessage | None = None
        try:
            try:
                await writer.send(self._create_session_message(message, request, request_id, version))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                # The session ended before the request reached it (a DELETE or its idle timeout while
                # the body was read): nothing would ever answer on the stream, so the answer is the
                # SDK's for a request to a terminated session.
                await self._clean_up_memory_streams(request_id)
                gone = self._create_error_response("Not Found: Session has been terminated", HTTPStatus.NOT_FOUND)
                await gone(scope, receive, send)
                return
            with anyio.move_on_after(self.sse_commit_after):
                first = await reader.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            pass  # the session ended (DELETE, idle timeout) with the request in flight: an empty stream
        except BaseException:
            await self._clean_up_memory_streams(request_id)
            raise
        if first is not None and isinstance(first.message, JSONRPCResponse | JSONRPCError):
            await self._clean_up_memory_streams(request_id)
            await self._create_json_response(first.message)(scope, receive, send)
            return
        await self._stream(scope, receive, send, request_id, reader, first)

    async def _stream(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        request_id: str,
        reader: MemoryObjectReceiveStream[EventMessage],
        first: EventMessage | None,
    ) -> None:
        """The SDK's SSE answer from here on, starting with ``first`` (what the session already wrote)."""
        sse_writer, sse_reader = anyio.create_memory_object_stream[dict[str, Any]](0)
        self._sse_stream_writers[request_id] = sse_writer
        headers = {
            "Cache-Control": "no-cache, no-transform",
            "Connection": "keep-alive",
            "Content-Type": "text/event-stream",
            **({MCP_SESSION_ID_HEADER: self.mcp_session_id} if self.mcp_session_id else {}),
        }
        lead = self._create_event_data(first) if first is not None else None
        response = EventSourceResponse(
            content=sse_reader,
            # The SDK's writer sends its "priming" event before forwarding the request's messages:
            # here that is the message already taken off the request's stream.
            data_sender_callable=partial(self._run_sse_writer, request_id, sse_writer, reader, lead),
            headers=headers,
        )
        try:
            await response(scope, receive, send)
        except Exception:
            # As the SDK's SSE path: its status line is out, so a failure is logged, not answered again.
            logger.exception("SSE response error")
            await sse_writer.aclose()
            await self._clean_up_memory_streams(request_id)
        finally:
            await sse_reader.aclose()


class LeanSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, its stateful sessions served by ``JsonFirstTransport`` and its
    2026-07-28 requests by ``fast.single_exchange.serve_single_exchange``."""

    async def _handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The SDK's own era routing (mcp 2.3): a protocol-version header naming no handshake
        # version is a single-exchange request; its checks run there, as in the SDK's handler.
        pv = next((v for k, v in scope["headers"] if k == _VERSION_HEADER), None)
        if pv is not None and self._task_group is not None and pv.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS:
            # Imported here: it imports the SDK's private module, which only the tested release is known to have.
            from .single_exchange import serve_single_exchange

            await serve_single_exchange(
                self.app, self.security_settings, self.json_response, self._lifespan_state, scope, receive, send
            )
            return
        await super()._handle_request(scope, receive, send)

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        # The SDK's own admission (mcp 2.3 ``_admit_session``) with the transport class swapped.
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            return None
        http_transport = JsonFirstTransport(
            mcp_session_id=uuid4().hex,
            is_json_response_enabled=self.json_response,
            event_store=self.event_store,
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
        )
        session_id = http_transport.mcp_session_id
        assert session_id is not None
        if requestor is not None:
            self._session_owners[session_id] = requestor
        self._server_instances[session_id] = http_transport
        logger.info("Created new transport with session ID: %s", session_id)
        return http_transport


def lean_manager(
    server: MCPServer,
    *,
    security: TransportSecuritySettings | None,
    max_sessions: int | None,
    session_idle_timeout: float | None,
) -> LeanSessionManager:
    """``LeanSessionManager`` for ``server``, given what the SDK's own builder hands its manager (the
    low-level server, private ``_lowlevel_server``)."""
    return LeanSessionManager(
        app=server._lowlevel_server,  # pyright: ignore[reportPrivateUsage]
        security_settings=security,
        max_sessions=max_sessions,
        session_idle_timeout=session_idle_timeout,
    )
