"""Every stored credential known to the redaction of what the gateway keeps, before any call opens it.

An agent may pass a stored secret back as an argument (a user pasted it into the chat), to any
action of any connector. The audit row, the approval and the log line of that call redact every
value ``known_secrets`` holds, so the set must hold every stored credential from the first call on,
not only those some earlier call happened to send. ``learn_stored`` reads them all (the first call
waits for it), then again at most every ``RELEARN_SECONDS``; a value opened twice is decrypted once
(its sealed bytes' fingerprint is remembered), and only its redaction forms are kept, never the
opened value. A credential stored by this process is known at once (``CredentialVault.put``), one
a call is about to carry before the call records anything (``learn``); one stored by another
process (the CLI, another instance) within ``RELEARN_SECONDS``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

import anyio

from ..primitives.secrets import SealedCredential
from ..services.credentials import CredentialVault
from ..services.logs import known_secrets
from ..vocabulary.errors import CredentialError, StoreUnavailable

__all__ = ["RELEARN_SECONDS", "KnownCredentials"]

logger = logging.getLogger(__name__)

RELEARN_SECONDS: Final = 10.0
"""How often the stored credentials are read again, for those another process stored."""
_MAX_LEARNED: Final = 4096
"""Stored values remembered as learned; past it the set starts again (a value learned twice costs a decryption)."""


class KnownCredentials:
    """Teaches ``known_secrets`` the stored credentials of one vault."""

    def __init__(
        self, vault: CredentialVault, *, every: float = RELEARN_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._vault = vault
        self._every = every
        self._clock = clock
        self._learned: set[str] = set()
        """Fingerprints of the sealed credentials already learned."""
        self._last: SealedCredential | None = None
        self._read_at: float | None = None
        self._reading: anyio.Lock | None = None

    def learn(self, sealed: SealedCredential) -> None:
        """Teach ``known_secrets`` one credential (once per stored value: opening it costs a decryption)."""
        if sealed is self._last:
            return  # the vault hands back the same object while the value is unchanged
        fingerprint = sealed.fingerprint
        if fingerprint in self._learned:
            self._last = sealed
            return
        if len(self._learned) >= _MAX_LEARNED:
            self._learned.clear()
        try:
            known_secrets().add(sealed.open())
        except CredentialError:
            return  # unusable: a call that would send it says so
        self._learned.add(fingerprint)
        self._last = sealed

    async def learn_stored(self) -> None:
        """Learn every stored credential, unless they were read less than ``every`` seconds ago.
        Never raises for a store that cannot answer: the call goes on, and says so if it needs it."""
        if self._read_at is not None and self._clock() - self._read_at < self._every:
            return
        if self._reading is None:
            self._reading = anyio.Lock()
        async with self._reading:  # concurrent first calls wait for one reading, not each their own
            if self._read_at is not None and self._clock() - self._read_at < self._every:
                return
            try:
                for key in await self._vault.keys():
                    sealed = await self._vault.stored(key)
                    if sealed is not None:
                        self.learn(sealed)
            except StoreUnavailable as exc:
                logger.debug("stored credentials not read for redaction: %s", exc)
                return  # read again at the next call
            except Exception:
                # Not the call's to fail: it goes on, and whatever it needs from the store fails there,
                # answered and audited as its own error.
                logger.exception("stored credentials not read for redaction")
                return
            self._read_at = self._clock()
