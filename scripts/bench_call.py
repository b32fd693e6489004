"""Benchmark one upstream GET: direct, through ``Gateway.call`` in process, and end to end over MCP.

Every path makes the same small JSON GET against the same loopback upstream (a raw ASGI app
served by uvicorn in its own process, so it shares no GIL with what is measured):

    (a) direct        httpx2.AsyncClient -> upstream                                  the floor
    (b) in-process    Gateway.call (wired like runtime.open_gateway) -> upstream; durable audit on
                      (each call waits for the commit of its "started" and outcome rows), metrics
                      on, tracing off; then issue 12's costs, each off in turn and all off, with
                      tracing on (the SDK, spans discarded), in interleaved rounds: the table
                      "production costs" reads durable audit, metrics and tracing on minus off
    (c) MCP e2e       SDK Client -> `mcp-gateway serve` (subprocess; HTTP, stdio) -> upstream;
                      beside it (c0), the same with MCP_GATEWAY_FAST_PATHS=0 (the SDK's public API alone)
    (f) SDK floor     SDK Client -> the thinnest MCPServer (one tool doing the GET) -> upstream
    (p1), (p2) peers  SDK Client -> FastMCP.from_openapi / mcp-openapi-proxy (from PyPI, the `bench`
                      extra; left out, with a line saying so, when not installed) built from the
                      same operation as an OpenAPI document (``peer_spec``) -> upstream

Each runs a warm-up, then ``--n`` sequential calls; latency is wall time per call. (a) and (b)
keep their lowest-median round. The end-to-end servers run side by side over stdio and streamable
HTTP (a 2025-11-25 session, ``legacy``, and 2026-07-28 requests, ``auto``) and take turns within
each of the ``--rounds`` rounds, each path's p50 and server CPU being the medians over its rounds;
``--runs`` repeats that over the same processes. The budget table sets every server against the
floor per transport: the gateway may spend at most +0.5 ms p50 and +0.5 ms server CPU per call over
it (where one run lands over, the median of three runs decides: ``--runs 3``). "client CPU"
is this process's CPU per call (for (b) it includes the gateway, its SQLite thread included);
"server CPU" is the server subprocess's utime+stime from /proc/<pid>/stat per call. Then: cold
sync and warm restart of the bundled default manifest (GitHub's spec), each in a fresh process,
the tools/list size for the default catalog vs a one-action catalog, resident memory of a gateway
holding ~10,000 actions (cold and warm; real specs replicated, then the same copies rewritten so
that none shares a value with another; optionally with tracemalloc's biggest allocators),
ablations of (b) that put back the audit INSERT and the uncached vault lookups the call path no
longer makes, each call-path step timed alone, and a cProfile of (b) listing the gateway's hotspots.

Usage (from the repo root): python scripts/bench_call.py [--n 300] [--warmup 30] [--rounds 5]
    [--runs 1] [--profile 500] [--skip-e2e] [--skip-sync] [--skip-rss] [--tracemalloc N] [--no-peers]
    python scripts/bench_call.py --e2e-only --rounds 5 --runs 3   # only: the budget table
    python scripts/bench_call.py --buckets      # only: rate limits shared through PostgreSQL, per call
    python scripts/bench_call.py --costs        # only: (a) and issue 12's production-costs table
"""

# Setup (starting servers, the CLI, reading /proc) blocks on purpose: the calls run strictly one
# after another, so nothing is waiting on the event loop meanwhile, and no measurement spans it.
# ruff: noqa: ASYNC220, ASYNC221

from __future__ import annotations

import argparse
import cProfile
import gzip
import io
import json
import os
import pstats
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mcp_gateway.core import result_payload

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import anyio  # noqa: E402
import httpx2  # noqa: E402
from mcp_types import CallToolResult, TextContent  # noqa: E402 - at module level: the floor's tool annotation

SECRET = "bench-secret-value-0123456789"
MASTER_KEY = "bench-master-key-0123456789abcdef0123456789"
BODY = json.dumps({"id": 1, "name": "widget", "tags": ["a", "b"], "ok": True}).encode()
TOOL = "bench.items.get"
ARGS = {"id": "1"}

TINY_MANIFEST = """
project: bench
default_mode: allow_all
public_url: http://127.0.0.1:{pages_port}
connectors:
  - slug: bench
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
"""


# -- child processes ------------------------------------------------------------------------------


async def upstream_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The upstream: every request gets the same small JSON body."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": BODY})


def _bound_socket(port: int = 0) -> socket.socket:
    # proto=IPPROTO_TCP matters: asyncio enables TCP_NODELAY on accepted connections only when the
    # listening socket says so, and without it the body write waits ~40 ms behind a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def serve_upstream() -> None:
    import uvicorn

    sock = _bound_socket()
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(upstream_app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


@contextmanager
def upstream_process() -> Iterator[str]:
    """``serve_upstream`` in a process of its own (it shares no GIL with what is measured), healthy;
    yields its base URL and stops it on the way out."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve-upstream"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        upstream = f"http://127.0.0.1:{process.stdout.readline().strip()}"
        _wait_healthy(upstream, process, "/items/1")
        yield upstream
    finally:
        process.terminate()
        process.wait()


def serve_floor(transport: str, upstream: str, port: int) -> None:
    """The thinnest MCP server the SDK allows: one tool doing the GET (SPEC 12's floor)."""
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="floor", log_level="WARNING")
    http = httpx2.AsyncClient(trust_env=False)

    @server.tool(name="get_item")
    async def get_item(id: str) -> CallToolResult:
        # The same result shape as the gateway's (structured content + the same JSON as text).
        response = await http.get(f"{upstream}/items/{id}")
        data = {"status": "ok", "http_status": response.status_code, "data": response.json()}
        text = json.dumps(data, separators=(",", ":"))
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)

    if transport == "stdio":
        anyio.run(server.run_stdio_async)
        return
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run()


# -- peers: other MCP servers from PyPI exposing the same GET as a tool -------------------------


@dataclass(frozen=True)
class Peer:
    """A server from PyPI (the ``bench`` extra) that turns an OpenAPI description into MCP tools."""

    key: str
    label: str
    module: str
    tool: str
    """The tool name the peer derives from ``peer_spec``'s one operation."""
    http_health: str
    """A path its HTTP app answers without MCP (any status counts as up)."""


PEERS = (
    Peer("fastmcp", "FastMCP from_openapi", "fastmcp", "get_item", "/mcp"),
    Peer("proxy", "mcp-openapi-proxy", "mcp_openapi_proxy", "get_items_by_id", "/healthz"),
)


def missing_peers() -> list[Peer]:
    import importlib.util

    return [peer for peer in PEERS if importlib.util.find_spec(peer.module) is None]


def peer_spec(upstream: str) -> dict[str, Any]:
    """The upstream's one operation as an OpenAPI document: what the peers are built from, the same
    GET the gateway's manifest declares (bearer auth, a string path parameter, a JSON object back)."""
    item = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}
    get = {
        "operationId": "get_item",
        "summary": "Fetch one item by its id",
        "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "The item", "content": {"application/json": {"schema": item}}}},
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "bench", "version": "1"},
        "servers": [{"url": upstream}],
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": {"/items/{id}": {"get": get}},
    }


