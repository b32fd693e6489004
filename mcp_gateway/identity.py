"""Who is calling, and what they may see (SPEC 7): pure grants, no I/O.

A ``Principal`` is the operator's own session (stdio without ``--agent``) or a named agent
(HTTP callers prove which with a bearer token: ``tokens.TokenService``). Grants come from the
manifest's ``agents`` block: with no block, every session sees every connector; with one, a
session must name a listed agent, and an unknown agent sees nothing (fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass

from .manifest import Manifest

__all__ = ["OPERATOR", "Principal", "granted_connectors"]


@dataclass(frozen=True)
class Principal:
    user: str
    agent: str | None = None

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
    for agent in manifest.agents:
        if agent.name == principal.agent:
            return frozenset(agent.connectors)
    return frozenset()
