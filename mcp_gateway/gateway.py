"""The gateway core: grant -> policy -> credential -> run -> audit, for every meta-tool.

``Gateway`` is the one place that turns a request into an agent-facing result. It takes its
collaborators (store, vault, discovery index, HTTP client, clock, link and approval services,
auditor) already built, so each decision path is testable in isolation. Nothing here holds a
plaintext secret: the credential travels sealed into ``LastMeterAuth``, which opens it while the
outbound request is built, and whatever the upstream echoes back is redacted before it leaves.

Here: the meta-tools and the call pipeline. Loading connectors is ``_gateway_catalog.CatalogLifecycle``
and the grant/policy view ``_gateway_permissions.PermissionView`` (mixins over the state set up in
``Gateway.__init__``); result shaping is ``_gateway_results``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import httpx2
import jsonschema

from ._gateway_permissions import SUGGESTIONS as SUGGESTIONS
from ._gateway_permissions import PermissionView
from ._gateway_results import _reason_code, _redact_data, _summary, result_payload
from .approvals import MAX_WAIT_SECONDS, ApprovalService, fingerprint, redact_arguments
from .audit import Auditor, args_preview
from .auth import LastMeterAuth, MtlsClients, needs_secret
from .auth.oauth2 import OAuth2Tokens
from .clock import Clock
from .core.sync import ConnectorCatalog
from .credentials import CredentialVault
from .discovery import DiscoveryIndex, summary_of
from .errors import ArgumentError, CredentialError, CredentialMissing, UnsupportedAuth, UpstreamError
from .execution.executor import Executor, HttpExecutor, Prepared
from .execution.graphql import GraphQLExecutor
from .execution.request_action import RequestExecutor
from .identity import Principal, granted_connectors
from .links import LinkService
from .manifest import Manifest, OAuth2Auth
from .model import (
    Action,
    ActionSummary,
    CallResult,
    ConnectorInfo,
    Denied,
    ErrorResult,
    NeedsAuth,
    Ok,
    PendingApproval,
    RequestBinding,
    Verdict,
)
from .policy import effective_risk
from .projection import project
from .recovery import Backoff, connector_named
from .redaction import Redactor
from .secrets import SealedCredential
from .sources.graphql import GraphQLSchemas
from .store.base import AuditRecord, Store

__all__ = ["Gateway", "result_payload"]

logger = logging.getLogger(__name__)
DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024
DETAIL_SCHEMAS = 3
"""How many of discover's first results carry their full input schema when asked with ``detail``."""


