"""Who may change a stored credential through a link, and the record every change leaves.

A connector's team-wide credential (stored under the project, ``credentials: shared``) is what
every user's calls carry. It changes only by an operator's act: ``secret set``, a link the
operator minted (``mcp-gateway connect``), or a connect or secret link whose replacement an
operator approved. When an agent asks for a link to a connector that already has a team-wide
credential, ``mint`` asks the approvals service for a ``credential`` approval and binds the link
to it; the page then waits until an operator approves (the overview, or ``mcp-gateway approvals
approve``), and the approval is spent when the new value is stored. The approval is given against
the revision stored when it was asked for (``CredentialOrigins``): when another replacement, or the
operator's ``secret set``, changed the credential meanwhile, the approved link stores nothing
(``overtaken``), so nobody overwrites a value the operator never saw proposed. A link minted while
nothing was stored, submitted after someone else stored one, is refused the same way (``Permit``).
When the credential a link was to replace is deleted, there is nothing left to replace: its
approval is withdrawn, and the link adds one as any link minted now would.
Personal credentials (``credentials: per_user``: each user's own) change freely by their user.

Every change through a page is written to the audit trail (who, which connector and credential,
team-wide or personal, what it replaced, who approved it; never the value) and logged.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..auth.oauth2 import TOKEN_NAME
from ..manifest import ConnectorConfig, OAuth2Auth
from ..primitives.secrets import PROJECT_WIDE, CredentialKey
from ..services.approvals import ApprovalService
from ..services.audit import Auditor, args_json
from ..services.credentials import CredentialVault
from ..services.identity import OPERATOR, Principal
from ..services.links import DEFAULT_TTL, LinkService
from ..store.contract import ApprovalRecord, AuditRecord, LinkKind, LinkRecord
from ..vocabulary.clock import Clock
from ..vocabulary.model import AuditStatus
from .credential_origins import CredentialOrigin, CredentialOrigins, address, refused_note

__all__ = [
    "CredentialChanges",
    "MintedLink",
    "Permit",
    "Scope",
    "change_record",
    "deletion_record",
    "operators_own",
    "reserved_name",
    "scope_of",
]

logger = logging.getLogger(__name__)

Scope = Literal["team", "personal"]
PermitState = Literal[
    "open", "approved", "waiting", "refused", "expired", "unapproved", "withdrawn", "overtaken", "mode_changed", "moved"
]
"""``open``: no approval needed; ``approved``: an operator approved this link's replacement;
``waiting``: its approval is still pending; ``refused``: denied or not this link's; ``expired``: its
approval (given or not) ran out of time before the link was used;
``unapproved``: a team-wide credential exists and the link carries no approval for replacing it;
``withdrawn``: the agent that asked for the link has since lost access (its token revoked, the
connector no longer granted to it); ``overtaken``: its approval was withdrawn because the credential
it was to replace was replaced, or deleted and then added anew, since (``origin`` says by whom);
``mode_changed``: its approval was asked to replace the team-wide credential, and the connector is
``credentials: per_user`` now, so the link would store a personal one nobody approved; ``moved``:
its approval was given while the connector sent credentials to another origin than it does now."""


def scope_of(key: CredentialKey) -> Scope:
    return "team" if key.principal == PROJECT_WIDE else "personal"


def change_record(
    key: CredentialKey,
    *,
    at: datetime,
    who: str,
    via: str,
    replaced: Scope | None,
    agent: str | None = None,
    approved_by: str | None = None,
    account: str | None = None,
    previous_account: str | None = None,
) -> AuditRecord:
    """The audit row of one credential stored under ``key`` (never its value); of an OAuth2 sign-in,
    the provider ``account`` it acts as, and ``previous_account`` when it replaced another's."""
    told: dict[str, object] = {"scope": scope_of(key), "replaced": replaced, "via": via}
    if account:
        told["account"] = account
    if previous_account:
        told["account_was"] = previous_account
    status: AuditStatus = "credential_set"
    return _credential_row(key, at=at, who=who, agent=agent, told=told, status=status, approved_by=approved_by)


