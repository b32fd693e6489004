"""OpenTelemetry traces: a span per meta-tool, policy decision, credential application and
upstream call, under the MCP SDK's own span for each request.

The MCP SDK already opens a SERVER span per JSON-RPC request (its own OpenTelemetry support), following the
semantic conventions for MCP and taking the client's W3C ``traceparent`` from ``_meta``. The gateway
adds its spans below it, through the OpenTelemetry *API* only: with no SDK configured they are
no-ops costing a function call. ``configure_tracing`` installs the SDK and an OTLP/HTTP exporter when
the standard variables ask for one (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, unless ``OTEL_TRACES_EXPORTER=none`` or
``OTEL_SDK_DISABLED=true``); the exporter itself reads the rest (headers, timeout, protocol…).

Attributes never carry a secret, an argument value or a result: names, kinds, status codes and
sizes only. Upstream HTTP calls carry ``traceparent`` (W3C trace context) unless the connector
turns it off.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping, MutableMapping
from contextlib import AbstractContextManager
from contextvars import Token
from types import TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry import baggage, context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    INVALID_SPAN,
    INVALID_SPAN_CONTEXT,
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    SpanKind,
    StatusCode,
)

from . import fast

if TYPE_CHECKING:
    from .fast.lean import Lean

__all__ = ["SpanKind", "configure_tracing", "finished_span", "inject_trace_context", "recording", "span", "tracer"]

logger = logging.getLogger(__name__)
_TRACER_NAME = "mcp-gateway"
_NO_SDK = (ProxyTracerProvider, NoOpTracerProvider)


class _TracerCache:
    """The gateway's tracer, the provider it came from, and its lean spans: ``trace.get_tracer`` builds
    a new tracer (and its instrumentation scope) on every call, work the call path need not repeat."""

    provider: trace.TracerProvider | None = None
    tracer: trace.Tracer | None = None
    lean: Lean | None = None


def tracer() -> trace.Tracer:
    provider = trace.get_tracer_provider()
    cached = _TracerCache.tracer
    if cached is None or _TracerCache.provider is not provider:
        cached = _TracerCache.tracer = provider.get_tracer(_TRACER_NAME)
        _TracerCache.provider = provider
        _TracerCache.lean = _lean_for(cached)
    return cached


def _lean_for(made: trace.Tracer) -> Lean | None:
    """Lean spans for ``made`` if the SDK is loaded (``fast.lean`` imports it; without it, no import)
    and the fast paths may run (``fast``); else None, and the SDK makes every span."""
    if "opentelemetry.sdk.trace" not in sys.modules:
        return None
    return fast.lean_for(made)


def _start(name: str, kind: SpanKind, attributes: Mapping[str, Any] | None, start_ns: int | None = None) -> Span:
    """A recording span, child of the current one: a lean one where it is exact (``fast.lean``), else the SDK's."""
    made = tracer()
    lean = _TracerCache.lean
    started = lean.start(name, kind, attributes, start_ns) if lean is not None else None
    return started or made.start_span(name, kind=kind, attributes=attributes, start_time=start_ns)


_RECHECK_SECONDS = 1.0


class _ProviderLookup:
    """Whether a real tracer provider was found, and when it was last looked for: once found it
    stays (a provider is set once per process); while there is none, asking OpenTelemetry (which
    reads ``os.environ`` each time) happens at most once a second, not once per span."""

    found = False
    checked = float("-inf")


def recording() -> bool:
    """Whether spans go anywhere: an SDK (or any real provider) is installed. Without one a span
    would be a no-op object that costs a context switch per use; ``span`` then makes none."""
    if _ProviderLookup.found:
        return True
    now = time.monotonic()
    if now - _ProviderLookup.checked >= _RECHECK_SECONDS:
        _ProviderLookup.found = not isinstance(trace.get_tracer_provider(), _NO_SDK)
        _ProviderLookup.checked = now
    return _ProviderLookup.found


def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, Any] | None = None,
    current: bool = True,
) -> AbstractContextManager[Span]:
    """A child span of the current one; an exception marks it as an error with its type only
    (an exception's message may quote an upstream's text). With ``current`` it is the current span
    while the block runs (the parent of the spans made in it, and what ``inject_trace_context``
    sends); a leaf span, under which no span is made, spares that context switch.

    With no tracer provider installed it yields the invalid span and leaves the current context as
    it is: what a no-op span would propagate (its parent's trace context) is the same either way.
    That case (every call of a gateway that exports nothing) builds no scope object at all."""
    return _Scope(name, kind, attributes, current) if recording() else _NO_SCOPE


