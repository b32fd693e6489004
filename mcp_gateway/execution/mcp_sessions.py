"""Upstream MCP servers: a pool of live SDK client sessions, and the executor that calls tools on them.

**One live session per connector** (per credential, strictly: the key is the connector and which
stored credential it runs with, so with a project-wide credential, or none, it is one per
connector). A session is opened on first use (a sync's ``tools/list`` or a call), kept, and
reused by every later call. Each lives in its own task of the pool's task group, because the SDK
client's context must be entered and left by one task; callers only send requests through it.

**Reconnection.** A session is retired, and the next use opens a new one, when its transport
ends (the stdio child died: its stdout reached EOF; an HTTP stream broke), when the server says
the session is unknown (it restarted), when a call times out (a hung server is not trusted to
recover), or when its settings or its credential changed. A call that finds its reused session
gone is retried once on a fresh one only when the request cannot have run: the server said it
did not know the session. A call lost mid-way (a read too) is not sent again here: the
connector's ``retries.reads`` decides that, one level up.

**Credentials, at the last meter.** HTTP transports (streamable HTTP, legacy SSE) get the
connector's ``auth:`` applied by the call's own ``LastMeterAuth`` on each outbound request: the
pooled ``httpx2`` client's auth reads it from a context variable that the SDK carries from the
calling task to the request it sends (``mcp_transport.py``), so the secret is opened per request
and the call's redactor learns it. A stdio server cannot take a header: its credential goes into the child's
environment through ``env`` templates (``GITHUB_TOKEN: "{secret}"``), rendered from the opened
secret as the child is spawned. Each call re-opens the secret (so its redactor learns it) and
compares a keyed digest of the rendered environment with the running child's, respawning it when
the credential changed. The child inherits only the SDK's minimal environment (PATH, HOME, ...),
never the gateway's own (its master key stays home).

**Time.** A call is bounded by the connector's ``timeout``, opening the session included.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import secrets
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import anyio.abc
from pydantic import ValidationError

from ..auth import LastMeterAuth
from ..auth.custom import render_secret_template
from ..manifest import ConnectorConfig, McpSource, McpSpec
from ..primitives.sanitize import MAX_ERROR_CHARS
from ..primitives.secrets import SecretValue
from ..services.logs import known_secrets
from ..sources.mcp import tools_digest
from ..vocabulary.errors import CredentialError, GatewayError, ToolsChanged, UpstreamError
from ..vocabulary.model import Action, McpBinding
from .executor import Prepared
from .mcp_answers import validation_problem
from .mcp_transport import (
    CALL,
    CallState,
    ListingRefused,
    answer_broke_off,
    answer_too_large,
    connection_closed,
    open_failed,
    open_transport,
    refused,
    session_lost,
    session_unknown,
    step_refused,
    where,
)
from .response import Outcome, said
from .send import RedirectJudge

if TYPE_CHECKING:
    import mcp_types as types
    from mcp import Client

# The MCP SDK is imported where a session is opened or used, not here: every CLI command builds
# this executor, and importing the SDK costs about half a second that only MCP connectors need.

__all__ = ["McpExecutor"]

logger = logging.getLogger(__name__)

try:
    _VERSION = version("mcp-gateway")
except PackageNotFoundError:  # a source tree that was never installed
    _VERSION = "0"

MAX_PAGES = 100
"""A ``tools/list`` that keeps paginating past this is cut there (a server bug must not hang sync)."""
MAX_TOOLS = 10_000
CLOSE_GRACE = 10.0
"""How long shutdown waits for sessions to close (a stdio child gets stdin closed, then signals)."""


@dataclass(eq=False)
class _Session:
    key: tuple[str, str]
    settings: str
    """Digest of everything the session was opened with except the secret (source, auth kind)."""
    env: str | None
    """Keyed digest of a stdio child's rendered environment; None for HTTP."""
    background: CallState
    client: Client | None = None
    tools: list[types.Tool] = field(default_factory=list)
    retire: anyio.Event = field(default_factory=anyio.Event)
    closed: anyio.Event = field(default_factory=anyio.Event)
    tools_changed: bool = False
    """The server said its tools changed (``notifications/tools/list_changed``) since they were listed."""

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.retire.is_set()


