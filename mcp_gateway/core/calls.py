"""One attempt at a call: grant -> arguments -> policy -> credential -> approval -> run -> result.

``CallPipeline.attempt`` turns a tool name and arguments into a ``CallResult``, filling the
``CallTrace`` the audit row is built from. The order matters: the call is prepared, and the
credential looked up, before any approval is asked for or consumed, so a human never approves a
call that cannot run, nor burns an approval on one. Whatever the upstream echoes back is redacted
(every secret the call sent is known to the ``Redactor``) before it leaves. Waiting for a human's
decision and writing the audit row are the ``Gateway``'s: one attempt here, maybe two per call.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import anyio
import httpx2

from ..auth import LastMeterAuth
from ..auth.oauth2 import AuthorizationRefused
from ..execution.executor import Executor, Prepared
from ..execution.http_request import sent_arguments
from ..execution.response import Outcome
from ..execution.send import RedirectJudge
from ..manifest import ConnectorConfig
from ..policy import effective_risk
from ..primitives.escapes import escaped
from ..primitives.projection import project, unmatched
from ..primitives.redaction import Redactor
from ..primitives.secrets import PROJECT_WIDE, CredentialKey
from ..primitives.upstream_text import noting_withheld
from ..services.approvals import ApprovalService, ArgumentsTooLong, fingerprint, redact_arguments
from ..services.audit import args_preview
from ..services.identity import Principal, granted_connectors
from ..services.links import LinkService
from ..tracing import finished_span, span
from ..vocabulary.errors import (
    ArgumentError,
    AuthorizationEnded,
    CredentialError,
    CredentialMissing,
    StoredSecretMisfit,
    StoreUnavailable,
    ToolsChanged,
    UnsupportedAuth,
    UpstreamError,
)
from ..vocabulary.model import (
    Action,
    CallResult,
    Denied,
    ErrorResult,
    NeedsAuth,
    Ok,
    PendingApproval,
    RequestBinding,
    Verdict,
)
from .admission import TrafficGate
from .call_target import carried_credential, what_it_calls, what_it_does, what_it_sends
from .catalogs import Catalogs
from .credential_broker import CredentialBroker
from .credential_changes import CredentialChanges
from .credential_origins import answered_key, refused_note
from .executors import Executors
from .health import StoreHealth, store_unavailable_result
from .permissions import Permissions
from .refusals import failed_envelope, failed_in_body, refusal, several_choices, unauthorized
from .results import clean_result, redacted_json
from .trace import CallTrace
from .whole_numbers import whole_numbers
from .withheld_errors import WithheldErrors

__all__ = ["CallPipeline"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024


def _cut_before_parsed(outcome: Outcome) -> bool:
    """A JSON answer (labelled, or unlabelled text) cut at the read cap, and so left as text."""
    media = outcome.content_type
    return outcome.truncated and isinstance(outcome.data, str) and (media.endswith("json") or not media)


def _size(limit: int) -> str:
    return f"{limit // 1024} KiB" if limit % 1024 == 0 else f"{limit} bytes"


_APPROVAL_REFUSALS: dict[Literal["approval_denied", "approval_expired", "approval_mismatch"], str] = {
    "approval_denied": "A human denied this call. Do not retry it; tell the user or choose another way.",
    "approval_expired": "The approval expired before it was used. Call again without approval_id for a new one.",
    "approval_mismatch": "This approval_id does not cover this exact call (tool and arguments) or was "
    "already used. Call again without approval_id to ask for a new approval.",
}


class CallPipeline:
    """Runs calls for one gateway, over its collaborators."""

    def __init__(
        self,
        *,
        catalogs: Catalogs,
        permissions: Permissions,
        credentials: CredentialBroker,
        executors: Executors,
        approvals: ApprovalService,
        links: LinkService,
        changes: CredentialChanges,
        health: StoreHealth,
        traffic: TrafficGate,
        withheld: WithheldErrors,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self._catalogs = catalogs
        self._permissions = permissions
        self._credentials = credentials
        self._executors = executors
        self._approvals = approvals
        self._links = links
        self._changes = changes
        self.max_response_bytes = max_response_bytes
        self._health = health
        self.traffic = traffic
        """Rate limits, concurrency caps, circuit breakers and read retries."""
        self._withheld = withheld

    async def attempt(
        self,
        principal: Principal,
        tool: str,
        args: dict[str, Any],
        approval_id: str | None,
        fields: Sequence[str] | None,
        trace: CallTrace,
    ) -> CallResult:
        """One attempt; an unexpected failure becomes an ``internal_error`` result (and a log entry),
        an unreachable store ``store_unavailable`` (logged once per outage, see ``StoreHealth``).
        Whatever upstream text was withheld from the answer on the way is logged and kept for the
        operator's review (``WithheldErrors``)."""
        with noting_withheld() as withheld:
            try:
                result = await self._attempt(principal, tool, args, approval_id, fields, trace)
            except StoreUnavailable as exc:
                self._health.failed(exc)
                result = store_unavailable_result(exc)
            except Exception:
                logger.exception("call of %s failed unexpectedly", tool)
                result = ErrorResult(
                    reason="internal_error",
                    message=f"The gateway failed while running {tool!r}. The operator can find details in its log.",
                )
            else:
                if not isinstance(result, Ok):  # an Ok is cleaned by _run, where its JSON text was at hand
                    # Upstream text is untrusted: cleaned, and bounded per connector, before the model reads it.
                    cfg = self._catalogs.config_of(trace.action.connector) if trace.action is not None else None
                    result = clean_result(result, cfg.max_result_chars if cfg is not None else None)
        # Kept by the action an agent reached (a connector's own load error is kept by its sync).
        if withheld and trace.action is not None:
            try:
                await self._withheld.note(trace.action.qualified_name, withheld)
            except Exception:
                # The answer stands: the agent already reads that the text was withheld.
                logger.warning(
                    "the error text withheld from the agent's call of %s could not be kept", tool, exc_info=True
                )
        return result

    async def recover(self, principal: Principal, name: str) -> ErrorResult | None:
        """For a name that resolved to nothing: when it names a visible connector in error, try to
        reload it (back-off permitting). None when there is nothing to recover or it recovered."""
        slug = self._permissions.connector_of(principal, name)
        return None if slug is None else await self._catalogs.recover(slug, principal=principal.user)

    async def _recover_or_connect(self, principal: Principal, name: str) -> ErrorResult | NeedsAuth | None:
        """``recover``, and a connect link instead of its error when the connector could not load for
        want of this caller's credential (an upstream MCP server that needs one to list its tools)."""
        slug = self._permissions.connector_of(principal, name)
        refused = self._catalogs.refused_credential.get(slug) if slug is not None else None
        if slug is not None and refused is not None:
            sealed = await self._credentials.sealed(self._catalogs.config(slug), principal.user)
            if sealed is None or sealed.fingerprint == refused:
                return await self.connect_result(
                    principal, slug, f"{slug} rejected the stored credential (401); ask the user to reconnect."
                )
            self._catalogs.backoff.succeeded(slug)  # stored since, elsewhere (a CLI): worth a try at once
        if slug is not None and slug in self._catalogs.awaiting_credential:
            # Asked before any reload: one that fails for want of it would put the next attempt, right
            # after the human connects, behind the back-off.
            missing = (await self._credentials.for_call(self._catalogs.config(slug), principal.user)).missing
            if missing is not None:
                return await self.connect_result(principal, slug, missing)
        return await self.recover(principal, name)

    async def connect_result(self, principal: Principal, slug: str, reason: str) -> NeedsAuth:
        minted = await self._changes.mint(principal, self._catalogs.config(slug), "connect")
        return NeedsAuth(connector=slug, connect_url=minted.url, reason=reason + minted.note())

    async def _attempt(
        self,
        principal: Principal,
        tool: str,
        args: dict[str, Any],
        approval_id: str | None,
        fields: Sequence[str] | None,
        trace: CallTrace,
    ) -> CallResult:
        manifest = self._catalogs.manifest
        if manifest.agents is not None and not granted_connectors(manifest, principal):
            return Denied(
                reason="connector_not_assigned",
                message="This session's agent is granted no connectors. Ask the operator to add it to the manifest.",
            )
        action = self._permissions.lookup(principal, tool, include_hidden=True)
        if action is None:
            # A connector whose upstream was down at sync may be back: the first call reloads it.
            unavailable = await self._recover_or_connect(principal, tool)
            if unavailable is not None:
                return unavailable
            action = self._permissions.lookup(principal, tool, include_hidden=True)
        if action is None:
            return await self._permissions.not_found(principal, tool)
        trace.action = action
        cfg = self._catalogs.config(action.connector)
        # Looked up before any refusal below is recorded: the audit row redacts it even when it was
        # stored by another process a moment ago.
        sealed = await self._credentials.learned(cfg, principal.user)
        if self._catalogs.quarantined(action.qualified_name) is not None:
            await self._catalogs.refresh_decisions()  # approved elsewhere (the CLI) since?
            if self._catalogs.quarantined(action.qualified_name) is not None:
                return Denied(
                    reason="quarantined",
                    message=f"{action.qualified_name} is held for review: its upstream added or changed it, or its "
                    "text reads as instructions. An operator must review and approve it (`mcp-gateway review` or "
                    "the operator page) before it can be called.",
                )
        fixed = self._permissions.fixed_verdict(action)
        if fixed is not None and fixed.action == "block":
            # Blocked whatever the arguments: said before they are checked, so the schema of an action
            # discover and describe do not show is never told through argument errors.
            trace.verdict = fixed
            return _blocked(fixed)
        errors = self._catalogs.validate(action, args)
        if errors:
            return Denied(
                reason="invalid_args",
                message=f"The arguments do not match {action.qualified_name}'s input schema; fix them and call again.",
                errors=errors,
            )
        args = whole_numbers(action.input_schema, args)
        executor = self._executors.for_binding(action.binding)
        generic = isinstance(action.binding, RequestBinding)
        verdict: Verdict | None = None
        if not generic:
            verdict = trace.verdict = self._decide(action, args, None, None)
            if verdict.action == "block":
                return _blocked(verdict)
        if executor is None:
            return ErrorResult(
                reason="connector_error", message=f"This build cannot run {action.binding.kind} actions yet."
            )
        base_url = await self._catalogs.base_url(action.connector)
        try:
            prepared = executor.prepare(action, args, cfg, base_url)
        except ArgumentError as exc:
            return Denied(reason="invalid_args", message=str(exc), errors=exc.errors or None)
        except UpstreamError as exc:
            return ErrorResult(reason=exc.reason, message=str(exc))
        if verdict is None:
            # The generic request is judged as the request it builds: the path it sends, and the curated
            # actions that method and path reach.
            verdict = trace.verdict = self._decide(action, args, prepared, base_url)
            if verdict.action == "block":
                return _blocked(verdict)
        with span("mcp_gateway.credential", attributes={"mcp_gateway.auth.kind": cfg.auth.type}, current=False):
            credential = await self._credentials.for_call(cfg, principal.user, sealed=sealed)
        if credential.missing is not None:
            return await self.connect_result(principal, cfg.slug, credential.missing)
        spent: str | None = None  # the approval this attempt consumed
        if verdict.action == "require_approval":
            carries = carried_credential(cfg.slug, credential.sealed)
            gate = await self._approval_gate(principal, prepared, args, verdict, approval_id, trace, carries)
            if gate is not None:
                return gate
            spent = approval_id
        try:
            admitted = await self.traffic.admit(manifest, principal, action)
            if isinstance(admitted, ErrorResult):
                if admitted.reason == "rate_limited":
                    trace.throttled = "limits"
                return admitted
            with admitted:  # concurrency slots held until the call has its result
                redactor = Redactor()
                auth = self._credentials.auth_for(cfg, principal.user, credential.sealed, on_secret=redactor.add)
                redirects = self._redirect_judge(action, args, base_url) if base_url else None
                return await self._run(principal, executor, prepared, fields, trace, auth, redactor, redirects)
        finally:
            # A human approved one run: a call stopped before its request could leave (a rate limit, a
            # start the store could not record, a credential or a header refused before sending) has not
            # used it. Past that point it has, whatever came back (a 401 answers a request it received).
            if spent is not None and (trace.call_id is None or trace.unsent):
                with anyio.CancelScope(shield=True):
                    await self._unspend(spent, action.qualified_name)

    def _redirect_judge(self, action: Action, args: Mapping[str, Any], base_url: str) -> RedirectJudge:
        """How a read's same-origin redirect is judged: followed only when the policy would run the
        request it leads to without asking anyone (a human approved the URL the page showed, not this one)."""

        def judge(hop: httpx2.Request) -> str | None:
            verdict = self._permissions.hop_verdict(action, args, hop, base_url)
            if verdict.action == "always_run":
                return None
            if verdict.action == "block":
                return f"a {verdict.source} policy rule ({verdict.rule}) blocks that request"
            return f"that request would need a human's approval ({verdict.source} policy), and none was asked for it"

        return judge

    def _decide(
        self, action: Action, args: Mapping[str, Any], prepared: Prepared | None, base_url: str | None
    ) -> Verdict:
        deciding = time.time_ns()
        if prepared is not None and prepared.request is not None and base_url:
            verdict = self._permissions.request_verdict(action, args, prepared.request, base_url)
        else:
            verdict = self._permissions.verdict(action, args)
        finished_span(
            "mcp_gateway.policy",
            deciding,
            {
                "mcp_gateway.action": action.qualified_name,
                "mcp_gateway.policy.decision": verdict.action,
                "mcp_gateway.policy.source": verdict.source,
            },
        )
        return verdict

    async def _unspend(self, approval_id: str, tool: str) -> None:
        try:
            restored = await self._approvals.unspend(approval_id)
        except Exception as exc:  # the store may be the reason the call stopped: the approval stays used
            logger.warning(
                "approval %s of %s stays used though its call did not run: %s", approval_id, tool, type(exc).__name__
            )
            return
        if restored:
            logger.info("approval %s of %s holds again: its call stopped before it was sent", approval_id, tool)

    async def _approval_gate(
        self,
        principal: Principal,
        prepared: Prepared,
        args: Mapping[str, Any],
        verdict: Verdict,
        approval_id: str | None,
        trace: CallTrace,
        carries: str = "",
    ) -> CallResult | None:
        """None when the call may run now; else the result that stops it."""
        action = prepared.action
        if approval_id:
            target = what_it_calls(prepared)
            calls, sends = target + carries, what_it_sends(prepared)
            separate = self._catalogs.manifest.approvals.separate_approver or verdict.separate_approver
            outcome, record = await self._approvals.check(
                approval_id,
                principal,
                action.qualified_name,
                args,
                calls=calls,
                sends=sends,
                separate_approver=separate,
            )
            if outcome == "run":
                trace.approved_by = record.decided_by if record is not None else None
                return None
            if outcome == "pending":
                if record is None:  # not reachable: a pending check comes with its record
                    outcome = "approval_mismatch"
                else:
                    url, _ = await self._links.mint(
                        "approval", connector=action.connector, principal=principal.user, approval_id=record.id
                    )
                    return _pending(
                        record.id, url, record.summary, record.expires_at.isoformat(), record.separate_approver
                    )
            message = _APPROVAL_REFUSALS[outcome]
            if record is not None and record.fingerprint == fingerprint(principal, action.qualified_name, args):
                if record.calls and record.calls != calls:
                    message = (
                        f"The action changed since this call was approved: the human approved {record.calls}, "
                        f"it would now send {calls}. Call again without approval_id to ask for a new approval."
                    )
                elif record.sends and record.sends != sends:
                    # The credential clause closes the sentence: in its middle it read as the
                    # credential having other headers.
                    message = (
                        f"This call would not send the request the human approved: {target} with other headers "
                        "or another body (the action's definition changed since, or its arguments are placed "
                        f"otherwise){carries}. Call again without approval_id to ask for a new approval."
                    )
                elif separate and record.status == "approved":
                    message = (
                        "The rules now want this call approved by someone other than who asked for it, and this "
                        "approval was not. Call again without approval_id to ask for a new approval."
                    )
            return Denied(reason=outcome, message=message, source=verdict.source, rule=verdict.rule)
        shown = sent_arguments(action, args)
        summary = f"{action.qualified_name} ({effective_risk(action, args)}) {args_preview(redact_arguments(shown))}"
        separate = self._catalogs.manifest.approvals.separate_approver
        try:
            record = await self._approvals.request(
                principal,
                action,
                args,
                verdict,
                summary,
                separate_approver=separate,
                does=what_it_does(action),
                calls=what_it_calls(prepared) + carries,
                sends=what_it_sends(prepared),
                shown=shown,
            )
        except ArgumentsTooLong as exc:
            return Denied(reason="invalid_args", message=str(exc), source=verdict.source, rule=verdict.rule)
        url, _ = await self._links.mint(
            "approval", connector=action.connector, principal=principal.user, approval_id=record.id
        )
        return _pending(record.id, url, summary, record.expires_at.isoformat(), record.separate_approver)

    async def _unsent(self, principal: Principal, cfg: ConnectorConfig, exc: Exception) -> CallResult:
        """The answer to a call stopped before its request left (``_run``)."""
        if isinstance(exc, ArgumentError):
            return Denied(reason="invalid_args", message=str(exc), errors=exc.errors or None)
        if isinstance(exc, UnsupportedAuth):
            return ErrorResult(reason="connector_error", message=str(exc))
        if isinstance(exc, AuthorizationEnded):
            return await self.connect_result(principal, cfg.slug, str(exc))
        if isinstance(exc, AuthorizationRefused):
            logger.warning("oauth2 token request for %s was refused: %s", cfg.slug, exc.code or "no error code")
            if exc.configuration:  # the manifest's scopes or flow, which no stored client can change
                return ErrorResult(
                    reason="connector_error",
                    message=f"{exc}: {exc.configuration}. Reconnecting would not help: tell the operator.",
                )
            if exc.code and not exc.client_refused:
                # A code the gateway has no meaning for: what it means is not guessed.
                return ErrorResult(
                    reason="auth_failed",
                    message=f"{exc}; the gateway cannot tell why (the provider's explanation is not quoted: it may "
                    "repeat what was sent). Tell the operator, who can look at the provider's side; if the stored "
                    f"client credentials are wrong, storing them again (connect {cfg.slug}) fixes it.",
                )
            # The token endpoint refused the stored client (client credentials), by its code or with none the
            # gateway can read: a human must enter it again.
            said = f"{exc}; the stored client credentials may be wrong: ask the user to reconnect."
            return await self.connect_result(principal, cfg.slug, said)
        if isinstance(exc, StoredSecretMisfit):
            # Stored before values were checked against the templates (or by an older version): calling
            # again sends the same value, so the answer says what it lacks and who can fix it.
            logger.warning("credential for %s cannot fill its header templates: %s", cfg.slug, exc)
            said = (
                f"{exc} A human must store it again, with every field, through the link in connect_url; "
                "calling again will not help until then."
            )
            return await self.connect_result(principal, cfg.slug, said)
        # These messages name no value (the master key changed, the credential modified): they say what to do.
        logger.warning("credential for %s unusable: %s", cfg.slug, exc)
        return await self.connect_result(principal, cfg.slug, "The stored credential cannot be used; reconnect.")

    async def _run(
        self,
        principal: Principal,
        executor: Executor,
        prepared: Prepared,
        fields: Sequence[str] | None,
        trace: CallTrace,
        auth: LastMeterAuth,
        redactor: Redactor,
        redirects: RedirectJudge | None,
    ) -> CallResult:
        cfg = prepared.connector
        await trace.reach_upstream()
        sent = time.perf_counter()
        try:
            try:
                outcome = await self._send(executor, prepared, auth, redirects)
            except ToolsChanged as changed:
                # Loaded and reviewed again before anything is called: a tool changed to say or do
                # something else is held, as a sync holds it.
                logger.warning("connector %s: its MCP server changed its tools; loading them again", changed.slug)
                await self._catalogs.refresh(changed.slug, principal=principal.user, changed=True)
                if (held := self._catalogs.quarantined(prepared.action.qualified_name)) is not None or (
                    self._permissions.lookup(principal, prepared.action.qualified_name) is None
                ):
                    trace.unsent = True
                    return Denied(
                        reason="quarantined" if held is not None else "action_not_found",
                        message=f"{prepared.action.qualified_name} changed upstream since it was reviewed, and is "
                        "held until an operator reviews it again (`mcp-gateway review` or the operator page). "
                        "Nothing was sent.",
                    )
                try:
                    outcome = await self._send(executor, prepared, auth, redirects)
                except ToolsChanged:
                    # Listed differently again right after loading them: which tool this name would
                    # reach cannot be told, so nothing is sent.
                    trace.unsent = True
                    return ErrorResult(
                        reason="upstream_error",
                        message=f"{changed.slug}'s MCP server listed different tools again right after they were "
                        f"loaded, so {prepared.action.qualified_name} was not sent. Nothing was sent; try again "
                        "later, and ask the operator to check the server if it persists.",
                    )
        except (ArgumentError, CredentialMissing, CredentialError, UnsupportedAuth, AuthorizationRefused) as exc:
            trace.unsent = True  # refused before the request left
            return await self._unsent(principal, cfg, exc)
        except UpstreamError as exc:
            trace.unsent = not exc.sent
            trace.upstream_status = exc.upstream_status
            trace.upstream_seconds = time.perf_counter() - sent
            if exc.forbidden:  # a permission refused in the protocol's words: final, as a 403 is
                return Denied(reason="upstream_forbidden", message=redactor.redact_text(str(exc)))
            fallback = self._fallback_hint(prepared.action) if exc.reason == "upstream_error" else ""
            if exc.drifted and self._catalogs.drifted(cfg.slug):
                fallback = (
                    f"{cfg.slug}'s schema seems to have changed upstream since the gateway loaded it, and the gateway "
                    f"is loading it again: describe {prepared.action.qualified_name} again in a few seconds (or "
                    "discover, if it is gone) and call with what it says."
                )
            wait = f"Wait {exc.retry_after:g} s before calling again (retry_after)." if exc.retry_after else ""
            return ErrorResult(
                reason=exc.reason,
                message=redactor.redact_text(str(exc)),
                upstream_status=exc.upstream_status,
                upstream_message=redactor.redact_text(exc.upstream_message) if exc.upstream_message else None,
                retry_after=exc.retry_after,
                hint=(wait or fallback.strip()) or None,
            )
        trace.upstream_status = outcome.http_status
        trace.upstream_seconds = time.perf_counter() - sent
        carried = answered_key(cfg, auth.credential.key, principal.user) if auth.credential is not None else None
        # Which revision the call carried, by the digest of the sealed value it sent (an OAuth2 sign-in's
        # token set is not the sealed client it carried: unknown there, taken as the one stored).
        sent_print = (
            auth.credential.fingerprint if auth.credential is not None and carried == auth.credential.key else None
        )
        if outcome.redirected_to is not None:
            trace.redirected_to = redactor.redact_text(outcome.redirected_to)
        if outcome.http_status == 401:
            refused = unauthorized(prepared.connector.slug, outcome, redactor)
            if isinstance(refused, Denied):
                return refused
            note = await self._refused(cfg.slug, carried, prepared.action.qualified_name, sent_print)
            if isinstance(note, ErrorResult):
                return note
            return await self.connect_result(principal, cfg.slug, refused + note)
        if carried is not None and outcome.http_status is not None and outcome.http_status < 400:
            # The upstream answered: a database outage now must not turn what ran into "nothing was run".
            # The record's mark waits for a later success instead.
            with contextlib.suppress(StoreUnavailable):
                await self._changes.origins.accepted(carried, fingerprint=sent_print)
        if outcome.http_status is not None and outcome.http_status >= 400:
            return refusal(prepared, outcome, redactor, self._fallback_hint(prepared.action))
        if outcome.http_status == 300:  # a Location would have been followed or refused as a redirect
            return several_choices(prepared, outcome, redactor)
        if flag := failed_in_body(outcome.data):
            # Slack's way (and others'): HTTP 200 whose body says the call failed, or was rate limited.
            return failed_envelope(prepared, outcome, redactor, flag)
        data, text = redacted_json(outcome, redactor)
        missed: list[str] = []
        note = None
        if fields and _cut_before_parsed(outcome):
            # No path can be looked up in JSON that was never parsed: none is said to match nothing.
            note = (
                f"The answer was larger than the {_size(self.max_response_bytes)} the gateway reads, so it was cut "
                "before it could be read as JSON and `fields` could not be applied; data is its start as text. "
                "Narrow the request (paging, filters, a smaller page size) to get an answer that fits."
            )
        elif fields:
            missed = unmatched(data, fields)
            data, text = project(data, fields), None
        ok = Ok(
            http_status=outcome.http_status,
            data=data,
            truncated=outcome.truncated or None,
            unmatched_fields=missed or None,
            note=note,
        )
        # Upstream text is untrusted: cleaned, and bounded per connector, before the model reads it.
        return clean_result(ok, cfg.max_result_chars, text=text, redactor=redactor)

    async def _refused(
        self, slug: str, carried: CredentialKey | None, action: str, fingerprint: str | None
    ) -> str | ErrorResult:
        """Mark the team-wide credential a call of ``action`` carried refused by its upstream; what the
        agent (and the human it tells) should know of it: who stored it and when, and which call drew it.
        A call that carried a credential replaced while it ran marks nothing: its answer says so, and
        that calling again sends the one stored now (no reconnecting, no new approval)."""
        if carried is None or carried.principal != PROJECT_WIDE:
            return ""  # a personal credential's user is the one told to reconnect
        try:
            origin = await self._changes.origins.refused(carried, 401, action, fingerprint=fingerprint)
        except StoreUnavailable:
            return ""  # the 401 is told as it is; who stored the credential waits for the database
        if origin is not None and not origin.carried_by(fingerprint):
            return ErrorResult(
                reason="auth_failed",
                message=f"{slug} answered 401 to {escaped(action)}, which carried the team-wide credential stored "
                f"before the one stored now: it was {origin.told()} while this call ran. The one stored now has "
                "not been tried.",
                upstream_status=401,
                hint="Call again: the next call carries the credential stored now. Nobody needs to reconnect.",
            )
        note = refused_note(slug, origin)
        return f" {note}" if note else ""

    async def _send(
        self, executor: Executor, prepared: Prepared, auth: LastMeterAuth, redirects: RedirectJudge | None
    ) -> Outcome:
        """Run the request, telling the circuit breaker how it went; a read that met a transient
        failure (timeout, refused connection, 429/503/502/504) is tried again per ``retries.reads``."""
        cfg, action = prepared.connector, prepared.action
        attempt = 0
        while True:
            try:
                outcome = await executor.run(
                    prepared, auth=auth, max_bytes=self.max_response_bytes, redirects=redirects
                )
            except UpstreamError as exc:
                transient = exc.reason in ("upstream_timeout", "upstream_unreachable")
                # A broken exchange (garbage, a cut body) is the upstream failing as much as a 503; a
                # request refused before it left says nothing about the upstream either way.
                if transient or exc.broken or exc.sent:
                    self.traffic.outcome(cfg.slug, failed=transient or exc.broken)
                delay = self.traffic.retry_delay(cfg, action, attempt, None) if transient else None
                if delay is None:
                    raise
                status = exc.upstream_status
            else:
                status = outcome.http_status
                failed = status is not None and (status >= 500 or status == 429)
                self.traffic.outcome(cfg.slug, failed=failed)
                retryable = status in _TRANSIENT_STATUSES
                delay = self.traffic.retry_delay(cfg, action, attempt, outcome.retry_after) if retryable else None
                if delay is None:
                    return outcome
            opened = self.traffic.breaker_refusal(cfg.slug)
            if opened is not None:  # the circuit opened meanwhile: no more attempts, and say for how long
                raise UpstreamError(
                    "upstream_unavailable",
                    f"Not retried: {opened.message}",
                    upstream_status=status,
                    retry_after=opened.retry_after,
                )
            logger.info("retrying read %s in %.2f s (attempt %d)", action.qualified_name, delay, attempt + 2)
            await self.traffic.sleep(delay)
            attempt += 1

    def _fallback_hint(self, action: Action) -> str:
        """A sentence pointing at the connector's generic request action, when it has one and this
        call was not already through it: the way around a curated action that cannot say something."""
        fallback = self._catalogs.request_fallback(action)
        if fallback is None:
            return ""
        return (
            f" If this action cannot express the call, {fallback.qualified_name} sends any HTTP request to the same "
            "API with the connector's credentials (describe it first)."
        )


_TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})


def _blocked(verdict: Verdict) -> Denied:
    return Denied(
        reason="policy_block",
        message=f"A {verdict.source} policy rule ({verdict.rule}) blocks this call. Choose another action "
        "or ask the operator to change the policy.",
        source=verdict.source,
        rule=verdict.rule,
    )


def _pending(approval_id: str, url: str, summary: str, expires_at: str, separate: bool = False) -> PendingApproval:
    answer = PendingApproval(approval_id=approval_id, approval_url=url, summary=summary, expires_at=expires_at)
    if separate:  # the user this session acts for can only deny it: someone else must approve
        return answer.model_copy(update={"reason": _SEPARATE_REASON})
    return answer


_SEPARATE_REASON = (
    "This action needs the approval of someone other than the user this session acts for (separate "
    "approver): send the link to another approver (an operator, a teammate); after they approve, retry "
    "the same call with approval_id."
)
