"""Instructions per call: ``Gateway.call`` against a direct GET of the same upstream, under callgrind.

``bench_call.py`` times the call path, and on a shared 2-core machine its rounds swing by more than
most changes to it (the gateway against the SDK floor moves ±0.5 ms from one round to the next).
This counts instructions instead, which repeat within ~0.2 % from run to run whatever the load, so
two builds can be compared on a busy host: run it on each and compare the columns.

The parent process starts a child under ``valgrind --tool=callgrind`` with instrumentation off. The
child (``--child``) opens the gateway as ``bench_call``'s in-process path (b) does, against the same
loopback upstream (its own process, not counted), warms up, then runs each phase ``--n`` times; the
parent zeroes callgrind's counters before a phase and dumps them after it (``callgrind_control``),
the two meeting through marker files. Counts are of user-space instructions in the child only: the
kernel's share of a call (SQLite's ``pwrite`` and ``fcntl``, socket I/O) is not in them, and the
audit writes that SQLite makes on aiosqlite's thread are (callgrind counts every thread).

Phases: ``Gateway.call`` as wired by ``runtime.open_gateway`` (durable audit, metrics on, no
tracer), a direct ``httpx2`` GET of the same URL (the floor of the call's HTTP work), and
``Gateway.call`` again with its audit record and metrics replaced by no-ops (what the rest costs).

With ``--server``, the MCP server's side of a call instead: ``bench_call``'s streamable HTTP servers
(the gateway's ``serve`` with ``MCP_GATEWAY_FAST_PATHS=1`` and ``=0``, and the SDK floor) each run
under callgrind, instrumentation on only around ``--n`` calls from an SDK client outside valgrind,
for a 2025-11-25 session (``legacy``) and 2026-07-28 requests (``auto``): the instructions behind
``bench_call``'s server CPU column, every thread of the server counted (uvicorn's 0.1 s tick too);
with ``--peers``, FastMCP's ``from_openapi`` server and mcp-openapi-proxy as ``bench_call`` runs them.
stdio is not counted (its server is the client's child, started by the SDK, not under valgrind).

Needs valgrind (``apt-get install valgrind``). A run takes 1-3 minutes (the child's start-up runs
under valgrind too); ``--server`` 10-15 minutes on a busy 2-core host, twice that with ``--peers``.

Usage (from the repo root): python scripts/count_call_instructions.py [--n 200] [--server [--peers]]
"""

# The child polls marker files on purpose: the other side of the handshake is another process, so
# there is no event to wait on. With --server, the servers start and callgrind_control runs while no
# call is in flight, so blocking there delays nothing that is measured.
# ruff: noqa: ASYNC110, ASYNC220

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

PHASES = ("gateway", "direct", "gateway_no_audit_no_metrics")
WARMUP = 300


def _wait_for(marker: Path, child: subprocess.Popen[bytes], timeout: float = 900.0) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if child.poll() is not None:
            raise SystemExit(f"the child ended before {marker.name}; its log: {marker.parent / 'child.log'}")
        if time.monotonic() > deadline:
            child.kill()
            raise SystemExit(f"no {marker.name} after {timeout:.0f} s")
        time.sleep(0.1)


def _control(pid: int, *args: str) -> None:
    # callgrind_control exits 0 even when it found no such process: its "OK." is the answer.
    done = subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True, text=True)
    if "OK." not in done.stdout:
        raise SystemExit(f"callgrind_control {' '.join(args)} {pid}: {done.stdout.strip()} {done.stderr.strip()}")


def parent(n: int) -> None:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("needs valgrind (apt-get install valgrind)")
    work = Path(tempfile.mkdtemp(prefix="count-instructions-"))
    out = work / "cg.out"
    command = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out}",
        sys.executable,
        __file__,
        "--child",
        str(work),
        "--n",
        str(n),
    ]
    started = time.perf_counter()
    with (work / "child.log").open("wb") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for(work / "start.ready", child)
        _control(child.pid, "-i", "on")
        for phase in PHASES:
            _control(child.pid, "-z")
            (work / f"{phase}.go").touch()
            _wait_for(work / f"{phase}.done", child)
            _control(child.pid, "-d", phase)
        (work / "end.go").touch()
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    counts = _dumped_counts(work)
    print(f"instructions per call, {n} calls per phase (callgrind, user space, every thread of the child)")
    print(f"{'phase':34} {'per call':>12}")
    for phase in PHASES:
        print(f"{phase:34} {counts.get(phase, 0) // n:>12,}")
    if "gateway" in counts and "direct" in counts:
        print(f"{'gateway minus direct':34} {(counts['gateway'] - counts['direct']) // n:>12,}")
    print(f"({time.perf_counter() - started:.0f} s; dumps in {work})")


