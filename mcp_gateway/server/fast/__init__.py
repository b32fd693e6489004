"""The one place the gateway leans on the MCP SDK's private code, behind one switch.

``single_exchange`` imports the SDK's private wire helpers for 2026-07-28 requests, and
``server.mcp_endpoint`` overrides private methods of the SDK's transport and session manager when
``ENABLED``. Both were written against one SDK release: on any other release, or with
``MCP_GATEWAY_FAST_PATHS=0``, the gateway serves through the SDK's public path alone (its own
manager and handlers), so an SDK upgrade costs speed, never correctness. The public API that would
make each path unnecessary is named in ``docs/operations.md``.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from typing import Final

__all__ = ["ENABLED", "SDK_TESTED"]


def _sdk_release() -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version("mcp").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return ()


SDK_TESTED: Final = _sdk_release() == (2, 3)
"""Whether the installed SDK is the release the fast paths were written and tested against."""

# Read once, at import: the switch chooses how the server is built, before any request.
ENABLED: Final = SDK_TESTED and os.environ.get("MCP_GATEWAY_FAST_PATHS", "1") != "0"
"""Whether the fast paths run: the tested SDK release, and not switched off."""
