"""Approvals end to end: the page, the retry rules, concurrent retries across two gateway processes,
``wait`` woken by the page and by the CLI, and ``mcp-gateway approvals list|approve|deny``.

The gateway runs as subprocesses over streamable HTTP (and stdio for one flow), the agent is the
MCP SDK client, the human is plain HTTP on the approval page or the CLI, and the upstream is a
real loopback server that records every request it gets.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.support.env import child_env
from tests.support.pages import csrf, get, post
from tests.support.upstream import EchoApp, LoopbackServer

from .conftest import MASTER_KEY, GatewayEnv, HttpGateway, free_port, http_client, structured

pytestmark = pytest.mark.anyio

WEBHOOK_SECRET = "whsec-approval-page-0042"

MANIFEST = """
project: approvals-e2e
public_url: http://127.0.0.1:{pages_port}
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
                events: {{type: array, items: {{type: string}}}}
          - path: webhooks.list
            method: GET
            url: /webhooks
            summary: List webhooks
agents:
  - name: bot
    connectors: [hooks]
"""
ARGS = {"url": "https://example.test/hook", "secret": WEBHOOK_SECRET, "events": ["push"]}
CALL = {"tool": "hooks.webhooks.create", "args": ARGS}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[GatewayEnv]:
    upstream = EchoApp()
    with LoopbackServer(upstream) as server:
        pages_port = free_port()
        manifest = tmp_path / "approvals.yaml"
        manifest.write_text(MANIFEST.format(pages_port=pages_port, upstream=server.base_url))
        environ = child_env() | {
            "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
            "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
            "PYTHONUNBUFFERED": "1",
        }
        gw = GatewayEnv(tmp_path, manifest, tmp_path / "state", upstream, server.base_url, pages_port, environ)
        gw.cli("secret", "set", "hooks", input="upstream-bearer-token")
        yield gw


def posts(env: GatewayEnv) -> int:
    return sum(1 for r in env.upstream.requests if r.method == "POST")


async def test_the_page_shows_the_call_and_decides_it_once(env: GatewayEnv) -> None:
    server = HttpGateway(env, env.root / "gateway.log")
    try:
        token = env.cli("token", "create", "--agent", "bot").stdout.strip()
        token_id = json.loads(env.cli("token", "list", "--json").stdout)[0]["id"]
        async with http_client(server.url, token) as client:
            pending = structured(await client.call_tool("call", CALL))
            assert pending["status"] == "pending_approval", pending
            assert WEBHOOK_SECRET not in json.dumps(pending)
            url = pending["approval_url"]
            assert url.startswith(f"{server.url}/approvals/")

            page = await get(url)
            assert page.status_code == 200
            html = page.text
            # Who asks: the agent, with the static token's id as a detail, never as the subject.
            assert "the agent <strong>bot</strong>" in html and f"static token <code>{token_id}</code>" in html
            assert f"<strong>token:{token_id}" not in html
            assert "hooks.webhooks.create" in html and 'class="badge write"' in html  # what, and its risk
            assert "by default every write or delete needs a human&#39;s approval" in html  # why
            assert "https://example.test/hook" in html and "[redacted]" in html  # the redacted arguments
            assert WEBHOOK_SECRET not in html
            assert 'value="approve"' in html and 'value="deny"' in html and "<script" not in html
            assert page.headers["cache-control"] == "no-store" and page.headers["x-frame-options"] == "DENY"

            # A forged form, or one posted from another site, changes nothing.
            assert (await post(url, {"csrf": "0" * 64, "decision": "approve"})).status_code == 403
            cross = await post(url, {"csrf": csrf(html), "decision": "approve"}, Origin="https://evil.example")
            assert cross.status_code == 403
            still = structured(await client.call_tool("call", {**CALL, "approval_id": pending["approval_id"]}))
            assert still["status"] == "pending_approval"

            approved = await post(url, {"csrf": csrf(html), "decision": "approve"})
            assert approved.status_code == 200 and "Approved" in approved.text
            late = await post(url, {"csrf": csrf(html), "decision": "deny"})  # the link is spent: nothing changes
            assert late.status_code == 409 and "This call was already approved." in late.text
            again = await get(url)  # opened again, it says what was decided rather than "ask for a new one"
            assert again.status_code == 200 and "This call was already approved." in again.text

            other = {**ARGS, "events": ["push", "pull"]}
            mismatch = await client.call_tool(
                "call", {"tool": CALL["tool"], "args": other, "approval_id": pending["approval_id"]}
            )
            assert mismatch.is_error and structured(mismatch)["reason"] == "approval_mismatch"
            ran = structured(await client.call_tool("call", {**CALL, "approval_id": pending["approval_id"]}))
            assert ran["status"] == "ok", ran
            again = structured(await client.call_tool("call", {**CALL, "approval_id": pending["approval_id"]}))
            assert again["reason"] == "approval_mismatch"
            assert posts(env) == 1
            assert env.upstream.requests[-1].json()["secret"] == WEBHOOK_SECRET  # the real value went upstream

            # Denied: final.
            second = structured(await client.call_tool("call", CALL))
            page = await get(second["approval_url"])
            denied_page = await post(second["approval_url"], {"csrf": csrf(page.text), "decision": "deny"})
            assert "Denied" in denied_page.text
            denied = structured(await client.call_tool("call", {**CALL, "approval_id": second["approval_id"]}))
            assert (denied["status"], denied["reason"], denied["source"]) == (
                "denied",
                "approval_denied",
                "risk_default",
            )

            # Expired: as if fifteen minutes passed (the row's expiry moved into the past).
            third = structured(await client.call_tool("call", CALL))
            with sqlite3.connect(env.state_dir / "state.db") as db:
                db.execute(
                    "UPDATE approval SET expires_at = '2000-01-01T00:00:00.000000Z' WHERE id = ?",
                    (third["approval_id"],),
                )
            expired_page = await get(third["approval_url"])
            assert "Expired" in expired_page.text
            expired = structured(await client.call_tool("call", {**CALL, "approval_id": third["approval_id"]}))
            assert expired["reason"] == "approval_expired"
            assert posts(env) == 1
    finally:
        server.stop()
    assert WEBHOOK_SECRET not in (env.root / "gateway.log").read_text()


async def test_concurrent_retries_across_two_gateway_processes_run_once(env: GatewayEnv) -> None:
    """Twelve retries with one approval id at once, half through each of two gateway processes on
    the same database: the compare-and-set in the store lets exactly one reach the upstream."""
    token = env.cli("token", "create", "--agent", "bot").stdout.strip()
    first = HttpGateway(env, env.root / "gateway-a.log")
    second = HttpGateway(env, env.root / "gateway-b.log")
    try:
        async with http_client(first.url, token) as a, http_client(second.url, token) as b:
            pending = structured(await a.call_tool("call", CALL))
            page = await get(pending["approval_url"])
            await post(pending["approval_url"], {"csrf": csrf(page.text), "decision": "approve"})
            results: list[dict[str, Any]] = []

            async def retry(client: Client) -> None:
                results.append(
                    structured(await client.call_tool("call", {**CALL, "approval_id": pending["approval_id"]}))
                )

            async with anyio.create_task_group() as tg:
                for i in range(12):
                    tg.start_soon(retry, a if i % 2 else b)
        assert sorted(r["status"] for r in results) == ["denied"] * 11 + ["ok"], results
        assert {r.get("reason") for r in results if r["status"] == "denied"} == {"approval_mismatch"}
        assert posts(env) == 1
    finally:
        first.stop()
        second.stop()


async def test_wait_returns_as_soon_as_the_page_decides(env: GatewayEnv) -> None:
    server = HttpGateway(env, env.root / "gateway.log")
    try:
        token = env.cli("token", "create", "--agent", "bot").stdout.strip()
        async with http_client(server.url, token) as client:
            pending = structured(await client.call_tool("call", CALL))
            page = await get(pending["approval_url"])
            results: list[dict[str, Any]] = []

            async def waiting_retry() -> None:
                args = {**CALL, "approval_id": pending["approval_id"], "wait": 60}
                results.append(structured(await client.call_tool("call", args)))

            async with anyio.create_task_group() as tg:
                tg.start_soon(waiting_retry)
                await anyio.sleep(1.0)
                assert results == []  # blocked on the human
                decided_at = time.monotonic()
                await post(pending["approval_url"], {"csrf": csrf(page.text), "decision": "approve"})
            [result] = results
            assert result["status"] == "ok", result
            assert time.monotonic() - decided_at < 3  # woken by the decision, not by the 60 s bound
            assert posts(env) == 1

            # Nobody decides: after the wait, the same pending answer as without it.
            started = time.monotonic()
            unanswered = structured(await client.call_tool("call", {**CALL, "args": {**ARGS, "url": "x"}, "wait": 1}))
            assert unanswered["status"] == "pending_approval" and 1 <= time.monotonic() - started < 10
    finally:
        server.stop()


async def test_a_stopping_gateway_answers_a_waiting_call_and_logs_only_json(env: GatewayEnv) -> None:
    # SIGTERM while a call sleeps on its approval: the agent gets pending_approval (the approval holds for a
    # retry once the gateway is back), not a bare error after the graceful shutdown cancelled it; and what
    # the HTTP server itself logs (a garbled request here) is one JSON object a line like the rest.
    server = HttpGateway(env, env.root / "gateway.log", "--log-format", "json")
    try:
        token = env.cli("token", "create", "--agent", "bot").stdout.strip()
        with socket.create_connection(("127.0.0.1", server.port)) as garbled:
            garbled.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            garbled.recv(1024)
        async with http_client(server.url, token) as client:
            pending = structured(await client.call_tool("call", CALL))
            results: list[dict[str, Any]] = []

            async def waiting_retry() -> None:
                args = {**CALL, "approval_id": pending["approval_id"], "wait": 60}
                results.append(structured(await client.call_tool("call", args)))

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(waiting_retry)
                    await anyio.sleep(1.0)
                    assert results == []  # blocked on the human
                    server.proc.terminate()
        [result] = results
        assert result["status"] == "pending_approval" and result["approval_id"] == pending["approval_id"], result
        assert server.proc.wait(timeout=30) == 0
    finally:
        server.stop()
    lines = server.log().splitlines()
    assert lines and all(line.startswith("{") and json.loads(line) for line in lines), lines
    assert any(json.loads(line)["logger"].startswith("uvicorn") for line in lines)
    assert posts(env) == 0


async def test_wait_sees_the_cli_decide_and_the_cli_lists_approvals(env: GatewayEnv) -> None:
    """stdio: the agent's call waits without knowing the approval id; the operator finds it with
    ``approvals list`` and decides from a terminal (another process)."""
    async with Client(env.stdio_params("--agent", "bot"), mode="legacy") as client:
        results: list[dict[str, Any]] = []

        async def waiting_call() -> None:
            results.append(structured(await client.call_tool("call", {**CALL, "wait": 60})))

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiting_call)
            for _ in range(200):  # until the waiting call has asked (read straight from the database)
                with sqlite3.connect(env.state_dir / "state.db") as db:
                    if db.execute("SELECT count(*) FROM approval").fetchone()[0]:
                        break
                await anyio.sleep(0.05)
            listed = json.loads((await anyio.to_thread.run_sync(env.cli, "approvals", "list", "--json")).stdout)
            [row] = listed
            assert (row["tool"], row["agent"], row["status"]) == ("hooks.webhooks.create", "bot", "pending")
            assert WEBHOOK_SECRET not in json.dumps(row)
            table = env.cli("approvals", "list").stdout
            assert row["id"] in table and "hooks.webhooks.create" in table
            decided = await anyio.to_thread.run_sync(env.cli, "approvals", "deny", row["id"])
            assert decided.stdout.strip() == f"{row['id']}: denied"
        [result] = results
        assert result["status"] == "denied" and result["reason"] == "approval_denied", result
        assert posts(env) == 0

        again = env.cli("approvals", "approve", row["id"], check=False)
        assert again.returncode == 2 and "is not pending" in again.stderr
        assert json.loads(env.cli("approvals", "list", "--json").stdout) == []
        everything = json.loads(env.cli("approvals", "list", "--all", "--json").stdout)
        assert [r["status"] for r in everything] == ["denied"]

        # The same call approved from the terminal runs once.
        pending = structured(await client.call_tool("call", CALL))
        env.cli("approvals", "approve", pending["approval_id"])
        ran = structured(await client.call_tool("call", {**CALL, "approval_id": pending["approval_id"], "wait": 5}))
        assert ran["status"] == "ok", ran
        assert posts(env) == 1


async def test_approval_page_in_stdio_mode(env: GatewayEnv) -> None:
    async with Client(env.stdio_params("--agent", "bot"), mode="legacy") as client:
        pending = structured(await client.call_tool("call", CALL))
        assert pending["approval_url"].startswith(f"http://127.0.0.1:{env.pages_port}/approvals/")
        page = await get(pending["approval_url"])
        assert page.status_code == 200 and "hooks.webhooks.create" in page.text
        done = await post(pending["approval_url"], {"csrf": csrf(page.text), "decision": "approve"})
        assert "Approved" in done.text
        ran = structured(await client.call_tool("call", {**CALL, "approval_id": pending["approval_id"]}))
        assert ran["status"] == "ok", ran
    assert posts(env) == 1
