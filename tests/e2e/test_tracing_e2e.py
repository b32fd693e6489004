"""Traces end to end (issue 12 item 4): a gateway subprocess exporting to a real OTLP/HTTP receiver
(``tests/support/otlp.py``, decoding the protobuf payload). One call gives one trace: the MCP
request span, the meta-tool, the policy and credential spans and the upstream CLIENT span as a
child; the ``traceparent`` the upstream saw names that CLIENT span. No secret, argument value or
query string is in any attribute. A connector with ``trace_context: false`` sends no traceparent."""

from __future__ import annotations

import time

import pytest

from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.upstream import LoopbackServer

from .conftest import SECRETS, GatewayEnv, HttpGateway, http_client, structured

pytestmark = pytest.mark.anyio

ARG_CANARY = "arg-canary-7d1e"


def _wait_for(receiver: OtlpReceiver, predicate: str, timeout: float = 20) -> list[ReceivedSpan]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(s.kind == 3 and s.name == "GET" for s in receiver.spans):  # SPAN_KIND_CLIENT
            time.sleep(0.5)  # the rest of the batch
            return list(receiver.spans)
        time.sleep(0.2)
    raise AssertionError(f"no {predicate} span arrived; got {[s.name for s in receiver.spans]}")


async def test_one_call_one_trace_with_the_upstream_span_as_child(gateway_env: GatewayEnv) -> None:
    gateway_env.set_secrets()
    gateway_env.cli("sync", check=False)
    receiver = OtlpReceiver()
    with LoopbackServer(receiver) as otlp:
        gateway = HttpGateway(
            gateway_env,
            gateway_env.root / "gateway.log",
            extra_env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.base_url,
                "OTEL_BSP_SCHEDULE_DELAY": "200",
                "OTEL_SERVICE_NAME": "gateway-under-test",
            },
        )
        try:
            token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
            async with http_client(gateway.url, token) as client:
                before = len(gateway_env.upstream.requests)
                result = structured(
                    await client.call_tool(
                        "call", {"tool": "query_key.items.get", "args": {"id": ARG_CANARY, "verbose": True}}
                    )
                )
                assert result["status"] == "ok", result
                seen = gateway_env.upstream.requests[before:]
            spans = _wait_for(receiver, "upstream")
        finally:
            gateway.stop()

    assert len(seen) == 1
    traceparent = seen[0].headers.get("traceparent")
    assert traceparent is not None, seen[0].headers
    _, trace_id, parent_span, _ = traceparent.split("-")

    upstream = [s for s in spans if s.kind == 3 and s.name == "GET"]
    assert len(upstream) == 1
    client_span = upstream[0]
    assert client_span.trace_id == trace_id and client_span.span_id == parent_span
    assert client_span.service == "gateway-under-test"
    attrs = client_span.attributes
    assert attrs["http.request.method"] == "GET" and attrs["server.address"] == "127.0.0.1"
    assert attrs["http.response.status_code"] == 200
    # The api_key travels in the query and the id in the path: the span has the origin and the template.
    assert attrs["url.full"] == gateway_env.upstream_url and attrs["url.template"] == "/items/{id}"

    # One trace: the CLIENT span descends from the meta-tool span, under the SDK's request span.
    trace = {s.span_id: s for s in spans if s.trace_id == trace_id}
    ancestors, node = [], client_span
    while node.parent_id and node.parent_id in trace:
        node = trace[node.parent_id]
        ancestors.append(node.name)
    assert "mcp_gateway.call" in ancestors, ancestors
    names = {s.name for s in trace.values()}
    assert {"mcp_gateway.policy", "mcp_gateway.credential"} <= names, names
    credential = next(s for s in trace.values() if s.name == "mcp_gateway.credential")
    assert credential.attributes == {"mcp_gateway.auth.kind": "api_key"}
    # The policy span, made whole once the verdict is known, is a sibling of the others under the
    # meta-tool span, and says what was decided and by which source.
    policy = next(s for s in trace.values() if s.name == "mcp_gateway.policy")
    assert trace[policy.parent_id].name == "mcp_gateway.call" and policy.parent_id == credential.parent_id
    assert set(policy.attributes) == {"mcp_gateway.action", "mcp_gateway.policy.decision", "mcp_gateway.policy.source"}

    # No secret, argument value or query string in any attribute of any span.
    everything = repr([(s.name, s.attributes) for s in spans])
    for secret in SECRETS.values():
        assert secret not in everything
    assert ARG_CANARY not in everything


async def test_trace_context_off_per_connector(gateway_env: GatewayEnv) -> None:
    text = gateway_env.manifest.read_text()
    gateway_env.manifest.write_text(
        text.replace("  - slug: open_api\n", "  - slug: open_api\n    trace_context: false\n", 1)
    )
    gateway_env.cli("sync", check=False)
    receiver = OtlpReceiver()
    with LoopbackServer(receiver) as otlp:
        gateway = HttpGateway(
            gateway_env,
            gateway_env.root / "gateway.log",
            extra_env={"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.base_url, "OTEL_BSP_SCHEDULE_DELAY": "200"},
        )
        try:
            token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
            async with http_client(gateway.url, token) as client:
                before = len(gateway_env.upstream.requests)
                result = structured(await client.call_tool("call", {"tool": "open_api.items.get", "args": {"id": "1"}}))
                assert result["status"] == "ok", result
                seen = gateway_env.upstream.requests[before:]
        finally:
            gateway.stop()
    assert len(seen) == 1 and "traceparent" not in seen[0].headers
