"""``Settings``: where the manifest, the state folder and the database are, read once at the edge.

A module of its own (standard library only), so the CLI parses its options and builds these without
importing the gateway (``runtime`` re-exports it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FAST_PATHS_SWITCH", "SWITCHES", "Settings", "check_switches", "fast_paths_switched_on", "switch"]

FAST_PATHS_SWITCH = "MCP_GATEWAY_FAST_PATHS"
"""The one switch of every fast path (``server/fast``, ``tracing/fast``): ``0`` turns them all off."""

SWITCHES: dict[str, bool] = {FAST_PATHS_SWITCH: True}
"""Every on/off environment variable the gateway reads, with its value when unset or empty."""

_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"0", "false", "no", "off"})


def switch(name: str, env: Mapping[str, str] | None = None) -> bool:
    """The on/off variable ``name`` (one of ``SWITCHES``) as ``env`` sets it. A value that is neither on
    nor off raises ``ValueError`` naming the variable and what it takes: a typo read as the default
    would leave the operator believing a switch they never turned."""
    text = (os.environ if env is None else env).get(name, "").strip()
    if not text:
        return SWITCHES[name]
    if text.lower() in _ON:
        return True
    if text.lower() in _OFF:
        return False
    raise ValueError(f"${name} must be 1 or 0 (or true/false, yes/no, on/off), not {text[:40]!r}")


def check_switches(env: Mapping[str, str] | None = None) -> None:
    """Raise ``ValueError`` for the first on/off variable set to something else, before any is used."""
    for name in SWITCHES:
        switch(name, env)


def fast_paths_switched_on(env: Mapping[str, str] | None = None) -> bool:
    """Whether the operator left the fast paths on (each also runs only on the releases it was tested with)."""
    return switch(FAST_PATHS_SWITCH, env)


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
