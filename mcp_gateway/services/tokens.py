"""Agents' bearer tokens: how an HTTP caller proves which agent it is.

``token create`` mints one (``mgw_`` and 256 random bits), shown once; only its SHA-256 is stored,
a token is found by that hash, and the comparison after lookup is constant-time. A revoked token
stops working on the next request. What a verified token grants is ``identity.granted_connectors``.

While the store cannot be reached, a token this process verified within ``OUTAGE_GRACE`` seconds is
still taken: nothing can be revoked meanwhile (revoking needs the store), and an MCP client asks for
more than the one request that runs a tool (its tool list, to check a result's shape). Refused, those
turned an answer the agent had already been given into an error telling it to retry a write that ran.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from ..store.contract import TokenRecord, TokenStore
from ..vocabulary.clock import Clock
from ..vocabulary.errors import StoreUnavailable
from .identity import Principal

__all__ = ["TOKEN_PREFIX", "TokenService"]

TOKEN_PREFIX = "mgw_"
OUTAGE_GRACE = 300.0
"""Seconds after its last verification a token is still taken while the store cannot be reached."""
_KEPT = 4096


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenService:
    """Agents' bearer tokens: minted once, stored as a hash, verified on every HTTP request."""

    def __init__(self, store: TokenStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._verified: dict[str, tuple[Principal, float]] = {}
        """Digest -> (principal, when it was last verified against the store), for an outage."""

    async def create(self, agent: str) -> tuple[TokenRecord, str]:
        """Mint a token for ``agent``. The plaintext is returned once and never stored."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = TokenRecord(
            id=secrets.token_hex(6), agent=agent, token_hash=_hash(token), created_at=self._clock.now()
        )
        await self._store.put_token(record)
        return record, token

    async def list(self) -> list[TokenRecord]:
        """Every token, revoked ones too (only their hashes are stored: no secret is listed)."""
        return await self._store.list_tokens()

    async def id_of(self, token: str) -> str | None:
        """The id of ``token`` itself, revoked or not (an operator revoking a leaked token may have only
        the token at hand); None when no token of this store is it."""
        record = await self._store.find_token(_hash(token)) if token.startswith(TOKEN_PREFIX) else None
        return record.id if record is not None else None

    async def revoke(self, token_id: str) -> bool:
        """Whether an active token had that id: it stops working on the next request."""
        revoked = await self._store.revoke_token(token_id)
        self._verified = {d: kept for d, kept in self._verified.items() if kept[0].user != f"token:{token_id}"}
        return revoked

    async def verify(self, token: str | None) -> Principal | None:
        if not token or len(token) > 256:
            return None
        digest = _hash(token)
        try:
            record = await self._store.find_token(digest)
        except StoreUnavailable:
            known = self._verified.get(digest)
            if known is None or time.monotonic() - known[1] > OUTAGE_GRACE:
                raise
            return known[0]
        if record is None or record.revoked or not hmac.compare_digest(record.token_hash, digest):
            self._verified.pop(digest, None)
            return None
        principal = Principal(user=f"token:{record.id}", agent=record.agent)
        if len(self._verified) >= _KEPT and digest not in self._verified:
            self._verified.clear()
        self._verified[digest] = (principal, time.monotonic())
        return principal
