"""The canary test for the human pages: every credential shape, the OAuth2 sign-in, an approval and
the operator overview, with a distinctive secret in everything a human submits.

A human fills in each page the way a browser without JavaScript would: a connect page for every
credential shape (single value, basic, oauth1, hmac, aws_sigv4 with a session token, mtls with the
certificate uploaded as a file and the key pasted), a named secret, an OAuth2 authorization code
sign-in and an OAuth2 client credentials form (against a real authorization server), an approval.
The agent's next ``call`` through each connector must work, and the upstream must have received
the credential, so the test cannot pass by never sending one. Afterwards the canary, and every
token the authorization server issued, must appear in no HTML response, no redirect URL, no tool
result, no log line, no audit row and nowhere in the state directory's raw bytes (while the
gateway runs and after it stopped).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.support.env import child_env
from tests.support.oauth2_server import OAuth2MockServer, ProtectedApi
from tests.support.pages import csrf, get, oauth_sign_in, post
from tests.support.upstream import EchoApp, LoopbackServer

from .conftest import GatewayEnv, HttpGateway, free_port, http_client
from .test_canary import MARK, Evidence

pytestmark = pytest.mark.anyio

ACTIONS = """    source:
      http:
        actions:
          - path: items.get
            method: GET
            url: /items/{id}
            summary: Fetch one item
            input_schema: {type: object, required: [id], properties: {id: {type: string}}}
          - path: items.create
            method: POST
            url: /items
            summary: Create an item
            input_schema: {type: object, required: [name], properties: {name: {type: string}}}
