"""A one-connector manifest and the environment of a gateway subprocess started on it, for tests that
start ``mcp-gateway`` itself (start-up imports, stdio replay): syncing it reads no spec and no network."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["MANIFEST", "MASTER_KEY", "ROOT", "gateway_env", "write_manifest"]

ROOT = Path(__file__).resolve().parents[2]
MASTER_KEY = "one-connector-master-key-0123456789abcdef"

MANIFEST = """\
project: one
connectors:
  - slug: echo
    base_url: http://127.0.0.1:9
    source:
      http:
        actions:
          - {path: items.list, method: GET, url: /items, summary: List items}
"""


def write_manifest(folder: Path) -> Path:
    path = folder / "gateway.yaml"
    path.write_text(MANIFEST)
    return path


def gateway_env(folder: Path, **extra: str) -> dict[str, str]:
    """This environment minus every ``MCP_GATEWAY_`` variable, plus a state folder in ``folder``."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_")} | {
        "PYTHONPATH": str(ROOT),
        "MCP_GATEWAY_STATE_DIR": str(folder / "state"),
        "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
        **extra,
    }
