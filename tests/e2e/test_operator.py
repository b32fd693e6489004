"""The operator overview (``/operator``): who may see it, what it shows, and what it lets them do."""

from __future__ import annotations

import json
import re

import httpx2
import pytest
from mcp import Client

from tests.support.pages import csrf, get

from .conftest import GatewayEnv, HttpGateway, http_client, structured

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _operator_token(env: GatewayEnv) -> str:
    token = env.cli("token", "create", "--operator").stdout.strip()
    assert token.startswith("mgo_")
    return token


async def test_only_an_operator_token_opens_the_overview(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    agent_token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    operator = _operator_token(gateway_env)
    overview = f"{http_gateway.url}/operator"

    login = await get(overview)
    assert login.status_code == 200 and 'action="/operator/login"' in login.text and "bearer_api" not in login.text
    for wrong in (agent_token, "mgo_" + "x" * 43, "nonsense"):
        refused = await get(overview, Authorization=f"Bearer {wrong}")
        assert refused.status_code in (200, 401) and "bearer_api" not in refused.text
    assert (await get(overview, Authorization=f"Bearer {agent_token}")).status_code == 401
    # Nor does an operator token open an MCP session.
    async with httpx2.AsyncClient() as http:
        mcp = await http.post(f"{http_gateway.url}/mcp", headers={"Authorization": f"Bearer {operator}"}, json={})
    assert mcp.status_code == 401

    listed = json.loads(gateway_env.cli("token", "list", "--json").stdout)
    assert {(r["kind"], r["revoked"]) for r in listed} == {("agent", False), ("operator", False)}
    assert operator not in json.dumps(listed)
    ok = await get(overview, Authorization=f"Bearer {operator}")
    assert ok.status_code == 200 and "bearer_api" in ok.text
    operator_id = next(r["id"] for r in listed if r["kind"] == "operator")
    gateway_env.cli("token", "revoke", operator_id)
    assert (await get(overview, Authorization=f"Bearer {operator}")).status_code == 401


async def test_overview_shows_connectors_approvals_and_audit(
    gateway_env: GatewayEnv, http_gateway: HttpGateway
) -> None:
    gateway_env.set_secrets()
    agent_token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    async with http_client(http_gateway.url, agent_token) as client:
        assert structured(await client.call_tool("call", {"tool": "bearer_api.items.get", "args": {"id": "7"}}))
        pending = structured(
            await client.call_tool("call", {"tool": "bearer_api.items.create", "args": {"name": "from the agent"}})
        )
        assert pending["status"] == "pending_approval"
    operator = _operator_token(gateway_env)

    async with httpx2.AsyncClient(base_url=http_gateway.url, follow_redirects=False) as browser:
        # Sign in through the form: an HttpOnly, SameSite=Strict cookie scoped to the operator pages.
        refused = await browser.post(
            "/operator/login", data={"token": operator}, headers={"Origin": "https://evil.example"}
        )
        assert refused.status_code == 403
        bad = await browser.post("/operator/login", data={"token": "mgo_wrong"})
        assert bad.status_code == 401 and "not a valid operator token" in bad.text
        signed_in = await browser.post("/operator/login", data={"token": operator})
        assert signed_in.status_code == 303 and signed_in.headers["location"] == "/operator"
        cookie = signed_in.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/operator" in cookie
        assert operator not in cookie

        page = await browser.get("/operator")
        html = page.text
        assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
        # Connectors with status and action counts.
        row = re.search(
            r"<code>bearer_api</code></td><td><span class=\"badge (\w+)\">\w+</span></td>\s*<td>(\d+)</td>", html
        )
        assert row and row.groups() == ("ready", "3"), html  # admin.purge is blocked, so invisible
        assert re.search(r"<code>open_api</code>.*?badge ready", html, re.S)
        # The pending approval, and the recent calls with their (redacted) arguments.
        assert pending["approval_id"] in html and "bearer_api.items.create" in html
        assert "from the agent" in html and "bearer_api.items.get" in html
        assert "pending_approval" in html and "risk_default" in html
        assert "bearer-secret-value" not in html  # the stored credential, never shown

        # Approve from the overview: the form's CSRF token is bound to this session.
        target = f"/operator/approvals/{pending['approval_id']}"
        assert (await browser.post(target, data={"decision": "approve", "csrf": "0" * 64})).status_code == 403
        decided = await browser.post(target, data={"decision": "approve", "csrf": csrf(html)})
        assert decided.status_code == 303
        record = json.loads(gateway_env.cli("approvals", "list", "--all", "--json").stdout)
        assert [r["status"] for r in record] == ["approved"]

        out = await browser.post("/operator/logout", data={"csrf": csrf(html)})
        assert out.status_code == 303
        after = await browser.get("/operator")
        assert 'action="/operator/login"' in after.text and "bearer_api.items.create" not in after.text


async def test_overview_in_stdio_mode(gateway_env: GatewayEnv) -> None:
    """stdio: the page server (started with the first link) serves the overview too."""
    operator = _operator_token(gateway_env)
    async with Client(gateway_env.stdio_params("--agent", "bot"), mode="legacy") as client:
        link = structured(await client.call_tool("connect", {"connector": "bearer_api"}))["connect_url"]
        await get(link)  # the page server is up
        page = await get(f"http://127.0.0.1:{gateway_env.pages_port}/operator", Authorization=f"Bearer {operator}")
    assert page.status_code == 200 and "bearer_api" in page.text and "Operator overview" in page.text
