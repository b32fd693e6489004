"""MCP URL-mode elicitation (issue 3, item 4) with the real SDK client against the gateway subprocess.

2025-11-25 (mode="legacy"): the link arrives as an ``elicitation/create`` URL request and, once the
human completes the page, as a ``notifications/elicitation/complete`` for the same id.
2026-07-28: the tool answers an ``InputRequiredResult``; the client's driver hands the URL to the
elicitation callback (where the test plays the human) and its retry gets the final result.
A client that declares no elicitation gets the plain link results.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
    ElicitCompleteNotification,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)

from .conftest import SECRETS, GatewayEnv, HttpGateway, structured

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
PAGE_SECRET = "elicited-secret-value-7391"
"""Typed into a page by the 'human'; must appear in no elicitation, requestState or result."""


async def _complete_page(url: str, data: dict[str, str]) -> None:
    """Play the human: open the page, then submit its form with the page's CSRF token."""
    async with httpx2.AsyncClient() as http:
        for _ in range(100):  # the stdio page server starts when the first link is minted
            try:
                page = await http.get(url)
                break
            except httpx2.ConnectError:
                await anyio.sleep(0.05)
        else:
            raise AssertionError(f"nothing serves {url}")
        assert page.status_code == 200, page.text
        match = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert match, page.text
        done = await http.post(url, data={"csrf": match.group(1), **data})
        assert done.status_code == 200, done.text


class Human:
    """The client-side human: records URL elicitations and completion notices; optionally completes
    each page from inside the elicitation callback (what a 2026-07-28 client waits for)."""

    def __init__(self, form: dict[str, str] | None = None, action: str = "accept") -> None:
        self.form = form
        self.action = action
        self.asked: list[ElicitRequestURLParams] = []
        self.completed: list[str] = []
        self.was_asked = anyio.Event()
        self._notice = anyio.Event()

    async def elicit(self, _context: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams), params
        self.asked.append(params)
        self.was_asked.set()
        if self.form is not None and self.action == "accept":
            await _complete_page(params.url, self.form)
        return ElicitResult(action=self.action)  # type: ignore[arg-type]

    async def on_message(self, message: Any) -> None:
        if isinstance(message, ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)
            self._notice.set()

    async def completion(self, elicitation_id: str) -> None:
        with anyio.fail_after(15):
            while elicitation_id not in self.completed:
                await self._notice.wait()
                self._notice = anyio.Event()


@asynccontextmanager
async def http_client(url: str, token: str, mode: str, human: Human | None) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(
            streamable_http_client(f"{url}/mcp", http_client=http),
            mode=mode,
            elicitation_callback=human.elicit if human else None,
            message_handler=human.on_message if human else None,
        ) as client:
            yield client


def stdio_client(env: GatewayEnv, mode: str, human: Human | None) -> Client:
    return Client(
        env.stdio_params("--agent", "bot"),
        mode=mode,
        elicitation_callback=human.elicit if human else None,
        message_handler=human.on_message if human else None,
    )


def _token(env: GatewayEnv) -> str:
    return env.cli("token", "create", "--agent", "bot").stdout.strip()


def _creates(env: GatewayEnv) -> int:
    return sum(1 for r in env.upstream.requests if r.method == "POST" and r.path == "/items")


def _assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in (PAGE_SECRET, *SECRETS.values()):
            assert secret not in text
            assert base64.b64encode(secret.encode()).decode() not in text


# -- 2025-11-25: elicitation/create, then notifications/elicitation/complete -----------------------


async def _legacy_connect_and_secret(client: Client, human: Human) -> None:
    connected = structured(await client.call_tool("connect", {"connector": "bearer_api"}))
    assert connected["status"] == "link"  # the agent still gets the link
    (asked,) = human.asked
    assert asked.url == connected["connect_url"] and asked.mode == "url"
    assert "bearer_api" in asked.message and asked.elicitation_id
    assert human.completed == []  # nothing done yet
    await _complete_page(asked.url, {"secret": PAGE_SECRET})
    await human.completion(asked.elicitation_id)
    ok = structured(await client.call_tool("call", {"tool": "bearer_api.items.get", "args": {"id": "1"}}))
    assert ok["status"] == "ok"

    secret = structured(await client.call_tool("request_secret", {"connector": "header_key", "name": "default"}))
    second = human.asked[-1]
    assert second.url == secret["secret_url"] and second.elicitation_id != asked.elicitation_id
    await _complete_page(second.url, {"secret": PAGE_SECRET})
    await human.completion(second.elicitation_id)
    _assert_no_secret(*(a.model_dump_json() for a in human.asked), json.dumps(connected), json.dumps(secret))