def peer_env(spec: Path, upstream: str) -> dict[str, str]:
    """mcp-openapi-proxy is configured by environment alone; FastMCP's settings are quietened alike."""
    return {
        "OPENAPI_SPEC_URL": spec.as_uri(),
        "SERVER_URL_OVERRIDE": upstream,
        "API_KEY": SECRET,
        "MCP_SERVER_NAME": "bench",
        "FASTMCP_LOG_LEVEL": "WARNING",
        "FASTMCP_SHOW_SERVER_BANNER": "false",
    }


def serve_peer(key: str, transport: str, upstream: str, port: int, spec: str) -> None:
    """A peer as its documentation runs it, on ``transport``, with the access log and per-call INFO
    logging off like every server here (the gateway's `serve` logs at WARNING, no access log)."""
    import logging

    import uvicorn

    if key == "fastmcp":
        from fastmcp import FastMCP

        headers = {"Authorization": f"Bearer {SECRET}"}
        client = httpx2.AsyncClient(base_url=upstream, headers=headers, trust_env=False, timeout=30)
        server = FastMCP.from_openapi(json.loads(Path(spec).read_text()), client=client, name="bench")
        if transport == "stdio":
            server.run(transport="stdio", show_banner=False, log_level="WARNING")
        else:
            server.run(
                transport="http",
                host="127.0.0.1",
                port=port,
                show_banner=False,
                log_level="WARNING",
                uvicorn_config={"access_log": False},
            )
        return
    from mcp_openapi_proxy import server_lowlevel

    logging.getLogger("mcp_openapi_proxy").setLevel(logging.WARNING)
    if transport == "stdio":
        server_lowlevel.run_server()
        return
    # What its `MCP_TRANSPORT=streamable-http` start does (stateless, JSON answers), served by a
    # uvicorn without the access log.
    server_lowlevel.mcp = server_lowlevel.build_server()
    app = server_lowlevel.build_streamable_http_app(host="127.0.0.1", path="/mcp")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    uvicorn.Server(config).run()


def open_default(state_dir: str) -> None:
    """Open the bundled default manifest on ``state_dir`` once; print timings and sizes as JSON."""
    started = time.perf_counter()
    from mcp import Client

    from mcp_gateway.runtime import Settings, open_gateway
    from mcp_gateway.server.tools import build_mcp_server
    from mcp_gateway.services.identity import OPERATOR

    imported = time.perf_counter()

    async def run() -> dict[str, Any]:
        settings = Settings(manifest_path=None, state_dir=Path(state_dir), env={"MCP_GATEWAY_MASTER_KEY": MASTER_KEY})
        t0 = time.perf_counter()
        async with open_gateway(settings) as gw:
            opened = time.perf_counter() - t0
            actions = len(gw._index)
            async with Client(build_mcp_server(gw, default_principal=OPERATOR)) as client:
                tools = (await client.list_tools()).tools
        return {"open_s": opened, "actions": actions, "tools_list_bytes": _tools_bytes(tools)}

    out = anyio.run(run)
    out["import_s"] = imported - started
    out["process_s"] = time.perf_counter() - started
    out["rss_mb"] = _rss_mb("VmHWM")
    print(json.dumps(out))


SPECS = REPO / "mcp_gateway" / "bundled" / "catalog" / "specs"
RSS_CONNECTORS = (("github", "github.json.gz", 6), ("stripe", "stripe.json.gz", 5), ("slack", "slack.json.gz", 4))
RSS_ONCE = (("notion", "notion.json"), ("petstore", "petstore.json"))
RSS_TARGET_MB = 150


def rss_manifest(upstream: str, distinct_dir: Path | None = None) -> str:
    """~10,000 actions of real APIs: the bundled specs, the big three replicated under new slugs
    (there are not 10,000 distinct real operations at hand), every base URL the loopback upstream.

    With ``distinct_dir``, copy i of a spec is rewritten there first (``distinct_spec``) so that no
    two copies have an equal parameter, schema or description: what sharing equal values across a
    catalog saves is then only what one real API repeats within itself, not one copy of another."""
    connectors = [(f"{name}-{i}", SPECS / spec) for name, spec, copies in RSS_CONNECTORS for i in range(copies)]
    if distinct_dir is not None:
        distinct_dir.mkdir(parents=True, exist_ok=True)
        connectors = [
            (slug, distinct_spec(spec, i, distinct_dir / f"{slug}.json")) for i, (slug, spec) in enumerate(connectors)
        ]
    connectors += [(slug, SPECS / spec) for slug, spec in RSS_ONCE]
    body = "".join(
        f"  - slug: {slug}\n    base_url: {upstream}\n    auth: {{type: none}}\n    source: {{openapi: {spec}}}\n"
        for slug, spec in connectors
    )
    return f"project: rss\ndefault_mode: allow_all\npublic_url: http://127.0.0.1:1\nconnectors:\n{body}"


_PARAM_IN = frozenset({"path", "query", "header", "cookie", "formData"})


def distinct_spec(spec: Path, copy: int, out: Path) -> Path:
    """Write ``spec`` to ``out`` with every description and summary, property name, parameter name and
    path template variable suffixed with ``copy``: the same API shape, nothing equal to another copy."""
    raw = gzip.decompress(spec.read_bytes()) if spec.suffix == ".gz" else spec.read_bytes()

    def rename(name: str) -> str:
        return f"{name}_{copy}"

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        done: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("description", "summary") and isinstance(value, str):
                done[key] = f"{value} (copy {copy})"
            elif key == "properties" and isinstance(value, dict):
                done[key] = {rename(k): walk(v) for k, v in value.items()}
            elif key == "required" and isinstance(value, list):
                done[key] = [rename(v) if isinstance(v, str) else v for v in value]
            elif key == "name" and isinstance(value, str) and node.get("in") in _PARAM_IN:
                done[key] = rename(value)
            elif key == "paths" and isinstance(value, dict):
                done[key] = {
                    re.sub(r"\{([^}/]+)\}", lambda m: f"{{{rename(m[1])}}}", k): walk(v) for k, v in value.items()
                }
            else:
                done[key] = walk(value)
        return done

    out.write_text(json.dumps(walk(json.loads(raw))))
    return out


def _sample_args(schema: dict[str, Any]) -> dict[str, Any]:
    values = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    props = schema.get("properties", {})
    return {k: values.get(props.get(k, {}).get("type"), "1") for k in schema.get("required", [])}


