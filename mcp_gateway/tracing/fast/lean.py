"""Spans for the SDK's pipeline made without its per-span machinery (tracing stays cheap on the call path).

The OpenTelemetry SDK does more work for each span it makes than the gateway's spans need, and
leaves more objects for the garbage collector: the sampler looks the parent up twice more, the
attributes are copied into a locked ``BoundedAttributes``, every span takes a ``threading.Lock`` and
a ``BoundedList`` for events and another for links, each processor's ``on_start`` and ``_on_ending``
run, and ``end`` copies the whole span into a ``ReadableSpan``. The gateway makes three to five
spans per call, all from one task, none shared with another thread.

A ``LeanSpan`` is the same span for whatever reads it downstream: the SDK's tracer's ids, resource
and instrumentation scope, the parent from the current context, the default sampler's decision; at
``end`` it goes, as the ``ReadableSpan`` it also is, to the tracer's span processor, which batches
and exports it as it would the SDK's own (same name, kind, parent, flags, trace state, attributes, status, times).
It does a fraction of that work (``scripts/bench_tracing.py --instructions`` counts one call's
tracing work both ways). ``Lean.start`` makes one only where that is exact, and answers None, so
the caller lets the SDK make the span: another sampler than the default (``parentbased_always_on``),
a parent that is not sampled, a span attribute length limit, a disabled tracer, or a span processor
with an ``on_start`` or ``_on_ending`` of its own (one that watches spans as they start).

This module imports the SDK: it is loaded only once one is installed.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Mapping
from time import time_ns
from typing import Any, cast

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import (
    Event,
    ReadableSpan,
    SpanProcessor,
    SynchronousMultiSpanProcessor,
    Tracer,
    sampling,
)
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import Attributes, AttributeValue

__all__ = ["Lean", "LeanSpan"]

logger = logging.getLogger(__name__)

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_SAMPLED_RANDOM = TraceFlags(TraceFlags.SAMPLED | TraceFlags.RANDOM_TRACE_ID)
_RECORD_AND_SAMPLE = sampling.Decision.RECORD_AND_SAMPLE
# What a span attribute may be without cleaning; anything else (sequences, None, other types) goes
# through the API's own ``BoundedAttributes``, which converts or drops it as the SDK would.
_PLAIN = frozenset({str, bool, int, float})
_QUIET_HOOKS = frozenset({SpanProcessor, BatchSpanProcessor, SimpleSpanProcessor})


def _quiet(processor: SpanProcessor) -> bool:
    """Whether ``processor`` does nothing when a span starts or is ending (it acts only on ``on_end``)."""
    cls = type(processor)
    return all(
        getattr(cls, hook) in {getattr(quiet, hook) for quiet in _QUIET_HOOKS} for hook in ("on_start", "_on_ending")
    )


class Lean:
    """What lean spans need from one SDK tracer, read once; ``start`` makes one or answers None.

    Some of it is the tracer's private state (its limits, scope, internal metrics, configurator):
    an SDK without one of those raises ``AttributeError`` here, and its spans are the SDK's own."""

    @classmethod
    def of(cls, tracer: trace.Tracer) -> Lean | None:
        """Lean spans for ``tracer`` if it is the SDK's own, and has what they read."""
        if type(tracer) is not Tracer or not isinstance(tracer, Tracer):
            return None
        try:
            return cls(tracer)
        except AttributeError:  # an SDK version whose tracer lacks something: its own spans then
            return None

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.resource = tracer.resource
        self.info = tracer.instrumentation_info
        self.scope = tracer._instrumentation_scope
        self.ids = tracer.id_generator
        self.metrics = tracer._tracer_metrics
        self.enabled = tracer._is_enabled
        limits = tracer._span_limits
        self.max_attributes: int | None = limits.max_span_attributes
        self.max_events: int | None = limits.max_events
        self.max_links: int | None = limits.max_links
        self.max_event_attributes: int | None = limits.max_event_attributes
        self.max_link_attributes: int | None = limits.max_link_attributes
        processor = tracer.span_processor
        self.processor = processor if type(processor) is SynchronousMultiSpanProcessor else None
        self.exact = (
            self.processor is not None
            and tracer.sampler is sampling.DEFAULT_ON
            and limits.max_span_attribute_length is None
            and limits.max_attribute_length is None
        )
        self._processors: tuple[SpanProcessor, ...] | None = None
        self._quiet = False

    def _hooks_quiet(self, processor: SynchronousMultiSpanProcessor) -> bool:
        # A provider's processors can be added at any time: the tuple is replaced then.
        current = processor._span_processors
        if current is not self._processors:
            self._processors, self._quiet = current, all(_quiet(p) for p in current)
        return self._quiet

    def start(
        self, name: str, kind: SpanKind, attributes: Mapping[str, AttributeValue] | None, start_ns: int | None
    ) -> LeanSpan | None:
        processor = self.processor
        if not self.exact or processor is None or not self.enabled() or not self._hooks_quiet(processor):
            return None
        parent: SpanContext | None = trace.get_current_span().get_span_context()
        if parent.is_valid:
            inherited = parent.trace_flags
            if not inherited & TraceFlags.SAMPLED:
                return None  # dropped by the sampler: the SDK makes the non-recording span that still propagates
            trace_id, random, state = parent.trace_id, inherited & TraceFlags.RANDOM_TRACE_ID, parent.trace_state
        else:
            parent, trace_id, random, state = None, self.ids.generate_trace_id(), self.ids.is_trace_id_random(), None
        flags = _SAMPLED_RANDOM if random else _SAMPLED
        # Positional: SpanContext(trace_id, span_id, is_remote, trace_flags, trace_state).
        context = SpanContext(trace_id, self.ids.generate_span_id(), False, flags, state)
        ended = self.metrics.start_span(parent, _RECORD_AND_SAMPLE)
        return LeanSpan(self, processor, name, kind, context, parent, attributes, start_ns or time_ns(), ended)


