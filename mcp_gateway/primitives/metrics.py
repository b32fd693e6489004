"""Prometheus metrics of a running gateway (served at ``/metrics``).

One ``GatewayMetrics`` per gateway, in a registry of its own (never prometheus-client's global
one), so tests and several gateways in one process do not share counters. The gateway core calls
the ``observe_*`` methods; gauges that describe state (pending approvals, connectors, upstream MCP
sessions, audit backlog) are read when scraped, through callbacks the wiring registers, so nothing
is counted twice and nothing drifts.

Labels are bounded and never carry argument values or secrets: connector slugs and risk, status
and reason codes (closed vocabularies), the meta-tool name. An action's name is not a label: a
catalog of 10,000 actions would mean 10,000 series per metric.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE", "MAX_USERS", "GatewayMetrics", "StateReader"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Gateway overhead is sub-millisecond to a few ms; upstream calls span ms to the connector timeout.
_OWN_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5)
_UPSTREAM_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_DISCOVER_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1)

MAX_USERS = 500
"""Distinct users the per-user calls counter labels; the rest are counted as ``other``."""

StateReader = Callable[[], Mapping[str, float] | float]
"""Returns a gauge's current value, or values by label, at scrape time."""


class _StateCollector(Collector):
    """Gauges read at scrape time from callbacks (``GatewayMetrics.read_state``)."""

    def __init__(self) -> None:
        self._readers: dict[str, tuple[str, str | None, StateReader]] = {}

    def add(self, name: str, documentation: str, label: str | None, reader: StateReader) -> None:
        self._readers[name] = (documentation, label, reader)

    def collect(self) -> Iterable[Metric]:
        for name, (documentation, label, reader) in self._readers.items():
            value = reader()
            family = GaugeMetricFamily(name, documentation, labels=[label] if label else None)
            if isinstance(value, Mapping):
                for key, v in sorted(value.items()):
                    family.add_metric([key], float(v))
            else:
                family.add_metric([], float(value))
            yield family


class GatewayMetrics:
    """The gateway's counters, histograms and scrape-time gauges."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.calls = Counter(
            "mcp_gateway_calls",
            "Calls answered, by connector, risk, status and reason.",
            ["connector", "risk", "status", "reason"],
            registry=r,
        )
        self.gateway_seconds = Histogram(
            "mcp_gateway_call_overhead_seconds",
            "Time a call spent in the gateway itself (total minus upstream).",
            ["connector"],
            buckets=_OWN_BUCKETS,
            registry=r,
        )
        self.upstream_seconds = Histogram(
            "mcp_gateway_upstream_seconds",
            "Time a call spent waiting for its upstream.",
            ["connector"],
            buckets=_UPSTREAM_BUCKETS,
            registry=r,
        )
        self.tool_requests = Counter(
            "mcp_gateway_tool_requests", "Meta-tool invocations, by tool.", ["tool"], registry=r
        )
        self.discover_seconds = Histogram(
            "mcp_gateway_discover_seconds", "Latency of discover.", buckets=_DISCOVER_BUCKETS, registry=r
        )
        self.approvals_decided = Counter(
            "mcp_gateway_approvals_decided", "Approvals decided, by decision.", ["decision"], registry=r
        )
        self.audit_failures = Counter("mcp_gateway_audit_failures", "Audit rows that could not be written.", registry=r)
        self.audit_journaled = Counter(
            "mcp_gateway_audit_journaled",
            "Audit outcome rows the store refused, kept in the local journal instead.",
            registry=r,
        )
        self.audit_replayed = Counter(
            "mcp_gateway_audit_replayed", "Journaled audit rows replayed into the store.", registry=r
        )
        self.rate_limited = Counter(
            "mcp_gateway_rate_limited",
            "Calls refused by a rate limit or concurrency cap, by scope.",
            ["scope"],
            registry=r,
        )
        self.user_calls = Counter(
            "mcp_gateway_user_calls",
            "Calls answered, by the human user behind them (at most MAX_USERS distinct users; the rest "
            "count as 'other') and status.",
            ["user", "status"],
            registry=r,
        )
        self._users: set[str] = set()
        # Each call's series, looked up once per label set: ``labels()`` takes a lock and checks its
        # arguments every time, four times a call. Label sets are bounded (see above).
        self._call_children: dict[tuple[str, str, str, str], tuple[Counter, Histogram, Histogram]] = {}
        self._user_children: dict[tuple[str, str], Counter] = {}
        self._tool_children: dict[str, Counter] = {}
        self.syncs = Counter(
            "mcp_gateway_syncs",
            "Connector loads, by connector and resulting status.",
            ["connector", "status"],
            registry=r,
        )
        self._state = _StateCollector()
        r.register(self._state)
        self.up = Gauge("mcp_gateway_up", "1 while the gateway serves.", registry=r)
        self.up.set(1)

    # -- what the core reports -----------------------------------------------------------------

    def observe_call(
        self,
        *,
        connector: str | None,
        risk: str | None,
        status: str,
        reason: str | None,
        total_seconds: float,
        upstream_seconds: float | None,
        user: str | None = None,
    ) -> None:
        slug = connector or "none"
        key = (slug, risk or "none", status, reason or "none")
        children = self._call_children.get(key)
        if children is None:
            children = self._call_children[key] = (
                self.calls.labels(*key),
                self.gateway_seconds.labels(slug),
                self.upstream_seconds.labels(slug),
            )
        calls, own, upstream = children
        calls.inc()
        if user is not None:
            user_key = (user, status)
            per_user = self._user_children.get(user_key)
            if per_user is None:
                per_user = self.user_calls.labels(self._user_label(user), status)
                if len(self._user_children) < 4 * MAX_USERS:
                    self._user_children[user_key] = per_user
            per_user.inc()
        own.observe(max(0.0, total_seconds - (upstream_seconds or 0.0)))
        if upstream_seconds is not None:
            upstream.observe(upstream_seconds)

    def _user_label(self, user: str) -> str:
        # Users are an open set (front-door subjects): past MAX_USERS they share one series, so a
        # flood of subjects cannot grow the registry without bound.
        if user in self._users:
            return user
        if len(self._users) < MAX_USERS:
            self._users.add(user)
            return user
        return "other"

    def observe_tool(self, tool: str) -> None:
        child = self._tool_children.get(tool)
        if child is None:
            child = self._tool_children[tool] = self.tool_requests.labels(tool)
        child.inc()

    def observe_discover(self, seconds: float) -> None:
        self.discover_seconds.observe(seconds)

    def observe_decision(self, decision: str) -> None:
        self.approvals_decided.labels(decision).inc()

    def observe_rate_limited(self, scope: str) -> None:
        self.rate_limited.labels(scope).inc()

    def observe_sync(self, connector: str, status: str) -> None:
        self.syncs.labels(connector, status).inc()

    def read_state(self, name: str, documentation: str, reader: StateReader, *, label: str | None = None) -> None:
        """Register a gauge computed at scrape time: ``reader`` returns a number, or numbers by ``label``."""
        self._state.add(name, documentation, label, reader)

    def render(self) -> bytes:
        """The exposition text a scrape gets."""
        return generate_latest(self.registry)
