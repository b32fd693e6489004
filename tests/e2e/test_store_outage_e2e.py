"""A PostgreSQL outage under load (issue 12 item 2): the database stopped for about 10 s while
agents call over HTTP. Every request is answered, ``store_unavailable`` or a success, never a bare
500; ``/readyz`` is 503 during and 200 after; the gateway recovers without a restart and logs the
outage once when it starts and once when it ends, without a traceback. A stdio session started while
the database is down keeps its session and comes up by itself once the database answers."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import anyio
import httpx2
import pytest
from anyio.abc import SocketStream
from mcp import Client
from mcp.client.stdio import stdio_client

from tests.support.mcp_http import message, open_session
from tests.support.postgres import PostgresCluster, PostgresUnavailable, postgres_missing, start_cluster

from .conftest import GatewayEnv, HttpGateway, free_port, structured

pytestmark = pytest.mark.anyio

WORKERS = 4
OUTAGE_SECONDS = 10


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    """A cluster of this test's own: it is stopped and started again, which the shared one must not be."""
    try:
        cluster = start_cluster()
    except PostgresUnavailable as exc:
        postgres_missing(str(exc))
        raise
    try:
        yield cluster
    finally:
        cluster.stop()


def _classify(response: httpx2.Response) -> str:
    if response.status_code == 503:
        error = response.json().get("error") or {}  # a JSON-RPC error, which MCP clients surface
        return "store_unavailable" if error.get("data", {}).get("reason") == "store_unavailable" else "bad:503"
    if response.status_code != 200:
        return f"bad:{response.status_code}"
    result = message(response).get("result") or {}
    payload = result.get("structuredContent") or {}
    if payload.get("status") == "ok":
        return "ok"
    if payload.get("reason") == "store_unavailable" and payload.get("hint"):
        return "store_unavailable"
    return f"bad:{payload.get('status')}/{payload.get('reason')}"


async def test_postgres_outage_under_load(gateway_env: GatewayEnv, cluster: PostgresCluster) -> None:
    gateway_env.env["MCP_GATEWAY_DATABASE_URL"] = cluster.url()
    gateway_env.cli("secret", "set", "bearer_api", input="bearer-secret-value")
    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    gateway = HttpGateway(gateway_env, gateway_env.root / "gateway.log")
    outcomes: list[tuple[float, str]] = []
    ready: list[tuple[float, int]] = []
    stop = anyio.Event()
    down_at = up_at = float("inf")

    async def worker(n: int) -> None:
        async with httpx2.AsyncClient(timeout=30) as http:
            auth = await open_session(http, gateway.url, token)
            i = 0
            while not stop.is_set():
                i += 1
                call = {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {
                        "name": "call",
                        "arguments": {"tool": "bearer_api.items.get", "args": {"id": f"{n}-{i}"}},
                    },
                }
                response = await http.post(f"{gateway.url}/mcp", json=call, headers=auth)
                outcomes.append((time.monotonic(), _classify(response)))
                await anyio.sleep(0.05)

    async def probe() -> None:
        async with httpx2.AsyncClient(timeout=5) as http:
            while not stop.is_set():
                r = await http.get(f"{gateway.url}/readyz")
                ready.append((time.monotonic(), r.status_code))
                await anyio.sleep(0.3)

    try:
        async with anyio.create_task_group() as tg:
            for n in range(WORKERS):
                tg.start_soon(worker, n)
            tg.start_soon(probe)
            await anyio.sleep(3)
            await anyio.to_thread.run_sync(
                lambda: cluster.run(str(cluster.bindir / "pg_ctl"), "stop", "-D", str(cluster.data), "-m", "fast", "-w")
            )
            down_at = time.monotonic()
            await anyio.sleep(OUTAGE_SECONDS)
            await anyio.to_thread.run_sync(
                lambda: cluster.run(
                    str(cluster.bindir / "pg_ctl"),
                    "start",
                    "-D",
                    str(cluster.data),
                    "-l",
                    str(cluster.root / "server.log"),
                    "-w",
                    "-t",
                    "60",
                )
            )
            up_at = time.monotonic()
            deadline = up_at + 30
            while time.monotonic() < deadline:  # until calls succeed again, then a little more
                if any(t > up_at and o == "ok" for t, o in outcomes) and any(t > up_at and s == 200 for t, s in ready):
                    break
                await anyio.sleep(0.2)
            await anyio.sleep(2)
            stop.set()
    finally:
        gateway.stop()

    counts = Counter(o for _, o in outcomes)
    bad = {o: c for o, c in counts.items() if o not in ("ok", "store_unavailable")}
    assert not bad, (counts, gateway.log()[-3000:])
    during = Counter(o for t, o in outcomes if down_at + 1 < t < up_at)
    assert during["store_unavailable"] > 0, counts
    assert any(t > up_at and o == "ok" for t, o in outcomes), counts  # recovered, same process
    assert 503 in {s for t, s in ready if down_at + 1 < t < up_at}, ready
    assert ready[-1][1] == 200, ready[-5:]
    log = gateway.log()
    assert "Traceback" not in log, log[-3000:]
    assert "Internal Server Error" not in log
    started = log.count("store unavailable:")
    ended = log.count("store reachable again")
    assert 1 <= started <= 2 and started == ended, log[-3000:]  # once per outage, not per request
    assert f"127.0.0.1:{cluster.port}" in log  # the warning names the database (password redacted)


async def _forward(port: int, target: int) -> None:
    """Forward ``port`` on loopback to ``target``: a database that starts answering when this starts."""

    async def pipe(source: SocketStream, sink: SocketStream) -> None:
        try:
            async for chunk in source:
                await sink.send(chunk)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            await sink.aclose()

    async def handle(client: SocketStream) -> None:
        async with client, await anyio.connect_tcp("127.0.0.1", target) as server, anyio.create_task_group() as tg:
            tg.start_soon(pipe, client, server)
            tg.start_soon(pipe, server, client)

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    await listener.serve(handle)


async def test_a_stdio_session_started_while_postgres_is_down_answers_then_comes_up(
    gateway_env: GatewayEnv, postgres_url: str
) -> None:
    # The early answers made the server look healthy (initialize, six tools), then the first tool call
    # met "Connection closed": the process had exited 3, and nothing brought the session back.
    port = free_port()
    base, _, database = postgres_url.rpartition("/")
    target = int(base.rpartition(":")[2])
    gateway_env.env["MCP_GATEWAY_DATABASE_URL"] = f"postgresql://postgres@127.0.0.1:{port}/{database}"
    errlog = gateway_env.root / "stderr.log"
    with errlog.open("w") as err, anyio.fail_after(60):
        async with Client(stdio_client(gateway_env.stdio_params(), errlog=err), mode="legacy") as client:
            assert len((await client.list_tools()).tools) == 6
            down = structured(await client.call_tool("connectors", {}))
            assert down["reason"] == "store_unavailable" and "nothing was run" in down["hint"], down
            answer = down
            async with anyio.create_task_group() as tg:
                tg.start_soon(_forward, port, target)
                while answer.get("reason") == "store_unavailable":  # up by itself, in the same session
                    await anyio.sleep(0.3)
                    answer = structured(await client.call_tool("connectors", {}))
                tg.cancel_scope.cancel()
            assert "connectors" in answer, answer
    logged = errlog.read_text()
    assert logged.count("Serving stdio meanwhile") == 1 and "Traceback" not in logged, logged
