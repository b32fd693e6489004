"""Rules judge a call as it goes out on the wire (a real loopback upstream behind the gateway): a
generic request as the curated action its method and path reach and by the path it sends, a
``when`` condition on the arguments after defaults are filled in, and a value by how the wire
carries it. Each case checks what reached the upstream: nothing, when a rule stops the call."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_gateway.core import Gateway, result_payload
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.runtime import Settings, open_gateway
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.vocabulary.clock import FixedClock
from tests.support.upstream import EchoApp

pytestmark = pytest.mark.anyio

SECRET = "policy-wire-canary-0123456789"
MANIFEST = """
project: wire
default_mode: risk
public_url: http://127.0.0.1:1
policies:
  - {{match: "bank.admin.*", action: block}}
  - {{match: "bank.request", action: block, when: {{path: {{matches: "^/vault"}}}}}}
  - {{match: "bank.transfers.create", action: require_approval, when: {{amount: {{gt: 1000}}}}}}
  - {{match: "bank.transfers.create", action: always_run}}
  - {{match: "bank.refunds.issue", action: require_approval, when: {{amount: {{gt: 1000}}}}}}
  - {{match: "bank.refunds.issue", action: always_run}}
  - {{match: "pm.*", action: require_approval, when: {{amount: {{gt: 1000}}}}}}
  - {{match: "pm.*", action: always_run}}
  - {{match: "site.request", action: block, when: {{path: {{matches: "^/admin"}}}}}}
  - {{match: "site.request", action: require_approval, when: {{path: {{matches: "^/held"}}}}}}
  - {{match: "site.*", action: always_run}}
connectors:
  - slug: bank
    base_url: {base}/api
    auth: {{type: bearer}}
    request_action: true
    source:
      http:
        actions:
          - {{path: admin.secrets.get, method: GET, url: /admin/secrets, risk: read}}
          - {{path: admin.purge, method: POST, url: /admin/purge}}
          - {{path: items.get, method: GET, url: "/items/{{{{id}}}}", risk: read}}
          - path: transfers.create
            method: POST
            url: /transfers
            input_schema:
              type: object
              properties: {{to: {{type: string}}, amount: {{description: "in cents"}}}}
          - path: refunds.issue
            method: POST
            url: /refunds
            params: {{amount: query}}
            input_schema: {{type: object, properties: {{amount: {{description: "in cents"}}}}}}
  - slug: pm
    base_url: {base}
    auth: {{type: bearer}}
    source: {{postman: ./pm.json}}
  - slug: site
    base_url: {base}
    auth: {{type: bearer}}
    request_action: true
    source:
      http:
        actions:
          - path: moved.get
            method: GET
            url: /redirect
            params: {{to: query}}
            risk: read
            input_schema: {{type: object, properties: {{to: {{type: string}}}}}}
