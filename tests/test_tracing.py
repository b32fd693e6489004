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

import pytest

from tests.support.otlp import OtlpReceiver
from tests.support.upstream import LoopbackServer

REPO = Path(__file__).resolve().parent.parent

# Runs the gateway (or its children) as real processes: not in the fast lane.
pytestmark = pytest.mark.slow

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


LEAN = textwrap.dedent(
    """
    import base64, json, sys, time
    from google.protobuf.json_format import MessageToDict
    from opentelemetry import context, propagate, trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider, sampling
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from mcp_gateway import tracing
    from mcp_gateway.tracing import SpanKind

    case = sys.argv[1]
    propagated = []  # calls of the propagator itself (the W3C headers written directly make none)
    inject = propagate.inject
    propagate.inject = lambda *args, **kwargs: propagated.append(1) or inject(*args, **kwargs)
    exporter = InMemorySpanExporter()
    sampler = sampling.ALWAYS_ON if case == "other_sampler" else sampling.DEFAULT_ON
    resource = Resource.create({"service.name": "gw", "service.instance.id": "one"})
    provider = TracerProvider(resource=resource, sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if case == "watching_processor":
        class Watching(SpanProcessor):
            def on_start(self, span, parent_context=None):
                span.set_attribute("watched", True)
        provider.add_span_processor(Watching())
    trace.set_tracer_provider(provider)
    tracing.tracer()
    if case == "sdk":
        tracing._TracerCache.lean = None  # the SDK's own spans, to compare with

    flags = "00" if case == "unsampled" else "01"
    client = {"traceparent": f"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-{flags}", "tracestate": "k=v"}
    token = context.attach(propagate.extract(client))
    headers = {}
    with tracing.span("mcp_gateway.call", kind=SpanKind.SERVER, attributes={"gen_ai.tool.name": "call"}):
        tracing.finished_span("mcp_gateway.policy", time.time_ns(), {"mcp_gateway.policy.decision": "allow"})
        try:
            with tracing.span("mcp_gateway.credential", attributes={"mcp_gateway.auth.kind": "bearer"}, current=False):
                raise KeyError("not in any attribute")
        except KeyError:
            pass
        with tracing.span("GET", kind=SpanKind.CLIENT, attributes={"server.port": 443}, current=False) as upstream:
            tracing.inject_trace_context(headers, upstream)  # not the current span: named explicitly
            upstream.set_attribute("http.response.status_code", 200)
            upstream.set_attribute("ok", True)
            upstream.set_attribute("tags", ["a", "b"])  # a sequence: cleaned as the SDK does
            upstream.add_event("retry", {"attempt": 2})
    context.detach(token)
    root_headers = {}
    with tracing.span("root"):  # no parent: a trace of its own
        tracing.inject_trace_context(root_headers)

    spans = exporter.get_finished_spans()
    names = {s.context.span_id: s.name for s in spans}
    out = []
    for resource_spans in MessageToDict(encode_spans(spans)).get("resourceSpans", []):
        for scope_spans in resource_spans["scopeSpans"]:
            for s in scope_spans["spans"]:
                span = next(x for x in spans if x.name == s["name"])
                s["parentSpanId"] = names.get(span.parent.span_id, "client") if span.parent else None
                assert int(s.pop("endTimeUnixNano")) >= int(s.pop("startTimeUnixNano"))
                for event in s.get("events", []):
                    event.pop("timeUnixNano")
                s.pop("spanId")
                s["traceId"] = base64.b64decode(s["traceId"]).hex() if span.parent else "new"
                s["traceFlags"] = int(span.context.trace_flags)  # W3C flags, which OTLP does not carry
                s.update(resource=resource_spans["resource"], scope=scope_spans["scope"], type=type(span).__name__)
                out.append(s)
    root_flags = root_headers.get("traceparent", "")[-2:]
    upstream_id = f"{upstream.get_span_context().span_id:016x}"
    print(json.dumps({"spans": sorted(out, key=lambda s: s["name"]), "headers": headers, "root_flags": root_flags,
                      "upstream_id": upstream_id, "propagated": len(propagated)}))
    """
)


def lean_run(case: str, *, fast_paths: bool = True) -> dict[str, Any]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "MCP_GATEWAY_FAST_PATHS"))}
    switch = {} if fast_paths else {"MCP_GATEWAY_FAST_PATHS": "0"}
    done = subprocess.run(
        [sys.executable, "-c", LEAN, case], env=clean | switch, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _without_type(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in s.items() if k != "type"} for s in spans]


