"""The transport side of upstream MCP sessions: how each kind is opened, how a call's credential
reaches the requests the SDK sends for it, and how failures are told apart.

**Per-call credentials over HTTP.** A pooled session's ``httpx2`` client has one ``PerCallAuth``.
The calling task sets ``CALL`` to its ``CallState`` (holding that call's ``LastMeterAuth``); the
SDK carries the sender's context variables to the task that POSTs the message, so the auth step
of each request finds the call it belongs to and applies that call's credential at the last
moment (and its redactor learns the secret). Traffic outside any call (the handshake, the
server-event stream, the closing DELETE) uses the session's own ``background`` state. The auth
step also records what the upstream answered (401/403, the last status), because the SDK turns
HTTP failures into JSON-RPC errors that no longer say which.

**Failures.** A session the server no longer knows (it restarted: "Session terminated", "No valid
session ID", or a 400/404 to a reused session) is told apart from a connection that died (the
request may have run) and from a refusal of the request itself.
"""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import anyio
import httpx2

from ..manifest import ConnectorConfig, McpSource, McpSpec
from ..primitives.cookies import no_cookies
from ..primitives.sanitize import MAX_ERROR_CHARS
from ..vocabulary.errors import GatewayError, UpstreamError
from .child_output import child_stderr
from .connect_failures import chain
from .mcp_answers import NO_READABLE_TOOL, AnswerReader
from .response import parse_retry_after, said
from .tls_trust import trust_context

if TYPE_CHECKING:
    from mcp.shared.exceptions import MCPError

# The SDK is imported inside the functions that open a transport (see ``execution/mcp_sessions.py``).

__all__ = [
    "CALL",
    "CONNECTION_CLOSED",
    "MAX_SSE_EVENT_BYTES",
    "CallState",
    "ListingRefused",
    "PerCallAuth",
    "answer_broke_off",
    "answer_too_large",
    "connection_closed",
    "open_failed",
    "open_transport",
    "refused",
    "session_lost",
    "session_unknown",
    "step_refused",
    "unreadable_answer",
    "where",
]

logger = logging.getLogger(__name__)

SSE_READ_TIMEOUT = 300.0
"""How long a server-sent event stream may stay silent (long tool calls stream their answer)."""
MAX_SSE_EVENT_BYTES = 16 * 1024 * 1024
"""The largest event (one JSON-RPC message) read from a streamable-HTTP server. An answer up to this
is read, then capped like any other (``mcp_result.shape_result``); the SDK stops reading a larger one,
and the call says its answer was too large (``answer_too_large``). The SDK's own limit, 1 MiB, would
turn an ordinary large answer into an error of a tool that ran."""
# JSON-RPC error codes (mcp_types.jsonrpc), spelled here so checking them needs no SDK import.
CONNECTION_CLOSED = -32000
INVALID_REQUEST = -32600
PARSE_ERROR = -32700
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
# JSON-RPC errors that mean "this session is gone", and whether the request surely did not run.
# -32000 is both the SDK's "Connection closed" and the TypeScript servers' "no valid session ID".
_CLOSED_MESSAGE = "Connection closed"
"""The message of the SDK's ``CONNECTION_CLOSED`` error (``mcp.shared.jsonrpc_dispatcher``)."""
_SESSION_UNKNOWN = ("session terminated", "no valid session", "session not found", "unknown session")
# The errors the SDK's streamable-HTTP client makes up for a request whose answer stream broke
# (``mcp.client.streamable_http``: "SSE stream failed: …", "SSE stream ended without a response").
_STREAM_FAILED = ("SSE stream failed", "SSE stream ended without a response")
_UNEXPECTED_TYPE = "Unexpected content type"
"""How the SDK's streamable-HTTP client words an answer in a content type that is neither JSON nor SSE."""
_TOO_LARGE = re.compile(r"SSE stream failed: .*exceeded the (\d+) byte limit")


