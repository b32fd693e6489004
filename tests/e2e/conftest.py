"""End-to-end fixtures: a real loopback upstream, a manifest pointing at it, and the gateway
run as a subprocess (``python -m mcp_gateway``) reached by the official MCP SDK client over
stdio or streamable HTTP."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.support.env import child_env
from tests.support.ports import free_port
from tests.support.upstream import EchoApp, LoopbackServer, echo_app

MASTER_KEY = "e2e-master-key-0123456789abcdef0123456789"

MANIFEST = """
project: e2e
default_mode: risk
public_url: http://127.0.0.1:{pages_port}
policies:
  - match: "*.admin.*"
    action: block
connectors:
{connectors}
  - slug: hidden_api
    base_url: {upstream}
    source:
      http:
        actions:
          - path: things.list
            method: GET
            url: /things
            summary: List the hidden things
agents:
  - name: bot
    connectors: [{granted}]
"""

# slug -> auth block. Each connector gets the same three actions (see _actions).
AUTH_KINDS: dict[str, str] = {
    "bearer_api": "{type: bearer}",
    "basic_api": "{type: basic}",
    "header_key": "{type: api_key, in: header, name: X-Api-Key}",
    "query_key": "{type: api_key, in: query, name: api_key}",
    "cookie_key": "{type: api_key, in: cookie, name: session}",
    "custom_api": '{type: custom, headers: {X-Custom-Auth: "Token {secret}"}}',
    "open_api": "{type: none}",
}

SECRETS: dict[str, str] = {
    "bearer_api": "bearer-secret-value",
    "basic_api": '{"username": "alice", "password": "basic-pass-word"}',
    "header_key": "header-key-value",
    "query_key": "query-key-value",
    "cookie_key": "cookie-key-value",
    "custom_api": "custom-secret-value",
}


def _actions() -> str:
    return """    source:
      http:
        actions:
          - path: items.get
            method: GET
            url: /items/{id}
            summary: Fetch one item by its id
            input_schema: {type: object, required: [id], properties: {id: {type: string}, verbose: {type: boolean}}}
          - path: items.create
            method: POST
            url: /items
            summary: Create a new item with a name
            input_schema: {type: object, required: [name], properties: {name: {type: string}}}
          - path: admin.purge
            method: POST
            url: /admin/purge
            summary: Purge every item
          - path: errors.echo
            method: GET
            url: /echo-headers-error
            summary: Trigger an upstream error page"""


@dataclass
class GatewayEnv:
    """Everything a test needs to run the gateway as a user would."""

    root: Path
    manifest: Path
    state_dir: Path
    upstream: EchoApp
    upstream_url: str
    pages_port: int
    env: dict[str, str] = field(default_factory=dict)

    def cli(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "mcp_gateway", *args, "--manifest", str(self.manifest)],
            input=input,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"mcp-gateway {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
        return proc

    def set_secrets(self) -> None:
        for slug, value in SECRETS.items():
            self.cli("secret", "set", slug, input=value)

    def stdio_params(self, *extra: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable,
            args=["-m", "mcp_gateway", "serve", "--manifest", str(self.manifest), *extra],
            env=self.env,
        )


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def upstream() -> Iterator[tuple[EchoApp, str]]:
    app = echo_app()
    with LoopbackServer(app) as server:
        yield app, server.base_url


@pytest.fixture
def gateway_env(tmp_path: Path, upstream: tuple[EchoApp, str]) -> GatewayEnv:
    app, base_url = upstream
    pages_port = free_port()
    connectors = "\n".join(
        f"  - slug: {slug}\n    base_url: {base_url}\n    auth: {auth}\n{_actions()}"
        for slug, auth in AUTH_KINDS.items()
    )
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(
        MANIFEST.format(pages_port=pages_port, upstream=base_url, connectors=connectors, granted=", ".join(AUTH_KINDS))
    )
    state_dir = tmp_path / "state"
    env = child_env() | {
        "MCP_GATEWAY_STATE_DIR": str(state_dir),
        "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
        "PYTHONUNBUFFERED": "1",
    }
    return GatewayEnv(tmp_path, manifest, state_dir, app, base_url, pages_port, env)


class HttpGateway:
    """``mcp-gateway serve --transport http`` on a free port, with ``extra`` options and
    ``extra_env`` added to ``env``'s; ready once ``/healthz`` answers."""

    def __init__(self, env: GatewayEnv, log: Path, *extra: str, extra_env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        self._log = log.open("w")
        command = [sys.executable, "-m", "mcp_gateway", "serve", "--transport", "http", "--port", str(self.port)]
        self.proc = subprocess.Popen(
            [*command, "--manifest", str(env.manifest), "--public-url", self.url, *extra],
            env=env.env | (extra_env or {}),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited early:\n{log.read_text()}")
            try:
                if httpx2.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("gateway did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()


@contextmanager
def serving(env: GatewayEnv) -> Iterator[HttpGateway]:
    """``env``'s catalog synced, then ``serve`` over HTTP for the block."""
    env.cli("sync", check=False)
    server = HttpGateway(env, env.root / "http-gateway.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def http_gateway(gateway_env: GatewayEnv) -> Iterator[HttpGateway]:
    with serving(gateway_env) as server:
        yield server


@asynccontextmanager
async def http_client(url: str, token: str | None, *, mode: str = "legacy") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client:
            yield client


def structured(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return result.structured_content
