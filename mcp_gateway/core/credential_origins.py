"""Who stored each credential, when and through what, and whether its upstream refused it at a call since.

The vault keeps only sealed bytes; this keeps the rest of a credential's record, never its value:
who stored or replaced it (``operator`` for ``secret set``, else the link's user and agent), when,
through what (a connect or secret link, ``secret set``), who approved the replacement, and a
``revision``, new with every human's store, and the fingerprint of the sealed bytes stored at it. A
call the upstream answers 401 marks the record refused, and a call it accepts clears the mark, only
when the call carried the revision stored now (the fingerprint of what it sent is the record's): a
call still running with a value replaced meanwhile says nothing of the new one. The record is what
lets a 401 say "replaced at T by X", ``connectors`` and ``doctor`` say the stored credential is
refused, and a replacement approved against one revision be refused when another replaced it
meanwhile (``CredentialDesk.save``).

Records live in the store's meta table, one per credential key; a token refresh of an OAuth2 sign-in
rewrites the sealed token set but not its record: the sign-in is still that human's. Light to import:
the command line reads the records back from the state file (``cli/listing.py``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..manifest import ConnectorConfig, OAuth2Auth
from ..policy.review import origin_of
from ..primitives.escapes import escaped
from ..primitives.secrets import OAUTH2_TOKEN_NAME, PROJECT_WIDE, CredentialKey
from ..store.contract import MetaStore
from ..vocabulary.clock import Clock

__all__ = [
    "ORIGIN_PREFIX",
    "CredentialOrigin",
    "CredentialOrigins",
    "address",
    "answered_key",
    "moved_note",
    "origin_key",
    "parse_origins",
    "refused_note",
    "team_key",
]

ORIGIN_PREFIX = "credential_origin:"

_REREAD = timedelta(seconds=2)
"""How long a success trusts this process's last read of a record: another process's mark is seen
(and cleared by a success here) at most this late, without a read per call."""

_VIA_WORDS = {
    "connect": "a connect link",
    "request_secret": "a secret link",
    "secret set": "`mcp-gateway secret set`",
}


def answered_key(cfg: ConnectorConfig, carried: CredentialKey, user: str) -> CredentialKey:
    """The credential an upstream's answer to a call speaks of: the one the call ``carried``, except on an
    OAuth2 sign-in connector, whose calls carry the token set of a human's sign-in (the team's, or
    ``user``'s own on a ``per_user`` one): the client stored by the operator only signs in."""
    auth = cfg.auth
    if isinstance(auth, OAuth2Auth) and auth.flow == "authorization_code":
        owner = user if cfg.credentials == "per_user" else PROJECT_WIDE
        return CredentialKey(connector=cfg.slug, principal=owner, name=OAUTH2_TOKEN_NAME)
    return carried


def address(cfg: ConnectorConfig) -> str:
    """Where ``cfg`` sends its credential, as the manifest says: the origin of its ``base_url``
    (``scheme://host[:port]``); "" when it names none (a spec's servers, an MCP server)."""
    return origin_of(cfg.base_url) if cfg.base_url else ""


def team_key(cfg: ConnectorConfig) -> CredentialKey:
    """Where ``cfg``'s team-wide credential, the one every user's calls carry, is recorded."""
    return answered_key(cfg, CredentialKey(connector=cfg.slug, principal=PROJECT_WIDE, name="default"), PROJECT_WIDE)


def origin_key(key: CredentialKey) -> str:
    """The meta key of ``key``'s record."""
    return ORIGIN_PREFIX + json.dumps([key.connector, key.principal, key.name])


class CredentialOrigin(BaseModel):
    """The record of one stored credential (never its value)."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    revision: str
    """New with every human's store: what a replacement's approval was given against."""
    fingerprint: str | None = None
    """``SealedCredential.fingerprint`` of the value stored at this revision (a digest of the sealed
    bytes, which tells nothing of the value); None on records kept before it was, and on an OAuth2
    sign-in, whose token set a refresh rewrites under the same revision."""
    at: datetime
    by: str
    """``operator``, or the user of the link that stored it (``token:…``, a front-door subject)."""
    agent: str | None = None
    via: str
    replaced: bool = False
    approved_by: str | None = None
    address: str | None = None
    """Where its connector sent credentials when it was stored (``address``); None when unknown."""
    account: str | None = None
    """Of an OAuth2 sign-in: the provider account that signed in (its ID token's email, username or
    subject), when the provider said; never a token."""
    previous_account: str | None = None
    """Of an OAuth2 sign-in that replaced another made as a different provider account: that account."""
    refused_at: datetime | None = None
    """When the upstream first answered 401 to a call carrying it, since it was stored or last accepted."""
    refused_status: int | None = None
    refused_action: str | None = None
    """The action whose call drew it: one endpoint's answer, not a verdict on the credential everywhere."""

    def carried_by(self, fingerprint: str | None) -> bool:
        """Whether a call that sent the credential of ``fingerprint`` carried this revision (when
        either side does not know, it is taken as this one, as before revisions were compared)."""
        return self.fingerprint is None or fingerprint is None or self.fingerprint == fingerprint

    def told(self) -> str:
        """ "replaced at 2026-12-07 21:03 UTC by token:ab12 (agent bob-bot) through a connect link, approved
        by operator"."""
        # Names a front door's user or an agent chose: their control, bidi and newline characters are
        # spelled out, so they forge no line in a terminal, an agent's text or a page.
        agent = f" (agent {escaped(self.agent)})" if self.agent else ""
        approved = f", approved by {escaped(self.approved_by)}" if self.approved_by else ""
        via = _VIA_WORDS.get(self.via, escaped(self.via))
        done = "replaced" if self.replaced else "stored"
        return f"{done} at {_when(self.at)} by {escaped(self.by)}{agent} through {via}{approved}{self.signed_in()}"

    def signed_in(self) -> str:
        """ ", signed in at the provider as ana@corp (it was bob@corp before)", or empty."""
        if not self.account:
            return ""
        was = f" (it was {escaped(self.previous_account)} before)" if self.previous_account else ""
        return f", signed in at the provider as {escaped(self.account)}{was}"


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def refused_note(slug: str, origin: CredentialOrigin | None) -> str:
    """A sentence on a team-wide credential its upstream refused at a call: when it was stored, by whom,
    and which call drew the refusal, when; empty when nothing says it was refused."""
    if origin is None or origin.refused_at is None:
        return ""
    status = origin.refused_status or 401
    action = f" to {escaped(origin.refused_action)}" if origin.refused_action else ""
    return (
        f"The team-wide credential of {slug} was {origin.told()}; {slug} answered {status}{action} carrying it "
        f"at {_when(origin.refused_at)} (a call it accepts since clears this)."
    )


