"""server/tools.py: each meta-tool on its own (a server holding that one tool, a real in-memory SDK
client), the principal a request carries, the observed wrapper, and the server with the fast path
on and off. The six together are exercised through the MCP surface in tests/core/test_gateway.py
and tests/e2e/test_meta_tools.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp import Client
from mcp_types import CallToolResult

from mcp_gateway.server.elicitation import HumanElicitation
from mcp_gateway.server.tools import (
    META_TOOLS,
    PRINCIPAL_SCOPE_KEY,
    AnyMetaTool,
    Call,
    Connect,
    Connectors,
    Describe,
    Discover,
    GatewayServer,
    RequestSecret,
    build_mcp_server,
    principal_of_request,
    register,
)
from mcp_gateway.services.identity import OPERATOR, Principal
from mcp_gateway.vocabulary.errors import StoreUnavailable
from tests.core.test_gateway import Harness, harness, manifest_text

pytestmark = pytest.mark.anyio

BOT = Principal(user=OPERATOR.user, agent="bot")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def alone(
    h: Harness, tool: type[AnyMetaTool], principal: Principal = OPERATOR
) -> AsyncIterator[tuple[Client, AnyMetaTool]]:
    """A server holding only ``tool``, and a client of it."""
    server = GatewayServer(name="one")
    made = tool(h.gateway, HumanElicitation(h.gateway), default_principal=principal)
    register(server, made)
    async with Client(server) as client:
        yield client, made


def data(result: CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, result
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


async def test_the_six_are_each_served_alone_under_their_name(tmp_path: Path) -> None:
    assert [t.name for t in META_TOOLS] == ["connectors", "discover", "describe", "call", "connect", "request_secret"]
    async with harness(tmp_path) as h:
        for tool in META_TOOLS:
            async with alone(h, tool) as (client, _):
                listed = (await client.list_tools()).tools
            assert [(t.name, t.description, t.annotations) for t in listed] == [
                (tool.name, tool.description, tool.annotations)
            ]
            assert listed[0].input_schema["title"] == f"{tool.name}Arguments"
            assert "ctx" not in listed[0].input_schema.get("properties", {})


async def test_connectors_lists_what_the_caller_may_use(tmp_path: Path) -> None:
    async with harness(tmp_path, manifest_text(agents=True)) as h:
        async with alone(h, Connectors) as (client, _):
            everyone = data(await client.call_tool("connectors", {}))
        async with alone(h, Connectors, BOT) as (client, _):
            bots = data(await client.call_tool("connectors", {}))
    assert sorted(c["slug"] for c in everyone["connectors"]) == ["api", "open", "vault"]
    assert [c["slug"] for c in bots["connectors"]] == ["open"]


async def test_discover_ranks_within_its_bounds(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, alone(h, Discover) as (client, _):
        found = data(await client.call_tool("discover", {"query": "fetch one item by id"}))
        one = data(await client.call_tool("discover", {"query": "create", "connector": "open", "limit": 1}))
        too_many = await client.call_tool("discover", {"query": "x", "limit": 51})
        boolean = await client.call_tool("discover", {"query": "x", "limit": True})
        as_text = data(await client.call_tool("discover", {"query": "create", "connector": "open", "limit": "1"}))
        empty = await client.call_tool("discover", {"query": ""})
    assert found["results"][0]["name"] == "api.items.get"
    assert [r["name"] for r in one["results"]] == ["open.things.create"]
    assert too_many.is_error and "limit" in too_many.content[0].text  # type: ignore[union-attr]
    assert boolean.is_error and "limit must be a whole number" in boolean.content[0].text  # type: ignore[union-attr]
    # The bounds are JSON Schema's words, which clients and models read ("ge"/"le" are pydantic's).
    async with harness(tmp_path) as h, alone(h, Discover) as (client, _):
        limit = (await client.list_tools()).tools[0].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (1, 50) and "ge" not in limit and "le" not in limit
    assert len(as_text["results"]) == 1  # a number written as text is still taken
    assert "query must not be empty" in empty.content[0].text  # type: ignore[union-attr]

    # 1e999 in the request's JSON parses as infinity
    from pydantic import BaseModel, Field, ValidationError

    from mcp_gateway.server.argument_errors import plain_argument_errors

    class Args(BaseModel):
        limit: int

    with pytest.raises(ValidationError) as raised:
        Args.model_validate_json('{"limit": 1e999}')
    assert (
        plain_argument_errors("discover", raised.value)
        == "invalid arguments for discover: limit must be a finite number"
    )

    class Wait(BaseModel):  # NaN fails every bound: it is named for what it is, not for the bound
        wait: float = Field(ge=0.0)

    with pytest.raises(ValidationError) as raised:
        Wait.model_validate_json('{"wait": NaN}')
    assert plain_argument_errors("call", raised.value) == "invalid arguments for call: wait must be a finite number"


async def test_describe_gives_the_schema_or_suggestions(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, alone(h, Describe) as (client, _):
        known = data(await client.call_tool("describe", {"tool": "api.items.get"}))
        typo = await client.call_tool("describe", {"tool": "api.item.gett"})
    assert known["input_schema"]["required"] == ["id"]
    assert typo.is_error
    assert "api.items.get" in json.dumps(data(typo))


async def test_call_answers_each_status_and_marks_errors(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, alone(h, Call) as (client, _):
        ok = await client.call_tool("call", {"tool": "api.items.get", "args": {"id": "7"}, "fields": ["path"]})
        pending = await client.call_tool("call", {"tool": "api.items.create", "args": {"name": "x"}})
        denied = await client.call_tool("call", {"tool": "api.admin.purge"})
    assert (data(ok), ok.is_error) == ({"status": "ok", "http_status": 200, "data": {"path": "/items/7"}}, False)
    assert data(pending)["status"] == "pending_approval" and data(pending)["approval_url"] and not pending.is_error
    assert data(denied)["reason"] == "policy_block" and denied.is_error


async def test_a_misspelled_parameter_is_refused_with_the_one_it_may_mean(tmp_path: Path) -> None:
    # The SDK dropped unknown keys: `call` with "arguments" (MCP's own word) for "args" ran the action
    # with no arguments at all, and answered ok.
    async with harness(tmp_path) as h, alone(h, Call) as (client, _):
        misnamed = await client.call_tool("call", {"tool": "api.items.get", "arguments": {"id": "7"}})
        camel = await client.call_tool("call", {"tool": "api.items.get", "args": {"id": "7"}, "approvalId": "apr_x"})
        many = await client.call_tool("call", {"tool": "api.items.get", **{f"k{i}": i for i in range(9)}})
        right = await client.call_tool("call", {"tool": "api.items.get", "args": {"id": "7"}})
    text = misnamed.content[0].text  # type: ignore[union-attr]
    assert misnamed.is_error and "'arguments' is not a parameter of this tool (did you mean args?)" in text
    assert "Its parameters: tool, args, approval_id, fields, wait" in text
    assert camel.is_error and "(did you mean approval_id?)" in camel.content[0].text  # type: ignore[union-attr]
    assert "(and 4 more)" in many.content[0].text  # type: ignore[union-attr]
    assert [r.url.path for r in h.upstream.requests] == ["/items/7"]  # only the well-named call was sent
    assert data(right)["status"] == "ok"


async def test_call_refuses_past_the_sessions_cap_before_the_gateway(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        async with alone(h, Call) as (client, _):
            h.gateway.bounds.calls.limit = 0
            refused = await client.call_tool("call", {"tool": "api.items.get", "args": {"id": "1"}})
        await h.auditor.flush()
        assert await h.store.list_audit(10) == []  # refused at the door: the gateway never saw the call
    assert data(refused)["reason"] == "rate_limited" and refused.is_error
    assert h.upstream.requests == []


async def test_connect_hands_out_a_link_for_a_missing_credential(tmp_path: Path) -> None:
    async with harness(tmp_path, secret=None) as h, alone(h, Connect) as (client, _):
        link = data(await client.call_tool("connect", {"connector": "api"}))
        open_ = data(await client.call_tool("connect", {"connector": "open"}))
        unknown = await client.call_tool("connect", {"connector": "nosuch"})
    assert link["connect_url"].startswith("http://pages.test/")
    assert open_["message"] == "open needs no credentials."
    assert unknown.is_error


async def test_request_secret_hands_out_a_link_for_a_named_secret(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, alone(h, RequestSecret) as (client, _):
        link = data(await client.call_tool("request_secret", {"connector": "api", "name": "webhook_key"}))
        bad = await client.call_tool("request_secret", {"connector": "api", "name": "no spaces"})
    assert link["secret_url"].startswith("http://pages.test/") and link["name"] == "webhook_key"
    assert bad.is_error and "name" in bad.content[0].text  # type: ignore[union-attr]


def test_the_principal_is_the_requests_else_the_default() -> None:
    carried = Principal(user="token:abc", agent="bot")
    http = SimpleNamespace(request=SimpleNamespace(scope={PRINCIPAL_SCOPE_KEY: carried}))
    no_principal = SimpleNamespace(request=SimpleNamespace(scope={}))
    stdio = SimpleNamespace(request=None)
    assert principal_of_request(http, OPERATOR) is carried  # type: ignore[arg-type]
    assert principal_of_request(no_principal, OPERATOR) is OPERATOR  # type: ignore[arg-type]
    assert principal_of_request(stdio, BOT) is BOT  # type: ignore[arg-type]


async def test_observed_counts_the_tool_and_answers_an_outage(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        tool = Connectors(h.gateway, HumanElicitation(h.gateway), default_principal=OPERATOR)

        async def outage(*args: Any, **kwargs: Any) -> CallToolResult:
            raise StoreUnavailable("the SQLite database test.db cannot be used (disk I/O error)")

        answer = await tool.observed(outage)()
        assert isinstance(answer, CallToolResult) and answer.is_error
        assert data(answer)["reason"] == "store_unavailable"
        counted = h.gateway.metrics.registry.get_sample_value("mcp_gateway_tool_requests_total", {"tool": "connectors"})
        assert counted == 1


@pytest.mark.parametrize("fast_paths", [True, False])
async def test_the_server_serves_the_six_with_the_fast_path_on_or_off(tmp_path: Path, fast_paths: bool) -> None:
    async with harness(tmp_path) as h:
        server = build_mcp_server(h.gateway, default_principal=OPERATOR, fast_paths=fast_paths)
        lookup = server._lowlevel_server.get_tool_input_schema
        assert lookup is not None
        # On: the meta-tools declare no Mcp-Param header, so the SDK is handed no schema to walk.
        # Off: the SDK's own lookup, every tool's schema.
        assert (lookup("call") is None) is fast_paths
        async with Client(server) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            ok = await client.call_tool("call", {"tool": "api.items.get", "args": {"id": "1"}})
    assert sorted(names) == sorted(t.name for t in META_TOOLS)
    assert data(ok)["status"] == "ok"


async def test_a_secret_name_with_characters_it_may_not_hold_is_said_in_words(tmp_path: Path) -> None:
    async with harness(tmp_path) as h, alone(h, RequestSecret) as (client, _):
        refused = await client.call_tool("request_secret", {"connector": "api", "name": "my key!"})
    text = refused.content[0].text  # type: ignore[union-attr]
    assert refused.is_error and "name may hold only letters, digits, '_', '.' and '-'" in text
    assert "String should match pattern" not in text and "^[" not in text