class Gateway(PermissionView):
    def __init__(
        self,
        *,
        manifest: Manifest,
        store: Store,
        vault: CredentialVault,
        clock: Clock,
        http: httpx2.AsyncClient,
        links: LinkService,
        approvals: ApprovalService,
        auditor: Auditor,
        index: DiscoveryIndex | None = None,
        executors: Mapping[str, Executor] | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        oauth2: OAuth2Tokens | None = None,
        page_key: bytes | None = None,
    ) -> None:
        self.manifest = manifest
        self.store = store
        self.vault = vault
        self.clock = clock
        self.http = http
        self.graphql_schemas = GraphQLSchemas()
        """Schemas of GraphQL connectors, filled by sync, for checking an agent's ``__select``."""
        # mTLS clients resolve a relative auth.ca_file against the manifest in force at the time.
        self._http_executor = http_executor = HttpExecutor(
            http, client_certificates=MtlsClients(resolve=lambda ref: self.manifest.resolve(ref))
        )
        self.executors: dict[str, Executor] = {
            "openapi": http_executor,
            "http": http_executor,
            "postman": http_executor,
            "graphql": GraphQLExecutor(http, self.graphql_schemas, client_for=http_executor.client_for),
            "request": RequestExecutor(http_executor),
            **(executors or {}),
        }
        """By binding kind; sources that are not plain HTTP register theirs here."""
        self.links = links
        self.approvals = approvals
        self.auditor = auditor
        # Not ``index or …``: an index is falsy while empty, and the one passed may carry a re-ranker.
        self.index = index if index is not None else DiscoveryIndex()
        self.max_response_bytes = max_response_bytes
        self.oauth2 = oauth2 or OAuth2Tokens(http, vault, clock, store=store, project=manifest.project)
        """Access tokens of ``oauth2`` connectors (cached in memory), and authorizations in flight (in the store)."""
        self.page_key = page_key
        """The human pages' CSRF key, derived from the master key so that every instance sharing one
        database accepts a form another rendered; None makes the pages pick a random one."""
        self._catalogs: dict[str, ConnectorCatalog] = {}
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        self._backoff = Backoff(clock)
        """When a connector in error may be reloaded again by a call (``refresh_connector``)."""
        self._refreshing: dict[str, anyio.Lock] = {}
        self._awaiting_credential: set[str] = set()
        """MCP connectors whose tools could not be listed for want of a credential."""

    async def aclose(self) -> None:
        """Close the clients the gateway opened itself (mTLS); the shared ``http`` client is the caller's."""
        await self._http_executor.aclose()

    # -- a connector in error ----------------------------------------------------------------------

    async def _recover(self, principal: Principal, name: str) -> ErrorResult | None:
        """For a name that resolved to nothing: when it names a visible connector in error, try to
        reload it (back-off permitting). None when there is nothing to recover or it recovered."""
        slug = connector_named(name, self._visible(principal))
        catalog = self._catalogs.get(slug) if slug is not None else None
        if slug is None or catalog is None or catalog.state.status != "error":
            return None
        if self._backoff.ready(slug):
            state = await self.refresh_connector(slug, principal=principal.user)
            if state.status != "error":
                return None
        else:
            state = catalog.state
        wait = max(1, round(self._backoff.wait_seconds(slug)))
        return ErrorResult(
            reason="connector_error",
            message=f"Connector {slug!r} is unavailable: {state.error}. The gateway retries it on calls "
            f"(next attempt in about {wait} s) and on every sync.",
            hint="Use another connector meanwhile, or ask the operator to check its upstream.",
        )

    # -- meta-tools ----------------------------------------------------------------------------

    async def connectors(self, principal: Principal) -> dict[str, Any]:
        out = []
        # A connector that could not load for want of a credential loads once one is stored.
        for slug in sorted(self._awaiting_credential & self._visible(principal)):
            if self._backoff.ready(slug) and await self._configured(self._config(slug)):
                await self.refresh_connector(slug, principal=principal.user)
        for slug in sorted(self._visible(principal)):
            cfg, catalog = self._config(slug), self._catalogs[slug]
            configured = await self._configured(cfg)
            status = catalog.state.status
            if status == "ready" and needs_secret(cfg.auth) and not configured:
                status = "needs_auth"
            elif status == "error" and slug in self._awaiting_credential and not configured:
                status = "needs_auth"  # it is the credential it waits for: connect is the next step
            visible_actions = sum(1 for a in catalog.actions if not self._hidden(a))
            out.append(
                ConnectorInfo(
                    slug=slug,
                    name=cfg.display_name,
                    description=cfg.description,
                    status=status,
                    actions=visible_actions,
                    auth=cfg.auth.type,
                    auth_configured=configured or not needs_secret(cfg.auth),
                    error=catalog.state.error,
                )
            )
        return {"connectors": [c.model_dump(exclude_none=True) for c in out]}

    async def discover(
        self,
        principal: Principal,
        query: str,
        *,
        connector: str | None = None,
        limit: int = 10,
        detail: bool = False,
    ) -> dict[str, Any]:
        """Ranked actions for ``query``; with ``detail``, the first few carry their full input schema,
        so an agent can call the top hit without a ``describe`` round trip."""
        visible = self._visible(principal)
        if connector is not None:
            visible = visible & {connector}
        limit = max(1, min(limit, 50))
        hits = self.index.search(query, limit=limit, connectors=visible, allow=self._allow)
        needs_auth = {slug: await self._needs_auth(slug) for slug in {a.connector for a, _ in hits}}
        results = []
        for rank, (action, score) in enumerate(hits):
            props = action.input_schema.get("properties") or {}
            required = [name for name in action.input_schema.get("required") or [] if isinstance(name, str)]
            result = ActionSummary(
                name=action.qualified_name,
                summary=summary_of(action),
                risk=action.risk,
                needs_approval=self._verdict(action, {}).action == "require_approval",
                needs_auth=needs_auth[action.connector],
                # The required ones first: they are what a call cannot do without.
                params=[*required, *(name for name in props if name not in required)][:12],
                required=required,
                score=round(score, 3),
            ).model_dump()
            if detail and rank < DETAIL_SCHEMAS:
                result["input_schema"] = action.input_schema
            results.append(result)
        return {"query": query, "results": results}

    async def describe(self, principal: Principal, tool: str) -> dict[str, Any]:
        action = self._lookup(principal, tool)
        if action is None:
            unavailable = await self._recover(principal, tool)
            if unavailable is not None:
                return unavailable.model_dump(exclude_none=True)
            action = self._lookup(principal, tool)
        if action is None:
            return self._not_found(principal, tool).model_dump(exclude_none=True)
        verdict = self._verdict(action, {})
        cfg = self._config(action.connector)
        return {
            "name": action.qualified_name,
            "summary": action.summary,
            "description": action.description,
            "risk": action.risk,
            "input_schema": action.input_schema,
            "policy": {
                "action": verdict.action,
                "source": verdict.source,
                "rule": verdict.rule,
                "conditional": any(r.when and r.matcher.matches(action.qualified_name) for r in self.manifest.policies)
                or any(r.when and r.matcher.matches(action.path) for r in cfg.policies),
            },
            "auth": {"kind": cfg.auth.type, "configured": not await self._needs_auth(action.connector)},
        }

    async def connect(self, principal: Principal, connector: str) -> dict[str, Any]:
        if connector not in self._visible(principal):
            return Denied(
                reason="connector_not_found",
                message=f"No connector named {connector!r}. Call connectors to list the ones you can use.",
            ).model_dump(exclude_none=True)
        cfg = self._config(connector)
        if not needs_secret(cfg.auth):
            return {"status": "ok", "connector": connector, "message": f"{connector} needs no credentials."}
        url, record = await self.links.mint("connect", connector=connector, principal=principal.user)
        return {
            "status": "link",
            "connector": connector,
            "connect_url": url,
            "expires_at": record.expires_at.isoformat(),
            "message": "Give this link to the user; once they complete it, calls to this connector will work.",
        }

    async def request_secret(self, principal: Principal, connector: str, name: str = "default") -> dict[str, Any]:
        if connector not in self._visible(principal):
            return Denied(
                reason="connector_not_found",
                message=f"No connector named {connector!r}. Call connectors to list the ones you can use.",
            ).model_dump(exclude_none=True)
        url, record = await self.links.mint("secret", connector=connector, principal=principal.user, secret_name=name)
        return {
            "status": "link",
            "connector": connector,
            "name": name,
            "secret_url": url,
            "expires_at": record.expires_at.isoformat(),
            "message": "Give this link to the user to paste the secret; you will never see its value.",
        }

    # -- call ------------------------------------------------------------------------------------

    async def call(
        self,
        principal: Principal,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        approval_id: str | None = None,
        fields: Sequence[str] | None = None,
        wait: float | None = None,
    ) -> CallResult:
        """Run one call. With ``wait`` (seconds, capped at ``MAX_WAIT_SECONDS``), a call that needs a
        human's approval blocks until they decide, then runs once if approved; if nobody decides in
        time, the ``pending_approval`` result is returned as without ``wait``."""
        started = time.perf_counter()
        args = dict(args or {})
        trace: dict[str, Any] = {}
        result = await self._guarded_call(principal, tool, args, approval_id, fields, trace)
        if wait and wait > 0 and isinstance(result, PendingApproval):
            # Two decisions, two audit rows: the approval asked for, then what came of it.
            await self._audit(principal, tool, args, result, trace, started)
            decided = await self.approvals.wait(result.approval_id, min(wait, MAX_WAIT_SECONDS))
            if decided is None or decided.status == "pending":
                return result
            started, trace = time.perf_counter(), {}
            result = await self._guarded_call(principal, tool, args, result.approval_id, fields, trace)
        await self._audit(principal, tool, args, result, trace, started)
        return result

    async def _guarded_call(
        self,
        principal: Principal,
        tool: str,
        args: dict[str, Any],
        approval_id: str | None,
        fields: Sequence[str] | None,
        trace: dict[str, Any],
    ) -> CallResult:
        try:
            return await self._call(principal, tool, args, approval_id, fields, trace)
        except Exception:
            logger.exception("call of %s failed unexpectedly", tool)
            return ErrorResult(
                reason="internal_error",
                message=f"The gateway failed while running {tool!r}. The operator can find details in its log.",
            )

    async def _call(
        self,
        principal: Principal,
        tool: str,
        args: dict[str, Any],
        approval_id: str | None,
        fields: Sequence[str] | None,
        trace: dict[str, Any],
    ) -> CallResult:
        if self.manifest.agents is not None and not granted_connectors(self.manifest, principal):
            return Denied(
                reason="connector_not_assigned",
                message="This session's agent is granted no connectors. Ask the operator to add it to the manifest.",
            )
        action = self._lookup(principal, tool, include_hidden=True)
        if action is None:
            # A connector whose upstream was down at sync may be back: the first call reloads it.
            unavailable = await self._recover(principal, tool)
            if unavailable is not None:
                return unavailable
            action = self._lookup(principal, tool, include_hidden=True)
        if action is None:
            return self._not_found(principal, tool)
        trace["action"] = action
        errors = self._validate(action, args)
        if errors:
            return Denied(
                reason="invalid_args",
                message=f"The arguments do not match {action.qualified_name}'s input schema; fix them and call again.",
                errors=errors,
            )
        verdict = self._verdict(action, args)
        trace["verdict"] = verdict
        if verdict.action == "block":
            return Denied(
                reason="policy_block",
                message=f"A {verdict.source} policy rule ({verdict.rule}) blocks this call. Choose another action "
                "or ask the operator to change the policy.",
                source=verdict.source,
                rule=verdict.rule,
            )
        cfg = self._config(action.connector)
        executor = self.executors.get(action.binding.kind)
        if executor is None:
            return ErrorResult(
                reason="connector_error", message=f"This build cannot run {action.binding.kind} actions yet."
            )
        # The call is prepared, and the credential looked up, before any approval is asked for or
        # consumed: a human must never approve a call that cannot run, nor burn an approval on one.
        try:
            prepared = executor.prepare(action, args, cfg, self._catalogs[action.connector].base_url)
        except ArgumentError as exc:
            return Denied(reason="invalid_args", message=str(exc), errors=exc.errors or None)
        except UpstreamError as exc:
            return ErrorResult(reason=exc.reason, message=str(exc))
        sealed: SealedCredential | None = None
        if needs_secret(cfg.auth):
            sealed = await self.vault.sealed(cfg.slug, principal=principal.user)
            if sealed is None:
                return await self._connect_result(
                    principal,
                    cfg.slug,
                    f"{cfg.slug} needs a {cfg.auth.type} credential; ask the user to open the link.",
                )
        if isinstance(cfg.auth, OAuth2Auth) and not await self.oauth2.ready(cfg.auth, cfg.slug, principal.user):
            return await self._connect_result(
                principal, cfg.slug, f"{cfg.slug} needs the user to sign in with OAuth2; ask them to open the link."
            )
        if verdict.action == "require_approval":
            gate = await self._approval_gate(principal, action, args, verdict, approval_id)
            if gate is not None:
                return gate
        return await self._run(principal, executor, prepared, fields, trace, sealed)

    def _validate(self, action: Action, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        validator = self._validators.get(action.qualified_name)
        if validator is None:
            cls = jsonschema.validators.validator_for(action.input_schema, default=jsonschema.Draft202012Validator)
            try:
                validator = cls(action.input_schema)
            except jsonschema.SchemaError:
                validator = jsonschema.Draft202012Validator({"type": "object"})
            self._validators[action.qualified_name] = validator
        errors = sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))[:10]
        return [
            {"path": "/".join(str(p) for p in e.absolute_path) or "(root)", "message": e.message[:300]} for e in errors
        ]

    async def _approval_gate(
        self, principal: Principal, action: Action, args: Mapping[str, Any], verdict: Verdict, approval_id: str | None
    ) -> CallResult | None:
        """None when the call may run now; else the result that stops it."""
        if approval_id:
            outcome, record = await self.approvals.check(approval_id, principal, action.qualified_name, args)
            if outcome == "run":
                return None
            if outcome == "pending" and record is not None:
                url, _ = await self.links.mint(
                    "approval", connector=action.connector, principal=principal.user, approval_id=record.id
                )
                return self._pending(record.id, url, record.summary, record.expires_at.isoformat())
            messages = {
                "approval_denied": "A human denied this call. Do not retry it; tell the user or choose another way.",
                "approval_expired": "The approval expired before it was used. Call again without approval_id for a "
                "new one.",
                "approval_mismatch": "This approval_id does not cover this exact call (tool and arguments) or was "
                "already used. Call again without approval_id to ask for a new approval.",
            }
            return Denied(reason=outcome, message=messages[outcome], source=verdict.source, rule=verdict.rule)  # type: ignore[arg-type]
        summary = f"{action.qualified_name} ({effective_risk(action, args)}) {args_preview(redact_arguments(args))}"
        record = await self.approvals.request(principal, action, args, verdict, summary)
        url, _ = await self.links.mint(
            "approval", connector=action.connector, principal=principal.user, approval_id=record.id
        )
        return self._pending(record.id, url, summary, record.expires_at.isoformat())

    @staticmethod
    def _pending(approval_id: str, url: str, summary: str, expires_at: str) -> PendingApproval:
        return PendingApproval(approval_id=approval_id, approval_url=url, summary=summary, expires_at=expires_at)

    async def _connect_result(self, principal: Principal, slug: str, reason: str) -> NeedsAuth:
        url, _ = await self.links.mint("connect", connector=slug, principal=principal.user)
        return NeedsAuth(connector=slug, connect_url=url, reason=reason)

    async def _run(
        self,
        principal: Principal,
        executor: Executor,
        prepared: Prepared,
        fields: Sequence[str] | None,
        trace: dict[str, Any],
        sealed: SealedCredential | None,
    ) -> CallResult:
        cfg = prepared.connector
        redactor = Redactor()
        try:
            outcome = await executor.run(
                prepared,
                auth=LastMeterAuth(
                    cfg.auth,
                    sealed,
                    on_secret=redactor.add,
                    oauth2=self.oauth2.session(cfg.auth, cfg.slug, principal.user, sealed)
                    if isinstance(cfg.auth, OAuth2Auth)
                    else None,
                ),
                max_bytes=self.max_response_bytes,
            )
        except ArgumentError as exc:
            return Denied(reason="invalid_args", message=str(exc), errors=exc.errors or None)
        except (CredentialMissing, CredentialError) as exc:
            logger.warning("credential for %s unusable: %s", cfg.slug, type(exc).__name__)
            return await self._connect_result(principal, cfg.slug, "The stored credential cannot be used; reconnect.")
        except UnsupportedAuth as exc:
            return ErrorResult(reason="connector_error", message=str(exc))
        except UpstreamError as exc:
            fallback = self._request_fallback_hint(prepared.action) if exc.reason == "upstream_error" else ""
            return ErrorResult(
                reason=exc.reason,
                message=redactor.redact_text(str(exc)),
                upstream_status=exc.upstream_status,
                upstream_message=redactor.redact_text(exc.upstream_message) if exc.upstream_message else None,
                hint=fallback.strip() or None,
            )
        trace["upstream_status"] = outcome.http_status
        if outcome.http_status == 401:
            return await self._connect_result(
                principal, cfg.slug, f"{cfg.slug} rejected the stored credential (401); ask the user to reconnect."
            )
        if outcome.http_status == 403:
            return Denied(
                reason="upstream_forbidden",
                message=redactor.redact_text(
                    f"{cfg.slug} refused this call (403): {_summary(outcome, redactor)}. Retrying will not help; the "
                    "credential lacks the permission."
                ),
            )
        if outcome.http_status is not None and outcome.http_status >= 400:
            return ErrorResult(
                reason="upstream_error",
                message=f"{cfg.slug} answered {outcome.http_status}.",
                upstream_status=outcome.http_status,
                upstream_message=_summary(outcome, redactor),
                hint="Check the arguments against describe; the upstream's message says what it expected."
                + self._request_fallback_hint(prepared.action),
            )
        data = _redact_data(outcome, redactor)
        if fields:
            data = project(data, fields)
        return Ok(http_status=outcome.http_status, data=data, truncated=outcome.truncated or None)

    def _request_fallback_hint(self, action: Action) -> str:
        """A sentence pointing at the connector's generic request action, when it has one and this
        call was not already through it: the way around a curated action that cannot say something."""
        if isinstance(action.binding, RequestBinding):
            return ""
        catalog = self._catalogs.get(action.connector)
        actions = catalog.actions if catalog is not None else []
        fallback = next((a for a in actions if isinstance(a.binding, RequestBinding)), None)
        if fallback is None:
            return ""
        return (
            f" If this action cannot express the call, {fallback.qualified_name} sends any HTTP request to the same "
            "API with the connector's credentials (describe it first)."
        )

    async def _audit(
        self,
        principal: Principal,
        tool: str,
        args: Mapping[str, Any],
        result: CallResult,
        trace: dict[str, Any],
        started: float,
    ) -> None:
        action: Action | None = trace.get("action")
        verdict: Verdict | None = trace.get("verdict")
        await self.auditor.record(
            AuditRecord(
                at=self.clock.now(),
                user=principal.user,
                agent=principal.agent,
                requested=tool[:200],
                connector=action.connector if action else None,
                action=action.qualified_name if action else None,
                args_preview=args_preview(redact_arguments(args)),
                fingerprint=fingerprint(principal, action.qualified_name, args) if action else None,
                verdict=verdict.action if verdict else None,
                verdict_source=verdict.source if verdict else None,
                status=result.status,
                reason=_reason_code(result),
                upstream_status=trace.get("upstream_status"),
                latency_ms=round((time.perf_counter() - started) * 1000, 3),
            )
        )
