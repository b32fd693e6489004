"""Who stored each credential, when and through what, and whether its upstream has refused it since.

The vault keeps only sealed bytes; this keeps the rest of a credential's record, never its value:
who stored or replaced it (``operator`` for ``secret set``, else the link's user and agent), when,
through what (a connect or secret link, ``secret set``), who approved the replacement, and a
``revision``, new with every human's store. A call the upstream answers 401 marks the record
refused. The record is what lets a 401 say "replaced at T by X", ``connectors`` and ``doctor`` say
the stored credential is refused, and a replacement approved against one revision be refused when
another replaced it meanwhile (``CredentialDesk.save``).

Records live in the store's meta table, one per credential key; a token refresh of an OAuth2 sign-in
rewrites the sealed token set but not its record: the sign-in is still that human's. Light to import:
the command line reads the records back from the state file (``cli/listing.py``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..primitives.secrets import PROJECT_WIDE, CredentialKey
from ..store.contract import MetaStore
from ..vocabulary.clock import Clock

__all__ = ["ORIGIN_PREFIX", "CredentialOrigin", "CredentialOrigins", "origin_key", "parse_origins", "refused_note"]

ORIGIN_PREFIX = "credential_origin:"

_VIA_WORDS = {
    "connect": "a connect link",
    "request_secret": "a secret link",
    "secret set": "`mcp-gateway secret set`",
}


def origin_key(key: CredentialKey) -> str:
    """The meta key of ``key``'s record."""
    return ORIGIN_PREFIX + json.dumps([key.connector, key.principal, key.name])


class CredentialOrigin(BaseModel):
    """The record of one stored credential (never its value)."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    revision: str
    """New with every human's store: what a replacement's approval was given against."""
    at: datetime
    by: str
    """``operator``, or the user of the link that stored it (``token:…``, a front-door subject)."""
    agent: str | None = None
    via: str
    replaced: bool = False
    approved_by: str | None = None
    refused_at: datetime | None = None
    """When the upstream first answered 401 to a call carrying it, since it was stored."""
    refused_status: int | None = None

    def told(self) -> str:
        """ "replaced at 2026-12-07 21:03 UTC by token:ab12 (agent bob-bot) through a connect link, approved
        by operator"."""
        agent = f" (agent {self.agent})" if self.agent else ""
        approved = f", approved by {self.approved_by}" if self.approved_by else ""
        via = _VIA_WORDS.get(self.via, self.via)
        done = "replaced" if self.replaced else "stored"
        return f"{done} at {_when(self.at)} by {self.by}{agent} through {via}{approved}"


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def refused_note(slug: str, origin: CredentialOrigin | None) -> str:
    """A sentence on a team-wide credential its upstream refused: when it was stored, by whom, and since
    when it is refused; empty when nothing says it is refused."""
    if origin is None or origin.refused_at is None:
        return ""
    status = origin.refused_status or 401
    return (
        f"The team-wide credential of {slug} was {origin.told()}; {slug} has refused it ({status}) since "
        f"{_when(origin.refused_at)}."
    )


def parse_origins(rows: Iterable[tuple[str, Any]]) -> dict[CredentialKey, CredentialOrigin]:
    """The records among meta ``rows`` (key, decoded JSON value); unreadable ones are left out."""
    out: dict[CredentialKey, CredentialOrigin] = {}
    for meta_key, value in rows:
        if not meta_key.startswith(ORIGIN_PREFIX) or not isinstance(value, Mapping):
            continue
        try:
            connector, principal, name = json.loads(meta_key[len(ORIGIN_PREFIX) :])
            key = CredentialKey(connector=connector, principal=principal, name=name)
            out[key] = CredentialOrigin.model_validate(value)
        except (ValueError, TypeError, ValidationError):
            continue
    return out


class CredentialOrigins:
    """Reads and writes the records (the store's meta table)."""

    def __init__(self, store: MetaStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._refused: set[CredentialKey] = set()
        """Keys this process marked refused: a later success clears the mark without a read per call."""

    async def of(self, key: CredentialKey) -> CredentialOrigin | None:
        value = await self._store.get_meta(origin_key(key))
        if not isinstance(value, Mapping):
            return None
        try:
            return CredentialOrigin.model_validate(value)
        except ValidationError:
            return None

    async def revision(self, key: CredentialKey) -> str:
        """The revision stored now ("" when no record is kept: stored before records were)."""
        origin = await self.of(key)
        return origin.revision if origin is not None else ""

    async def stored(
        self,
        key: CredentialKey,
        *,
        by: str,
        via: str,
        replaced: bool,
        agent: str | None = None,
        approved_by: str | None = None,
    ) -> CredentialOrigin:
        """Record a human's store under ``key``: a new revision."""
        origin = CredentialOrigin(
            revision=secrets.token_urlsafe(12),
            at=self._clock.now(),
            by=by,
            agent=agent,
            via=via,
            replaced=replaced,
            approved_by=approved_by,
        )
        await self._store.set_meta(origin_key(key), origin.model_dump(mode="json"))
        self._refused.discard(key)
        return origin

    async def refused(self, key: CredentialKey, status: int) -> CredentialOrigin | None:
        """Mark ``key``'s record refused by its upstream (kept from the first refusal on); the record."""
        origin = await self.of(key)
        if origin is None or origin.refused_at is not None:
            self._refused.add(key)
            return origin
        origin = origin.model_copy(update={"refused_at": self._clock.now(), "refused_status": status})
        await self._store.set_meta(origin_key(key), origin.model_dump(mode="json"))
        self._refused.add(key)
        return origin

    async def accepted(self, key: CredentialKey) -> None:
        """The upstream took a call carrying ``key``'s credential: a refusal this process marked is over."""
        if key not in self._refused:
            return
        self._refused.discard(key)
        origin = await self.of(key)
        if origin is not None and origin.refused_at is not None:
            cleared = origin.model_copy(update={"refused_at": None, "refused_status": None})
            await self._store.set_meta(origin_key(key), cleared.model_dump(mode="json"))

    async def forget(self, key: CredentialKey) -> None:
        """The credential was deleted: its record goes with it."""
        self._refused.discard(key)
        await self._store.set_meta(origin_key(key), None)

    async def refused_team(self, connector: str) -> CredentialOrigin | None:
        """The record of ``connector``'s team-wide credential, when its upstream refused it last."""
        origin = await self.of(CredentialKey(connector=connector, principal=PROJECT_WIDE, name="default"))
        return origin if origin is not None and origin.refused_at is not None else None