"""
RAW_JSON = {"raw": {"language": "json"}}
COLLECTION = {
    "info": {"name": "PM", "schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"},
    "item": [
        {
            "name": "Create Transfer",
            "request": {
                "method": "POST",
                "header": [{"key": "Content-Type", "value": "application/json"}],
                "url": {"raw": "{{baseUrl}}/pm/transfers", "host": ["{{baseUrl}}"], "path": ["pm", "transfers"]},
                "body": {
                    "mode": "raw",
                    "raw": '{"amount": 5000, "to": "acct-1"}',
                    "options": {"raw": {"language": "json"}},
                },
            },
        }
    ],
}


@pytest.fixture
async def gateway(tmp_path: Path, upstream: tuple[EchoApp, str]) -> AsyncIterator[Gateway]:
    (tmp_path / "pm.json").write_text(json.dumps(COLLECTION))
    manifest = parse_manifest(MANIFEST.format(base=upstream[1]), base_dir=tmp_path)
    settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": "k" * 40})
    async with open_gateway(settings, manifest=manifest, clock=FixedClock()) as gw:
        await gw._vault.put("bank", SECRET)
        await gw._vault.put("pm", SECRET)
        await gw._vault.put("site", SECRET)
        yield gw


async def call(gw: Gateway, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return result_payload(await gw.call(OPERATOR, tool, args))


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/admin/secrets"),
        ("HEAD", "/admin/secrets"),
        ("OPTIONS", "/admin/purge"),
        ("POST", "/admin/purge"),
        ("GET", "admin/secrets"),
        ("GET", "/./admin/secrets"),
        ("GET", "/%61dmin/secrets"),
        ("GET", "/ADMIN/Secrets/"),
        ("GET", "/admin//secrets;x=1"),
    ],
)
async def test_a_request_reaching_a_blocked_action_is_blocked_by_its_rule(
    gateway: Gateway, upstream: tuple[EchoApp, str], method: str, path: str
) -> None:
    result = await call(gateway, "bank.request", {"method": method, "path": path})
    assert result["status"] == "denied" and result["reason"] == "policy_block", result
    assert result["rule"] == "bank.admin.*"
    assert upstream[0].requests == []


async def test_an_absolute_url_reaching_a_blocked_action_is_blocked(
    gateway: Gateway, upstream: tuple[EchoApp, str]
) -> None:
    result = await call(gateway, "bank.request", {"method": "GET", "path": f"{upstream[1]}/api/admin/secrets"})
    assert result["status"] == "denied" and result["reason"] == "policy_block", result
    assert upstream[0].requests == []


@pytest.mark.parametrize("path", ["/vault/keys", "vault/keys", "/./vault/keys", "/%76ault/keys", "/api/vault/x"])
async def test_a_path_condition_judges_the_path_as_sent(
    gateway: Gateway, upstream: tuple[EchoApp, str], path: str
) -> None:
    if path.startswith("/api/"):
        path = upstream[1] + path  # an absolute URL on the connector's own origin
    result = await call(gateway, "bank.request", {"method": "GET", "path": path})
    assert result["status"] == "denied" and result["rule"] == "bank.request", result
    assert upstream[0].requests == []


async def test_a_request_is_judged_by_the_conditions_of_the_action_it_reaches(
    gateway: Gateway, upstream: tuple[EchoApp, str]
) -> None:
    # The transfer's own rule asks a human above 1000, and the request action alone would have
    # asked too (a POST): a small one runs, a large one waits, whichever way it is sent.
    big = await call(gateway, "bank.request", {"method": "POST", "path": "/transfers", "body": {"amount": 5000}})
    assert big["status"] == "pending_approval", big
    read = await call(gateway, "bank.request", {"method": "GET", "path": "/items/7"})
    assert read["status"] == "ok", read
    assert [(r.method, r.path) for r in upstream[0].requests] == [("GET", "/api/items/7")]


@pytest.mark.parametrize("name", ["_method", "_METHOD", "X-HTTP-Method-Override"])
async def test_a_method_override_in_the_query_is_refused(
    gateway: Gateway, upstream: tuple[EchoApp, str], name: str
) -> None:
    by_query = await call(gateway, "bank.request", {"method": "GET", "path": "/items/1", "query": {name: "DELETE"}})
    in_path = await call(gateway, "bank.request", {"method": "GET", "path": f"/items/1?{name}=DELETE"})
    by_header = await call(
        gateway, "bank.request", {"method": "GET", "path": "/items/1", "headers": {"X-Override-Method": "DELETE"}}
    )
    for result in (by_query, in_path, by_header):
        assert result["status"] == "denied" and result["reason"] == "invalid_args", result
    assert upstream[0].requests == []


async def test_a_condition_sees_the_default_a_postman_request_sends(
    gateway: Gateway, upstream: tuple[EchoApp, str]
) -> None:
    bare = await call(gateway, "pm.create_transfer", {"to": "acct-9"})
    assert bare["status"] == "pending_approval", bare  # the collection's 5000 goes out
    assert "5000" in bare["summary"]
    small = await call(gateway, "pm.create_transfer", {"to": "acct-9", "amount": 5})
    assert small["status"] == "ok", small
    assert [json.loads(r.body) for r in upstream[0].requests] == [{"amount": 5, "to": "acct-9"}]


@pytest.mark.parametrize(
    ("tool", "amount"),
    [
        ("bank.refunds.issue", [5000]),  # goes out as ?amount=5000
        ("bank.refunds.issue", "5000"),
        ("bank.refunds.issue", " 5e3 "),
        ("bank.transfers.create", [5000]),
        ("bank.transfers.create", {"value": 5000}),
        ("bank.transfers.create", True),
    ],
)
async def test_a_value_shaped_otherwise_does_not_skip_a_condition(
    gateway: Gateway, upstream: tuple[EchoApp, str], tool: str, amount: Any
) -> None:
    result = await call(gateway, tool, {"amount": amount})
    assert result["status"] == "pending_approval", result
    assert upstream[0].requests == []
    small = await call(gateway, tool, {"amount": [5]})
    assert small["status"] == "ok", small


@pytest.mark.parametrize(
    ("tool", "to", "refusal"),
    [
        ("site.request", "/admin/secrets", "blocks that request"),
        ("site.request", "/%61dmin/secrets", "blocks that request"),
        ("site.request", "/held/x", "would need a human's approval"),
        ("site.moved.get", "/admin/secrets", "blocks that request"),  # a curated action's redirect too
    ],
)
async def test_a_redirect_is_judged_as_the_request_it_leads_to(
    gateway: Gateway, upstream: tuple[EchoApp, str], tool: str, to: str, refusal: str
) -> None:
    args = {"method": "GET", "path": "/redirect", "query": {"to": to}} if tool == "site.request" else {"to": to}
    result = await call(gateway, tool, args)
    assert result["status"] == "error" and result["reason"] == "upstream_redirect_refused", result
    assert refusal in result["message"] and "Nothing was sent there" in result["message"]
    assert [r.path for r in upstream[0].requests] == ["/redirect"]  # the target never reached
    assert SECRET not in json.dumps(result)


async def test_a_followed_redirect_is_on_the_audit_row(gateway: Gateway, upstream: tuple[EchoApp, str]) -> None:
    result = await call(gateway, "site.request", {"method": "GET", "path": "/redirect", "query": {"to": "/x?k=v"}})
    assert result["status"] == "ok" and result["data"]["path"] == "/x", result
    await gateway.auditor.flush()
    rows = [r for r in await gateway._store.list_audit() if r.action == "site.request" and r.status == "ok"]
    assert [r.redirected_to for r in rows] == ["/x"]


async def test_an_approved_write_is_not_replayed_by_a_redirect(gateway: Gateway, upstream: tuple[EchoApp, str]) -> None:
    args = {"method": "POST", "path": "/redirect", "query": {"to": "/admin/wipe", "status": "307"}, "body": {"all": 1}}
    result = await call(gateway, "site.request", args)
    assert result["status"] == "error" and result["reason"] == "upstream_redirect_refused", result
    assert "nothing was sent again" in result["message"]
    assert [(r.method, r.path) for r in upstream[0].requests] == [("POST", "/redirect")]
