"""Operator tokens: what opens the ``/operator`` overview (``server/pages/operator.py``).

``mcp-gateway token create --operator`` mints one (``mgo_`` and 256 random bits), shown once; only
its SHA-256 is stored, one row per token (``OperatorTokenStore``), apart from the agents' MCP
tokens: an operator token opens no MCP session, and an agent token opens no overview. Lookups are
by hash and the comparison after lookup is constant-time. Revoking is compare-and-set, and creating
inserts a row, so two instances (or a CLI and a server) creating and revoking at once lose nothing.

Earlier builds kept every operator token in one JSON list in the ``meta`` table, rewritten whole by
each create or revoke (two writers could drop each other's change). The first use of this service
imports that list into rows, never overwriting a row already there, and empties it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from ..store.contract import MetaStore, OperatorTokenRecord, OperatorTokenStore
from ..vocabulary.clock import Clock
from ..vocabulary.errors import StoreUnavailable
from .outage_grace import RecentlyVerified

__all__ = ["LEGACY_META_KEY", "OPERATOR_TOKEN_PREFIX", "OperatorToken", "OperatorTokens", "OperatorTokensStore"]

logger = logging.getLogger(__name__)

OPERATOR_TOKEN_PREFIX = "mgo_"
LEGACY_META_KEY = "operator_tokens"
"""Where earlier builds kept the tokens, as one JSON list of ``{id, hash, created_at, revoked}``."""
_MAX_TOKEN_CHARS = 256


class OperatorTokensStore(OperatorTokenStore, MetaStore, Protocol):
    """What the service needs: the token rows, and ``meta`` to import an earlier build's list once."""


@dataclass(frozen=True)
class OperatorToken:
    """An operator token as ``token list`` shows it (never its hash)."""

    id: str
    created_at: str
    """ISO 8601 to the second, UTC."""
    revoked: bool = False


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _shown(record: OperatorTokenRecord) -> OperatorToken:
    return OperatorToken(record.id, record.created_at.isoformat(timespec="seconds"), record.revoked)


class OperatorTokens:
    """Create, list, revoke and verify operator tokens in a store shared by every instance.

    Args:
        store: the token rows (and ``meta``, read once for an earlier build's list).
        clock: stamps ``created_at``.
    """

    def __init__(self, store: OperatorTokensStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._imported = False
        self._verified = RecentlyVerified[str]()

    async def create(self) -> tuple[OperatorToken, str]:
        """Mint a token; the plaintext is returned once and never stored (256 random bits)."""
        await self._import_legacy()
        token = OPERATOR_TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = OperatorTokenRecord(id=secrets.token_hex(6), token_hash=_hash(token), created_at=self._clock.now())
        if not await self._store.add_operator_token(record):
            # 48 random bits of id (and 256 of token) clashing with a stored one: not a case to recover from.
            raise RuntimeError("operator token id clash; try again")
        return _shown(record), token

    async def list(self) -> list[OperatorToken]:
        """Every operator token, oldest first, revoked ones included."""
        await self._import_legacy()
        return [_shown(r) for r in await self._store.list_operator_tokens()]

    async def id_of(self, token: str) -> str | None:
        """The id of operator token ``token`` itself, revoked or not; None when no token of this store is it."""
        if not token.startswith(OPERATOR_TOKEN_PREFIX):
            return None
        await self._import_legacy()
        record = await self._store.find_operator_token(_hash(token))
        return record.id if record is not None else None

    async def revoke(self, token_id: str) -> bool:
        """True only for the one caller that revoked it; False if unknown or already revoked."""
        await self._import_legacy()
        self._verified.forget_where(lambda verified: verified == token_id)
        return await self._store.revoke_operator_token(token_id)

    async def verify(self, token: str | None) -> str | None:
        """The token's id if it is a live operator token, else None. Constant-time on the hash."""
        if not token or not token.startswith(OPERATOR_TOKEN_PREFIX) or len(token) > _MAX_TOKEN_CHARS:
            return None
        digest = _hash(token)
        try:
            await self._import_legacy()
            record = await self._store.find_operator_token(digest)
        except StoreUnavailable:
            # An outage is when an operator most needs /metrics: a token verified lately still opens it.
            known = self._verified.recall(digest)
            if known is None:
                raise
            return known
        if record is None or record.revoked or not hmac.compare_digest(record.token_hash, digest):
            self._verified.forget(digest)
            return None
        self._verified.remember(digest, record.id)
        return record.id

    async def active(self, token_id: str) -> bool:
        """Whether ``token_id`` names a live token (an operator session checks it on every request)."""
        await self._import_legacy()
        record = await self._store.get_operator_token(token_id)
        return record is not None and not record.revoked

    async def _import_legacy(self) -> None:
        """Move an earlier build's JSON list into rows, once per instance.

        Importing never overwrites a row, so two instances importing together, or a token revoked
        (as a row) before another instance imports the old list, keep the stored state.
        """
        if self._imported:
            return
        rows = await self._store.get_meta(LEGACY_META_KEY)
        if isinstance(rows, list):
            for row in rows:
                record = self._legacy_record(row)
                if record is not None:
                    await self._store.add_operator_token(record)
            await self._store.set_meta(LEGACY_META_KEY, None)  # reads back as absent
            logger.info("moved %d operator token(s) from the meta table into their own rows", len(rows))
        self._imported = True

    def _legacy_record(self, row: object) -> OperatorTokenRecord | None:
        if not isinstance(row, dict):
            return None
        fields: dict[str, object] = {str(k): v for k, v in row.items()}
        token_id, digest, created = fields.get("id"), fields.get("hash"), fields.get("created_at")
        if not isinstance(token_id, str) or not isinstance(digest, str) or not token_id or not digest:
            return None
        try:
            created_at = datetime.fromisoformat(created) if isinstance(created, str) else self._clock.now()
        except ValueError:
            created_at = self._clock.now()
        if created_at.tzinfo is None:
            created_at = created_at.astimezone()  # an earlier build wrote aware UTC; never guess naive
        return OperatorTokenRecord(
            id=token_id, token_hash=digest, created_at=created_at, revoked=bool(fields.get("revoked"))
        )
