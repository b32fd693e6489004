"""``Catalogs``: the review decisions behind the quarantine are read from the store only when one
was taken, here or by another process on the same database."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.store.contract import ActionReviewRecord
from mcp_gateway.store.sqlite import SQLiteStore
from tests.core.test_gateway import harness, manifest_text

pytestmark = pytest.mark.anyio


class CountingStore(SQLiteStore):
    """Counts the full reads of the decisions (every snapshot, parsed)."""

    reads = 0

    async def list_action_reviews(self) -> list[ActionReviewRecord]:
        self.reads += 1
        return await super().list_action_reviews()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_decisions_are_read_again_only_after_one_was_taken_elsewhere(tmp_path: Path) -> None:
    reviewed = manifest_text().replace(
        "base_url: http://open.test\n", "base_url: http://open.test\n    trust: review\n"
    )
    async with harness(tmp_path, reviewed, store_cls=CountingStore) as h:
        assert isinstance(h.store, CountingStore)
        held = h.gateway._catalogs.quarantined("open.things.list")
        assert held is not None
        before = h.store.reads
        for _ in range(3):
            await h.gateway.discover(OPERATOR, "list the things")
            await h.gateway.describe(OPERATOR, "api.items.get")
        assert h.store.reads == before  # nothing decided: no snapshot read

        # `mcp-gateway review` (or another instance) approves it through its own connection.
        other = SQLiteStore(tmp_path / "s.db")
        await other.open()
        try:
            await other.put_action_review(
                ActionReviewRecord(
                    name=held.name,
                    fingerprint=held.fingerprint,
                    decision="approved",
                    snapshot="{}",
                    decided_at=h.clock.now(),
                    decided_by="cli",
                )
            )
        finally:
            await other.close()
        found = await h.gateway.discover(OPERATOR, "list the things")
        assert h.store.reads == before + 1
        assert h.gateway._catalogs.quarantined("open.things.list") is None
        assert "open.things.list" in str(found)
        await h.gateway.discover(OPERATOR, "list the things")
        assert h.store.reads == before + 1


async def test_a_held_action_is_audited_once_not_by_every_command_that_loads_it(tmp_path: Path) -> None:
    reviewed = manifest_text().replace(
        "base_url: http://open.test\n", "base_url: http://open.test\n    trust: review\n"
    )

    async def held_rows() -> list[str]:
        async with harness(tmp_path, reviewed) as h:  # one command (or a restart) on the same state
            assert h.gateway._catalogs.quarantined("open.things.list") is not None
            await h.gateway.connectors(OPERATOR)
            rows = await h.store.list_audit(limit=1000)
        return [row.action or "" for row in rows if row.reason == "quarantined"]

    first = await held_rows()
    assert first and "open.things.list" in first
    assert await held_rows() == first


async def test_a_sync_warns_of_each_connector_that_failed_to_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = manifest_text() + (
        "  - slug: billing\n"
        "    base_url: http://billing.test\n"
        "    source: {openapi: https://user:CANARY-pw@specs.test/billing.json?access_token=CANARY-tok}\n"
    )
    with caplog.at_level(logging.WARNING, logger="mcp_gateway.core.catalogs"):
        async with harness(tmp_path, broken) as h:
            warned = [r.getMessage() for r in caplog.records if "failed to load" in r.getMessage()]
            assert len(warned) == 1 and warned[0].startswith("connector billing failed to load: https://user:***@")
            assert "CANARY" not in warned[0]
            caplog.clear()
            await h.gateway.reload(h.gateway.manifest)
    assert [r.getMessage() for r in caplog.records if "failed to load" in r.getMessage()] == warned


SPEC = """{"openapi": "3.0.0", "info": {"title": "Pets", "version": "1"}, "paths": {
  "/pets": {"get": {"operationId": "listPets", "summary": "List the pets", "responses": {"200": {"description": "ok"}}},
            "post": {"operationId": "addPet", "summary": "Add a pet", "responses": {"200": {"description": "ok"}}}}}}"""


async def test_a_spec_that_breaks_keeps_the_catalog_it_last_loaded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A half-copied spec file emptied a working connector on the next reload: 20 actions to 0.
    spec = tmp_path / "pets.json"
    spec.write_text(SPEC)
    text = manifest_text() + f"  - slug: pets\n    base_url: http://pets.test\n    source: {{openapi: {spec}}}\n"
    async with harness(tmp_path, text) as h:
        [before] = [s for s in h.gateway.states() if s.slug == "pets"]
        assert (before.status, before.actions, before.error) == ("ready", 2, None)
        spec.write_text(SPEC[:120])  # truncated
        with caplog.at_level(logging.WARNING, logger="mcp_gateway.core.catalogs"):
            await h.gateway.reload(h.gateway.manifest)
        [kept] = [s for s in h.gateway.states() if s.slug == "pets"]
        assert (kept.status, kept.actions) == ("ready", 2)
        assert kept.error is not None and "the catalog loaded at" in kept.error and "is kept" in kept.error
        assert any("still serving the 2 actions" in r.getMessage() for r in caplog.records)
        found = await h.gateway.discover(OPERATOR, "add a pet", connector="pets")
        assert "pets.add_pet" in str(found) or "pets.addPet" in str(found), found

        spec.write_text(SPEC)  # repaired: loads again, and says nothing is wrong
        await h.gateway.reload(h.gateway.manifest)
        [again] = [s for s in h.gateway.states() if s.slug == "pets"]
        assert (again.status, again.actions, again.error) == ("ready", 2, None)

        # An entry the operator changed is loaded as written, failing or not: nothing of the old one stays.
        moved = text.replace(str(spec), str(tmp_path / "missing.json"))
        from mcp_gateway.manifest import parse_manifest

        await h.gateway.reload(parse_manifest(moved, base_dir=tmp_path))
        [changed] = [s for s in h.gateway.states() if s.slug == "pets"]
        assert (changed.status, changed.actions) == ("error", 0)
        unavailable = await h.gateway._catalogs.recover("pets", principal=OPERATOR.user)
        assert unavailable is not None and "is unavailable: " in unavailable.message
        assert ".." not in unavailable.message  # the error's own full stop, then the sentence's: one


async def test_an_upstream_schema_never_makes_the_gateway_fetch_a_url_or_read_a_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # An upstream MCP server's inputSchema is untrusted: a remote or file $ref in it was fetched at every
    # call (a request inside the gateway's network, a local file's content in the agent's error, the
    # event loop blocked on a host that never answers); an unknown type failed every call.
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits: list[str] = []

    class Internal(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b'{"enum": ["CANARY-internal"]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    secret_file = tmp_path / "key.json"
    secret_file.write_text('{"type": "service_account", "private_key": "CANARY-file", "enum": ["CANARY-file"]}')
    server = ThreadingHTTPServer(("127.0.0.1", 0), Internal)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/internal/config.json"
        async with harness(tmp_path) as h:
            base = h.gateway._permissions.lookup(OPERATOR, "api.items.get")
            assert base is not None
            schemas = {
                "remote": {"type": "object", "properties": {"a": {"$ref": url}}},
                "file": {"type": "object", "properties": {"a": {"$ref": secret_file.as_uri()}}},
                "whole_file": {"$ref": secret_file.as_uri()},
                "unknown_type": {"type": "object", "properties": {"a": {"type": "nonsense"}}},
            }
            with caplog.at_level(logging.WARNING):
                for name, schema in schemas.items():
                    action = base.model_copy(update={"path": f"t.{name}", "input_schema": schema})
                    for _ in range(2):
                        assert h.gateway._catalogs.validate(action, {"a": "x"}) == [], name
            assert hits == []
            assert "CANARY" not in caplog.text and "Traceback" not in caplog.text
            said = [r.getMessage() for r in caplog.records if "cannot be checked" in r.getMessage()]
            assert len(said) == 4, said  # once per action, not per call
    finally:
        server.shutdown()
        server.server_close()


async def test_a_call_that_finds_the_graphql_schema_changed_upstream_has_it_introspected_again(tmp_path: Path) -> None:
    # The agent was sent back to a describe still built from the old schema: neither the old arguments nor
    # the new ones could succeed until an operator synced.
    from graphql import build_schema

    from mcp_gateway.core import result_payload
    from mcp_gateway.manifest import parse_manifest
    from mcp_gateway.runtime import Settings, open_gateway
    from tests.support.graphql_upstream import SDL, GraphQLApp
    from tests.support.upstream import serve_asgi

    app = GraphQLApp()
    with serve_asgi(app) as base:
        manifest = parse_manifest(
            f"project: drift\ndefault_mode: allow_all\nconnectors:\n  - slug: gq\n    base_url: {base}/graphql\n"
            "    source: {graphql: {introspect: true}}\n",
            base_dir=tmp_path,
        )
        settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": "k" * 40})
        async with open_gateway(settings, manifest=manifest) as gw:
            first = result_payload(await gw.call(OPERATOR, "gq.query.ping", {}))
            assert first["status"] == "ok", first
            app.schema = build_schema(SDL.replace("  ping: String\n", "  pong: String\n"))
            failed = result_payload(await gw.call(OPERATOR, "gq.query.ping", {}))
            assert failed["status"] == "error" and "Cannot query field" in failed["message"], failed
            assert "loading it again: describe gq.query.ping again" in failed["hint"], failed
            for _ in range(200):  # introspected again in the background: within 10 s
                if result_payload(await gw.describe(OPERATOR, "gq.query.pong")).get("name") == "gq.query.pong":
                    break
                await anyio.sleep(0.05)
            else:
                pytest.fail("the changed schema was not introspected again")
            assert result_payload(await gw.describe(OPERATOR, "gq.query.ping"))["reason"] == "action_not_found"
            introspections = sum(1 for r in app.requests if r.body.get("operationName") == "IntrospectionQuery")
            failed = result_payload(await gw.call(OPERATOR, "gq.query.ping", {}))  # by its stale name: not sent
            assert failed["status"] == "denied"
            assert introspections == 2
