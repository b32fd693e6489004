"""Both MCP servers of ``bench_call``'s floor table under one load, profiled side by side.

``bench_call`` says how much more CPU the gateway's ``serve`` spends per call than the thinnest SDK
server doing the same upstream GET; this says where. For each transport asked for, it starts the
gateway and the floor (``bench_call --serve-floor``) as ``bench_call`` does, each under a cProfile
that this script switches on by signal after the warm-up (SIGUSR1) and dumps after the measured
calls (SIGUSR2), so start-up and warm-up stay out. Then, per call: each thread's CPU (from
/proc/<pid>/task, so a worker thread's share is seen), the Python function calls made, and the
functions matching ``--match`` with their calls, own time and cumulative time, gateway beside floor.

cProfile's times are inflated (several fold for Python-heavy code) and coroutine resumptions count
as calls; compare the two columns, not either with ``bench_call``'s CPU.

Usage (from the repo root): python scripts/profile_servers.py [--calls 1000] [--transport stdio auto legacy]
    [--match REGEX] [--lines 50] [--sort cum|self|calls]
"""

# Setup blocks on purpose, like bench_call's: nothing else runs on the loop meanwhile.
# ruff: noqa: ASYNC240

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import runpy
import signal
import sys
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import bench_call  # noqa: E402 - the same upstream, manifest, tool, floor and clients as bench_call

TRANSPORTS = ("stdio", "auto", "legacy")
Row = tuple[float, float, float]
"""Per call: calls (coroutine resumptions included), own time (µs), cumulative time (µs)."""


def profiled(out: str, argv: list[str]) -> None:
    """Run ``argv`` (``-m module …`` or ``script …``) in this process, profiled between SIGUSR1 and SIGUSR2."""
    profiler = cProfile.Profile()

    def start(*_: object) -> None:
        profiler.enable()

    def stop(*_: object) -> None:
        profiler.disable()
        profiler.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        runpy.run_path(argv[0], run_name="__main__")


def thread_cpu(pid: int) -> dict[int, float]:
    """utime + stime of each thread of ``pid``, in seconds."""
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / ticks
    return out


async def measure(path: bench_call.E2EPath, calls: int, warmup: int) -> str:
    """Warm up, profile ``calls`` calls; a line per thread that spent CPU meanwhile."""
    assert path.pid is not None
    for _ in range(warmup):
        await path.call()
    os.kill(path.pid, signal.SIGUSR1)
    await anyio.sleep(0.3)  # the signal is handled when the server's loop next runs Python code
    before = thread_cpu(path.pid)
    for _ in range(calls):
        await path.call()
    after = thread_cpu(path.pid)
    os.kill(path.pid, signal.SIGUSR2)
    await anyio.sleep(1.0)  # the dump
    lines = []
    for tid, seconds in sorted(after.items()):
        spent = (seconds - before.get(tid, 0.0)) / calls * 1000
        if spent > 0:
            lines.append(f"    thread {tid}{' (main)' if tid == path.pid else ''}: {spent:.2f} ms CPU per call")
    return "\n".join(lines)


def rows(stats_file: Path, calls: int) -> dict[str, Row]:
    # ``Stats.stats`` (the raw table) is undocumented and untyped: (file, line, name) -> (cc, nc, tt, ct, callers).
    table = pstats.Stats(str(stats_file)).stats  # pyright: ignore[reportAttributeAccessIssue]
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = table
    out: dict[str, Row] = {}
    for (filename, line, name), (_, ncalls, own, cumulative, _) in stats.items():
        where = filename.split("site-packages/")[-1].replace(str(REPO) + "/", "")
        out[f"{name} ({where}:{line})"] = (ncalls / calls, own / calls * 1e6, cumulative / calls * 1e6)
    return out


def compare(gateway: dict[str, Row], floor: dict[str, Row], *, match: str | None, lines: int, sort: str) -> None:
    def total(table: dict[str, Row]) -> tuple[float, float]:
        return sum(r[0] for r in table.values()), sum(r[1] for r in table.values())

    (g_calls, g_own), (f_calls, f_own) = total(gateway), total(floor)
    print(
        f"  Python calls per call: gateway {g_calls:.0f}, floor {f_calls:.0f}; own time: {g_own:.0f} vs {f_own:.0f} µs"
    )
    column = {"calls": 0, "self": 1, "cum": 2}[sort]
    none: Row = (0.0, 0.0, 0.0)
    keys = [k for k in gateway.keys() | floor.keys() if match is None or re.search(match, k)]
    keys.sort(key=lambda k: -max(gateway.get(k, none)[column], floor.get(k, none)[column]))
    print(f"  {'gw calls':>8} {'gw own':>8} {'gw cum':>9} | {'fl calls':>8} {'fl own':>8} {'fl cum':>9}  (µs per call)")
    for key in keys[:lines]:
        g, f = gateway.get(key, none), floor.get(key, none)
        print(f"  {g[0]:8.1f} {g[1]:8.1f} {g[2]:9.1f} | {f[0]:8.1f} {f[1]:8.1f} {f[2]:9.1f}  {key[:120]}")


