"""Redaction with many secrets known: the scan of each form on its own (without pyahocorasick) against
the automaton that finds every form in one pass (``primitives/string_search.py``).

Two measurements, each made in a fresh child process per search, the two children alternating over
``--rounds`` rounds (so a change in the machine's load falls on both), the median of the rounds shown:

- ``KnownSecrets.redact`` (the log filter's, and every result's last look) of a text holding no secret
  (the common case: the whole text is looked through), for ``--secrets`` secrets learned and ``--sizes``
  text sizes; and how long the first redaction after learning them all takes (the searches are built
  then), and the first after learning one more;
- a catalog sync (``sync_manifest`` into a fresh memory store) of the bundled catalog's ``--apis``
  (2,009 actions), with ``--sync-secrets`` secrets learned, and with none (what the sync costs
  without the look for secrets, the same for both searches).

Usage (from the repo root):
    PYTHONPATH=$PWD python scripts/bench_secret_redaction.py [--rounds 3] [--secrets 10,100,400,1000]
        [--sizes 1000,100000,1000000] [--sync-secrets 400] [--apis github,stripe,twilio,slack] [--no-sync]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SEARCHES = ("scan", "automaton")
CATALOG_APIS = "github,stripe,twilio,slack"
"""Bundled catalog APIs whose sync holds 2,009 actions."""


def _secret(rng: random.Random, i: int) -> Any:
    from mcp_gateway.primitives.secrets import SecretValue

    token = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(32))
    if i % 5 == 4:  # some users' credentials are pairs (Basic auth)
        return SecretValue({"username": f"user{i}", "password": f"pw/{token}+{i}"})
    return SecretValue(f"tok_{i}_{token}")


def _text(rng: random.Random, size: int) -> str:
    """JSON-like text with the escapes and punctuation an upstream's answer has, and no secret."""
    words = [
        "the",
        "issue",
        "repository",
        "created_at",
        "https://api.example.com/v1/items?page=2&per_page=50",
        "%20",
        "&amp;",
        "description",
        "null",
        "true",
        "12345",
        "Ünïcödé",
        "id",
        "name",
        "\\n",
        "value",
    ]
    parts: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(words)
        parts.append(f'"{word}": "{rng.choice(words)} {rng.randint(0, 10**6)}", ')
        length += len(parts[-1])
    return "".join(parts)[:size]


def _timed(fn: Any, budget: float = 0.3) -> float:
    """The fastest run of ``fn``, in seconds (run at least once, and until ``budget`` seconds are spent)."""
    best = float("inf")
    spent = 0.0
    while spent < budget or best == float("inf"):
        start = time.perf_counter()
        fn()
        took = time.perf_counter() - start
        best, spent = min(best, took), spent + took
    return best


def child_redact(counts: list[int], sizes: list[int]) -> dict[str, Any]:
    from mcp_gateway.services.logs import KnownSecrets

    rng = random.Random(7)
    texts = {size: _text(rng, size) for size in sizes}
    out: dict[str, Any] = {}
    for count in counts:
        known = KnownSecrets()
        for i in range(count):
            known.add(_secret(rng, i))
        probe = texts[sizes[0]]
        start = time.perf_counter()
        known.redact(probe)
        out[f"build/{count}"] = time.perf_counter() - start
        known.add(_secret(rng, count))
        start = time.perf_counter()
        known.redact(probe)
        out[f"one more/{count}"] = time.perf_counter() - start
        for size, text in texts.items():
            assert known.redact(text) == text
            out[f"redact/{count}/{size}"] = _timed(lambda known=known, text=text: known.redact(text))
    return out


def child_sync(secret_count: int, apis: list[str]) -> dict[str, Any]:
    from mcp_gateway.core.sync import sync_manifest
    from mcp_gateway.manifest import parse_manifest
    from mcp_gateway.services.logs import known_secrets
    from mcp_gateway.store.memory import MemoryStore
    from mcp_gateway.vocabulary.clock import FixedClock

    text = "project: bench\nconnectors:\n" + "".join(f"  - slug: {api}\n    catalog: {api}\n" for api in apis)
    manifest = parse_manifest(text, base_dir=Path(tempfile.gettempdir()))
    actions: list[int] = []

    async def sync() -> None:
        async with MemoryStore() as store:
            catalogs = await sync_manifest(manifest, store, FixedClock(), share=False)
        actions.append(sum(len(c.actions) for c in catalogs.values()))

    out: dict[str, Any] = {}
    known_secrets().forget()
    out["sync/0"] = _run(sync)
    rng = random.Random(11)
    for i in range(secret_count):
        known_secrets().add(_secret(rng, i))
    out[f"sync/{secret_count}"] = _run(sync)
    out["actions"] = actions[-1]
    return out


def _run(fn: Any) -> float:
    import anyio

    start = time.perf_counter()
    anyio.run(fn)
    return time.perf_counter() - start


def _child(search: str, part: str, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, __file__, "--child", search, "--part", part]
    command += ["--secrets", args.secrets, "--sizes", args.sizes]
    command += ["--sync-secrets", str(args.sync_secrets), "--apis", args.apis]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--secrets", default="10,100,400,1000")
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--sync-secrets", type=int, default=400)
    parser.add_argument("--apis", default=CATALOG_APIS, help="bundled catalog APIs the sync loads")
    parser.add_argument("--no-sync", action="store_true", help="only the redaction table")
    parser.add_argument("--child", choices=SEARCHES, help=argparse.SUPPRESS)
    parser.add_argument("--part", choices=("redact", "sync"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    counts = [int(n) for n in args.secrets.split(",")]
    sizes = [int(n) for n in args.sizes.split(",")]

    if args.child:
        if args.child == "scan":
            sys.modules["ahocorasick"] = None  # type: ignore[assignment]  # the import fails, as where it is not installed
        from mcp_gateway.primitives.string_search import automaton_available

        assert automaton_available() is (args.child == "automaton")
        found = (
            child_redact(counts, sizes)
            if args.part == "redact"
            else child_sync(args.sync_secrets, args.apis.split(","))
        )
        print(json.dumps(found))
        return

    parts = ["redact"] + ([] if args.no_sync else ["sync"])
    runs: dict[str, list[dict[str, Any]]] = {search: [] for search in SEARCHES}
    for r in range(args.rounds):
        for search in SEARCHES if r % 2 == 0 else SEARCHES[::-1]:
            merged: dict[str, Any] = {}
            for part in parts:
                merged.update(_child(search, part, args))
            runs[search].append(merged)
            print(f"round {r + 1}/{args.rounds} {search} done", file=sys.stderr)

    def median(search: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[search])

    load = os.getloadavg()
    print(f"median of {args.rounds} rounds, scan / automaton, milliseconds; load average {load[0]:.1f} {load[1]:.1f}")
    print()
    header = ["secrets", "first redaction (build)", "after one more learned"]
    header += [f"redact {size:,} chars" for size in sizes]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for count in counts:
        cells = [str(count)]
        for key in (f"build/{count}", f"one more/{count}", *(f"redact/{count}/{size}" for size in sizes)):
            cells.append(f"{_ms(median('scan', key))} / {_ms(median('automaton', key))}")
        print("| " + " | ".join(cells) + " |")
    if "sync" in parts:
        actions = runs["scan"][0]["actions"]
        n = args.sync_secrets
        print()
        print(f"| catalog sync, {actions:,} actions | no secret known | {n} secrets known |")
        print("|---|---|---|")
        for search in SEARCHES:
            print(f"| {search} | {median(search, 'sync/0'):.2f} s | {median(search, f'sync/{n}'):.2f} s |")


if __name__ == "__main__":
    main()