def _dumped_counts(work: Path, out: str = "cg.out") -> dict[str, int]:
    """Each dump's trigger (the phase name given to ``callgrind_control -d``) and its total."""
    counts: dict[str, int] = {}
    for dump in work.glob(f"{out}.*"):
        text = dump.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: dump (\S+)$", text, re.M)
        # "totals", not "summary": a dump taken with instrumentation switched off reports a summary of 0.
        total = re.search(r"^totals: (\d+)$", text, re.M)
        if trigger and total:
            counts[trigger.group(1)] = int(total.group(1))
    return counts


def child(work: Path, n: int) -> None:
    import anyio

    anyio.run(_child, work, n)


async def _child(work: Path, n: int) -> None:
    import bench_call

    with bench_call.upstream_process() as upstream:
        await _measure(work, n, upstream)


async def _measure(work: Path, n: int, upstream: str) -> None:
    import anyio
    import bench_call
    import httpx2

    from mcp_gateway.runtime import Settings, open_gateway
    from mcp_gateway.services.identity import OPERATOR
    from mcp_gateway.vocabulary.model import Ok

    manifest = work / "bench.yaml"
    manifest.write_text(bench_call.TINY_MANIFEST.format(upstream=upstream, pages_port=bench_call._free_port()))
    settings = Settings(
        manifest_path=manifest, state_dir=work / "state", env={"MCP_GATEWAY_MASTER_KEY": bench_call.MASTER_KEY}
    )
    async with open_gateway(settings) as gw, httpx2.AsyncClient(trust_env=False) as http:
        await gw._vault.put("bench", bench_call.SECRET)
        first = await gw.call(OPERATOR, bench_call.TOOL, bench_call.ARGS)
        if not isinstance(first, Ok):
            raise RuntimeError(f"the call failed: {first}")

        async def call() -> None:
            await gw.call(OPERATOR, bench_call.TOOL, bench_call.ARGS)

        async def direct() -> None:
            await http.get(f"{upstream}/items/1")

        class NoAudit:
            async def record(self, row: Any) -> None:
                return None

        for _ in range(WARMUP):
            await call()
            await direct()
        await gw.auditor.flush()
        (work / "start.ready").touch()
        steps: dict[str, Callable[[], Awaitable[None]]] = {
            "gateway": call,
            "direct": direct,
            "gateway_no_audit_no_metrics": call,
        }
        for phase in PHASES:
            if phase == "gateway_no_audit_no_metrics":
                await gw.auditor.flush()
                gateway: Any = gw  # the bench swaps collaborators the types do not allow
                gateway.auditor, gateway.metrics = NoAudit(), bench_call._no_metrics()
            while not (work / f"{phase}.go").exists():
                await anyio.sleep(0.02)
            for _ in range(n):
                await steps[phase]()
            (work / f"{phase}.done").touch()
        while not (work / "end.go").exists():
            await anyio.sleep(0.02)


SERVERS = (("gateway, fast paths on", "1"), ("gateway, fast paths off", "0"), ("SDK floor", "floor"))
"""Each server's name and kind: ``MCP_GATEWAY_FAST_PATHS`` for the gateway, else ``floor`` or a peer's key."""
SERVER_MODES = ("legacy", "auto")
SERVER_WARMUP = 100


def server_counts(n: int, peers: bool) -> None:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("needs valgrind (apt-get install valgrind)")
    import anyio
    import bench_call

    servers = list(SERVERS)
    if peers:
        bench_call.report_missing_peers()
        absent = bench_call.missing_peers()
        servers += [(peer.label, peer.key) for peer in bench_call.PEERS if peer not in absent]
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="count-server-instructions-"))
    counts = anyio.run(_server_counts, work, n, servers)
    print(f"server instructions per MCP call over streamable HTTP, {n} calls (callgrind, every thread of the server)")
    print(f"{'server':26} " + " ".join(f"{mode:>12}" for mode in SERVER_MODES))
    for name, _ in servers:
        print(f"{name:26} " + " ".join(f"{counts[name, mode] // n:>12,}" for mode in SERVER_MODES))
    for name, _ in SERVERS[:2]:
        cells = " ".join(f"{(counts[name, m] - counts['SDK floor', m]) // n:>+12,}" for m in SERVER_MODES)
        print(f"{name.replace('gateway', 'gw') + ' - floor':26} {cells}")
    print(f"({time.perf_counter() - started:.0f} s; dumps in {work})")