class McpExecutor:
    """``mcp`` bindings: calls tools on upstream MCP servers through a pool of SDK client sessions.

    Use as an async context manager (it owns the sessions' tasks); leaving it closes every
    session and stops every stdio child.

    Args:
        base_dir: where a relative ``cwd`` of a stdio server resolves (the manifest's folder).
        errlog: where stdio servers' stderr goes as is; by default it is read line by line into the
            log, redacted (``execution/child_output.py``).
    """

    def __init__(self, *, base_dir: Path | None = None, errlog: Any = None) -> None:
        self._base_dir = base_dir
        self._errlog = errlog
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._locks: dict[tuple[str, str], anyio.Lock] = {}
        self._digest_key = secrets.token_bytes(32)
        self._tg: anyio.abc.TaskGroup | None = None
        self.listed: Callable[[str], str | None] | None = None
        """The digest of the tools listing a connector's catalog was built from (``tools_digest``), or
        None when unknown; a new session listing other tools raises ``ToolsChanged`` before any call."""

    async def __aenter__(self) -> Self:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._tg is not None
        tg, self._tg = self._tg, None
        try:
            with anyio.CancelScope(shield=True):  # bounded (CLOSE_GRACE): children must not be leaked
                await self.aclose()
        finally:
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                # The group must see a cancellation to account for it; it cancels the owners itself.
                await tg.__aexit__(exc_type, exc, tb)
            else:
                # Any other error of the body propagates as it is: handed to the group, it would come
                # out wrapped in an ExceptionGroup and change what every caller of the gateway catches.
                tg.cancel_scope.cancel()
                await tg.__aexit__(None, None, None)

    async def aclose(self, slug: str | None = None) -> None:
        """Close the sessions (of one connector, or all) and wait, a bounded while, until they are."""
        doomed = [s for s in self._sessions.values() if slug is None or s.key[0] == slug]
        for session in doomed:
            self._retire(session)
        with anyio.move_on_after(CLOSE_GRACE):
            for session in doomed:
                await session.closed.wait()

    # -- the Executor protocol ------------------------------------------------------------------

    def prepare(
        self, action: Action, args: Mapping[str, Any], connector: ConnectorConfig, base_url: str | None
    ) -> Prepared:
        binding = action.binding
        assert isinstance(binding, McpBinding), binding.kind
        _spec(connector)  # an operator's mistake shows before any approval is asked for
        return Prepared(action=action, connector=connector, payload={"tool": binding.tool, "arguments": dict(args)})

    async def run(
        self, prepared: Prepared, *, auth: LastMeterAuth, max_bytes: int, redirects: RedirectJudge | None = None
    ) -> Outcome:
        del redirects  # not HTTP: nothing redirects
        from mcp.shared.exceptions import MCPError

        cfg = prepared.connector
        tool, arguments = prepared.payload["tool"], prepared.payload["arguments"]
        upstream = where(cfg)
        state = CallState(auth)
        token = CALL.set(state)
        session: _Session | None = None
        write = prepared.action.risk != "read"
        sent = False
        try:
            with anyio.fail_after(cfg.timeout):
                for attempt in (1, 2):
                    sent = False  # a second attempt follows only a first that cannot have run, or a read
                    try:
                        session, fresh = await self._session(cfg, auth, state)
                    except UpstreamError as exc:
                        if exc.reason == "auth_failed" and exc.upstream_status in (401, 403):
                            # The gateway's usual answer: needs_auth with a connect link (401), or final (403).
                            return Outcome(http_status=exc.upstream_status, data=None, truncated=False, content_type="")
                        raise
                    assert session.client is not None
                    if session.tools_changed and not fresh:
                        # The server said its tools changed while this session lived: list them again,
                        # as a new session does, before calling one.
                        session.tools_changed = False
                        session.tools = await _list_all(session.client, session.key[0], upstream)
                        fresh = True
                    if fresh and self.listed is not None:
                        # A new session lists the tools anew: one the catalog was not built from (a
                        # respawned or reconnected server that changed them) is not called unreviewed.
                        known = self.listed(cfg.slug)
                        if known is not None and tools_digest(session.tools) != known:
                            raise ToolsChanged(cfg.slug)
                    state.status = None
                    sent = True
                    try:
                        result = await session.client.call_tool(tool, arguments)
                    except MCPError as exc:
                        if state.error is not None:
                            self._retire(session)
                            raise state.error from None
                        if state.rejected is not None:
                            self._retire(session)
                            return Outcome(http_status=state.rejected, data=None, truncated=False, content_type="")
                        if state.status is not None and (state.status == 429 or state.status >= 500):
                            # The server answered the call's POST over HTTP with a rate limit or a failure of
                            # its own: that status (and its Retry-After), as any HTTP upstream's, not the
                            # client's generic "Server returned an error response".
                            return Outcome(
                                http_status=state.status,
                                data=None,
                                truncated=False,
                                content_type="",
                                retry_after=state.retry_after,
                            )
                        if (limit := answer_too_large(exc)) is not None:
                            raise UpstreamError(
                                "upstream_error",
                                f"{upstream} ran {tool!r}, but its answer was too large for the gateway to read "
                                f"(over {_megabytes(limit)}); "
                                + (_MAY_HAVE_TAKEN_EFFECT if write else "")
                                + "ask for less (narrower arguments, fewer items), or ask the operator whether the "
                                "server can answer smaller",
                            ) from None
                        # A reused session the HTTP server answers 400/404 is one it no longer knows (it
                        # restarted); servers word that differently, and none of them ran the request.
                        unknown = session_unknown(exc) or (not fresh and state.status in (400, 404))
                        if not unknown and not connection_closed(exc) and not answer_broke_off(exc):
                            raise refused(upstream, tool, exc, write=write) from None
                        self._retire(session)
                        if attempt == 1 and not fresh and unknown:
                            # Only a request the server did not take is sent again here; a read lost
                            # mid-call is tried again only as the connector's ``retries.reads`` says.
                            continue
                        raise UpstreamError(
                            "upstream_unreachable",
                            f"the connection to {upstream} was lost during the call to {tool!r}; the gateway "
                            "reconnects on the next call. The call may or may not have taken effect: check before "
                            "repeating it",
                        ) from None
                    except (ValidationError, RuntimeError) as exc:
                        # A result the SDK could not accept (malformed, or against the tool's output schema).
                        message = said(_first_line(exc))
                        raise message.attach(
                            UpstreamError(
                                "upstream_error",
                                f"{upstream} answered the call to {tool!r} with an invalid result: "
                                f"{message.for_agent()}"
                                + (
                                    "; the call may have taken effect, so check before calling again rather than "
                                    "repeating it"
                                    if write
                                    else ""
                                ),
                            )
                        ) from None
                    return _outcome(result, upstream, tool, max_bytes, write=write)
        except TimeoutError:
            if session is not None:
                self._retire(session)  # a hung server is not trusted to recover on its own
            raise UpstreamError(
                "upstream_timeout",
                f"{upstream} did not answer the call to {tool!r} within {cfg.timeout:g} s; "
                + (_MAY_HAVE_RUN if sent and write else "")
                + "its session is closed and the next call starts a new one. Try again later, or ask the operator "
                "to raise the connector's timeout",
            ) from None
        finally:
            CALL.reset(token)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- listing (the sources.mcp.ToolLister protocol) --------------------------------------------

    async def list_tools(self, connector: ConnectorConfig, *, auth: LastMeterAuth) -> list[types.Tool]:
        from mcp.shared.exceptions import MCPError

        state = CallState(auth)
        token = CALL.set(state)
        try:
            with anyio.fail_after(connector.timeout):
                session, fresh = await self._session(connector, auth, state)
                if not fresh:
                    assert session.client is not None
                    try:
                        session.tools = await _list_all(session.client, session.key[0], where(connector))
                        session.tools_changed = False
                    except MCPError as exc:
                        self._retire(session)
                        if not session_lost(exc) and state.status not in (400, 404):
                            raise step_refused(where(connector), "tools/list", exc, state.status) from None
                        # Gone since the last use (a restarted server): list on a fresh session.
                        session, _ = await self._session(connector, auth, state)
            return list(session.tools)
        except TimeoutError:
            raise UpstreamError(
                "upstream_timeout",
                f"{where(connector)} did not list its tools within {connector.timeout:g} s; check that it starts "
                "and answers, or raise the connector's timeout",
            ) from None
        finally:
            CALL.reset(token)

    @property
    def open_sessions(self) -> int:
        """Upstream MCP sessions open now (stdio children and HTTP sessions), for the metrics."""
        return len(self._sessions)

    # -- the pool ---------------------------------------------------------------------------------

    async def _session(self, cfg: ConnectorConfig, auth: LastMeterAuth, state: CallState) -> tuple[_Session, bool]:
        """The live session for this connector and credential, opened if needed; True when new."""
        spec = _spec(cfg)
        settings = _settings_digest(cfg)
        env, env_digest = self._environment(spec, auth)
        credential = getattr(auth, "credential", None)
        key = (cfg.slug, f"{credential.key.principal}/{credential.key.name}" if credential is not None else "")
        for other in list(self._sessions.values()):
            if other.key[0] == cfg.slug and other.settings != settings:
                self._retire(other)  # the manifest changed this connector
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            session = self._sessions.get(key)
            if session is not None and session.alive and session.env == env_digest:
                return session, False
            if session is not None:
                self._retire(session)
            session = _Session(key=key, settings=settings, env=env_digest, background=CallState(auth))
            await self._open(session, cfg, spec, env, state)
            self._sessions[key] = session
            return session, True

    def _environment(self, spec: McpSpec, auth: LastMeterAuth) -> tuple[dict[str, str] | None, str | None]:
        if spec.command is None:
            return None, None
        secret: SecretValue | None = None
        if spec.uses_secret:
            secret = auth.open_secret()
            if secret is not None:
                known_secrets().add(secret)  # a child may print it: the log filter must know it
        env = {name: _render(value, secret) for name, value in spec.env.items()}
        del secret
        material = json.dumps(sorted(env.items())).encode()
        return env, hmac.new(self._digest_key, material, hashlib.sha256).hexdigest()

    def _retire(self, session: _Session) -> None:
        if self._sessions.get(session.key) is session:
            del self._sessions[session.key]
        session.retire.set()

    async def _open(
        self, session: _Session, cfg: ConnectorConfig, spec: McpSpec, env: dict[str, str] | None, state: CallState
    ) -> None:
        assert self._tg is not None, "McpExecutor is used outside its 'async with'"
        transport = open_transport(
            cfg,
            spec,
            env,
            background=session.background,
            on_eof=session.retire.set,
            base_dir=self._base_dir,
            errlog=self._errlog,
        )
        try:
            await self._tg.start(self._own, session, transport, cfg.timeout, where(cfg))
        except UpstreamError:
            raise
        except GatewayError:
            raise
        except Exception as exc:
            if session.background.error is not None:
                raise session.background.error from None
            if session.background.rejected is not None or state.rejected is not None:
                status = session.background.rejected or state.rejected
                raise UpstreamError(
                    "auth_failed",
                    f"{where(cfg)} rejected the connector's credential ({status}); ask the user to reconnect "
                    f"{cfg.slug} (connect), then try again",
                    upstream_status=status,
                ) from None
            raise open_failed(cfg, spec, exc, session.background.status) from None

    async def _own(
        self,
        session: _Session,
        transport: AbstractAsyncContextManager[Any],
        connect_within: float,
        upstream: str,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The session's task: open it, list its tools, then hold it until it is retired."""
        import mcp_types as types
        from mcp import Client
        from mcp.shared.exceptions import MCPError

        CALL.set(None)  # background traffic uses the session's own auth, not the opener's call
        started = False
        try:
            with anyio.CancelScope() as scope:
                scope.deadline = anyio.current_time() + connect_within

                async def on_message(message: Any) -> None:
                    if isinstance(message, types.ToolListChangedNotification):
                        session.tools_changed = True

                client = Client(
                    transport,
                    mode="legacy",
                    cache=None,  # a cached tools/list would hide a changed server from sync
                    client_info=types.Implementation(name="mcp-gateway", version=_VERSION),
                    message_handler=on_message,
                )
                async with client:
                    try:
                        session.tools = await _list_all(client, session.key[0], upstream)
                    except MCPError as exc:
                        raise ListingRefused(exc) from None
                    session.client = client
                    scope.deadline = math.inf
                    started = True
                    task_status.started()
                    await session.retire.wait()
            if not started:
                raise TimeoutError
        except Exception as exc:
            if not started:
                raise
            logger.debug("MCP session %s ended: %s", session.key[0], type(exc).__name__)
        finally:
            session.client = None
            session.retire.set()
            session.closed.set()
            if self._sessions.get(session.key) is session:
                del self._sessions[session.key]


async def _list_all(client: Client, slug: str, upstream: str) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        try:
            page = await client.list_tools(cursor=cursor)
        except ValidationError as exc:  # its tools are read one by one first (``mcp_answers``): the rest of it
            raise UpstreamError(
                "upstream_error",
                f"{upstream} answered tools/list with a result the MCP client could not read "
                f"({validation_problem(exc)}); ask the server's maintainers to fix it",
            ) from None
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor or cursor in seen or len(tools) >= MAX_TOOLS:
            break
        seen.add(cursor)
    else:
        logger.warning(
            "connector %s: its MCP server listed tools over more than %d pages; the tools after page %d "
            "(the first %d) are left out",
            slug,
            MAX_PAGES,
            MAX_PAGES,
            len(tools),
        )
    if len(tools) > MAX_TOOLS:
        logger.warning(
            "connector %s: its MCP server listed more than %d tools; the ones after the first %d are left out",
            slug,
            MAX_TOOLS,
            MAX_TOOLS,
        )
    return tools[:MAX_TOOLS]


# -- helpers -------------------------------------------------------------------------------------


def _spec(cfg: ConnectorConfig) -> McpSpec:
    if not isinstance(cfg.source, McpSource):
        raise UpstreamError("connector_error", f"connector {cfg.slug!r} is not an MCP source")
    return cfg.source.mcp


def _settings_digest(cfg: ConnectorConfig) -> str:
    shaping = {"source": _spec(cfg).model_dump(mode="json"), "auth": cfg.auth.model_dump(mode="json")}
    shaping["headers"] = cfg.headers
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()


def _render(template: str, secret: SecretValue | None) -> str:
    rendered = render_secret_template(template, secret, what="an mcp env template")
    if "\0" in rendered:
        raise CredentialError("the stored secret contains a NUL character, which an environment variable cannot hold")
    return rendered


def _outcome(result: types.CallToolResult, upstream: str, tool: str, max_bytes: int, *, write: bool) -> Outcome:
    from .mcp_result import says_nothing, shape_result, tool_error_text

    if result.is_error:
        text = tool_error_text(result)
        message = said(text, max_chars=MAX_ERROR_CHARS)
        # A tool that failed part way may have written before it did: the same hedge as a write's
        # JSON-RPC error or timeout.
        raise message.attach(
            UpstreamError(
                "upstream_error",
                f"the tool {tool!r} of {upstream} reported an error"
                + (
                    " without saying what went wrong (its server gave only a generic message)"
                    if says_nothing(text)
                    else "; its message says what went wrong"
                )
                + ("; the call may have taken effect, so check before calling again" if write else ""),
                upstream_message=message.for_agent() or None,
            )
        )
    data, truncated = shape_result(result, max_bytes)
    return Outcome(http_status=None, data=data, truncated=truncated, content_type="application/json")


_MAY_HAVE_RUN = "the call may have reached it and taken effect, so check before calling again; "
_MAY_HAVE_TAKEN_EFFECT = "the call may have taken effect, so check before calling again; "


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):g} MB"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
