"""Several gateway instances on one PostgreSQL database (SPEC 10), end to end.

Two ``mcp-gateway serve --transport http`` processes, each with a state folder of its own (so
nothing is shared through the filesystem), point at one database of the session's throwaway
cluster (tests/support/postgres.py); the CLI is a third process on the same database. The agent
is the MCP SDK client, the human plain HTTP on the pages, the upstream a real loopback server.
What one instance (or the CLI) writes, the other sees: tokens and their revocation, secrets,
approvals decided exactly once, and the human pages (a form rendered by one instance is accepted
by the other; an operator session started on one is known to the other).

The URL carries a password (trust authentication ignores it): it must never show anywhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from tests.support.env import child_env
from tests.support.pages import csrf, get, post
from tests.support.upstream import EchoApp, LoopbackServer

from .conftest import MASTER_KEY, GatewayEnv, HttpGateway, free_port, http_client, structured

pytestmark = pytest.mark.anyio

DB_PASSWORD = "CANARY-db-password-5521"
UPSTREAM_TOKEN = "CANARY-upstream-bearer-0193"
WEBHOOK_SECRET = "whsec-postgres-e2e-0042"

MANIFEST = """
project: postgres-e2e
connectors:
  - slug: hooks
    name: Webhooks
    base_url: {upstream}
    auth: {{type: bearer}}
    source:
      http:
        actions:
          - path: webhooks.create
            method: POST
            url: /webhooks
            summary: Register a webhook that signs its deliveries with a secret
            input_schema:
              type: object
              required: [url, secret]
              properties:
                url: {{type: string}}
                secret: {{type: string}}
          - path: webhooks.list
            method: GET
            url: /webhooks
            summary: List webhooks
agents:
  - name: bot
    connectors: [hooks]
"""
CALL = {"tool": "hooks.webhooks.create", "args": {"url": "https://example.test/hook", "secret": WEBHOOK_SECRET}}
LIST = {"tool": "hooks.webhooks.list", "args": {}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _instance(root: Path, name: str, manifest: Path, upstream: EchoApp, url: str, database_url: str) -> GatewayEnv:
    state = root / name
    environ = child_env() | {
        "MCP_GATEWAY_STATE_DIR": str(state),
        "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,  # every instance must share the master key
        "MCP_GATEWAY_DATABASE_URL": database_url,
        "PYTHONUNBUFFERED": "1",
    }
    return GatewayEnv(root, manifest, state, upstream, url, free_port(), environ)


@pytest.fixture
def instances(tmp_path: Path, postgres_url: str) -> Iterator[tuple[GatewayEnv, GatewayEnv, GatewayEnv]]:
    """Environments of instance A, instance B and the operator's CLI: one database, three state folders."""
    database_url = postgres_url.replace("postgresql://postgres@", f"postgresql://postgres:{DB_PASSWORD}@")
    upstream = EchoApp()
    with LoopbackServer(upstream) as server:
        manifest = tmp_path / "gateway.yaml"
        manifest.write_text(MANIFEST.format(upstream=server.base_url))
        yield tuple(  # type: ignore[misc]
            _instance(tmp_path, name, manifest, upstream, server.base_url, database_url) for name in ("a", "b", "cli")
        )


def _posts(env: GatewayEnv) -> list[Any]:
    return [r for r in env.upstream.requests if r.method == "POST"]


def _on(url: str, server: HttpGateway) -> str:
    """The same page path on another instance (a load balancer may send the human anywhere)."""
    path = url.split("/", 3)[3]
    return f"{server.url}/{path}"


async def _refused(url: str, token: str) -> bool:
    async with httpx2.AsyncClient() as http:
        response = await http.post(f"{url}/mcp", headers={"Authorization": f"Bearer {token}"}, json={})
    return response.status_code == 401


