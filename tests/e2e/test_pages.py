"""The human side of links: paste a secret, approve or deny a call — over HTTP and in stdio mode."""

from __future__ import annotations

import re

import anyio
import httpx2
import pytest
from mcp import Client

from .conftest import GatewayEnv, HttpGateway, http_client, structured

pytestmark = pytest.mark.anyio


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, html
    return match.group(1)


async def _get(url: str) -> httpx2.Response:
    # The stdio page server starts when the first link is minted; give it a moment.
    async with httpx2.AsyncClient() as http:
        for _ in range(100):
            try:
                return await http.get(url)
            except httpx2.ConnectError:
                await anyio.sleep(0.05)
    raise AssertionError(f"nothing serves {url}")


async def _post(url: str, data: dict[str, str], **headers: str) -> httpx2.Response:
    async with httpx2.AsyncClient() as http:
        return await http.post(url, data=data, headers=headers)


async def test_secret_page_then_call_works_over_http(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    async with http_client(http_gateway.url, token) as client:
        link = structured(await client.call_tool("connect", {"connector": "basic_api"}))["connect_url"]
        page = await _get(link)
        assert page.status_code == 200
        assert 'name="username"' in page.text and 'name="password"' in page.text
        assert "<script" not in page.text

        bad = await _post(link, {"csrf": "0" * 64, "username": "u", "password": "p"})
        assert bad.status_code == 403
        cross = await _post(
            link, {"csrf": _csrf(page.text), "username": "u", "password": "p"}, Origin="http://evil.example"
        )
        assert cross.status_code == 403

        saved = await _post(link, {"csrf": _csrf(page.text), "username": "bob", "password": "page-pass-1234"})
        assert saved.status_code == 200 and "Saved" in saved.text
        assert "page-pass-1234" not in saved.text
        reused = await _post(link, {"csrf": _csrf(page.text), "username": "x", "password": "y"})
        assert reused.status_code == 410

        result = structured(await client.call_tool("call", {"tool": "basic_api.items.get", "args": {"id": "7"}}))
    assert result["status"] == "ok"
    assert gateway_env.upstream.requests[-1].headers["authorization"].startswith("Basic ")


async def test_approve_runs_once_and_deny_is_final(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    gateway_env.set_secrets()
    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    args = {"tool": "bearer_api.items.create", "args": {"name": "widget"}}
    async with http_client(http_gateway.url, token) as client:
        pending = structured(await client.call_tool("call", args))
        page = await _get(pending["approval_url"])
        assert "bearer_api.items.create" in page.text and "widget" in page.text
        approved = await _post(pending["approval_url"], {"csrf": _csrf(page.text), "decision": "approve"})
        assert "Approved" in approved.text

        mismatch = structured(
            await client.call_tool("call", {**args, "args": {"name": "other"}, "approval_id": pending["approval_id"]})
        )
        assert mismatch["reason"] == "approval_mismatch"
        ran = structured(await client.call_tool("call", {**args, "approval_id": pending["approval_id"]}))
        assert ran["status"] == "ok"
        again = structured(await client.call_tool("call", {**args, "approval_id": pending["approval_id"]}))
        assert again["status"] == "denied"
        assert [r.method for r in gateway_env.upstream.requests] == ["POST"]

        second = structured(await client.call_tool("call", args))
        page = await _get(second["approval_url"])
        await _post(second["approval_url"], {"csrf": _csrf(page.text), "decision": "deny"})
        denied = structured(await client.call_tool("call", {**args, "approval_id": second["approval_id"]}))
    assert denied["reason"] == "approval_denied"
    assert len(gateway_env.upstream.requests) == 1


async def test_links_work_in_stdio_mode(gateway_env: GatewayEnv) -> None:
    async with Client(gateway_env.stdio_params("--agent", "bot"), mode="legacy") as client:
        link = structured(await client.call_tool("request_secret", {"connector": "bearer_api"}))["secret_url"]
        assert link.startswith(f"http://127.0.0.1:{gateway_env.pages_port}/secrets/")
        page = await _get(link)
        assert page.status_code == 200
        saved = await _post(link, {"csrf": _csrf(page.text), "secret": "stdio-pasted-token"})
        assert saved.status_code == 200
        result = structured(await client.call_tool("call", {"tool": "bearer_api.items.get", "args": {"id": "1"}}))
    assert result["status"] == "ok"
    assert gateway_env.upstream.requests[-1].headers["authorization"] == "Bearer stdio-pasted-token"
