"""``serve`` says where it is: a short block on stderr at start (manifest, state folder, transport,
discovery, the ``claude mcp add`` line for this very command), nothing with ``--quiet``; over stdio
stdout carries only the protocol, and ``tools/list`` is answered without waiting for anything."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from tests.support.one_connector import MASTER_KEY, gateway_env, write_manifest

SESSION = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def _session(tmp_path: Path, *extra: str) -> tuple[list[dict[str, object]], str, float]:
    """One stdio session, each answer awaited as a client does: the answers, stderr, and the seconds
    from the spawn to the ``tools/list`` answer."""
    manifest = write_manifest(tmp_path)
    env = gateway_env(tmp_path, MCP_GATEWAY_DISCOVERY_MODE="lexical")
    argv = [sys.executable, "-m", "mcp_gateway", "serve", "--manifest", str(manifest), *extra]
    began = time.monotonic()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )
    assert proc.stdin is not None and proc.stdout is not None
    answers: list[dict[str, object]] = []
    listed = 0.0
    try:
        for message in SESSION:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            if "id" in message:
                answers.append(json.loads(proc.stdout.readline()))  # every stdout line is a JSON-RPC message
        listed = time.monotonic() - began
        proc.stdin.close()
        rest = proc.stdout.read()
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        proc.wait(timeout=60)
    assert rest == "", rest
    return answers, err, listed


def test_stdio_start_up_block_goes_to_stderr_only(tmp_path: Path) -> None:
    answers, err, listed = _session(tmp_path)
    assert [a["id"] for a in answers] == [1, 2]
    assert "tools" in answers[1]["result"]  # type: ignore[operator]
    assert listed < 20  # answered from the start, not after a sync (a generous bound for a busy machine)
    assert f"manifest   {tmp_path / 'gateway.yaml'} (--manifest)" in err
    assert f"state      {tmp_path / 'state'}" in err
    assert "transport  stdio" in err
    assert "discovery  lexical only" in err
    register = next(line for line in err.splitlines() if "claude mcp add" in line)
    # The key comes from the environment here: the line passes it on by name, never its value.
    assert MASTER_KEY not in err
    assert 'claude mcp add -e MCP_GATEWAY_MASTER_KEY="$MCP_GATEWAY_MASTER_KEY" gateway -- ' in register
    command = shlex.split(register.split(" gateway -- ", 1)[1])
    assert command[:3] == [sys.executable, "-m", "mcp_gateway"]
    assert command[3:] == [
        "--manifest",
        str(tmp_path / "gateway.yaml"),
        "--state-dir",
        str(tmp_path / "state"),
        "serve",
    ]


def test_quiet_says_nothing_at_start(tmp_path: Path) -> None:
    answers, err, _ = _session(tmp_path, "--quiet")
    assert [a["id"] for a in answers] == [1, 2]
    assert "claude mcp add" not in err and "manifest" not in err


def test_the_start_up_block_escapes_a_folder_names_control_characters(tmp_path: Path) -> None:
    folder = tmp_path / "d\x1b]0;TITLE\x07\x1b[2J\u202e"
    folder.mkdir()
    answers, err, _ = _session(folder)
    assert [a["id"] for a in answers] == [1, 2]
    assert "\x1b" not in err and "\u202e" not in err, err
    assert "manifest   " + str(tmp_path) + "/d\\x1b]0;TITLE\\x07\\x1b[2J\\u202e/gateway.yaml (--manifest)" in err
