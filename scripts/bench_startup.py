"""Start-up and CLI timings against issue 14's targets (median of N runs, wall time).

Rows: ``python -c pass`` (the interpreter's own start, included in every other row: in a checkout
with an editable install and ``.pth`` files it costs more than in a wheel install), ``mcp-gateway
--version``, ``connectors``, ``discover x`` (a query nothing matches), ``discover open issues``
(one with hits to show), ``validate`` (each a fresh process on the warm embedded
default: the state folder already holds the synced catalog, and the answers of an earlier stdio
session), and stdio spawn -> first ``tools/list`` answer through the official MCP SDK client, warm and
as a new user's first spawn (a new state folder each time: nothing stored to answer from, no key file).
Targets: every CLI listing command <= 0.4 s, stdio spawn -> tools/list <= 0.5 s, on an idle machine.

Warm means what an installed wheel has: the package's bytecode is compiled first (pip compiles at
install; a checkout run with PYTHONDONTWRITEBYTECODE=1 would recompile every module in every
process). The load average is printed before and after, since on a busy machine every wall time
scales with it; the CLI rows also give the child's CPU time (user + sys), which scales far less.

Usage (from the repo root): PYTHONPATH=$PWD python scripts/bench_startup.py [--n 10] [--manifest M]

``--against DIR`` compares the two stdio rows with another checkout of the package (e.g. an older
commit unpacked with ``git archive``): run by run, alternating which goes first, so that both see
the same load.
"""

# ruff: noqa: ASYNC230

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

TARGETS: dict[str, float | None] = {
    "python -c pass": None,
    "--version": 0.4,
    "connectors": 0.4,
    "discover x": 0.4,
    "discover open issues": 0.4,
    "validate": 0.4,
    "stdio -> tools/list": 0.5,
    "first stdio, new state": 0.5,
}


def _env(state: Path) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_")} | {
        "MCP_GATEWAY_STATE_DIR": str(state),
        "MCP_GATEWAY_MASTER_KEY": "bench-startup-master-key-0123456789abcdef",
    }


def _cli(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + sys) of one command in a fresh process."""
    return _run([sys.executable, "-m", "mcp_gateway", *argv], env)


def _run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=env, capture_output=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _compile_package() -> None:
    """Write the package's bytecode, as ``pip install`` does (even under PYTHONDONTWRITEBYTECODE=1)."""
    spec = importlib.util.find_spec("mcp_gateway")
    assert spec is not None and spec.origin is not None, "run from the repo root with PYTHONPATH=$PWD"
    compileall.compile_dir(str(Path(spec.origin).parent), quiet=1)


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (5 min {five:.2f})"


async def _stdio_once(manifest: list[str], env: dict[str, str]) -> float:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_gateway", "serve", *manifest], env=env)
    with open(os.devnull, "w") as err:
        started = time.perf_counter()
        async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
            await client.list_tools()
            elapsed = time.perf_counter() - started
    return elapsed


