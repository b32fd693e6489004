"""How often ``discover`` names the right bundled catalog API for a request nothing configured serves.

Each request of ``tests/data/intents/catalog_hints/requests.json`` is asked of the default gateway (the bundled
manifest: GitHub and Petstore), ranked lexically as the gateway ranks it; the catalog APIs named
(``discovery.catalog_hints``) are compared with the row's ``catalog``: right when the first one named is
one of them, or, for a row with none (what is configured serves it, or nothing does), when none is named.
The ``holdout`` rows were written before the rules they measure and are never tuned on.

Usage: python scripts/bench_catalog_hints.py [--misses]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mcp_gateway.discovery import DiscoveryIndex  # noqa: E402
from mcp_gateway.discovery.catalog_hints import CatalogHints  # noqa: E402
from mcp_gateway.manifest import Manifest, load_manifest  # noqa: E402
from scripts.bench_heldout import bundled_catalog  # noqa: E402

REQUESTS = REPO / "tests" / "data" / "intents" / "catalog_hints" / "requests.json"


def named(manifest: Manifest, index: DiscoveryIndex, hints: CatalogHints, request: str) -> list[str]:
    """The catalog APIs a gateway of ``manifest``'s connectors (indexed in ``index``) names for ``request``,
    first first: the hints ``discover`` gives beside its three best hits."""
    found = index.find(request, limit=10)
    best = [action for action, _ in found.hits[:3]]
    return [hint.id for hint in hints.suggest(manifest, request, best, unsure=found.confidence == "low")]


def default_gateway() -> tuple[Manifest, DiscoveryIndex]:
    """The bundled manifest and its connectors (GitHub, Petstore), indexed as the gateway indexes them."""
    manifest = load_manifest(None)
    index = DiscoveryIndex()
    for cfg in manifest.connectors:
        index.replace_connector(cfg.slug, list(bundled_catalog(cfg.catalog or cfg.slug)))
    return manifest, index


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="print the dev rows named wrongly")
    args = parser.parse_args()
    manifest, index = default_gateway()
    hints = CatalogHints()
    totals: dict[tuple[str, bool], list[int]] = {}
    for row in json.loads(REQUESTS.read_text(encoding="utf-8")):
        meant = set(row["catalog"])
        got = named(manifest, index, hints, row["request"])
        right = (not meant and not got) or (bool(got) and got[0] in meant)
        counts = totals.setdefault((row["split"], bool(meant)), [0, 0])
        counts[0] += 1
        counts[1] += right
        if args.misses and not right and row["split"] == "dev":
            print(f"  MISS {row['request']!r} want {sorted(meant)} got {got}")
    print("| split | requests | a catalog API serves them | right |\n|---|---|---|---|")
    for (split, served), (n, right) in sorted(totals.items()):
        print(f"| {split} | {n} | {'yes' if served else 'no'} | {right} ({100 * right / n:.0f} %) |")


if __name__ == "__main__":
    main()
