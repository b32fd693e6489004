"""Tracing (``tracing``): spans exported over OTLP/HTTP to a real receiver on loopback, configured by
the standard ``OTEL_*`` variables, with W3C trace context for upstream requests. Each case runs in a
fresh interpreter: OpenTelemetry's tracer provider is process-global and can be set only once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.support.otlp import OtlpReceiver
from tests.support.upstream import LoopbackServer

REPO = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent(
    """
    import json, os
    from mcp_gateway.tracing import configure_tracing, inject_trace_context, shutdown_tracing, span, SpanKind
    enabled = configure_tracing(os.environ)
    headers = {}
    with span("tools/call call", kind=SpanKind.SERVER, attributes={"gen_ai.tool.name": "call"}):
        with span("policy.evaluate", attributes={"mcp_gateway.policy.action": "always_run"}):
            pass
        with span("GET", kind=SpanKind.CLIENT, attributes={"http.request.method": "GET"}):
            inject_trace_context(headers)
    shutdown_tracing()
    print(json.dumps({"enabled": enabled, "headers": headers}))
    """
)


def run(env: dict[str, str]) -> dict[str, Any]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=clean | env, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_spans_reach_an_otlp_receiver_with_their_parents_and_traceparent() -> None:
    receiver = OtlpReceiver()
    with LoopbackServer(receiver) as server:
        out = run({"OTEL_EXPORTER_OTLP_ENDPOINT": server.base_url, "OTEL_SERVICE_NAME": "gw-test"})
    assert out["enabled"] is True
    spans = {s.name: s for s in receiver.spans}
    assert set(spans) == {"tools/call call", "policy.evaluate", "GET"}
    root, upstream = spans["tools/call call"], spans["GET"]
    assert spans["policy.evaluate"].parent_id == root.span_id and upstream.parent_id == root.span_id
    assert {s.trace_id for s in receiver.spans} == {root.trace_id}
    assert root.service == "gw-test" and upstream.attributes == {"http.request.method": "GET"}
    # The traceparent an upstream would see names the upstream span of the same trace.
    version, trace_id, parent_id, flags = out["headers"]["traceparent"].split("-")
    assert (version, trace_id, parent_id) == ("00", root.trace_id, upstream.span_id)
    assert int(flags, 16) & 1  # sampled


def test_nothing_is_exported_without_an_endpoint_or_when_disabled() -> None:
    receiver = OtlpReceiver()
    with LoopbackServer(receiver) as server:
        assert run({})["enabled"] is False
        assert run({"OTEL_EXPORTER_OTLP_ENDPOINT": server.base_url, "OTEL_TRACES_EXPORTER": "none"})["enabled"] is False
        assert run({"OTEL_EXPORTER_OTLP_ENDPOINT": server.base_url, "OTEL_SDK_DISABLED": "true"})["enabled"] is False
    assert receiver.requests == 0


PROPAGATE = textwrap.dedent(
    """
    import json
    from opentelemetry import context, propagate
    from mcp_gateway.tracing import inject_trace_context, recording, span, SpanKind
    client = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    token = context.attach(propagate.extract({"traceparent": client}))  # what the SDK's request span does
    headers = {}
    with span("mcp_gateway.call"), span("GET", kind=SpanKind.CLIENT) as current:
        inject_trace_context(headers)
    context.detach(token)
    print(json.dumps({"recording": recording(), "valid": current.get_span_context().is_valid, "headers": headers}))
    """
)


def test_without_an_exporter_no_span_is_made_and_the_clients_trace_still_reaches_the_upstream() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", PROPAGATE], env=clean, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["recording"] is False and out["valid"] is False  # no span object of ours
    assert out["headers"]["traceparent"] == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
