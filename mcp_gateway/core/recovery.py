"""Bringing back a connector that failed to load, without hammering its upstream.

A connector whose source was unreachable at sync (an MCP server that was down, an introspection
endpoint that timed out) has ``status=error`` and no actions. The next full sync retries it; so
does the first ``call`` or ``describe`` that names one of its actions (``Catalogs.recover``),
at most as often as ``Backoff`` allows: 2 s after a failure, doubling to a minute, reset by a
success. So an agent that keeps calling a dead upstream costs it one attempt a minute, not one a call.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from ..vocabulary.clock import Clock

__all__ = ["Backoff", "connector_named"]

FIRST_DELAY = 2.0
MAX_DELAY = 60.0


class Backoff:
    """When each connector may next be retried; time comes from the gateway's clock."""

    def __init__(self, clock: Clock, *, first: float = FIRST_DELAY, cap: float = MAX_DELAY) -> None:
        self._clock = clock
        self._first = first
        self._cap = cap
        self._next: dict[str, tuple[datetime, float]] = {}

    def ready(self, slug: str) -> bool:
        entry = self._next.get(slug)
        return entry is None or self._clock.now() >= entry[0]

    def wait_seconds(self, slug: str) -> float:
        """How long until ``slug`` may be retried (0 when it may now)."""
        entry = self._next.get(slug)
        return 0.0 if entry is None else max(0.0, (entry[0] - self._clock.now()).total_seconds())

    def failed(self, slug: str) -> None:
        previous = self._next.get(slug)
        delay = self._first if previous is None else min(previous[1] * 2, self._cap)
        self._next[slug] = (self._clock.now() + timedelta(seconds=delay), delay)

    def succeeded(self, slug: str) -> None:
        self._next.pop(slug, None)


def connector_named(name: str, slugs: Iterable[str]) -> str | None:
    """The connector an action name starts with (``everything.echo`` -> ``everything``), the longest
    slug winning (``gh`` and ``gh-enterprise``); None when the name has no connector prefix."""
    lowered = name.strip().lower()
    matches = [s for s in slugs if lowered.startswith(f"{s}.")]
    return max(matches, key=len) if matches else None
