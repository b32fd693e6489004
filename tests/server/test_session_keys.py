"""A session's caps need the session's name: the SDK builds a new ``ServerSession`` per request, so its
identity named each request, and a cap per session (the elicitation watchers one session may hold)
never applied. Real SDK clients: in memory, and over streamable HTTP with the SDK's own app."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer

from mcp_gateway.server.session_keys import session_key

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _server() -> MCPServer:
    server = MCPServer(name="keys")

    @server.tool()
    def key(ctx: Context) -> str:
        return session_key(ctx.request_context)

    return server


async def _keys(client: Client, times: int) -> list[str]:
    keys = []
    for _ in range(times):
        answer = await client.call_tool("key", {})
        keys.append(answer.structured_content["result"] if answer.structured_content else "")
    return keys


async def test_every_request_of_one_session_has_its_key_and_another_session_another() -> None:
    server = _server()
    async with Client(server, mode="legacy") as first, Client(server, mode="legacy") as second:
        mine = await _keys(first, 3)
        theirs = await _keys(second, 2)
    assert len(set(mine)) == 1 and mine[0].startswith("session:")
    assert len(set(theirs)) == 1 and theirs[0] != mine[0]


async def test_a_request_of_the_stateless_revision_is_a_session_of_its_own() -> None:
    async with Client(_server()) as client:  # 2026-07-28: no initialize, no session
        assert len(set(await _keys(client, 3))) == 3


def test_over_streamable_http_the_session_is_its_header() -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    def context(headers: dict[str, str]) -> Any:
        return cast(
            Any, SimpleNamespace(request=SimpleNamespace(headers=headers), session=SimpleNamespace(client_params=None))
        )

    assert (
        session_key(context({"mcp-session-id": "abc"}))
        == session_key(context({"mcp-session-id": "abc"}))
        == "session:abc"
    )
    one, other = context({}), context({})  # both alive: an id is reused only once its object is gone
    assert session_key(one) != session_key(other)  # no session: each request its own