def rss_gateway(state_dir: str, manifest: str, top: int) -> None:
    """Open a gateway on ``manifest``; print, as JSON, resident memory after the open and after a
    few meta-tool calls, and (``top`` > 0) where the Python heap is, by tracemalloc."""
    import tracemalloc

    if top:
        tracemalloc.start()
    from mcp_gateway.runtime import Settings, open_gateway
    from mcp_gateway.server import app, tools  # noqa: F401 - what `serve` imports too
    from mcp_gateway.services.identity import OPERATOR

    imported = _rss_mb("VmRSS")

    async def run() -> dict[str, Any]:
        settings = Settings(
            manifest_path=Path(manifest), state_dir=Path(state_dir), env={"MCP_GATEWAY_MASTER_KEY": MASTER_KEY}
        )
        t0 = time.perf_counter()
        async with open_gateway(settings) as gw:
            out: dict[str, Any] = {"open_s": time.perf_counter() - t0, "actions": len(gw._index)}
            out["rss_imports_mb"] = imported
            out["rss_open_mb"] = _rss_mb("VmRSS")
            if top:
                snapshot = tracemalloc.take_snapshot()
                out["traced_mb"] = sum(s.size for s in snapshot.statistics("filename")) / 2**20
                out["top"] = [
                    (str(stat.traceback[0]), stat.size / 2**20, stat.count)
                    for stat in snapshot.statistics("lineno")[:top]
                ]
            calls = 0
            for query in ("create an issue", "list customers", "post a message to a channel", "merge a pull request"):
                found = result_payload(await gw.discover(OPERATOR, query))
                for hit in found["results"][:3]:
                    described = result_payload(await gw.describe(OPERATOR, hit["name"]))
                    await gw.call(OPERATOR, hit["name"], _sample_args(described.get("input_schema", {})))
                    calls += 1
            await gw.auditor.flush()
            out["calls"] = calls
            out["rss_calls_mb"] = _rss_mb("VmRSS")
            out["hwm_mb"] = _rss_mb("VmHWM")
        return out

    print(json.dumps(anyio.run(run)))


def _tools_bytes(tools: list[Any]) -> int:
    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    return len(json.dumps(dumped, separators=(",", ":"), ensure_ascii=False).encode())


def _rss_mb(field: str, pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- measurement ------------------------------------------------------------------------------


@dataclass
class Result:
    label: str
    latencies: list[float]
    client_cpu: float
    """Seconds of this process's CPU per call."""
    server_cpu: float | None = None
    """Seconds of the server subprocess's CPU per call."""
    wall: float = 0.0
    p50_override: float | None = None
    """For interleaved paths: the median of the rounds' medians."""
    rounds: list[Result] | None = None

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies) if self.p50_override is None else self.p50_override

    @property
    def p99(self) -> float:
        return statistics.quantiles(self.latencies, n=100)[98]

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall


