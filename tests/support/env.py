"""The environment of a gateway (or CLI) subprocess a test starts."""

from __future__ import annotations

import os

__all__ = ["child_env"]


def child_env() -> dict[str, str]:
    """This process's environment without any ``MCP_GATEWAY_*`` setting, so that the child reads
    only the state dir, key, manifest and database the test gives it, never the developer's. The
    discovery mode stays: ``tests/conftest.py`` sets the suite's lexical ranking there, and a child
    without it would load the embedding model and embed every bundled action for nothing."""
    return {
        k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_") or k == "MCP_GATEWAY_DISCOVERY_MODE"
    }