@dataclass
class CallState:
    """One call's (or one session's background traffic's) auth, and what the auth step saw."""

    auth: httpx2.Auth
    error: GatewayError | None = None
    """A credential failure inside the auth step; it aborts the transport, so it is kept here."""
    rejected: int | None = None
    """401 or 403 from the upstream, seen by the auth step."""
    status: int | None = None
    """The last HTTP status an HTTP transport got for this call (400/404 on a reused session: it is unknown)."""
    retry_after: float | None = None
    """That answer's ``Retry-After``, in seconds, when it had one."""


CALL: ContextVar[CallState | None] = ContextVar("mcp_gateway_mcp_call", default=None)


class PerCallAuth(httpx2.Auth):
    """The pooled HTTP client's auth: the current call's, or the session's own for background traffic
    (the handshake, the server-event stream, the closing DELETE). It delegates to the async flow, so
    every auth kind works as on a plain HTTP call (body signing, an OAuth2 refresh after a 401)."""

    def __init__(self, background: CallState) -> None:
        self._background = background

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        raise RuntimeError("the MCP transports' client is async; auth_flow is never the one called")

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        state = CALL.get() or self._background
        flow = state.auth.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                # The last answer counts: an OAuth2 refresh after a 401 that then succeeds is not a rejection.
                state.rejected = response.status_code if response.status_code in (401, 403) else None
                state.status = response.status_code
                state.retry_after = parse_retry_after(response.headers.get("retry-after"))
                try:
                    outgoing = await flow.asend(response)
                except StopAsyncIteration:
                    return
        except GatewayError as exc:
            state.error = exc
            raise
        finally:
            await flow.aclose()


