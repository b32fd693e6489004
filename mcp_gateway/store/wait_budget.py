"""How long one agent's request may wait on the database in all: ``WaitBudget``.

A database that stalls (a lock held elsewhere, a server frozen mid-failover) neither answers a
statement nor refuses it: each one waits out the store's own statement timeout, and a call of several
statements (a lookup, its ``started`` row, its outcome row) held its agent for several of those.
``Gateway.call`` and each meta-tool request open one budget (``STORE_WAIT_SECONDS``); the PostgreSQL
store gives each statement only what is left of it and charges the wait, so the agent hears
``store_unavailable`` within the budget however many statements its request makes. Time between
statements (the upstream's answer, a retry's back-off) is not charged, and a refusal costs next to
nothing: only waiting on a database that does not answer spends it.

The budget lives in a context variable, so the tasks a request starts share it; the audit writer,
which writes a waiting caller's row in its own task, takes the tightest budget of the rows in its
batch and charges its wait to each (``sharing``).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["STORE_WAIT_SECONDS", "WaitBudget", "current_budget", "request_budget", "sharing"]

STORE_WAIT_SECONDS = 5.0
"""Seconds one request may wait on the database, all its statements together (docs/operations.md)."""


class WaitBudget:
    """Seconds a request may still wait on the database."""

    __slots__ = ("seconds", "spent")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.spent = 0.0
        """Seconds its statements have waited so far."""

    @property
    def left(self) -> float:
        return max(0.0, self.seconds - self.spent)


_CURRENT: ContextVar[WaitBudget | None] = ContextVar("mcp_gateway_store_wait", default=None)


def current_budget() -> WaitBudget | None:
    """The budget of the request this code runs for; None outside one (a sync, a command, the writer)."""
    return _CURRENT.get()


@contextmanager
def request_budget(seconds: float = STORE_WAIT_SECONDS) -> Generator[WaitBudget]:
    """One request's budget for the body; inside another request's (a tool running ``Gateway.call``),
    that one, so a request never gets a second allowance."""
    held = _CURRENT.get()
    if held is not None:
        yield held
        return
    budget = WaitBudget(seconds)
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


@contextmanager
def sharing(budgets: Iterable[WaitBudget | None]) -> Generator[None]:
    """Write for several requests at once (one batch of their rows): the tightest of their budgets
    bounds it, and its wait is charged to each. Without any, no budget at all."""
    given = [budget for budget in budgets if budget is not None]
    batch = WaitBudget(min(budget.left for budget in given)) if given else None
    token = _CURRENT.set(batch)
    try:
        yield
    finally:
        _CURRENT.reset(token)
        if batch is not None:
            for budget in given:
                budget.spent += batch.spent
