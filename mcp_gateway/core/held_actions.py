"""The operator's review of upstream actions held back from agents, and of what failing upstreams said.

A sync holds an action for review when it is new, changed since it was approved, or reads as
instructions to the model (``review``); ``Catalogs`` keeps that quarantine. This is the operator's
side of it, for the overview page and ``mcp-gateway review``: what is held, a decision on one
(pinning the exact snapshot shown), and the error text upstreams returned that agents were not shown
(while loading a connector, and in answer to a call: ``WithheldErrors``).
"""

from __future__ import annotations

from ..policy.review import Finding
from .catalogs import Catalogs
from .withheld_errors import WithheldErrors

__all__ = ["HeldActions"]


class HeldActions:
    """What is held for an operator's review, and their decisions on it."""

    def __init__(self, catalogs: Catalogs, calls: WithheldErrors) -> None:
        self._catalogs = catalogs
        self._calls = calls

    async def refresh(self) -> None:
        """Take in decisions made elsewhere (another instance, the CLI) before showing or deciding."""
        await self._catalogs.refresh_decisions()

    def pending(self) -> list[Finding]:
        """The held actions an operator has not denied, by name."""
        return self._catalogs.pending()

    async def decide(self, name: str, *, approve: bool, by: str) -> Finding | None:
        """Approve (make visible at once) or deny held action ``name``; None when it is not held."""
        return await self._catalogs.decide(name, approve=approve, by=by)

    def withheld(self) -> dict[str, str]:
        """By connector, what its upstream said when it failed, withheld from agents as instructions."""
        return {slug: c.withheld for slug, c in sorted(self._catalogs.loaded.items()) if c.withheld}

    async def withheld_calls(self) -> dict[str, str]:
        """By action, what its upstream last answered a call with that the agent was not shown as
        instructions (cleaned, redacted, with the flags); a removed connector's are left out."""
        slugs = {c.slug for c in self._catalogs.manifest.connectors}
        return {name: said for name, said in (await self._calls.listed()).items() if name.partition(".")[0] in slugs}
