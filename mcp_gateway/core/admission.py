"""Traffic control in the call path: the manifest's ``limits:`` and each connector's
``circuit_breaker:`` and ``retries:``, over the building blocks of ``mcp_gateway.primitives.traffic``.

``CallPipeline`` asks ``admit`` after policy and approval, before anything reaches the upstream,
and holds the returned ``Admission`` (concurrency slots) until the call ends. Rate-limit tokens come
from the instance's memory, or from the shared ``AsyncBucketStore`` on PostgreSQL so that a limit
holds across every instance. The rules and breakers are rebuilt when the manifest changes (reload).
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable

import anyio

from ..manifest import ConnectorConfig, Manifest
from ..primitives.traffic import Admission, AsyncBucketStore, CircuitBreaker, LimitRule, Refusal, TrafficControl
from ..services.identity import Principal
from ..vocabulary.model import Action, ErrorResult

__all__ = ["MAX_BACKOFF_SECONDS", "TrafficGate", "refusal_result"]

MAX_BACKOFF_SECONDS = 5.0
"""A read is retried only when the wait before it is at most this long (an upstream asking for
more is answered ``rate_limited`` with its ``retry_after`` instead)."""
BASE_BACKOFF_SECONDS = 0.2


def refusal_result(refusal: Refusal) -> ErrorResult:
    return ErrorResult(
        reason=refusal.reason,
        message=refusal.message,
        retry_after=refusal.retry_after,
        hint=f"Wait {refusal.retry_after:g} s before calling again (retry_after).",
    )


class TrafficGate:
    """Rate limits, concurrency caps, circuit breakers and read retries for one gateway."""

    def __init__(
        self,
        *,
        shared: AsyncBucketStore | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._shared = shared
        self._clock = clock
        self.sleep = sleep
        self._jitter = jitter
        self._manifest: Manifest | None = None
        self._control = TrafficControl([], clock=clock)
        self._breakers: dict[str, CircuitBreaker] = {}

    def _adopt(self, manifest: Manifest) -> None:
        if manifest is self._manifest:
            return
        rules = [
            LimitRule(
                scope=limit.scope,
                matches=limit.matcher.matches,
                name=f"{limit.scope}:{limit.pattern}",
                rate=limit.rate,
                burst=limit.burst,
                concurrency=limit.concurrency,
            )
            for limit in manifest.limits
        ]
        self._control = TrafficControl(rules, clock=self._clock, shared=self._shared)
        self._breakers = {
            c.slug: CircuitBreaker(
                threshold=c.circuit_breaker.threshold, cooldown=c.circuit_breaker.cooldown, clock=self._clock
            )
            for c in manifest.connectors
            if c.circuit_breaker is not None
        }
        self._manifest = manifest

    async def admit(self, manifest: Manifest, principal: Principal, action: Action) -> Admission | ErrorResult:
        """Let the call through every limit that applies (holding its concurrency slots), or the
        ``rate_limited`` / ``upstream_unavailable`` result that stops it."""
        self._adopt(manifest)
        admitted: Admission | Refusal = Admission(_nothing)
        if self._control:
            admitted = await self._control.admit(
                agent=principal.agent or principal.user, connector=action.connector, action=action.qualified_name
            )
            if isinstance(admitted, Refusal):
                return refusal_result(admitted)
        # After the limits: a half-open circuit lets exactly one trial through, which must then run.
        refusal = self.breaker_refusal(action.connector)
        if refusal is not None:
            admitted.release()
            return refusal_result(refusal)
        return admitted

    async def admit_discovery(self, manifest: Manifest, principal: Principal) -> ErrorResult | None:
        """None when ``principal`` may discover or describe now, else the ``rate_limited`` result
        (its agent's discovery bucket, ``traffic.DISCOVERY_FACTOR`` times its call limit, is empty)."""
        self._adopt(manifest)
        if not self._control:
            return None
        refusal = await self._control.admit_discovery(agent=principal.agent or principal.user)
        return None if refusal is None else refusal_result(refusal)

    def breaker_refusal(self, connector: str) -> Refusal | None:
        breaker = self._breakers.get(connector)
        return None if breaker is None else breaker.check(connector)

    def outcome(self, connector: str, *, failed: bool) -> None:
        """Tell the connector's circuit breaker (if any) how an upstream attempt went."""
        breaker = self._breakers.get(connector)
        if breaker is not None:
            if failed:
                breaker.failed(connector)
            else:
                breaker.succeeded(connector)

    def retry_delay(
        self, cfg: ConnectorConfig, action: Action, attempt: int, retry_after: float | None
    ) -> float | None:
        """Seconds to wait before trying a read again after a transient failure (``attempt`` counts
        from 0), or None when it must not be retried (a write, retries spent, a long Retry-After)."""
        if action.risk != "read" or attempt >= cfg.retries.reads:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= MAX_BACKOFF_SECONDS else None
        ceiling = min(MAX_BACKOFF_SECONDS, BASE_BACKOFF_SECONDS * 2**attempt)
        return ceiling * (0.5 + self._jitter() / 2)  # "equal jitter": at least half the back-off


def _nothing() -> None:
    return None
