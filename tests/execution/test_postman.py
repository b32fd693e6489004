"""Postman actions through the real gateway (``open_gateway``: SQLite state, vault, HTTP client)
against the recording echo upstream on loopback: what reaches the wire, what the agent gets back,
and that Box's committed bearer token reaches neither the upstream nor the catalog, logs or results."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from mcp_gateway.core import Gateway, result_payload
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.runtime import Settings, open_gateway
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.vocabulary.model import PostmanBinding
from tests.support.upstream import EchoApp, LoopbackServer, echo_app

pytestmark = pytest.mark.anyio

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "postman"
CONDUIT = DATA / "realworld" / "Conduit.postman_collection.json"
BOX = DATA / "box" / "box-platform-api-legacy.postman_collection.json"
BOX_LITERAL_TOKEN = "IIogH1E8oxIm1LYHlpOSIDbeoqAcyLAE"
SECRET = "postman-canary-secret-0123456789"
V21 = "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def upstream() -> Iterator[tuple[EchoApp, str]]:
    app = echo_app()
    with LoopbackServer(app) as server:
        yield app, server.base_url


@asynccontextmanager
async def _gateway(
    tmp_path: Path, connectors: str, *, secrets: dict[str, str] | None = None, mode: str = "allow_all"
) -> AsyncIterator[Gateway]:
    text = f"project: pm\ndefault_mode: {mode}\nconnectors:\n{connectors}"
    manifest = parse_manifest(text, base_dir=tmp_path)
    settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": "m" * 40})
    async with open_gateway(settings, manifest=manifest) as gateway:
        for slug, value in (secrets or {}).items():
            await gateway._vault.put(slug, value)
        yield gateway


async def _call(gateway: Gateway, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return result_payload(await gateway.call(OPERATOR, tool, args or {}))


async def test_conduit_end_to_end(tmp_path: Path, upstream: tuple[EchoApp, str]) -> None:
    app, base = upstream
    connector = f"""  - slug: conduit
    base_url: {base}/api
    auth: {{type: api_key, in: header, name: Authorization, prefix: "Token "}}
    source: {{postman: {CONDUIT}}}
"""
    async with _gateway(tmp_path, connector, secrets={"conduit": SECRET}) as gw:
        listed = (result_payload(await gw.connectors(OPERATOR)))["connectors"]
        assert listed[0]["status"] == "ready" and listed[0]["actions"] == 32

        result = await _call(gw, "conduit.articles_favorite_comments.articles_by_author", {"author": "jake"})
        assert result["status"] == "ok"
        sent = app.requests[-1]
        assert (sent.method, sent.path, sent.query) == ("GET", "/api/articles", "author=jake")
        assert sent.headers["authorization"] == f"Token {SECRET}"  # the connector's auth, server-side
        assert sent.headers["x-requested-with"] == "XMLHttpRequest"  # the collection's literal header
        assert result["data"]["headers"]["authorization"] == "Token [redacted]"

        user = {"email": "jake@jake.jake", "password": "jakejake", "username": "jake"}
        created = await _call(gw, "conduit.auth.register", {"user": user})
        assert created["status"] == "ok"
        assert app.requests[-1].method == "POST" and app.requests[-1].path == "/api/users"
        assert app.requests[-1].json() == {"user": user}
        assert app.requests[-1].headers["content-type"] == "application/json"

        described = result_payload(await gw.describe(OPERATOR, "conduit.auth.login"))
        assert described["input_schema"]["required"] == ["user"]
        catalog = await gw._store.get_catalog("conduit")
        assert catalog is not None
        by_slug = next(
            a
            for a in catalog.actions
            if isinstance(a.binding, PostmanBinding) and a.binding.method == "GET" and a.binding.url.endswith("{slug}")
        )
        await _call(gw, by_slug.qualified_name, {"slug": "how-to/train ?a dragon"})
        assert app.requests[-1].raw_path == "/api/articles/how-to%2Ftrain%20%3Fa%20dragon"
        climbing = await _call(gw, by_slug.qualified_name, {"slug": "how-to/../train"})
        assert climbing["status"] == "denied" and climbing["reason"] == "invalid_args"
        missing = await _call(gw, "conduit.auth.register", {})
        assert missing["status"] == "denied" and missing["reason"] == "invalid_args"


async def test_collection_values_reach_the_wire(tmp_path: Path, upstream: tuple[EchoApp, str]) -> None:
    app, base = upstream
    collection = {
        "info": {"name": "Wire", "schema": V21},
        "variable": [{"key": "version", "value": "v2"}],
        "item": [
            {
                "name": "Things",
                "item": [
                    {
                        "name": "Get thing",
                        "request": {
                            "method": "GET",
                            "url": "{{host}}/{{version}}/things/123?expand=owner&limit=<limit>",
                            "header": [{"key": "X-Client", "value": "postman"}, {"key": "X-Org", "value": "{{org}}"}],
                        },
                    },
                    {
                        "name": "Token",
                        "request": {
                            "method": "POST",
                            "url": "{{host}}/oauth/token",
                            "body": {
                                "mode": "urlencoded",
                                "urlencoded": [
                                    {"key": "grant_type", "value": "client_credentials"},
                                    {"key": "scope", "value": "{{scope}}"},
                                ],
                            },
                        },
                    },
                    {
                        "name": "Upload",
                        "request": {
                            "method": "POST",
                            "url": "{{host}}/files",
                            "body": {
                                "mode": "formdata",
                                "formdata": [
                                    {"key": "name", "value": "a.txt", "type": "text"},
                                    {"key": "file", "type": "file", "src": "a.txt"},
                                ],
                            },
                        },
                    },
                    {
                        "name": "Note",
                        "request": {
                            "method": "PUT",
                            "url": "{{host}}/notes/7",
                            "header": [{"key": "Content-Type", "value": "text/markdown"}],
                            "body": {"mode": "raw", "raw": "# hello", "options": {"raw": {"language": "text"}}},
                        },
                    },
                ],
            }
        ],
    }
    path = tmp_path / "wire.postman_collection.json"
    path.write_text(json.dumps(collection))
    connector = f"""  - slug: wire
    base_url: {base}/base
    auth: {{type: bearer}}
    headers: {{X-Client: operator}}
    source: {{postman: {path.name}}}
