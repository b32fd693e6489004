"""Traffic control: rate limits, concurrency caps and a circuit breaker per connector.

- **Rate limits** are token buckets keyed by scope: per agent, per connector, per action pattern
  (a ``policy`` matcher over the qualified name; one bucket for all the actions it matches). A
  call takes one token from every bucket that applies, or none: when any bucket is empty the call
  is refused with ``retry_after`` = the time until that bucket has a token again, and the other
  buckets keep theirs.
- **Discovery** (``discover``, ``describe``) answers from memory but costs ranking and a result of
  several KB each, so it is limited too: every agent-scoped rule with a rate gives the agent a
  separate discovery bucket ``DISCOVERY_FACTOR`` times as generous (rate and burst), since a task
  looks up a few actions for every call it makes. The call buckets are not touched by discovery,
  nor the discovery buckets by calls.
- **Concurrency caps** bound calls in flight for the same scopes; a slot is held for the call's
  duration (``Admission`` is a context manager) and released however the call ends.
- **The circuit breaker** counts consecutive upstream failures per connector. After ``threshold``
  of them it opens: calls fail fast with ``upstream_unavailable`` and a retry time. When the
  cool-down has passed, one call goes through (half-open); its success closes the circuit, its
  failure opens it again for another cool-down, and a trial that ends with neither (cancelled)
  lets the next call be the trial.

All state is in memory and per instance; time comes from a monotonic source the caller injects,
so every decision is unit-testable without sleeping. Limits that must hold across instances
sharing PostgreSQL are a store concern: ``admit`` then takes its tokens from an
``AsyncBucketStore`` (``store.postgres.PostgresBuckets``: one atomic statement per bucket, on the
database's clock); concurrency caps and the circuit breaker stay per instance.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

__all__ = [
    "DISCOVERY_FACTOR",
    "Admission",
    "AsyncBucketStore",
    "BucketStore",
    "CircuitBreaker",
    "LimitRule",
    "MemoryBuckets",
    "Refusal",
    "Scope",
    "TrafficControl",
]

Scope = Literal["agent", "connector", "action"]

DISCOVERY_FACTOR = 4.0
"""How much more generous an agent's discovery bucket is than its call bucket (rate and burst)."""
Monotonic = Callable[[], float]


@dataclass(frozen=True)
class LimitRule:
    """One limit: ``rate`` calls per second with bursts up to ``burst``, and/or at most
    ``concurrency`` in flight, for every call whose scope key ``matches``."""

    scope: Scope
    matches: Callable[[str], bool]
    """Tested against the agent name, the connector slug or the qualified action name."""
    name: str
    """How the rule is named in refusals and metrics (e.g. ``agent:release-bot``)."""
    rate: float | None = None
    burst: float | None = None
    concurrency: int | None = None

    @property
    def capacity(self) -> float:
        return self.burst if self.burst is not None else max(1.0, self.rate or 1.0)


@dataclass(frozen=True)
class Refusal:
    """Why a call may not run now, and when to try again."""

    reason: Literal["rate_limited", "upstream_unavailable"]
    scope: str
    retry_after: float
    """Seconds, rounded up to a tenth (never 0: "retry now" would be a busy loop)."""
    message: str


class BucketStore(Protocol):
    """Where token buckets live: in memory for one instance, in the database for several."""

    def take(self, key: str, *, rate: float, capacity: float, now: float) -> float:
        """Take one token from bucket ``key`` if it has one and return 0.0; otherwise take nothing
        and return the seconds until a token is available."""
        ...

    def give_back(self, key: str, *, capacity: float) -> None:
        """Return a token taken by a call that another bucket then refused."""
        ...


class AsyncBucketStore(Protocol):
    """Token buckets in a database several instances share; time is the database's own."""

    async def take(self, key: str, *, rate: float, capacity: float) -> float:
        """As ``BucketStore.take``, atomically across every instance."""
        ...

    async def give_back(self, key: str, *, rate: float, capacity: float) -> None: ...


@dataclass
class _Bucket:
    tokens: float
    at: float


