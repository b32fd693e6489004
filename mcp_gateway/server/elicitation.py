"""MCP URL-mode elicitation: a human link offered to the client as well as to the agent.

When a meta-tool result carries a link a human must open (``connect_url``, ``secret_url``,
``approval_url``, see ``links.human_link``) and the client declared URL elicitation support:

- **2025-11-25** (a session with a back-channel): the server sends ``elicitation/create`` in URL
  mode with a fresh elicitation id, returns the result as before (the agent still gets the link),
  and a watcher bounded by the link's expiry sends ``notifications/elicitation/complete`` for that
  id once the human is done (link consumed, approval decided).
- **2026-07-28** (stateless): the tool answers an ``InputRequiredResult`` that embeds the URL
  elicitation, with a ``requestState`` the SDK's ``RequestStateBoundary`` seals (AES-256-GCM,
  bound to the method, tool, arguments, principal and the server name as audience, with a TTL).
  Our plaintext adds a single-use nonce, claimed in the shared store, so a replayed state is
  refused by every instance sharing the database. On the client's retry the final result is
  produced when the human is done (the approved call runs once, ``connect`` answers connected),
  else the link result as before.

Clients that declare no URL elicitation support get exactly the plain link results. No
credential ever goes into an elicitation message or a ``requestState``: only the link, which the
agent sees anyway, and its non-secret identifiers.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import anyio
import anyio.abc
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    ElicitRequest,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)
from mcp_types.version import is_version_at_least

from ..core import Gateway
from ..primitives.escapes import escaped
from ..services.identity import Principal
from ..services.links import HumanLink, human_link
from ..store.contract import EphemeralStore
from ..vocabulary.clock import Clock
from .session_keys import session_key

__all__ = ["HumanElicitation", "Resumed", "derive_request_state_key", "request_state_security"]

logger = logging.getLogger(__name__)

INPUT_REQUIRED_VERSION = "2026-07-28"
INPUT_KEY = "human"
"""The key of the one URL elicitation an ``InputRequiredResult`` carries."""
STATE_TTL_SECONDS = 30 * 60.0
"""As long as a link lives (links.DEFAULT_TTL): a retry after that finds the link expired anyway."""
WATCH_BOUND = timedelta(minutes=30)
POLL_SECONDS = 0.5
"""How often a watcher looks at the store for a link consumed by another process or request."""
_KDF_INFO = b"mcp-gateway/request-state/v1:"
_NONCE_BYTES = 16
NONCE_KIND = "request_state_nonce"
"""The ``Store`` ephemeral kind of claimed nonces."""
_NONCE_TTL = timedelta(seconds=STATE_TTL_SECONDS + 60)


def derive_request_state_key(master_key: bytes, project: str) -> bytes:
    """The request-state key: derived from the master key under a label of its own, so it is stable
    across HTTP requests and restarts (a stateless retry may land on any of them) and never equals
    the key that seals credentials."""
    return HKDF(algorithm=SHA256(), length=32, salt=None, info=_KDF_INFO + project.encode()).derive(bytes(master_key))


def principal_key(principal: Principal) -> str:
    return json.dumps([principal.user, principal.agent], separators=(",", ":"))


def request_state_security(
    key: bytes | None, *, audience: str, principal_of: Callable[[ServerRequestContext[Any, Any]], Principal]
) -> RequestStateSecurity:
    """The policy the SDK seals ``requestState`` with: our key (else a process-local one), our
    principal (the bearer token's user and agent, not an OAuth identity the SDK would look for)."""

    def bind(ctx: ServerRequestContext[Any, Any]) -> str:
        return principal_key(principal_of(ctx))

    return RequestStateSecurity(
        keys=[key if key is not None else secrets.token_bytes(32)],
        ttl=STATE_TTL_SECONDS,
        bind_principal=bind,
        audience=audience,
    )


@dataclass(frozen=True)
class _State:
    """The plaintext of a ``requestState``. Only identifiers and the link the agent already has."""

    nonce: str
    tool: str
    principal: str
    kind: str
    link_id: str
    approval_id: str | None
    payload: dict[str, Any]
    """The link result as first returned: answered again when the human is not done."""


@dataclass(frozen=True)
class Resumed:
    """A verified retry: whether the human is done, and the link result to answer if not."""

    done: bool
    approval_id: str | None
    payload: dict[str, Any]


class _Nonces:
    """Single use of a ``requestState``: each nonce is accepted once while its state could still
    verify. Claimed in the store (an atomic insert-if-absent), so a retry replayed to another
    instance behind the load balancer is refused there too."""

    def __init__(self, store: EphemeralStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    async def claim(self, nonce: str) -> bool:
        now = self._clock.now()
        return await self._store.put_ephemeral(NONCE_KIND, nonce, b"", now + _NONCE_TTL, now)


def _message(link: HumanLink, payload: Mapping[str, Any]) -> str:
    """What the human reads in their client: what the page is for, in their terms. What the agent wrote
    (arguments in the summary, a secret's name) shows its invisible and bidi characters as escapes, as
    the page does: a right-to-left override must not make "refund $100" out of other text."""
    connector = escaped(str(payload.get("connector") or ""))
    if link.kind == "approval":
        summary = escaped(str(payload.get("summary") or "an action"))
        return f"Your agent asks to run {summary}. Open this page to approve or deny it."
    if link.kind == "secret":
        name = escaped(str(payload.get("name") or "default"))
        return (
            f"Your agent needs the secret “{name}” for {connector or 'a connector'}. Paste it on this page; "
            "the agent never sees it."
        )
    return (
        f"Your agent needs access to {connector or 'a connector'}. Open this page to connect your account; "
        "the agent never sees your credentials."
    )


class HumanElicitation:
    """Offers human links as URL elicitations and resumes 2026-07-28 retries. One per MCP server."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._nonces = _Nonces(gateway.sessions, gateway.clock)
        self._watchers: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def lifespan(self, _server: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        """The server's lifespan: the task group completion watchers run in, for the process."""
        async with anyio.create_task_group() as tg:
            self._watchers = tg
            try:
                yield {}
            finally:
                self._watchers = None
                tg.cancel_scope.cancel()

    @staticmethod
    def supported(ctx: Context) -> bool:
        caps = ctx.client_capabilities
        return caps is not None and caps.elicitation is not None and caps.elicitation.url is not None

    @staticmethod
    def stateless(ctx: Context) -> bool:
        version = ctx.protocol_version
        return version is not None and is_version_at_least(version, INPUT_REQUIRED_VERSION)

    # -- 2026-07-28: the retry ---------------------------------------------------------------------

    async def resume(self, ctx: Context, principal: Principal, tool: str) -> Resumed | None:
        """None on a first round; else the verified state (the SDK has checked seal, expiry,
        request binding, audience and principal before this runs).

        Raises:
            MCPError: the state was already used, or is not one this tool minted for this caller.
        """
        wire = ctx.request_state
        if wire is None:
            return None
        try:
            state = _State(**json.loads(wire))
        except (ValueError, TypeError):
            state = None
        if state is None or state.tool != tool or state.principal != principal_key(principal):
            raise _refused()
        if not await self._nonces.claim(state.nonce):
            raise _refused()
        accepted = False
        responses = ctx.input_responses or {}
        response = responses.get(INPUT_KEY)
        if isinstance(response, ElicitResult):
            accepted = response.action == "accept"
        done = accepted and await self._done(state.kind, state.link_id, state.approval_id)
        return Resumed(done=done, approval_id=state.approval_id, payload=state.payload)

    # -- the offer ---------------------------------------------------------------------------------

    async def offer(
        self, ctx: Context, principal: Principal, tool: str, payload: dict[str, Any]
    ) -> dict[str, Any] | InputRequiredResult:
        """The result to answer: ``payload`` itself, or an ``InputRequiredResult`` (2026-07-28).
        On 2025-11-25 the URL elicitation is sent here, and a watcher started for its completion."""
        link = human_link(payload)
        if link is None or not self.supported(ctx):
            return payload
        elicitation_id = secrets.token_urlsafe(16)
        params = ElicitRequestURLParams(message=_message(link, payload), url=link.url, elicitation_id=elicitation_id)
        approval_id = payload.get("approval_id") if link.kind == "approval" else None
        if self.stateless(ctx):
            state = _State(
                nonce=secrets.token_urlsafe(_NONCE_BYTES),
                tool=tool,
                principal=principal_key(principal),
                kind=link.kind,
                link_id=link.link_id,
                approval_id=approval_id if isinstance(approval_id, str) else None,
                payload=payload,
            )
            return InputRequiredResult(
                input_requests={INPUT_KEY: ElicitRequest(params=params)},
                request_state=json.dumps(asdict(state), separators=(",", ":")),
            )
        try:
            answer = await ctx.elicit_url(params.message, params.url, elicitation_id)
        except Exception as exc:  # no back-channel, client error: the agent still has the link
            logger.info("URL elicitation not delivered: %s", type(exc).__name__)
            return payload
        if answer.action == "accept" and self._watchers is not None:
            session = ctx.session
            expires = link.expires_at
            keys = (session_key(ctx.request_context), f"agent:{principal.label}")
            bounds = self._gateway.bounds
            # Bounded per session and per agent: past the cap the link still works, only
            # the completion notification is not sent.
            if bounds.watchers_per_session.take(keys[0]):
                if bounds.watchers_per_agent.take(keys[1]):
                    self._watchers.start_soon(
                        self._bounded_watch,
                        keys,
                        session,
                        elicitation_id,
                        link.kind,
                        link.link_id,
                        approval_id if isinstance(approval_id, str) else None,
                        expires,
                    )
                else:
                    bounds.watchers_per_session.give(keys[0])
                    logger.info("too many elicitation watchers for %s: no completion notification", keys[1])
            else:
                logger.info("too many elicitation watchers for one session: no completion notification")
        return payload

    async def _bounded_watch(self, keys: tuple[str, str], *args: Any) -> None:
        try:
            await self._watch(*args)
        finally:
            self._gateway.bounds.watchers_per_session.give(keys[0])
            self._gateway.bounds.watchers_per_agent.give(keys[1])

    # -- completion ----------------------------------------------------------------------------------

    async def _done(self, kind: str, link_id: str, approval_id: str | None) -> bool:
        if kind == "approval" and approval_id is not None:
            record = await self._gateway.approvals.get(approval_id)
            return record is not None and record.status != "pending"
        record_link = await self._gateway.links.record(link_id)
        return record_link is not None and record_link.used_at is not None

    async def _watch(
        self,
        session: Any,
        elicitation_id: str,
        kind: str,
        link_id: str,
        approval_id: str | None,
        expires_at: datetime | None,
    ) -> None:
        """Send the completion notification once the human is done; give up at the link's expiry."""
        now = self._gateway.clock.now()
        bound = WATCH_BOUND if expires_at is None else min(WATCH_BOUND, expires_at - now)
        with anyio.move_on_after(max(0.0, bound.total_seconds())):
            while not await self._done(kind, link_id, approval_id):
                if kind == "approval" and approval_id is not None:
                    # Woken at once by a decision made in this process.
                    await self._gateway.approvals.wait(approval_id, 60)
                else:
                    await anyio.sleep(POLL_SECONDS)
            try:
                await session.send_elicit_complete(elicitation_id)
            except Exception as exc:  # the session closed meanwhile: nobody left to tell
                logger.info("elicitation completion not delivered: %s", type(exc).__name__)


def _refused() -> MCPError:
    return MCPError(
        code=INVALID_PARAMS,
        message="Invalid or expired requestState: it was already used or is not for this call. "
        "Call the tool again without requestState.",
        data={"reason": "invalid_request_state"},
    )