async def main(opts: argparse.Namespace) -> None:
    with bench_call.upstream_process() as upstream, tempfile.TemporaryDirectory(prefix="profile-servers-") as tmp:
        await run(Path(tmp), upstream, opts)


async def run(root: Path, upstream: str, opts: argparse.Namespace) -> None:
    manifest = root / "bench.yaml"
    manifest.write_text(bench_call.TINY_MANIFEST.format(upstream=upstream, pages_port=bench_call._free_port()))
    state = root / "e2e"
    env = bench_call._env(state)
    bench_call._cli(env, "secret", "set", "bench", "--manifest", str(manifest), input=bench_call.SECRET)
    created = bench_call._cli(env, "token", "create", "--agent", "bench", "--json", "--manifest", str(manifest))
    token = json.loads(created)["token"]
    call = {"tool": bench_call.TOOL, "args": bench_call.ARGS}
    me = str(Path(__file__).resolve())

    def wrapped(name: str, argv: list[str]) -> list[str]:
        return [me, "--profiled", str(root / f"{name}.prof"), "--", *argv]

    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"{opts.calls} calls per server after {opts.warmup} warm-up; load average {load} at start")
    for transport in opts.transport:
        async with AsyncExitStack() as stack:
            paths: dict[str, bench_call.E2EPath] = {}
            if transport == "stdio":
                gateway = wrapped("gateway", ["-m", "mcp_gateway", "serve", "--manifest", str(manifest)])
                floor = wrapped("floor", [bench_call.__file__, "--serve-floor", "stdio", "--upstream", upstream])
                paths["gateway"] = await stack.enter_async_context(
                    bench_call.mcp_stdio("gateway", [sys.executable, *gateway], env, "call", call)
                )
                paths["floor"] = await stack.enter_async_context(
                    bench_call.mcp_stdio(
                        "floor", [sys.executable, *floor], bench_call._env(state), "get_item", bench_call.ARGS
                    )
                )
            else:
                port, floor_port = bench_call._free_port(), bench_call._free_port()
                serve = ["-m", "mcp_gateway", "serve", "--transport", "http", "--port", str(port)]
                floor_serve = [bench_call.__file__, "--serve-floor", "http", "--upstream", upstream]
                gateway_pid = await stack.enter_async_context(
                    bench_call.subprocess_http(
                        wrapped("gateway", [*serve, "--manifest", str(manifest)]), env, port, "/healthz"
                    )
                )
                floor_pid = await stack.enter_async_context(
                    bench_call.subprocess_http(
                        wrapped("floor", [*floor_serve, "--port", str(floor_port)]),
                        bench_call._env(state),
                        floor_port,
                        "/",
                    )
                )
                url = "http://127.0.0.1:{}"
                paths["gateway"] = await stack.enter_async_context(
                    bench_call.mcp_http(
                        "gateway", url.format(port), token, "call", call, pid=gateway_pid, mode=transport
                    )
                )
                paths["floor"] = await stack.enter_async_context(
                    bench_call.mcp_http(
                        "floor",
                        url.format(floor_port),
                        None,
                        "get_item",
                        bench_call.ARGS,
                        pid=floor_pid,
                        mode=transport,
                    )
                )
            print(f"\n{transport}:")
            for name, path in paths.items():
                print(f"  {name}:\n{await measure(path, opts.calls, opts.warmup)}")
            tables = {name: rows(root / f"{name}.prof", opts.calls) for name in paths}
        compare(tables["gateway"], tables["floor"], match=opts.match, lines=opts.lines, sort=opts.sort)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=1000, help="profiled calls per server")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--transport", nargs="+", choices=TRANSPORTS, default=list(TRANSPORTS))
    p.add_argument("--match", default=None, help="only functions whose 'name (file:line)' matches this regex")
    p.add_argument("--lines", type=int, default=50)
    p.add_argument("--sort", choices=["cum", "self", "calls"], default="cum")
    return p.parse_args(argv)


def _entry(argv: list[str]) -> Callable[[], None] | None:
    """``--profiled OUT -- ARGV…``: this process is a server run under the signal-driven profiler."""
    if len(argv) > 3 and argv[0] == "--profiled" and argv[2] == "--":
        out, target = argv[1], argv[3:]
        return lambda: profiled(out, target)
    return None


if __name__ == "__main__":
    server = _entry(sys.argv[1:])
    if server is not None:
        server()
    else:
        anyio.run(main, parse_args(sys.argv[1:]))
