"""The gateway under concurrent clients and idle sessions, beside the SDK floor of ``bench_call``.

Both servers run as ``bench_call`` runs them (``mcp-gateway serve --transport http`` and the
thinnest SDK server, ``bench_call --serve-floor http``), doing the same upstream GET against the
same loopback upstream process. Then, per server:

- **Concurrency**: for each level of ``--levels`` (default 1, 8, 32, 128), that many clients, each
  an SDK ``Client`` with its own MCP session (2025 protocol, ``Mcp-Session-Id``), spread round-robin
  over ``--agents`` agents (each with its own token), call the tool ``--calls`` times each, all at
  once. Printed: calls/s (all calls over the wall time), p50 and p99 latency, and the calls not
  answered ``ok`` (e.g. ``rate_limited`` from ``agent_limits.running_calls``; ``--running-calls``
  sets it in the gateway's manifest). The servers take turns per level.
- **Idle sessions**: ``--idle`` sessions opened (initialize, then the client's GET stream) and held
  open; printed: the sessions that opened, and the server's resident memory per session (RSS after
  minus before, over the sessions held).
- ``--cancel-every K``: every K-th call is abandoned a few milliseconds after it is sent (its POST
  closed mid-request, as a client that gives up does). Afterwards the gateway's log is searched for
  what a well-behaved server never logs under load: a second response on one request
  (``Unexpected ASGI message``), ``ClosedResourceError``, ``Exception in ASGI application``
  (with ``$BENCH_LOAD_KEEP_LOG`` naming a file, a log showing any of them is copied there).

The machine's load average is printed with the table: on a shared machine, compare the two columns
of one run, not runs with each other.

Usage (from the repo root): python scripts/bench_load.py [--levels 1 8 32 128] [--calls 20]
    [--agents 8] [--idle 1000] [--running-calls N] [--cancel-every K]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import bench_call  # noqa: E402 - the same upstream, manifest, tool and floor as bench_call

LOG_SIGNS = ("Unexpected ASGI message", "ClosedResourceError", "Exception in ASGI application")


@dataclass
class Server:
    """One MCP server under test: where it listens, its process, and the tokens its clients carry."""

    label: str
    url: str
    pid: int
    tool: str
    args: dict[str, Any]
    tokens: list[str | None]
    log: Path | None = None


@dataclass
class Level:
    latencies: list[float] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)
    abandoned: int = 0
    wall: float = 0.0

    def row(self) -> tuple[str, str, str, str]:
        done = len(self.latencies) + sum(self.refused.values())
        ordered = sorted(self.latencies) or [float("nan")]
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        refused = ", ".join(f"{n} {why}" for why, n in sorted(self.refused.items())) or "-"
        return f"{done / self.wall:,.0f}", f"{statistics.median(ordered) * 1e3:.1f}", f"{p99 * 1e3:.1f}", refused


def _http(token: str | None, pool: int) -> httpx2.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    limits = httpx2.Limits(max_connections=pool, max_keepalive_connections=pool)
    return httpx2.AsyncClient(headers=headers, timeout=60, limits=limits, trust_env=False)


@asynccontextmanager
async def _clients(server: Server, n: int) -> AsyncIterator[list[Any]]:
    """``n`` SDK clients, each its own MCP session, spread over the server's tokens; opened at most 32 at once."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    opened: list[Any] = []
    failed: list[str] = []
    ready, release = anyio.Event(), anyio.Event()
    gate = anyio.Semaphore(32)
    pools = [_http(token, 2 * n + 8) for token in server.tokens]

    def counted() -> None:
        if len(opened) + len(failed) == n:
            ready.set()

    async def hold(i: int) -> None:
        transport = streamable_http_client(f"{server.url}/mcp", http_client=pools[i % len(pools)])
        try:
            async with AsyncExitStack() as stack:
                async with gate:  # held while opening only
                    client = await stack.enter_async_context(Client(transport, mode="legacy"))
                opened.append(client)
                counted()
                await release.wait()
        except Exception as exc:  # a refused session (503) or a connection error: counted, not fatal
            failed.append(type(exc).__name__)
            counted()

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(hold, i)
        await ready.wait()
        try:
            if failed:
                print(
                    f"  {server.label}: {len(failed)} of {n} sessions did not open ({', '.join(sorted(set(failed)))})"
                )
            yield opened
        finally:
            release.set()
    for pool in pools:
        await pool.aclose()


async def _level(server: Server, n: int, calls: int, cancel_every: int) -> Level:
    level = Level()
    async with _clients(server, n) as clients:
        for client in clients:  # warm: the first call of each session out of the measurement
            await client.call_tool(server.tool, server.args)
        counter = 0

        async def run(client: Any) -> None:
            nonlocal counter
            for _ in range(calls):
                counter += 1
                if cancel_every and counter % cancel_every == 0:
                    with anyio.move_on_after(0.002 + (counter % 7) / 1000):
                        await client.call_tool(server.tool, server.args)
                    level.abandoned += 1
                    continue
                started = time.perf_counter()
                result = await client.call_tool(server.tool, server.args)
                shown = result.structured_content or {}
                if shown.get("status") == "ok":
                    level.latencies.append(time.perf_counter() - started)
                else:
                    why = str(shown.get("reason") or shown.get("status") or "error")
                    level.refused[why] = level.refused.get(why, 0) + 1

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(run, client)
        level.wall = time.perf_counter() - started
    return level


