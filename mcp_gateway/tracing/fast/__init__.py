"""The one place tracing leans on OpenTelemetry's private code, behind the fast paths' one switch.

Two shortcuts, each read from private state the OpenTelemetry API does not publish:

- lean spans (``lean.py``): the SDK's tracer's limits, scope, metrics and processors, read to make
  the same spans with less work per span;
- the default propagator recognised (``w3c_default``): the composite's own list of propagators, read
  so that ``inject_trace_context`` can write the two W3C headers itself.

Each runs only on the OpenTelemetry release it was written and tested against, and not with
``MCP_GATEWAY_FAST_PATHS=0`` (``settings.fast_paths_switched_on``, the switch ``server.fast``
obeys too); otherwise spans are the SDK's own and headers come from ``propagate.inject``. The
switch is read when a tracer or propagator is first seen (not once per span), so a process that
sets it before tracing starts is served by the public API alone. The public API that would make
each unnecessary is named in ``docs/operations.md``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ...vocabulary.settings import fast_paths_switched_on

if TYPE_CHECKING:
    from .lean import Lean

__all__ = ["OTEL_TESTED", "enabled", "lean_for", "w3c_default"]

OTEL_TESTED = (1, 45)
"""The OpenTelemetry API and SDK release the shortcuts were written and tested against."""


@functools.cache
def _tested(distribution: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version  # asked once a tracer or propagator is seen

    try:
        release = tuple(int(part) for part in version(distribution).split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return False
    return release == OTEL_TESTED


def enabled(distribution: str = "opentelemetry-api") -> bool:
    """Whether a shortcut over ``distribution``'s private state may run: its tested release, not switched off."""
    return fast_paths_switched_on() and _tested(distribution)


def lean_for(tracer: trace.Tracer) -> Lean | None:
    """Lean spans for ``tracer`` (the SDK's, already imported by whoever installed it); None: the SDK's own."""
    if not enabled("opentelemetry-sdk"):
        return None
    from .lean import Lean

    return Lean.of(tracer)


def w3c_default(propagator: object) -> bool:
    """Whether ``propagator`` is OpenTelemetry's default (``tracecontext,baggage``), whose headers the
    caller may write itself; False whenever that cannot be told from the tested release's state."""
    if not enabled() or not isinstance(propagator, CompositePropagator):
        return False
    parts = getattr(propagator, "_propagators", None)  # private: the composite publishes only ``fields``
    return parts is not None and [type(p) for p in parts] == [TraceContextTextMapPropagator, W3CBaggagePropagator]
