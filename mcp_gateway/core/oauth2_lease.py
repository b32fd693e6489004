"""Who may refresh a token set right now, across every gateway instance sharing one database.

Providers that rotate refresh tokens (RFC 9700 section 4.14.2) refuse the second use of one with
``invalid_grant``. Inside one process a lock serializes refreshes; between instances on one
database, a *lease* does: a claim-once entry in the store's short-lived shared state
(``Store.put_ephemeral``), keyed by a hash of (project, connector, principal, credential name),
living ``LEASE_TTL`` at most and released as soon as the refresh is done. The instance that gets it
refreshes; the others wait for the new token set to appear in the vault.

Nothing secret is in the store entry: its key is a SHA-256 of names, its value a random id of the
holder, so it can be released only by the one that claimed it (and a crashed holder's lease
simply expires).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import timedelta

from ..store.contract import Store
from ..vocabulary.clock import Clock

__all__ = ["LEASE_KIND", "LEASE_TTL", "RefreshLease", "lease_key"]

LEASE_KIND = "oauth2_refresh"
"""The ``Store`` ephemeral kind of refresh leases."""
LEASE_TTL = timedelta(seconds=30)
"""How long a lease lives if its holder never releases it (it crashed). Longer than a refresh takes."""


def lease_key(project: str, connector: str, principal: str, name: str) -> str:
    """The store key of one token set's lease: a digest, so the store sees no names it need not."""
    return hashlib.sha256(json.dumps([project, connector, principal, name]).encode()).hexdigest()


class RefreshLease:
    """One attempt to be the instance that refreshes one token set.

    Args:
        store: the shared store.
        clock: for the lease's expiry (the store compares against it).
        key: ``lease_key(...)`` of the token set.
        ttl: how long the lease lives unreleased.
        holder: the holder id of a lease this process took and could not release (the store down): found
            in the store still, it is this process's to take back. None: a new id.
    """

    def __init__(
        self, store: Store, clock: Clock, key: str, ttl: timedelta = LEASE_TTL, *, holder: bytes | None = None
    ) -> None:
        self._store = store
        self._clock = clock
        self.key = key
        self._ttl = ttl
        self._stranded = holder is not None
        self._holder = holder if holder is not None else secrets.token_hex(16).encode()
        self._held = False

    @property
    def holder(self) -> bytes:
        """The random id this lease is held under in the store."""
        return self._holder

    async def claim(self) -> bool:
        """Take the lease if nobody holds it; True if this instance now does. Atomic across instances."""
        now = self._clock.now()
        self._held = await self._store.put_ephemeral(LEASE_KIND, self.key, self._holder, now + self._ttl, now)
        if not self._held and self._stranded:
            self._held = await self._store.get_ephemeral(LEASE_KIND, self.key, now) == self._holder
        return self._held

    async def taken(self) -> bool:
        """Whether someone (another instance, or another call of this one) holds the lease now."""
        return await self._store.get_ephemeral(LEASE_KIND, self.key, self._clock.now()) is not None

    async def release(self) -> None:
        """Give the lease back, if this instance still holds it (it may have expired and been claimed
        by another, whose lease must stay)."""
        if not self._held:
            return
        self._held = False
        if await self._store.get_ephemeral(LEASE_KIND, self.key, self._clock.now()) == self._holder:
            await self._store.delete_ephemeral(LEASE_KIND, self.key)

    def __repr__(self) -> str:
        return f"RefreshLease(key={self.key[:12]}…, held={self._held})"
