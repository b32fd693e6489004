"""Per-call approvals: one approval covers exactly one call, once, before it expires.

An approval is bound to the fingerprint of (principal, qualified tool, canonical final args).
The agent's retry with ``approval_id`` runs only if the fingerprint matches and the status moves
``approved -> consumed`` by compare-and-set in the store, so concurrent retries, in this process
or in others sharing the database, reach the upstream once.

A caller may ``wait`` for the human: a decision made in this process (the approval page, served
by the same gateway) wakes it at once through an in-memory event; one made by another process
(``mcp-gateway approvals approve`` from a terminal) is seen by polling the store at a modest
interval. The wait is bounded (``MAX_WAIT_SECONDS``).

What a human is shown is redacted first (``redact_arguments``): values under names that usually
hold credentials (``password``, ``api_key``, ``access_token`` ...) become ``[redacted]``, an object or
list there keeping its shape and keys, and the page says how many values it hides. Nothing else is
cut: the page must show every argument that will run (a long first value must not push the
recipient and the amount out of sight).

An approval of kind ``credential`` lets one connect or secret link replace a connector's team-wide
credential (every user's calls carry it). Only an operator may approve it (``may_approve``), and the
page that stores the new value takes it once (``take_credential``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Literal

import anyio

from ..policy import effective_risk
from ..primitives.redaction import REDACTED
from ..primitives.url_secrets import secret_name
from ..store.contract import ApprovalRecord, ApprovalStatus, ApprovalStore
from ..vocabulary.clock import Clock
from ..vocabulary.model import Action, Risk, Verdict
from .identity import OPERATOR, Principal
from .logs import known_secrets

__all__ = [
    "MAX_WAIT_SECONDS",
    "ApprovalCheck",
    "ApprovalService",
    "ApproverRefused",
    "ArgumentsTooLong",
    "ArgumentsUnshown",
    "arguments_whole",
    "as_of",
    "asked_by",
    "credential_tool",
    "explain",
    "fingerprint",
    "fingerprint_of",
    "may_approve",
    "redact_arguments",
    "secret_name",
]

DEFAULT_TTL = timedelta(minutes=15)
MAX_WAIT_SECONDS = 120.0
"""The longest a ``call`` may block for a human (an MCP request should not hang for longer)."""
POLL_SECONDS = 0.5
"""How often a waiter looks at the store for a decision made by another process."""
ARGUMENTS_CHARS = 1_000_000
"""Past this no approval is asked for (``ArgumentsTooLong``): no page could show all of it. Approvals
stored cut by earlier builds are not JSON, and the page refuses to offer Approve for what it cannot show."""
ID_BYTES = 16
"""Approval ids carry 128 random bits (``apr_`` + 22 URL-safe characters)."""
ApprovalCheck = Literal["run", "pending", "approval_denied", "approval_mismatch", "approval_expired"]


def fingerprint(principal: Principal, tool: str, args: Mapping[str, Any]) -> str:
    canonical = json.dumps(
        {"user": principal.user, "agent": principal.agent, "tool": tool, "args": args},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def fingerprint_of(principal: Principal, tool: str, args_json: str) -> str:
    """``fingerprint(principal, tool, args)`` from ``args`` already in its canonical JSON (sorted keys,
    compact, not ASCII-escaped, ``default=str``): the same text, without serializing ``args`` again."""
    before, after = _around_args(principal.agent, tool, principal.user)
    return hashlib.sha256(f"{before}{args_json}{after}".encode()).hexdigest()


@lru_cache(maxsize=1024)
def _around_args(agent: str | None, tool: str, user: str) -> tuple[str, str]:
    """The canonical JSON of ``fingerprint`` before and after its arguments: the keys in sorted order,
    as json.dumps(sort_keys=True) writes them (the same few callers and tools come back every call)."""

    def encoded(value: str | None) -> str:
        return json.dumps(value, ensure_ascii=False)

    return f'{{"agent":{encoded(agent)},"args":', f',"tool":{encoded(tool)},"user":{encoded(user)}}}'


def redact_arguments(value: Any, *, hidden: bool = False) -> Any:
    """A copy of ``value`` with every value under a credential-like name replaced by ``[redacted]``.

    Only scalars are replaced: an object or a list under such a name keeps its shape and its keys
    (each of its strings and numbers redacted, as under the name; true, false and null shown), so an
    agent cannot hide what a call does from its approver by naming an argument ``auth`` or
    ``signature``: ``"auth": {"role": "admin"}`` shows that it sets a role. A stored secret the agent
    passes under any name (one a user pasted into the chat) is redacted too, keys included: these
    copies go to audit rows and approval pages."""
    known = known_secrets()
    if isinstance(value, Mapping):
        return {
            (known.redact(k) if known and isinstance(k, str) else k): redact_arguments(
                v, hidden=hidden or (isinstance(k, str) and secret_name(k))
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_arguments(v, hidden=hidden) for v in value]
    if hidden and value is not None and not isinstance(value, bool):
        return REDACTED
    if known and isinstance(value, str):
        return known.redact(value)
    return value


def asked_by(principal: str, agent: str | None) -> str:
    """Who asks, as a person reads it: the user when one is known, else the agent; a static token's
    id (``token:…``) is never the subject, only a detail in brackets."""
    if principal == OPERATOR.user and agent is None:
        return "The operator's own session"
    if principal.startswith("token:"):
        token = principal.removeprefix("token:")
        who = f"The agent “{agent}”" if agent else "An agent"
        return f"{who} (static token {token}, no user signed in)"
    return f"{principal}, through the agent “{agent}”," if agent else principal


def credential_tool(connector: str, name: str = "default") -> str:
    """The ``tool`` of a ``credential`` approval: not a qualified action name (a slug has no colon)."""
    return f"credential:{connector}" if name == "default" else f"credential:{connector}/{name}"


def explain(record: ApprovalRecord) -> str:
    """Why this call needs a human, in words, from the verdict's source and rule, and
    whether that human must be someone other than the requester."""
    if record.kind == "credential":
        return (
            "It replaces a team-wide credential: every user's calls to this connector would carry the new "
            "value. Only an operator may approve it (the overview at /operator, or mcp-gateway approvals approve)."
        )
    why = _why(record)
    if record.separate_approver:
        if record.principal.startswith("token:"):
            who = asked_by(record.principal, record.agent)
            return f"{why} Someone other than whoever asked ({who[0].lower()}{who[1:]}) must approve it."
        return f"{why} Someone other than {record.principal}, who asked, must approve it."
    return why


def _why(record: ApprovalRecord) -> str:
    match record.verdict_source:
        case "project":
            return f"The project's policy rule “{record.verdict_rule}” requires approval for this call."
        case "connector":
            return f"The connector's policy rule “{record.verdict_rule}” requires approval for this call."
        case "sensitive":
            return "The connector is marked sensitive: every call to it, reads included, needs approval."
        case "risk_default":
            return f"It is a {record.risk} action, and by default every write or delete needs a human's approval."
        case other:
            return f"A {other} policy requires approval for this call."


class ApproverRefused(Exception):
    """An approval that must come from someone other than the requester, approved by the requester
    (or by nobody known: an approval link opened without signing in)."""


class ArgumentsTooLong(ValueError):
    """A call's arguments, as an approval would show them, are longer than ``ARGUMENTS_CHARS``."""

    def __init__(self, chars: int) -> None:
        self.chars = chars
        super().__init__(
            f"These arguments are too long for a human to review ({chars:,} characters shown; an approval "
            f"shows at most {ARGUMENTS_CHARS:,}), so this call cannot be approved. Send less per call (split "
            "the work into several calls), or ask the operator to let this action run without approval."
        )


