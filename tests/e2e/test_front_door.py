"""The front door end to end (issue 15): the gateway as an OAuth 2.1 resource server, with the npm
``oauth2-mock-server`` as the identity provider and the MCP SDK's own OAuth client.

The test plays the browser: the SDK's redirect handler receives the authorization URL, the test
follows it to the provider (which signs in whichever user ``auth.command("user …")`` named) and hands
the code from the redirect back to the SDK's callback handler.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

from tests.support.env import child_env
from tests.support.oauth2_server import OAuth2MockServer
from tests.support.pages import csrf, get, oauth_sign_in, post
from tests.support.upstream import EchoApp, LoopbackServer, echo_app

from .conftest import MASTER_KEY, GatewayEnv, HttpGateway, serving, structured

pytestmark = pytest.mark.anyio

CLIENT_ID = "claude-code-test"
MAIL_CLIENT = {"client_id": "gateway-mail", "client_secret": "mail-client-secret"}
REDIRECT_URI = "http://127.0.0.1:9/callback"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

MANIFEST = """
project: front
default_mode: allow_all
front_door:
  issuer: {issuer}
  scopes: [mcp]
  agents_by_claim: {{{client}: claude-code}}
  approver_client_id: gateway-approvals
  introspection_client_id: gateway-introspect
connectors:
  - slug: personal
    base_url: {upstream}
    auth: {{type: bearer}}
    credentials: per_user
    source: {{http: {{actions: [{{path: me.get, method: GET, url: /me, summary: Who the upstream thinks you are}}]}}}}
  - slug: team
    base_url: {upstream}
    auth: {{type: bearer}}
    source: {{http: {{actions: [{{path: board.get, method: GET, url: /board, summary: The team board}}]}}}}
  - slug: mail
    base_url: {upstream}
    auth: {{type: oauth2, authorize_url: "{issuer}/authorize", token_url: "{issuer}/token"}}
    credentials: per_user
    source: {{http: {{actions: [{{path: inbox.get, method: GET, url: /inbox, summary: My inbox}}]}}}}
  - slug: ops
    base_url: {upstream}
    source: {{http: {{actions: [{{path: purge.run, method: POST, url: /purge, summary: Purge the cache}}]}}}}
    policies: [{{match: "*", action: require_approval, separate_approver: true}}]
agents:
  - name: claude-code
    connectors: [personal, team, mail]
  - name: claude-code
    users: [maria]
    connectors: [ops]
"""


class Storage:
    """The SDK client's token storage, pre-registered with the provider (it has no registration endpoint)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client = OAuthClientInformationFull(
            client_id=CLIENT_ID,
            redirect_uris=[AnyUrl(REDIRECT_URI)],
            token_endpoint_auth_method="none",
        )

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """Follows the authorization URL to the provider and keeps the code it redirects back with."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None
        self.visits: list[str] = []

    async def redirect(self, url: str) -> None:
        self.visits.append(url)
        async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as http:
            response = await http.get(url)
        assert response.status_code in (302, 303), response.text
        query = parse_qs(urlsplit(response.headers["location"]).query)
        self.result = AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0])

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


@pytest.fixture
def idp() -> Iterator[OAuth2MockServer]:
    with OAuth2MockServer() as server:
        yield server


@pytest.fixture
def upstream() -> Iterator[tuple[EchoApp, str]]:
    app = echo_app()
    with LoopbackServer(app) as server:
        yield app, server.base_url


@pytest.fixture
def env(tmp_path: Path, idp: OAuth2MockServer, upstream: tuple[EchoApp, str]) -> GatewayEnv:

    app, base_url = upstream
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(MANIFEST.format(issuer=idp.url, upstream=base_url, client=CLIENT_ID))
    state_dir = tmp_path / "state"
    environ = child_env() | {
        "MCP_GATEWAY_STATE_DIR": str(state_dir),
        "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
        "PYTHONUNBUFFERED": "1",
    }
    return GatewayEnv(tmp_path, manifest, state_dir, app, base_url, 0, environ)


@pytest.fixture
def gateway(env: GatewayEnv) -> Iterator[HttpGateway]:
    with serving(env) as server:
        yield server


@asynccontextmanager
async def signed_in(
    url: str, storage: Storage | None = None
) -> AsyncIterator[tuple[Client, Storage, Browser, OAuthClientProvider]]:
    storage = storage or Storage()
    browser = Browser()
    provider = OAuthClientProvider(
        server_url=f"{url}/mcp",
        client_metadata=OAuthClientMetadata(
            redirect_uris=[AnyUrl(REDIRECT_URI)],
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            yield client, storage, browser, provider


@asynccontextmanager
async def approver_browser(
    idp: OAuth2MockServer, approval_url: str, gateway_url: str
) -> AsyncIterator[httpx2.AsyncClient]:
    """A browser (cookies kept) that signs in on the approval page as the provider's current user."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=15) as browser:
        page = await browser.get(approval_url)
        start = await browser.post(f"{approval_url}/sign-in", data={"csrf": csrf(page.text)})
        assert start.status_code == 303, start.text
        authorize = parse_qs(urlsplit(start.headers["location"]).query)
        assert authorize["client_id"] == ["gateway-approvals"] and authorize["code_challenge_method"] == ["S256"]
        assert authorize["resource"] == [f"{gateway_url}/mcp"]
        assert authorize["redirect_uri"] == [f"{gateway_url}/approvals/callback"]
        provider = await browser.get(start.headers["location"])
        assert provider.status_code == 302, provider.text
        back = await browser.get(provider.headers["location"])
        assert back.status_code == 303, back.text
        assert back.headers["location"] == urlsplit(approval_url).path
        assert "httponly" in back.headers["set-cookie"].lower()
        yield browser
    assert idp.events("token")[-1]["has_code_verifier"]


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


