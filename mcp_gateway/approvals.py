"""Per-call approvals (SPEC 2.7): one approval covers exactly one call, once, before it expires.

An approval is bound to the fingerprint of (principal, qualified tool, canonical final args).
The agent's retry with ``approval_id`` runs only if the fingerprint matches and the status moves
``approved -> consumed`` by compare-and-set, so concurrent retries reach the upstream once.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal

from .clock import Clock
from .identity import Principal
from .model import Action, Verdict
from .store.base import ApprovalRecord, Store

__all__ = ["ApprovalCheck", "ApprovalService", "fingerprint"]

DEFAULT_TTL = timedelta(minutes=15)
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


class ApprovalService:
    def __init__(self, store: Store, clock: Clock, *, ttl: timedelta = DEFAULT_TTL) -> None:
        self._store = store
        self._clock = clock
        self._ttl = ttl

    async def request(
        self, principal: Principal, action: Action, args: Mapping[str, Any], verdict: Verdict, summary: str
    ) -> ApprovalRecord:
        now = self._clock.now()
        record = ApprovalRecord(
            id="apr_" + secrets.token_urlsafe(16),
            fingerprint=fingerprint(principal, action.qualified_name, args),
            principal=principal.user,
            agent=principal.agent,
            tool=action.qualified_name,
            risk=action.risk,
            summary=summary,
            verdict_source=verdict.source,
            verdict_rule=verdict.rule,
            created_at=now,
            expires_at=now + self._ttl,
        )
        await self._store.put_approval(record)
        return record

    async def check(
        self, approval_id: str, principal: Principal, tool: str, args: Mapping[str, Any]
    ) -> tuple[ApprovalCheck, ApprovalRecord | None]:
        """Decide a retry. ``run`` is returned to exactly one caller per approval."""
        record = await self._store.get_approval(approval_id)
        if record is None or record.fingerprint != fingerprint(principal, tool, args):
            return "approval_mismatch", record
        now = self._clock.now()
        if record.status in ("pending", "approved") and record.expires_at <= now:
            await self._store.transition_approval(record.id, record.status, "expired", now)
            return "approval_expired", record
        match record.status:
            case "pending":
                return "pending", record
            case "approved":
                won = await self._store.transition_approval(record.id, "approved", "consumed", now)
                return ("run" if won else "approval_mismatch"), record
            case "denied":
                return "approval_denied", record
            case "expired":
                return "approval_expired", record
            case "consumed":
                # Already used once: a second run would exceed what the human approved.
                return "approval_mismatch", record

    async def decide(self, approval_id: str, approve: bool) -> ApprovalRecord | None:
        """A human's decision. Returns the updated record, or None if it was not pending."""
        now = self._clock.now()
        record = await self._store.get_approval(approval_id)
        if record is None or record.expires_at <= now:
            return None
        if not await self._store.transition_approval(approval_id, "pending", "approved" if approve else "denied", now):
            return None
        return await self._store.get_approval(approval_id)