def proc_cpu(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (fields 14 and 15 of /proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


ROUNDS = 5
"""Each path runs this many rounds of ``n`` calls: where paths run side by side, each one's p50 and
server CPU are the medians over its rounds; a path measured alone keeps the round with the lowest
median, which filters out other processes' bursts on a shared machine (each round is still a full
sample)."""


async def measure(
    label: str, call: Callable[[], Awaitable[None]], *, n: int, warmup: int, server_pid: int | None = None
) -> Result:
    for _ in range(warmup):
        await call()
    best: Result | None = None
    for _ in range(ROUNDS):
        latencies = []
        server_before = proc_cpu(server_pid) if server_pid else 0.0
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        for _ in range(n):
            t0 = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - t0)
        wall = time.perf_counter() - wall_before
        client_cpu = (time.process_time() - cpu_before) / n
        server_cpu = (proc_cpu(server_pid) - server_before) / n if server_pid else None
        result = Result(label, latencies, client_cpu, server_cpu, wall)
        if best is None or result.p50 < best.p50:
            best = result
    assert best is not None
    return best


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(state_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_")}
    return env | {"MCP_GATEWAY_STATE_DIR": str(state_dir), "MCP_GATEWAY_MASTER_KEY": MASTER_KEY}


def _cli(env: dict[str, str], *args: str, input: str | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_gateway", *args], input=input, capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"mcp-gateway {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout


def _wait_healthy(url: str, proc: subprocess.Popen[Any], path: str = "/healthz") -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}")
        try:
            httpx2.get(url + path, timeout=1)
            return
        except httpx2.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


@asynccontextmanager
async def subprocess_http(
    args: list[str], env: dict[str, str], port: int, path: str, stderr: IO[str] | int = subprocess.DEVNULL
) -> AsyncIterator[int]:
    proc = subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", proc, path)
        yield proc.pid
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL if it has not ended after ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _child_pid(command: list[str]) -> int | None:
    """The pid of our child process running ``command`` (a stdio server). Its arguments are matched
    whole: a server of the same kind over HTTP, running meanwhile, shares most of them."""
    me, wanted = os.getpid(), [arg.encode() for arg in command[1:]]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == me and argv[1:] == wanted:
            return int(entry.name)
    return None


class ToolsListSize:
    """An httpx2 response hook that records the raw body size of the tools/list answer."""

    def __init__(self) -> None:
        self.bytes: int | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        if response.request.method == "POST" and b'"tools/list"' in response.request.content:
            await response.aread()  # cached: the SDK then reads the same bytes
            self.bytes = len(response.content)


@dataclass
class E2EPath:
    """One end-to-end path: a connected SDK client, the tool it calls, and the server process."""

    label: str
    client: Any
    tool: str
    args: dict[str, Any]
    pid: int | None
    tools_bytes: int = 0
    http_body: int | None = None

    async def call(self) -> None:
        await self.client.call_tool(self.tool, self.args)


@asynccontextmanager
async def mcp_http(
    label: str, url: str, token: str | None, tool: str, args: dict[str, Any], *, pid: int, mode: str
) -> AsyncIterator[E2EPath]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    hook = ToolsListSize()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"response": [hook]}) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client:
            label = f"{label} {client.protocol_version}"
            tools = (await client.list_tools()).tools
            _check(label, await client.call_tool(tool, args))
            yield E2EPath(label, client, tool, args, pid, _tools_bytes(tools), hook.bytes)


@asynccontextmanager
async def mcp_stdio(
    label: str, command: list[str], env: dict[str, str], tool: str, args: dict[str, Any]
) -> AsyncIterator[E2EPath]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    async with Client(params, mode="legacy") as client:
        tools = (await client.list_tools()).tools
        _check(label, await client.call_tool(tool, args))
        yield E2EPath(label, client, tool, args, _child_pid(command), _tools_bytes(tools))


async def measure_interleaved(paths: list[E2EPath], *, n: int, warmup: int) -> list[Result]:
    """Every path, ``ROUNDS`` rounds of ``n`` calls, the paths taking turns within each round (in a
    rotated order), so that a burst of other work on a shared machine lands on all of them alike.
    Each path's p50 and server CPU are the medians over its rounds; p99 is over all its calls."""
    for path in paths:
        for _ in range(warmup):
            await path.call()
    rounds: dict[str, list[Result]] = {path.label: [] for path in paths}
    for index in range(ROUNDS):
        shift = index % len(paths)
        for path in paths[shift:] + paths[:shift]:
            latencies = []
            server_before = proc_cpu(path.pid) if path.pid else 0.0
            cpu_before, wall_before = time.process_time(), time.perf_counter()
            for _ in range(n):
                t0 = time.perf_counter()
                await path.call()
                latencies.append(time.perf_counter() - t0)
            wall = time.perf_counter() - wall_before
            client_cpu = (time.process_time() - cpu_before) / n
            server_cpu = (proc_cpu(path.pid) - server_before) / n if path.pid else None
            rounds[path.label].append(Result(path.label, latencies, client_cpu, server_cpu, wall))
    return [_median_of(path.label, rounds[path.label]) for path in paths]


def _median_of(label: str, rounds: list[Result]) -> Result:
    merged = Result(
        label,
        [x for r in rounds for x in r.latencies],
        statistics.median(r.client_cpu for r in rounds),
        statistics.median(r.server_cpu or 0.0 for r in rounds) if rounds[0].server_cpu is not None else None,
        sum(r.wall for r in rounds),
    )
    merged.p50_override = statistics.median(r.p50 for r in rounds)
    merged.rounds = rounds
    return merged


def _check(label: str, result: Any) -> None:
    """The first call got the upstream's item: the gateway's and the floor's ``{"status": "ok",
    "data": ...}``, or a peer's answer carrying the body itself (structured, or as text only)."""
    structured = result.structured_content or {}
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if structured.get("status") == "ok" or structured.get("name") == "widget":
        return
    if not result.is_error and any('"widget"' in text for text in texts):
        return
    raise RuntimeError(f"{label}: the first call did not succeed: {structured or texts}")


# -- the in-process gateway ---------------------------------------------------------------------


async def in_process(
    root: Path, manifest_path: Path, *, n: int, warmup: int, profile: int, costs_only: bool = False
) -> dict[str, Any]:
    from mcp_gateway.runtime import Settings, open_gateway
    from mcp_gateway.services.audit import Auditor
    from mcp_gateway.services.identity import OPERATOR
    from mcp_gateway.store._access import AccessCache
    from mcp_gateway.vocabulary.model import Ok

    settings = Settings(
        manifest_path=manifest_path, state_dir=root / "inproc", env={"MCP_GATEWAY_MASTER_KEY": MASTER_KEY}
    )
    out: dict[str, Any] = {}
    async with open_gateway(settings) as gw:
        await gw._vault.put("bench", SECRET)
        first = await gw.call(OPERATOR, TOOL, ARGS)
        if not isinstance(first, Ok):
            raise RuntimeError(f"in-process call failed: {first}")

        async def call() -> None:
            await gw.call(OPERATOR, TOOL, ARGS)

        # Issue 12's three production costs, each off in turn, then all off, in interleaved rounds
        # (each variant's p50 and CPU the medians over rounds, so a burst of other work on a shared
        # machine lands on all of them alike). (b) is the default wiring: durable audit and metrics
        # on, tracing off (no OTEL_* variables). Durable audit off: the call returns once its rows
        # are queued, not committed. Tracing on: the SDK with its batch processor, as
        # ``configure_tracing`` installs it, exporting to nowhere (the OTLP encoding and POST happen
        # on the processor's thread, off the call path, and are not counted).
        sqlite: Any = gw._store  # the SQLite store's access cache, swapped by the ablations below
        auditor, access, metrics = gw.auditor, sqlite._access, gw.metrics
        lazy, threaded, no_metrics = Auditor(gw._store, durable=False), Auditor(gw._store), _no_metrics()
        threaded._inline = None  # durable, every row through the writer task and aiosqlite's thread
        _install_tracing()

        def setting(audit: Auditor, observed: Any, traced: bool) -> Callable[[], None]:
            def apply() -> None:
                gw.auditor, gw.metrics = audit, observed
                _trace(traced)

            return apply

        variants = [
            ("b", "(b) Gateway.call in process", setting(auditor, metrics, False)),
            ("b_lazy_audit", "    durable audit off (queued rows)", setting(lazy, metrics, False)),
            ("b_no_metrics", "    metrics off", setting(auditor, no_metrics, False)),
            ("b_tracing", "    tracing on (SDK, spans discarded)", setting(auditor, metrics, True)),
            ("b_all_off", "    durable audit, metrics, tracing all off", setting(lazy, no_metrics, False)),
            ("b_threaded", "    ablation: durable rows via aiosqlite's thread", setting(threaded, metrics, False)),
        ]
        async with lazy.running(), threaded.running():
            measured = await measure_variants(
                [(label, apply) for _, label, apply in variants], call, n=n, warmup=warmup
            )
        out.update(zip([key for key, _, _ in variants], measured, strict=True))
        setting(auditor, metrics, False)()
        if costs_only:
            return out
        # Ablations put back, one at a time and then together, what this build took off the call
        # path: the audit INSERT awaited by the call (an Auditor without its background writer writes
        # inline), and credential lookups read from SQLite every time (a cache whose counter is
        # never readable answers nothing from memory). Both together are the previous design.
        gw.auditor = Auditor(gw._store)
        out["b_inline_audit"] = await measure("    ablation: audit INSERT awaited, no writer", call, n=n, warmup=warmup)
        gw.auditor = auditor
        sqlite._access = AccessCache(lambda: None)
        out["b_uncached"] = await measure("    ablation: vault lookups uncached", call, n=n, warmup=warmup)
        gw.auditor = Auditor(gw._store)
        out["b_before"] = await measure("    ablation: both (the previous design)", call, n=n, warmup=warmup)
        gw.auditor, sqlite._access = auditor, access

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(profile):
            await call()
        profiler.disable()
        out["profile"] = profiler
        out["components"] = await components(gw)
    return out


async def measure_variants(
    variants: list[tuple[str, Callable[[], None]]], call: Callable[[], Awaitable[None]], *, n: int, warmup: int
) -> list[Result]:
    """``call`` under each variant (its function sets the gateway up), ``ROUNDS`` rounds of ``n``
    calls, the variants taking turns within each round (rotated), like ``measure_interleaved``."""
    rounds: dict[str, list[Result]] = {label: [] for label, _ in variants}
    for _, apply in variants:
        apply()
        for _ in range(warmup):
            await call()
    for index in range(ROUNDS):
        shift = index % len(variants)
        for label, apply in variants[shift:] + variants[:shift]:
            apply()
            latencies = []
            cpu_before, wall_before = time.process_time(), time.perf_counter()
            for _ in range(n):
                t0 = time.perf_counter()
                await call()
                latencies.append(time.perf_counter() - t0)
            wall = time.perf_counter() - wall_before
            rounds[label].append(Result(label, latencies, (time.process_time() - cpu_before) / n, None, wall))
    return [_median_of(label, rounds[label]) for label, _ in variants]


def _trace(on: bool) -> None:
    """Spans on or off for the in-process variants: OpenTelemetry's provider, once installed, stays;
    what the gateway asks before making a span is whether one is (``tracing.recording``)."""
    from mcp_gateway import tracing

    tracing._ProviderLookup.found = on
    tracing._ProviderLookup.checked = float("inf")  # never looked up again: the bench decides


def _no_metrics() -> Any:
    from mcp_gateway.primitives.metrics import GatewayMetrics

    class NoMetrics(GatewayMetrics):
        """A gateway's metrics switched off (bench only): a call's observation is dropped."""

        def observe_call(self, **_: Any) -> None:
            pass

    return NoMetrics()


def _install_tracing() -> None:
    from collections.abc import Sequence

    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Discard(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    trace.set_tracer_provider(provider)


async def components(gw: Any) -> list[tuple[str, float]]:
    """Median wall time of each step of the call path, timed alone (n=1000 each).

    The SQLite steps are the ones cProfile cannot see: aiosqlite runs them on its own thread,
    and the event loop waits for the hop there and back. Each lookup is timed as the call path
    makes it now (from memory, after one read of the access counter) and with the cache bypassed
    (what every call paid before); the audit row as queued and as an inline INSERT.
    """
    from mcp_gateway.auth import LastMeterAuth
    from mcp_gateway.execution import build_request
    from mcp_gateway.primitives.redaction import Redactor
    from mcp_gateway.services.audit import Auditor, args_preview
    from mcp_gateway.services.identity import OPERATOR
    from mcp_gateway.services.tokens import TokenService
    from mcp_gateway.store._access import AccessCache
    from mcp_gateway.vocabulary.clock import SystemClock

    action = gw._index.resolve(TOOL)
    cfg = gw.manifest.connector("bench")
    base_url = gw._catalogs.loaded["bench"].base_url
    sealed = await gw._vault.sealed("bench", principal=OPERATOR.user)
    tokens = TokenService(gw._store, SystemClock())
    _, token = await tokens.create("bench")
    data = json.loads(BODY)
    await gw.auditor.flush()
    row = (await gw._store.list_audit(1))[0]  # a real row of the calls above
    access = gw._store._access
    uncached = AccessCache(lambda: None)
    inline = Auditor(gw._store)

    async def bypassing(lookup: Awaitable[Any]) -> None:
        gw._store._access = uncached
        try:
            await lookup
        finally:
            gw._store._access = access

    def redact() -> None:
        redactor = Redactor()
        redactor.add(sealed.open())
        redactor.redact(data)

    def auth_flow() -> None:
        request = build_request(action, ARGS, base_url=base_url, static_headers=cfg.headers)
        next(LastMeterAuth(cfg.auth, sealed).auth_flow(request))

    steps: list[tuple[str, Callable[[], Any]]] = [
        ("index.resolve (name -> action)", lambda: gw._index.resolve(TOOL)),
        ("jsonschema validation (Catalogs.validate)", lambda: gw._catalogs.validate(action, ARGS)),
        ("policy evaluation (Permissions.verdict)", lambda: gw._permissions.verdict(action, ARGS)),
        ("build_request", lambda: build_request(action, ARGS, base_url=base_url, static_headers=cfg.headers)),
        ("decrypt (SealedCredential.open)", sealed.open),
        ("build_request + LastMeterAuth (decrypt, apply)", auth_flow),
        ("redaction (Redactor.add + redact of the body)", redact),
        ("audit row: args_preview + fingerprint", lambda: args_preview(ARGS)),
    ]
    if gw._store._probe is not None:
        steps.append(("access counter read (sync sqlite3, on the loop)", gw._store._probe.read))
    async_steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("vault lookup, cached (CredentialVault.sealed)", lambda: gw._vault.sealed("bench", principal="operator")),
        (
            "vault lookup, uncached (2 SELECTs)",
            lambda: bypassing(gw._vault.sealed("bench", principal="operator")),
        ),
        ("audit record, queued (Auditor.record)", lambda: gw.auditor.record(row)),
        ("audit record, inline (1 INSERT)", lambda: inline.record(row)),
        ("HTTP token check, cached (TokenService.verify)", lambda: tokens.verify(token)),
        ("HTTP token check, uncached (1 SELECT)", lambda: bypassing(tokens.verify(token))),
    ]
    out = []
    for name, fn in steps:
        samples = []
        for _ in range(1000):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        out.append((name, statistics.median(samples)))
    for name, afn in async_steps:
        samples = []
        for _ in range(1000):
            t0 = time.perf_counter()
            await afn()
            samples.append(time.perf_counter() - t0)
        out.append((name, statistics.median(samples)))
        await gw.auditor.flush()  # the queued rows are written before the next step is timed
    return out


def hotspots(profiler: cProfile.Profile, calls: int, *, own: bool, key: str, limit: int = 10) -> list[str]:
    table: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = vars(
        pstats.Stats(profiler, stream=io.StringIO())
    )["stats"]  # the raw table, undeclared in typeshed
    rows = []
    for (filename, line, func), (_, ncalls, tottime, cumtime, _) in table.items():
        if own and "/mcp_gateway/" not in filename:
            continue
        where = filename.split("/mcp_gateway/")[-1] if "/mcp_gateway/" in filename else _short(filename)
        rows.append((cumtime if key == "cum" else tottime, tottime, cumtime, ncalls, f"{where}:{line}({func})"))
    rows.sort(reverse=True)
    return [
        f"  {cum / calls * 1e6:8.1f} µs cum  {tot / calls * 1e6:8.1f} µs self  {ncalls / calls:6.1f}x  {name}"
        for _, tot, cum, ncalls, name in rows[:limit]
    ]


def _short(filename: str) -> str:
    for marker in ("site-packages/", "lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


# -- main -------------------------------------------------------------------------------------


def machine() -> str:
    """CPUs, their model and the load averages (1, 5 and 15 minutes): what a figure was measured on."""
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        "unknown CPU",
    )
    load = " / ".join(Path("/proc/loadavg").read_text().split()[:3])
    return f"{os.cpu_count()} CPUs ({model}), load average {load}"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.2f}"


