"""The gateway: the six meta-tools over the connectors' catalogs, composed from collaborators.

``Gateway`` is the one place that turns a request into an agent-facing result. It takes the
services it needs (store, vault, discovery index, HTTP client, clock, link and approval services,
auditor) already built, and composes the collaborators that hold the gateway's own logic:

- ``Catalogs``: the loaded connectors, their back-off, index upkeep (sync, reload, refresh);
- ``Permissions``: what a principal sees and what policy decides;
- ``CredentialBroker``: which credential a request carries, and whether a connector has one;
- ``Executors``: which executor runs an action, by binding kind;
- ``CallPipeline``: one attempt at a call, and ``CallTrace``, what it learned for the audit row.

Here are the meta-tools themselves, the lifecycle (sync, reload, the state of each connector) and a
call's outer loop: waiting for a human's approval (the one wait loop; the MCP tool layer uses it
too) and writing the audit row. Nothing here holds a plaintext secret: credentials travel sealed
into ``LastMeterAuth``.

The collaborators, the store and the vault stay private. What the transports, pages and CLI
commands need beside the meta-tools, they reach through a few named services with interfaces of
their own (see ``Gateway``): ``CredentialDesk`` for the connect and secret pages, ``HeldActions``
for an operator's review, the approval, link, audit and token services, and the store's
short-lived rows by their role (``EphemeralStore``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

import anyio
import httpx2

from ..auth import needs_secret
from ..discovery import DiscoveryIndex, ReviewCache, SearchResult
from ..discovery.catalog_hints import CatalogHints
from ..discovery.hybrid import HybridSearch, discovery_status
from ..execution.mcp_sessions import McpExecutor
from ..manifest import Manifest
from ..policy.review import origin_of
from ..primitives.metrics import GatewayMetrics
from ..primitives.secrets import PROJECT_WIDE
from ..services.approvals import MAX_WAIT_SECONDS, ApprovalService
from ..services.audit import Auditor
from ..services.credentials import CredentialVault
from ..services.identity import Principal
from ..services.links import LinkService
from ..services.operator_tokens import OperatorTokens
from ..services.tokens import TokenService
from ..sources.graphql_schemas import GraphQLSchemas
from ..store.contract import ConnectorState, EphemeralStore, Store
from ..store.wait_budget import request_budget
from ..vocabulary.clock import Clock
from ..vocabulary.errors import GatewayError, StoreUnavailable
from ..vocabulary.model import Action, CallResult, ConnectorInfo, Denied, ErrorResult, PendingApproval
from .admission import TrafficGate
from .bounds import Bounds, too_many_calls, too_many_waits
from .calls import DEFAULT_MAX_RESPONSE_BYTES, CallPipeline
from .catalogs import Catalogs
from .connectors_answer import connector_info, loading_info
from .credential_broker import CredentialBroker
from .credential_changes import CredentialChanges, reserved_name
from .credential_desk import CredentialDesk
from .credential_origins import CredentialOrigins, moved_note, refused_note, team_key
from .discover_answer import (
    NOTHING_TO_SEARCH,
    catalog_suggestions,
    discover_limit,
    discover_result,
    nothing_to_search,
)
from .executors import Executors
from .gauges import ScrapeState
from .health import STORE_UNAVAILABLE_HINT, StoreHealth
from .held_actions import HeldActions
from .in_flight import CallsInFlight, Reached
from .oauth2_tokens import OAuth2Tokens
from .permissions import Permissions
from .results import (
    Connected,
    ConnectLink,
    ConnectorsResult,
    DescribeAuth,
    DescribePolicy,
    DescribeResult,
    DiscoverResult,
    SecretLink,
    reason_code,
    shown_description,
    shown_schema,
    shown_summary,
)
from .sync import Progress
from .trace import CallTrace
from .unmatched_rules import UnmatchedRule, unmatched_rules
from .use_memory import UseMemory
from .withheld_errors import WithheldErrors

__all__ = ["Gateway", "OnPending"]

logger = logging.getLogger(__name__)

OnPending = Callable[[PendingApproval], Awaitable[None]]

"""Told of the approval a waiting call asked for, before the wait (to show the human its link)."""


class Gateway:
    """The meta-tools of one gateway and its lifecycle. Built by ``runtime.open_gateway`` (or a test)
    from ready services.

    Beside the meta-tools it names the few services the transports, pages and CLI commands use, each
    through its own interface: ``links``, ``approvals``, ``auditor``, ``credentials`` (the pages'
    side of the vault), ``review`` (actions held for an operator), ``sessions`` (short-lived rows:
    browser sessions, sign-in states, nonces), ``operators`` and ``tokens`` (who may open the
    overview and ``/mcp``), ``health``, ``metrics`` and ``scrape``, ``bounds``. The store, the
    vault and the gateway's own collaborators stay inside.

    Args:
        index: the discovery index (a fresh lexical one by default).
        mcp: the upstream MCP session pool; without it ``mcp`` connectors cannot load or run.
        max_response_bytes: the cap on an upstream answer a call returns.
        oauth2: the OAuth2 token broker (one over ``store`` and ``vault`` by default).
        page_key: the human pages' CSRF key (see the attribute).
        metrics: this gateway's Prometheus metrics (a fresh set by default).
        dense: hybrid discover's dense side (``runtime.discovery_search``); None: lexical only.
        review_cache: the hidden-text scans of earlier starts (``discovery.ReviewCache``); None: scan every start.
    """

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
        mcp: McpExecutor | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        oauth2: OAuth2Tokens | None = None,
        page_key: bytes | None = None,
        metrics: GatewayMetrics | None = None,
        traffic: TrafficGate | None = None,
        dense: HybridSearch | None = None,
        review_cache: ReviewCache | None = None,
    ) -> None:
        self.clock = clock
        self.links = links
        self.approvals = approvals
        self.auditor = auditor
        self.page_key = page_key
        """The human pages' CSRF key, derived from the master key so that every instance sharing one
        database accepts a form another rendered; None makes the pages pick a random one."""
        self.dense = dense
        """Dense retrieval fused into ``discover`` (hybrid); None ranks lexically only."""
        self.sessions: EphemeralStore = store
        """Short-lived rows every instance sees: browser sessions, sign-in states, single-use nonces."""
        self.tokens = TokenService(store, clock)
        """The agents' ``/mcp`` tokens."""
        self.operators = OperatorTokens(store, clock)
        """The operators' tokens (the overview, ``/metrics``)."""
        self.bounds = Bounds(manifest.agent_limits)
        """What one agent (or MCP session) may hold open at once: calls, ``wait`` sleepers, watchers."""
        self.health = StoreHealth(getattr(store, "ping", None), getattr(store, "probe_write", None), where=repr(store))
        """Whether the store answers (``/readyz``); logs an outage once when it starts and ends."""
        auditor.on_store = self.health.observed
        # Read at each call: the store takes its instance id when it opens.
        self._instance: Callable[[], str | None] = lambda: getattr(store, "instance", None)
        self.metrics = metrics if metrics is not None else GatewayMetrics()
        self.in_flight = CallsInFlight()
        """The calls running now: what a stop names and audits as cut."""
        approvals.on_decided = lambda approved: self.metrics.observe_decision("approved" if approved else "denied")
        self._discovery_config = manifest.discovery
        # Not ``index or …``: an index is falsy while empty, and the caller may keep the one it passed.
        self._index = index if index is not None else DiscoveryIndex()
        self._catalog_hints = CatalogHints()
        """The bundled catalog APIs ``discover`` names when nothing configured serves a request."""
        self.manifest_file: str | None = None
        """The manifest file served, as the operator named it (None: the bundled default): the command
        ``discover`` prints to add a catalog API edits it."""
        self._compose(manifest, store, vault, http, mcp, review_cache, oauth2, auditor)
        self._changes = CredentialChanges(vault, approvals, links, auditor, clock, CredentialOrigins(store, clock))
        self._changes.requester_may = self._asker_may
        self.credentials = CredentialDesk(vault, self._oauth2, self._changes, self.credential_stored)
        """What the connect, secret and OAuth2 pages do with a credential a human enters."""
        self._withheld = WithheldErrors(store, clock)
        self.review = HeldActions(self._catalogs, self._withheld)
        """Upstream actions held for an operator's review, and their decisions."""
        self.scrape = ScrapeState(
            self.metrics, catalogs=self._catalogs, auditor=auditor, approvals=store, mcp=mcp, health=self.health
        )
        """Renders ``/metrics`` (scrape-time gauges refreshed)."""
        self._calls = self._pipeline(traffic if traffic is not None else TrafficGate(), max_response_bytes)

    def _token_client(self, connector: str, url: str) -> httpx2.AsyncClient | None:
        """The client for a token request of ``connector`` to ``url``: the one trusting its
        ``tls.ca_file`` when ``url`` is on its base_url's host (its private CA signs that host's
        certificate), else None (the shared client)."""
        cfg = self.manifest.connector(connector)
        if cfg is None or cfg.ca_file is None or cfg.base_url is None:
            return None
        if httpx2.URL(url).host != httpx2.URL(cfg.base_url).host:
            return None
        return self._executors.http.trusted.client_for(cfg.ca_file)

    def _compose(
        self,
        manifest: Manifest,
        store: Store,
        vault: CredentialVault,
        http: httpx2.AsyncClient,
        mcp: McpExecutor | None,
        cache: ReviewCache | None,
        oauth2: OAuth2Tokens | None,
        auditor: Auditor,
    ) -> None:
        """The collaborators that load and run the connectors: credentials, executors, catalogs, permissions."""
        self._store, self._vault, self._http = store, vault, http
        self._oauth2 = oauth2 or OAuth2Tokens(
            http, vault, self.clock, store=store, project=manifest.project, auditor=auditor, clients=self._token_client
        )
        self._broker = CredentialBroker(vault, self._oauth2)
        # Filled by sync, read by the GraphQL executor to check an agent's ``__select``.
        schemas = GraphQLSchemas()
        # An mTLS connector's relative ca_file resolves against the manifest in force at the time.
        self._executors = Executors(http, schemas, resolve=lambda ref: self.manifest.resolve(ref), mcp=mcp)
        self._catalogs = Catalogs(
            manifest=manifest,
            store=store,
            clock=self.clock,
            http=http,
            index=self._index,
            graphql_schemas=schemas,
            credentials=self._broker,
            client_for=self._executors.http.client_for,
            tools=mcp,
            dense=self.dense,
            review_cache=cache,
        )
        self._permissions = Permissions(self._catalogs, self._index)
        self._use_memory = UseMemory(
            store, self.clock, self._index, learn=manifest.discovery.learn, project=manifest.project, dense=self.dense
        )
        """What ``discover`` learns from successful calls of its answers (``discovery.learn``)."""

    def _pipeline(self, traffic: TrafficGate, max_response_bytes: int) -> CallPipeline:
        return CallPipeline(
            catalogs=self._catalogs,
            permissions=self._permissions,
            credentials=self._broker,
            executors=self._executors,
            approvals=self.approvals,
            links=self.links,
            changes=self._changes,
            max_response_bytes=max_response_bytes,
            health=self.health,
            traffic=traffic,
            withheld=self._withheld,
        )

    @property
    def manifest(self) -> Manifest:
        """The manifest in force (``reload`` replaces it)."""
        return self._catalogs.manifest

    async def aclose(self) -> None:
        """Close the clients the gateway opened itself (mTLS); the shared ``http`` client is the caller's."""
        await self._executors.aclose()

    # -- loading -----------------------------------------------------------------------------------

    async def sync(
        self,
        progress: Progress | None = None,
        *,
        index: bool = True,
        share: bool = True,
        embed: bool = False,
        settled: Callable[[str], None] | None = None,
    ) -> list[ConnectorState]:
        """Load every connector (best effort) and index what loaded (``index``, ``share``, ``embed``,
        ``settled``: see ``Catalogs.sync``)."""
        return self._synced(await self._catalogs.sync(progress, index=index, share=share, embed=embed, settled=settled))

    async def reload_drifted(self) -> None:
        """Introspect again, in the background, the GraphQL connectors calls found changed upstream
        (``Catalogs.reload_drifted``); runs until cancelled."""
        await self._catalogs.reload_drifted()

    async def adopt(self, slug: str) -> None:
        """Serve connector ``slug`` now that its own load is over, while a sync still loads others
        (see ``Catalogs.adopt``)."""
        await self._catalogs.adopt(slug)

    async def reload(self, manifest: Manifest, progress: Progress | None = None) -> list[ConnectorState]:
        """Adopt a new, already validated manifest and re-sync (see ``Catalogs.reload``). Discovery
        settings are the start's: a change to them is logged, and waits for a restart."""
        try:
            states = self._synced(await self._catalogs.reload(manifest, progress))
        finally:
            # Whatever manifest is in force once the reload ends (the old one when it was refused).
            self.bounds.adopt(self._catalogs.manifest.agent_limits)
        if manifest.discovery != self._discovery_config:
            logger.warning("discovery settings changed: they take effect when the gateway restarts")
        return states

    async def refresh_connector(self, slug: str, *, principal: str = PROJECT_WIDE) -> ConnectorState:
        """Load one connector again and re-index it (see ``Catalogs.refresh``)."""
        return self._synced([await self._catalogs.refresh(slug, principal=principal)])[0]

    def states(self) -> list[ConnectorState]:
        """Each connector's state after its last load: loaded, in error (and why), its action count."""
        return self._catalogs.states()

    def withheld(self, slug: str) -> dict[str, int]:
        """How many of ``slug``'s loaded actions agents may not see, by reason (hidden, held for review)."""
        return self._permissions.withheld(self._catalogs.loaded[slug].actions)

    def unmatched_rules(self) -> list[UnmatchedRule]:
        """The manifest's policy rules that match no action of the catalogs loaded (``doctor`` warns)."""
        loaded = self._catalogs.loaded.items()
        return unmatched_rules(
            self.manifest, {s: c.actions for s, c in loaded if c.state.status != "error" or c.actions}
        )

    def _synced(self, states: list[ConnectorState]) -> list[ConnectorState]:
        for state in states:
            self.metrics.observe_sync(state.slug, state.status)
        return states

    async def _asker_may(self, principal: Principal, slug: str) -> bool:
        """Whether the agent that asked for a link still may reach ``slug``: its static token in force and
        the connector still granted to it. A front door's user is judged by the token alone (the groups
        that widened its grant are not kept with the link)."""
        if not await self.tokens.still_valid(principal):
            return False
        return not principal.user.startswith("token:") or slug in self._permissions.visible(principal)

    async def credential_stored(self, slug: str) -> ConnectorState | None:
        """A credential for ``slug`` was just stored (``secret set``, the connect or secret page): a
        connector in error, whose sync may have needed it, loads again now rather than at its next
        call. Its new state, or None when it was not in error. Never raises: the secret is stored
        whatever the upstream says, and the state records why a reload failed."""
        catalog = self._catalogs.loaded.get(slug)
        if catalog is None or catalog.state.status != "error":
            return None
        try:
            return await self.refresh_connector(slug)
        except GatewayError as exc:
            logger.warning("reloading %s after its credential was stored failed: %s", slug, exc)
            return None

    # -- meta-tools --------------------------------------------------------------------------------

    async def connectors(self, principal: Principal) -> ConnectorsResult:
        visible = self._permissions.visible(principal)
        # A connector that could not load for want of a credential loads once one is stored.
        for slug in sorted(self._catalogs.awaiting_credential & visible):
            if self._catalogs.backoff.ready(slug) and await self._broker.configured(self._catalogs.config(slug)):
                await self.refresh_connector(slug, principal=principal.user)
        # One whose upstream refused its credential loads again once another is stored (by a CLI, say).
        for slug, refused in sorted(self._catalogs.refused_credential.items()):
            sealed = await self._broker.sealed(self._catalogs.config(slug), principal.user) if slug in visible else None
            if sealed is not None and sealed.fingerprint != refused:
                await self.refresh_connector(slug, principal=principal.user)
        await self._catalogs.refresh_decisions()  # an approval given elsewhere counts at once
        out: list[ConnectorInfo] = [
            loading_info(self._catalogs.config(slug)) for slug in self._permissions.loading(principal)
        ]
        for slug in sorted(self._permissions.visible(principal)):
            cfg, catalog = self._catalogs.config(slug), self._catalogs.loaded[slug]
            origin = await self._changes.origins.of(team_key(cfg))
            warnings = [w for w in (self._origin_warning(slug), moved_note(cfg, origin)) if w]
            out.append(
                connector_info(
                    cfg,
                    catalog.state.status,
                    loaded=len(catalog.actions),
                    withheld=self._permissions.withheld(catalog.actions),
                    configured=await self._broker.configured(cfg, principal.user),
                    awaiting_credential=slug in self._catalogs.awaiting_credential,
                    refused_credential=slug in self._catalogs.refused_credential,
                    error=catalog.state.error,
                    warning=" ".join(warnings) or None,
                    refused=refused_note(slug, origin),
                )
            )
        # Of the caller's connectors only: another's size, or that it is being embedded, is not its to know.
        every = {cfg.slug for cfg in self._catalogs.manifest.connectors}
        out.sort(key=lambda info: info.slug)
        return ConnectorsResult(
            connectors=out, discovery=discovery_status(self.dense, None if visible >= every else visible)
        )

    async def origin(self, slug: str) -> str | None:
        """Where connector ``slug``'s calls, and so its stored credentials, go (``scheme://host:port``);
        None when it did not load or has no base URL (an MCP server over stdio)."""
        if slug not in self._catalogs.loaded:
            return None
        base = await self._catalogs.base_url(slug)
        return (origin_of(base) or None) if base else None

    def _origin_warning(self, slug: str) -> str | None:
        held = self._catalogs.origin_held(slug)
        if held is None or held.previous is None:
            return None
        return (
            f"Its API description moved its servers to another origin; calls keep going to "
            f"{held.previous.get('origin')} until an operator reviews the move (`mcp-gateway review`)."
        )

    @property
    def discovery_status(self) -> str:
        """ "discovery: lexical only", or "discovery: hybrid (<model>; n of m connectors embedded)"."""
        return discovery_status(self.dense)

    async def discover(
        self,
        principal: Principal,
        query: str,
        *,
        connector: str | None = None,
        limit: int = 10,
        detail: bool = False,
    ) -> DiscoverResult | Denied | ErrorResult:
        """Ranked actions for ``query``; with ``detail``, the first few carry their full input schema,
        so an agent can call the top hit without a ``describe`` round trip. ``rate_limited`` when the
        agent's discovery bucket is empty (``TrafficGate.admit_discovery``)."""
        started = time.perf_counter()
        limited = await self._calls.traffic.admit_discovery(self._catalogs.manifest, principal)
        if limited is not None:
            self.metrics.observe_rate_limited("discovery")
            return limited
        await self._catalogs.refresh_decisions()
        if nothing_to_search(query):
            return Denied(reason="invalid_args", message=NOTHING_TO_SEARCH)
        if connector is not None:
            slug = self._permissions.granted_slug(principal, connector)
            if slug is None:
                return _no_connector(connector, self._permissions.granted(principal))
            # One connector asked for and down since its sync: say so (and try it again, back-off
            # permitting), not "nothing matches".
            unavailable = await self._catalogs.recover(slug, principal=principal.user)
            if unavailable is not None:
                return unavailable
            connector = slug
        # Read after a recovery, which may have loaded the connector.
        visible = self._permissions.visible(principal)
        if connector is not None:
            visible = visible & {connector}
        found = await self._find(principal, query, discover_limit(limit), visible, narrowed=connector is not None)
        needs_auth = {
            slug: await self._broker.needs_auth(self._catalogs.config(slug), principal.user)
            for slug in {a.connector for a, _ in found.hits}
        }
        hints = catalog_suggestions(
            self._catalog_hints,
            self._catalogs.manifest,
            query,
            found,
            connector,
            self.manifest_file,
            visible=self._permissions.granted(principal),  # one still loading is configured all the same
        )
        loading = [slug for slug in self._permissions.loading(principal) if connector in (None, slug)]
        self.metrics.observe_discover(time.perf_counter() - started)
        return discover_result(
            query,
            found,
            needs_approval=lambda action: self._permissions.verdict(action, {}).action == "require_approval",
            needs_auth=needs_auth,
            hints=hints,
            detail=detail,
            loading=loading,
        )

    async def _find(
        self, principal: Principal, query: str, limit: int, visible: frozenset[str], *, narrowed: bool = False
    ) -> SearchResult:
        """The index's ranking (fused with the dense side's when discovery is hybrid), lifted by use."""

        async def ranked(count: int) -> SearchResult:
            if self.dense is not None:
                return await self.dense.find(
                    self._index,
                    query,
                    limit=count,
                    connectors=visible,
                    allow=self._permissions.allow,
                    narrowed=narrowed,
                )
            return self._index.find(query, limit=count, connectors=visible, allow=self._permissions.allow)

        def sees(name: str) -> bool:
            action = self._index.get(name)
            return action is not None and action.connector in visible and self._permissions.allow(action)

        return await self._use_memory.answer(principal, query, limit, ranked, sees)

    async def describe(self, principal: Principal, tool: str) -> DescribeResult | Denied | ErrorResult:
        limited = await self._calls.traffic.admit_discovery(self._catalogs.manifest, principal)
        if limited is not None:
            self.metrics.observe_rate_limited("discovery")
            return limited
        await self._catalogs.refresh_decisions()
        action = self._permissions.lookup(principal, tool)
        if action is None:
            unavailable = await self._calls.recover(principal, tool)
            if unavailable is not None:
                return unavailable
            action = self._permissions.lookup(principal, tool)
        if action is None:
            return await self._permissions.not_found(principal, tool)
        verdict = self._permissions.verdict(action, {})
        cfg = self._catalogs.config(action.connector)
        separate = verdict.action == "require_approval" and (
            verdict.separate_approver or self._catalogs.manifest.approvals.separate_approver
        )
        return DescribeResult(
            name=action.qualified_name,
            summary=shown_summary(action.summary),
            description=shown_description(action.description),
            risk=action.risk,
            input_schema=shown_schema(_as_enforced(action)),
            policy=DescribePolicy(
                action=verdict.action,
                source=verdict.source,
                rule=verdict.rule,
                conditional=self._permissions.conditional(action),
                separate_approver=True if separate else None,
            ),
            auth=DescribeAuth(kind=cfg.auth.type, configured=not await self._broker.needs_auth(cfg, principal.user)),
        )

    async def connect(self, principal: Principal, connector: str) -> Connected | ConnectLink | Denied:
        connector = self._permissions.granted_slug(principal, connector) or connector  # as discover reads it
        if connector not in self._permissions.visible(principal):
            return _no_connector(connector, self._permissions.granted(principal))
        cfg = self._catalogs.config(connector)
        if not needs_secret(cfg.auth):
            return Connected(connector=connector, message=f"{connector} needs no credentials.")
        minted = await self._changes.mint(principal, cfg, "connect")
        return ConnectLink(
            connector=connector,
            connect_url=minted.url,
            expires_at=minted.record.expires_at.isoformat(),
            message=(
                "Give this link to the user; once they complete it, calls to this connector will work."
                if minted.approval is None
                else "Give this link to the user." + minted.note()
            ),
            approval_id=minted.approval.id if minted.approval is not None else None,
        )

    async def request_secret(self, principal: Principal, connector: str, name: str = "default") -> SecretLink | Denied:
        connector = self._permissions.granted_slug(principal, connector) or connector  # as discover reads it
        if connector not in self._permissions.visible(principal):
            return _no_connector(connector, self._permissions.granted(principal))
        cfg = self._catalogs.config(connector)
        if (reserved := reserved_name(cfg, name)) is not None:
            return Denied(reason="invalid_args", message=f"No link was made: {reserved}.")
        minted = await self._changes.mint(principal, cfg, "secret", name)
        return SecretLink(
            connector=connector,
            name=name,
            secret_url=minted.url,
            expires_at=minted.record.expires_at.isoformat(),
            message="Give this link to the user to paste the secret; you will never see its value." + minted.note(),
            approval_id=minted.approval.id if minted.approval is not None else None,
        )

    # -- call --------------------------------------------------------------------------------------

    async def call(
        self,
        principal: Principal,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        approval_id: str | None = None,
        fields: Sequence[str] | None = None,
        wait: float | None = None,
        on_pending: OnPending | None = None,
    ) -> CallResult:
        """Run one call. With ``wait`` (seconds, capped at ``MAX_WAIT_SECONDS``), a call that needs a
        human's approval blocks until they decide, then runs once if approved; if nobody decides in
        time, the ``pending_approval`` result is returned as without ``wait``. ``on_pending`` is told
        of that approval before the wait begins. All its statements together wait on a stalled
        database at most ``wait_budget.STORE_WAIT_SECONDS``."""
        with request_budget():
            return await self._call_bounded(principal, tool, dict(args or {}), approval_id, fields, wait, on_pending)

    async def _call_bounded(
        self,
        principal: Principal,
        tool: str,
        args: dict[str, Any],
        approval_id: str | None,
        fields: Sequence[str] | None,
        wait: float | None,
        on_pending: OnPending | None,
    ) -> CallResult:
        # Before any row or log line of the call: an argument may be a stored secret (of any connector).
        await self._broker.known.learn_stored()
        key = f"agent:{principal.label}"
        with self.bounds.calls.holding(key) as admitted:
            if not admitted:
                result = too_many_calls(self.bounds.calls.limit)
                trace = self._refused_trace(principal, tool)
                await self.auditor.record(trace.audit_record(principal, tool, args, result, self.clock))
                self.metrics.observe_rate_limited("running_calls")
                self._observe(principal, trace, result.status, reason_code(result))
                return result
            reached = Reached(self.auditor, self.clock, principal, tool, args)
            try:
                with self.in_flight.running(reached):
                    return await self._call(principal, tool, args, approval_id, fields, wait, on_pending, reached)
            except anyio.get_cancelled_exc_class():
                status = "interrupted" if self.in_flight.stopping else "cancelled"
                for trace in await self.in_flight.cancelled(reached):
                    self._observe(principal, trace, status, None)
                raise

    def _refused_trace(self, principal: Principal, tool: str) -> CallTrace:
        """What is known of a call refused before it started: the action it names and, when its
        arguments cannot change it, the policy's verdict (so its audit row can be found by connector)."""
        action = self._permissions.lookup(principal, tool, include_hidden=True)
        if action is None:
            return CallTrace()
        return CallTrace(action=action, verdict=self._permissions.fixed_verdict(action))

    def _observe(self, principal: Principal, trace: CallTrace, status: str, reason: str | None) -> None:
        """Count one audited decision in the metrics."""
        action = trace.action
        self.metrics.observe_call(
            connector=action.connector if action else None,
            risk=action.risk if action else None,
            status=status,
            reason=reason,
            total_seconds=time.perf_counter() - trace.started,
            upstream_seconds=trace.upstream_seconds,
            user=principal.user,
        )

    async def _call(
        self,
        principal: Principal,
        tool: str,
        args: dict[str, Any],
        approval_id: str | None,
        fields: Sequence[str] | None,
        wait: float | None,
        on_pending: OnPending | None,
        reached: Reached,
    ) -> CallResult:
        trace = CallTrace(on_upstream=reached.started, id_prefix=self._instance() or "")
        result = await self._calls.attempt(principal, tool, args, approval_id, fields, trace)
        if wait and wait > 0 and isinstance(result, PendingApproval) and not self.bounds.waits.take(principal.label):
            await self.auditor.record(trace.audit_record(principal, tool, args, result, self.clock))
            self._observe(principal, trace, result.status, reason_code(result))
            self.metrics.observe_rate_limited("waiting_calls")
            trace = CallTrace(action=trace.action, verdict=trace.verdict)
            result = too_many_waits(self.bounds.waits.limit, result.approval_id, result.approval_url)
        elif wait and wait > 0 and isinstance(result, PendingApproval):
            try:
                result, after = await self._wait(
                    principal, tool, args, fields, wait, on_pending, result, trace, reached.started
                )
            finally:
                self.bounds.waits.give(principal.label)
            if after is None:
                return result
            trace = after
        recorded = await self.auditor.record(trace.audit_record(principal, tool, args, result, self.clock))
        reached.settled()
        if not recorded and trace.call_id is not None:
            result = unrecorded(trace.upstream_status)
        action = trace.action
        if action is not None and result.status == "ok":
            await self._use_memory.called(principal, action.qualified_name)
        if trace.throttled is not None:
            self.metrics.observe_rate_limited(trace.throttled)
        self._observe(principal, trace, result.status, reason_code(result))
        return result

    async def _wait(
        self,
        principal: Principal,
        tool: str,
        args: dict[str, Any],
        fields: Sequence[str] | None,
        wait: float,
        on_pending: OnPending | None,
        result: PendingApproval,
        trace: CallTrace,
        started: Callable[[CallTrace], Awaitable[None]],
    ) -> tuple[CallResult, CallTrace | None]:
        """Sleep on the approval ``result`` asked for; then run once if it was approved."""
        # Two decisions, two audit rows (and two counts): the approval asked for, then what came of it.
        await self.auditor.record(trace.audit_record(principal, tool, args, result, self.clock))
        self._observe(principal, trace, result.status, reason_code(result))
        if on_pending is not None:
            await on_pending(result)
        try:
            decided = await self.approvals.wait(result.approval_id, min(wait, MAX_WAIT_SECONDS))
        except StoreUnavailable as exc:
            # The agent is answered an error, so the audit says so too (journaled while the
            # database is down), not only the ``pending_approval`` row written above.
            self.health.failed(exc)
            return _lost_while_waiting(result.approval_id), CallTrace()
        if decided is None or decided.status == "pending":
            return result, None  # undecided: the one row already written says so
        if decided.status == "approved" and not await self.tokens.still_valid(principal):
            # Revoking a token (a leaked one, say) must stop what it asked for, not only its next request.
            revoked = Denied(
                reason="approval_denied",
                message="This agent's token was revoked while the call waited for its approval: nothing was sent.",
            )
            return revoked, CallTrace()
        trace = CallTrace(on_upstream=started, id_prefix=self._instance() or "")
        return await self._calls.attempt(principal, tool, args, result.approval_id, fields, trace), trace


