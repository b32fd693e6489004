"""The environment of a gateway (or CLI) subprocess a test starts."""

from __future__ import annotations

import os

__all__ = ["child_env"]

# Choices of the test run, not of the developer's set-up: a child keeps them.
_KEPT = frozenset({"MCP_GATEWAY_DISCOVERY_MODE", "MCP_GATEWAY_FAST_PATHS"})


def child_env() -> dict[str, str]:
    """This process's environment without any ``MCP_GATEWAY_*`` setting, so that the child reads
    only the state dir, key, manifest and database the test gives it, never the developer's. Two
    stay: the discovery mode (``tests/conftest.py`` sets the suite's lexical ranking there, and a
    child without it would load the embedding model and embed every bundled action for nothing), and
    ``MCP_GATEWAY_FAST_PATHS`` (``scripts/test.sh`` runs the protocol tests again with it at ``0``,
    and the gateways they start must serve that way too)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_") or k in _KEPT}