def print_table(results: list[Result], floor: Result) -> None:
    columns = ("p50 ms", "p99 ms", "calls/s", "+p50 ms", "x p50", "cli CPU", "srv CPU")
    head = f"{'path':54} " + " ".join(f"{c:>8}" if c != "x p50" else f"{c:>6}" for c in columns)
    print(head)
    print("-" * len(head))
    for r in results:
        extra = r.p50 - floor.p50
        print(
            f"{r.label:54} {_ms(r.p50):>8} {_ms(r.p99):>8} {r.rate:8.0f} {_ms(extra) if r is not floor else '':>8} "
            f"{r.p50 / floor.p50:6.2f} {_ms(r.client_cpu):>8} {_ms(r.server_cpu):>8}"
        )


async def main(opts: argparse.Namespace) -> None:
    global ROUNDS
    n, warmup, ROUNDS = opts.n, opts.warmup, opts.rounds
    with upstream_process() as upstream, tempfile.TemporaryDirectory(prefix="bench-call-") as tmp:
        await run_all(Path(tmp), upstream, n, warmup, opts)


async def run_all(root: Path, upstream: str, n: int, warmup: int, opts: argparse.Namespace) -> None:
    manifest = root / "bench.yaml"
    manifest.write_text(TINY_MANIFEST.format(upstream=upstream, pages_port=_free_port()))
    print(
        f"n={n} sequential calls after {warmup} warm-up, {ROUNDS} rounds; upstream {upstream} (own process); "
        f"{machine()} at start"
    )
    print(f"GET {len(BODY)}-byte JSON; tool {TOOL} {json.dumps(ARGS)}; bearer auth from the vault\n")

    async with httpx2.AsyncClient(trust_env=False) as http:

        async def direct() -> None:
            (await http.get(f"{upstream}/items/1")).raise_for_status()

        floor = await measure("(a) direct httpx2 GET", direct, n=n, warmup=warmup)

    if opts.e2e_only:
        runs = await end_to_end_runs(root, manifest, upstream, {}, opts)
        print_table([row.result for row in runs[-1]], runs[-1][0].result)
        print("\n+p50 / x p50: against the first row. cli CPU: this process per call. srv CPU: the server's.")
        print_budget_tables(runs)
        print(f"\n{machine()} at the end")
        return
    inproc = await in_process(root, manifest, n=n, warmup=warmup, profile=opts.profile, costs_only=opts.costs)
    if opts.costs:
        print_table([floor, *(inproc[key] for key in _COST_VARIANTS)], floor)
        print_production_costs(inproc)
        return
    results = [
        floor,
        inproc["b"],
        inproc["b_lazy_audit"],
        inproc["b_no_metrics"],
        inproc["b_tracing"],
        inproc["b_all_off"],
        inproc["b_threaded"],
        inproc["b_inline_audit"],
        inproc["b_uncached"],
        inproc["b_before"],
    ]
    sizes: dict[str, Any] = {}

    e2e: list[list[E2ERow]] = []
    if not opts.skip_e2e:
        e2e = await end_to_end_runs(root, manifest, upstream, sizes, opts)
        results += [row.result for row in e2e[-1]]

    print_table(results, floor)
    print("\n+p50 / x p50: against (a). cli CPU: this process per call ((b) = gateway + client). srv CPU: server.")
    b = inproc["b"]
    print(
        f"\nin-process gateway overhead: +{_ms(b.p50 - floor.p50)} ms p50, "
        f"+{_ms(b.client_cpu - floor.client_cpu)} ms CPU per call (SPEC 12 target: <= 1 ms p50)"
    )
    print_production_costs(inproc)
    if e2e:
        print_budget_tables(e2e)

    if not opts.skip_sync:
        await sync_and_sizes(root, sizes, opts)
    if not opts.skip_rss:
        resident_memory(root, upstream, opts.tracemalloc)

    print("\ncall-path steps timed alone (median wall per op, n=1000):")
    for name, seconds in inproc["components"]:
        print(f"  {seconds * 1e6:8.1f} µs  {name}")

    calls = opts.profile
    if calls <= 0:  # --profile 0: no profile wanted
        return
    print(f"\ncProfile of (b), {calls} calls, event-loop thread only (SQLite runs on aiosqlite's thread):")
    print("top 10 cumulative, mcp_gateway's own code (per call):")
    print("\n".join(hotspots(inproc["profile"], calls, own=True, key="cum")))
    print("top 10 self time, any code (per call):")
    print("\n".join(hotspots(inproc["profile"], calls, own=False, key="self")))


