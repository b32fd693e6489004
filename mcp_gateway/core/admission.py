"""Traffic control in the call path: the manifest's ``limits:`` and each connector's
``circuit_breaker:`` and ``retries:``, over the building blocks of ``mcp_gateway.primitives.traffic``.

``CallPipeline`` asks ``admit`` after policy and approval, before anything reaches the upstream,
and holds the returned ``Admission`` (concurrency slots) until the call ends. Rate-limit tokens come
from the instance's memory, or from the shared ``AsyncBucketStore`` on PostgreSQL so that a limit
holds across every instance. A reloaded manifest's rules take over the buckets and calls in flight,
and a connector whose ``circuit_breaker`` settings are unchanged keeps its circuit.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable

import anyio

from ..manifest import ConnectorConfig, Manifest
from ..manifest.traffic_settings import CircuitBreakerConfig
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
        self._control = TrafficControl([], clock=clock, shared=shared)
        self._breakers: dict[str, tuple[CircuitBreakerConfig, CircuitBreaker]] = {}

    def _adopt(self, manifest: Manifest) -> None:
        # A reload keeps what the traffic did so far: the buckets and calls in flight of the rules, and
        # the circuit of every connector whose breaker settings are unchanged. Starting afresh would
        # refill every bucket, let a concurrency cap run twice its calls, and close open circuits.
        if manifest is self._manifest:
            return
        self._control.adopt(
            [
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
        )
        breakers: dict[str, tuple[CircuitBreakerConfig, CircuitBreaker]] = {}
        for c in manifest.connectors:
            settings = c.circuit_breaker
            if settings is None:
                continue
            kept = self._breakers.get(c.slug)
            breakers[c.slug] = (
                kept
                if kept is not None and kept[0] == settings
                else (
                    settings,
                    CircuitBreaker(threshold=settings.threshold, cooldown=settings.cooldown, clock=self._clock),
                )
            )
        self._breakers = breakers
        self._manifest = manifest

    async def admit(self, manifest: Manifest, principal: Principal, action: Action) -> Admission | ErrorResult:
        """Let the call through its connector's circuit and every limit that applies (holding its
        concurrency slots, and the circuit's trial when it is the one), or the ``rate_limited`` /
        ``upstream_unavailable`` result that stops it."""
        self._adopt(manifest)
        # The circuit first: a call it refuses sends nothing, so it spends no rate-limit token.
        trial: Admission | Refusal = Admission(_nothing)
        kept = self._breakers.get(action.connector)
        if kept is not None:
            trial = kept[1].admit(action.connector)
            if isinstance(trial, Refusal):
                return refusal_result(trial)
        if not self._control:
            return trial
        try:
            admitted = await self._control.admit(
                agent=principal.agent or principal.user, connector=action.connector, action=action.qualified_name
            )
        except BaseException:
            trial.release()
            raise
        if isinstance(admitted, Refusal):
            trial.release()  # a trial the limits stop leaves the next call to be the trial
            return refusal_result(admitted)

        def release() -> None:
            admitted.release()
            trial.release()

        return Admission(release)

    async def admit_discovery(self, manifest: Manifest, principal: Principal) -> ErrorResult | None:
        """None when ``principal`` may discover or describe now, else the ``rate_limited`` result
        (its agent's discovery bucket, ``traffic.DISCOVERY_FACTOR`` times its call limit, is empty)."""
        self._adopt(manifest)
        if not self._control:
            return None
        refusal = await self._control.admit_discovery(agent=principal.agent or principal.user)
        return None if refusal is None else refusal_result(refusal)

    def breaker_refusal(self, connector: str) -> Refusal | None:
        """Why ``connector``'s circuit is not closed now (None when it is, or it has no breaker)."""
        kept = self._breakers.get(connector)
        return None if kept is None else kept[1].refusal(connector)

    def outcome(self, connector: str, *, failed: bool) -> None:
        """Tell the connector's circuit breaker (if any) how an upstream attempt went."""
        kept = self._breakers.get(connector)
        if kept is not None:
            if failed:
                kept[1].failed(connector)
            else:
                kept[1].succeeded(connector)

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
