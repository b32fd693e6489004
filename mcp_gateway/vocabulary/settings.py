"""``Settings``: where the manifest, the state folder and the database are, read once at the edge.

A module of its own (standard library only), so the CLI parses its options and builds these without
importing the gateway (``runtime`` re-exports it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FAST_PATHS_SWITCH", "Settings", "fast_paths_switched_on"]

FAST_PATHS_SWITCH = "MCP_GATEWAY_FAST_PATHS"
"""The one switch of every fast path (``server/fast``, ``tracing/fast``): ``0`` turns them all off."""


def fast_paths_switched_on(env: Mapping[str, str] | None = None) -> bool:
    """Whether the operator left the fast paths on (each also runs only on the releases it was tested with)."""
    return (os.environ if env is None else env).get(FAST_PATHS_SWITCH, "1") != "0"


@dataclass(frozen=True)
class Settings:
    manifest_path: Path | None
    """None means the bundled default manifest."""
    state_dir: Path
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    database_url: str | None = field(default=None, repr=False)
    """``postgresql://...`` selects the PostgreSQL store several instances share; None the SQLite file
    in ``state_dir``. It may hold a password, so it is never printed (``redact_url`` shows it)."""

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        manifest: str | None = None,
        state_dir: str | None = None,
        database_url: str | None = None,
    ) -> Settings:
        env = dict(os.environ if env is None else env)
        manifest = manifest or env.get("MCP_GATEWAY_MANIFEST")
        state = state_dir or env.get("MCP_GATEWAY_STATE_DIR") or ".mcp-gateway"
        url = (database_url or env.get("MCP_GATEWAY_DATABASE_URL") or "").strip() or None
        return cls(manifest_path=Path(manifest) if manifest else None, state_dir=Path(state), env=env, database_url=url)

    @property
    def database(self) -> Path:
        return self.state_dir / "state.db"
