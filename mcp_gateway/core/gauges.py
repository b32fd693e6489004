"""The gauges a ``/metrics`` scrape reads from the running gateway (``metrics.GatewayMetrics``).

State is read when scraped, never counted on the side: connectors by sync status and their action
counts, the audit backlog, open upstream MCP sessions, whether the store answers. Pending approvals
live in the store, so a scrape first counts them (one query; on a store outage the last count
stands), and carries the audit writer's counts (rows lost, journaled, replayed) over to its counters.
"""

from __future__ import annotations

from collections import Counter

from ..execution.mcp_sessions import McpExecutor
from ..primitives.metrics import GatewayMetrics
from ..services.audit import Auditor
from ..store.contract import ApprovalStore
from ..vocabulary.errors import StoreUnavailable
from .catalogs import Catalogs
from .health import StoreHealth

__all__ = ["ScrapeState"]


class ScrapeState:
    """Registers the scrape-time gauges of one gateway and renders a scrape."""

    def __init__(
        self,
        metrics: GatewayMetrics,
        *,
        catalogs: Catalogs,
        auditor: Auditor,
        approvals: ApprovalStore,
        mcp: McpExecutor | None,
        health: StoreHealth,
    ) -> None:
        self.metrics = metrics
        self._auditor = auditor
        self._approvals = approvals
        self._health = health
        self._pending = 0
        self._audit_failures_seen = self._audit_journaled_seen = self._audit_replayed_seen = 0
        m = metrics
        m.read_state("mcp_gateway_approvals_pending", "Approvals waiting for a human.", lambda: self._pending)
        m.read_state("mcp_gateway_audit_backlog", "Audit rows accepted and not yet written.", lambda: auditor.backlog)
        m.read_state(
            "mcp_gateway_audit_journal_pending",
            "1 while audit rows wait in the local journal for the store, else 0.",
            lambda: float(auditor.journal_pending),
        )
        m.read_state(
            "mcp_gateway_connector_actions",
            "Actions each connector's last sync loaded.",
            lambda: {slug: c.state.actions for slug, c in catalogs.loaded.items()},
            label="connector",
        )
        m.read_state(
            "mcp_gateway_connector_ready",
            "1 when the connector's last sync succeeded, else 0.",
            lambda: {slug: float(c.state.status == "ready") for slug, c in catalogs.loaded.items()},
            label="connector",
        )
        m.read_state(
            "mcp_gateway_connectors",
            "Connectors by sync status.",
            lambda: dict(Counter(c.state.status for c in catalogs.loaded.values())),
            label="status",
        )
        m.read_state(
            "mcp_gateway_upstream_mcp_sessions",
            "Upstream MCP sessions open (stdio children and HTTP sessions).",
            lambda: mcp.open_sessions if mcp is not None else 0,
        )
        m.read_state("mcp_gateway_store_up", "1 while the state database answers, else 0.", lambda: float(health.up))

    async def render(self) -> bytes:
        """The exposition text of one scrape, with the store-backed values refreshed first."""
        try:
            pending = await self._approvals.list_approvals("pending")
        except StoreUnavailable as exc:
            self._health.failed(exc)
        else:
            self._pending = len(pending)
        auditor, m = self._auditor, self.metrics
        for counter, now, seen in (
            (m.audit_failures, auditor.failures, self._audit_failures_seen),
            (m.audit_journaled, auditor.journaled, self._audit_journaled_seen),
            (m.audit_replayed, auditor.replayed, self._audit_replayed_seen),
        ):
            if now > seen:
                counter.inc(now - seen)
        self._audit_failures_seen, self._audit_journaled_seen, self._audit_replayed_seen = (
            auditor.failures,
            auditor.journaled,
            auditor.replayed,
        )
        return self.metrics.render()
