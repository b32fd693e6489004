"""The generic ``request`` action through the whole gateway (``runtime.open_gateway``, a real
loopback upstream): synthesized by sync, policy judging each call by its method, the credential
applied server-side and redacted on the way back, refusals as ``invalid_args``, and the hint a
failing curated action gives."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_gateway.core import Gateway, result_payload
from mcp_gateway.core.calls import DEFAULT_MAX_RESPONSE_BYTES
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.runtime import Settings, open_gateway
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.vocabulary.clock import FixedClock
from tests.support.upstream import EchoApp, LoopbackServer, RecordedRequest, Reply, echo_app

pytestmark = pytest.mark.anyio

SECRET = "request-action-canary-0123456789"
MANIFEST = """
project: reqs
default_mode: risk
public_url: http://127.0.0.1:1
connectors:
  - slug: echo
    base_url: {base}
    auth: {{type: bearer}}
    request_action: true
    source:
      http:
        actions:
          - path: status.get
            method: GET
            url: /status/{{code}}
            summary: Answer with an HTTP status
  - slug: plain
    base_url: {base}
    source:
      http:
        actions:
          - path: status.get
            method: GET
            url: /status/{{code}}
            summary: Answer with an HTTP status
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def upstream() -> Iterator[tuple[EchoApp, str]]:
    app = echo_app()
    with LoopbackServer(app) as server:
        yield app, server.base_url


@pytest.fixture
async def gateway(tmp_path: Path, upstream: tuple[EchoApp, str]) -> AsyncIterator[Gateway]:
    manifest = parse_manifest(MANIFEST.format(base=upstream[1]), base_dir=tmp_path)
    settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": "k" * 40})
    async with open_gateway(settings, manifest=manifest, clock=FixedClock()) as gw:
        await gw._vault.put("echo", SECRET)
        yield gw


