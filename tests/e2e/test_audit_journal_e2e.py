"""No answer without a durable record, across an outage: two gateway instances on one PostgreSQL
database, agents calling both over HTTP, and the database's network cut exactly while calls on both
instances are between the upstream's answer and their outcome write.

Real components throughout: two ``mcp-gateway serve`` processes (each its own state folder), the
session's throwaway PostgreSQL cluster reached through a TCP proxy on loopback that the test cuts
(``tests/support/tcp_proxy.py``), a real upstream whose handler makes the cut once a call from each
instance is in it. The outage outlasts the retry window, so both instances journal outcome rows and
answer ``ok``; instance B is then killed (``SIGKILL``) with its journal unreplayed, the network comes
back, A replays its journal while it runs and B replays its own when it starts again, before its
recovery pass. Every call answered ``ok`` then has exactly one outcome row, and none is
``interrupted``. Neither the database password nor the upstream credential shows in a log or journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.support.env import child_env
from tests.support.mcp_http import message, open_session
from tests.support.postgres import PostgresCluster
from tests.support.tcp_proxy import CuttableProxy
from tests.support.upstream import EchoApp, LoopbackServer, Receive, Scope, Send

from .conftest import MASTER_KEY, GatewayEnv, HttpGateway, free_port

pytestmark = pytest.mark.anyio

DB_PASSWORD = "CANARY-journal-db-password-7731"
UPSTREAM_TOKEN = "CANARY-journal-bearer-4410"
RETRY_SECONDS = 0.5
OUTAGE_SECONDS = 2.0
WORKERS = 2  # per instance
MANIFEST = """
project: journal-e2e
connectors:
  - slug: api
    base_url: {upstream}
    auth: {{type: bearer}}
    source:
      http:
        actions:
          - path: items.get
            method: GET
            url: /items/{{id}}
            summary: Fetch one item by its id
            input_schema: {{type: object, required: [id], properties: {{id: {{type: string}}}}}}
agents:
  - name: bot
    connectors: [api]
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class CutWhenBothAreIn:
    """The upstream: the first time a call from each instance is in its handler (ids ``a-…`` and
    ``b-…``), it cuts the database's network, then answers them all: both instances' calls are then
    between the upstream's answer and their outcome write."""

    def __init__(self, echo: EchoApp, proxy: CuttableProxy) -> None:
        self.echo = echo
        self.proxy = proxy
        self.inside = {"a": 0, "b": 0}
        self.cut_at: float | None = None
        self._cut: asyncio.Event | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path.startswith("/items/") and self.cut_at is None:
            side = path.rsplit("/", 1)[1][:1]
            cut = self._cut = self._cut or asyncio.Event()
            self.inside[side] = self.inside.get(side, 0) + 1
            if self.inside["a"] and self.inside["b"]:
                await asyncio.to_thread(self.proxy.cut)
                self.cut_at = time.monotonic()
                cut.set()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(cut.wait(), 5)
        await self.echo(scope, receive, send)


def _instance(root: Path, name: str, manifest: Path, upstream: EchoApp, url: str, database_url: str) -> GatewayEnv:
    state = root / name
    environ = child_env() | {
        "MCP_GATEWAY_STATE_DIR": str(state),
        "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
        "MCP_GATEWAY_DATABASE_URL": database_url,
        "MCP_GATEWAY_AUDIT_RETRY_SECONDS": str(RETRY_SECONDS),
        "PYTHONUNBUFFERED": "1",
    }
    return GatewayEnv(root, manifest, state, upstream, url, free_port(), environ)


@pytest.fixture
def proxy(postgres_cluster: PostgresCluster) -> Iterator[CuttableProxy]:
    with CuttableProxy(postgres_cluster.port) as p:
        yield p


def _journaling(env: GatewayEnv) -> bool:
    """Rows wait in the instance's journal (or in a replay of it)."""
    return any(env.state_dir.glob("audit-journal*.jsonl"))


async def _until(condition: Callable[[], bool], within: float) -> None:
    with anyio.fail_after(within):
        while not condition():  # noqa: ASYNC110 - other processes change what it looks at
            await anyio.sleep(0.02)


def _status(response: httpx2.Response) -> str:
    if response.status_code != 200:
        return f"http:{response.status_code}"
    payload = (message(response).get("result") or {}).get("structuredContent") or {}
    return str(payload.get("status"))