async def _idle(server: Server, n: int) -> tuple[int, float]:
    """Sessions that opened of ``n``, and the server's RSS per session held (KiB)."""
    before = bench_call._rss_mb("VmRSS", server.pid)  # pyright: ignore[reportPrivateUsage]
    async with _clients(server, n) as clients:
        await anyio.sleep(1)
        after = bench_call._rss_mb("VmRSS", server.pid)  # pyright: ignore[reportPrivateUsage]
        held = len(clients)
    return held, (after - before) * 1024 / max(1, held)


@asynccontextmanager
async def servers(root: Path, upstream: str, opts: argparse.Namespace) -> AsyncIterator[list[Server]]:
    manifest = root / "manifest.yaml"
    text = bench_call.TINY_MANIFEST.format(upstream=upstream, pages_port=bench_call._free_port())  # pyright: ignore[reportPrivateUsage]
    if opts.running_calls:
        text += f"agent_limits: {{running_calls: {opts.running_calls}}}\n"
    manifest.write_text(text)
    env = bench_call._env(root / "state")  # pyright: ignore[reportPrivateUsage]
    cli = bench_call._cli  # pyright: ignore[reportPrivateUsage]
    cli(env, "secret", "set", "bench", "--manifest", str(manifest), input=bench_call.SECRET)
    tokens: list[str | None] = []
    for i in range(opts.agents):
        made = cli(env, "token", "create", "--agent", f"load-{i}", "--json", "--manifest", str(manifest))
        tokens.append(json.loads(made)["token"])
    port, floor_port = bench_call._free_port(), bench_call._free_port()  # pyright: ignore[reportPrivateUsage]
    sessions = str(opts.idle + max(opts.levels) + 64)
    serve = ["-m", "mcp_gateway", "serve", "--transport", "http", "--port", str(port), "--manifest", str(manifest)]
    serve += ["--max-sessions", sessions]
    floor = [bench_call.__file__, "--serve-floor", "http", "--upstream", upstream, "--port", str(floor_port)]
    log = root / "gateway.log"
    call = {"tool": bench_call.TOOL, "args": bench_call.ARGS}
    with open(log, "w") as out:  # noqa: ASYNC230 - set-up, nothing measured yet
        async with (
            bench_call.subprocess_http(serve, env, port, "/healthz", stderr=out) as pid,
            bench_call.subprocess_http(floor, env, floor_port, "/") as floor_pid,
        ):
            yield [
                Server("gateway", f"http://127.0.0.1:{port}", pid, "call", call, tokens, log),
                Server("SDK floor", f"http://127.0.0.1:{floor_port}", floor_pid, "get_item", bench_call.ARGS, [None]),
            ]


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def _log_signs(log: Path) -> dict[str, int]:
    text = log.read_text(errors="replace")
    signs = {sign: text.count(sign) for sign in LOG_SIGNS}
    if any(signs.values()) and os.environ.get("BENCH_LOAD_KEEP_LOG"):
        kept = Path(os.environ["BENCH_LOAD_KEEP_LOG"])
        kept.write_text(text)
        print(f"gateway log kept in {kept}")
    return signs


async def main(opts: argparse.Namespace) -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (before)")
    with tempfile.TemporaryDirectory() as tmp, bench_call.upstream_process() as upstream:
        async with servers(Path(tmp), upstream, opts) as both:
            rows = [["clients", "server", "calls/s", "p50 ms", "p99 ms", "not ok"]]
            for n in opts.levels:
                for server in both:
                    level = await _level(server, n, opts.calls, opts.cancel_every)
                    rows.append([str(n), server.label, *level.row()])
                    print(f"  {n:>4} clients, {server.label}: done ({level.abandoned} abandoned)", flush=True)
            idle = [["idle sessions", "server", "opened", "RSS KiB/session"]]
            for server in both if opts.idle else ():
                held, per = await _idle(server, opts.idle)
                idle.append([str(opts.idle), server.label, str(held), f"{per:.0f}"])
            print(f"\nconcurrency ({opts.calls} calls per client, {opts.agents} agents on the gateway)")
            _table(rows)
            if opts.idle:
                print()
                _table(idle)
            gateway = both[0]
            assert gateway.log is not None
            signs = _log_signs(gateway.log)
    print(f"\ngateway log: {', '.join(f'{n} x {s!r}' for s, n in signs.items())}")
    print(f"load average {os.getloadavg()[0]:.1f} (after)")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32, 128], help="concurrent clients per level")
    p.add_argument("--calls", type=int, default=20, help="calls per client per level")
    p.add_argument("--agents", type=int, default=8, help="agents (tokens) the gateway's clients are spread over")
    p.add_argument("--idle", type=int, default=1000, help="idle sessions held open (0: none)")
    p.add_argument("--running-calls", type=int, help="the gateway manifest's agent_limits.running_calls")
    p.add_argument("--cancel-every", type=int, default=0, metavar="K", help="abandon every K-th call mid-request")
    return p.parse_args()


if __name__ == "__main__":
    anyio.run(main, parse_args())
