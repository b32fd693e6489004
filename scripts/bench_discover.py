"""Benchmark ``DiscoveryIndex`` at 1k, 10k and 100k actions built from real API descriptions.

The catalog replicates GitHub, Stripe and Slack (``tests/data/openapi``, through the real OpenAPI
normalizer) under new slugs (``github-0``, ``stripe-0``, ``slack-0``, ``github-1`` ...) until it holds
the wanted number of actions; the last connector is cut short. Copy ``n`` > 0 of an action has
" (copy n)" after its summary and description, so no two actions embed the same text: vectors are
stored by text digest, and identical copies would be embedded once and make embedding look ~5x cheaper.
Each size runs in a fresh child process so that resident memory (RSS) is that size's alone. Queries
are ~200 realistic intents; latency is reported as wall time (what an agent waits for, noisy on a
shared machine) and as the thread's CPU time (what the index costs); build time likewise as wall
and process CPU time. Index memory is the tracemalloc delta
of building a second, identical index.

With ``--hybrid`` (the ``embeddings`` extra), each size also measures hybrid ``discover`` as the gateway
runs it (``discovery.hybrid.HybridSearch`` over a SQLite vector store in a temporary folder): embedding
every action in the background (wall time; CPU time of the embedding thread and of the whole process)
while ~5 queries a second keep being answered (their p99 during it), hybrid query p50/p99 once embedded
(wall, and CPU of the whole process per query), a warm restart that reads every vector back from the
store (in the same process: imports and page cache are warm; the model loads with the first query
after it, timed apart), and RSS with the model loaded (this process also holds the catalog and the
lexical index). Then one table sets every speed and memory target of issue 11 beside its figure, with
the load average before and after (the machine is shared: wall times under load are upper bounds).

Usage: python scripts/bench_discover.py [--sizes 1000,10000,100000] [--rounds 3] [--hybrid]
       python scripts/bench_discover.py --sizes 10000 --rounds 1 --hybrid     # issue 11's targets
"""

from __future__ import annotations

import argparse
import gc
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp_gateway.discovery import DiscoveryIndex  # noqa: E402
from mcp_gateway.vocabulary.model import Action  # noqa: E402

DATA = REPO / "tests" / "data" / "openapi"
SPECS = {
    "github": DATA / "github" / "api.github.com.json.gz",
    "stripe": DATA / "stripe" / "spec3.json",
    "slack": DATA / "slack" / "slack_web_openapi_v2.json",
}

_VERBS = ("list", "get", "create", "delete", "update", "search for")
_NOUNS = (
    "issue", "pull request", "repository", "branch", "commit", "webhook", "release", "gist", "workflow run",
    "team", "customer", "charge", "refund", "invoice", "subscription", "payment intent", "channel",
    "message", "file", "user", "reaction", "label", "comment", "secret", "deployment", "artifact",
)  # fmt: skip
_INTENTS = (
    "create an issue", "delete a repository", "list pull requests", "star a repo", "get the contents of a file",
    "merge a pull request", "add labels to an issue", "create a webhook", "list commits", "fork a repository",
    "get the authenticated user", "list workflow runs", "comment on an issue", "create a release", "create a gist",
    "list my repositories", "search code", "list branches", "open a pull request", "request reviewers",
    "get a user by username", "list organization members", "add a collaborator to a repository",
    "trigger a workflow", "download a workflow artifact", "list issues in a repository", "update a pull request",
    "list stargazers", "create a stripe charge", "create a refund", "list customers", "create a customer",
    "delete a customer", "create a payment intent", "cancel a subscription", "retrieve an invoice",
    "send a slack message", "post a message to a channel", "upload a file to slack", "invite user to channel",
    "create a channel", "list channels", "add a reaction to a message", "archive a channel", "search messages",
    "set a repository secret", "lock an issue", "list notifications", "mark notifications as read",
    "rerun a failed workflow job", "list deploy keys", "create a check run", "get rate limit",
    "capture a payment", "attach a payment method to a customer", "list balance transactions",
    "create a coupon", "set the topic of a channel", "kick a user from a conversation", "pin a message",
)  # fmt: skip
_GUESSES = (
    "github.create_issue", "issues.create", "github.issue.create", "github.repos.getContent",
    "GitHub.Issues.Create", "github.isues.create", "github.pulls.create_pr", "stripe.create_charge",
    "slack.send_message", "slack.postMessage", "github.list_repos", "github.delete_repo", "create_issue",
    "github.star_repo", "github.get_file_contents", "github.search_repositories", "stripe.list_customers",
    "slack.channels.create", "github.merge_pr", "stripe.refund_charge",
)  # fmt: skip