class ArgumentsUnshown(ApproverRefused):
    """An approval whose stored arguments were cut (past ``ARGUMENTS_CHARS``): no surface can show all
    of what would run, so none may approve it (it can be denied, or left to expire)."""


def as_of(record: ApprovalRecord, now: datetime) -> ApprovalRecord:
    """``record`` as it stands at ``now``: past its expiry, one nobody decided (or approved and never ran)
    is ``expired``, though its row says otherwise until a retry or a decision looks at it."""
    if record.status in ("pending", "approved") and record.expires_at <= now:
        return record.model_copy(update={"status": "expired"})
    return record


def arguments_whole(record: ApprovalRecord) -> bool:
    """Whether ``record``'s stored arguments are whole (they no longer parse once cut)."""
    try:
        json.loads(record.arguments or "{}")
    except ValueError:
        return False
    return True


def may_approve(record: ApprovalRecord, approver: str | None) -> bool:
    """Whether ``approver`` (a user name, ``operator``, or None for someone unknown) may approve
    ``record``. With ``separate_approver`` the approver must be known and not the requester."""
    if record.kind == "credential":
        return approver == OPERATOR.user
    return not record.separate_approver or (approver is not None and approver != record.principal)


def _separate(record: ApprovalRecord) -> ApprovalRecord:
    return record if record.separate_approver else record.model_copy(update={"separate_approver": True})


