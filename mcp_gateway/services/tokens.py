"""Agents' bearer tokens: how an HTTP caller proves which agent it is.

``token create`` mints one (``mgw_`` and 256 random bits), shown once; only its SHA-256 is stored,
a token is found by that hash, and the comparison after lookup is constant-time. A revoked token
stops working on the next request. What a verified token grants is ``identity.granted_connectors``.

While the store cannot be reached, a token this process verified lately is still taken
(``outage_grace``): an MCP client asks for more than the one request that runs a tool (its tool list,
to check a result's shape). Refused, those turned an answer the agent had already been given into an
error telling it to retry a write that ran.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from ..store.contract import TokenRecord, TokenStore
from ..vocabulary.clock import Clock
from ..vocabulary.errors import StoreUnavailable
from .identity import Principal
from .outage_grace import RecentlyVerified

__all__ = ["TOKEN_PREFIX", "TokenService"]

TOKEN_PREFIX = "mgw_"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenService:
    """Agents' bearer tokens: minted once, stored as a hash, verified on every HTTP request."""

    def __init__(self, store: TokenStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._verified = RecentlyVerified[Principal]()

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
        self._verified.forget_where(lambda principal: principal.user == f"token:{token_id}")
        return revoked

    async def still_valid(self, principal: Principal) -> bool:
        """Whether the static token ``principal`` came in with (``token:<id>``) is still in force; True
        for any other principal (the operator's stdio session, a front-door identity)."""
        token_id = principal.user.removeprefix("token:")
        if token_id == principal.user:
            return True
        return any(record.id == token_id and not record.revoked for record in await self._store.list_tokens())

    async def verify(self, token: str | None) -> Principal | None:
        if not token or len(token) > 256:
            return None
        digest = _hash(token)
        try:
            record = await self._store.find_token(digest)
        except StoreUnavailable:
            known = self._verified.recall(digest)
            if known is None:
                raise
            return known
        if record is None or record.revoked or not hmac.compare_digest(record.token_hash, digest):
            self._verified.forget(digest)
            return None
        principal = Principal(user=f"token:{record.id}", agent=record.agent)
        self._verified.remember(digest, principal)
        return principal
