"""Write ``mcp_gateway/bundled/catalog/terms.json.gz``: what each bundled catalog API's actions are about.

``discover`` names the catalog APIs that would serve a request nothing configured serves
(``discovery/catalog_hints.py``); it cannot normalize every bundled spec for that on each query, so this
writes, per catalog entry, its name and description and the index terms (``discovery._text``) of
each of its actions' names and summaries, one space-separated string per distinct action. Run it
after an entry or a spec in ``catalog/`` changes; ``tests/discovery/test_catalog_hints.py`` checks the
file is current for the entries with small specs.

Usage: python scripts/build_catalog_terms.py
"""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mcp_gateway.core.sync import source_for  # noqa: E402
from mcp_gateway.discovery.catalog_hints import TERMS_FILE, action_terms  # noqa: E402
from mcp_gateway.manifest import CATALOG_DIR, GraphQLSource, parse_manifest  # noqa: E402
from mcp_gateway.sources.base import LoadContext  # noqa: E402


async def entry_terms(name: str) -> dict[str, Any]:
    """Catalog entry ``name``'s name, description and the distinct term strings of its actions (none
    for a schema read from the API at sync)."""
    manifest = parse_manifest(f"connectors:\n  - slug: {name}\n    catalog: {name}\n    base_url: https://x.example\n")
    (cfg,) = manifest.connectors
    about = {"name": cfg.name or name, "description": cfg.description, "actions": []}
    if cfg.source is None or isinstance(cfg.source, GraphQLSource):
        return about
    source = source_for(cfg, None, None)  # type: ignore[arg-type]  # neither GraphQL nor MCP
    normalized = await source.load(cfg, LoadContext(resolve=manifest.resolve))
    return {**about, "actions": sorted({action_terms(action) for action in normalized.actions} - {""})}


async def main() -> None:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(CATALOG_DIR.glob("*.yaml")):
        out[path.stem] = await entry_terms(path.stem)
        print(f"{path.stem}: {len(out[path.stem]['actions'])} actions", file=sys.stderr)
    data = json.dumps(out, sort_keys=True, separators=(",", ":")).encode()
    TERMS_FILE.write_bytes(gzip.compress(data, mtime=0))
    print(f"{TERMS_FILE}: {TERMS_FILE.stat().st_size:,} bytes", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