def deletion_record(key: CredentialKey, *, at: datetime, who: str, via: str) -> AuditRecord:
    """The audit row of the credential stored under ``key`` deleted (never its value): by ``who``,
    through ``via`` (``secret delete``, ``remove``, a refresh the provider refused)."""
    told = {"scope": scope_of(key), "principal": key.principal, "via": via}
    return _credential_row(key, at=at, who=who, agent=None, told=told, status="credential_deleted")


def _credential_row(
    key: CredentialKey,
    *,
    at: datetime,
    who: str,
    agent: str | None,
    told: Mapping[str, object],
    status: AuditStatus,
    approved_by: str | None = None,
) -> AuditRecord:
    name = key.connector if key.name == "default" else f"{key.connector}/{key.name}"
    return AuditRecord(
        at=at,
        user=who,
        agent=agent,
        requested=f"credential:{name}",
        connector=key.connector,
        action=None,
        args_preview=args_json(told),
        fingerprint=None,
        verdict=None,
        verdict_source=None,
        status=status,
        latency_ms=0.0,
        approved_by=approved_by,
    )


@dataclass(frozen=True)
class MintedLink:
    url: str
    record: LinkRecord
    approval: ApprovalRecord | None
    """The operator's approval the link waits for (it would replace a team-wide credential)."""

    def note(self) -> str:
        """What the agent must tell the user, when the link waits for an operator; else empty."""
        if self.approval is None:
            return ""
        return (
            f" {self.record.connector} already has a team-wide credential that every user's calls carry. The page "
            f"waits until an operator approves (approval {self.approval.id}: on the operator overview, or "
            f"`mcp-gateway approvals approve {self.approval.id}`); only then does completing it replace that "
            "credential, for everyone. Tell the user."
        )


@dataclass(frozen=True)
class Permit:
    """Whether a link's submission may store its value now, where it goes and what it replaces."""

    key: CredentialKey
    replaces: Scope | None
    state: PermitState
    approval: ApprovalRecord | None = None
    origin: CredentialOrigin | None = None
    """Of an ``overtaken``, ``waiting`` or ``unapproved`` permit: the record of the credential stored now."""
    address: str = ""
    """Where the connector sends credentials now (``credential_origins.address``), recorded with a store."""

    @property
    def scope(self) -> Scope:
        return scope_of(self.key)

    @property
    def may_save(self) -> bool:
        return self.state in ("open", "approved")


def operators_own(link: LinkRecord) -> bool:
    """Whether ``link`` is the operator's own act (``mcp-gateway connect``), not an agent's, even one of
    the operator's own session (``serve --agent``), which acts as the operator's user."""
    return link.principal == OPERATOR.user and link.agent is None


def reserved_name(cfg: ConnectorConfig, name: str) -> str | None:
    """Why ``name`` cannot be a named secret of ``cfg`` (its auth kind stores its own value under it:
    an ``oauth2`` connector's sign-ins), else None. Filled with anything else, it would pose as that."""
    if isinstance(cfg.auth, OAuth2Auth) and name == TOKEN_NAME:
        return (
            f"{name!r} is where {cfg.slug}'s oauth2 auth keeps its sign-ins (token sets), not a secret to paste: "
            f"to sign in, call connect for {cfg.slug}; for a secret of your own, choose another name"
        )
    return None


def target(cfg: ConnectorConfig, kind: LinkKind, principal: str, name: str = "default") -> CredentialKey:
    """Where a connect or secret link's value is stored. A ``per_user`` connector keeps the user's
    own (for ``oauth2``, their token set; the client stays the project's); else the project's."""
    auth = cfg.auth
    if kind == "connect" and isinstance(auth, OAuth2Auth) and auth.flow == "authorization_code":
        owner = principal if cfg.credentials == "per_user" else PROJECT_WIDE
        return CredentialKey(connector=cfg.slug, principal=owner, name=TOKEN_NAME)
    personal = cfg.credentials == "per_user" and not isinstance(auth, OAuth2Auth)
    return CredentialKey(connector=cfg.slug, principal=principal if personal else PROJECT_WIDE, name=name)