async def test_the_sdk_client_discovers_signs_in_and_refreshes(
    idp: OAuth2MockServer, gateway: HttpGateway, env: GatewayEnv
) -> None:
    bare = httpx2.post(f"{gateway.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS)
    metadata_url = f"{gateway.url}/.well-known/oauth-protected-resource/mcp"
    assert bare.status_code == 401
    assert bare.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
    for url in (metadata_url, f"{gateway.url}/.well-known/oauth-protected-resource"):
        prm = httpx2.get(url).json()
        assert prm["resource"] == f"{gateway.url}/mcp"
        assert prm["authorization_servers"] == [idp.url] or prm["authorization_servers"] == [idp.url + "/"]
        assert prm["scopes_supported"] == ["mcp"]

    idp.command("user maria eng")
    async with signed_in(gateway.url) as (client, storage, browser, provider):
        listed = structured(await client.call_tool("connectors", {}))
        assert {c["slug"] for c in listed["connectors"]} == {"personal", "team", "mail", "ops"}
        authorize = parse_qs(urlsplit(browser.visits[0]).query)
        assert authorize["code_challenge_method"] == ["S256"] and authorize["resource"] == [f"{gateway.url}/mcp"]
        assert storage.tokens is not None
        first = storage.tokens.access_token
        assert claims(first)["aud"] == f"{gateway.url}/mcp" and claims(first)["sub"] == "maria"
        # The token expires (as far as the client knows): the SDK refreshes it on its own.
        provider.context.token_expiry_time = time.time() - 1
        client_expiry_passed = structured(await client.call_tool("connectors", {}))
        assert client_expiry_passed["connectors"]
        assert storage.tokens.access_token != first
    grants = [e["grant_type"] for e in idp.events("token")]
    assert grants == ["authorization_code", "refresh_token"], grants
    # Nothing of the client's token went upstream.
    sent = json.dumps([dict(r.headers) for r in env.upstream.requests])
    assert not any(t in sent for t in idp.issued_tokens())


def _mint(idp: OAuth2MockServer, *, key: Any = None, kid: str | None = None, **claims_: Any) -> str:
    """A token signed by the provider (``key`` None: through its token endpoint) or by ``key``."""
    now = int(time.time())
    body = {"iss": idp.url, "sub": "maria", "iat": now, "exp": now + 300, "scope": "mcp"} | claims_
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm="RS256", headers={"kid": kid})


def _provider_token(idp: OAuth2MockServer, resource: str, scope: str = "mcp") -> str:
    """An access token from the provider's token endpoint (client credentials, with ``resource``)."""
    response = httpx2.post(
        idp.token_url,
        data={"grant_type": "client_credentials", "client_id": CLIENT_ID, "scope": scope, "aud": resource},
    )
    return response.json()["access_token"]


