"""What the connect, secret and OAuth2 pages do with a credential a human enters.

The pages never hold the vault's write side or the store: they ask the desk whether a link's
submission may be stored (``permit``, the rule is ``CredentialChanges``'), store it and record the
change (``save``), and drive an OAuth2 sign-in through the token broker (``oauth2``). A credential
stored through the desk lets a connector that was in error for want of it load again at once
(``Gateway.credential_stored``, handed in as ``on_stored``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Literal

import anyio

from ..manifest import ConnectorConfig
from ..primitives.secrets import CredentialKey, SealedCredential
from ..services.credentials import CredentialVault
from ..store.contract import LinkRecord
from ..vocabulary.errors import StoreUnavailable
from .credential_changes import CredentialChanges, Permit, operators_own
from .credential_origins import CredentialOrigin
from .oauth2_tokens import ACCOUNT_FIELD, OAuth2Tokens

__all__ = ["CredentialDesk", "Saved"]

logger = logging.getLogger(__name__)

Saved = Literal["saved", "saved_unrecorded", "added_meanwhile", "replaced_meanwhile"]
"""How a save ended: stored; stored, but its record or its audit row could not be written (logged for
the operator); nothing stored, as the link was to add a team-wide credential where none was and one is
there now; nothing stored, as the replacement was approved against a credential replaced since
(``CredentialChanges.overtaken``)."""


class CredentialDesk:
    """The pages' side of the credentials: permits, saving with its audit row, OAuth2 sign-ins."""

    def __init__(
        self,
        vault: CredentialVault,
        oauth2: OAuth2Tokens,
        changes: CredentialChanges,
        on_stored: Callable[[str], Awaitable[object]],
    ) -> None:
        self._vault = vault
        self._changes = changes
        self._on_stored = on_stored
        self._locks: dict[CredentialKey, anyio.Lock] = {}
        self.oauth2 = oauth2
        """The OAuth2 token broker: sign-ins begun and completed, a client checked, cached tokens."""

    async def permit(self, link: LinkRecord, cfg: ConnectorConfig, *, consume: bool = False) -> Permit:
        """Whether ``link``'s submission may store its value (see ``CredentialChanges.permit``)."""
        return await self._changes.permit(link, cfg, consume=consume)

    async def save(
        self,
        link: LinkRecord,
        permit: Permit,
        value: str | dict[str, str],
        *,
        via: str,
        forget_tokens: bool = False,
        reload: bool = True,
    ) -> Saved:
        """Store ``value`` under ``permit.key`` and record the change (``Saved`` says when nothing was
        stored, and why). ``forget_tokens``: drop the connector's cached OAuth2 tokens (its client
        changed); ``reload``: a connector in error loads again now (``Gateway.credential_stored``)."""
        key = permit.key
        async with self._locks.setdefault(key, anyio.Lock()):
            if (refused := await self._refusal(link, permit)) is not None:
                return refused
            fingerprint = await self._vault.put(key.connector, value, principal=key.principal, name=key.name)
            # Stored from here on: what fails later must not tell the human that nothing was saved.
            recorded = await self._after(
                key, "its record", self._changes.record_origin(link, permit, via=via, fingerprint=fingerprint)
            )
        recorded &= await self._after(key, "its audit row", self._changes.changed(link, permit, via=via))
        if forget_tokens:
            self.oauth2.forget(key.connector)
        if reload:
            await self._after(key, "loading its connector again", self._on_stored(key.connector))
        return "saved" if recorded else "saved_unrecorded"

    async def save_token_set(self, link: LinkRecord, permit: Permit, token_set: dict[str, str], *, via: str) -> Saved:
        """``save`` for the token set an OAuth2 sign-in ended with (``oauth2`` stores it)."""
        key = permit.key
        # Who signed in at the provider labels the record, never the sealed set (whose every field the
        # redaction learns: an upstream's answer naming the account would lose it).
        account = token_set.get(ACCOUNT_FIELD)
        token_set = {k: v for k, v in token_set.items() if k != ACCOUNT_FIELD}
        async with self._locks.setdefault(key, anyio.Lock()):
            if (refused := await self._refusal(link, permit)) is not None:
                return refused
            await self.oauth2.save(key.connector, token_set, principal=key.principal)
            recorded = await self._after(
                key, "its record", self._changes.record_origin(link, permit, via=via, account=account)
            )
        recorded &= await self._after(key, "its audit row", self._changes.changed(link, permit, via=via))
        return "saved" if recorded else "saved_unrecorded"

    @staticmethod
    async def _after(key: CredentialKey, what: str, step: Awaitable[object]) -> bool:
        """A step after the value was stored: whether it worked. A failure is logged for the operator
        (the credential is in the vault, its record or audit trail is not complete), never raised."""
        try:
            await step
        except Exception as exc:
            told = f"credential {key.name!r} of {key.connector} for {key.principal} was stored, but {what} failed"
            if isinstance(exc, StoreUnavailable):
                logger.warning("%s: %s", told, exc)
            else:
                logger.exception("%s", told)
            return False
        return True

    async def origin(self, permit: Permit) -> CredentialOrigin | None:
        """The record of the credential stored under ``permit.key`` now (who stored it, when)."""
        return await self._changes.origins.of(permit.key)

    async def _refusal(self, link: LinkRecord, permit: Permit) -> Saved | None:
        if await self._stored_meanwhile(link, permit):
            return "added_meanwhile"
        if await self._changes.overtaken(permit):
            return "replaced_meanwhile"
        return None

    async def _stored_meanwhile(self, link: LinkRecord, permit: Permit) -> bool:
        """Whether ``permit`` was to add a team-wide credential where none was, and one is there now.

        Two links minted while it was missing, submitted together, were each permitted as replacing
        nothing: the second silently replaced the first. Stores go one at a time per key (the caller
        holds its lock), and a permit to replace nothing holds only while nothing is there."""
        return (
            permit.state == "open"
            and permit.replaces is None
            and permit.scope == "team"
            and not operators_own(link)
            and await self._changes.stored(permit.key)
        )

    async def oauth2_client_id(self, connector: str, *, principal: str) -> str | None:
        """The client id of ``connector``'s stored OAuth2 client; None when none is stored, "" when
        what is stored is not a client id and secret. The secret itself stays in the vault."""
        client = await self._vault.sealed(connector, principal=principal)
        if client is None:
            return None
        opened = client.open().reveal()
        return opened.get("client_id", "") if isinstance(opened, dict) else ""

    async def sealed(self, connector: str, *, principal: str, name: str = "default") -> SealedCredential | None:
        """A stored secret, still sealed (the front door's own client secrets, say)."""
        return await self._vault.sealed(connector, principal=principal, name=name)