@dataclass
class E2EServer:
    """One MCP server of the end-to-end table: its HTTP process (both protocol revisions), its stdio
    command, and the tool that does the GET."""

    tag: str
    name: str
    tool: str
    args: dict[str, Any]
    env: dict[str, str]
    http: list[str]
    """Arguments after the interpreter for the HTTP server on ``port``."""
    port: int
    health: str
    stdio: list[str]
    token: str | None = None


E2E_TRANSPORTS = ("stdio", "HTTP legacy", "HTTP auto")
"""stdio; streamable HTTP as a 2025-11-25 client speaks it (a session); as a 2026-07-28 one (``auto``)."""


@dataclass
class E2ERow:
    server: E2EServer
    transport: str
    result: Result


def _gateway_server(root: Path, manifest: Path, tag: str, name: str, fast: str) -> E2EServer:
    """``mcp-gateway serve`` on a state folder of its own, with ``MCP_GATEWAY_FAST_PATHS=fast``."""
    state = root / f"e2e-fast-{fast}"
    env = _env(state) | {"MCP_GATEWAY_FAST_PATHS": fast}
    _cli(env, "secret", "set", "bench", "--manifest", str(manifest), input=SECRET)
    token = json.loads(_cli(env, "token", "create", "--agent", "bench", "--json", "--manifest", str(manifest)))
    port = _free_port()
    # --state-dir repeats the environment's, so that the two gateways' stdio commands differ
    # (``_child_pid`` tells their processes apart by their arguments).
    serve = ["-m", "mcp_gateway", "serve", "--manifest", str(manifest), "--state-dir", str(state)]
    http = [*serve, "--transport", "http", "--port", str(port)]
    stdio = [sys.executable, *serve]
    call = {"tool": TOOL, "args": ARGS}
    return E2EServer(tag, name, "call", call, env, http, port, "/healthz", stdio, token["token"])


def e2e_servers(root: Path, manifest: Path, upstream: str, *, peers: bool) -> list[E2EServer]:
    """The gateway with its fast paths on and off, the SDK floor, and each installed peer."""
    servers = [
        _gateway_server(root, manifest, "c", "gateway", "1"),
        _gateway_server(root, manifest, "c0", "gateway, fast paths off", "0"),
    ]
    port = _free_port()
    floor_http = [__file__, "--serve-floor", "http", "--upstream", upstream, "--port", str(port)]
    floor_stdio = [sys.executable, __file__, "--serve-floor", "stdio", "--upstream", upstream]
    env = _env(root / "e2e-floor")
    servers.append(E2EServer("f", "SDK floor", "get_item", ARGS, env, floor_http, port, "/", floor_stdio))
    if not peers:
        return servers
    spec = root / "peer-openapi.json"
    spec.write_text(json.dumps(peer_spec(upstream)))
    absent = missing_peers()
    for number, peer in enumerate(PEERS, start=1):
        if peer in absent:
            continue
        port = _free_port()
        serve = [__file__, "--serve-peer", peer.key, "--upstream", upstream, "--spec", str(spec)]
        http = [*serve, "--transport", "http", "--port", str(port)]
        stdio = [sys.executable, *serve, "--transport", "stdio"]
        env = _env(root / "e2e-peers") | peer_env(spec, upstream)
        servers.append(E2EServer(f"p{number}", peer.label, peer.tool, ARGS, env, http, port, peer.http_health, stdio))
    return servers


def report_missing_peers() -> None:
    for peer in missing_peers():
        print(f"peer {peer.label} not installed (module {peer.module}): pip install -e '.[bench]'; left out")


async def end_to_end(
    root: Path, manifest: Path, upstream: str, sizes: dict[str, Any], *, n: int, warmup: int, runs: int, peers: bool
) -> list[list[E2ERow]]:
    """(c), (c0), (f) and the peers over stdio and streamable HTTP (both protocol revisions), all
    running at once, measured in interleaved rounds; ``runs`` times over the same processes."""
    servers = e2e_servers(root, manifest, upstream, peers=peers)
    async with AsyncExitStack() as stack:
        where: dict[str, tuple[E2EServer, str]] = {}
        paths: list[E2EPath] = []
        for server in servers:
            pid = await stack.enter_async_context(subprocess_http(server.http, server.env, server.port, server.health))
            url = f"http://127.0.0.1:{server.port}"
            for mode, transport in (("legacy", "HTTP legacy"), ("auto", "HTTP auto")):
                label = f"({server.tag}) {server.name}, {transport}"
                path = await stack.enter_async_context(
                    mcp_http(label, url, server.token, server.tool, server.args, pid=pid, mode=mode)
                )
                paths.append(path)
                where[path.label] = (server, transport)
                if server.tag == "c":
                    tiny = sizes.setdefault("tiny", {"tools_list_json": path.tools_bytes})
                    tiny[f"http_body_{mode}"] = path.http_body
        for server in servers:
            label = f"({server.tag}) {server.name}, stdio"
            path = await stack.enter_async_context(mcp_stdio(label, server.stdio, server.env, server.tool, server.args))
            paths.append(path)
            where[path.label] = (server, "stdio")
        measured = []
        for _ in range(runs):
            results = await measure_interleaved(paths, n=n, warmup=warmup)
            measured.append([E2ERow(*where[r.label], r) for r in results])
        return measured