def test_lean_spans_reach_the_exporter_as_the_sdks_own_would() -> None:
    lean, sdk = lean_run("lean"), lean_run("sdk")
    assert {s["type"] for s in lean["spans"]} == {"LeanSpan"} and {s["type"] for s in sdk["spans"]} == {"ReadableSpan"}
    # What OTLP carries is the same: names, kinds, parents, trace, flags, trace state, attributes (the
    # sequence cleaned to an array), events, status (the error's type only), resource and scope.
    assert _without_type(lean["spans"]) == _without_type(sdk["spans"])
    assert lean["root_flags"] == sdk["root_flags"] == "03"  # sampled, and a random trace id
    spans = {s["name"]: s for s in lean["spans"]}
    assert spans.pop("root")["parentSpanId"] is None
    assert {s["traceId"] for s in spans.values()} == {"0af7651916cd43dd8448eb211c80319c"}
    assert {s["traceState"] for s in spans.values()} == {"k=v"}
    assert spans["mcp_gateway.call"]["parentSpanId"] == "client" and spans["GET"]["parentSpanId"] == "mcp_gateway.call"
    assert spans["mcp_gateway.credential"]["parentSpanId"] == "mcp_gateway.call"
    assert spans["mcp_gateway.credential"]["status"] == {"code": "STATUS_CODE_ERROR"}
    assert {"key": "error.type", "value": {"stringValue": "KeyError"}} in spans["mcp_gateway.credential"]["attributes"]
    assert "not in any attribute" not in json.dumps(lean)
    # The traceparent names the upstream span, made current or not.
    assert lean["headers"] == {
        "traceparent": f"00-0af7651916cd43dd8448eb211c80319c-{lean['upstream_id']}-01",
        "tracestate": "k=v",
    }
    assert lean["propagated"] == 0  # the default propagator's W3C headers, written directly


def test_with_the_fast_paths_off_the_sdk_makes_every_span_and_the_propagator_writes_the_headers() -> None:
    plain, lean = lean_run("lean", fast_paths=False), lean_run("lean")
    assert {s["type"] for s in plain["spans"]} == {"ReadableSpan"}  # no LeanSpan: the SDK's tracer made them
    assert _without_type(plain["spans"]) == _without_type(lean["spans"])
    assert plain["propagated"] == 2  # both headers' injections went through ``propagate.inject``
    assert plain["headers"] == {
        "traceparent": f"00-0af7651916cd43dd8448eb211c80319c-{plain['upstream_id']}-01",
        "tracestate": "k=v",
    }


def test_the_sdk_makes_the_spans_lean_ones_could_not_make_exactly() -> None:
    for case in ("other_sampler", "watching_processor"):
        spans = lean_run(case)["spans"]
        assert len(spans) == 5 and {s["type"] for s in spans} == {"ReadableSpan"}, case
    watched = lean_run("watching_processor")["spans"]
    assert all({"key": "watched", "value": {"boolValue": True}} in s["attributes"] for s in watched)
    # A client that does not sample: no span is exported, and its decision goes upstream.
    unsampled = lean_run("unsampled")
    assert [s["name"] for s in unsampled["spans"]] == ["root"]
    upstream_id = unsampled["upstream_id"]
    assert unsampled["headers"]["traceparent"] == f"00-0af7651916cd43dd8448eb211c80319c-{upstream_id}-00"


def test_the_w3c_headers_written_directly_are_the_propagators_own() -> None:
    from opentelemetry import baggage, context, propagate

    from mcp_gateway.tracing import inject_trace_context

    clients = [
        {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
        {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03", "tracestate": "a=1,b=2"},
        {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00"},
        {},
    ]
    for client in clients:
        for with_baggage in (False, True):
            extracted = propagate.extract(client)
            if with_baggage:
                extracted = baggage.set_baggage("tenant", "t1", extracted)
            token = context.attach(extracted)
            try:
                ours: dict[str, str] = {}
                inject_trace_context(ours)
                theirs: dict[str, str] = {}
                propagate.inject(theirs)
            finally:
                context.detach(token)
            assert ours == theirs, (client, with_baggage)
            assert ("traceparent" in ours) == bool(client) and ("baggage" in ours) == with_baggage


def test_client_span_attributes_name_the_origin_and_template_only() -> None:
    import httpx2

    from mcp_gateway.execution.send import _span_attributes

    def attributes(url: str, template: str | None = "/items/{id}", method: str = "GET") -> dict[str, Any]:
        return dict(_span_attributes(httpx2.Request(method, url), template))

    first = attributes("https://api.example.com/items/1?api_key=k1")
    assert first == {
        "http.request.method": "GET",
        "server.address": "api.example.com",
        "url.full": "https://api.example.com",
        "url.template": "/items/{id}",
    }
    assert attributes("https://api.example.com/items/2?api_key=k2") == first  # the same action, another call
    assert attributes("https://api.example.com:8443/items/1")["url.full"] == "https://api.example.com:8443"
    assert attributes("https://api.example.com:8443/items/1")["server.port"] == 8443
    assert attributes("https://api.example.com/items/1", method="DELETE")["http.request.method"] == "DELETE"
    assert "url.template" not in attributes("https://api.example.com/items/1", None)
    idna = attributes("https://中国.icom.museum/x")
    assert idna["server.address"] == "中国.icom.museum" and idna["url.full"] == "https://xn--fiqs8s.icom.museum"
    assert attributes("http://[::1]:9000/x")["url.full"] == "http://[::1]:9000"
