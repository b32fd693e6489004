"""The six meta-tools end to end: ``mcp-gateway serve`` as a subprocess, the official MCP SDK
client over stdio and over streamable HTTP, a real upstream on 127.0.0.1."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from mcp import Client

from .conftest import GatewayEnv, HttpGateway, http_client, structured

pytestmark = pytest.mark.anyio

SIX = {"connectors", "discover", "describe", "call", "connect", "request_secret"}


@asynccontextmanager
async def open_session(transport: str, env: GatewayEnv, agent: str = "bot") -> AsyncIterator[Client]:
    if transport == "stdio":
        async with Client(env.stdio_params("--agent", agent), mode="legacy") as client:
            yield client
        return
    server = HttpGateway(env, env.root / f"http-{agent}.log")
    try:
        token = env.cli("token", "create", "--agent", agent).stdout.strip()
        async with http_client(server.url, token) as client:
            yield client
    finally:
        server.stop()


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


async def test_tools_list_is_the_six_meta_tools(transport: str, gateway_env: GatewayEnv) -> None:
    async with open_session(transport, gateway_env) as client:
        first = await client.list_tools()
        second = await client.list_tools()
    assert {t.name for t in first.tools} == SIX
    assert [t.model_dump() for t in first.tools] == [t.model_dump() for t in second.tools]
    call = next(t for t in first.tools if t.name == "call")
    assert call.input_schema["required"] == ["tool"]


async def test_discover_describe_call_inject_each_credential(transport: str, gateway_env: GatewayEnv) -> None:
    gateway_env.set_secrets()
    async with open_session(transport, gateway_env) as client:
        found = structured(await client.call_tool("discover", {"query": "fetch an item by id"}))
        names = [r["name"] for r in found["results"]]
        assert "bearer_api.items.get" in names

        described = structured(await client.call_tool("describe", {"tool": "bearer_api.items.get"}))
        assert described["input_schema"]["required"] == ["id"]
        assert described["risk"] == "read"
        assert described["policy"]["source"] == "risk_default"

        for slug in ("bearer_api", "basic_api", "header_key", "query_key", "cookie_key", "custom_api", "open_api"):
            result = await client.call_tool("call", {"tool": f"{slug}.items.get", "args": {"id": "a/b c"}})
            body = structured(result)
            assert body["status"] == "ok", body
            assert not result.is_error
            seen = gateway_env.upstream.requests[-1]
            assert seen.raw_path == "/items/a%2Fb%20c"
            match slug:
                case "bearer_api":
                    assert seen.headers["authorization"] == "Bearer bearer-secret-value"
                case "basic_api":
                    expected = base64.b64encode(b"alice:basic-pass-word").decode()
                    assert seen.headers["authorization"] == f"Basic {expected}"
                case "header_key":
                    assert seen.headers["x-api-key"] == "header-key-value"
                case "query_key":
                    assert ("api_key", "query-key-value") in seen.query_params
                case "cookie_key":
                    assert seen.cookies["session"] == "cookie-key-value"
                case "custom_api":
                    assert seen.headers["x-custom-auth"] == "Token custom-secret-value"
                case "open_api":
                    assert "authorization" not in seen.headers
            # Whatever the upstream echoed back, the secret never reaches the agent.
            text = result.content[0].text
            for secret in (
                "bearer-secret-value",
                "basic-pass-word",
                "header-key-value",
                "query-key-value",
                "cookie-key-value",
                "custom-secret-value",
                expected if slug == "basic_api" else "\0",
            ):
                assert secret not in text


async def test_policy_block_hides_and_denies(transport: str, gateway_env: GatewayEnv) -> None:
    gateway_env.set_secrets()
    async with open_session(transport, gateway_env) as client:
        found = structured(await client.call_tool("discover", {"query": "purge every item", "limit": 50}))
        assert not [r for r in found["results"] if ".admin." in r["name"]]
        result = await client.call_tool("call", {"tool": "bearer_api.admin.purge"})
    body = structured(result)
    assert result.is_error
    assert body["status"] == "denied"
    assert body["reason"] == "policy_block"
    assert body["source"] == "project"
    assert not [r for r in gateway_env.upstream.requests if r.path.startswith("/admin")]


async def test_write_needs_approval_and_upstream_receives_nothing(transport: str, gateway_env: GatewayEnv) -> None:
    gateway_env.set_secrets()
    async with open_session(transport, gateway_env) as client:
        result = await client.call_tool("call", {"tool": "bearer_api.items.create", "args": {"name": "x"}})
    body = structured(result)
    assert body["status"] == "pending_approval", body
    assert body["approval_url"].startswith("http://127.0.0.1:")
    assert body["approval_id"]
    assert not result.is_error
    assert gateway_env.upstream.requests == []


async def test_ungranted_connector_is_invisible(transport: str, gateway_env: GatewayEnv) -> None:
    async with open_session(transport, gateway_env) as client:
        listed = structured(await client.call_tool("connectors", {}))
        assert "hidden_api" not in {c["slug"] for c in listed["connectors"]}
        assert {c["slug"] for c in listed["connectors"]} == {
            "bearer_api",
            "basic_api",
            "header_key",
            "query_key",
            "cookie_key",
            "custom_api",
            "open_api",
        }
        found = structured(await client.call_tool("discover", {"query": "list the hidden things"}))
        assert not [r for r in found["results"] if r["name"].startswith("hidden_api")]
        described = structured(await client.call_tool("describe", {"tool": "hidden_api.things.list"}))
        called = await client.call_tool("call", {"tool": "hidden_api.things.list"})
    assert described["reason"] == "action_not_found"
    assert structured(called)["reason"] == "action_not_found"
    assert all(not s["name"].startswith("hidden_api") for s in structured(called)["suggestions"])
    assert gateway_env.upstream.requests == []


async def test_missing_credential_answers_needs_auth_with_link(transport: str, gateway_env: GatewayEnv) -> None:
    async with open_session(transport, gateway_env) as client:
        result = await client.call_tool("call", {"tool": "bearer_api.items.get", "args": {"id": "1"}})
        connected = structured(await client.call_tool("connect", {"connector": "bearer_api"}))
    body = structured(result)
    assert body["status"] == "needs_auth"
    assert body["connector"] == "bearer_api"
    assert "/connect/" in body["connect_url"]
    assert "/connect/" in connected["connect_url"]
    assert gateway_env.upstream.requests == []


async def test_wrong_arguments_and_guessed_names(transport: str, gateway_env: GatewayEnv) -> None:
    gateway_env.set_secrets()
    async with open_session(transport, gateway_env) as client:
        wrong = await client.call_tool("call", {"tool": "bearer_api.items.get", "args": {"id": 5, "verbose": "yes"}})
        guessed = await client.call_tool("call", {"tool": "bearer_api.get_item", "args": {"id": "1"}})
        spelled = await client.call_tool("call", {"tool": "Bearer_Api.Items.Get", "args": {"id": "1"}})
    body = structured(wrong)
    assert wrong.is_error and body["reason"] == "invalid_args"
    assert {e["path"] for e in body["errors"]} == {"id", "verbose"}
    guess = structured(guessed)
    assert guess["reason"] == "action_not_found"
    assert guess["suggestions"][0]["name"] == "bearer_api.items.get"
    assert "input_schema" in guess["suggestions"][0]
    assert structured(spelled)["status"] == "ok"
