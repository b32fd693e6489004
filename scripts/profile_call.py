"""The gateway's own CPU per call, without the network: ``Gateway.call`` against a direct GET, both
answered by an in-process transport, in alternating rounds of one process.

``scripts/bench_call.py`` measures against a real upstream, where the socket and the upstream's
scheduling add noise that a loaded machine multiplies. Here both paths get the same answer from an
``httpx2.MockTransport``, so what separates them is the gateway's own work in process (lookup,
validation, policy, credential, request building, auth, audit rows and their SQLite commits,
result cleaning, metrics), measured as CPU time: the minimum over rounds (other processes only ever
add to it) and the median. With ``--profile N``, a cProfile of N calls follows.

Usage (from the repo root): python scripts/profile_call.py [--calls 1000] [--rounds 7] [--profile 0]
"""

# The load average is read between measurements, on purpose, like bench_call's setup.
# ruff: noqa: ASYNC240

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import bench_call  # noqa: E402 - the same manifest, tool, arguments, body and secret as bench_call


def _answer(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, content=bench_call.BODY, headers={"content-type": "application/json"})


async def main(opts: argparse.Namespace) -> None:
    from mcp_gateway.runtime import Settings, open_gateway
    from mcp_gateway.services.identity import OPERATOR

    with tempfile.TemporaryDirectory(prefix="profile-call-") as tmp:
        root = Path(tmp)
        manifest = root / "bench.yaml"
        manifest.write_text(bench_call.TINY_MANIFEST.format(upstream="http://127.0.0.1:9", pages_port=9))
        env = {"MCP_GATEWAY_MASTER_KEY": bench_call.MASTER_KEY}
        settings = Settings(manifest_path=manifest, state_dir=root / "state", env=env)
        async with open_gateway(settings) as gw, httpx2.AsyncClient(transport=httpx2.MockTransport(_answer)) as http:
            await gw._vault.put("bench", bench_call.SECRET)
            # The gateway's shared client answered in process: the same machinery above its transport.
            gw._http._transport = httpx2.MockTransport(_answer)

            async def direct() -> None:
                (await http.get("http://127.0.0.1:9/items/1")).raise_for_status()

            async def call() -> None:
                await gw.call(OPERATOR, bench_call.TOOL, bench_call.ARGS)

            first = await gw.call(OPERATOR, bench_call.TOOL, bench_call.ARGS)
            if first.status != "ok":
                raise RuntimeError(f"the call did not succeed: {first}")
            cpu: dict[str, list[float]] = {"direct": [], "call": []}
            for _ in range(opts.warmup):
                await direct()
                await call()
            for index in range(opts.rounds):
                order = [("direct", direct), ("call", call)]
                for name, run in order if index % 2 == 0 else order[::-1]:
                    started = time.process_time()
                    for _ in range(opts.calls):
                        await run()
                    cpu[name].append((time.process_time() - started) / opts.calls)
            load = Path("/proc/loadavg").read_text().split()[0]
            print(f"{opts.rounds} rounds of {opts.calls} calls per path, load average {load}; CPU per call (µs):")
            for name in ("direct", "call"):
                print(f"  {name:7} min {min(cpu[name]) * 1e6:7.1f}   median {statistics.median(cpu[name]) * 1e6:7.1f}")
            over_min = (min(cpu["call"]) - min(cpu["direct"])) * 1e6
            over_median = (statistics.median(cpu["call"]) - statistics.median(cpu["direct"])) * 1e6
            print(f"  gateway's own work: {over_min:.1f} µs (min), {over_median:.1f} µs (median)")
            if opts.profile > 0:
                profiler = cProfile.Profile()
                profiler.enable()
                for _ in range(opts.profile):
                    await call()
                profiler.disable()
                pstats.Stats(profiler).sort_stats(opts.sort).print_stats(opts.lines)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=1000, help="calls per path per round")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--profile", type=int, default=0, help="then this many calls under cProfile")
    p.add_argument("--sort", default="cumulative", help="pstats sort key for the profile")
    p.add_argument("--lines", type=int, default=40)
    return p.parse_args()


if __name__ == "__main__":
    anyio.run(main, parse_args())
