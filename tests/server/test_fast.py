"""The fast paths' one switch (``server/fast``): ``MCP_GATEWAY_FAST_PATHS=0``, or an SDK release the
paths were not tested with, builds the server from the SDK's public API alone. Each case reads the
switch in a fresh interpreter, as a started gateway does (it is read once, at import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_gateway.server import fast

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json
from mcp.server.mcpserver import MCPServer
from mcp_gateway.server import fast
from mcp_gateway.server.mcp_endpoint import streamable_http_app
manager = streamable_http_app(MCPServer(name="probe"), path="/mcp")[1]
print(json.dumps({"enabled": fast.ENABLED, "tested": fast.SDK_TESTED, "manager": type(manager).__name__}))
"""


def _probe(**switch: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "MCP_GATEWAY_FAST_PATHS"} | switch
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_sdk_installed_is_the_release_the_fast_paths_were_tested_with() -> None:
    assert fast.SDK_TESTED
    assert fast._sdk_release() == (2, 3)  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize(
    ("switch", "enabled", "manager"),
    [
        ({}, True, "LeanSessionManager"),
        ({"MCP_GATEWAY_FAST_PATHS": "1"}, True, "LeanSessionManager"),
        ({"MCP_GATEWAY_FAST_PATHS": "0"}, False, "StreamableHTTPSessionManager"),
    ],
)
def test_the_switch_decides_which_session_manager_serves_mcp(
    switch: dict[str, str], enabled: bool, manager: str
) -> None:
    assert _probe(**switch) == {"enabled": enabled, "tested": True, "manager": manager}


def test_the_protocol_tests_run_again_with_the_fast_paths_off() -> None:
    script = (REPO / "scripts" / "test.sh").read_text()
    listed = script.split("PROTOCOL_TESTS=(", 1)[1].split(")", 1)[0].split()
    assert listed and all((REPO / path).is_file() for path in listed), listed
    assert 'MCP_GATEWAY_FAST_PATHS=0 exec "${PYTEST[@]}" "${PROTOCOL_TESTS[@]}"' in script