async def test_every_ok_answer_has_one_outcome_row_after_an_outage(
    tmp_path: Path, postgres_cluster: PostgresCluster, postgres_url: str, proxy: CuttableProxy
) -> None:
    database = postgres_url.rsplit("/", 1)[1]
    direct = postgres_url.replace("postgresql://postgres@", f"postgresql://postgres:{DB_PASSWORD}@")
    through_proxy = direct.replace(f":{postgres_cluster.port}/", f":{proxy.port}/")
    echo = EchoApp()
    upstream = CutWhenBothAreIn(echo, proxy)
    answers: list[tuple[str, str]] = []  # (the call's id argument, what the agent got)
    with LoopbackServer(upstream) as server:
        manifest = tmp_path / "gateway.yaml"
        manifest.write_text(MANIFEST.format(upstream=server.base_url))
        env_a, env_b, cli = (
            _instance(tmp_path, name, manifest, echo, server.base_url, url)
            for name, url in (("a", through_proxy), ("b", through_proxy), ("cli", direct))
        )
        cli.cli("secret", "set", "api", input=UPSTREAM_TOKEN)
        token = cli.cli("token", "create", "--agent", "bot").stdout.strip()
        gateways: dict[str, HttpGateway] = {}

        def start(name: str, env: GatewayEnv) -> None:
            gateways[name] = HttpGateway(env, tmp_path / f"gateway-{name}.log")

        async with anyio.create_task_group() as starting:  # two slow process starts, side by side
            starting.start_soon(anyio.to_thread.run_sync, start, "a", env_a)
            starting.start_soon(anyio.to_thread.run_sync, start, "b", env_b)
        a, b = gateways["a"], gateways["b"]
        stop = {"a": anyio.Event(), "b": anyio.Event()}
        try:

            async def agent(side: str, url: str, n: int) -> None:
                async with httpx2.AsyncClient(timeout=30) as http:
                    auth = await open_session(http, url, token)
                    i = 0
                    while not stop[side].is_set():
                        i += 1
                        call_id = f"{side}-{n}-{i}"
                        arguments = {"tool": "api.items.get", "args": {"id": call_id}}
                        call = {
                            "jsonrpc": "2.0",
                            "id": i,
                            "method": "tools/call",
                            "params": {"name": "call", "arguments": arguments},
                        }
                        try:
                            response = await http.post(f"{url}/mcp", json=call, headers=auth)
                        except httpx2.HTTPError:
                            answers.append((call_id, "gone"))  # instance B, killed
                            return
                        answers.append((call_id, _status(response)))
                        await anyio.sleep(0.02)

            async with anyio.create_task_group() as tg:
                for n in range(WORKERS):
                    tg.start_soon(agent, "a", a.url, n)
                    tg.start_soon(agent, "b", b.url, n)
                await _until(lambda: upstream.cut_at is not None, 20)
                # B journals the outcomes it could not commit (after the retry window), then dies.
                await _until(lambda: _journaling(env_b), 10)
                await anyio.sleep(0.3)  # its answers go out
                b.proc.kill()
                b.proc.wait()
                stop["b"].set()
                # The journal, and the file a replay tried while the store was still down moved it to.
                journaled = "".join(p.read_text() for p in sorted(env_b.state_dir.glob("audit-journal*.jsonl")))
                await anyio.sleep(max(0.0, upstream.cut_at + OUTAGE_SECONDS - time.monotonic()))
                proxy.restore()  # A's calls commit again, which starts its replay
                # B starts again on its state folder, while A serves: it replays its journal before
                # it marks calls interrupted (A's calls in flight among them: their outcomes win).
                await anyio.to_thread.run_sync(start, "b2", env_b)
                stop["a"].set()
            await _until(lambda: not _journaling(env_a) and not _journaling(env_b), 15)
            async with httpx2.AsyncClient() as http:
                for _ in range(20):  # the flag drops just after the replay removed the file
                    health = (await http.get(f"{a.url}/healthz")).json()
                    if not health["audit_journal_pending"]:
                        break
                    await anyio.sleep(0.1)
            assert health["audit_journaled"] >= 1 and health["audit_journal_pending"] is False, health
        finally:
            for gateway in gateways.values():
                gateway.stop()

    ok = {call_id for call_id, status in answers if status == "ok"}
    assert any(i.startswith("a-") for i in ok) and any(i.startswith("b-") for i in ok), answers
    rows = postgres_cluster.sql(
        "SELECT json_build_object('t', 'audit', 'args', args_preview, 'status', status) FROM audit "
        "WHERE requested = 'api.items.get' UNION ALL "
        "SELECT json_build_object('t', 'open', 'args', args_preview, 'status', status) FROM audit_open "
        "WHERE requested = 'api.items.get'",
        database,
    )
    outcomes: dict[str, list[str]] = {}
    still_open: dict[str, str] = {}
    for line in rows.splitlines():
        row = json.loads(line)
        call_id = json.loads(row["args"]).get("id")
        if row["t"] == "audit":
            outcomes.setdefault(call_id, []).append(row["status"])
        else:
            still_open[call_id] = row["status"]
    missing = sorted(i for i in ok if outcomes.get(i) != ["ok"])
    assert not missing, [(i, outcomes.get(i)) for i in missing]
    assert not (ok & still_open.keys()), {i: still_open[i] for i in ok & still_open.keys()}

    # What B left on its disk: whole audit rows of answered calls, redacted like the table's.
    rows_b = [json.loads(line) for line in journaled.splitlines()]
    assert rows_b and {r["status"] for r in rows_b} == {"ok"} and all(r["call_id"] for r in rows_b), rows_b
    assert {json.loads(r["args_preview"])["id"] for r in rows_b} <= {i for i in outcomes if i.startswith("b-")}

    logs = {name: (tmp_path / f"gateway-{name}.log").read_text() for name in ("a", "b", "b2")}
    assert "journaled in" in logs["a"] and "journaled in" in logs["b"], logs["b"][-2000:]
    assert "replayed" in logs["a"] and "replayed" in logs["b2"], (logs["a"][-2000:], logs["b2"][-2000:])
    assert "Traceback" not in "".join(logs.values())
    for text in [*logs.values(), journaled]:
        assert DB_PASSWORD not in text and UPSTREAM_TOKEN not in text