def moved_note(cfg: ConnectorConfig, origin: CredentialOrigin | None) -> str:
    """A sentence on a team-wide credential stored while ``cfg`` sent it to another origin than its
    ``base_url`` names now (the connector moved, or another API took its slug); empty otherwise."""
    now = address(cfg)
    if origin is None or not origin.address or not now or origin.address == now:
        return ""
    return (
        f"The team-wide credential of {cfg.slug} was stored while {cfg.slug} sent it to {origin.address}; "
        f"it is sent to {now} now. If that is not the same service, delete it (`mcp-gateway secret delete "
        f"{cfg.slug}`); storing it again (`mcp-gateway secret set {cfg.slug}`) says it is meant for {now}."
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
        # A mark set by another process, or before a restart, is cleared by a success here too, without a
        # read per call: a success reads the record again only when this process last read it more than
        # ``_REREAD`` ago, or saw it marked.
        self._read: dict[CredentialKey, datetime] = {}
        """When this process last read (or wrote) each key's record."""
        self._refused: set[CredentialKey] = set()
        """Keys whose record this process last saw (or set) marked refused."""

    async def of(self, key: CredentialKey) -> CredentialOrigin | None:
        value = await self._store.get_meta(origin_key(key))
        origin = None
        if isinstance(value, Mapping):
            try:
                origin = CredentialOrigin.model_validate(value)
            except ValidationError:
                origin = None
        self._seen(key, origin)
        return origin

    def _seen(self, key: CredentialKey, origin: CredentialOrigin | None) -> None:
        self._read[key] = self._clock.now()
        if origin is not None and origin.refused_at is not None:
            self._refused.add(key)
        else:
            self._refused.discard(key)

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
        fingerprint: str | None = None,
        address: str = "",
        account: str | None = None,
    ) -> CredentialOrigin:
        """Record a human's store under ``key``: a new revision, of the sealed value ``fingerprint``,
        for a connector sending credentials to ``address``; of an OAuth2 sign-in, as provider
        ``account`` (and which account signed in before, when it was another)."""
        before = await self.of(key) if account else None
        changed = before is not None and before.account is not None and before.account != account
        origin = CredentialOrigin(
            account=account,
            previous_account=before.account if changed and before is not None else None,
            revision=secrets.token_urlsafe(12),
            fingerprint=fingerprint,
            address=address or None,
            at=self._clock.now(),
            by=by,
            agent=agent,
            via=via,
            replaced=replaced,
            approved_by=approved_by,
        )
        await self._store.set_meta(origin_key(key), origin.model_dump(mode="json"))
        self._seen(key, origin)
        return origin

    async def refused(
        self, key: CredentialKey, status: int, action: str | None = None, *, fingerprint: str | None = None
    ) -> CredentialOrigin | None:
        """Mark ``key``'s record refused by its upstream at a call of ``action`` that sent the credential
        of ``fingerprint`` (kept from the first refusal on, until a call is accepted); the record. A call
        that carried another revision than the one stored now marks nothing (``carried_by`` says so)."""
        origin = await self.of(key)
        if origin is None or origin.refused_at is not None or not origin.carried_by(fingerprint):
            return origin
        update = {"refused_at": self._clock.now(), "refused_status": status, "refused_action": action}
        origin = origin.model_copy(update=update)
        await self._store.set_meta(origin_key(key), origin.model_dump(mode="json"))
        self._seen(key, origin)
        return origin

    async def accepted(self, key: CredentialKey, *, fingerprint: str | None = None) -> None:
        """The upstream took a call that sent the credential of ``fingerprint`` under ``key``: a refusal
        marked on the revision it carried is over, whichever process marked it; one marked on a revision
        stored since stays. Reads the record when this process has not read it for ``_REREAD``, or saw
        it marked: no store access per call otherwise."""
        read = self._read.get(key)
        if read is not None and key not in self._refused and self._clock.now() - read < _REREAD:
            return
        origin = await self.of(key)
        if origin is not None and origin.refused_at is not None and origin.carried_by(fingerprint):
            cleared = origin.model_copy(update={"refused_at": None, "refused_status": None, "refused_action": None})
            await self._store.set_meta(origin_key(key), cleared.model_dump(mode="json"))
            self._seen(key, cleared)

    async def forget(self, key: CredentialKey) -> None:
        """The credential was deleted: its record goes with it."""
        await self._store.set_meta(origin_key(key), None)
        self._seen(key, None)
