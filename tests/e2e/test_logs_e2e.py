"""Logs end to end: a secret an upstream MCP stdio child prints on a non-JSON
stdout line (the MCP SDK logs the unparsable line) never reaches the gateway's stderr, in text or
JSON format; a JSON log line is one object with time, level, logger and message; a log at debug level
holds no link, argument or result of an agent's call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.mcp_servers import REPO, lab_command

from .conftest import MASTER_KEY, GatewayEnv, HttpGateway, http_client, structured

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


ARGUMENT_CANARY = "log-canary-argument-9d41e2"


@pytest.mark.anyio
async def test_debug_logs_no_link_argument_or_result_of_an_agents_call(gateway_env: GatewayEnv) -> None:
    """``--debug`` with every answer sent as an SSE stream (the fast paths off): the stream's chunks,
    which carry an approval link and a connect link (bearer capabilities), the agent's arguments and
    the upstream's results, are not logged."""
    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    log = gateway_env.root / "debug.log"
    server = HttpGateway(gateway_env, log, "--debug", extra_env={"MCP_GATEWAY_FAST_PATHS": "0"})
    try:
        async with http_client(server.url, token) as client:
            pending = structured(
                await client.call_tool("call", {"tool": "open_api.items.create", "args": {"name": ARGUMENT_CANARY}})
            )
            needs_auth = structured(
                await client.call_tool("call", {"tool": "bearer_api.items.get", "args": {"id": "7"}})
            )
            ran = structured(
                await client.call_tool("call", {"tool": "open_api.items.get", "args": {"id": ARGUMENT_CANARY}})
            )
    finally:
        server.stop()
    assert pending["status"] == "pending_approval" and needs_auth["status"] == "needs_auth", (pending, needs_auth)
    assert ran["status"] == "ok", ran
    text = log.read_text()
    assert " DEBUG " in text  # the log is at debug level
    capabilities = [pending["approval_url"].rsplit("/", 1)[1], needs_auth["connect_url"].rsplit("/", 1)[1]]
    leaked = [line for line in text.splitlines() if ARGUMENT_CANARY in line or any(c in line for c in capabilities)]
    assert not leaked, "\n".join(leaked)