class LeanSpan(trace.Span, ReadableSpan):
    """A recording span that is its own ``ReadableSpan`` once ended (as the SDK's ``Span`` is one),
    handed as it is to the span processor: nothing changes it after ``end``, so no copy is needed."""

    def __init__(
        self,
        lean: Lean,
        processor: SynchronousMultiSpanProcessor,
        name: str,
        kind: SpanKind,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: Mapping[str, AttributeValue] | None,
        start_ns: int,
        ended: Callable[[], None],
    ) -> None:
        if not attributes:
            kept: dict[str, AttributeValue] | BoundedAttributes = {}
        elif _plain(attributes, lean.max_attributes):
            kept = dict(attributes)
        else:
            kept = BoundedAttributes(lean.max_attributes, attributes, immutable=False)
        ReadableSpan.__init__(
            self,
            name=name,
            context=context,
            parent=parent,
            resource=lean.resource,
            attributes=kept,
            kind=kind,
            instrumentation_info=lean.info,
            start_time=start_ns,
            instrumentation_scope=lean.scope,
        )
        self._lean, self._processor, self._ended = lean, processor, ended

    def get_span_context(self) -> SpanContext:
        return cast(SpanContext, self._context)  # a LeanSpan always has one (ReadableSpan's may be None)

    def is_recording(self) -> bool:
        return self._end_time is None

    def _ended_already(self, what: str) -> bool:
        if self._end_time is None:
            return False
        logger.warning("Tried calling %s on an ended span.", what)
        return True

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        if self._ended_already("set_attribute"):
            return
        attributes = self._attributes
        limit = self._lean.max_attributes
        if type(attributes) is dict:
            if type(value) in _PLAIN and type(key) is str and key and (limit is None or len(attributes) < limit):
                attributes[key] = value
                return
            # From now on the API's own cleaning and limits, as the SDK's spans have.
            attributes = self._attributes = BoundedAttributes(limit, attributes, immutable=False)
        attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def add_event(self, name: str, attributes: Attributes = None, timestamp: int | None = None) -> None:
        if self._ended_already("add_event"):
            return
        if not isinstance(self._events, BoundedList):
            self._events = BoundedList(self._lean.max_events)
        bounded = BoundedAttributes(self._lean.max_event_attributes, attributes, immutable=True)
        self._events.append(Event(name, bounded, timestamp))

    def add_link(self, context: SpanContext, attributes: Attributes = None) -> None:
        if self._ended_already("add_link") or not (context and (context.is_valid or attributes or context.trace_state)):
            return
        if not isinstance(self._links, BoundedList):
            self._links = BoundedList(self._lean.max_links)
        self._links.append(Link(context, BoundedAttributes(self._lean.max_link_attributes, attributes, immutable=True)))

    def update_name(self, name: str) -> None:
        if not self._ended_already("update_name"):
            self._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self._ended_already("set_status"):
            return
        new = status if isinstance(status, Status) else Status(status, description)
        # As the SDK: an OK status is final, and UNSET never replaces anything.
        if self._status.status_code is StatusCode.OK or new.status_code is StatusCode.UNSET:
            return
        self._status = new

    def record_exception(
        self,
        exception: BaseException,
        attributes: Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        module, qualname = type(exception).__module__, type(exception).__qualname__
        recorded: dict[str, AttributeValue] = {
            "exception.type": f"{module}.{qualname}" if module and module != "builtins" else qualname,
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
        }
        if attributes:
            recorded.update(attributes)
        self.add_event("exception", recorded, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self._end_time is not None:
            self._ended_already("end")
            return
        self._end_time = end_time if end_time is not None else time_ns()
        self._ended()
        self._processor.on_end(self)


def _plain(attributes: Mapping[str, Any], limit: int | None) -> bool:
    if limit is not None and len(attributes) > limit:
        return False
    for key, value in attributes.items():  # a loop, not all(<generator>): no generator frame for a few items
        if type(key) is not str or not key or type(value) not in _PLAIN:
            return False
    return True
