"""Who is calling, and what they may see (SPEC 7).

A ``Principal`` is the operator's own session (stdio without ``--agent``) or a named agent.
HTTP callers prove who they are with a bearer token minted by ``token create``; only the
token's SHA-256 is stored, and the comparison after lookup is constant-time. Grants come from
the manifest's ``agents`` block: with no block, every session sees every connector; with one,
a session must name a listed agent, and an unknown agent sees nothing (fail closed).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from .clock import Clock
from .manifest import Manifest
from .store.base import Store, TokenRecord

__all__ = ["OPERATOR", "Principal", "TokenService", "granted_connectors"]

TOKEN_PREFIX = "mgw_"


@dataclass(frozen=True)
class Principal:
    user: str
    agent: str | None = None

    @property
    def label(self) -> str:
        return f"{self.user}/{self.agent}" if self.agent else self.user


OPERATOR = Principal(user="operator")


def granted_connectors(manifest: Manifest, principal: Principal) -> frozenset[str]:
    """The slugs this principal may see. Empty for an agent the manifest does not list."""
    all_slugs = frozenset(c.slug for c in manifest.connectors)
    if manifest.agents is None:
        return all_slugs
    if principal.agent is None:
        # The operator's own session (stdio, no --agent) owns the gateway and sees everything.
        return all_slugs if principal.user == OPERATOR.user else frozenset()
    for agent in manifest.agents:
        if agent.name == principal.agent:
            return frozenset(agent.connectors)
    return frozenset()


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenService:
    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    async def create(self, agent: str) -> tuple[TokenRecord, str]:
        """Mint a token for ``agent``. The plaintext is returned once and never stored."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = TokenRecord(
            id=secrets.token_hex(6), agent=agent, token_hash=_hash(token), created_at=self._clock.now()
        )
        await self._store.put_token(record)
        return record, token

    async def verify(self, token: str | None) -> Principal | None:
        if not token or len(token) > 256:
            return None
        digest = _hash(token)
        record = await self._store.find_token(digest)
        if record is None or record.revoked or not hmac.compare_digest(record.token_hash, digest):
            return None
        return Principal(user=f"token:{record.id}", agent=record.agent)
