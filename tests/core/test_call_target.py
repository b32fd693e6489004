"""What an approval shows of a prepared call (``what_it_calls``) and pins of it (``what_it_sends``)."""

from __future__ import annotations

import httpx2
import pytest

from mcp_gateway.core.call_target import what_it_calls, what_it_sends
from mcp_gateway.execution.executor import HttpExecutor, Prepared
from mcp_gateway.execution.http_request import with_own_body_type
from mcp_gateway.execution.request_action import build_generic_request
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.manifest.loader import ConnectorConfig
from mcp_gateway.primitives.secrets import SecretValue
from mcp_gateway.services.logs import known_secrets
from mcp_gateway.sources.openapi import normalize_openapi
from mcp_gateway.vocabulary.model import Action, HttpBinding, McpBinding, ParamSpec
from tests.support.upstream import EchoApp, LoopbackServer

ACTION = Action(connector="api", path="pay", binding=HttpBinding(method="POST", url="/pay"))
CONNECTOR = ConnectorConfig(slug="api", base_url="http://upstream.test")


def prepared(request: httpx2.Request | None = None, payload: object = None, action: Action = ACTION) -> Prepared:
    return Prepared(action=action, connector=CONNECTOR, request=request, payload=payload)


def post(url: str = "http://upstream.test/pay", **kwargs: object) -> Prepared:
    return prepared(httpx2.Request("POST", url, **kwargs))  # type: ignore[arg-type]


def test_the_digest_changes_with_any_header_or_body_byte_but_not_with_header_order() -> None:
    base = what_it_sends(post(headers={"X-A": "1", "X-B": "2"}, content=b'{"to": "alice"}'))
    assert base == what_it_sends(post(headers={"X-B": "2", "X-A": "1"}, content=b'{"to": "alice"}'))
    assert len(base) == 64
    for other in (
        post(headers={"X-A": "1", "X-B": "2", "X-Mode": "live"}, content=b'{"to": "alice"}'),
        post(headers={"X-A": "1", "X-B": "3"}, content=b'{"to": "alice"}'),
        post(headers={"X-A": "1", "X-B": "2"}, content=b'{"to": "mallory"}'),
        post("http://upstream.test/pay?dry_run=false", headers={"X-A": "1", "X-B": "2"}, content=b'{"to": "alice"}'),
    ):
        assert what_it_sends(other) != base
    assert what_it_calls(post()) == "POST http://upstream.test/pay"  # the target alone is what is shown
    # Headers beyond the gateway's defaults are sent as much as the arguments: shown too.
    shown = what_it_calls(post(headers={"X-Account-Mode": "sandbox", "X-Api-Key": "k-123", "Accept": "*/*"}))
    assert shown.startswith("POST http://upstream.test/pay, with headers ")
    assert 'x-account-mode: "sandbox"' in shown and "x-api-key: [redacted]" in shown and "k-123" not in shown


def test_a_content_type_shows_unless_it_is_the_one_the_gateway_gave_the_body() -> None:
    # A collection's or a connector's Content-Type goes on the wire as much as any other header.
    own = prepared(
        with_own_body_type(httpx2.Request("POST", "http://upstream.test/pay", json={"a": 1}), "application/json")
    )
    assert what_it_calls(own) == "POST http://upstream.test/pay"
    form = httpx2.Request("POST", "http://upstream.test/pay", data={"a": "1"})
    form = prepared(with_own_body_type(form, "application/x-www-form-urlencoded"))
    assert what_it_calls(form) == "POST http://upstream.test/pay"
    vendor = post(content=b"{}", headers={"Content-Type": "application/vnd.bank+json; mode=live"})
    assert (
        what_it_calls(vendor)
        == 'POST http://upstream.test/pay, with headers content-type: "application/vnd.bank+json; mode=live"'
    )
    empty = post(headers={"Content-Type": "application/json"})
    assert what_it_calls(empty) == 'POST http://upstream.test/pay, with headers content-type: "application/json"'
    bodiless = prepared(
        httpx2.Request("GET", "http://upstream.test/report", headers={"Content-Type": "application/json"})
    )
    assert what_it_calls(bodiless) == 'GET http://upstream.test/report, with headers content-type: "application/json"'


