"""Logs end to end (issue 12 item 7): a secret an upstream MCP stdio child prints on a non-JSON
stdout line (the MCP SDK logs the unparsable line) never reaches the gateway's stderr, in text or
JSON format; a JSON log line is one object with time, level, logger and message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.mcp_servers import REPO, lab_command

from .conftest import MASTER_KEY

SECRET = "log-canary-secret-5f3e9a1c7b"


def _run(tmp_path: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    manifest = tmp_path / "gateway.yaml"
    command = "[" + ", ".join(f'"{c}"' for c in lab_command()) + "]"
    manifest.write_text(
        f"""
project: e2e-logs
public_url: http://127.0.0.1:1
connectors:
  - slug: lab
    auth: {{type: bearer}}
    source: {{mcp: {{command: {command}, cwd: "{REPO}", env: {{LAB_TOKEN: "{{secret}}", LAB_LEAK: "1"}}}}}}
"""
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_GATEWAY_", "OTEL_"))} | {
        "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
        "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
    }
    return subprocess.run(
        [sys.executable, "-m", "mcp_gateway", *args, "--manifest", str(manifest)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_secret_printed_by_an_mcp_child_never_reaches_the_log(tmp_path: Path, log_format: str) -> None:
    stored = _run(tmp_path, "secret", "set", "lab", stdin=SECRET)
    assert stored.returncode == 0, stored.stderr
    synced = _run(tmp_path, "--log-format", log_format, "sync")
    log = synced.stderr
    assert "Failed to parse JSONRPC message" in log, log  # the SDK did log the child's line
    assert "starting with token" in log  # ... with the line itself, minus the secret
    assert SECRET not in log
    assert SECRET not in synced.stdout
    if log_format == "json":
        lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
        parse_error = next(e for e in lines if "Failed to parse JSONRPC message" in e["message"])
        assert {"time", "level", "logger", "message"} <= parse_error.keys()
        assert parse_error["level"] == "error" and parse_error["logger"].startswith("mcp.")
