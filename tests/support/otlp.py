"""A real OTLP/HTTP trace receiver on loopback: decodes each protobuf ``ExportTraceServiceRequest``
(``opentelemetry-proto``) and keeps the spans, for tests that check what the gateway exports.

    receiver = OtlpReceiver()
    with LoopbackServer(receiver) as server:       # OTEL_EXPORTER_OTLP_ENDPOINT=server.base_url
        ...
    receiver.spans                                 # [ReceivedSpan(name, trace_id, span_id, parent_id, attributes)]
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.support.upstream import Receive, Scope, Send

__all__ = ["OtlpReceiver", "ReceivedSpan"]


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    service: str
    attributes: dict[str, Any]


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind in ("string_value", "bool_value", "int_value", "double_value") else str(v)


class OtlpReceiver:
    """ASGI app answering ``POST /v1/traces`` like an OpenTelemetry collector."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        if scope["path"] != "/v1/traces" or scope["method"] != "POST":
            await _reply(send, 404, b"")
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        received = []
        for resource_spans in request.resource_spans:
            service = next((_value(a.value) for a in resource_spans.resource.attributes if a.key == "service.name"), "")
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_id=s.parent_span_id.hex(),
                            kind=s.kind,
                            service=str(service),
                            attributes={a.key: _value(a.value) for a in s.attributes},
                        )
                    )
        with self._lock:
            self.requests += 1
            self.spans.extend(received)
        await _reply(send, 200, ExportTraceServiceResponse().SerializeToString())


async def _reply(send: Send, status: int, body: bytes) -> None:
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/x-protobuf")]}
    )
    await send({"type": "http.response.body", "body": body})