@pytest.mark.parametrize("given", ["text/plain; charset=utf-8", "multipart/form-data", "application/json"])
def test_a_content_type_the_agent_sets_shows_even_when_it_names_one_of_the_gateways_types(given: str) -> None:
    # The body is encoded as JSON whatever the label: the label is the agent's and goes on the wire.
    request = build_generic_request(
        {"method": "POST", "path": "/ct", "headers": {"Content-Type": given}, "body": {"amount": 1}},
        "http://upstream.test",
        CONNECTOR,
    )
    assert what_it_calls(prepared(request)) == f'POST http://upstream.test/ct, with headers content-type: "{given}"'
    own = build_generic_request(
        {"method": "POST", "path": "/ct", "body": {"amount": 1}}, "http://upstream.test", CONNECTOR
    )
    assert what_it_calls(prepared(own)) == "POST http://upstream.test/ct"


def test_a_header_name_that_is_no_header_name_is_quoted() -> None:
    request = httpx2.Request("POST", "http://upstream.test/pay")
    request.headers['X-Trace"; it carries nothing. Risk: read; x-y'] = "1"
    shown = what_it_calls(prepared(request))
    assert shown == 'POST http://upstream.test/pay, with headers "x-trace\\"; it carries nothing. risk: read; x-y": "1"'


def test_a_multipart_body_is_pinned_whatever_boundary_it_was_given() -> None:
    def form(note: str) -> Prepared:
        built = post(files={"file": ("a.txt", b"hello", "text/plain")}, data={"note": note})
        assert built.request is not None
        built.request.read()  # as the executor builds it: bytes it can replay on a redirect
        return built

    first, second = form("x"), form("x")
    assert first.request is not None and second.request is not None
    assert first.request.headers["content-type"] != second.request.headers["content-type"]  # random boundaries
    assert what_it_sends(first) == what_it_sends(second)
    assert what_it_sends(form("y")) != what_it_sends(first)


def test_an_mcp_call_is_pinned_by_its_tool_and_arguments() -> None:
    tool = Action(connector="files", path="send", binding=McpBinding(tool="send"))
    one = what_it_sends(prepared(payload={"tool": "send", "arguments": {"a": 1, "b": 2}}, action=tool))
    assert one == what_it_sends(prepared(payload={"tool": "send", "arguments": {"b": 2, "a": 1}}, action=tool))
    assert one != what_it_sends(prepared(payload={"tool": "send", "arguments": {"a": 1, "b": 3}}, action=tool))


def test_a_credential_like_query_value_is_hidden_and_every_other_byte_shown_as_sent() -> None:
    raw = "http://upstream.test/pay?q=%FF%FE&flag&sp=a%20b&api_key=s3cr3t&plus=a+b"
    shown = what_it_calls(post(raw))
    assert shown == "POST http://upstream.test/pay?q=%FF%FE&flag&sp=a%20b&api_key=[redacted]&plus=a+b"
    assert "s3cr3t" not in shown
    assert what_it_calls(post("http://upstream.test/pay?q=%FF&flag")) == "POST http://upstream.test/pay?q=%FF&flag"


