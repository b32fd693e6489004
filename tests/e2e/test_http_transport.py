"""Streamable HTTP specifics: bearer tokens, DNS-rebinding protection, both protocol revisions."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import IO

import httpx2
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning

from .conftest import GatewayEnv, HttpGateway, free_port, http_client, structured

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_no_token_or_wrong_token_is_401_without_detail(http_gateway: HttpGateway) -> None:
    bodies = set()
    for headers in ({}, {"Authorization": "Bearer mgw_wrong"}, {"Authorization": "Basic Zm9vOmJhcg=="}):
        r = httpx2.post(f"{http_gateway.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS | headers)
        assert r.status_code == 401 and r.headers["content-type"] == "application/json"
        assert r.json()["error"] == "unauthorized" and "mcp-gateway token create" in r.json()["message"]
        bodies.add(r.content)
    assert len(bodies) == 1  # the same short answer whatever was sent: nothing to probe with


def test_initialize_reports_the_package_version(http_gateway: HttpGateway, gateway_env: GatewayEnv) -> None:
    from importlib.metadata import version

    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    auth = {"Authorization": f"Bearer {token}"}
    r = httpx2.post(f"{http_gateway.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS | auth)
    assert r.status_code == 200
    body = r.text if r.text.startswith("{") else next(x[5:] for x in r.text.splitlines() if x.startswith("data:"))
    info = json.loads(body)["result"]["serverInfo"]
    assert info["name"] == "mcp-gateway" and info["version"] == version("mcp-action-gateway") != ""


def test_revoked_token_is_401(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    auth = {"Authorization": f"Bearer {token}"}
    assert httpx2.post(f"{http_gateway.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS | auth).status_code == 200
    token_id = gateway_env.cli("token", "list", "--json").stdout
    import json

    gateway_env.cli("token", "revoke", json.loads(token_id)[0]["id"])
    assert httpx2.post(f"{http_gateway.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS | auth).status_code == 401


def test_foreign_host_or_origin_is_refused(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    auth = MCP_HEADERS | {"Authorization": f"Bearer {token}"}
    evil_host = httpx2.post(f"{http_gateway.url}/mcp", json=INITIALIZE, headers=auth | {"Host": "evil.example:80"})
    evil_origin = httpx2.post(
        f"{http_gateway.url}/mcp", json=INITIALIZE, headers=auth | {"Origin": "http://evil.example"}
    )
    assert 400 <= evil_host.status_code < 500
    assert 400 <= evil_origin.status_code < 500
    ok = httpx2.post(f"{http_gateway.url}/mcp", json=INITIALIZE, headers=auth | {"Origin": http_gateway.url})
    assert ok.status_code == 200


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_both_protocol_revisions(mode: str, gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    async with http_client(http_gateway.url, token, mode=mode) as client:
        if mode == "legacy":
            # ping exists only in the handshake-era protocol; the SDK flags it as deprecated.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.send_ping()
        tools = await client.list_tools()
        again = await client.list_tools()
        listed = structured(await client.call_tool("connectors", {}))
    async with http_client(http_gateway.url, token, mode=mode) as other:
        other_tools = await other.list_tools()
    assert [t.name for t in tools.tools] == ["connectors", "discover", "describe", "call", "connect", "request_secret"]
    assert tools.model_dump() == again.model_dump() == other_tools.model_dump()
    assert "bearer_api" in {c["slug"] for c in listed["connectors"]}


def test_tools_list_is_small_and_constant(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    headers = MCP_HEADERS | {"Authorization": f"Bearer {token}"}
    with httpx2.Client(headers=headers) as http:
        init = http.post(f"{http_gateway.url}/mcp", json=INITIALIZE)
        session = {"mcp-session-id": init.headers["mcp-session-id"]} if "mcp-session-id" in init.headers else {}
        http.post(
            f"{http_gateway.url}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
        )
        listed = http.post(
            f"{http_gateway.url}/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session
        )
    assert listed.status_code == 200
    assert len(listed.content) <= 4096, len(listed.content)


def _serve_http(env: GatewayEnv, manifest: Path, port: int, log: IO[str], *more: str) -> subprocess.Popen[bytes]:
    """``serve --transport http --port PORT`` without ``--public-url``, once /healthz answers."""
    argv = ["serve", "--transport", "http", "--port", str(port), "--manifest", str(manifest), *more]
    proc = subprocess.Popen([sys.executable, "-m", "mcp_gateway", *argv], env=env.env, stdout=log, stderr=log)
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None and time.monotonic() < deadline, "the gateway did not start"
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx2.HTTPError:
            time.sleep(0.1)


async def test_links_point_at_the_port_served_when_no_public_url_is_set(gateway_env: GatewayEnv) -> None:
    """`serve --transport http --port P` on a manifest without public_url hands out links on P (issue 14.4)."""
    text = gateway_env.manifest.read_text()
    manifest = gateway_env.root / "no_public_url.yaml"
    manifest.write_text("\n".join(line for line in text.splitlines() if not line.startswith("public_url:")))
    port = free_port()
    with (gateway_env.root / "serve.log").open("w") as log:
        proc = _serve_http(gateway_env, manifest, port, log)
        try:
            url = f"http://127.0.0.1:{port}"
            token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
            async with http_client(url, token) as client:
                link = structured(await client.call_tool("connect", {"connector": "bearer_api"}))
            assert link["connect_url"].startswith(f"{url}/connect/"), link
            async with httpx2.AsyncClient() as http:
                assert (await http.get(link["connect_url"])).status_code == 200
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_a_client_cut_off_mid_body_is_no_error_in_the_log(gateway_env: GatewayEnv) -> None:
    # The request timeout closes a client that stops sending its body: the peer's doing, which logged an
    # ERROR "Exception in ASGI application" with a 45-line traceback on every such client.
    port = free_port()
    log_path = gateway_env.root / "cut.log"
    with log_path.open("w") as log:
        proc = _serve_http(gateway_env, gateway_env.manifest, port, log, "--request-timeout", "1")
        try:
            token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
            auth = MCP_HEADERS | {"Authorization": f"Bearer {token}"}
            init = httpx2.post(f"http://127.0.0.1:{port}/mcp", json=INITIALIZE, headers=auth)
            session = init.headers["mcp-session-id"]
            head = "".join(f"{k}: {v}\r\n" for k, v in (auth | {"mcp-session-id": session}).items())
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(
                    f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}Content-Length: 200\r\n\r\n".encode()
                )
                sock.sendall(b'{"jsonrpc": "2.0", "id": 2, ')  # and never the rest
                sock.settimeout(10)
                with contextlib.suppress(ConnectionResetError):
                    while sock.recv(1024):
                        pass
            assert httpx2.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    said = log_path.read_text()
    assert "Exception in ASGI application" not in said and "Traceback" not in said, said


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_over_large_request_reaches_the_agent_as_what_to_do(
    mode: str, gateway_env: GatewayEnv, http_gateway: HttpGateway
) -> None:
    # The SDK's 413 was plain text, which its client turns into "Server returned an error response":
    # the agent could not tell its arguments were too large and retried the same call.
    from mcp.shared.exceptions import MCPError

    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    async with http_client(http_gateway.url, token, mode=mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("call", {"tool": "bearer_api.items.create", "args": {"name": "x" * 5_000_000}})
        assert "request_too_large" in str(raised.value) and "4 MB" in str(raised.value), raised.value
        assert "send less per call" in str(raised.value)
        assert structured(await client.call_tool("connectors", {}))["connectors"]  # the session goes on


def test_text_refusals_on_mcp_are_json_rpc_errors_and_pages_keep_their_text(
    gateway_env: GatewayEnv, http_gateway: HttpGateway
) -> None:
    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    auth = MCP_HEADERS | {"Authorization": f"Bearer {token}"}
    url = f"{http_gateway.url}/mcp"
    answers = {
        421: httpx2.post(url, json=INITIALIZE, headers=auth | {"Host": "evil.example:80"}),
        403: httpx2.post(url, json=INITIALIZE, headers=auth | {"Origin": "http://evil.example"}),
        400: httpx2.post(url, content=json.dumps(INITIALIZE), headers=auth | {"Content-Type": "text/plain"}),
    }
    for status, answer in answers.items():
        assert answer.status_code == status and answer.headers["content-type"] == "application/json"
        error = answer.json()["error"]
        assert answer.json()["id"] is None and error["code"] == -32600 and error["data"]["http_status"] == status
    assert "Content-Type: application/json" in answers[400].json()["error"]["message"]
    page = httpx2.get(f"{http_gateway.url}/healthz", headers={"Host": "evil.example:80"})
    assert page.status_code == 421 and page.text == "Invalid Host header"