async def test_refused_tokens_never_reach_a_tool(idp: OAuth2MockServer, gateway: HttpGateway, env: GatewayEnv) -> None:
    resource = f"{gateway.url}/mcp"
    metadata = f'resource_metadata="{gateway.url}/.well-known/oauth-protected-resource/mcp"'
    good = _provider_token(idp, resource)
    assert claims(good)["aud"] == resource
    ok = httpx2.post(resource, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {good}"})
    assert ok.status_code == 200, ok.text

    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    real_kid = jwt.get_unverified_header(good)["kid"]
    idp.command("access-ttl -120")
    expired = _provider_token(idp, resource)
    idp.command("access-ttl 300")
    refused = {
        "another audience": _provider_token(idp, "https://other.example/mcp"),
        "expired": expired,
        "wrong signature": _mint(idp, key=forger, kid=real_kid, aud=resource),
        "unknown kid": _mint(idp, key=forger, kid="not-a-key-of-the-provider", aud=resource),
        "not a jwt": "mgw_not_a_static_token",
    }
    for why, token in refused.items():
        r = httpx2.post(resource, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {token}"})
        assert r.status_code == 401, why
        assert r.headers["www-authenticate"] == f'Bearer error="invalid_token", {metadata}', why
    no_scope = _provider_token(idp, resource, scope="profile")
    r = httpx2.post(resource, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {no_scope}"})
    assert r.status_code == 403
    assert r.headers["www-authenticate"] == f'Bearer error="insufficient_scope", scope="mcp", {metadata}'
    assert env.upstream.requests == []

    # Opaque tokens are introspected at the issuer (RFC 7662) as the gateway's own client, whose
    # secret is sealed in the vault; the answer gets the checks a JWT gets.
    env.cli("secret", "set", "--front-door", "introspection", input="introspection-secret")
    for line in (
        f"opaque opaque-maria maria {resource}",
        "opaque opaque-elsewhere maria https://other.example/mcp",
        f"opaque opaque-expired maria {resource} -60",
    ):
        idp.command(line)
    r = httpx2.post(resource, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": "Bearer opaque-maria"})
    assert r.status_code == 200, r.text
    for token in ("opaque-elsewhere", "opaque-expired", "opaque-unknown"):
        r = httpx2.post(resource, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {token}"})
        assert r.status_code == 401, token
        assert r.headers["www-authenticate"] == f'Bearer error="invalid_token", {metadata}', token
    asked = [e for e in idp.events("introspect") if e["client_auth"] == "basic"]
    assert len(asked) == 4 and all(e["known"] for e in asked[:3]) and not asked[3]["known"]
    secret = base64.b64decode(asked[0]["basic_header"].split()[1])
    assert secret == b"gateway-introspect:introspection-secret"
    r = httpx2.post(resource, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": "Bearer opaque-maria"})
    assert r.status_code == 200 and len(idp.events("introspect")) == len(asked) + 1  # cached: not asked again
    # A static token still opens the door beside the provider's.
    static = env.cli("token", "create", "--agent", "claude-code").stdout.strip()
    r = httpx2.post(resource, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {static}"})
    assert r.status_code == 200


async def test_a_session_belongs_to_its_subject(idp: OAuth2MockServer, gateway: HttpGateway) -> None:
    resource = f"{gateway.url}/mcp"
    maria = _provider_token(idp, resource)
    with httpx2.Client(headers=MCP_HEADERS) as http:
        opened = http.post(resource, json=INITIALIZE, headers={"Authorization": f"Bearer {maria}"})
        session = opened.headers["mcp-session-id"]
        idp.command("user bob")
        # Client credentials tokens carry the client as subject; mint bob's through the code flow.
        bob = await _code_flow_token(idp, resource)
        assert claims(bob)["sub"] == "bob"
        ping = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        theirs = http.post(resource, json=ping, headers={"Authorization": f"Bearer {bob}", "mcp-session-id": session})
        assert theirs.status_code == 404


async def _code_flow_token(idp: OAuth2MockServer, resource: str) -> str:
    import hashlib
    import secrets

    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as http:
        r = await http.get(
            idp.authorize_url,
            params={
                "response_type": "code",
                "client_id": CLIENT_ID,
                "redirect_uri": REDIRECT_URI,
                "scope": "mcp",
                "state": "s",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "resource": resource,
            },
        )
        code = parse_qs(urlsplit(r.headers["location"]).query)["code"][0]
        token = await http.post(
            idp.token_url,
            data={
                "grant_type": "authorization_code",
                "code": code,
                "code_verifier": verifier,
                "client_id": CLIENT_ID,
                "redirect_uri": REDIRECT_URI,
                "resource": resource,
            },
        )
    return token.json()["access_token"]


async def test_two_users_through_one_agent(idp: OAuth2MockServer, gateway: HttpGateway, env: GatewayEnv) -> None:
    env.cli("secret", "set", "team", input="team-wide-secret")
    env.cli("secret", "set", "mail", input=json.dumps(MAIL_CLIENT))  # the OAuth client is the project's
    seen: dict[str, Any] = {}
    approval_url = ""
    for user, secret in (("maria", "maria-own-secret"), ("bob", "bob-own-secret")):
        idp.command(f"user {user}")
        async with signed_in(gateway.url) as (client, _, _, _):
            listed = {c["slug"]: c for c in structured(await client.call_tool("connectors", {}))["connectors"]}
            # One user's connection is not another's: each starts without a personal credential.
            assert listed["personal"]["status"] == "needs_auth", listed
            assert ("ops" in listed) == (user == "maria")  # a grant naming maria only
            before = structured(await client.call_tool("call", {"tool": "personal.me.get", "args": {}}))
            link = before["connect_url"]
            page = await get(link)
            done = await post(link, {"csrf": csrf(page.text), "secret": secret})
            assert done.status_code == 200, done.text
            mine = structured(await client.call_tool("call", {"tool": "personal.me.get", "args": {}}))
            team = structured(await client.call_tool("call", {"tool": "team.board.get", "args": {}}))
            seen[user] = (mine, team)
            # An OAuth2 per_user connector: maria's sign-in is not bob's; each connects their own account.
            unconnected = structured(await client.call_tool("call", {"tool": "mail.inbox.get", "args": {}}))
            assert unconnected["status"] == "needs_auth", unconnected
            hops = await oauth_sign_in(unconnected["connect_url"])
            assert hops[-1].status == 200 and "Connected" in hops[-1].text, hops[-1].text
            inbox = structured(await client.call_tool("call", {"tool": "mail.inbox.get", "args": {}}))
            assert inbox["status"] == "ok", inbox
            if user == "maria":
                asked = structured(await client.call_tool("call", {"tool": "ops.purge.run", "args": {}}))
                approval_url = asked["approval_url"]
                approval = await get(approval_url)
                assert "<strong>maria, through the agent “claude-code”,</strong> asks" in approval.text
                # The rule wants a separate approver: nobody known may approve through the link...
                assert 'value="approve"' not in approval.text and "Sign in to approve" in approval.text
                own = await post(approval_url, {"csrf": csrf(approval.text), "decision": "approve"})
                assert own.status_code == 403
                # ...nor maria once she has signed in with the identity provider: she asked.
                async with approver_browser(idp, approval_url, gateway.url) as browser:
                    signed_in_page = await browser.get(approval_url)
                    assert "Signed in as <strong>maria</strong>" in signed_in_page.text
                    assert 'value="approve"' not in signed_in_page.text
                    mine_too = await browser.post(
                        approval_url, data={"csrf": csrf(approval.text), "decision": "approve"}
                    )
                    assert mine_too.status_code == 403 and "You (maria) asked for this call" in mine_too.text
    public = [e for e in idp.events("token") if e["client_id"] == "gateway-approvals"]
    assert [e["client_auth"] for e in public] == ["none"]  # maria's sign-in: a public client, PKCE only
    # bob, signed in through the same provider, approves maria's call; the approval names him. The
    # gateway is a confidential client now: its secret is sealed in the vault, never in the manifest.
    env.cli("secret", "set", "--front-door", "approver", input="approver-client-secret")
    idp.command("deny-next-authorize")  # a sign-in the provider refuses signs nobody in, and works once
    async with httpx2.AsyncClient(follow_redirects=False, timeout=15) as stranger:
        page = await stranger.get(approval_url)
        start = await stranger.post(f"{approval_url}/sign-in", data={"csrf": csrf(page.text)})
        refused = await stranger.get((await stranger.get(start.headers["location"])).headers["location"])
        assert refused.status_code == 400 and "access_denied" in refused.text and "set-cookie" not in refused.headers
        replayed = await stranger.get(str(refused.url))
        assert replayed.status_code == 400 and "not recognised" in replayed.text
    async with approver_browser(idp, approval_url, gateway.url) as browser:
        page = await browser.get(approval_url)
        assert "Signed in as <strong>bob</strong>" in page.text and 'value="approve"' in page.text
        approved = await browser.post(approval_url, data={"csrf": csrf(page.text), "decision": "approve"})
        assert approved.status_code == 200 and "Approved" in approved.text, approved.text
    exchange = idp.events("token")[-1]
    assert exchange["client_auth"] == "basic" and exchange["grant_type"] == "authorization_code"
    assert base64.b64decode(exchange["basic_header"].split()[1]) == b"gateway-approvals:approver-client-secret"
    [decided] = json.loads(env.cli("approvals", "list", "--all", "--json").stdout)
    assert (decided["principal"], decided["status"], decided["decided_by"]) == ("maria", "approved", "bob")
    assert decided["separate_approver"] is True
    # The mail upstream saw each user's own access token (the provider's JWT naming that user), once each.
    mail_tokens = [
        r.headers["authorization"].removeprefix("Bearer ") for r in env.upstream.requests if r.path == "/inbox"
    ]
    assert [claims(t)["sub"] for t in mail_tokens] == ["maria", "bob"]
    assert [e["grant_type"] for e in idp.events("token")].count("refresh_token") == 0
    auths = [r.headers.get("authorization") for r in env.upstream.requests if r.path != "/inbox"]
    assert auths.count("Bearer maria-own-secret") == 1 and auths.count("Bearer bob-own-secret") == 1
    assert auths.count("Bearer team-wide-secret") == 2
    audit = json.loads(env.cli("audit", "--json").stdout)
    users = {(row["user"], row["requested"]) for row in audit}
    assert ("maria", "personal.me.get") in users and ("bob", "personal.me.get") in users


def test_claude_code_sees_that_it_needs_to_sign_in(idp: OAuth2MockServer, gateway: HttpGateway, tmp_path: Path) -> None:
    """A real client: Claude Code (npm ``@anthropic-ai/claude-code``, a devDependency that
    scripts/test.sh installs) registered against the gateway reports that the server needs
    authentication, which it can only say after reading the 401's ``resource_metadata``, rather
    than a failed connection. It never reaches the internet: no API key, no login, its auto-updater
    and telemetry off, and every proxied request sent to a closed local port (only the loopback
    gateway is reached directly)."""
    import os
    import subprocess

    claude = _claude_code()
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "HTTP", "NO_PROXY"))}
    env |= {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }

    def run(*args: str) -> str:
        proc = subprocess.run(
            [claude, *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        return proc.stdout + proc.stderr

    before = len(idp.events("request"))  # the gateway read the provider's metadata when it started
    # The provider has no dynamic client registration: Claude Code is a pre-registered client.
    run("mcp", "add", "--transport", "http", "--client-id", CLIENT_ID, "gateway", f"{gateway.url}/mcp")
    listed = run("mcp", "list")
    assert "gateway" in listed, listed
    assert "needs authentication" in listed.lower(), listed
    assert "failed to connect" not in listed.lower(), listed
    # It went from the 401 to the metadata to the authorization server it names: it found the way in.
    asked = {e["path"] for e in idp.events("request")[before:]}
    assert asked & {"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"}, asked


def _claude_code() -> str:
    """Claude Code as the repository's npm devDependency, else on PATH; skipped without it (failed under CI)."""
    import os
    import shutil

    local = Path(__file__).resolve().parents[2] / "node_modules" / ".bin" / "claude"
    found = str(local) if local.is_file() else shutil.which("claude")
    if found is None:
        reason = "Claude Code is not installed; run `bash scripts/test.sh` (it runs npm install)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the Claude Code test: {reason}")
        pytest.skip(reason)
    return found
