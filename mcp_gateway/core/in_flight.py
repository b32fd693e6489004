"""The calls running now, and what a stop does to them.

A call its client gives up on after its request left writes a ``cancelled`` row. A call the gateway
itself cuts as it stops (the drain ran out, a second Ctrl-C, a signal under stdio) is another
matter: the agent did not give up, and its request may have taken effect upstream. It is audited
``interrupted``, as a crash's calls are at the next start, and named once in the log, so the operator
learns from one line which call was cut, whose, and by which id to find it in ``audit``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from ..services.audit import Auditor
from ..services.identity import Principal
from ..vocabulary.clock import Clock
from ..vocabulary.errors import StoreUnavailable
from .trace import CallTrace

__all__ = ["CANCELLED_WRITE_SECONDS", "CallsInFlight", "Reached"]

logger = logging.getLogger("mcp_gateway.core.gateway")

CANCELLED_WRITE_SECONDS = 5.0
"""How long a cancelled call may still spend writing its ``cancelled`` outcome (a store that hangs must
not hold the cancellation up for good; the journal or the next start settles what is left)."""


class Reached:
    """The attempts of one call whose request left, until their outcome row is written: a call its client
    cancels meanwhile writes theirs as ``cancelled``, or a later start would mark them interrupted as if
    this process had died."""

    def __init__(self, auditor: Auditor, clock: Clock, principal: Principal, tool: str, args: dict[str, Any]) -> None:
        self._auditor, self._clock, self._principal, self._tool, self._args = auditor, clock, principal, tool, args
        self._open: list[CallTrace] = []

    async def started(self, trace: CallTrace) -> None:
        """A ``CallTrace.on_upstream``: the durable ``started`` row, before the request leaves (a crash
        mid-call leaves it, marked interrupted). Neither the store nor the journal took it: nothing is
        sent (``store_unavailable``, nothing ran)."""
        row = trace.started_record(self._principal, self._tool, self._args, self._clock)
        if not await self._auditor.record(row):
            raise StoreUnavailable("the call's start could not be recorded; its request was not sent")
        self._open.append(trace)

    def settled(self) -> None:
        """The call's outcome row is written."""
        self._open.clear()

    async def cancelled(self, *, interrupted: bool = False) -> list[CallTrace]:
        """Write the ``cancelled`` (or, cut by the gateway's stop, ``interrupted``) row of each attempt
        still open; those attempts."""
        opened, self._open = list(self._open), []
        with anyio.CancelScope(shield=True, deadline=anyio.current_time() + CANCELLED_WRITE_SECONDS):
            for trace in opened:
                record = trace.cancelled_record if not interrupted else trace.interrupted_record
                await self._auditor.record(record(self._principal, self._tool, self._args, self._clock))
        return opened

    def named(self) -> str:
        """``agent: connector.action`` (or the name the agent asked for, before it resolved)."""
        actions = {t.action.qualified_name for t in self._open if t.action is not None}
        return f"{self._principal.label}: {', '.join(sorted(actions)) or self._tool[:200]}"

    def call_ids(self) -> list[str]:
        return [t.call_id for t in self._open if t.call_id is not None]


class CallsInFlight:
    """The calls running in this process; once ``stopping``, a cancelled one was cut by the stop."""

    def __init__(self) -> None:
        self._calls: set[Reached] = set()
        self.stopping = False
        self.cut = 0
        """Calls cut by the stop so far."""

    def __len__(self) -> int:
        return len(self._calls)

    def named(self) -> list[str]:
        return sorted(call.named() for call in self._calls)

    @contextmanager
    def running(self, call: Reached) -> Iterator[None]:
        self._calls.add(call)
        try:
            yield
        finally:
            self._calls.discard(call)

    async def cancelled(self, call: Reached) -> list[CallTrace]:
        """A running call was cancelled: by its client (``cancelled`` rows), or by the stop (one line
        naming it, ``interrupted`` rows)."""
        if not self.stopping:
            return await call.cancelled()
        self._cut(call)
        return await call.cancelled(interrupted=True)

    async def cut_all(self) -> int:
        """The process ends now, the calls still running with it (a signal under stdio): each is
        named and its open attempts audited ``interrupted``; how many there were."""
        self.stopping = True
        calls = list(self._calls)
        for call in calls:
            self._cut(call)
            await call.cancelled(interrupted=True)
        return len(calls)

    def _cut(self, call: Reached) -> None:
        self.cut += 1
        ids = call.call_ids()
        if ids:
            logger.warning(
                "stopping: cut the call %s (%s), audited interrupted: its request had left, so it may have "
                "taken effect upstream",
                ", ".join(ids),
                call.named(),
            )
        else:
            logger.warning("stopping: cut a call (%s) before its request left: nothing was sent", call.named())
