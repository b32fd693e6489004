"""Tokens a process verified lately, taken while the store cannot be reached to verify them again.

Nothing can be revoked while the store is down (revoking needs it), so a token verified within
``OUTAGE_GRACE`` seconds is still good; refusing it would turn an outage into errors on requests that
need no store at all (an MCP client's tool list, an operator's ``/metrics`` scrape, which is when an
operator most needs it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["OUTAGE_GRACE", "RecentlyVerified"]

OUTAGE_GRACE = 300.0
"""Seconds after its last verification a token is still taken while the store cannot be reached."""
_KEPT = 4096

T = TypeVar("T")


class RecentlyVerified(Generic[T]):
    """Token digest -> what it verified as, and when; bounded to ``_KEPT`` tokens."""

    def __init__(self, grace: float = OUTAGE_GRACE) -> None:
        self._grace = grace
        self._kept: dict[str, tuple[T, float]] = {}

    def remember(self, digest: str, value: T) -> None:
        if len(self._kept) >= _KEPT and digest not in self._kept:
            self._kept.clear()
        self._kept[digest] = (value, time.monotonic())

    def recall(self, digest: str) -> T | None:
        """What ``digest`` verified as, if within the grace; None otherwise."""
        known = self._kept.get(digest)
        if known is None or time.monotonic() - known[1] > self._grace:
            return None
        return known[0]

    def forget(self, digest: str) -> None:
        self._kept.pop(digest, None)

    def forget_where(self, gone: Callable[[T], bool]) -> None:
        self._kept = {d: kept for d, kept in self._kept.items() if not gone(kept[0])}