async def call(gw: Gateway, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return result_payload(await gw.call(OPERATOR, tool, args))


async def test_sync_adds_the_request_action_only_where_asked(gateway: Gateway) -> None:
    described = result_payload(await gateway.describe(OPERATOR, "echo.request"))
    assert described["risk"] == "write"
    assert described["input_schema"]["required"] == ["method", "path"]
    assert (result_payload(await gateway.describe(OPERATOR, "plain.request")))["reason"] == "action_not_found"
    found = result_payload(await gateway.discover(OPERATOR, "send any http request to the api", connector="echo"))
    assert found["results"][0]["name"] == "echo.request"


async def test_policy_judges_each_call_by_its_method(gateway: Gateway, upstream: tuple[EchoApp, str]) -> None:
    app, _ = upstream
    read = await call(gateway, "echo.request", {"method": "GET", "path": "/things", "query": {"q": "x"}})
    assert read["status"] == "ok", read
    assert read["data"]["path"] == "/things" and read["data"]["query"] == "q=x"

    write = await call(gateway, "echo.request", {"method": "POST", "path": "/things", "body": {"a": 1}})
    assert write["status"] == "pending_approval"
    assert "(write)" in write["summary"]
    destroy = await call(gateway, "echo.request", {"method": "DELETE", "path": "/things/1"})
    assert destroy["status"] == "pending_approval"
    assert "(destructive)" in destroy["summary"]
    assert [r.method for r in app.requests] == ["GET"]  # nothing but the read reached the upstream


async def test_the_credential_is_applied_server_side_and_redacted(
    gateway: Gateway, upstream: tuple[EchoApp, str]
) -> None:
    app, _ = upstream
    result = await call(gateway, "echo.request", {"method": "GET", "path": "/whoami"})
    assert app.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
    assert result["data"]["headers"]["authorization"] == "[redacted]"
    assert SECRET not in repr(result)
    await gateway.auditor.flush()  # audit rows are written in the background
    rows = await gateway.auditor.recent(10)
    assert rows
    for row in rows:
        assert SECRET not in row.model_dump_json()


class _Hiding(EchoApp):
    """Echoes the bearer token back in ways no exact search finds: split by an invisible character, in a
    gzip body, at the very end of a binary body the response cap cuts."""

    @staticmethod
    async def _hidden(request: RecordedRequest, how: str) -> Reply:
        token = request.headers["authorization"].removeprefix("Bearer ").encode()
        if how == "zero-width":
            text = token[:5] + "\u200b".encode() + token[5:]
            return Reply(200, json.dumps({"you_sent": text.decode()}, ensure_ascii=False).encode())
        if how == "gzip":
            return Reply(200, gzip.compress(b"you sent: " + token), "application/gzip")
        cut = DEFAULT_MAX_RESPONSE_BYTES - len(token) + 1  # the cap falls on the token's last byte
        return Reply(200, bytes(cut) + token, "application/octet-stream")

    routes = (("/hidden/", _hidden), *EchoApp.routes)


@pytest.mark.parametrize("how", ["zero-width", "gzip", "cut"])
async def test_a_token_echoed_where_no_exact_search_finds_it_never_comes_back(tmp_path: Path, how: str) -> None:
    with LoopbackServer(_Hiding()) as server:
        manifest = parse_manifest(MANIFEST.format(base=server.base_url), base_dir=tmp_path)
        settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": "k" * 40})
        async with open_gateway(settings, manifest=manifest, clock=FixedClock()) as gw:
            await gw._vault.put("echo", SECRET)
            result = await call(gw, "echo.request", {"method": "GET", "path": f"/hidden/{how}"})
    assert result["status"] == "ok", result
    data = result["data"]
    seen = base64.b64decode(data["base64"]) if "base64" in data else json.dumps(data, ensure_ascii=False).encode()
    assert SECRET[:12].encode() not in seen and SECRET[-12:].encode() not in seen, data
    assert b"[redacted]" in seen


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ({"method": "GET", "path": "https://elsewhere.example/steal"}, "is not this connector's origin"),
        ({"method": "GET", "path": "/things/%2e%2e/%2e%2e/admin"}, "'..'"),
        ({"method": "GET", "path": "/x", "headers": {"Authorization": "Bearer mine"}}, "carries credentials"),
    ],
)
async def test_refusals_are_invalid_args_with_the_reason(
    gateway: Gateway, upstream: tuple[EchoApp, str], args: dict[str, Any], said: str
) -> None:
    result = await call(gateway, "echo.request", args)
    assert result["status"] == "denied" and result["reason"] == "invalid_args"
    assert said in result["message"]
    assert upstream[0].requests == []


async def test_a_failing_curated_action_points_at_the_request_action(gateway: Gateway) -> None:
    failed = await call(gateway, "echo.status.get", {"code": "422"})
    assert failed["status"] == "error" and failed["upstream_status"] == 422
    assert "echo.request" in failed["hint"]
    other = await call(gateway, "plain.status.get", {"code": "422"})
    assert "request" not in other["hint"]
    through_request = await call(gateway, "echo.request", {"method": "GET", "path": "/status/422"})
    assert "echo.request" not in through_request["hint"]


TRAVERSALS = [
    "/things/../admin",
    "/things/..;/admin",
    "/things/..;jsessionid=1/admin",
    "/things/%2e%2e;/admin",
    "/things/%c0%ae%c0%ae/admin",
    "/things/%e0%80%ae%e0%80%ae/admin",
    "/things/..%c0%afadmin",
    "/things/%25c0%25ae%25c0%25ae/admin",
    "/things/\uff0e\uff0e/admin",
    "/things/%ef%bc%8e%ef%bc%8e/admin",
    "/things/..\uff0fadmin",
    "/things/%252e%252e/admin",
    "/things/.. /admin",
]


async def test_every_traversal_form_is_refused_before_anything_is_sent(
    gateway: Gateway, upstream: tuple[EchoApp, str]
) -> None:
    for path in TRAVERSALS:
        result = await call(gateway, "echo.request", {"method": "GET", "path": path})
        assert result["status"] == "denied" and result["reason"] == "invalid_args", (path, result)
    assert upstream[0].requests == []  # the upstream counted zero hits
