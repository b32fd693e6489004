"""Postman and GraphQL sources end to end: ``mcp-gateway`` as a subprocess (``secret set``, ``sync``,
``serve`` over stdio) driven by the official MCP SDK client, against the recording echo upstream
and a real GraphQL server on 127.0.0.1 that the gateway introspects with the stored credential."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from tests.support.env import child_env
from tests.support.graphql_upstream import GraphQLApp
from tests.support.upstream import LoopbackServer, echo_app

from .conftest import MASTER_KEY, GatewayEnv, free_port, structured

pytestmark = pytest.mark.anyio

CONDUIT = Path(__file__).resolve().parents[2] / "tests" / "data" / "postman" / "realworld"
TOKEN = "e2e-graphql-token-0123456789"
JWT = "e2e-conduit-jwt-0123456789"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[GatewayEnv, GraphQLApp]]:
    echo, graphql = echo_app(), GraphQLApp(token=TOKEN)
    with LoopbackServer(echo) as upstream, LoopbackServer(graphql) as gql:
        manifest = tmp_path / "gateway.yaml"
        manifest.write_text(
            f"""
project: e2e-sources
connectors:
  - slug: conduit
    base_url: {upstream.base_url}/api
    auth: {{type: api_key, in: header, name: Authorization, prefix: "Token "}}
    source: {{postman: {CONDUIT / "Conduit.postman_collection.json"}}}
  - slug: repos
    base_url: {gql.base_url}/graphql
    auth: {{type: bearer}}
    source: {{graphql: {{introspect: true}}}}
"""
        )
        state = tmp_path / "state"
        variables = child_env()
        variables |= {"MCP_GATEWAY_STATE_DIR": str(state), "MCP_GATEWAY_MASTER_KEY": MASTER_KEY}
        yield GatewayEnv(tmp_path, manifest, state, echo, upstream.base_url, free_port(), variables), graphql


async def test_postman_and_graphql_through_the_mcp_server(env: tuple[GatewayEnv, GraphQLApp]) -> None:
    gateway, graphql = env
    failed = gateway.cli("sync", check=False)
    assert failed.returncode != 0 and "repos" in failed.stdout + failed.stderr  # no credential yet
    gateway.cli("secret", "set", "repos", input=TOKEN)
    gateway.cli("secret", "set", "conduit", input=JWT)
    synced = gateway.cli("sync")
    assert "conduit" in synced.stdout and "repos" in synced.stdout

    async with Client(gateway.stdio_params(), mode="legacy") as client:
        listed = structured(await client.call_tool("connectors", {}))["connectors"]
        assert {c["slug"]: (c["status"], c["actions"]) for c in listed} == {
            "conduit": ("ready", 32),
            "repos": ("ready", 5),
        }
        found = structured(await client.call_tool("discover", {"query": "articles by author"}))
        assert "conduit.articles_favorite_comments.articles_by_author" in [r["name"] for r in found["results"]]

        result = structured(
            await client.call_tool(
                "call", {"tool": "conduit.articles_favorite_comments.articles_by_author", "args": {"author": "jake"}}
            )
        )
        assert result["status"] == "ok"
        sent = gateway.upstream.requests[-1]
        assert (sent.path, sent.query) == ("/api/articles", "author=jake")
        assert sent.headers["authorization"] == f"Token {JWT}"
        assert JWT not in str(result)

        described = structured(await client.call_tool("describe", {"tool": "repos.query.repository"}))
        assert described["risk"] == "read" and described["input_schema"]["required"] == ["owner", "name"]
        answer = structured(
            await client.call_tool(
                "call",
                {"tool": "repos.query.repository", "args": {"owner": "octo", "name": "hello", "__select": "id stars"}},
            )
        )
        assert answer == {
            "status": "ok",
            "http_status": 200,
            "data": {"data": {"repository": {"id": "R_1", "stars": 42}}},
        }
        posted = graphql.requests[-1]
        assert posted.headers["authorization"] == f"Bearer {TOKEN}"
        assert posted.body["variables"] == {"owner": "octo", "name": "hello"}
        assert "octo" not in posted.body["query"]

        failing = await client.call_tool("call", {"tool": "repos.query.failing", "args": {}})
        assert failing.is_error
        assert structured(failing)["upstream_message"] == "this field always fails (at failing)"
