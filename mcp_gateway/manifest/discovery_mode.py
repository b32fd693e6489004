"""The discovery settings in force: the manifest's, with ``$MCP_GATEWAY_DISCOVERY_MODE`` over its mode.

Here rather than in ``runtime`` so that the command line's stored-state answers, which start without
the runtime, apply the override the same way the gateway does.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..vocabulary.errors import GatewayError
from .loader import Manifest

__all__ = ["DISCOVERY_MODE_ENV", "discovery_override"]

DISCOVERY_MODE_ENV = "MCP_GATEWAY_DISCOVERY_MODE"
"""Overrides the manifest's ``discovery.mode`` (``auto``, ``lexical``, ``hybrid``): e.g. ``lexical`` for a
short-lived command or a test run that should not load the model."""


def discovery_override(manifest: Manifest, env: Mapping[str, str]) -> Manifest:
    """``manifest`` with the mode ``env`` names; raises ``GatewayError`` for a mode that is none of the three."""
    mode = (env.get(DISCOVERY_MODE_ENV) or "").strip()
    if not mode:
        return manifest
    if mode not in ("auto", "lexical", "hybrid"):
        raise GatewayError(f"${DISCOVERY_MODE_ENV} must be auto, lexical or hybrid, not {mode!r}")
    discovery = manifest.discovery.model_copy(update={"mode": mode})
    return manifest.model_copy(update={"discovery": discovery})