class CredentialChanges:
    """Mints links that may replace a credential, decides their submissions, and records changes."""

    def __init__(
        self,
        vault: CredentialVault,
        approvals: ApprovalService,
        links: LinkService,
        auditor: Auditor,
        clock: Clock,
        origins: CredentialOrigins,
    ) -> None:
        self._vault = vault
        self.origins = origins
        """Who stored each credential and when, and whether its upstream refused it since."""
        self._approvals = approvals
        self._links = links
        self._auditor = auditor
        self._clock = clock
        self.requester_may: Callable[[Principal, str], Awaitable[bool]] | None = None
        """Whether the agent that asked for a link may still reach its connector (told by the gateway,
        which knows the tokens and grants): a link outlives neither its agent's token nor its grant."""

    async def stored(self, key: CredentialKey) -> bool:
        """Whether a credential is stored under ``key`` now."""
        return key in await self._vault.keys(key.connector)

    async def mint(
        self, principal: Principal, cfg: ConnectorConfig, kind: LinkKind, name: str = "default"
    ) -> MintedLink:
        """A connect or secret link for ``principal``; one that would replace a team-wide credential
        (and is not the operator's own) waits for an operator's approval, asked for here."""
        key = target(cfg, kind, principal.user, name)
        approval = None
        if scope_of(key) == "team" and principal != OPERATOR and await self.stored(key):
            what = "credential" if key.name in ("default", TOKEN_NAME) else f"secret “{key.name}”"
            summary = (
                f"Replace the team-wide {what} of {cfg.slug}, which every user's calls carry, "
                f"with one entered on a link {principal.user} asked for"
            ) + (f" through {principal.agent}" if principal.agent else "")
            origin = await self.origins.of(key)
            if origin is not None:
                summary += (
                    ". " + refused_note(cfg.slug, origin)
                    if origin.refused_at is not None
                    else f". The one stored now was {origin.told()}"
                )
            approval = await self._approvals.request_credential(
                principal,
                cfg.slug,
                key.name,
                summary,
                over=origin.revision if origin is not None else "",
                ttl=DEFAULT_TTL,
                calls=address(cfg),
            )
        url, record = await self._links.mint(
            kind,
            connector=cfg.slug,
            principal=principal.user,
            secret_name=name,
            approval_id=approval.id if approval is not None else None,
            agent=principal.agent,
        )
        return MintedLink(url, record, approval)

    async def permit(self, link: LinkRecord, cfg: ConnectorConfig, *, consume: bool = False) -> Permit:
        """Whether ``link``'s submission may store its value; with ``consume``, spends its approval
        (call it once the link itself is consumed, right before storing)."""
        key = target(cfg, link.kind, link.principal, link.secret_name)
        replaces = scope_of(key) if await self.stored(key) else None
        where = address(cfg)
        asker = Principal(user=link.principal, agent=link.agent)
        if link.agent is not None and self.requester_may is not None and not await self.requester_may(asker, cfg.slug):
            return Permit(key, replaces, "withdrawn")
        if link.kind == "secret" and reserved_name(cfg, link.secret_name) is not None:
            return Permit(key, replaces, "refused")  # a link minted before its name was refused
        if link.approval_id is not None and (approved := await self._approvals.get(link.approval_id)) is not None:
            if approved.kind == "credential" and approved.calls and approved.calls != where:
                # Approved for the connector that sent credentials there; the slug names another since (it
                # moved, or was removed and another API added under its name): not what was approved.
                return Permit(key, replaces, "moved", approved, address=where)
        if link.approval_id is not None and scope_of(key) == "personal":
            # Asked (and maybe approved) as a team-wide replacement while the connector was shared; what it
            # would store now is one user's own: not what the operator was asked about.
            return Permit(key, replaces, "mode_changed")
        if link.approval_id is not None:
            # Deleted since the link was minted: there is nothing to replace, and any link minted now
            # adds one at once; this one does the same (only while nothing is stored), its approval
            # withdrawn so it stays pending for nothing. An operator's refusal still stands.
            moot = replaces is None and scope_of(key) == "team"
            check, record = await self._approvals.take_credential(
                link.approval_id,
                connector=cfg.slug,
                name=key.name,
                principal=link.principal,
                consume=consume and not moot,
            )
            if moot and check in ("run", "pending", "approval_expired"):
                if consume:
                    await self._approvals.withdraw(link.approval_id)
                return Permit(key, None, "open", address=where)
            if check == "approval_expired" and record is not None and replaces == "team":
                # Withdrawn by a store (or a deletion) since: say what happened, not "not approved".
                origin = await self.origins.of(key)
                if origin is not None and origin.revision != record.sends:
                    return Permit(key, replaces, "overtaken", record, origin)
            states: dict[str, PermitState] = {"run": "approved", "pending": "waiting", "approval_expired": "expired"}
            state = states.get(check, "refused")
            # Waiting: the page says whose credential saving would replace, and when it was stored.
            origin = await self.origins.of(key) if state == "waiting" else None
            return Permit(key, replaces, state, record, origin, address=where)
        if replaces == "team" and not operators_own(link):
            # Minted to add one, and one was stored since: the page says by whom and when.
            return Permit(key, replaces, "unapproved", origin=await self.origins.of(key))
        return Permit(key, replaces, "open", address=where)

    async def overtaken(self, permit: Permit) -> bool:
        """Whether ``permit``'s approved replacement was given against a credential replaced since (by
        another approved link, or the operator's ``secret set``): the operator approved replacing the
        one stored then, not a value they never saw proposed. Asked under the desk's lock of the key."""
        approval = permit.approval
        if permit.state != "approved" or approval is None or permit.replaces is None:
            return False
        return await self.origins.revision(permit.key) != approval.sends

    async def record_origin(
        self,
        link: LinkRecord,
        permit: Permit,
        *,
        via: str,
        fingerprint: str | None = None,
        account: str | None = None,
    ) -> list[ApprovalRecord]:
        """The record of who stored ``link``'s value and when (a new revision, of the sealed value
        ``fingerprint``; None for an OAuth2 sign-in's token set); under the desk's lock.
        A team-wide store withdraws the approvals still waiting (or approved, unspent) to replace the
        one stored before: they were given against it, and would only be refused on submission. The
        approvals withdrawn."""
        approval = permit.approval
        await self.origins.stored(
            permit.key,
            by=link.principal,
            via=via,
            replaced=permit.replaces is not None,
            agent=approval.agent if approval is not None else link.agent,
            approved_by=approval.decided_by if approval is not None else None,
            fingerprint=fingerprint,
            address=permit.address,
            account=account,
        )
        if permit.scope != "team":
            return []
        return await self._approvals.withdraw_credential(permit.key.connector, permit.key.name)

    async def changed(self, link: LinkRecord, permit: Permit, *, via: str) -> None:
        """Record that ``link`` stored its value under ``permit.key``: an audit row and a log line."""
        approval = permit.approval
        approved_by = approval.decided_by if approval is not None else None
        # An OAuth2 sign-in: which provider account it acts as, and the one it replaced when another.
        origin = await self.origins.of(permit.key) if permit.key.name == TOKEN_NAME else None
        record = change_record(
            permit.key,
            at=self._clock.now(),
            who=link.principal,
            via=via,
            replaced=permit.replaces,
            agent=approval.agent if approval is not None else link.agent,
            approved_by=approved_by,
            account=origin.account if origin is not None else None,
            previous_account=origin.previous_account if origin is not None else None,
        )
        await self._auditor.record(record)
        level = logging.WARNING if permit.scope == "team" else logging.INFO
        logger.log(
            level,
            "%s credential %r of %s %s by %s through a %s link%s",
            "team-wide" if permit.scope == "team" else "personal",
            permit.key.name,
            permit.key.connector,
            "replaced" if permit.replaces else "stored",
            link.principal,
            via,
            (f" (replacement approved by {approved_by})" if approved_by else "")
            + (origin.signed_in() if origin is not None else ""),
        )
