"""Logs end to end: a secret an upstream MCP stdio child prints on a non-JSON
stdout line (the MCP SDK logs the unparsable line) never reaches the gateway's stderr, in text or
JSON format; a JSON log line is one object with time, level, logger and message; a log at debug level
holds no link, argument or result of an agent's call."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

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


def _reader(stream: IO[bytes]) -> queue.Queue[bytes]:
    """The lines of ``stream``, read on a thread, so a test waits for one with a timeout."""
    lines: queue.Queue[bytes] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def test_a_stderr_pipe_nobody_reads_does_not_stall_calls(tmp_path: Path) -> None:
    # A parent MCP client that never drains the gateway's stderr: the pipe holds 64 KiB, and the
    # upstream's 3,000 stray stdout lines are each a log record (about 700 KiB of log).
    manifest = tmp_path / "gateway.yaml"
    command = "[" + ", ".join(f'"{c}"' for c in lab_command()) + "]"
    manifest.write_text(
        f"""
project: e2e-logs-unread
public_url: http://127.0.0.1:1
connectors:
  - slug: lab
    trust: auto
    source: {{mcp: {{command: {command}, cwd: "{REPO}", env: {{LAB_SPAM: "3000"}}}}}}
"""
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_GATEWAY_", "OTEL_"))} | {
        "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
        "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
        "MCP_GATEWAY_DISCOVERY_MODE": "lexical",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_gateway", "serve", "--manifest", str(manifest)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    answers = _reader(proc.stdout)
    call = {"tool": "lab.pid"}
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    session = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "call", "arguments": call}},
    ]
    answer: dict[str, Any] = {}
    try:
        for message in session:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            if "id" in message:
                try:
                    line = answers.get(timeout=30)
                except queue.Empty:  # the event loop is stuck in a write to stderr
                    pytest.fail(f"no answer to {message['method']} in 30 s")
                answer = json.loads(line)  # nothing but JSON-RPC on stdout
                assert answer["jsonrpc"] == "2.0" and answer["id"] == message["id"], answer
        assert answer["result"]["structuredContent"]["status"] == "ok", answer
        err = _reader(proc.stderr)  # writing works again: the log goes on, saying what it dropped
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(0.2)  # the reader's last lines
    log = b"".join(err.queue).decode()
    assert "spam line 0 " in log and "mcp-gateway" in log and "transport  stdio" in log
    assert re.search(r"\d+ log records were dropped: stderr was not read", log), log[-2000:]
    assert answers.empty()
