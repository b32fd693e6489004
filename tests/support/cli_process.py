"""``mcp-gateway`` as a subprocess, the way an operator runs it, for end-to-end tests of its output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.env import child_env

__all__ = ["cli_env", "run_cli"]


def cli_env(state_dir: Path, master_key: str) -> dict[str, str]:
    """The environment of a command: this process's, minus any ``MCP_GATEWAY_*`` setting but the
    state folder and master key given."""
    return child_env() | {"MCP_GATEWAY_STATE_DIR": str(state_dir), "MCP_GATEWAY_MASTER_KEY": master_key}


def run_cli(
    manifest: Path, env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``mcp-gateway ARGS --manifest MANIFEST``, its output decoded as UTF-8 (what a terminal shows)."""
    return subprocess.run(
        [sys.executable, "-m", "mcp_gateway", *args, "--manifest", str(manifest)],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=120,
    )
