"""The tracing work of one ``Gateway.call``, lean spans against the SDK's own, in CPU and in instructions.

One call's tracing, as the call path does it: the policy span (``finished_span``), the credential
span (a leaf, not made current), the upstream CLIENT span with its cached attributes, the
``traceparent`` injected for it and its status code set. The SDK is installed as ``configure_tracing``
installs it (a ``BatchSpanProcessor``), with an exporter that discards (export is on the processor's
thread and is not counted; its queue is large enough never to drop). "sdk" is the same with lean
spans turned off, so the SDK makes every span (the rest of the work as it is now).

CPU time per call is the median over interleaved rounds (a shared machine slows both alike).
``--instructions`` counts instructions per call instead, under valgrind's callgrind (deterministic,
whatever the load): one run per variant with ``--n`` calls and one with none, ~1 min each.

Usage (from the repo root): python scripts/bench_tracing.py [--n 3000] [--rounds 9] [--parent] [--instructions]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

POLICY = {
    "mcp_gateway.action": "bench.items.get",
    "mcp_gateway.policy.decision": "always_run",
    "mcp_gateway.policy.source": "allow_all",
}
CREDENTIAL = {"mcp_gateway.auth.kind": "bearer"}


def setup(variant: str, parent: bool) -> Callable[[], None]:
    import httpx2
    from opentelemetry import context, trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from mcp_gateway import tracing
    from mcp_gateway.execution.send import _span_attributes

    class Discard(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    queue = 10**7  # never full, never exported during the run: emit is an append
    provider = TracerProvider()
    provider.add_span_processor(
        BatchSpanProcessor(Discard(), schedule_delay_millis=10**8, max_queue_size=queue, max_export_batch_size=queue)
    )
    trace.set_tracer_provider(provider)
    tracing.tracer()
    if variant == "sdk":
        tracing._TracerCache.lean = None
    if parent:  # in `serve`, the MCP SDK's request span and the meta-tool span are above these
        context.attach(trace.set_span_in_context(tracing.tracer().start_span("tools/call call")))
    request = httpx2.Request("GET", "http://127.0.0.1:8080/items/1")

    def one_call() -> None:
        tracing.finished_span("mcp_gateway.policy", time.time_ns(), POLICY)
        with tracing.span("mcp_gateway.credential", attributes=CREDENTIAL, current=False):
            pass
        attributes = _span_attributes(request, "/items/{id}")
        with tracing.span("GET", kind=tracing.SpanKind.CLIENT, attributes=attributes, current=False) as upstream:
            carrier: dict[str, str] = {}
            tracing.inject_trace_context(carrier, upstream)
            upstream.set_attribute("http.response.status_code", 200)

    def nothing() -> None:
        pass

    return nothing if variant == "none" else one_call


def child(variant: str, n: int, parent: bool) -> None:
    """Run ``n`` calls of ``variant`` after a warm-up (under callgrind: the parent subtracts a run with none)."""
    call = setup(variant, parent)
    for _ in range(20):
        call()
    for _ in range(n):
        call()


def instructions(variant: str, n: int, parent: bool) -> int:
    command = [sys.executable, __file__, "--child", variant, "--n", str(n)] + (["--parent"] if parent else [])
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(done.stderr[-2000:])
    return int(found.group(1))


def cpu(n: int, rounds: int, parent: bool) -> None:
    # Both variants in one process: lean spans are switched off and on between rounds.
    from mcp_gateway import tracing

    call = setup("lean", parent)
    lean = tracing._TracerCache.lean
    per_call: dict[str, list[float]] = {"lean": [], "sdk": []}
    for index in range(rounds):
        for variant in ("lean", "sdk") if index % 2 else ("sdk", "lean"):
            tracing._TracerCache.lean = lean if variant == "lean" else None
            for _ in range(200):
                call()
            before = time.process_time()
            for _ in range(n):
                call()
            per_call[variant].append((time.process_time() - before) / n)
    load = os.getloadavg()[0]
    print(f"one call's tracing work, CPU per call, median of {rounds} rounds of {n} (load average {load:.2f}):")
    for variant, times in per_call.items():
        print(f"  {variant:5s} {statistics.median(times) * 1e6:7.1f} µs")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--parent", action="store_true", help="under a parent span, as in `serve`")
    p.add_argument("--instructions", action="store_true", help="count instructions under valgrind")
    p.add_argument("--child", choices=("lean", "sdk", "none"), help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.child:
        child(opts.child, opts.n, opts.parent)
    elif opts.instructions:
        base = instructions("none", opts.n, opts.parent)
        print(f"one call's tracing work, instructions per call (callgrind, {opts.n} calls):")
        for variant in ("lean", "sdk"):
            print(f"  {variant:5s} {(instructions(variant, opts.n, opts.parent) - base) / opts.n / 1e3:7.1f} k")
    else:
        cpu(opts.n, opts.rounds, opts.parent)


if __name__ == "__main__":
    main()
