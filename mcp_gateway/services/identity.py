"""Who is calling, and what they may see: pure grants, no I/O.

A ``Principal`` is the operator's own session (stdio without ``--agent``) or a named agent
(HTTP callers prove which with a bearer token: ``tokens.TokenService``). Grants come from the
manifest's ``agents`` block: with no block, every session sees every connector; with one, a
session must name a listed agent, and an unknown agent sees nothing (fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..manifest import Manifest

__all__ = ["OPERATOR", "Principal", "granted_connectors"]


@dataclass(frozen=True)
class Principal:
    """``user`` is the human (front door: the token's user claim) or ``token:<id>`` for a static
    token; ``agent`` the client acting for them; ``groups`` what the identity provider says the user
    belongs to (front door only; they widen grants, never the identity)."""

    user: str
    agent: str | None = None
    groups: tuple[str, ...] = field(default=(), compare=False)

    @property
    def label(self) -> str:
        return f"{self.user}/{self.agent}" if self.agent else self.user


OPERATOR = Principal(user="operator")


def granted_connectors(manifest: Manifest, principal: Principal) -> frozenset[str]:
    """The slugs this principal may see. Empty for an agent the manifest does not list."""
    all_slugs = frozenset(c.slug for c in manifest.connectors)
    if manifest.agents is None:
        return all_slugs
    if principal.agent is None:
        # The operator's own session (stdio, no --agent) owns the gateway and sees everything.
        return all_slugs if principal.user == OPERATOR.user else frozenset()
    granted: set[str] = set()
    for agent in manifest.agents:
        if agent.name != principal.agent:
            continue
        if agent.restricted and principal.user not in agent.users and not set(principal.groups) & set(agent.groups):
            continue  # this grant names other users or groups
        granted.update(agent.connectors)
    return frozenset(granted)