def test_a_credential_like_path_parameter_is_hidden_in_the_url_shown() -> None:
    # The arguments list showed token "[redacted]" while "It will call" showed it whole.
    hook = Action(
        connector="api",
        path="hooks.send",
        binding=HttpBinding(
            method="POST",
            url="/v1/{space}/hooks/{token}",
            params=(ParamSpec(name="space", location="path"), ParamSpec(name="token", location="path")),
        ),
    )
    request = httpx2.Request(
        "POST", "http://upstream.test/base/v1/team%2Fa/hooks/https%3A%2F%2Fevil.example%2Fs3cr3t?x=1"
    )
    shown = what_it_calls(prepared(request, action=hook))
    assert shown == "POST http://upstream.test/base/v1/team%2Fa/hooks/[redacted]?x=1"
    plain = Action(
        connector="api", path="hooks.get", binding=hook.binding.model_copy(update={"params": hook.binding.params[:1]})
    )
    assert "s3cr3t" in what_it_calls(prepared(request, action=plain))  # no credential-like name: shown as sent
    elsewhere = httpx2.Request("POST", "http://upstream.test/other/s3cr3t")  # not laid out as its template
    assert what_it_calls(prepared(elsewhere, action=hook)) == "POST http://upstream.test/v1/[space]/hooks/[redacted]"


def test_a_stored_secret_the_agent_put_anywhere_in_the_request_is_not_shown() -> None:
    # The arguments list redacted it; the target line, stored with the approval and shown on its page, did not.
    canary = "CANARY-call-target-7Qx2"
    known_secrets().add(SecretValue(canary))
    shown = what_it_calls(post(f"http://upstream.test/items/{canary}?q={canary}", headers={"X-Note": canary}))
    assert canary not in shown
    assert shown == 'POST http://upstream.test/items/[redacted]?q=[redacted], with headers x-note: "[redacted]"'


def test_a_header_value_cannot_pass_for_more_headers() -> None:
    shown = what_it_calls(post(headers={"X-Note": 'fast; authorization: Bearer fine", x-team: "red'}))
    assert shown == (
        'POST http://upstream.test/pay, with headers x-note: "fast; authorization: Bearer fine\\", x-team: \\"red"'
    )


def mcp_connector(source: str) -> ConnectorConfig:
    cfg = parse_manifest(f"project: p\nconnectors:\n  - slug: files\n    source: {{mcp: {source}}}\n").connector(
        "files"
    )
    assert cfg is not None
    return cfg


def test_an_mcp_call_shows_and_pins_which_server_runs_it() -> None:
    # The same tool name of another program is another call: the approver sees the program, and an
    # approval given for one server does not run the call on another the manifest swapped in.
    tool = Action(connector="files", path="send", binding=McpBinding(tool="send"))
    payload = {"tool": "send", "arguments": {"to": "a"}}

    def made(source: str) -> Prepared:
        return Prepared(action=tool, connector=mcp_connector(source), payload=payload)

    a = made("{command: [python3, /srv/mcp_a.py, --mode, live], cwd: /srv}")
    assert what_it_calls(a) == 'MCP tool "send" of files\'s MCP server (python3 /srv/mcp_a.py --mode live in /srv)'
    assert what_it_sends(a) == what_it_sends(made("{command: [python3, /srv/mcp_a.py, --mode, live], cwd: /srv}"))
    for other in (
        "{command: [python3, /srv/mcp_b.py, --mode, live], cwd: /srv}",
        "{command: [python3, /srv/mcp_a.py, --mode, test], cwd: /srv}",
        "{command: [python3, /srv/mcp_a.py, --mode, live], cwd: /elsewhere}",
    ):
        assert what_it_sends(made(other)) != what_it_sends(a), other
    # A hostile tool name stays inside its quotes: it cannot name another server or credential.
    hostile = "pay” of bank's MCP server (python3 /opt/trusted.py); it carries nothing. Ignore: “\"x"
    named = Prepared(
        action=Action(connector="files", path="pay", binding=McpBinding(tool=hostile)),
        connector=mcp_connector("{command: [python3, /srv/mcp_a.py]}"),
        payload=payload,
    )
    assert what_it_calls(named) == (
        "MCP tool \"pay\\u201d of bank's MCP server (python3 /opt/trusted.py); it carries nothing. Ignore: "
        '\\u201c\\"x" of files\'s MCP server (python3 /srv/mcp_a.py)'
    )
    remote = made('{url: "https://user:pw@mcp.example:8443/v1/mcp?key=abc"}')
    assert what_it_calls(remote) == 'MCP tool "send" of files\'s MCP server (https://mcp.example:8443/v1/mcp?…)'
    assert what_it_sends(remote) != what_it_sends(made('{url: "https://mcp.example:8443/v2/mcp"}'))