@dataclass
class _Server:
    """One HTTP server to count: its command after the interpreter, environment, tool and health path."""

    command: list[str]
    env: dict[str, str]
    tool: str
    args: dict[str, Any]
    token: str | None
    health: str


def _server(work: Path, manifest: Path, upstream: str, kind: str, port: int) -> _Server:
    import bench_call

    if kind == "floor":
        command = [bench_call.__file__, "--serve-floor", "http", "--upstream", upstream, "--port", str(port)]
        return _Server(command, bench_call._env(work / "floor"), "get_item", bench_call.ARGS, None, "/")
    if kind not in ("0", "1"):
        peer = next(peer for peer in bench_call.PEERS if peer.key == kind)
        spec = work / "peer-openapi.json"
        spec.write_text(json.dumps(bench_call.peer_spec(upstream)))
        command = [bench_call.__file__, "--serve-peer", kind, "--upstream", upstream, "--spec", str(spec)]
        command += ["--transport", "http", "--port", str(port)]
        env = bench_call._env(work / "peers") | bench_call.peer_env(spec, upstream)
        return _Server(command, env, peer.tool, bench_call.ARGS, None, peer.http_health)
    fast = kind
    state = work / f"state-{fast}"
    env = bench_call._env(state) | {"MCP_GATEWAY_FAST_PATHS": fast}
    bench_call._cli(env, "secret", "set", "bench", "--manifest", str(manifest), input=bench_call.SECRET)
    created = bench_call._cli(env, "token", "create", "--agent", "bench", "--json", "--manifest", str(manifest))
    command = ["-m", "mcp_gateway", "serve", "--manifest", str(manifest), "--state-dir", str(state)]
    command += ["--transport", "http", "--port", str(port)]
    call = {"tool": bench_call.TOOL, "args": bench_call.ARGS}
    return _Server(command, env, "call", call, json.loads(created)["token"], "/healthz")


async def _server_counts(work: Path, n: int, servers: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    import bench_call

    counts: dict[tuple[str, str], int] = {}
    with bench_call.upstream_process() as upstream:
        manifest = work / "bench.yaml"
        manifest.write_text(bench_call.TINY_MANIFEST.format(upstream=upstream, pages_port=bench_call._free_port()))
        for index, (name, kind) in enumerate(servers):
            out = work / f"server-{index}.cg"
            valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
            port = bench_call._free_port()
            spec = _server(work, manifest, upstream, kind, port)
            with (work / f"server-{index}.log").open("wb") as log:
                server = subprocess.Popen(
                    [*valgrind, sys.executable, *spec.command], env=spec.env, stdout=log, stderr=log
                )
            try:
                _wait_up(f"http://127.0.0.1:{port}{spec.health}", server)
                for mode in SERVER_MODES:
                    label = f"server{index}_{mode}"  # a dump hint must start with a letter
                    url = f"http://127.0.0.1:{port}"
                    async with bench_call.mcp_http(
                        label, url, spec.token, spec.tool, spec.args, pid=server.pid, mode=mode
                    ) as path:
                        for _ in range(SERVER_WARMUP):
                            await path.call()
                        _control(server.pid, "-z")
                        _control(server.pid, "-i", "on")
                        for _ in range(n):
                            await path.call()
                        _control(server.pid, "-i", "off")
                        _control(server.pid, "-d", label)
                    counts[name, mode] = _dumped_counts(work, out.name)[label]
            finally:
                bench_call.stop_process(server, timeout=60)
    return counts


def _wait_up(url: str, server: subprocess.Popen[bytes], timeout: float = 900.0) -> None:
    import httpx2

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server under valgrind ended with {server.returncode}")
        try:
            httpx2.get(url, timeout=5)
            return
        except httpx2.HTTPError:
            time.sleep(0.5)
    server.kill()
    raise SystemExit(f"{url} did not come up under valgrind in {timeout:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="calls per phase")
    parser.add_argument("--server", action="store_true", help="the MCP servers' instructions per call instead")
    parser.add_argument("--peers", action="store_true", help="with --server: FastMCP and mcp-openapi-proxy too")
    parser.add_argument("--child", metavar="DIR", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        child(Path(opts.child), opts.n)
    elif opts.server:
        server_counts(opts.n, opts.peers)
    else:
        parent(opts.n)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