class _NoScope:
    """``span`` without a tracer provider: yields the invalid span, records nothing. Stateless, so one
    instance serves every block, nested or concurrent."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return INVALID_SPAN

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        return None


_NO_SCOPE = _NoScope()


class _Scope:
    """``span``'s context manager: a class, not ``@contextmanager`` (a generator and two more frames
    per span), nor ``start_as_current_span``, which wraps the same in two more context managers."""

    __slots__ = ("_attributes", "_current", "_kind", "_name", "_span", "_token")

    def __init__(self, name: str, kind: SpanKind, attributes: Mapping[str, Any] | None, current: bool) -> None:
        self._name, self._kind, self._attributes, self._current = name, kind, attributes, current
        self._span: Span | None = None
        self._token: Token[Context] | None = None

    def __enter__(self) -> Span:
        opened = self._span = _start(self._name, self._kind, self._attributes)
        if self._current:
            self._token = context.attach(trace.set_span_in_context(opened))
        return opened

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        opened = self._span
        if opened is None:
            return
        if kind is not None:
            opened.set_attribute("error.type", kind.__qualname__)
            opened.set_status(StatusCode.ERROR)
        if self._token is not None:
            context.detach(self._token)
        opened.end()


def finished_span(name: str, start_ns: int, attributes: Mapping[str, Any]) -> None:
    """A child span of the current one, from ``start_ns`` (``time.time_ns()``) to now, for a step that
    runs no code of its own under it (no child, no exception to mark): made whole once its
    attributes are known, which spares a context switch and a ``set_attributes`` after the start."""
    if recording():
        _start(name, SpanKind.INTERNAL, attributes, start_ns).end()


class _Propagator:
    """The configured propagator, and whether it is OpenTelemetry's default (``OTEL_PROPAGATORS`` unset
    or ``tracecontext,baggage``), whose W3C headers ``inject_trace_context`` writes itself: the same
    text, without the cost of going through the composite and its two propagators. Told apart by
    ``fast.w3c_default`` (private state); with the fast paths off, never: ``propagate.inject`` writes."""

    seen: object = None
    default = False


def inject_trace_context(headers: MutableMapping[str, str], of: Span | None = None) -> None:
    """Add ``traceparent``/``tracestate`` (and ``baggage``, if any) to an outbound request's headers,
    as the configured propagator would: for ``of`` when it is a real span (the request's own, which
    need not be the current one), else for the current span (the client's, when nothing records)."""
    current = context.get_current()
    propagator = propagate.get_global_textmap()
    if propagator is not _Propagator.seen:
        _Propagator.seen, _Propagator.default = propagator, fast.w3c_default(propagator)
    if of is None or not of.get_span_context().is_valid:
        if not current and _Propagator.default:
            return  # an empty context holds no span and no baggage: the W3C headers would say nothing
        of = trace.get_current_span(current)
    if not _Propagator.default or baggage.get_all(current):
        propagate.inject(headers, trace.set_span_in_context(of, current))
        return
    span_context = of.get_span_context()
    if span_context != INVALID_SPAN_CONTEXT:  # what TraceContextTextMapPropagator.inject writes
        headers["traceparent"] = (
            f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{span_context.trace_flags:02x}"
        )
        if span_context.trace_state:
            headers["tracestate"] = span_context.trace_state.to_header()


def configure_tracing(env: Mapping[str, str]) -> bool:
    """Install the OpenTelemetry SDK with an OTLP/HTTP exporter when ``env`` asks for one; True if it did.

    Imports the SDK only then: a gateway that does not export pays nothing for it at start-up.
    """
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true" or env.get("OTEL_TRACES_EXPORTER", "otlp") == "none":
        return False
    if not (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME", "mcp-gateway")})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _ProviderLookup.found = True
    logger.info("tracing: exporting spans over OTLP/HTTP")
    return True


def shutdown_tracing() -> None:
    """Flush spans still batched (on shutdown)."""
    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if callable(shutdown):
        shutdown()