"""
    async with _gateway(tmp_path, connector, secrets={"wire": SECRET}) as gw:
        # Bare call: the collection's values are sent as defaults; the placeholder is not.
        await _call(gw, "wire.things.get_thing", {"x_org": "acme"})
        sent = app.requests[-1]
        assert sent.path == "/base/v2/things/123" and sent.query == "expand=owner"
        assert sent.headers["x-client"] == "operator"  # the operator's static header wins over the collection's
        assert sent.headers["x-org"] == "acme"
        assert sent.headers["authorization"] == f"Bearer {SECRET}"
        await _call(gw, "wire.things.get_thing", {"x_org": "acme", "thing_id": 9, "limit": 5, "expand": None})
        assert app.requests[-1].path == "/base/v2/things/9" and app.requests[-1].query == "limit=5"

        await _call(gw, "wire.things.token", {"scope": "read write"})
        assert app.requests[-1].body == b"grant_type=client_credentials&scope=read+write"
        assert app.requests[-1].headers["content-type"] == "application/x-www-form-urlencoded"

        await _call(gw, "wire.things.upload", {"file": {"content": "hello file", "filename": "h.txt"}})
        upload = app.requests[-1]
        assert upload.headers["content-type"].startswith("multipart/form-data; boundary=")
        assert b'name="name"\r\n\r\na.txt' in upload.body
        assert b'name="file"; filename="h.txt"' in upload.body and b"hello file" in upload.body

        await _call(gw, "wire.things.note", {"body": "# changed"})
        assert app.requests[-1].body == b"# changed"
        assert app.requests[-1].headers["content-type"] == "text/markdown"
        assert app.requests[-1].path == "/base/notes/7"


async def test_box_literal_token_goes_nowhere(
    tmp_path: Path, upstream: tuple[EchoApp, str], caplog: pytest.LogCaptureFixture
) -> None:
    app, base = upstream
    caplog.set_level(logging.DEBUG)
    connector = f"""  - slug: box
    base_url: {base}
    auth: {{type: bearer}}
    source: {{postman: {BOX}}}
