"""Capability links handed to humans (SPEC 8): unguessable, single-use, expiring.

A link is ``<public_url>/<kind path>/<token>`` with 256 bits of randomness; only the token's
SHA-256 is stored. Opening a link (GET) never consumes it, so a chat client's link preview
cannot burn it; submitting the page's form (POST) consumes it atomically.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urlsplit

from .clock import Clock
from .store.base import LinkKind, LinkRecord, Store

__all__ = ["LinkService", "hash_link_token"]

_PATHS: dict[LinkKind, str] = {"connect": "connect", "secret": "secrets", "approval": "approvals"}
DEFAULT_TTL = timedelta(minutes=30)


def hash_link_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class LinkService:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        public_url: str,
        *,
        ttl: timedelta = DEFAULT_TTL,
        on_mint: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._public_url = public_url.rstrip("/")
        self._ttl = ttl
        self._on_mint = on_mint
        """Called before a link is handed out (stdio mode starts its page server here)."""

    @property
    def public_url(self) -> str:
        return self._public_url

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
    ) -> tuple[str, LinkRecord]:
        if self._on_mint is not None:
            self._on_mint()
        token = secrets.token_urlsafe(32)
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
        )
        await self._store.put_link(record)
        return f"{self._public_url}/{_PATHS[kind]}/{token}", record

    async def peek(self, kind: LinkKind, token: str) -> LinkRecord | None:
        """The link if it is of this kind, unused and unexpired; does not consume it."""
        record = await self._store.get_link(hash_link_token(token))
        if record is None or record.kind != kind or record.used_at is not None:
            return None
        return record if record.expires_at > self._clock.now() else None

    async def consume(self, kind: LinkKind, token: str) -> LinkRecord | None:
        record = await self._store.consume_link(hash_link_token(token), self._clock.now())
        return record if record is not None and record.kind == kind else None