PRODUCTION_TARGET_MS = 0.3
_COST_VARIANTS = ("b", "b_lazy_audit", "b_no_metrics", "b_tracing", "b_all_off", "b_threaded")


def print_production_costs(inproc: dict[str, Any]) -> None:
    """Issue 12: what durable audit, metrics and tracing each add to the median call (on minus off),
    and together (all on minus all off); target <= 0.3 ms together."""
    b = inproc["b"]
    rows = [
        ("durable audit", b, inproc["b_lazy_audit"]),
        ("metrics", b, inproc["b_no_metrics"]),
        ("tracing (SDK, spans discarded)", inproc["b_tracing"], b),
        ("all three", inproc["b_tracing"], inproc["b_all_off"]),
    ]
    print(f"\nproduction costs per call, in process (on minus off; target together <= {PRODUCTION_TARGET_MS} ms):")
    print(f"  {'':32} {'on p50':>8} {'off p50':>8} {'+p50 ms':>8} {'+CPU ms':>8}")
    for name, on, off in rows:
        print(
            f"  {name:32} {_ms(on.p50):>8} {_ms(off.p50):>8} {_ms(on.p50 - off.p50):>8} "
            f"{_ms(on.client_cpu - off.client_cpu):>8}"
        )


BUDGET_MS = 0.5
"""Per transport, the gateway may spend at most this much more than the SDK floor, in p50 and in
server CPU per call."""


def print_budget_table(rows: list[E2ERow], title: str) -> None:
    """Per transport, every server against the SDK floor of the same run, the gateway's margins
    against the budget, and whether it is ahead of each peer."""
    print(f"\n{title}; budget: gateway <= SDK floor +{BUDGET_MS:.2f} ms p50 and +{BUDGET_MS:.2f} ms server CPU")
    head = f"{'transport':12} {'server':34} {'p50 ms':>7} {'vs floor':>8} {'srv CPU':>8} {'vs floor':>8}  verdict"
    print(head)
    print("-" * len(head))
    for transport in E2E_TRANSPORTS:
        here = [row for row in rows if row.transport == transport]
        floor = next((row.result for row in here if row.server.tag == "f"), None)
        if floor is None:
            continue
        gateway = next((row.result for row in here if row.server.tag == "c"), None)
        for row in here:
            r = row.result
            dp, dc = (r.p50 - floor.p50) * 1000, ((r.server_cpu or 0) - (floor.server_cpu or 0)) * 1000
            verdict = ""
            if row.server.tag in ("c", "c0"):
                verdict = "within budget" if dp <= BUDGET_MS and dc <= BUDGET_MS else "OVER budget"
            elif row.server.tag.startswith("p") and gateway is not None:
                ahead_p50 = "ahead" if gateway.p50 < r.p50 else "BEHIND"
                ahead_cpu = "ahead" if (gateway.server_cpu or 0) < (r.server_cpu or 0) else "BEHIND"
                verdict = f"gateway {ahead_p50} on p50, {ahead_cpu} on CPU"
            p50_margin, cpu_margin = (f"{dp:+8.2f}", f"{dc:+8.2f}") if r is not floor else ("", "")
            cells = f"{_ms(r.p50):>7} {p50_margin:>8} {_ms(r.server_cpu):>8} {cpu_margin:>8}"
            print(f"{transport:12} {row.server.name:34} {cells}  {verdict}")
    # On a shared 2-core machine one round swings by more than the budget: each round's margins say
    # whether an "OVER" (or a "within") stands out of that noise.
    if not any(row.result.rounds for row in rows):
        return
    print("  the gateway's margins per round (+p50 ms; +server CPU ms):")
    for transport in E2E_TRANSPORTS:
        for tag in ("c", "c0"):
            g = next((row.result for row in rows if row.transport == transport and row.server.tag == tag), None)
            f = next((row.result for row in rows if row.transport == transport and row.server.tag == "f"), None)
            if g is None or f is None or not g.rounds or not f.rounds:
                continue
            cells = [
                f"{(a.p50 - b.p50) * 1000:+.2f}; {((a.server_cpu or 0) - (b.server_cpu or 0)) * 1000:+.2f}"
                for a, b in zip(g.rounds, f.rounds, strict=False)
            ]
            print(f"    {transport:12} {'fast paths ' + ('on' if tag == 'c' else 'off'):16} " + "   ".join(cells))


def median_of_runs(runs: list[list[E2ERow]]) -> list[E2ERow]:
    """Each server and transport: the median over runs of its p50 and of its server CPU per call (the
    margins then compare those medians with the floor's)."""
    merged = []
    for first in runs[0]:
        same = [row.result for run in runs for row in run if row.result.label == first.result.label]
        result = Result(
            first.result.label,
            [x for r in same for x in r.latencies],
            statistics.median(r.client_cpu for r in same),
            statistics.median(r.server_cpu or 0.0 for r in same),
            sum(r.wall for r in same),
        )
        result.p50_override = statistics.median(r.p50 for r in same)
        merged.append(E2ERow(first.server, first.transport, result))
    return merged


def print_budget_tables(runs: list[list[E2ERow]]) -> None:
    for number, rows in enumerate(runs, start=1):
        rounds = len(rows[0].result.rounds or [])
        print_budget_table(rows, f"run {number} of {len(runs)}: medians over {rounds} interleaved rounds")
    if len(runs) > 1:
        print_budget_table(median_of_runs(runs), f"the median of the {len(runs)} runs")


async def end_to_end_runs(
    root: Path, manifest: Path, upstream: str, sizes: dict[str, Any], opts: argparse.Namespace
) -> list[list[E2ERow]]:
    if not opts.no_peers:
        report_missing_peers()
    return await end_to_end(
        root, manifest, upstream, sizes, n=opts.n, warmup=opts.warmup, runs=opts.runs, peers=not opts.no_peers
    )


async def sync_and_sizes(root: Path, sizes: dict[str, Any], opts: argparse.Namespace) -> None:
    state = root / "default-state"
    runs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, __file__, "--open-default", str(state)],
            capture_output=True,
            text=True,
            env=_env(state),
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"opening the default manifest failed:\n{proc.stderr}")
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    print(f"\ndefault manifest (GitHub + petstore, {cold['actions']} actions), each open in a fresh process:")
    print(
        f"  cold sync     open_gateway {cold['open_s']:.2f} s (target <= 3 s); process {cold['process_s']:.2f} s "
        f"incl. {cold['import_s']:.2f} s imports; peak RSS {cold['rss_mb']:.0f} MB"
    )
    print(
        f"  warm restart  open_gateway {warm['open_s']:.2f} s (target <= 0.5 s); process {warm['process_s']:.2f} s "
        f"incl. {warm['import_s']:.2f} s imports; peak RSS {warm['rss_mb']:.0f} MB"
    )
    sizes["default"] = {"tools_list_json": warm["tools_list_bytes"]}
    if not opts.skip_e2e:
        port = _free_port()
        env = _env(state)
        token = json.loads(_cli(env, "token", "create", "--agent", "bench", "--json"))["token"]
        serve = ["-m", "mcp_gateway", "serve", "--transport", "http", "--port", str(port)]
        async with subprocess_http(serve, env, port, "/healthz"):
            from mcp import Client
            from mcp.client.streamable_http import streamable_http_client

            for mode in ("legacy", "auto"):
                hook = ToolsListSize()
                headers = {"Authorization": f"Bearer {token}"}
                async with httpx2.AsyncClient(headers=headers, event_hooks={"response": [hook]}) as http:
                    url = f"http://127.0.0.1:{port}/mcp"
                    async with Client(streamable_http_client(url, http_client=http), mode=mode) as c:
                        await c.list_tools()
                sizes["default"][f"http_body_{mode}"] = hook.bytes
    print("tools/list size in bytes (must not grow with the catalog; target <= 4096):")
    for name, s in sizes.items():
        print(
            f"  {name:8} catalog: tools JSON {s['tools_list_json']:6}   raw HTTP body: "
            f"legacy {s.get('http_body_legacy') or '-'}, auto {s.get('http_body_auto') or '-'}"
        )


