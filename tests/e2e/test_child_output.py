"""What a stdio upstream prints, end to end: ``mcp-gateway`` as a subprocess in front of a careless
MCP child (``tests/support/noisy_mcp.py``) started with its credential in its environment, which
prints that credential to stderr as is, in base64 and in hex, with terminal escapes, and writes garbage
lines to stdout; and one such child that fails before the handshake.

Neither form of the credential reaches the gateway's log (text or JSON) nor the output of
``connectors``, ``review`` or ``doctor``; the child's lines are in the log, redacted and escaped;
with ``--log-format json`` every line the gateway writes to stderr is one JSON object, and in text
format the SDK's parse errors are one line each, without a traceback."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support.cli_process import cli_env, run_cli
from tests.support.mcp_servers import REPO
from tests.support.noisy_mcp import manifest_command

from .conftest import MASTER_KEY, structured

SECRET = "child-output-canary-3f9b2e7d41"
FORMS = (SECRET, base64.b64encode(SECRET.encode()).decode(), SECRET.encode().hex())
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(
        f"""
project: e2e-child-output
public_url: http://127.0.0.1:1
connectors:
  - slug: noisy
    auth: {{type: bearer}}
    source: {{mcp: {{command: {manifest_command()}, cwd: "{REPO}", env: {{NOISY_TOKEN: "{{secret}}"}}}}}}
  - slug: dead
    auth: {{type: bearer}}
    source: {{mcp: {{command: {manifest_command("fail")}, cwd: "{REPO}", env: {{NOISY_TOKEN: "{{secret}}"}}}}}}
"""
    )
    env = cli_env(tmp_path / "state", MASTER_KEY)
    for slug in ("noisy", "dead"):
        stored = run_cli(manifest, env, "secret", "set", slug, stdin=SECRET)
        assert stored.returncode == 0, stored.stderr
    return manifest, env


def assert_clean(run: subprocess.CompletedProcess[str]) -> None:
    for form in FORMS:
        assert form not in run.stdout and form not in run.stderr
    for control in RAW_CONTROLS:
        assert control not in run.stdout and control not in run.stderr


def json_lines(stderr: str) -> list[dict[str, Any]]:
    """Every line of ``stderr``, each of which must be one JSON object."""
    entries = [json.loads(line) for line in stderr.splitlines()]
    assert all(isinstance(e, dict) and {"time", "level", "logger", "message"} <= e.keys() for e in entries)
    return entries


def test_the_childs_credential_never_reaches_the_log_or_the_output(setup: tuple[Path, dict[str, str]]) -> None:
    manifest, env = setup

    listed = run_cli(manifest, env, "--log-format", "json", "connectors")
    assert_clean(listed)
    entries = json_lines(listed.stderr)
    said = [e["message"] for e in entries if e.get("connector") == "noisy"]
    assert "noisy's MCP server (stderr): \\x1b]0;pwned\\x07\\x1b[2Jstarting with token [redacted]" in said
    assert "noisy's MCP server (stderr): token in base64: [redacted]" in said
    assert any(
        "fatal: cannot start (token [redacted])" in e["message"] for e in entries if e.get("connector") == "dead"
    )
    stray = [e["message"] for e in entries if e["logger"] == "mcp.client.stdio"]
    stdout_line = "Failed to parse JSONRPC message from server: a line on its stdout is not JSON-RPC: "
    assert stdout_line + "garbage on stdout" in stray and stdout_line + "not json { [redacted]" in stray
    assert "noisy  " in listed.stdout and "dead " in listed.stdout

    runs = {command: run_cli(manifest, env, command) for command in ("connectors", "review", "doctor")}
    for command, run in runs.items():
        assert_clean(run)
        assert "Traceback" not in run.stderr, command
        assert "token in base64: [redacted]" in run.stderr, command  # the child ran, and was heard
    assert "== noisy.shout (flagged)" in runs["review"].stdout  # held, its description's escapes visible
    program = Path(sys.executable).name  # the message names the child's program: python, python3, …
    assert f"dead's MCP server ({program}) closed the connection" in runs["doctor"].stdout, runs["doctor"].stdout


@pytest.mark.anyio
async def test_served_with_json_logs_every_stderr_line_is_one_object(
    setup: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    manifest, env = setup
    command = ["-m", "mcp_gateway", "--log-format", "json", "serve", "--manifest", str(manifest)]
    params = StdioServerParameters(command=sys.executable, args=command, env=env)
    errlog = tmp_path / "gateway-stderr.log"
    with errlog.open("w") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
            listed = structured(await client.call_tool("connectors", {}))["connectors"]
            assert {c["slug"]: c["status"] for c in listed} == {"noisy": "ready", "dead": "error"}
            for connector in listed:
                assert not any(form in json.dumps(connector) for form in FORMS)
    log = errlog.read_text()
    assert not any(form in log for form in FORMS)
    entries = json_lines(log)
    assert any(e["message"].endswith("not JSON-RPC: garbage on stdout") for e in entries)
    assert any(e["message"].endswith("token in base64: [redacted]") for e in entries)