"""
    async with _gateway(tmp_path, connector, secrets={"box": SECRET}) as gw:
        await gw.sync()  # a second sync reads the stored catalog back
        results = [
            result_payload(await gw.connectors(OPERATOR)),
            result_payload(await gw.discover(OPERATOR, "accept terms of service")),
        ]
        catalog = await gw._store.get_catalog("box")
        assert catalog is not None and len(catalog.actions) == 255
        assert BOX_LITERAL_TOKEN not in json.dumps([a.model_dump(mode="json") for a in catalog.actions])
        accept = next(a for a in catalog.actions if a.summary == "Accepts Terms of Service of User")
        results.append(result_payload(await gw.describe(OPERATOR, accept.qualified_name)))
        results.append(await _call(gw, accept.qualified_name))
        assert app.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
        assert app.requests[-1].path == "/2.0/terms_of_service_user_statuses/13696422"
        assert app.requests[-1].json() == {"is_accepted": True}
        assert BOX_LITERAL_TOKEN not in json.dumps(results)
        assert all(BOX_LITERAL_TOKEN not in json.dumps(r.as_json()) for r in app.requests)
    stored = b"".join(p.read_bytes() for p in (tmp_path / "state").iterdir() if p.is_file())
    assert b"box-platform-api-legacy" in stored  # the catalog really is in there (its actions compressed)
    assert BOX_LITERAL_TOKEN.encode() not in stored
    assert BOX_LITERAL_TOKEN not in caplog.text


async def test_a_malformed_collection_fails_only_its_connector(tmp_path: Path, upstream: tuple[EchoApp, str]) -> None:
    _, base = upstream
    (tmp_path / "junk.json").write_text("{not json")
    (tmp_path / "v1.json").write_text('{"requests": [], "order": []}')
    good = {"info": {"name": "G", "schema": V21}, "item": [{"name": "Ping", "request": "{{h}}/ping"}]}
    (tmp_path / "good.json").write_text(json.dumps(good))
    connectors = "".join(
        f"  - slug: {slug}\n    base_url: {base}\n    source: {{postman: {file}}}\n"
        for slug, file in (("junk", "junk.json"), ("v1", "v1.json"), ("absent", "absent.json"), ("good", "good.json"))
    )
    async with _gateway(tmp_path, connectors) as gw:
        states = {c["slug"]: c for c in (result_payload(await gw.connectors(OPERATOR)))["connectors"]}
        assert states["good"]["status"] == "ready" and states["good"]["actions"] == 1
        assert states["junk"]["status"] == "error" and "not valid JSON" in states["junk"]["error"]
        assert states["v1"]["status"] == "error" and "v1 collection" in states["v1"]["error"]
        assert states["absent"]["status"] == "error" and "absent.json" in states["absent"]["error"]
        assert (await _call(gw, "good.ping"))["status"] == "ok"
        (tmp_path / "junk.json").write_text(json.dumps(good))
        recovered = {s.slug: s for s in await gw.sync()}
        assert recovered["junk"].status == "ready" and recovered["junk"].actions == 1


async def test_an_approval_shows_the_collection_values_a_bare_call_sends(
    tmp_path: Path, upstream: tuple[EchoApp, str]
) -> None:
    # Called bare, a Postman request replays the collection's own values: they are sent as much as
    # the agent's arguments, so the approver sees them too.
    _, base = upstream
    collection = {
        "info": {"name": "Pay", "schema": V21},
        "item": [
            {
                "name": "Send payment",
                "request": {
                    "method": "POST",
                    "url": f"{base}/pay",
                    "body": {"mode": "raw", "raw": '{"to": "alice", "amount": 5, "dry_run": true}'},
                    "header": [{"key": "Content-Type", "value": "application/json"}],
                },
            }
        ],
    }
    path = tmp_path / "pay.json"
    path.write_text(json.dumps(collection))
    async with _gateway(tmp_path, f"  - slug: pay\n    source: {{postman: {path}}}\n", mode="risk") as gateway:
        catalog = await gateway._store.get_catalog("pay")
        assert catalog is not None
        (name,) = [a.qualified_name for a in catalog.actions]
        pending = await gateway.call(OPERATOR, name, {})
        assert pending.status == "pending_approval", pending
        record = await gateway.approvals.get(pending.approval_id)  # type: ignore[union-attr]
        assert record is not None
        shown = json.loads(record.arguments)
        assert "alice" in json.dumps(shown) and "dry_run" in json.dumps(shown), shown
        assert "alice" in record.summary