def resident_memory(root: Path, upstream: str, top: int) -> None:
    """SPEC 12: <= 150 MB resident with 10,000 actions. Cold (every spec parsed) and warm (catalogs
    read back from SQLite, as a restarted ``serve``), each in a fresh process; for the replicated
    catalog and for the distinct one (``rss_manifest``), where copies cannot share anything."""
    for variant in ("replicated", "distinct"):
        manifest = root / f"rss-{variant}.yaml"
        manifest.write_text(rss_manifest(upstream, root / "rss-specs" if variant == "distinct" else None))
        state = root / f"rss-state-{variant}"
        runs = []
        # tracemalloc costs memory itself, so the traced run is an extra one, after the measured two.
        for phase, traced in (("cold", 0), ("warm", 0), ("warm, traced", top))[: 3 if top else 2]:
            proc = subprocess.run(
                [sys.executable, __file__, "--rss-gateway", str(state), str(manifest), "--tracemalloc", str(traced)],
                capture_output=True,
                text=True,
                env=_env(state),
                check=False,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"the {variant} {phase} RSS run failed:\n{proc.stderr}")
            runs.append((phase, json.loads(proc.stdout.strip().splitlines()[-1])))
        actions = runs[0][1]["actions"]
        copies = ", ".join(f"{n} x{c}" for n, _, c in RSS_CONNECTORS)
        once = ", ".join(n for n, _ in RSS_ONCE)
        print(f"\nresident memory, {actions} actions ({copies} + {once}; {variant}", end="")
        print(", copies rewritten so that none shares a value" if variant == "distinct" else "", end="")
        print(f"), each open in a fresh process (target <= {RSS_TARGET_MB} MB):")
        for phase, r in runs[:2]:
            print(
                f"  {phase:5} open_gateway {r['open_s']:.2f} s; VmRSS {r['rss_imports_mb']:.0f} MB after imports, "
                f"{r['rss_open_mb']:.0f} MB after the open, {r['rss_calls_mb']:.0f} MB after {r['calls']} "
                f"discover+describe+call rounds; peak {r['hwm_mb']:.0f} MB"
            )
        for phase, r in runs[2:]:
            if r.get("top"):
                print(f"  tracemalloc, {phase} open: {r['traced_mb']:.0f} MB of Python objects; biggest allocators:")
                for where, mb, count in r["top"]:
                    print(f"    {mb:7.1f} MB {count:9} blocks  {_short(where)}")


async def shared_buckets(n: int) -> None:
    """The cost of a rate limit that holds across instances: one ``PostgresBuckets.take`` (one
    atomic upsert on a throwaway loopback cluster, see tests/support/postgres.py) per applicable
    rule per call, against the in-memory bucket of a single instance."""
    from mcp_gateway.primitives.traffic import MemoryBuckets
    from mcp_gateway.store.postgres import PostgresBuckets, PostgresStore
    from tests.support.postgres import start_cluster

    cluster = start_cluster()
    try:
        async with PostgresStore(cluster.url(cluster.create_database("bench"))) as store:
            buckets, memory = PostgresBuckets(store), MemoryBuckets()

            async def shared() -> None:
                await buckets.take("bench", rate=1e9, capacity=1e9)

            async def local() -> None:
                memory.take("bench", rate=1e9, capacity=1e9, now=time.monotonic())

            print()
            for result in (
                await measure("rate limit, in memory (one instance)", local, n=n, warmup=50),
                await measure("rate limit, PostgreSQL (shared)", shared, n=n, warmup=50),
            ):
                print(f"{result.label:<40} p50 {result.p50 * 1000:7.3f} ms  CPU {result.client_cpu * 1000:6.3f} ms")
    finally:
        cluster.stop()


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=300, help="measured calls per path")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument(
        "--rounds", type=int, default=ROUNDS, help="rounds per path (side by side: their medians; alone: the lowest)"
    )
    p.add_argument("--profile", type=int, default=500, help="calls of (b) under cProfile")
    p.add_argument("--skip-e2e", action="store_true", help="only (a) and (b)")
    p.add_argument("--e2e-only", action="store_true", help="only the end-to-end servers and the budget table")
    p.add_argument("--runs", type=int, default=1, help="end-to-end runs of --rounds rounds; then their median")
    p.add_argument("--no-peers", action="store_true", help="leave FastMCP and mcp-openapi-proxy out")
    p.add_argument("--skip-sync", action="store_true", help="no cold sync / warm restart of the default manifest")
    p.add_argument("--skip-rss", action="store_true", help="no resident-memory measurement at ~10,000 actions")
    p.add_argument("--tracemalloc", type=int, default=0, metavar="N", help="with the RSS run: the N biggest allocators")
    p.add_argument("--buckets", action="store_true", help="only: the cost of PostgreSQL-shared rate limits per call")
    p.add_argument("--costs", action="store_true", help="only (a) and the production-costs table of (b)")
    p.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--serve-floor", choices=["stdio", "http"], help=argparse.SUPPRESS)
    p.add_argument("--serve-peer", choices=[peer.key for peer in PEERS], help=argparse.SUPPRESS)
    p.add_argument("--transport", choices=["stdio", "http"], help=argparse.SUPPRESS)
    p.add_argument("--spec", help=argparse.SUPPRESS)
    p.add_argument("--upstream", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--open-default", metavar="STATE_DIR", help=argparse.SUPPRESS)
    p.add_argument("--rss-gateway", nargs=2, metavar=("STATE_DIR", "MANIFEST"), help=argparse.SUPPRESS)
    return p.parse_args()


if __name__ == "__main__":
    options = parse_args()
    if options.serve_upstream:
        serve_upstream()
    elif options.serve_floor:
        serve_floor(options.serve_floor, options.upstream, options.port)
    elif options.serve_peer:
        serve_peer(options.serve_peer, options.transport, options.upstream, options.port, options.spec)
    elif options.open_default:
        open_default(options.open_default)
    elif options.rss_gateway:
        state_dir, manifest_path = options.rss_gateway
        rss_gateway(state_dir, manifest_path, options.tracemalloc)
    elif options.buckets:
        anyio.run(shared_buckets, options.n)
    else:
        anyio.run(main, options)