"""
CONNECTORS = {
    "bearer_api": "{type: bearer}",
    "key_api": "{type: api_key, in: header, name: X-Api-Key}",
    "custom_api": '{type: custom, headers: {X-Custom-Auth: "Token {secret}"}}',
    "basic_api": "{type: basic}",
    "hmac_api": "{type: hmac, header: X-Signature}",
    "oauth1_api": "{type: oauth1}",
    "sigv4_api": "{type: aws_sigv4, service: execute-api, region: eu-west-1}",
    "mtls_api": "{type: mtls, ca_file: pki/ca.pem}",
}
# What the human types into each form (identifiers in clear, secrets marked).
FORMS: dict[str, dict[str, str]] = {
    "bearer_api": {"secret": f"{MARK}-bearer"},
    "key_api": {"secret": f"{MARK}-api-key"},
    "custom_api": {"secret": f"{MARK}-custom"},
    "basic_api": {"username": "pat", "password": f"{MARK}-password"},
    "hmac_api": {"secret": f"{MARK}-hmac-key"},
    "oauth1_api": {
        "consumer_key": "consumer0001",
        "consumer_secret": f"{MARK}-consumer-secret",
        "token": f"{MARK}-oauth1-token",
        "token_secret": f"{MARK}-token-secret",
    },
    "sigv4_api": {
        "access_key_id": "AKIAPAGES00000000001",
        "secret_access_key": f"{MARK}-aws/secret+key",
        "session_token": f"{MARK}-session-token",
    },
}
CLIENT = {"client_id": "pages-client", "client_secret": f"{MARK}-oauth2-client-secret"}
NAMED = f"{MARK}-named-secret"


@dataclass
class PagesEnv:
    gw: GatewayEnv
    echo: EchoApp
    tls_echo: EchoApp
    auth: OAuth2MockServer
    api: ProtectedApi
    client_cert_pem: str
    client_key_pem: str
    evidence: Evidence = field(default_factory=Evidence)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def pages_env(tmp_path: Path) -> Iterator[PagesEnv]:
    ca = trustme.CA()
    pki = tmp_path / "pki"
    pki.mkdir()
    ca.cert_pem.write_to_path(str(pki / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pki / "server.pem"))
    client = ca.issue_cert("client@pages.test")
    echo, tls_echo = EchoApp(), EchoApp()
    with (
        OAuth2MockServer() as auth,
        LoopbackServer(echo) as plain,
        LoopbackServer(
            tls_echo,
            ssl_certfile=str(pki / "server.pem"),
            ssl_ca_certs=str(pki / "ca.pem"),
            ssl_cert_reqs=ssl.CERT_REQUIRED,
        ) as tls,
    ):
        api = ProtectedApi(auth.jwks())
        with LoopbackServer(api) as protected:
            blocks = [
                f"  - slug: {slug}\n    base_url: {tls.base_url if slug == 'mtls_api' else plain.base_url}\n"
                f"    auth: {auth_block}\n{ACTIONS}"
                for slug, auth_block in CONNECTORS.items()
            ]
            blocks.append(
                f'  - slug: people\n    base_url: {protected.base_url}\n    auth: {{type: oauth2, authorize_url: "'
                f'{auth.authorize_url}", token_url: "{auth.token_url}", scopes: [read]}}\n{ACTIONS}'
            )
            blocks.append(
                f"  - slug: robots\n    base_url: {protected.base_url}\n    auth: {{type: oauth2, flow: "
                f'client_credentials, token_url: "{auth.token_url}"}}\n{ACTIONS}'
            )
            pages_port = free_port()
            manifest = tmp_path / "pages.yaml"
            manifest.write_text(
                f"project: pages\npublic_url: http://127.0.0.1:{pages_port}\nconnectors:\n" + "".join(blocks)
            )
            # No MCP_GATEWAY_MASTER_KEY: the gateway creates state/master.key, which is searched too.
            env = child_env() | {
                "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
                "PYTHONUNBUFFERED": "1",
            }
            gw = GatewayEnv(tmp_path, manifest, tmp_path / "state", echo, plain.base_url, pages_port, env)
            key = f"{MARK}-mtls-key-comment\n" + client.private_key_pem.bytes().decode()
            cert = "".join(p.bytes().decode() for p in client.cert_chain_pems)
            yield PagesEnv(gw, echo, tls_echo, auth, api, cert, key)


async def test_pages_for_every_shape_never_leak(pages_env: PagesEnv) -> None:
    env, ev = pages_env, pages_env.evidence
    server = HttpGateway(env.gw, env.gw.root / "gateway.log")
    try:
        token = env.gw.cli("token", "create", "--agent", "bot").stdout.strip()
        async with http_client(server.url, token) as client:

            async def tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
                return ev.add_result(f"{name} {json.dumps(args)}", await client.call_tool(name, args))

            async def page_get(label: str, url: str) -> str:
                response = await get(url)
                ev.add(f"GET {label}", response.text)
                assert response.status_code == 200, response.text
                return response.text

            for slug, values in FORMS.items():
                link = (await tool("connect", {"connector": slug}))["connect_url"]
                html = await page_get(slug, link)
                for name in values:
                    assert f'name="{name}"' in html, (slug, name)
                saved = await post(link, {"csrf": csrf(html), **values})
                ev.add(f"POST {slug}", saved.text)
                assert saved.status_code == 200 and "Saved" in saved.text, (slug, saved.text)

            # mTLS: the certificate uploaded as a file, the key pasted.
            link = (await tool("connect", {"connector": "mtls_api"}))["connect_url"]
            html = await page_get("mtls", link)
            assert 'enctype="multipart/form-data"' in html and 'type="file"' in html
            files = {"cert_pem_file": ("client.crt", env.client_cert_pem.encode(), "application/x-pem-file")}
            saved = await post(link, {"csrf": csrf(html), "key_pem": env.client_key_pem}, files=files)
            ev.add("POST mtls", saved.text)
            assert saved.status_code == 200 and "Saved" in saved.text, saved.text

            # aws_sigv4: the region is the manifest's, shown and not editable. Its team-wide credential is
            # stored by now: the agent's new link waits for an operator, the operator's own does not.
            waits = await get((await tool("connect", {"connector": "sigv4_api"}))["connect_url"])
            assert "Waiting for an operator" in waits.text and 'name="secret_access_key"' not in waits.text
            operators = json.loads(env.gw.cli("connect", "sigv4_api").stdout)["connect_url"]
            sigv4 = await get(server.url + "/connect/" + operators.rsplit("/", 1)[1])
            assert "<dt>Region</dt><dd><code>eu-west-1</code></dd>" in sigv4.text and 'name="region"' not in sigv4.text

            # A named secret.
            link = (await tool("request_secret", {"connector": "bearer_api", "name": "extra"}))["secret_url"]
            html = await page_get("named secret", link)
            saved = await post(link, {"csrf": csrf(html), "secret": NAMED})
            ev.add("POST named secret", saved.text)
            assert "“extra”" in saved.text

            # OAuth2: the authorization code sign-in (every hop's page and Location kept) and a client.
            link = (await tool("connect", {"connector": "people"}))["connect_url"]
            hops = await oauth_sign_in(link, CLIENT)
            for i, hop in enumerate(hops):
                ev.add(f"oauth hop {i} {hop.url}", f"{hop.text}\nLocation: {hop.location}")
            assert "Connected" in hops[-1].text, hops[-1].text
            link = (await tool("connect", {"connector": "robots"}))["connect_url"]
            html = await page_get("robots", link)
            saved = await post(link, {"csrf": csrf(html), **CLIENT})
            ev.add("POST robots", saved.text)
            assert "Connected" in saved.text, saved.text

            # The agent's next call works through every connector, the value never having crossed MCP.
            for slug in [*FORMS, "mtls_api", "people", "robots"]:
                result = await tool("call", {"tool": f"{slug}.items.get", "args": {"id": "1"}})
                assert result["status"] == "ok", (slug, result)

            # An approval, approved on its page, then run.
            pending = await tool("call", {"tool": "basic_api.items.create", "args": {"name": "w"}})
            html = await page_get("approval", pending["approval_url"])
            done = await post(pending["approval_url"], {"csrf": csrf(html), "decision": "approve"})
            ev.add("POST approval", done.text)
            ran = await tool(
                "call", {"tool": "basic_api.items.create", "args": {"name": "w"}, "approval_id": pending["approval_id"]}
            )
            assert ran["status"] == "ok", ran

            # The operator's overview.
            operator = env.gw.cli("token", "create", "--operator").stdout.strip()
            overview = await get(f"{server.url}/operator", Authorization=f"Bearer {operator}")
            ev.add("operator overview", overview.text)
            assert overview.status_code == 200 and "bearer_api" in overview.text
            ev.add_state("state dir while the gateway runs", env.gw.state_dir, running=True)
    finally:
        server.stop()
    ev.add("gateway log", (env.gw.root / "gateway.log").read_text())
    audit = env.gw.cli("audit", "--json", "--limit", "500").stdout
    ev.add("audit rows", audit)
    assert len(json.loads(audit)) >= 10
    ev.add_state("state dir after shutdown", env.gw.state_dir)

    _assert_credentials_reached_the_upstreams(env)
    leaks = ev.leaks()
    # Tokens the authorization server issued are secrets too, and the private key's material.
    key_body = env.client_key_pem.splitlines()[2]
    for label, text in ev.items:
        for secret in [*env.auth.issued_tokens(), key_body]:
            if secret in text:
                leaks.append(f"{label}: an issued token or key material")
    assert not leaks, f"{len(leaks)} leak(s):\n" + "\n".join(leaks[:40])


def _assert_credentials_reached_the_upstreams(env: PagesEnv) -> None:
    """Without this the test could pass by never sending a credential at all."""
    by_auth = [r.headers for r in env.echo.requests]
    assert any(h.get("authorization") == f"Bearer {FORMS['bearer_api']['secret']}" for h in by_auth)
    assert any(h.get("x-api-key") == FORMS["key_api"]["secret"] for h in by_auth)
    assert any(h.get("x-custom-auth") == f"Token {FORMS['custom_api']['secret']}" for h in by_auth)
    pair = base64.b64encode(f"pat:{FORMS['basic_api']['password']}".encode()).decode()
    assert any(h.get("authorization") == f"Basic {pair}" for h in by_auth)
    signed = [r for r in env.echo.requests if "x-signature" in r.headers]
    assert signed and all(
        hmac.compare_digest(
            r.headers["x-signature"],
            hmac.new(FORMS["hmac_api"]["secret"].encode(), r.body, hashlib.sha256).hexdigest(),
        )
        for r in signed
    )
    assert any(
        h.get("authorization", "").startswith("OAuth ") and 'oauth_consumer_key="consumer0001"' in h["authorization"]
        for h in by_auth
    )
    sigv4 = [h for h in by_auth if h.get("authorization", "").startswith("AWS4-HMAC-SHA256 ")]
    assert sigv4 and "Credential=AKIAPAGES00000000001/" in sigv4[0]["authorization"]
    assert "/eu-west-1/execute-api/aws4_request" in sigv4[0]["authorization"]
    assert sigv4[0]["x-amz-security-token"] == FORMS["sigv4_api"]["session_token"]
    assert env.tls_echo.requests, "the mTLS upstream (client certificate required) was never reached"
    assert len(env.api.accepted) >= 2  # people and robots, each with a token the server signed