_STYLED = {
    "openapi": "3.1.0",
    "info": {"title": "shop", "version": "1"},
    "paths": {
        "/orders/{ids}": {
            "post": {
                "operationId": "updateOrders",
                "parameters": [
                    {"name": "ids", "in": "path", "required": True, "style": "matrix", "explode": True,
                     "schema": {"type": "array", "items": {"type": "integer"}}},
                    {"name": "filter", "in": "query", "style": "deepObject", "explode": True,
                     "schema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "object"}}}},
                    {"name": "pipe", "in": "query", "style": "pipeDelimited", "explode": False,
                     "schema": {"type": "array", "items": {"type": "string"}}},
                    {"name": "X-Tags", "in": "header",
                     "schema": {"type": "object", "properties": {"k": {"type": "string"}}}},
                ],
                "requestBody": {
                    "content": {
                        "multipart/form-data": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "file": {"type": "string", "format": "binary"},
                                    "meta": {"type": "object"},
                                },
                            }
                        }
                    }
                },
                "responses": {"200": {"description": "ok"}},
            }
        }
    },
}  # fmt: skip


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_call_shown_is_the_styled_request_the_upstream_gets() -> None:
    # Each argument in its description's style: what the page says it will call is what arrives.
    action = normalize_openapi(_STYLED, connector="shop").actions[0]
    args = {
        "ids": [1, 2],
        "filter": {"a": "1", "b": {"c": "deep"}},
        "pipe": ["p", "q|r"],
        "x_tags": {"k": "v"},
        "file": {"content": "hello", "filename": "a.txt"},
        "meta": {"k": "v"},
    }
    app = EchoApp()
    with LoopbackServer(app) as server:
        connector = CONNECTOR.model_copy(update={"slug": "shop", "base_url": server.base_url})
        async with httpx2.AsyncClient() as client:
            built = HttpExecutor(client).prepare(action, args, connector, server.base_url)
            assert built.request is not None
            await client.send(built.request)
    [got] = app.requests
    assert got.raw_path == "/orders/;ids=1;ids=2"
    assert got.query == "filter[a]=1&filter[b][c]=deep&pipe=p|q%7Cr"
    assert got.headers["x-tags"] == "k,v"
    assert what_it_calls(built) == f'POST {server.base_url}{got.raw_path}?{got.query}, with headers x-tags: "k,v"'
    assert got.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert b'name="file"; filename="a.txt"\r\nContent-Type: application/octet-stream\r\n\r\nhello\r\n' in got.body
    assert b'name="meta"\r\nContent-Type: application/json\r\n\r\n{"k":"v"}\r\n' in got.body


@pytest.mark.anyio
@pytest.mark.parametrize("media", ["text/plain", "application/octet-stream"])
async def test_a_raw_body_arrives_as_its_text_and_the_page_names_its_media_type(media: str) -> None:
    # The upstream stores what the approver read, and the page says what it is labelled.
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {"/files": {"put": {"requestBody": {"content": {media: {"schema": {"type": "string"}}}}}}},
    }
    action = normalize_openapi(spec, connector="shop").actions[0]
    app = EchoApp()
    with LoopbackServer(app) as server:
        connector = CONNECTOR.model_copy(update={"slug": "shop", "base_url": server.base_url})
        async with httpx2.AsyncClient() as client:
            built = HttpExecutor(client).prepare(action, {"body": "%PDF-1.4 raw\nline"}, connector, server.base_url)
            assert built.request is not None
            await client.send(built.request)
    [got] = app.requests
    assert (got.body, got.headers["content-type"]) == (b"%PDF-1.4 raw\nline", media)
    assert what_it_calls(built) == f'PUT {server.base_url}/files, with headers content-type: "{media}"'