def queries() -> list[str]:
    return [*_INTENTS, *(f"{verb} {noun}" for verb in _VERBS for noun in _NOUNS)]


# -- building actions -------------------------------------------------------------------------------


def _load(path: Path) -> Any:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def base_catalogs() -> tuple[dict[str, list[Action]], str]:
    """The real specs through the real OpenAPI normalizer: what a connector's sync would index."""
    from mcp_gateway.sources.openapi import normalize_openapi

    return {
        name: normalize_openapi(_load(path), connector=name).actions for name, path in SPECS.items()
    }, "mcp_gateway.sources.openapi"


def replicate(bases: dict[str, list[Action]], size: int) -> dict[str, list[Action]]:
    catalog: dict[str, list[Action]] = {}
    one_round = sum(len(actions) for actions in bases.values())
    if size < one_round:
        # Smaller than one copy of everything: a proportional slice of each API, not GitHub alone.
        shares = {name: len(actions) * size // one_round for name, actions in bases.items()}
        shares[next(iter(shares))] += size - sum(shares.values())
        bases = {name: actions[: shares[name]] for name, actions in bases.items()}
    total, round_ = 0, 0
    while total < size:
        for name, actions in bases.items():
            if total >= size:
                break
            slug = f"{name}-{round_}"
            chunk = actions[: size - total]
            catalog[slug] = [_copy(action, slug, round_) for action in chunk]
            total += len(chunk)
        round_ += 1
    return catalog


def _copy(action: Action, slug: str, n: int) -> Action:
    if n == 0:
        return action.model_copy(update={"connector": slug})
    update = {"connector": slug, "description": f"{action.description} (copy {n})"}
    if action.summary:
        update["summary"] = f"{action.summary} (copy {n})"
    return action.model_copy(update=update)


# -- measuring ------------------------------------------------------------------------------------


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _build(catalog: dict[str, list[Action]]) -> DiscoveryIndex:
    index = DiscoveryIndex()
    for slug, actions in catalog.items():
        index.replace_connector(slug, actions)
    return index


def measure(size: int, rounds: int, *, hybrid: bool = False) -> dict[str, Any]:
    bases, source = base_catalogs()
    catalog = replicate(bases, size)
    del bases
    gc.collect()

    started, cpu_started = time.perf_counter(), time.process_time()
    index = _build(catalog)
    build_s = time.perf_counter() - started
    build_cpu_s = time.process_time() - cpu_started
    assert len(index) == size

    # Incremental: re-index the first connector alone (a GitHub-sized one when there is one).
    first = next(iter(catalog))
    started = time.perf_counter()
    index.replace_connector(first, catalog[first])
    replace_ms = (time.perf_counter() - started) * 1000

    gc.collect()
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(rounds):
        for query in queries():
            w0, c0 = time.perf_counter(), time.thread_time()
            index.search(query, limit=10)
            c1, w1 = time.thread_time(), time.perf_counter()
            wall.append((w1 - w0) * 1000)
            cpu.append((c1 - c0) * 1000)

    # The permission view: a third of the connectors, destructive actions hidden.
    visible = list(catalog)[::3]
    filtered: list[float] = []
    for query in queries():
        w0 = time.perf_counter()
        index.search(query, limit=10, connectors=visible, allow=lambda action: action.risk != "destructive")
        filtered.append((time.perf_counter() - w0) * 1000)

    suggest: list[float] = []
    for name in _GUESSES:
        w0 = time.perf_counter()
        index.suggest(name)
        suggest.append((time.perf_counter() - w0) * 1000)
    rss = _rss_mb()
    dense = measure_hybrid(catalog, index) if hybrid else {}

    del index
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    twin = _build(catalog)
    gc.collect()
    index_mb = (tracemalloc.get_traced_memory()[0] - before) / 2**20
    tracemalloc.stop()
    assert len(twin) == size

    return {
        "source": source,
        "actions": size,
        "connectors": len(catalog),
        "build_s": build_s,
        "build_cpu_s": build_cpu_s,
        "replace_ms": replace_ms,
        "replace_n": len(catalog[first]),
        "p50": statistics.median(wall),
        "p99": _pct(wall, 0.99),
        "cpu_p50": statistics.median(cpu),
        "cpu_p99": _pct(cpu, 0.99),
        "filtered_p50": statistics.median(filtered),
        "suggest_p50": statistics.median(suggest),
        "suggest_max": max(suggest),
        "queries": len(wall),
        "index_mb": index_mb,
        "rss_mb": rss,
        **dense,
    }


def measure_hybrid(catalog: dict[str, list[Action]], index: DiscoveryIndex) -> dict[str, Any]:
    """Hybrid discover at this size: background embedding, fused queries, warm restart from the store."""
    import tempfile

    import anyio

    from mcp_gateway.discovery.hybrid import HybridSearch
    from mcp_gateway.discovery.providers import LocalProvider, local_provider
    from mcp_gateway.store.sqlite import SQLiteStore

    out: dict[str, Any] = {}
    # What the gateway hands over with each connector's actions: its catalog's fingerprint (here a
    # digest of the actions themselves, computed before anything is timed).
    prints = {
        slug: hashlib.sha256("".join(a.model_dump_json() for a in actions).encode()).hexdigest()
        for slug, actions in catalog.items()
    }

    async def run(folder: Path) -> None:
        async with SQLiteStore(folder / "vectors.db") as store:
            provider = local_provider()
            timed = _BackgroundCpu(provider.encoder)
            search = HybridSearch(LocalProvider(timed, provider.model), store)
            during: list[float] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(search.run)
                started, cpu = time.perf_counter(), time.process_time()
                for slug, actions in catalog.items():
                    search.schedule(slug, actions, prints[slug])
                done = anyio.Event()

                async def wait() -> None:
                    await search.settled()
                    done.set()

                tg.start_soon(wait)
                asked = queries()
                while not done.is_set():  # discover keeps answering (~5 queries/s) while vectors are computed
                    w0 = time.perf_counter()
                    await search.find(index, asked[len(during) % len(asked)], limit=10)
                    during.append((time.perf_counter() - w0) * 1000)
                    await anyio.sleep(0.2)
                out["embed_s"] = time.perf_counter() - started
                out["embed_cpu_s"] = time.process_time() - cpu
                out["embed_thread_cpu_s"] = timed.cpu_s
                out["during_p99"] = _pct(during, 0.99) if during else float("nan")
                out["during_p50"] = statistics.median(during) if during else float("nan")
                out["during_n"] = len(during)
                wall: list[float] = []
                cpu: list[float] = []
                for query in queries():
                    w0, c0 = time.perf_counter(), time.process_time()
                    await search.find(index, query, limit=10)
                    cpu.append((time.process_time() - c0) * 1000)
                    wall.append((time.perf_counter() - w0) * 1000)
                out["hybrid_p50"], out["hybrid_p99"] = statistics.median(wall), _pct(wall, 0.99)
                out["hybrid_cpu_p50"], out["hybrid_cpu_p99"] = statistics.median(cpu), _pct(cpu, 0.99)
                out["embedded"] = search.embedder.embedded
                out["rss_model_mb"] = _rss_mb()
                tg.cancel_scope.cancel()
        async with SQLiteStore(folder / "vectors.db") as store:  # a restart: same store, fresh process state
            started, restart_cpu = time.perf_counter(), time.process_time()
            search = HybridSearch(local_provider(), store)
            async with anyio.create_task_group() as tg:
                tg.start_soon(search.run)
                for slug, actions in catalog.items():
                    search.schedule(slug, actions, prints[slug])
                await search.settled()
                tg.cancel_scope.cancel()
            out["restart_s"] = time.perf_counter() - started
            out["restart_cpu_s"] = time.process_time() - restart_cpu
            out["restart_encoded"] = search.embedder.embedded
            started = time.perf_counter()  # the model is loaded by the first query's embedding
            await search.find(index, "create an issue", limit=10)
            out["restart_first_query_s"] = time.perf_counter() - started

    with tempfile.TemporaryDirectory() as folder:
        anyio.run(run, Path(folder))
    return out


class _BackgroundCpu:
    """Wraps the provider's encoder to add up the CPU time of the background batches (the worker
    thread's own, so the queries answered meanwhile are not counted)."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        self.cpu_s = 0.0

    def encode(self, texts: Any) -> Any:
        started = time.thread_time()
        try:
            return self.encoder.encode(texts)
        finally:
            if len(texts) > 1:
                self.cpu_s += time.thread_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child mode: one size, JSON out
    parser.add_argument("--hybrid", action="store_true", help="also measure hybrid discover (embeddings extra)")
    args = parser.parse_args()
    if not all(path.exists() for path in SPECS.values()):
        sys.exit(f"missing data under {DATA}")
    if args.one:
        load_before = os.getloadavg()[0]
        row = measure(args.one, args.rounds, hybrid=args.hybrid)
        print(json.dumps({**row, "load_before": load_before, "load_after": os.getloadavg()[0]}))
        return

    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        child = [sys.executable, __file__, "--one", str(size), "--rounds", str(args.rounds)]
        child += ["--hybrid"] if args.hybrid else []
        rows.append(json.loads(subprocess.run(child, check=True, capture_output=True, text=True).stdout))
    print(f"actions built by {rows[0]['source']}; {rows[0]['queries']} queries per size (limit=10)")
    head = (
        "| actions | connectors | build s (CPU s) | replace 1 conn ms | query p50 ms | p99 ms | CPU p50 ms "
        "| CPU p99 ms | filtered p50 ms | suggest p50/max ms | index MB | RSS MB |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        print(
            f"| {r['actions']:,} | {r['connectors']} | {r['build_s']:.2f} ({r['build_cpu_s']:.2f}) "
            f"| {r['replace_ms']:.0f} ({r['replace_n']}) "
            f"| {r['p50']:.2f} | {r['p99']:.2f} | {r['cpu_p50']:.2f} | {r['cpu_p99']:.2f} | {r['filtered_p50']:.2f} "
            f"| {r['suggest_p50']:.1f}/{r['suggest_max']:.1f} | {r['index_mb']:.1f} | {r['rss_mb']:.0f} |"
        )
    if args.hybrid:
        print()
        head = (
            "| actions | embed all s (CPU s) | query p99 during ms | hybrid p50 ms | hybrid p99 ms "
            "| warm restart s (re-embedded) | RSS with model MB |"
        )
        print(head)
        print("|" + "---|" * (head.count("|") - 1))
        for r in rows:
            print(
                f"| {r['actions']:,} | {r['embed_s']:.0f} ({r['embed_cpu_s']:.0f}) | {r['during_p99']:.1f} "
                f"| {r['hybrid_p50']:.1f} | {r['hybrid_p99']:.1f} | {r['restart_s']:.2f} ({r['restart_encoded']}) "
                f"| {r['rss_model_mb']:.0f} |"
            )
        for r in rows:
            print_targets(r)


def print_targets(r: dict[str, Any]) -> None:
    """Issue 11's speed and memory targets beside what this size measured."""
    print()
    print(
        f"issue 11 targets at {r['actions']:,} actions ({r['connectors']} connectors); "
        f"load average (1 min) {r['load_before']:.1f} before, {r['load_after']:.1f} after, on {os.cpu_count()} CPUs"
    )
    minutes = r["embed_s"] / 60
    rows = [
        ("lexical discover p50", "<= 2 ms", r["p50"] <= 2, f"{r['p50']:.2f} ms (CPU {r['cpu_p50']:.2f} ms)"),
        (
            "hybrid discover p50",
            "<= 15 ms",
            r["hybrid_p50"] <= 15,
            f"{r['hybrid_p50']:.1f} ms (CPU {r['hybrid_cpu_p50']:.1f} ms)",
        ),
        (
            "hybrid discover p99",
            "<= 50 ms",
            r["hybrid_p99"] <= 50,
            f"{r['hybrid_p99']:.1f} ms (CPU {r['hybrid_cpu_p99']:.1f} ms)",
        ),
        (
            f"embed {r['actions']:,} actions in the background",
            "<= 5 min",
            minutes <= 5,
            f"{minutes:.1f} min wall; CPU {r['embed_thread_cpu_s']:.0f} s in the embedding thread, "
            f"{r['embed_cpu_s']:.0f} s whole process; {r['embedded']:,} actions embedded",
        ),
        (
            "discover p99 while embedding",
            "<= 100 ms",
            r["during_p99"] <= 100,
            f"{r['during_p99']:.1f} ms (p50 {r['during_p50']:.1f} ms, {r['during_n']} queries)",
        ),
        (
            "warm restart, vectors from the store",
            "<= 1 s",
            r["restart_s"] <= 1 and r["restart_encoded"] == 0,
            f"{r['restart_s']:.2f} s, CPU {r['restart_cpu_s']:.2f} s ({r['restart_encoded']} re-embedded); "
            f"first query after it, model load included: {r['restart_first_query_s']:.2f} s",
        ),
        (
            "process RSS with the model loaded",
            "<= 250 MB",
            r["rss_model_mb"] <= 250,
            f"{r['rss_model_mb']:.0f} MB (lexical only: {r['rss_mb']:.0f} MB)",
        ),
    ]
    print("| target | goal | measured | met |")
    print("|---|---|---|---|")
    for name, goal, met, measured in rows:
        print(f"| {name} | {goal} | {measured} | {'yes' if met else 'NO'} |")


if __name__ == "__main__":
    main()
