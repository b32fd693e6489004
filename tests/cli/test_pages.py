"""``mcp-gateway pages`` serves the human pages on loopback at ``public_url``, so a link minted by
``mcp-gateway connect`` (which exits at once) opens."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from tests.support.env import child_env
from tests.support.ports import free_port as _free_port

ROOT = Path(__file__).resolve().parents[2]

# Runs the gateway (or its children) as real processes: not in the fast lane.
pytestmark = pytest.mark.slow


def test_pages_serves_a_link_minted_by_connect(tmp_path: Path) -> None:
    port = _free_port()
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(
        f"project: pages\npublic_url: http://127.0.0.1:{port}\nconnectors:\n"
        "  - slug: api\n    base_url: http://127.0.0.1:9\n    auth: {type: bearer}\n"
        "    source: {http: {actions: [{path: items.list, method: GET, url: /items}]}}\n"
    )
    env = child_env() | {
        "PYTHONPATH": str(ROOT),
        "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
        "MCP_GATEWAY_MASTER_KEY": "pages-test-master-key-0123456789abcdef0123",
        "MCP_GATEWAY_MANIFEST": str(manifest),
    }
    cli = [sys.executable, "-m", "mcp_gateway"]
    minted = subprocess.run([*cli, "connect", "api"], capture_output=True, text=True, env=env, timeout=120)
    assert minted.returncode == 0, minted.stderr
    assert "mcp-gateway pages" in minted.stderr
    link = __import__("json").loads(minted.stdout)["connect_url"]
    assert link.startswith(f"http://127.0.0.1:{port}/connect/")

    pages = subprocess.Popen([*cli, "pages"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                page = httpx2.get(link, timeout=5)
                break
            except httpx2.TransportError:
                assert pages.poll() is None, pages.communicate()[1]
                assert time.monotonic() < deadline, "pages never answered"
                time.sleep(0.2)
        assert page.status_code == 200 and "<form" in page.text
    finally:
        pages.terminate()
        pages.wait(timeout=30)


def test_pages_refuses_a_public_url_with_a_password_without_quoting_it(tmp_path: Path) -> None:
    # Every link handed out would have carried the password: it is refused before anything listens.
    env = child_env() | {"PYTHONPATH": str(ROOT), "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state")}
    env.pop("MCP_GATEWAY_MANIFEST", None)
    given = f"http://u:CANARY-PUBPW@127.0.0.1:{_free_port()}"
    pages = subprocess.run(
        [sys.executable, "-m", "mcp_gateway", "pages", "--public-url", given],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert pages.returncode == 2, pages.stderr
    assert "holds a user name or password" in pages.stderr and "CANARY-PUBPW" not in pages.stderr
    assert not (tmp_path / "state").exists()


def test_pages_logs_through_the_gateways_handler_only(tmp_path: Path) -> None:
    # uvicorn's own handlers would print its lines in its format, past the secret filter.
    port = _free_port()
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(f"project: pages\npublic_url: http://127.0.0.1:{port}\nconnectors: []\n")
    env = child_env() | {
        "PYTHONPATH": str(ROOT),
        "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
        "MCP_GATEWAY_MASTER_KEY": "pages-test-master-key-0123456789abcdef0123",
        "MCP_GATEWAY_MANIFEST": str(manifest),
    }
    cli = [sys.executable, "-m", "mcp_gateway", "--log-format", "json", "pages"]
    pages = subprocess.Popen(cli, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    link = f"http://127.0.0.1:{port}/connect/CANARY-LINK-TOKEN-0123456789"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx2.get(link, timeout=5)
                break
            except httpx2.TransportError:
                assert pages.poll() is None, pages.communicate()[1]
                assert time.monotonic() < deadline, "pages never answered"
                time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(b"NOT HTTP\r\n\r\n")  # uvicorn logs a warning of its own for this
            assert raw.recv(100).startswith(b"HTTP/1.1 400")
    finally:
        pages.terminate()
        _, stderr = pages.communicate(timeout=30)
    lines = stderr.splitlines()
    assert any("invalid http request" in line.lower() for line in lines), stderr
    for line in lines:
        assert isinstance(json.loads(line), dict), line
    assert "CANARY-LINK-TOKEN" not in stderr
