"""The generic ``request`` action's executor: what it builds, what it refuses, and that the
connector's credential is applied server-side on the way out (a recording ``MockTransport``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_gateway.auth import LastMeterAuth
from mcp_gateway.execution.executor import HttpExecutor
from mcp_gateway.execution.request_action import RequestExecutor, build_generic_request
from mcp_gateway.manifest import ConnectorConfig, parse_manifest
from mcp_gateway.primitives.crypto import AESGCMCipher
from mcp_gateway.primitives.redaction import Redactor
from mcp_gateway.primitives.secrets import PROJECT_WIDE
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.sources.generic_request import INPUT_SCHEMA, request_action, with_request_action
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.errors import ArgumentError, UpstreamError
from mcp_gateway.vocabulary.model import HttpBinding

BASE = "https://api.example.com/v1"
SECRET = "request-canary-secret-0123456789"


def connector(auth: str = "{type: bearer}", headers: str = "{}", base_url: str = BASE) -> ConnectorConfig:
    text = f"""
project: t
connectors:
  - slug: api
    name: Example
    base_url: {base_url}
    auth: {auth}
    headers: {headers}
    request_action: true
    source: {{http: {{actions: [{{path: items.get, url: /items}}]}}}}
"""
    return parse_manifest(text).connectors[0]


def build(args: dict[str, Any], cfg: ConnectorConfig | None = None) -> httpx2.Request:
    return build_generic_request(args, BASE, cfg or connector())


def refused(args: dict[str, Any], cfg: ConnectorConfig | None = None) -> str:
    with pytest.raises(ArgumentError) as caught:
        build(args, cfg)
    assert caught.value.errors, caught.value
    return str(caught.value)


def test_relative_paths_go_below_the_base_path_with_query_and_headers() -> None:
    request = build(
        {
            "method": "GET",
            "path": "/repos/octo cat/hello?per_page=5",
            "query": {"state": "open", "labels": ["a", "b c"], "skip": None, "draft": False},
            "headers": {"X-GitHub-Api-Version": "2022-11-28", "Accept": "application/vnd.github+json"},
        }
    )
    assert request.method == "GET"
    assert request.url.raw_path == b"/v1/repos/octo%20cat/hello?per_page=5&state=open&labels=a&labels=b%20c&draft=false"
    assert request.headers["accept"] == "application/vnd.github+json"
    assert request.headers["x-github-api-version"] == "2022-11-28"
    assert "authorization" not in request.headers  # the credential is the auth step's job
    assert build({"method": "GET", "path": "items"}).url.raw_path == b"/v1/items"


def test_an_absolute_url_on_the_same_origin_is_allowed_below_the_base_path() -> None:
    request = build({"method": "GET", "path": "https://API.example.com:443/v1/other?x=1"})
    assert str(request.url) == "https://api.example.com/v1/other?x=1"


@pytest.mark.parametrize(
    "path", ["https://api.example.com/v2/other", "https://api.example.com/v10", "https://api.example.com/"]
)
def test_an_absolute_url_leaving_the_base_path_is_refused(path: str) -> None:
    assert "below https://api.example.com/v1/" in refused({"method": "GET", "path": path})


def test_confine_to_base_path_false_allows_the_whole_origin() -> None:
    cfg = connector().model_copy(update={"confine_to_base_path": False})
    request = build_generic_request({"method": "GET", "path": "https://api.example.com/v2/other"}, BASE, cfg)
    assert str(request.url) == "https://api.example.com/v2/other"


@pytest.mark.parametrize(
    "path",
    [
        "https://evil.example.com/v1/items",
        "http://api.example.com/v1/items",  # another scheme is another origin
        "https://api.example.com:8443/v1/items",
        "https://user:pw@api.example.com/v1/items",
        "//evil.example.com/items",
        "\\\\evil.example.com\\items",
        "file:///etc/passwd",
        "javascript:alert(1)",
    ],
)
def test_other_origins_are_refused(path: str) -> None:
    message = refused({"method": "GET", "path": path})
    assert "https://api.example.com" in message or "not allowed" in message or "backslash" in message


@pytest.mark.parametrize(
    "path", ["https://trusted-bank.example@api.example.com/v1/x", "https://user:hunter2@api.example.com/v1/x"]
)
def test_an_absolute_url_with_a_user_name_says_that_is_why(path: str) -> None:
    # Its origin is the connector's: the message must not read "X is not X's origin".
    message = refused({"method": "GET", "path": path})
    assert "may not carry a user name or password" in message and "is not this connector's origin" not in message
    assert "hunter2" not in message and "trusted-bank" not in message


@pytest.mark.parametrize(
    "path",
    [
        "/items/../admin",
        "../admin",
        "/items/%2e%2e/admin",
        "/items/%2E%2E/admin",
        "/items/.%2e/admin",
        "/items/%252e%252e/admin",
        "/items/..",
        "/items\\..\\admin",
        "https://api.example.com/v1/../admin",
        # Tomcat/Spring path parameters: '..;' is '..' to them.
        "/items/..;/admin",
        "/items/..;x=1/admin",
        "/items/%2e%2e;/admin",
        # Overlong UTF-8 forms of '.' and '/', which old decoders accept.
        "/items/%c0%ae%c0%ae/admin",
        "/items/%e0%80%ae%e0%80%ae/admin",
        "/items/..%c0%afadmin",
        "/items/%25c0%25ae%25c0%25ae/admin",
        # Full-width and compatibility forms that NFKC folds to '.' and '/'.
        "/items/\uff0e\uff0e/admin",
        "/items/%ef%bc%8e%ef%bc%8e/admin",
        "/items/..\uff0fadmin",
        "/items/\u2025/admin",
        # Windows drops trailing dots and spaces.
        "/items/.. /admin",
        "/items/.../admin",
        "/items/%2e%2e%20/admin",
    ],
)
def test_dot_dot_escapes_are_refused_also_encoded(path: str) -> None:
    message = refused({"method": "GET", "path": path})
    assert "'..'" in message or "backslash" in message or "UTF-8" in message


@pytest.mark.parametrize("name", ["Authorization", "authorization", "Cookie", "X-Api-Key", "Proxy-Authorization"])
def test_credential_headers_are_refused(name: str) -> None:
    message = refused({"method": "GET", "path": "/x", "headers": {name: "mine"}})
    assert "credential" in message and "mine" not in message


@pytest.mark.parametrize(
    "name",
    [
        "X-HTTP-Method-Override",
        "X-HTTP-Method",
        "X-Method-Override",
        "X-Original-URL",
        "X-Rewrite-URL",
        "X-Forwarded-For",
        "X-Forwarded-Host",
        "X-Forwarded-Prefix",
        "Forwarded",
    ],
)
def test_method_and_url_override_headers_are_refused(name: str) -> None:
    message = refused({"method": "GET", "path": "/x", "headers": {name: "DELETE"}})
    assert f"header {name!r} makes servers on the way use another method, URL or client" in message


@pytest.mark.parametrize("name", ["_method", "X-HTTP-Method-Override", "_method[]"])
def test_query_parameters_and_form_fields_read_as_the_method_are_refused(name: str) -> None:
    assert "another method than the request says" in refused({"method": "GET", "path": "/x", "query": {name: "DELETE"}})
    assert "another method than the request says" in refused({"method": "GET", "path": f"/x?{name}=DELETE"})
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    message = refused({"method": "POST", "path": "/x", "headers": form, "body": {name: "DELETE"}})
    assert f"form field {name!r} makes servers use another method" in message


@pytest.mark.parametrize("name", ["_method", "X-HTTP-Method-Override", "_method[]"])
def test_a_json_body_key_read_as_the_method_is_refused(name: str) -> None:
    # Laravel merges a JSON body into the input and reads its `_method`: this POST would run as a DELETE.
    message = refused({"method": "POST", "path": "/x", "body": {name: "DELETE", "id": 1}})
    assert f"JSON body key {name!r} makes servers use another method" in message
    as_text = {"method": "POST", "path": "/x", "headers": {"Content-Type": "application/vnd.api+json"}}
    assert "another method" in refused({**as_text, "body": json.dumps({name: "DELETE"})})


def test_a_json_body_keeps_nested_method_keys_and_plain_text() -> None:
    nested = build({"method": "POST", "path": "/x", "body": {"data": {"_method": "x"}}})
    assert json.loads(nested.content) == {"data": {"_method": "x"}}
    text = build({"method": "POST", "path": "/x", "body": '{"_method": "DELETE"}'})
    assert text.headers["content-type"].startswith("text/plain")


def test_a_header_given_twice_in_two_spellings_is_refused() -> None:
    # Last one wins on the wire: which that is would hang on the arguments' order.
    message = refused({"method": "POST", "path": "/x", "headers": {"x-recipient": "mallory", "X-Recipient": "alice"}})
    assert "given twice" in message


def test_the_connectors_own_auth_header_and_query_parameter_are_refused() -> None:
    custom = connector(auth='{type: custom, headers: {X-Custom-Token: "t {secret}"}}')
    assert "credential" in refused({"method": "GET", "path": "/x", "headers": {"x-custom-token": "v"}}, custom)
    query_key = connector(auth="{type: api_key, in: query, name: api_key}")
    assert "credential" in refused({"method": "GET", "path": "/x", "query": {"API_KEY": "v"}}, query_key)
    assert "credential" in refused({"method": "GET", "path": "/x?api_key=v"}, query_key)
    # Framing headers and header injection, too.
    assert "frames" in refused({"method": "GET", "path": "/x", "headers": {"Host": "evil"}})
    assert "line break" in refused({"method": "GET", "path": "/x", "headers": {"X-A": "a\r\nX-B: b"}})
    assert "not a valid header name" in refused({"method": "GET", "path": "/x", "headers": {"X A": "a"}})
    assert "control characters" in refused({"method": "GET", "path": "/x\r\nHost: evil"})
    assert "method" in refused({"method": "TRACE", "path": "/x"})


def test_bodies_json_text_and_form() -> None:
    posted = build({"method": "POST", "path": "/items", "body": {"name": "ü", "tags": [1, 2]}})
    assert json.loads(posted.content) == {"name": "ü", "tags": [1, 2]}
    assert posted.headers["content-type"] == "application/json"
    text = build({"method": "PUT", "path": "/notes/1", "body": "plain words"})
    assert text.content == b"plain words" and text.headers["content-type"].startswith("text/plain")
    form = build(
        {
            "method": "POST",
            "path": "/charges",
            "headers": {"Content-Type": "application/x-www-form-urlencoded"},
            "body": {"amount": 2000, "metadata": {"order": "a&b"}, "expand": ["customer", "invoice"], "live": True},
        }
    )
    assert form.content == (b"amount=2000&metadata[order]=a%26b&expand[0]=customer&expand[1]=invoice&live=true")
    assert build({"method": "GET", "path": "/x"}).content == b""


def test_static_headers_come_first_and_the_agent_may_override_non_credential_ones() -> None:
    cfg = connector(headers="{Accept: application/vnd.github+json, X-GitHub-Api-Version: '2022-11-28'}")
    request = build({"method": "GET", "path": "/x", "headers": {"X-GitHub-Api-Version": "2026-03-10"}}, cfg)
    assert request.headers["accept"] == "application/vnd.github+json"
    assert request.headers["x-github-api-version"] == "2026-03-10"


def test_the_synthesized_action_and_its_schema() -> None:
    cfg = connector()
    action = request_action(cfg)
    assert action.qualified_name == "api.request"
    assert action.risk == "write"
    assert action.input_schema == INPUT_SCHEMA
    assert set(INPUT_SCHEMA["properties"]) == {"method", "path", "query", "headers", "body"}
    assert INPUT_SCHEMA["required"] == ["method", "path"]
    assert [a.path for a in with_request_action(cfg, [action])] == ["request"]  # already there: not added twice
    curated = action.model_copy(update={"binding": HttpBinding(method="POST", url="/request")})
    assert [a.path for a in with_request_action(cfg, [curated])] == ["request", "request_2"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def vault(tmp_path: Path) -> AsyncIterator[CredentialVault]:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    try:
        yield CredentialVault(store, AESGCMCipher(b"k" * 32, project="t"), project="t")
    finally:
        await store.close()


@pytest.mark.anyio
async def test_run_applies_the_credential_server_side_and_sends_through_the_http_path(vault: CredentialVault) -> None:
    seen: list[httpx2.Request] = []

    def upstream(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json={"you_sent": request.headers.get("authorization")})

    cfg = connector()
    await vault.put("api", SECRET)
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream)) as client:
        executor = RequestExecutor(HttpExecutor(client))
        prepared = executor.prepare(request_action(cfg), {"method": "GET", "path": "/me"}, cfg, BASE)
        redactor = Redactor()
        sealed = await vault.sealed("api", principal=PROJECT_WIDE)
        outcome = await executor.run(
            prepared, auth=LastMeterAuth(cfg.auth, sealed, on_secret=redactor.add), max_bytes=10_000
        )
    assert outcome.http_status == 200
    assert seen[0].headers["authorization"] == f"Bearer {SECRET}"
    assert str(seen[0].url) == "https://api.example.com/v1/me"
    assert redactor.redact(outcome.data) == {"you_sent": "[redacted]"}

    with pytest.raises(UpstreamError) as caught:
        executor.prepare(request_action(cfg), {"method": "GET", "path": "/me"}, cfg, None)
    assert caught.value.reason == "connector_error"
