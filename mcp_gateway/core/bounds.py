"""Bounds on what one agent (or one MCP session) can hold open at once.

A misbehaving or hostile agent could open many slow calls, many ``wait`` sleepers (each parks a
task for up to two minutes) or many URL-elicitation watchers (each polls the store until its link
expires). ``Slots`` counts what each key holds and refuses past a cap; the refusal is an
``ErrorResult`` with reason ``rate_limited`` and a message that says what to do. The caps are the
manifest's ``agent_limits`` (``AgentLimitsConfig``: its defaults when the manifest says nothing).
"""

from __future__ import annotations

from ..manifest import AgentLimitsConfig
from ..vocabulary.model import ErrorResult

__all__ = ["Bounds", "Holding", "Slots"]


class Slots:
    """At most ``limit`` held per key; ``take`` is all-or-nothing over several keys."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: dict[str, int] = {}

    def held(self, key: str) -> int:
        return self._held.get(key, 0)

    def take(self, *keys: str) -> bool:
        held, limit = self._held, self.limit
        for k in keys:  # a loop, not any() over a generator: every call takes a slot
            if held.get(k, 0) >= limit:
                return False
        for k in keys:
            held[k] = held.get(k, 0) + 1
        return True

    def give(self, *keys: str) -> None:
        for k in keys:
            left = self._held.get(k, 0) - 1
            if left > 0:
                self._held[k] = left
            else:
                self._held.pop(k, None)

    def holding(self, *keys: str) -> Holding:
        """Enters as whether the slots were taken; gives them back on exit when they were."""
        return Holding(self, keys)


class Holding:
    """``Slots.holding``: a plain context manager (every call enters one), not a generator."""

    __slots__ = ("_keys", "_slots", "_taken")

    def __init__(self, slots: Slots, keys: tuple[str, ...]) -> None:
        self._slots, self._keys, self._taken = slots, keys, False

    def __enter__(self) -> bool:
        self._taken = self._slots.take(*self._keys)
        return self._taken

    def __exit__(self, *exc: object) -> None:
        if self._taken:
            self._taken = False
            self._slots.give(*self._keys)


class Bounds:
    """The four caps of ``agent_limits``. ``adopt`` changes the caps in place (a reloaded manifest):
    what is held stays held, and a lowered cap refuses new takers until enough are given back."""

    def __init__(self, config: AgentLimitsConfig | None = None) -> None:
        config = config or AgentLimitsConfig()
        self.calls = Slots(config.running_calls)
        self.waits = Slots(config.waiting_calls)
        self.watchers_per_session = Slots(config.watchers_per_session)
        self.watchers_per_agent = Slots(config.watchers_per_agent)

    def adopt(self, config: AgentLimitsConfig) -> None:
        self.calls.limit = config.running_calls
        self.waits.limit = config.waiting_calls
        self.watchers_per_session.limit = config.watchers_per_session
        self.watchers_per_agent.limit = config.watchers_per_agent


def _calls(count: int) -> str:
    return "1 call" if count == 1 else f"{count} calls"


def too_many_calls(limit: int) -> ErrorResult:
    return ErrorResult(
        reason="rate_limited",
        message=f"This agent already has {_calls(limit)} running, the most it may have at once. Wait for some "
        "to finish, then call again.",
        retry_after=1.0,
        hint="Wait 1 s before calling again (retry_after). The operator sets this cap in the manifest: "
        "agent_limits.running_calls.",
    )


def too_many_waits(limit: int, approval_id: str, approval_url: str) -> ErrorResult:
    return ErrorResult(
        reason="rate_limited",
        message=f"This agent already has {_calls(limit)} waiting for a human's approval, the most it may have at "
        f"once, so this one does not wait. Its approval was requested ({approval_id}): show the human "
        f"{approval_url}, then call again with approval_id once they decide.",
        hint="The operator sets this cap in the manifest: agent_limits.waiting_calls.",
    )