class ApprovalService:
    def __init__(
        self, store: ApprovalStore, clock: Clock, *, ttl: timedelta = DEFAULT_TTL, poll_seconds: float = POLL_SECONDS
    ) -> None:
        self._store = store
        self._clock = clock
        self._ttl = ttl
        self._poll = poll_seconds
        self._decided: dict[str, anyio.Event] = {}
        """Approval id -> an event set when it is decided here; only while someone waits on it."""
        self._waiters: dict[str, int] = {}
        self._stopping = False
        self._asking: dict[str, anyio.Lock] = {}
        """Per replacement asked for (its fingerprint): one request for it made at a time in this process."""
        self.on_decided: Callable[[bool], None] | None = None
        """Told of each decision taken here (True: approved), for the metrics."""

    async def request(
        self,
        principal: Principal,
        action: Action,
        args: Mapping[str, Any],
        verdict: Verdict,
        summary: str,
        *,
        separate_approver: bool = False,
        does: str = "",
        calls: str = "",
        sends: str = "",
        shown: Mapping[str, Any] | None = None,
    ) -> ApprovalRecord:
        """A pending approval for this call. ``separate_approver`` (the project's switch) or the
        verdict's rule saying so bars the requester from approving it. ``does`` and ``calls`` tell
        the approver what the action does and where the call goes, ``sends`` pins the request as built
        (``call_target.what_it_sends``), and ``shown`` (default ``args``) is the arguments the page
        shows: the agent's, and the defaults the call fills in.

        One still waiting for the very same call (the same user and agent, action and arguments, the
        same request with the same credential) is the one returned: two pages for one call read as one
        request, and approving both ran it twice."""
        shown = args if shown is None else shown
        arguments = json.dumps(redact_arguments(shown), indent=2, ensure_ascii=False, sort_keys=True, default=str)
        if len(arguments) > ARGUMENTS_CHARS:
            # Stored cut, no page could show all of what would run, so no human could approve it: an
            # approval asked for here would only be a link that leads nowhere.
            raise ArgumentsTooLong(len(arguments))
        asked = fingerprint(principal, action.qualified_name, args)
        separate = separate_approver or verdict.separate_approver
        # The same call asked twice at once (an agent's retry racing its first try) would find none waiting.
        lock = self._asking.setdefault(asked, anyio.Lock())
        try:
            async with lock:
                now = self._clock.now()
                for waiting in await self.pending(now):
                    if (
                        waiting.kind == "call"
                        and waiting.fingerprint == asked
                        and waiting.agent == principal.agent
                        and (waiting.calls, waiting.sends, waiting.separate_approver) == (calls, sends, separate)
                    ):
                        return waiting
                return await self._ask(
                    principal, action, args, verdict, summary, asked, now, arguments, separate, does, calls, sends
                )
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._asking.pop(asked, None)  # one per call waiting to be asked, not one per call ever asked

    async def _ask(
        self,
        principal: Principal,
        action: Action,
        args: Mapping[str, Any],
        verdict: Verdict,
        summary: str,
        asked: str,
        now: datetime,
        arguments: str,
        separate: bool,
        does: str,
        calls: str,
        sends: str,
    ) -> ApprovalRecord:
        record = ApprovalRecord(
            id="apr_" + secrets.token_urlsafe(ID_BYTES),
            fingerprint=asked,
            principal=principal.user,
            agent=principal.agent,
            tool=action.qualified_name,
            risk=effective_risk(action, args),
            summary=summary,
            arguments=arguments,
            verdict_source=verdict.source,
            verdict_rule=verdict.rule,
            separate_approver=separate,
            created_at=now,
            expires_at=now + self._ttl,
            does=does,
            calls=calls,
            sends=sends,
        )
        await self._store.put_approval(record)
        return record

    async def request_credential(
        self,
        principal: Principal,
        connector: str,
        name: str,
        summary: str,
        *,
        over: str = "",
        ttl: timedelta | None = None,
        calls: str = "",
    ) -> ApprovalRecord:
        """A pending approval for replacing ``connector``'s team-wide credential ``name`` through a link
        ``principal`` asked for; only an operator may approve it. ``over``: the revision of the credential
        stored now (``CredentialOrigins``), the one the operator approves replacing: kept as the record's
        ``sends``. One already waiting for the same replacement (the same principal and agent, connector,
        name and revision) is the one returned (``calls``: where the connector sends its credential, the
        origin of its ``base_url``, kept as the record's ``calls``: a connector that sends elsewhere since is
        not the one the operator approved a credential for): an agent retrying a call that draws a 401 asks once, not
        once per retry, and the operator's queue holds one request to decide, not forty alike."""
        tool = credential_tool(connector, name)
        asked = fingerprint(principal, tool, {"connector": connector, "name": name})
        # Calls drawing a 401 together (an agent's parallel calls) would each find none waiting and ask.
        async with self._asking.setdefault(asked, anyio.Lock()):
            now = self._clock.now()
            for waiting in await self.pending(now):
                if (
                    waiting.kind == "credential"
                    and waiting.fingerprint == asked
                    and waiting.agent == principal.agent
                    and waiting.sends == over
                    and waiting.calls == calls
                ):
                    return waiting
            return await self._ask_credential(principal, tool, asked, summary, now, ttl, over, calls)

    async def withdraw_credential(self, connector: str, name: str) -> list[ApprovalRecord]:
        """Withdraw (``expired``) every undecided or unspent approval to replace ``connector``'s team-wide
        credential ``name``: it was deleted, and there is nothing left to replace, or another was stored
        over it, and they were given against the one it replaced. The ones withdrawn."""
        tool = credential_tool(connector, name)
        now = self._clock.now()
        withdrawn: list[ApprovalRecord] = []
        for record in await self._store.list_approvals():
            if record.kind != "credential" or record.tool != tool or record.status not in ("pending", "approved"):
                continue
            if await self._store.transition_approval(record.id, record.status, "expired", now):
                withdrawn.append(record)
                if (event := self._decided.get(record.id)) is not None:
                    event.set()
        return withdrawn

    async def withdraw(self, approval_id: str) -> None:
        """Withdraw one credential approval (``expired``), whether it waits or is approved: what it was to
        replace is gone, and a link of the same request must not replace what is stored next with it."""
        record = await self._store.get_approval(approval_id)
        if record is not None and record.status in ("pending", "approved"):
            await self._store.transition_approval(record.id, record.status, "expired", self._clock.now())

    async def _ask_credential(
        self,
        principal: Principal,
        tool: str,
        asked: str,
        summary: str,
        now: datetime,
        ttl: timedelta | None,
        over: str,
        calls: str,
    ) -> ApprovalRecord:
        risk: Risk = "write"
        record = ApprovalRecord(
            id="apr_" + secrets.token_urlsafe(ID_BYTES),
            fingerprint=asked,
            principal=principal.user,
            agent=principal.agent,
            tool=tool,
            risk=risk,
            summary=summary,
            verdict_source="project",
            separate_approver=True,
            created_at=now,
            expires_at=now + (ttl or self._ttl),
            kind="credential",
            does=summary,
            sends=over,
            calls=calls,
        )
        await self._store.put_approval(record)
        return record

    async def take_credential(
        self, approval_id: str, *, connector: str, name: str, principal: str, consume: bool = True
    ) -> tuple[ApprovalCheck, ApprovalRecord | None]:
        """Whether the link of ``principal`` may now replace ``connector``'s team-wide credential
        ``name``: ``run`` once (approved -> consumed; without ``consume`` only looked at), else why not."""
        record = await self._store.get_approval(approval_id)
        if (
            record is None
            or record.kind != "credential"
            or record.tool != credential_tool(connector, name)
            or record.principal != principal
            or (record.status == "approved" and record.decided_by != OPERATOR.user)
        ):
            return "approval_mismatch", record
        return await self._settle(record, consume=consume), record

    async def check(
        self,
        approval_id: str,
        principal: Principal,
        tool: str,
        args: Mapping[str, Any],
        *,
        calls: str = "",
        sends: str = "",
        separate_approver: bool = False,
    ) -> tuple[ApprovalCheck, ApprovalRecord | None]:
        """Decide a retry. ``run`` is returned to exactly one caller per approval. ``calls``: where the
        call would go now (``call_target.what_it_calls``), ``sends``: the digest of the request it would
        send (``what_it_sends``); an approval of one that went elsewhere or sent other bytes (the
        action's method, URL, defaults or headers changed since, by a sync or a reload; the arguments
        placed otherwise) does not cover it. ``separate_approver``: the rules in force now want an approver
        other than the requester, whatever they wanted when it was asked for."""
        record = await self._store.get_approval(approval_id)
        if record is None or record.fingerprint != fingerprint(principal, tool, args):
            return "approval_mismatch", record
        if calls and record.calls and calls != record.calls:
            return "approval_mismatch", record
        if sends and record.sends and sends != record.sends:
            return "approval_mismatch", record
        if separate_approver and record.status == "approved" and not may_approve(_separate(record), record.decided_by):
            return "approval_mismatch", record  # the rules now want someone else to have approved it
        return await self._settle(record, consume=True), record

    async def unspend(self, approval_id: str) -> bool:
        """Give back an approval ``check`` consumed, for a call that stopped before its request was sent:
        the human approved one run, and none happened. True when it is approved again."""
        return await self._store.transition_approval(approval_id, "consumed", "approved", self._clock.now())

    async def _settle(self, record: ApprovalRecord, *, consume: bool) -> ApprovalCheck:
        """Where a matching approval stands; ``run`` (approved -> consumed, by compare-and-set) to one
        caller only. Without ``consume`` an approved one answers ``run`` and stays approved."""
        now = self._clock.now()
        if record.status in ("pending", "approved") and record.expires_at <= now:
            await self._store.transition_approval(record.id, record.status, "expired", now)
            return "approval_expired"
        match record.status:
            case "pending":
                return "pending"
            case "approved":
                if not consume:
                    return "run"
                won = await self._store.transition_approval(record.id, "approved", "consumed", now)
                return "run" if won else "approval_mismatch"
            case "denied":
                return "approval_denied"
            case "expired":
                return "approval_expired"
            case "consumed":
                # Already used once: a second run would exceed what the human approved.
                return "approval_mismatch"

    async def get(self, approval_id: str) -> ApprovalRecord | None:
        """The approval as it is now, whatever its status."""
        return await self._store.get_approval(approval_id)

    async def listed(self, status: ApprovalStatus | None = None) -> list[ApprovalRecord]:
        """The approvals with ``status`` (None: every one), each as ``as_of`` now shows it."""
        now = self._clock.now()
        rows = [as_of(r, now) for r in await self._store.list_approvals()]
        return [r for r in rows if status is None or r.status == status]

    async def pending(self, now: datetime) -> list[ApprovalRecord]:
        """The approvals still waiting for a decision at ``now`` (the caller's: a page shows it too)."""
        return [a for a in await self._store.list_approvals("pending") if a.expires_at > now]

    async def decide(self, approval_id: str, approve: bool, *, by: str | None = None) -> ApprovalRecord | None:
        """A human's decision; ``by`` is who (recorded; None when not known). Returns the updated
        record, or None if it was not pending.

        Raises:
            ApproverRefused: ``by`` may not approve this call (``may_approve``); denying is open to anyone.
            ArgumentsUnshown: its arguments were cut when stored, so nobody saw all of what would run.
        """
        now = self._clock.now()
        record = await self._store.get_approval(approval_id)
        if record is None or record.expires_at <= now:
            return None
        if approve and not may_approve(record, by):
            raise ApproverRefused(approval_id)
        if approve and not arguments_whole(record):
            raise ArgumentsUnshown(approval_id)
        status = "approved" if approve else "denied"
        if not await self._store.transition_approval(approval_id, "pending", status, now, by=by):
            return None
        event = self._decided.get(approval_id)
        if event is not None:
            event.set()
        if self.on_decided is not None:
            self.on_decided(approve)
        return await self._store.get_approval(approval_id)

    def stop_waiting(self) -> None:
        """The process is stopping: every ``wait`` returns the approval as it stands (still pending: its
        call answers ``pending_approval``, and the approval holds for a retry after the restart), now and
        from now on, instead of sleeping until the shutdown cancels it."""
        self._stopping = True
        for event in self._decided.values():
            event.set()

    async def wait(self, approval_id: str, timeout: float) -> ApprovalRecord | None:  # noqa: ASYNC109 - a bound, not a deadline to propagate
        """Block until the approval is no longer pending (decided, or past its expiry) or ``timeout``
        seconds (capped at ``MAX_WAIT_SECONDS``) pass; returns the record as it then is."""
        timeout = max(0.0, min(timeout, MAX_WAIT_SECONDS))
        event = self._decided.setdefault(approval_id, anyio.Event())
        self._waiters[approval_id] = self._waiters.get(approval_id, 0) + 1
        try:
            with anyio.move_on_after(timeout):
                while not self._stopping:
                    record = await self._store.get_approval(approval_id)
                    if record is None or record.status != "pending" or record.expires_at <= self._clock.now():
                        return record
                    # Woken at once by a decision in this process; else look again after a while,
                    # for one made by another process on the same database.
                    with anyio.move_on_after(self._poll):
                        await event.wait()
        finally:
            self._waiters[approval_id] -= 1
            if not self._waiters[approval_id]:
                del self._waiters[approval_id]
                self._decided.pop(approval_id, None)
        return await self._store.get_approval(approval_id)