async def test_two_instances_share_one_database(instances: tuple[GatewayEnv, GatewayEnv, GatewayEnv]) -> None:
    env_a, env_b, cli = instances
    token = cli.cli("token", "create", "--agent", "bot").stdout.strip()
    a = HttpGateway(env_a, env_a.root / "gateway-a.log")
    b = HttpGateway(env_b, env_b.root / "gateway-b.log")
    try:
        async with http_client(a.url, token) as agent_a, http_client(b.url, token) as agent_b:
            # A token made by the CLI against the database works on both instances.
            assert {t.name for t in (await agent_a.list_tools()).tools} >= {"call", "connect"}
            assert {t.name for t in (await agent_b.list_tools()).tools} >= {"call", "connect"}

            # A secret entered through a page instance A rendered, submitted to B, is used by A.
            link = structured(await agent_a.call_tool("connect", {"connector": "hooks"}))["connect_url"]
            page = await get(link)
            assert page.status_code == 200
            saved = await post(_on(link, b), {"csrf": csrf(page.text), "secret": UPSTREAM_TOKEN})
            assert saved.status_code == 200 and "connected" in saved.text, saved.text
            listed = structured(await agent_a.call_tool("call", LIST))
            assert listed["status"] == "ok", listed
            assert env_a.upstream.requests[-1].headers["authorization"] == f"Bearer {UPSTREAM_TOKEN}"

            # An approval asked on B, decided on A's copy of B's page, then retried twelve times at
            # once across both instances: the compare-and-set lets exactly one reach the upstream.
            pending = structured(await agent_b.call_tool("call", CALL))
            assert pending["status"] == "pending_approval", pending
            page = await get(pending["approval_url"])
            decided = await post(_on(pending["approval_url"], a), {"csrf": csrf(page.text), "decision": "approve"})
            assert decided.status_code == 200 and "Approved" in decided.text, decided.text
            results: list[dict[str, Any]] = []

            async def retry(client: Client) -> None:
                args = {**CALL, "approval_id": pending["approval_id"]}
                results.append(structured(await client.call_tool("call", args)))

            async with anyio.create_task_group() as tg:
                for i in range(12):
                    tg.start_soon(retry, agent_a if i % 2 else agent_b)
            assert sorted(r["status"] for r in results) == ["denied"] * 11 + ["ok"], results
            assert {r.get("reason") for r in results if r["status"] == "denied"} == {"approval_mismatch"}
            assert len(_posts(env_a)) == 1 and _posts(env_a)[0].json()["secret"] == WEBHOOK_SECRET

            # The CLI sees the approval and the audit rows both instances wrote.
            approvals = json.loads(cli.cli("approvals", "list", "--all", "--json").stdout)
            assert [r["status"] for r in approvals] == ["consumed"]
            audit = json.loads(cli.cli("audit", "--json", "--limit", "100").stdout)
            assert sum(1 for r in audit if r["status"] == "ok" and r["requested"] == CALL["tool"]) == 1

        # Revoked from the CLI: refused by both instances on their next request.
        token_id = json.loads(cli.cli("token", "list", "--json").stdout)[0]["id"]
        cli.cli("token", "revoke", token_id)
        assert await _refused(a.url, token) and await _refused(b.url, token)

        # An operator session started on A is known to B; signing out on B ends it on A.
        operator = cli.cli("token", "create", "--operator").stdout.strip()
        async with httpx2.AsyncClient(follow_redirects=False) as browser:
            signed_in = await browser.post(f"{a.url}/operator/login", data={"token": operator})
        assert signed_in.status_code == 303
        cookie = {"Cookie": f"mgw_operator={signed_in.cookies['mgw_operator']}"}
        async with httpx2.AsyncClient(follow_redirects=False) as browser:
            overview = await browser.get(f"{b.url}/operator", headers=cookie)
            assert overview.status_code == 200 and "hooks" in overview.text and "Sign out" in overview.text
            out = await browser.post(f"{b.url}/operator/logout", data={"csrf": csrf(overview.text)}, headers=cookie)
            assert out.status_code == 303
            again = await browser.get(f"{a.url}/operator", headers=cookie)
            assert 'action="/operator/login"' in again.text and "hooks.webhooks" not in again.text
    finally:
        a.stop()
        b.stop()

    # Nothing went to a state folder's SQLite file, and the database password showed nowhere.
    for env in (env_a, env_b, cli):
        assert not (env.state_dir / "state.db").exists()
    for log in ("gateway-a.log", "gateway-b.log"):
        text = (env_a.root / log).read_text()
        assert DB_PASSWORD not in text and UPSTREAM_TOKEN not in text and WEBHOOK_SECRET not in text


def test_an_unreachable_database_is_one_clear_line(tmp_path: Path) -> None:
    """Exit 3 (the store cannot be opened, as every command says), one line naming the redacted URL and
    what to check, no traceback, no password."""
    port = free_port()
    url = f"postgresql://gw:{DB_PASSWORD}@127.0.0.1:{port}/gateway"
    environ = child_env() | {
        "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
        "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
    }
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(MANIFEST.format(upstream="http://127.0.0.1:9"))
    for how in (["--database-url", url], []):
        proc = subprocess.run(
            [sys.executable, "-m", "mcp_gateway", "serve", "--transport", "http", "--manifest", str(manifest), *how],
            env=environ | ({} if how else {"MCP_GATEWAY_DATABASE_URL": url}),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 3, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert DB_PASSWORD not in proc.stderr + proc.stdout
        assert proc.stderr.startswith(
            f"mcp-gateway: error: cannot use the PostgreSQL database at "
            f"postgresql://gw:***@127.0.0.1:{port}/gateway (ConnectionRefusedError"
        )
        assert "check that the server is running" in proc.stderr