async def test_legacy_connect_and_secret_over_http(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    human = Human()
    async with http_client(http_gateway.url, _token(gateway_env), "legacy", human) as client:
        await _legacy_connect_and_secret(client, human)


async def test_legacy_connect_and_secret_over_stdio(gateway_env: GatewayEnv) -> None:
    gateway_env.cli("sync", check=False)
    human = Human()
    async with stdio_client(gateway_env, "legacy", human) as client:
        await _legacy_connect_and_secret(client, human)


async def _legacy_approval(env: GatewayEnv, client: Client, human: Human) -> None:
    args = {"tool": "bearer_api.items.create", "args": {"name": "widget"}}
    pending = structured(await client.call_tool("call", args))
    assert pending["status"] == "pending_approval"
    (asked,) = human.asked
    assert asked.url == pending["approval_url"]
    assert "bearer_api.items.create" in asked.message and "approve" in asked.message
    assert _creates(env) == 0
    await _complete_page(asked.url, {"decision": "approve"})
    await human.completion(asked.elicitation_id)
    ran = structured(await client.call_tool("call", {**args, "approval_id": pending["approval_id"]}))
    assert ran["status"] == "ok" and _creates(env) == 1
    _assert_no_secret(asked.model_dump_json())


async def test_legacy_approval_over_http(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    gateway_env.set_secrets()
    human = Human()
    async with http_client(http_gateway.url, _token(gateway_env), "legacy", human) as client:
        await _legacy_approval(gateway_env, client, human)


async def test_legacy_approval_over_stdio(gateway_env: GatewayEnv) -> None:
    gateway_env.set_secrets()
    gateway_env.cli("sync", check=False)
    human = Human()
    async with stdio_client(gateway_env, "legacy", human) as client:
        await _legacy_approval(gateway_env, client, human)


async def test_legacy_wait_elicits_before_waiting(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    gateway_env.set_secrets()
    human = Human()

    async def approve_when_asked() -> None:
        with anyio.fail_after(15):
            await human.was_asked.wait()
        await _complete_page(human.asked[0].url, {"decision": "approve"})

    args = {"tool": "bearer_api.items.create", "args": {"name": "w"}, "wait": 60}
    async with http_client(http_gateway.url, _token(gateway_env), "legacy", human) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(approve_when_asked)
            with anyio.fail_after(30):  # far less than the wait: the human had the link while it ran
                result = structured(await client.call_tool("call", args))
        await human.completion(human.asked[0].elicitation_id)
    assert result["status"] == "ok", result
    assert _creates(gateway_env) == 1


async def test_legacy_declined_elicitation_sends_no_completion(
    gateway_env: GatewayEnv, http_gateway: HttpGateway
) -> None:
    human = Human(action="decline")
    async with http_client(http_gateway.url, _token(gateway_env), "legacy", human) as client:
        connected = structured(await client.call_tool("connect", {"connector": "bearer_api"}))
        assert connected["status"] == "link" and len(human.asked) == 1
        await _complete_page(connected["connect_url"], {"secret": PAGE_SECRET})
        await anyio.sleep(1.5)  # three watcher polls' worth
    assert human.completed == []


# -- 2026-07-28: InputRequiredResult, answered by the client's retry ------------------------------


async def test_modern_approval_runs_once_on_retry(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    gateway_env.set_secrets()
    human = Human(form={"decision": "approve"})
    async with http_client(http_gateway.url, _token(gateway_env), MODERN, human) as client:
        result = structured(await client.call_tool("call", {"tool": "bearer_api.items.create", "args": {"name": "w"}}))
    assert result["status"] == "ok", result
    (asked,) = human.asked
    assert "/approvals/" in asked.url and "bearer_api.items.create" in asked.message
    assert _creates(gateway_env) == 1


async def test_modern_denied_approval_is_final(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    gateway_env.set_secrets()
    human = Human(form={"decision": "deny"})
    async with http_client(http_gateway.url, _token(gateway_env), MODERN, human) as client:
        result = structured(await client.call_tool("call", {"tool": "bearer_api.items.create", "args": {"name": "w"}}))
    assert result["status"] == "denied" and result["reason"] == "approval_denied"
    assert _creates(gateway_env) == 0


async def test_modern_connect_and_secret_over_http(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    human = Human(form={"secret": PAGE_SECRET})
    async with http_client(http_gateway.url, _token(gateway_env), MODERN, human) as client:
        connected = structured(await client.call_tool("connect", {"connector": "bearer_api"}))
        assert connected["status"] == "ok" and "connected" in connected["message"]
        ok = structured(await client.call_tool("call", {"tool": "bearer_api.items.get", "args": {"id": "1"}}))
        assert ok["status"] == "ok"
        assert gateway_env.upstream.requests[-1].headers["authorization"] == f"Bearer {PAGE_SECRET}"
        stored = structured(await client.call_tool("request_secret", {"connector": "header_key"}))
        assert stored["status"] == "ok"
        # A call that needs auth: the connect link is elicited, and the retried call runs.
        ran = structured(await client.call_tool("call", {"tool": "custom_api.items.get", "args": {"id": "2"}}))
        assert ran["status"] == "ok", ran
    assert len(human.asked) == 3
    _assert_no_secret(*(a.model_dump_json() for a in human.asked), json.dumps([connected, ok, stored, ran]))


async def test_modern_over_stdio(gateway_env: GatewayEnv) -> None:
    gateway_env.set_secrets()
    gateway_env.cli("sync", check=False)
    human = Human(form={"decision": "approve"})
    async with stdio_client(gateway_env, MODERN, human) as client:
        result = structured(await client.call_tool("call", {"tool": "bearer_api.items.create", "args": {"name": "w"}}))
    assert result["status"] == "ok" and _creates(gateway_env) == 1


async def test_modern_human_not_done_gets_the_link(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    human = Human()  # accepts but completes nothing
    async with http_client(http_gateway.url, _token(gateway_env), MODERN, human) as client:
        result = structured(await client.call_tool("connect", {"connector": "bearer_api"}))
    assert result["status"] == "link" and result["connect_url"] == human.asked[0].url


async def _first_round(client: Client, name: str, arguments: dict[str, Any]) -> InputRequiredResult:
    first = await client.session.call_tool(name, arguments, allow_input_required=True)
    assert isinstance(first, InputRequiredResult), first
    assert first.request_state and first.input_requests
    return first


async def test_modern_request_state_is_sealed_single_use_and_bound(
    gateway_env: GatewayEnv, http_gateway: HttpGateway
) -> None:
    gateway_env.set_secrets()
    token = _token(gateway_env)
    accepted = {"human": ElicitResult(action="accept")}
    args = {"tool": "bearer_api.items.create", "args": {"name": "w"}}
    async with http_client(http_gateway.url, token, MODERN, Human()) as client:
        first = await _first_round(client, "call", args)
        state = first.request_state
        assert state is not None
        request = first.input_requests["human"]  # type: ignore[index]
        url = request.params.url  # type: ignore[union-attr]
        # Encrypted: neither the link nor any identifier of it can be read from the state.
        assert url.rsplit("/", 1)[-1] not in state and "approval" not in state and "widget" not in state
        _assert_no_secret(state, first.model_dump_json())

        tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        with pytest.raises(MCPError) as refused:
            await client.session.call_tool("call", args, input_responses=accepted, request_state=tampered)
        assert "requestState" in refused.value.error.message
        with pytest.raises(MCPError):  # bound to the arguments: not valid for another call
            await client.session.call_tool(
                "call", {**args, "args": {"name": "other"}}, input_responses=accepted, request_state=state
            )
        with pytest.raises(MCPError):  # bound to the tool
            await client.session.call_tool("connect", {"connector": "x"}, input_responses=accepted, request_state=state)

        await _complete_page(url, {"decision": "approve"})
        done = await client.session.call_tool("call", args, input_responses=accepted, request_state=state)
        assert isinstance(done, CallToolResult) and structured(done)["status"] == "ok"
        with pytest.raises(MCPError) as replayed:
            await client.session.call_tool("call", args, input_responses=accepted, request_state=state)
        assert "already used" in replayed.value.error.message
    assert _creates(gateway_env) == 1

    # Bound to the principal: each token is its own principal, so another token cannot use it.
    connect = {"connector": "bearer_api"}
    async with http_client(http_gateway.url, token, MODERN, Human()) as client:
        fresh = await _first_round(client, "connect", connect)
    async with http_client(http_gateway.url, _token(gateway_env), MODERN, Human()) as client:
        with pytest.raises(MCPError) as foreign:
            await client.session.call_tool(
                "connect", connect, input_responses=accepted, request_state=fresh.request_state
            )
        assert "requestState" in foreign.value.error.message
    # ...while its own principal still can (a new connection: stateless retries may land anywhere).
    async with http_client(http_gateway.url, token, MODERN, Human()) as client:
        mine = await client.session.call_tool(
            "connect", connect, input_responses=accepted, request_state=fresh.request_state
        )
        assert isinstance(mine, CallToolResult) and structured(mine)["status"] == "link"  # human not done yet


async def test_modern_state_verifies_after_a_restart(gateway_env: GatewayEnv, http_gateway: HttpGateway) -> None:
    """The request-state key is derived from the master key, so a retry may land on a restarted gateway."""
    token = _token(gateway_env)
    connect = {"connector": "bearer_api"}
    async with http_client(http_gateway.url, token, MODERN, Human()) as client:
        first = await _first_round(client, "connect", connect)
    http_gateway.stop()
    again = HttpGateway(gateway_env, gateway_env.root / "restarted.log")
    try:
        async with http_client(again.url, token, MODERN, Human()) as client:
            retried = await client.session.call_tool(
                "connect",
                connect,
                input_responses={"human": ElicitResult(action="accept")},
                request_state=first.request_state,
            )
    finally:
        again.stop()
    assert isinstance(retried, CallToolResult) and structured(retried)["status"] == "link"


# -- no capability: plain links, as before ---------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_without_capability_links_are_plain(
    mode: str, gateway_env: GatewayEnv, http_gateway: HttpGateway
) -> None:
    gateway_env.set_secrets()
    async with http_client(http_gateway.url, _token(gateway_env), mode, None) as client:
        connected = structured(await client.call_tool("connect", {"connector": "bearer_api"}))
        secret = structured(await client.call_tool("request_secret", {"connector": "header_key"}))
        pending = structured(await client.call_tool("call", {"tool": "bearer_api.items.create", "args": {"name": "w"}}))
    assert connected["status"] == secret["status"] == "link"
    assert pending["status"] == "pending_approval" and pending["approval_url"]