class MemoryBuckets:
    """Token buckets of one process."""

    def __init__(self) -> None:
        self._buckets: dict[str, _Bucket] = {}

    def take(self, key: str, *, rate: float, capacity: float, now: float) -> float:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(capacity, now)
        bucket.tokens = min(capacity, bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / rate

    def give_back(self, key: str, *, capacity: float) -> None:
        bucket = self._buckets.get(key)
        if bucket is not None:
            bucket.tokens = min(capacity, bucket.tokens + 1.0)


class _LocalBuckets:
    """A process's ``BucketStore`` seen through the shared store's interface, on the injected clock."""

    def __init__(self, buckets: BucketStore, clock: Monotonic) -> None:
        self._buckets = buckets
        self._clock = clock

    async def take(self, key: str, *, rate: float, capacity: float) -> float:
        return self._buckets.take(key, rate=rate, capacity=capacity, now=self._clock())

    async def give_back(self, key: str, *, rate: float, capacity: float) -> None:
        self._buckets.give_back(key, capacity=capacity)


@dataclass
class Admission:
    """A call let through: holds its concurrency slots until ``release`` (or the ``with`` block ends)."""

    _release: Callable[[], None] = field(repr=False)
    _done: bool = field(default=False, repr=False)

    def release(self) -> None:
        if not self._done:
            self._done = True
            self._release()

    def __enter__(self) -> Admission:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class CircuitBreaker:
    """Per-connector circuit: closed → open after ``threshold`` consecutive failures → half-open
    after ``cooldown`` seconds (one trial call) → closed on its success, open again on failure.

    A trial that ends with neither (cancelled, or stopped before its request left) gives its
    place back when its ``Admission`` is released: the next call is the trial."""

    def __init__(self, *, threshold: int = 5, cooldown: float = 30.0, clock: Monotonic = time.monotonic) -> None:
        if threshold < 1 or cooldown <= 0:
            raise ValueError("threshold must be >= 1 and cooldown > 0")
        self._threshold = threshold
        self._cooldown = cooldown
        self._clock = clock
        self._failures: dict[str, int] = {}
        self._open_until: dict[str, float] = {}
        self._trial: dict[str, int] = {}
        """The trial in flight per connector, by number: a trial released after another began
        (its outcome reopened the circuit, a cool-down passed) must not free the new one."""
        self._trials = 0

    def admit(self, connector: str) -> Admission | Refusal:
        """Let a call go to ``connector``'s upstream now, or refuse it; in half-open state only the
        first caller gets through (the trial), the others wait for its outcome."""
        until = self._open_until.get(connector)
        if until is None:
            return Admission(_nothing)
        if self._clock() >= until and connector not in self._trial:
            self._trials += 1
            number = self._trial[connector] = self._trials
            return Admission(lambda: self._abandoned(connector, number))
        refusal = self.refusal(connector)
        assert refusal is not None
        return refusal

    def refusal(self, connector: str) -> Refusal | None:
        """Why a call may not go to ``connector``'s upstream now (the circuit is not closed), taking
        no trial: None when it is closed."""
        until = self._open_until.get(connector)
        if until is None:
            return None
        now = self._clock()
        wait = _ceil_tenth(until - now if now < until else 1.0)  # past the cool-down, a trial is due or in flight
        return Refusal(
            reason="upstream_unavailable",
            scope=f"connector:{connector}",
            retry_after=wait,
            message=f"{connector}'s upstream failed {_times(self._threshold)} in a row; the gateway stops sending "
            f"to it for a while. Try again in {wait:g} s, or use another connector meanwhile.",
        )

    def succeeded(self, connector: str) -> None:
        self._failures.pop(connector, None)
        self._open_until.pop(connector, None)
        self._trial.pop(connector, None)

    def failed(self, connector: str) -> None:
        """An upstream failure: unreachable, timed out, a broken exchange, or a 5xx/429 answer."""
        if self._trial.pop(connector, None) is not None:
            self._open_until[connector] = self._clock() + self._cooldown
            return
        count = self._failures.get(connector, 0) + 1
        self._failures[connector] = count
        if count >= self._threshold:
            self._open_until[connector] = self._clock() + self._cooldown

    def _abandoned(self, connector: str, number: int) -> None:
        if self._trial.get(connector) == number:
            del self._trial[connector]

    def state(self, connector: str) -> Literal["closed", "open", "half_open"]:
        until = self._open_until.get(connector)
        if until is None:
            return "closed"
        return "half_open" if self._clock() >= until or connector in self._trial else "open"


class TrafficControl:
    """Rate limits and concurrency caps over a set of rules; ``admit`` decides one call."""

    def __init__(
        self,
        rules: Sequence[LimitRule],
        *,
        buckets: BucketStore | None = None,
        clock: Monotonic = time.monotonic,
        shared: AsyncBucketStore | None = None,
    ) -> None:
        self._rules = tuple(rules)
        self._tokens: AsyncBucketStore = (
            shared if shared is not None else _LocalBuckets(buckets if buckets is not None else MemoryBuckets(), clock)
        )
        """With ``shared``, rate-limit tokens are taken there (every instance's calls count)."""
        self._in_flight: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self._rules)

    def adopt(self, rules: Sequence[LimitRule]) -> None:
        """Apply another set of rules (a reloaded manifest), keeping the buckets and the calls in
        flight: a rule that is still there goes on where it was, rather than refilled and emptied."""
        self._rules = tuple(rules)

    async def admit(self, *, agent: str, connector: str, action: str) -> Admission | Refusal:
        """Let one call through every applicable limit, or refuse it saying which and for how long.

        The tokens come from the shared store when there is one, else from this instance's memory;
        either way the decision is this one piece of code."""
        keys = {"agent": agent, "connector": connector, "action": action}
        applicable = [rule for rule in self._rules if rule.matches(keys[rule.scope])]
        refusal = self._over_concurrency(applicable, keys)
        if refusal is not None:
            return refusal
        taken: list[LimitRule] = []
        for rule in applicable:
            if rule.rate is None:
                continue
            wait = await self._tokens.take(_bucket_key(rule, keys), rate=rule.rate, capacity=rule.capacity)
            if wait > 0:
                await self._give_back(taken, keys)  # all or nothing: the other buckets keep their tokens
                retry = _ceil_tenth(wait)
                return Refusal(
                    reason="rate_limited",
                    scope=rule.name,
                    retry_after=retry,
                    message=f"The rate limit for {rule.name} ({rule.rate:g}/s) is reached; retry in {retry:g} s.",
                )
            taken.append(rule)
        # Checked again: with a shared store, other calls may have taken the last slots while this
        # one waited for its tokens.
        refusal = self._over_concurrency(applicable, keys)
        if refusal is not None:
            await self._give_back(taken, keys)
            return refusal
        held = [_bucket_key(rule, keys) for rule in applicable if rule.concurrency is not None]
        for key in held:
            self._in_flight[key] = self._in_flight.get(key, 0) + 1

        def release() -> None:
            for key in held:
                self._in_flight[key] -= 1

        return Admission(release)

    async def admit_discovery(self, *, agent: str) -> Refusal | None:
        """Take a token from each of ``agent``'s discovery buckets (one per agent-scoped rule with a
        rate, ``DISCOVERY_FACTOR`` times its size), or refuse saying which and for how long."""
        taken: list[tuple[str, float, float]] = []
        for rule in self._rules:
            if rule.scope != "agent" or rule.rate is None or not rule.matches(agent):
                continue
            key = f"{rule.name}\0discovery\0{agent}"
            rate, capacity = rule.rate * DISCOVERY_FACTOR, rule.capacity * DISCOVERY_FACTOR
            wait = await self._tokens.take(key, rate=rate, capacity=capacity)
            if wait > 0:
                for held in taken:
                    await self._tokens.give_back(held[0], rate=held[1], capacity=held[2])
                retry = _ceil_tenth(wait)
                return Refusal(
                    reason="rate_limited",
                    scope=f"{rule.name} (discovery)",
                    retry_after=retry,
                    message=f"The discovery rate limit for {rule.name} ({rate:g} discover or describe requests/s, "
                    f"{DISCOVERY_FACTOR:g} times its call rate) is reached; retry in {retry:g} s.",
                )
            taken.append((key, rate, capacity))
        return None

    async def _give_back(self, taken: Sequence[LimitRule], keys: dict[str, str]) -> None:
        for rule in taken:
            if rule.rate is not None:
                await self._tokens.give_back(_bucket_key(rule, keys), rate=rule.rate, capacity=rule.capacity)

    def _over_concurrency(self, applicable: Sequence[LimitRule], keys: dict[str, str]) -> Refusal | None:
        for rule in applicable:
            if rule.concurrency is not None and self._in_flight.get(_bucket_key(rule, keys), 0) >= rule.concurrency:
                return Refusal(
                    reason="rate_limited",
                    scope=rule.name,
                    retry_after=1.0,
                    message=f"Too many calls in flight for {rule.name} (at most {rule.concurrency}); retry when one "
                    "of them has finished.",
                )
        return None


def _nothing() -> None:
    return None


def _bucket_key(rule: LimitRule, keys: dict[str, str]) -> str:
    # One bucket per rule and per subject: "10/s per agent" gives every agent its own ten, and
    # every connector its own. An action pattern is one bucket for every action it matches: "one
    # deletion every 10 s" over ``repos.delete*`` means one of them, not one of each.
    if rule.scope == "action":
        return rule.name
    return f"{rule.name}\0{keys[rule.scope]}"


def _ceil_tenth(seconds: float) -> float:
    return max(0.1, math.ceil(seconds * 10) / 10)


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"
