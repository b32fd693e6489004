"""Sync through a real store: what a restart reads back (``core.sync``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_gateway.clock import FixedClock
from mcp_gateway.core.sync import sync_manifest
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.store.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio

MANIFEST = """
project: demo
connectors:
  - slug: api
    base_url: https://api.example
    request_action: true
    source: {http: {actions: [{path: ping, url: "https://api.example/ping"}]}}
  - slug: bare
    base_url: https://bare.example
    request_action: true
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_restart_keeps_the_request_action(tmp_path: Path) -> None:
    manifest = parse_manifest(MANIFEST, base_dir=tmp_path)
    seen = []
    progress: list[tuple[str, str]] = []
    for _ in range(2):  # the second sync finds the stored catalog unchanged, as after a restart
        progress.clear()
        async with SQLiteStore(tmp_path / "gateway.db") as store:
            catalogs = await sync_manifest(manifest, store, FixedClock(), lambda s, p: progress.append((s, p)))
            seen.append({slug: [a.path for a in c.actions] for slug, c in catalogs.items()})
            assert {c.state.status for c in catalogs.values()} == {"ready"}
    assert seen[0] == seen[1] == {"api": ["ping", "request"], "bare": ["request"]}
    assert ("api", "cached") in progress and ("bare", "cached") in progress