def _as_enforced(action: Action) -> Mapping[str, Any]:
    """The input schema ``describe`` shows: an HTTP-like action refuses arguments its parameters do not
    name, which a hand-written schema without ``additionalProperties`` did not say."""
    schema = action.input_schema
    binding_kind = action.binding.kind
    if (
        binding_kind in ("http", "openapi", "postman")
        and "properties" in schema
        and "additionalProperties" not in schema
    ):
        return {**schema, "additionalProperties": False}
    return schema


def _lost_while_waiting(approval_id: str) -> ErrorResult:
    return ErrorResult(
        reason="store_unavailable",
        message=(
            "The gateway lost its database while waiting for the approval; nothing was run. The approval "
            f"is kept: once the database is back, call again with approval_id={approval_id!r}."
        ),
        hint=STORE_UNAVAILABLE_HINT,
    )


def unrecorded(upstream_status: int | None) -> ErrorResult:
    """The answer to a call that reached its upstream when neither the store nor the local audit
    journal could take its outcome row (``audit.Auditor.record`` answered False: a database down
    past the retry window and a full or read-only disk).

    No answer goes back without a durable record, so the upstream's answer is withheld: an agent
    must not receive data, or act on a success, that the audit trail will never show. It is not
    reported as a plain failure either: the request did reach the upstream and may have taken
    effect, so the message says so, and that repeating it blindly could do it twice. The reason is
    ``store_unavailable`` (the gateway's own storage failed, not the upstream), with a hint, and the
    upstream's HTTP status when it answered."""
    answered = f", which answered HTTP {upstream_status}" if upstream_status is not None else ""
    return ErrorResult(
        reason="store_unavailable",
        message=(
            f"The call reached the upstream{answered}, but the gateway could not record its outcome in "
            "the audit trail, so the answer is withheld. It may have taken effect: do not repeat it "
            "without checking."
        ),
        upstream_status=upstream_status,
        hint="Tell the user: the gateway's database and its local audit journal both refused the write; "
        "an operator must fix its storage.",
    )


def _no_connector(connector: str, granted: Collection[str] = ()) -> Denied:
    shown = connector if len(connector) <= 63 else connector[:60] + "..."
    known = sorted(granted)
    listed = f" Yours: {', '.join(known[:20])}{', ...' if len(known) > 20 else ''}." if known else ""
    return Denied(
        reason="connector_not_found",
        message=f"No connector named {shown!r}.{listed} Call connectors to list the ones you can use.",
    )