def open_transport(
    cfg: ConnectorConfig,
    spec: McpSpec,
    env: dict[str, str] | None,
    *,
    background: CallState,
    on_eof: Callable[[], None],
    base_dir: Path | None = None,
    errlog: Any = None,
) -> AbstractAsyncContextManager[Any]:
    """The SDK transport for ``spec``, not yet entered: a stdio child (``env`` is its rendered
    environment), or a streamable-HTTP / SSE client whose auth is the calling request's
    ``LastMeterAuth`` (``background`` for traffic outside any call). ``on_eof`` is called when
    its read side ends (the child died, the stream broke)."""
    from mcp.client.sse import sse_client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    if spec.command is not None:
        cwd = Path(spec.cwd).expanduser() if spec.cwd else None
        if cwd is not None and not cwd.is_absolute() and base_dir is not None:
            cwd = base_dir / cwd
        params = StdioServerParameters(command=spec.command[0], args=spec.command[1:], env=env, cwd=cwd)
        if errlog is not None:
            return _watched(stdio_client(params, errlog=errlog), on_eof, cfg.slug)
        return _watched(_logged_stdio(params, cfg.slug), on_eof, cfg.slug)
    assert spec.url is not None
    headers = {**cfg.headers, **spec.headers}
    auth = PerCallAuth(background)
    verify = _trust(cfg, base_dir)
    if spec.transport == "sse":

        def factory(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            # trust_env=False: a proxy from the environment would see every credential we send.
            return httpx2.AsyncClient(
                headers=headers, timeout=timeout, auth=auth, verify=verify, trust_env=False, cookies=no_cookies()
            )

        inner = sse_client(
            spec.url,
            headers=headers,
            timeout=cfg.timeout,
            sse_read_timeout=SSE_READ_TIMEOUT,
            httpx_client_factory=factory,
            auth=auth,
        )
        return _watched(inner, on_eof, cfg.slug)
    http = httpx2.AsyncClient(
        headers=headers,
        auth=auth,
        timeout=httpx2.Timeout(cfg.timeout, read=SSE_READ_TIMEOUT),
        verify=verify,
        trust_env=False,
        follow_redirects=False,
        cookies=no_cookies(),  # the session is shared by every user of the credential
    )
    return _watched(_streamable(spec.url, http), on_eof, cfg.slug)


def _trust(cfg: ConnectorConfig, base_dir: Path | None) -> ssl.SSLContext | bool:
    """The server certificates ``cfg``'s ``mcp.url`` is trusted by: its ``tls.ca_file``'s CAs (a
    private CA), else the system's store (``True``, httpx2's default).

    Raises:
        UpstreamError: ``connector_error`` when the file cannot be used (the operator's to fix).
    """
    if not cfg.ca_file:
        return True
    path = Path(cfg.ca_file).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        return trust_context(str(path))
    except OSError as exc:  # SSLError is an OSError: a file that is not PEM
        why = getattr(exc, "reason", None) or exc.strerror or "unreadable"
        raise UpstreamError(
            "connector_error",
            f"the connector's tls.ca_file {cfg.ca_file!r} cannot be used ({why}); the operator must point it at a "
            "readable PEM file of CA certificates",
        ) from None


@asynccontextmanager
async def _logged_stdio(params: Any, slug: str) -> AsyncIterator[Any]:
    """A stdio child whose stderr is read into the log, redacted (``child_stderr``), never inherited."""
    from mcp.client.stdio import stdio_client

    async with child_stderr(slug) as errlog:
        async with stdio_client(params, errlog=errlog) as streams:
            errlog.close()  # the child has its copy; ours would keep the pipe open after the child exits
            yield streams


@asynccontextmanager
async def _streamable(url: str, http: httpx2.AsyncClient) -> AsyncIterator[Any]:
    from mcp.client.streamable_http import streamable_http_client

    async with http, streamable_http_client(url, http_client=http, max_sse_event_size=MAX_SSE_EVENT_BYTES) as streams:
        yield streams


@asynccontextmanager
async def _watched(
    inner: AbstractAsyncContextManager[Any], on_eof: Callable[[], None], slug: str
) -> AsyncIterator[Any]:
    """The transport with its read side watched: its end (a dead child, a broken stream) retires the
    session, and what the server answers is read by an ``AnswerReader`` before the SDK reads it."""
    answers = AnswerReader(slug)
    async with inner as (read, write):
        yield _EofWatch(read, on_eof, answers), _SentWatch(write, answers)


class _EofWatch:
    """A ``ReadStream`` that reports when the stream it wraps ends, and passes what it reads through
    the session's ``AnswerReader``."""

    def __init__(self, inner: Any, on_eof: Callable[[], None], answers: AnswerReader) -> None:
        self._inner = inner
        self._on_eof = on_eof
        self._answers = answers

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_eof()
            raise
        return self._answers.received(item)

    def __aiter__(self) -> _EofWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _SentWatch:
    """A ``WriteStream`` that shows the session's ``AnswerReader`` each message before it is sent."""

    def __init__(self, inner: Any, answers: AnswerReader) -> None:
        self._inner = inner
        self._answers = answers

    async def send(self, item: Any, /) -> None:
        self._answers.sent(item)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def where(cfg: ConnectorConfig) -> str:
    """The upstream named for the agent: the program of a stdio server, the host of a remote one."""
    assert isinstance(cfg.source, McpSource), cfg.slug
    spec = cfg.source.mcp
    if spec.command is not None:
        return f"{cfg.slug}'s MCP server ({Path(spec.command[0]).name})"
    url = httpx2.URL(spec.url or "")
    host = f"{url.host}:{url.port}" if url.port is not None else url.host
    return f"{cfg.slug}'s MCP server at {host}"


def session_lost(exc: MCPError) -> bool:
    return connection_closed(exc) or session_unknown(exc)


def connection_closed(exc: MCPError) -> bool:
    """The SDK's own word that the connection ended, not a server's error answer: servers use -32000, the
    first code of JSON-RPC's server-error range, for errors of their own ("rate limit exceeded")."""
    return exc.error.code == CONNECTION_CLOSED and exc.error.message == _CLOSED_MESSAGE


def answer_too_large(exc: MCPError) -> int | None:
    """The SDK's event size limit when it stopped reading an answer larger than it (the server ran the
    request and was sending its answer); None for any other error."""
    if exc.error.code != CONNECTION_CLOSED:
        return None
    found = _TOO_LARGE.match(exc.error.message)
    return int(found[1]) if found else None


def answer_broke_off(exc: MCPError) -> bool:
    """The SDK's word that the stream carrying a request's answer failed or ended before the answer came:
    the server took the request, so it may have run."""
    return exc.error.code == CONNECTION_CLOSED and exc.error.message.startswith(_STREAM_FAILED)


def session_unknown(exc: MCPError) -> bool:
    """The server rejected the session itself, so the request cannot have run."""
    message = exc.error.message.lower()
    return exc.error.code in (CONNECTION_CLOSED, INVALID_REQUEST) and any(m in message for m in _SESSION_UNKNOWN)


def _words_of(exc: MCPError) -> str:
    """What a JSON-RPC error says, for ``said``. A parse error's text is the client's, quoting the message
    it could not read in cut pieces (pydantic's ``input_value``): a piece of an echoed secret is no form
    the redactor knows, so it is not passed on."""
    if exc.error.code == PARSE_ERROR:
        return "a message the MCP client could not parse"
    return exc.error.message


def refused(where: str, tool: str, exc: MCPError, *, write: bool = False) -> UpstreamError:
    """A call the server answered with a JSON-RPC error, or with a message the client could not read.
    Only an unknown tool or arguments it rejects say for sure that nothing ran: any other error of a
    ``write`` (a tool that is not read-only) came after the server took the request, so it may have
    taken effect, and the agent is told not to repeat it blindly."""
    message = said(_words_of(exc), max_chars=MAX_ERROR_CHARS)
    not_run = exc.error.code in (METHOD_NOT_FOUND, INVALID_PARAMS)
    hedge = "; it may have taken effect, so check before calling again rather than repeating it" if write else ""
    if unreadable_answer(exc):
        text = f"{where} answered the call to {tool!r} with a message the MCP client could not read{hedge}"
    elif not_run or not write:
        hint = " (describe shows the arguments it takes)" if exc.error.code == INVALID_PARAMS else ""
        text = f"{where} refused the call to {tool!r} (JSON-RPC error {exc.error.code}){hint}"
    else:
        text = f"{where} answered the call to {tool!r} with an error (JSON-RPC error {exc.error.code}){hedge}"
    return message.attach(UpstreamError("upstream_error", text, upstream_message=message.for_agent() or None))


def unreadable_answer(exc: MCPError) -> bool:
    """The SDK's own error for an answer that is no MCP message (not JSON-RPC, not JSON, another content
    type): the server took the request and answered, so it is no refusal."""
    return exc.error.code == PARSE_ERROR or (
        exc.error.code == INVALID_REQUEST and exc.error.message.startswith(_UNEXPECTED_TYPE)
    )


class ListingRefused(Exception):
    """The server opened the session, then refused its first ``tools/list`` (told apart from a refused handshake)."""

    def __init__(self, refusal: MCPError) -> None:
        super().__init__(refusal.error.code)  # the code only: the upstream's text is quoted once screened
        self.refusal = refusal


def step_refused(where: str, step: str, exc: MCPError, status: int | None = None) -> UpstreamError:
    """The server answered ``step`` (the handshake, ``tools/list``) with a JSON-RPC error; what it
    said is screened, and withheld from the message when it reads as instructions. ``status``: the
    HTTP status that answer came with, when it was an error status (the SDK's error then says only
    "Server returned an error response")."""
    if status is not None and status >= 400:
        return UpstreamError(
            "upstream_error",
            f"{where} answered {step} with HTTP {status}"
            + (
                " (it is limiting how often it is called); try again later"
                if status == 429
                else " (a failure on its side); try again later, and check the server if it persists"
                if status >= 500
                else "; check the connector's mcp.url and transport"
            ),
            upstream_status=status,
        )
    if unreadable_answer(exc):
        return UpstreamError(
            "upstream_error",
            f"{where} listed tools, but none of them could be read; the gateway's log names each one and what is "
            "wrong with it: ask the server's maintainers to fix them"
            if exc.error.code == PARSE_ERROR and exc.error.message == NO_READABLE_TOOL
            else f"{where} answered {step} with a message the MCP client could not parse; check that it speaks MCP, "
            "and ask its maintainers if it persists",
        )
    message = said(_words_of(exc))
    return message.attach(
        UpstreamError(
            "upstream_error",
            f"{where} refused {step} (JSON-RPC error {exc.error.code}): {message.for_agent() or 'no message'}",
        )
    )


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def open_failed(cfg: ConnectorConfig, spec: McpSpec, exc: BaseException, status: int | None = None) -> UpstreamError:
    """Why a session could not be opened, for the agent and the connector's status. ``status``: the
    last HTTP status the session's requests got, if any."""
    where_ = where(cfg)
    leaf = _leaf(exc)
    # The exception's own text is the upstream's: only its kind reaches the log, the text goes through ``said``.
    logger.debug("opening the MCP session of %s failed (%s)", cfg.slug, type(leaf).__name__)
    if isinstance(leaf, TimeoutError):
        return UpstreamError(
            "upstream_timeout",
            f"{where_} did not complete the MCP handshake within {cfg.timeout:g} s; check that it starts and "
            "answers, or raise the connector's timeout",
        )
    if spec.command is not None and isinstance(leaf, OSError):
        return UpstreamError(
            "upstream_unreachable",
            f"could not start {where_}: {leaf.strerror or type(leaf).__name__}; check the connector's mcp.command "
            "(the program must be installed and on PATH)",
        )
    if isinstance(leaf, httpx2.HTTPStatusError):
        return UpstreamError(
            "upstream_error",
            f"{where_} answered HTTP {leaf.response.status_code} when the session was opened; check the connector's "
            "mcp.url and transport",
            upstream_status=leaf.response.status_code,
        )
    untrusted = next((c for c in chain(leaf) if isinstance(c, ssl.SSLCertVerificationError)), None)
    if untrusted is not None:
        why = untrusted.verify_message or untrusted.reason or "certificate verify failed"
        return UpstreamError(
            "upstream_unreachable",
            f"the TLS certificate of {where_} is not trusted ({why}); if it uses a private CA, the operator sets "
            f"the connector's tls.ca_file to that CA's PEM file, else check the connector's mcp.url",
        )
    if isinstance(leaf, httpx2.TransportError | OSError):
        return UpstreamError(
            "upstream_unreachable",
            f"could not reach {where_} ({type(leaf).__name__}); check that the server is up and the connector's "
            "mcp.url is right, then try again",
        )
    from mcp.shared.exceptions import MCPError

    listing = isinstance(leaf, ListingRefused)
    if isinstance(leaf, ListingRefused):
        leaf = leaf.refusal
    if isinstance(leaf, MCPError):
        if connection_closed(leaf):
            return UpstreamError(
                "upstream_unreachable",
                f"{where_} closed the connection during the MCP handshake; check that the command runs and speaks "
                "MCP on stdio (its stderr is in the gateway's log)"
                if spec.command is not None
                else f"{where_} closed the connection during the MCP handshake; check the connector's mcp.url",
            )
        return step_refused(where_, "tools/list" if listing else "the MCP handshake", leaf, status)
    return UpstreamError(
        "upstream_error",
        f"could not open an MCP session with {where_} ({type(leaf).__name__}); the gateway's log has details",
    )
