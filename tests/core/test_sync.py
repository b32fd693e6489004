"""Sync through a real store: what a restart reads back (``core.sync``)."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import anyio
import pytest
from mcp import types

from mcp_gateway.core import sync
from mcp_gateway.core.sync import sync_manifest
from mcp_gateway.manifest import ConnectorConfig, parse_manifest
from mcp_gateway.primitives.secrets import SecretValue
from mcp_gateway.services.logs import known_secrets
from mcp_gateway.sources.base import LoadContext, Normalized
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.clock import FixedClock

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


class _Broken:
    async def load(self, cfg: ConnectorConfig, ctx: LoadContext) -> Normalized:
        raise RuntimeError("a bug in a source")


async def test_a_failing_connector_gets_its_reason_and_the_others_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = parse_manifest(
        MANIFEST
        + "  - slug: gone\n    source: {openapi: missing.yaml}\n  - slug: buggy\n    base_url: https://b.example\n",
        base_dir=tmp_path,
    )
    real = sync.source_for
    monkeypatch.setattr(sync, "source_for", lambda cfg, *a: _Broken() if cfg.slug == "buggy" else real(cfg, *a))
    async with SQLiteStore(tmp_path / "gateway.db") as store:
        catalogs = await sync_manifest(manifest, store, FixedClock())
        states = {s.slug: s for s in await store.list_connector_states()}
    assert catalogs["api"].state.status == "ready" and catalogs["bare"].state.status == "ready"
    gone, buggy = catalogs["gone"].state, catalogs["buggy"].state
    assert gone.status == "error" and "missing.yaml" in (gone.error or "") and catalogs["gone"].actions == []
    assert (
        buggy.status == "error" and buggy.error == "unexpected RuntimeError while loading; run with --debug for details"
    )
    assert "a bug in a source" not in (buggy.error or "")  # the reason names the class, --debug logs the rest
    (logged,) = [r for r in caplog.records if "buggy" in r.getMessage()]
    assert logged.getMessage() == "connector buggy failed to load: unexpected RuntimeError" and not logged.exc_info
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=sync.__name__):
        async with SQLiteStore(tmp_path / "gateway.db") as store:
            await sync_manifest(manifest, store, FixedClock())
    assert any(r.exc_info and "buggy" in r.getMessage() for r in caplog.records)
    assert states["gone"].status == "error" and states["buggy"].status == "error"


async def test_a_catalog_that_quotes_an_opened_secret_is_stored_and_served_without_it(tmp_path: Path) -> None:
    # An upstream read with a credential (introspection, an MCP server's environment) that echoes it into
    # its schema: by the time its catalog comes back the secret has been opened, and the catalog loses it.
    canary = "CANARY-catalog-echo-88e1"
    known_secrets().add(SecretValue(canary))
    manifest = parse_manifest(
        MANIFEST + "  - slug: echo\n    base_url: https://echo.example\n    source: {http: {actions: [{path: who, "
        f'url: "https://echo.example/who", summary: "Says the token is {canary}", '
        f"input_schema: {{type: object, properties: {{t: {{type: string, default: {canary}, "
        f'description: "b64 {base64.b64encode(canary.encode()).decode()}"}}}}}}}}]}}}}\n',
        base_dir=tmp_path,
    )
    for _ in range(2):  # and again from the stored catalog, as after a restart
        async with SQLiteStore(tmp_path / "gateway.db") as store:
            catalogs = await sync_manifest(manifest, store, FixedClock())
            stored = await store.get_catalog("echo")
        echo = catalogs["echo"]
        assert echo.state.status == "ready" and [a.path for a in echo.actions] == ["who"]
        assert stored is not None
        for text in (echo.actions[0].model_dump_json(), stored.model_dump_json()):
            assert canary not in text and base64.b64encode(canary.encode()).decode() not in text
            assert "[redacted]" in text
        assert canary not in (tmp_path / "gateway.db").read_bytes().decode("latin-1")


async def test_upstream_mcp_servers_load_side_by_side_and_a_hung_one_fails_alone(tmp_path: Path) -> None:
    # Each server waits until every other one was asked for its tools: loaded one after another, the
    # first would wait for good. A server that never answers fails alone, with the others loaded.
    text = "project: demo\nconnectors:\n" + "".join(
        f"  - slug: {slug}\n    source: {{mcp: {{command: [srv]}}}}\n" for slug in ("one", "two", "three", "hung")
    )
    manifest = parse_manifest(text + MANIFEST.split("connectors:\n", 1)[1], base_dir=tmp_path)
    asked: set[str] = set()
    everyone = anyio.Event()

    async def list_tools(cfg: ConnectorConfig) -> list[types.Tool]:
        asked.add(cfg.slug)
        if len(asked) == 4:
            everyone.set()
        if cfg.slug == "hung":
            with anyio.fail_after(0.2):
                await anyio.sleep_forever()
        await everyone.wait()
        return [types.Tool(name=f"{cfg.slug}_ping", input_schema={"type": "object"})]

    async with SQLiteStore(tmp_path / "gateway.db") as store:
        with anyio.fail_after(10):
            catalogs = await sync_manifest(manifest, store, FixedClock(), mcp_tools=list_tools)
    assert list(catalogs) == ["one", "two", "three", "hung", "api", "bare"]  # the manifest's order
    assert {slug: c.state.status for slug, c in catalogs.items()} == {
        "one": "ready",
        "two": "ready",
        "three": "ready",
        "hung": "error",
        "api": "ready",
        "bare": "ready",
    }
    assert [a.path for a in catalogs["two"].actions] == ["two_ping"]


async def test_an_mcp_tool_whose_name_quotes_an_opened_secret_is_left_out(tmp_path: Path) -> None:
    # Its action name is made from it in snake_case ("leaky_zq9_secret_value77xyz"): no longer the
    # secret's spelling, so redacting the text missed it, and the agent read it in discover.
    canary = "Zq9SecretValue77xyz"
    known_secrets().add(SecretValue(canary))
    manifest = parse_manifest("project: demo\nconnectors:\n  - slug: up\n    source: {mcp: {command: [srv]}}\n")

    async def list_tools(cfg: ConnectorConfig) -> list[types.Tool]:
        return [
            types.Tool(name=f"leaky{canary}", input_schema={"type": "object"}),
            types.Tool(name="fine", input_schema={"type": "object"}),
        ]

    async with SQLiteStore(tmp_path / "gateway.db") as store:
        catalogs = await sync_manifest(manifest, store, FixedClock(), mcp_tools=list_tools)
    assert [a.path for a in catalogs["up"].actions] == ["fine"]
