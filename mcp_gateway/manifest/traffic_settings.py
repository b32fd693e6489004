"""The manifest's traffic-control settings: ``limits:`` and ``agent_limits:`` at project
level, and per connector ``circuit_breaker:`` and ``retries:``. ``core.admission`` turns the first
into ``traffic.TrafficControl`` rules and ``traffic.CircuitBreaker`` s; ``core.bounds`` holds each
agent to ``agent_limits``.

Example::

    limits:
      - {agent: "release-*", rate: 10, burst: 20}     # 10 calls/s per matching agent, bursts of 20
      - {connector: github, concurrency: 4}           # at most 4 calls to github in flight
      - {action: "github.repos.delete*", rate: 0.1}   # one deletion every 10 s, all delete actions together
    connectors:
      - slug: github
        circuit_breaker: {threshold: 5, cooldown: 30}
        retries: {reads: 2}
    agent_limits: {running_calls: 32}                 # each agent: up to 32 calls at once (default 16)
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, model_validator

from ..policy import Matcher, compile_matcher
from .validation import STRICT, Problem

__all__ = ["AgentLimitsConfig", "CircuitBreakerConfig", "LimitConfig", "RetryConfig"]


class LimitConfig(BaseModel):
    """One ``limits`` entry: exactly one of ``agent``, ``connector``, ``action`` (a policy pattern:
    a glob, or ``/regex/``), and a ``rate`` (calls per second, bursts of ``burst``) and/or a
    ``concurrency`` cap. The limit applies to each matching agent or connector on its own, and to
    all the actions an ``action`` pattern matches together (one allowance for the pattern)."""

    model_config = STRICT
    agent: str | None = Field(default=None, min_length=1)
    connector: str | None = Field(default=None, min_length=1)
    action: str | None = Field(default=None, min_length=1)
    rate: float | None = Field(default=None, gt=0)
    burst: float | None = Field(default=None, ge=1)
    concurrency: int | None = Field(default=None, ge=1)

    _matcher: Matcher = PrivateAttr()

    @model_validator(mode="after")
    def _shape(self) -> LimitConfig:
        scopes = [s for s in ("agent", "connector", "action") if getattr(self, s) is not None]
        if len(scopes) != 1:
            raise Problem(
                "a limit names exactly one of 'agent', 'connector' or 'action'"
                + (f" (this one names {', '.join(scopes)})" if scopes else ""),
                "write one limit per scope, e.g. '{connector: github, rate: 10}'",
            )
        if self.rate is None and self.concurrency is None:
            raise Problem("a limit without 'rate' or 'concurrency' limits nothing", "add e.g. 'rate: 10' (calls/s)")
        if self.burst is not None and self.rate is None:
            raise Problem("'burst' needs a 'rate'", "add 'rate' (calls per second), or remove 'burst'")
        return self

    def model_post_init(self, context: Any, /) -> None:
        self._matcher = compile_matcher(self.pattern)

    @property
    def scope(self) -> Literal["agent", "connector", "action"]:
        if self.agent is not None:
            return "agent"
        return "connector" if self.connector is not None else "action"

    @property
    def pattern(self) -> str:
        return self.agent or self.connector or self.action or ""

    @property
    def matcher(self) -> Matcher:
        return self._matcher


class CircuitBreakerConfig(BaseModel):
    """After ``threshold`` consecutive upstream failures, calls fail fast for ``cooldown`` seconds,
    then one trial call decides whether the circuit closes again."""

    model_config = STRICT
    threshold: int = Field(default=5, ge=1, le=1000)
    cooldown: float = Field(default=30.0, gt=0, le=3600)


class RetryConfig(BaseModel):
    """``reads``: how many more times a read (risk ``read``) is tried after an upstream 429/503,
    timeout or refused connection, with jittered exponential back-off (bounded, and never longer
    than the upstream's ``Retry-After`` allows). Writes are never retried."""

    model_config = STRICT
    reads: int = Field(default=0, ge=0, le=5)


class AgentLimitsConfig(BaseModel):
    """What one agent (or one MCP session) may hold open at once, whatever ``limits`` say: a call
    past a cap is answered ``rate_limited`` at once rather than queued. The defaults bound what a
    misbehaving agent can tie up; raise them for an agent that fans out many calls on purpose."""

    model_config = STRICT
    running_calls: int = Field(default=16, ge=1, le=10_000)
    """Calls one agent (and one MCP session) may have running at once."""
    waiting_calls: int = Field(default=8, ge=1, le=10_000)
    """Calls one agent may have sleeping on a human's approval (``wait``) at once."""
    watchers_per_session: int = Field(default=8, ge=1, le=10_000)
    """URL-elicitation completion watchers one MCP session may have at once."""
    watchers_per_agent: int = Field(default=32, ge=1, le=100_000)
    """... and one agent, over all its sessions."""