def _interleaved(n: int, manifest: list[str], against: Path) -> None:
    """The stdio rows of this checkout and of ``against``, interleaved run by run."""
    spec = importlib.util.find_spec("mcp_gateway")
    assert spec is not None and spec.origin is not None
    trees = {"this": Path(spec.origin).parent.parent, "against": against.resolve()}
    for tree in trees.values():
        compileall.compile_dir(str(tree / "mcp_gateway"), quiet=1)
    load_before = _load()
    warm: dict[str, list[float]] = {name: [] for name in trees}
    cold: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        envs = {name: _env(Path(tmp) / name) | {"PYTHONPATH": str(tree)} for name, tree in trees.items()}
        for env in envs.values():
            _cli(["sync", *manifest], env)
            anyio.run(_stdio_once, manifest, env)  # warm: a stdio session stored its answers
        for i in range(n):
            order = list(trees) if i % 2 == 0 else list(reversed(trees))
            for name in order:
                warm[name].append(anyio.run(_stdio_once, manifest, envs[name]))
            for name in order:
                fresh = _env(Path(tmp) / f"{name}-new-{i}") | {"PYTHONPATH": str(trees[name])}
                del fresh["MCP_GATEWAY_MASTER_KEY"]  # as a new user starts: the key file is made
                cold[name].append(anyio.run(_stdio_once, manifest, fresh))
    print(
        f"interleaved, median of {n} (bytecode compiled), load average {load_before} before, {_load()} after, "
        f"on {os.cpu_count()} CPUs, python {sys.version.split()[0]}"
    )
    print(f"{'tree':<9}{'what':<24}{'median s':>10}{'min s':>9}{'max s':>9}")
    for name, tree in trees.items():
        for what, times in (("stdio -> tools/list", warm[name]), ("first stdio, new state", cold[name])):
            print(f"{name:<9}{what:<24}{statistics.median(times):>10.3f}{min(times):>9.3f}{max(times):>9.3f}")
        print(f"{'':<9}({tree})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--manifest", help="default: the bundled default manifest")
    parser.add_argument("--against", type=Path, help="another checkout: its stdio rows interleaved with these")
    opts = parser.parse_args()
    manifest = ["--manifest", opts.manifest] if opts.manifest else []
    if opts.against is not None:
        _interleaved(opts.n, manifest, opts.against)
        return
    _compile_package()
    load_before = _load()
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(Path(tmp) / "state")
        _cli(["sync", *manifest], env)  # warm: the catalog is stored, later starts read it
        rows: list[tuple[str, list[float], list[float] | None]] = []
        floor = [_run([sys.executable, "-c", "pass"], env) for _ in range(opts.n)]
        rows.append(("python -c pass", [wall for wall, _ in floor], [cpu for _, cpu in floor]))
        for name, argv in (
            ("--version", ["--version"]),
            ("connectors", ["connectors", *manifest]),
            ("discover x", ["discover", "x", *manifest]),  # no hit: nothing decoded
            ("discover open issues", ["discover", "open", "issues", *manifest]),  # hits: decoded
            ("validate", ["validate", *manifest]),
        ):
            runs = [_cli(argv, env) for _ in range(opts.n)]
            rows.append((name, [wall for wall, _ in runs], [cpu for _, cpu in runs]))
        anyio.run(_stdio_once, manifest, env)  # warm: a stdio session stored its initialize and tools/list answers
        rows.append(("stdio -> tools/list", [anyio.run(_stdio_once, manifest, env) for _ in range(opts.n)], None))
        first = []
        for i in range(opts.n):
            fresh = _env(Path(tmp) / f"new-{i}")
            del fresh["MCP_GATEWAY_MASTER_KEY"]  # as a new user starts: the key file is made
            first.append(anyio.run(_stdio_once, manifest, fresh))
        rows.append(("first stdio, new state", first, None))
    print(
        f"median of {opts.n} (bytecode compiled), load average {load_before} before, {_load()} after, "
        f"on {os.cpu_count()} CPUs, python {sys.version.split()[0]}"
    )
    print(f"{'what':<22}{'median s':>10}{'min s':>9}{'max s':>9}{'cpu s':>8}{'target s':>10}  verdict")
    for name, times, cpus in rows:
        median = statistics.median(times)
        target = TARGETS[name]
        cpu = f"{statistics.median(cpus):>8.3f}" if cpus else f"{'-':>8}"
        if target is None:  # the interpreter's own start, in every row below: no target of ours
            print(f"{name:<22}{median:>10.3f}{min(times):>9.3f}{max(times):>9.3f}{cpu}{'-':>10}  (floor)")
            continue
        verdict = "ok" if median <= target else "over"
        print(f"{name:<22}{median:>10.3f}{min(times):>9.3f}{max(times):>9.3f}{cpu}{target:>10.2f}  {verdict}")


if __name__ == "__main__":
    main()
