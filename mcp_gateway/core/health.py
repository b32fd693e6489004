"""Whether the state database is reachable, for ``/readyz`` and for the one warning an outage logs.

While the database is unreachable every request fails the same way, so the gateway answers each with
``store_unavailable`` (``store_unavailable_result``) and logs the outage once: one warning when it
starts (the store's message names the database with any password redacted, the cause and, for
storage that does not clear by itself, what the operator must do), at most one a minute while it
lasts with how many requests and audit writes it refused, and one when it ends. The agent is told to
retry soon only when retrying can help: storage that refuses writes until the operator acts
(``StoreUnavailable.lasting``) is said to be so.
``ready`` is the cheap check a load balancer polls: one short transaction with a short timeout (on
PostgreSQL it takes, and lets go of at once, the locks the gateway's statements take on its tables, so a
table locked elsewhere is seen though the server answers), cached for about a second, so a burst of probes
costs one check; ``cause`` says why it failed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import anyio

from ..vocabulary.errors import StoreUnavailable
from ..vocabulary.model import ErrorResult

__all__ = ["STORE_BROKEN_HINT", "STORE_UNAVAILABLE_HINT", "StoreHealth", "store_unavailable_result"]

logger = logging.getLogger("mcp_gateway.store")

STORE_UNAVAILABLE_HINT = (
    "The gateway's database is unavailable for the moment (down, busy or out of connections); nothing was "
    "run. Retry in a few seconds; if it persists, tell the operator."
)
STORE_BROKEN_HINT = (
    "The gateway's database refuses writes because of a storage problem only the operator can fix (the "
    "gateway's log says what); nothing was run. Retrying soon will not help: tell the operator."
)
SUMMARY_EVERY = 60.0
"""Seconds between two log lines saying an outage still lasts."""
STEADY_FOR = 10.0
"""Seconds the store must stay reachable before an outage that came back within them is said to be
over: a lock on one table fails some statements while others pass, which logged "unavailable" and
"reachable again" in turns."""
PING_TIMEOUT = 1.0
"""Seconds a readiness ping may take before the database counts as unreachable."""
PING_CACHE = 1.0
"""Seconds a readiness answer is reused."""


def store_unavailable_result(exc: StoreUnavailable | None = None) -> ErrorResult:
    """What the agent is told: retry soon, unless ``exc`` is storage that stays broken until fixed."""
    if exc is not None and exc.lasting:
        return ErrorResult(
            reason="store_unavailable",
            message="The gateway's database cannot store anything until its operator fixes its storage.",
            hint=STORE_BROKEN_HINT,
        )
    return ErrorResult(
        reason="store_unavailable",
        message="The gateway cannot use its database right now.",
        hint=STORE_UNAVAILABLE_HINT,
    )


class StoreHealth:
    """The store's reachability as the gateway last saw it.

    Args:
        ping: one cheap round trip to the store (raises ``StoreUnavailable``); None for a store
            that cannot be unreachable (in memory).
        probe_write: one small committed write (raises ``StoreUnavailable``), for a store whose reads
            may work while its writes fail; None when a ping says enough.
        where: the store as the log names it (a database URL with its password redacted).
    """

    def __init__(
        self,
        ping: Callable[[], Awaitable[None]] | None,
        probe_write: Callable[[], Awaitable[None]] | None = None,
        *,
        where: str = "the store",
    ) -> None:
        self._ping = ping
        self._where = where
        self._probe_write = probe_write
        self._unproven = False
        """Something failed since the last write that worked: reads may still work (a full disk, a write
        lock held elsewhere), so only a write (``probe_write``) says the store is back."""
        self.down_since: float | None = None
        """``time.monotonic()`` when the current outage was first seen; None while reachable."""
        self.cause: str | None = None
        """Why the last readiness check failed, without naming the database (``/readyz`` shows it to
        anyone); None while it passes."""
        self._checked_at = float("-inf")
        self._lock = anyio.Lock()
        self._refused_requests = 0
        """Requests answered ``store_unavailable`` in the current outage."""
        self._refused_writes = 0
        """Audit writes the store refused in the current outage."""
        self._summarized_at = 0.0
        self._ended: tuple[float, float] | None = None
        """The last outage's start and end (``time.monotonic()``), while a new one may still resume it."""
        self._end_untold = False
        """An outage that came back within ``STEADY_FOR`` of its end ended again: said once it holds."""

    @property
    def up(self) -> bool:
        return self.down_since is None

    def failed(self, exc: StoreUnavailable) -> None:
        """A request met the outage: the first one logs it."""
        self._down(str(exc), requests=1)

    def succeeded(self) -> None:
        """A request reached the store: the first one after an outage logs its end, unless the outage had
        already ended and come back lately; then its end is said once the store stays reachable."""
        now = time.monotonic()
        if self.down_since is not None:
            began, self.down_since = self.down_since, None
            self._ended = (began, now)
            if not self._end_untold:
                logger.warning("store reachable again after %.1f s (%s meanwhile)", now - began, self._refusals())
            return
        if self._end_untold and self._ended is not None and now - self._ended[1] >= STEADY_FOR:
            self._end_untold = False
            began, ended = self._ended
            logger.warning(
                "store reachable again after %.1f s, since %.0f s without a failure (%s meanwhile)",
                ended - began,
                now - ended,
                self._refusals(),
            )

    def observed(self, refused: BaseException | None) -> None:
        """How a write went (``Auditor.on_store``): None when the store took it, else what it raised."""
        if refused is None:
            self._unproven = False
            self.succeeded()
            return
        # A store's own message names the file or database, the cause and what to do; anything else
        # (a driver's error) is named by its type alone, as its text may quote what was written.
        cause = str(refused) if isinstance(refused, StoreUnavailable) else type(refused).__name__
        self._down(f"{self._where} refused an audit write: {cause}", writes=1)

    def _down(self, cause: str, *, requests: int = 0, writes: int = 0) -> None:
        """Something met the outage: its start is logged once, then at most a line a minute."""
        self._unproven = True  # whatever failed, a write proves the store back; a read may not
        now = time.monotonic()
        if self.down_since is None and self._ended is not None and now - self._ended[1] < STEADY_FOR:
            # Back within seconds of its end: the same outage going on, not a new one to announce.
            self.down_since, self._end_untold = self._ended[0], True
        elif self.down_since is None:
            self.down_since = self._summarized_at = now
            self._refused_requests, self._refused_writes = requests, writes
            self._end_untold = False
            logger.warning("store unavailable: %s; answering store_unavailable until it is back", cause)
            return
        self._refused_requests += requests
        self._refused_writes += writes
        if now - self._summarized_at >= SUMMARY_EVERY:
            self._summarized_at = now
            logger.warning(
                "store still unavailable after %.0f s (%s so far): %s", now - self.down_since, self._refusals(), cause
            )

    def _refusals(self) -> str:
        """What the current outage refused, for its log lines."""
        return (
            f"{self._refused_requests} request(s) answered store_unavailable, "
            f"{self._refused_writes} audit row write(s) refused"
        )

    async def ready(self) -> bool:
        """Whether the store answers now (a ping, at most one a second; cached between): once something
        failed, a small write (``probe_write``, where the store has one) instead of a read."""
        if self._ping is None:
            return True
        async with self._lock:
            if time.monotonic() - self._checked_at < PING_CACHE:
                return self.up
            # After a failure a read proves nothing (a full disk, a write lock held elsewhere): a write does.
            check = self._probe_write if self._unproven and self._probe_write is not None else self._ping
            try:
                with anyio.fail_after(PING_TIMEOUT):
                    await check()
            except StoreUnavailable as exc:
                self._down(str(exc))  # a probe, not a request refused
                self.cause = exc.brief or "the database cannot be used (the gateway's log says why)"
            except TimeoutError:
                self._down(f"{self._where} gave no answer to a ping within {PING_TIMEOUT:g} s")
                self.cause = f"the database gave no answer within {PING_TIMEOUT:g} s"
            else:
                if check is self._probe_write:
                    self._unproven = False
                self.succeeded()
                self.cause = None
            self._checked_at = time.monotonic()
            return self.up
