"""What one call learned on its way through the pipeline, for the audit row written after it.

A call can stop at any step (unknown action, invalid arguments, policy, credential, upstream), so
the audit row cannot be built where the result is: each step fills in what it found on the
``CallTrace`` the call carries, and ``audit_record`` turns it into the row once the result is known.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..services.approvals import fingerprint, fingerprint_of, redact_arguments
from ..services.audit import args_json, capped_preview
from ..services.identity import Principal
from ..services.logs import known_secrets
from ..store.contract import AuditRecord
from ..vocabulary.clock import Clock
from ..vocabulary.model import Action, AuditReason, AuditStatus, CallResult, Verdict
from .results import reason_code

__all__ = ["CallTrace"]


@dataclass
class CallTrace:
    """One attempt at a call: the action it resolved to, the policy verdict, the upstream's status."""

    action: Action | None = None
    """None while the name has not resolved to an action this principal may address."""
    verdict: Verdict | None = None
    upstream_status: int | None = None
    """The upstream's HTTP status, once it answered."""
    started: float = field(default_factory=time.perf_counter)
    upstream_seconds: float | None = None
    """Time spent waiting for the upstream (None when the call did not reach it), for the metrics."""
    on_upstream: Callable[[CallTrace], Awaitable[None]] | None = None
    """Awaited just before the request leaves for the upstream (the pipeline calls ``reach_upstream``):
    the ``Gateway`` writes the durable ``started`` audit row there."""
    call_id: str | None = None
    """Set once the call reached for the upstream: its ``started`` row and its outcome share it."""
    id_prefix: str = ""
    """The start of ``call_id``: the store's instance id, by which a gateway starting on the same
    database tells this process's calls in flight from those a dead one left."""
    unsent: bool = False
    """Reached for the upstream, then stopped before any of the request left (its credential unusable, a
    header the HTTP client refused): it cannot have taken effect."""
    throttled: str | None = None
    """Which of the gateway's own limits refused the call (``limits``), for the metrics."""
    redirected_to: str | None = None
    """The path a followed redirect led to, whose answer the call returned (its query left out)."""
    approved_by: str | None = None
    """Who approved the call it runs under (its approval's ``decided_by``), for the audit row."""
    _last: tuple[Action | None, Verdict | None, Principal, str, AuditRecord] | None = field(default=None, repr=False)
    """(action, verdict, principal, tool, row) of the last row built: an outcome that shows the same
    call is that row with its outcome's fields replaced, not a second validation of all 16; one of
    the same action and principal at least shows the same arguments (rendered and hashed once)."""

    async def reach_upstream(self) -> None:
        """The request is about to leave: give the call its id and tell ``on_upstream`` (once)."""
        if self.call_id is None:
            self.call_id = self.id_prefix + uuid.uuid4().hex[len(self.id_prefix) :]
            if self.on_upstream is not None:
                try:
                    await self.on_upstream(self)
                except BaseException:
                    self.call_id = None  # refused before it left: no call reached the upstream
                    raise

    def started_record(self, principal: Principal, tool: str, args: Mapping[str, Any], clock: Clock) -> AuditRecord:
        """The ``started`` row: what is known before the upstream answers."""
        return self._record(principal, tool, args, clock, status="started", reason=None)

    def cancelled_record(self, principal: Principal, tool: str, args: Mapping[str, Any], clock: Clock) -> AuditRecord:
        """The outcome of a call its client gave up on after the request left."""
        return self._record(principal, tool, args, clock, status="cancelled", reason=None)

    def interrupted_record(self, principal: Principal, tool: str, args: Mapping[str, Any], clock: Clock) -> AuditRecord:
        """The outcome of a call the gateway cut as it stopped, after the request left."""
        return self._record(principal, tool, args, clock, status="interrupted", reason=None)

    def audit_record(
        self, principal: Principal, tool: str, args: Mapping[str, Any], result: CallResult, clock: Clock
    ) -> AuditRecord:
        return self._record(principal, tool, args, clock, status=result.status, reason=reason_code(result))

    def _record(
        self,
        principal: Principal,
        tool: str,
        args: Mapping[str, Any],
        clock: Clock,
        *,
        status: AuditStatus,
        reason: AuditReason | None,
    ) -> AuditRecord:
        action, verdict = self.action, self.verdict
        varying = {
            "at": clock.now(),
            "status": status,
            "reason": reason,
            "upstream_status": self.upstream_status,
            "latency_ms": round((time.perf_counter() - self.started) * 1000, 3),
            "call_id": self.call_id,
            "approved_by": self.approved_by,
            "redirected_to": self.redirected_to,
        }
        last = self._last
        if last is not None and last[0] is action and last[2] is principal:
            if last[1] is verdict and last[3] is tool:
                # The call's ``started`` row with its outcome's fields, all typed already: no validation.
                return last[4].model_copy(update=varying)
            preview, digest = last[4].args_preview, last[4].fingerprint
        else:
            preview, digest = _preview_and_fingerprint(principal, action, args)
        # model_validate of a dict: the same validation as keyword arguments, without pydantic's
        # Python-level __init__.
        row = AuditRecord.model_validate(
            {
                "user": principal.user,
                "agent": principal.agent,
                "requested": _named(tool[:200]),
                "connector": action.connector if action else None,
                "action": action.qualified_name if action else None,
                "args_preview": preview,
                "fingerprint": digest,
                "verdict": verdict.action if verdict else None,
                "verdict_source": verdict.source if verdict else None,
                **varying,
            }
        )
        self._last = (action, verdict, principal, tool, row)
        return row


def _preview_and_fingerprint(
    principal: Principal, action: Action | None, args: Mapping[str, Any]
) -> tuple[str, str | None]:
    """The row's arguments preview and the call's fingerprint, serializing ``args`` once when no
    argument needed redacting (the fingerprint's canonical JSON holds the preview's text then)."""
    redacted = redact_arguments(args)
    text = args_json(redacted)
    preview = capped_preview(text)
    if action is None:
        return preview, None
    if redacted == args:
        return preview, fingerprint_of(principal, action.qualified_name, text)
    return preview, fingerprint(principal, action.qualified_name, args)


def _named(tool: str) -> str:
    """The name the agent asked for, any stored secret in it redacted (a name is the agent's text)."""
    known = known_secrets()
    return known.redact(tool) if known else tool
