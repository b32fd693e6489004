"""The gateway's Prometheus metrics: what each observation adds, scrape-time gauges, bounded labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from mcp_gateway.primitives.metrics import MAX_USERS, GatewayMetrics


def samples(metrics: GatewayMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_calls_are_counted_by_connector_risk_status_and_reason() -> None:
    m = GatewayMetrics()
    m.observe_call(
        connector="github", risk="read", status="ok", reason=None, total_seconds=0.012, upstream_seconds=0.01
    )
    m.observe_call(
        connector="github", risk="read", status="ok", reason=None, total_seconds=0.02, upstream_seconds=0.019
    )
    m.observe_call(
        connector=None,
        risk=None,
        status="denied",
        reason="action_not_found",
        total_seconds=0.001,
        upstream_seconds=None,
    )
    s = samples(m)
    key = (("connector", "github"), ("reason", "none"), ("risk", "read"), ("status", "ok"))
    assert s[("mcp_gateway_calls_total", key)] == 2
    assert (
        s[
            (
                "mcp_gateway_calls_total",
                (("connector", "none"), ("reason", "action_not_found"), ("risk", "none"), ("status", "denied")),
            )
        ]
        == 1
    )
    assert s[("mcp_gateway_upstream_seconds_count", (("connector", "github"),))] == 2
    overhead = s[("mcp_gateway_call_overhead_seconds_sum", (("connector", "github"),))]
    assert abs(overhead - 0.003) < 1e-9


def test_state_gauges_are_read_at_scrape_time() -> None:
    m = GatewayMetrics()
    pending = [3]
    m.read_state("mcp_gateway_approvals_pending", "Approvals waiting for a human.", lambda: pending[0])
    m.read_state(
        "mcp_gateway_connector_actions",
        "Actions per connector.",
        lambda: {"github": 1223, "petstore": 20},
        label="connector",
    )
    assert samples(m)[("mcp_gateway_approvals_pending", ())] == 3
    pending[0] = 0
    s = samples(m)
    assert s[("mcp_gateway_approvals_pending", ())] == 0
    assert s[("mcp_gateway_connector_actions", (("connector", "petstore"),))] == 20


def test_each_gateway_has_its_own_registry() -> None:
    a, b = GatewayMetrics(), GatewayMetrics()
    a.observe_tool("discover")
    assert samples(a)[("mcp_gateway_tool_requests_total", (("tool", "discover"),))] == 1
    assert ("mcp_gateway_tool_requests_total", (("tool", "discover"),)) not in samples(b)


def test_calls_are_counted_per_user_with_a_bound_on_distinct_users() -> None:
    m = GatewayMetrics()
    for i in range(MAX_USERS + 3):
        m.observe_call(
            connector="c", risk="read", status="ok", reason=None, total_seconds=0.01, upstream_seconds=0.0, user=f"u{i}"
        )
    m.observe_call(
        connector="c", risk="read", status="ok", reason=None, total_seconds=0.01, upstream_seconds=0.0, user="u0"
    )
    s = samples(m)
    assert s[("mcp_gateway_user_calls_total", (("status", "ok"), ("user", "u0")))] == 2
    assert s[("mcp_gateway_user_calls_total", (("status", "ok"), ("user", "other")))] == 3
    users = {dict(k[1]).get("user") for k in s if k[0] == "mcp_gateway_user_calls_total"}
    assert len(users) == MAX_USERS + 1
