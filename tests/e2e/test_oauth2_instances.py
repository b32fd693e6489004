"""Two ``mcp-gateway serve`` processes refreshing one OAuth2 authorization, end to end.

Both instances share one database (the SQLite file of one state folder, or a PostgreSQL database
of the session's throwaway cluster), and nothing else: each has its own token cache. The
authorization server is the real one (npm ``oauth2-mock-server``) with refresh-token rotation on,
so a second use of a refresh token is refused with ``invalid_grant``; the API checks every JWT. When
the access token expires under both instances at once, exactly one refresh reaches the server,
every call succeeds, and the connector stays connected.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.support.env import child_env
from tests.support.oauth2_server import OAuth2MockServer, ProtectedApi
from tests.support.pages import oauth_sign_in
from tests.support.upstream import LoopbackServer

from .conftest import MASTER_KEY, GatewayEnv, HttpGateway, free_port, http_client, structured

pytestmark = pytest.mark.anyio

CLIENT = {"client_id": "gateway-instances", "client_secret": "CANARY-instances-client-secret-3390"}
LIFETIME = 4
"""Seconds an access token lives; the gateway stops using it a tenth earlier."""
MANIFEST = """
project: oauth-instances
connectors:
  - slug: people
    name: People API
    base_url: {api}
    auth: {{type: oauth2, authorize_url: "{auth}/authorize", token_url: "{auth}/token", scopes: [profile]}}
    source:
      http:
        actions:
          - {{path: me.get, method: GET, url: /me, summary: The signed-in account}}
"""
ME = {"tool": "people.me.get"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """What points both instances at one database: one state folder, or a PostgreSQL URL."""
    if request.param == "sqlite":
        return {"MCP_GATEWAY_STATE_DIR": str(tmp_path / "shared-state")}
    return {"MCP_GATEWAY_DATABASE_URL": request.getfixturevalue("postgres_url")}


@pytest.fixture
def setting(tmp_path: Path, database: dict[str, str]) -> Iterator[tuple[GatewayEnv, OAuth2MockServer, ProtectedApi]]:
    with OAuth2MockServer(expires_in=LIFETIME, rotate_refresh_tokens=True) as auth:
        api = ProtectedApi(auth.jwks())
        with LoopbackServer(api) as server:
            manifest = tmp_path / "oauth.yaml"
            manifest.write_text(MANIFEST.format(api=server.base_url, auth=auth.url))
            env = child_env() | {
                "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
                "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
                "PYTHONUNBUFFERED": "1",
                **database,
            }
            gw = GatewayEnv(tmp_path, manifest, tmp_path / "state", api.echo, server.base_url, free_port(), env)
            yield gw, auth, api


async def test_two_serve_processes_refresh_an_expired_token_once(
    setting: tuple[GatewayEnv, OAuth2MockServer, ProtectedApi],
) -> None:
    gw, auth, api = setting
    token = gw.cli("token", "create", "--agent", "bot").stdout.strip()
    a = HttpGateway(gw, gw.root / "gateway-a.log")
    b = HttpGateway(gw, gw.root / "gateway-b.log")
    try:
        async with http_client(a.url, token) as agent_a, http_client(b.url, token) as agent_b:
            link = structured(await agent_a.call_tool("connect", {"connector": "people"}))["connect_url"]
            assert "Connected" in (await oauth_sign_in(link, CLIENT))[-1].text
            for agent in (agent_a, agent_b):
                assert structured(await agent.call_tool("call", ME))["status"] == "ok"
            auth.command("sync-1")  # every token event written before now has been read
            before = auth.events("token")
            accepted = len(api.accepted)

            await anyio.sleep(LIFETIME * 0.9 + 0.2)  # expired for both instances
            results: list[dict[str, Any]] = []

            async def one(agent: Client) -> None:
                results.append(structured(await agent.call_tool("call", ME)))

            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(one, agent_a if i % 2 else agent_b)
            assert [r["status"] for r in results] == ["ok"] * 8, results

            auth.command("sync-2")
            [refresh] = auth.events("token")[len(before) :]  # exactly one exchange, for all eight calls
            assert (refresh["grant_type"], refresh["status"], refresh["reused_refresh_token"]) == (
                "refresh_token",
                200,
                False,
            )
            assert refresh["refresh_token_sent"] == before[-1]["refresh_token"]
            assert set(api.accepted[accepted:]) == {refresh["access_token"]}
            listed = structured(await agent_b.call_tool("connectors", {}))["connectors"]
            assert [c["status"] for c in listed] == ["ready"]  # still connected
    finally:
        a.stop()
        b.stop()
    for log in ("gateway-a.log", "gateway-b.log"):
        text = (gw.root / log).read_text()
        for secret in (CLIENT["client_secret"], *auth.issued_tokens()):
            assert secret not in text
