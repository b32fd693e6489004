"""Capability links handed to humans: unguessable, single-use, expiring.

A link is ``<public_url>/<kind path>/<token>`` with 256 bits of randomness; only the token's
SHA-256 is stored, and a link is found by that hash, so a leaked database opens no page and no
comparison ever runs over a token itself. Opening a link (GET) never consumes it, so a chat
client's link preview cannot burn it; submitting the page's form (POST) consumes it atomically.

``human_link`` reads back, from any meta-tool result, the link it hands a human and what kind it
is: the seam for offering it another way than as text (MCP URL-mode elicitation).
"""

from __future__ import annotations

import hashlib
import inspect
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from ..store.contract import LinkKind, LinkRecord, LinkStore
from ..vocabulary.clock import Clock
from ..vocabulary.errors import StoreUnavailable

__all__ = ["HumanLink", "LinkService", "hash_link_token", "human_link"]

_PATHS: dict[LinkKind, str] = {"connect": "connect", "secret": "secrets", "approval": "approvals"}
DEFAULT_TTL = timedelta(minutes=30)
TOKEN_BYTES = 32
"""256 random bits per link token."""
_RESULT_KEYS: dict[str, LinkKind] = {"connect_url": "connect", "secret_url": "secret", "approval_url": "approval"}


def hash_link_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


_MAX_OWED = 1024
"""Links owed back at most (the oldest forgotten first): an outage meets a handful of submissions."""


class LinkService:
    def __init__(
        self,
        store: LinkStore,
        clock: Clock,
        public_url: str,
        *,
        ttl: timedelta = DEFAULT_TTL,
        on_mint: Callable[[], Awaitable[None] | None] | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._public_url = public_url.rstrip("/")
        self._ttl = ttl
        self._on_mint = on_mint
        self._owed: dict[str, datetime] = {}
        """Links this process used up and owes back (``give_back`` while the store was down), by hash."""
        """Called before a link is handed out, and awaited when it returns an awaitable (stdio mode starts
        its page server here, and waits until it answers: an agent may open the link at once)."""

    @property
    def public_url(self) -> str:
        return self._public_url

    def rebase(self, public_url: str) -> None:
        """Point the links minted from now on at ``public_url`` (the stdio pages moved to a free port)."""
        self._public_url = public_url.rstrip("/")

    @property
    def public_origin(self) -> str:
        parts = urlsplit(self._public_url)
        return f"{parts.scheme}://{parts.netloc}"

    async def mint(
        self,
        kind: LinkKind,
        *,
        connector: str,
        principal: str,
        secret_name: str = "default",
        approval_id: str | None = None,
        ttl: timedelta | None = None,
        agent: str | None = None,
    ) -> tuple[str, LinkRecord]:
        if self._on_mint is not None:
            started = self._on_mint()
            if inspect.isawaitable(started):
                await started
        token = secrets.token_urlsafe(TOKEN_BYTES)
        now = self._clock.now()
        record = LinkRecord(
            token_hash=hash_link_token(token),
            kind=kind,
            connector=connector,
            principal=principal,
            secret_name=secret_name,
            approval_id=approval_id,
            created_at=now,
            expires_at=now + (ttl or self._ttl),
            agent=agent,
        )
        await self._store.put_link(record)
        return f"{self._public_url}/{_PATHS[kind]}/{token}", record

    async def peek(self, kind: LinkKind, token: str) -> LinkRecord | None:
        """The link if it is of this kind, unused and unexpired; does not consume it."""
        token_hash = hash_link_token(token)
        if (used_at := self._owed.get(token_hash)) is not None:
            await self._store.release_link(token_hash, used_at)
            self._owed.pop(token_hash, None)
        record = await self._store.get_link(token_hash)
        if record is None or record.kind != kind or record.used_at is not None:
            return None
        return record if record.expires_at > self._clock.now() else None

    async def record(self, token_hash: str) -> LinkRecord | None:
        """The link stored under ``token_hash``, used or not (whether a human has completed it)."""
        return await self._store.get_link(token_hash)

    async def consume(self, kind: LinkKind, token: str, *, at: datetime | None = None) -> LinkRecord | None:
        """Use the link up (``at``: the instant to mark it used at, for ``give_back``); None when it is
        not of this kind, used or expired."""
        record = await self._store.consume_link(hash_link_token(token), at or self._clock.now())
        return record if record is not None and record.kind == kind else None

    async def give_back(self, token: str, used_at: datetime) -> bool:
        """Make the link unused again that ``consume`` used up at ``used_at``, because what it was used
        for failed with the store down: the human who retries is not told it was already used. True
        when it is unused again now; else, the store still down, this process gives it back before it
        next looks the link up (a restart forgets that)."""
        token_hash = hash_link_token(token)
        try:
            return await self._store.release_link(token_hash, used_at)
        except StoreUnavailable:
            if len(self._owed) >= _MAX_OWED:
                self._owed.pop(next(iter(self._owed)))
            self._owed[token_hash] = used_at
            return False


@dataclass(frozen=True)
class HumanLink:
    """A link a meta-tool result asks the agent to hand a human, and what it is for."""

    kind: LinkKind
    url: str
    link_id: str
    """The hash the link is stored under: names it (for a completion notice) without opening it."""
    message: str
    """What the human is asked to do, as the result words it."""
    expires_at: datetime | None = None


def human_link(result: Mapping[str, Any]) -> HumanLink | None:
    """The link in a ``call``, ``connect`` or ``request_secret`` result (``pending_approval``,
    ``needs_auth``, ``link``), or None when the result asks nothing of a human."""
    for key, kind in _RESULT_KEYS.items():
        url = result.get(key)
        if isinstance(url, str) and url:
            expires = result.get("expires_at")
            try:
                expires_at = datetime.fromisoformat(expires) if isinstance(expires, str) else None
            except ValueError:
                expires_at = None
            message = str(result.get("message") or result.get("reason") or "")
            return HumanLink(kind, url, hash_link_token(url.rsplit("/", 1)[-1]), message, expires_at)
    return None
