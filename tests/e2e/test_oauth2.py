"""OAuth2 connectors end to end, against a real authorization server (npm ``oauth2-mock-server``).

The gateway runs as a subprocess (streamable HTTP, and stdio with its loopback page server), the
agent is the MCP SDK client, the human is plain HTTP following the pages' redirects, and the API
checks every bearer token's RS256 signature against the authorization server's JWKS. So a call
succeeds only with a token that server really issued through the flow under test.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client

from tests.support.env import child_env
from tests.support.oauth2_server import OAuth2MockServer, ProtectedApi
from tests.support.pages import csrf, get, oauth_sign_in, post
from tests.support.upstream import LoopbackServer

from .conftest import MASTER_KEY, GatewayEnv, HttpGateway, free_port, http_client, structured

pytestmark = pytest.mark.anyio

CLIENT = {"client_id": "gateway-e2e", "client_secret": "e2e-client-secret-7734"}

MANIFEST = """
project: oauth-e2e
public_url: http://127.0.0.1:{pages_port}
connectors:
  - slug: people
    name: People API
    base_url: {api}
    auth: {{type: oauth2, authorize_url: "{auth}/authorize", token_url: "{auth}/token", scopes: [profile, read]}}
    source:
      http:
        actions:
          - {{path: me.get, method: GET, url: /me, summary: The signed-in account}}
          - {{path: forbidden.get, method: GET, url: /forbidden, summary: Something this account may not do}}
  - slug: robots
    name: Robots API
    base_url: {api}
    auth: {{type: oauth2, flow: client_credentials, token_url: "{auth}/token", scopes: [api], client_auth: post}}
    source:
      http:
        actions:
          - {{path: me.get, method: GET, url: /me, summary: The client itself}}
"""


@dataclass
class OAuthEnv:
    gw: GatewayEnv
    auth: OAuth2MockServer
    api: ProtectedApi


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _oauth_env(tmp_path: Path, *, expires_in: int | None = None) -> Iterator[OAuthEnv]:
    with OAuth2MockServer(expires_in=expires_in) as auth:
        api = ProtectedApi(auth.jwks())
        with LoopbackServer(api) as server:
            pages_port = free_port()
            manifest = tmp_path / "oauth.yaml"
            manifest.write_text(MANIFEST.format(pages_port=pages_port, api=server.base_url, auth=auth.url))
            env = child_env() | {
                "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
                "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
                "PYTHONUNBUFFERED": "1",
            }
            gw = GatewayEnv(tmp_path, manifest, tmp_path / "state", api.echo, server.base_url, pages_port, env)
            yield OAuthEnv(gw, auth, api)


@pytest.fixture
def oauth(tmp_path: Path) -> Iterator[OAuthEnv]:
    yield from _oauth_env(tmp_path)


@pytest.fixture
def oauth_short(tmp_path: Path) -> Iterator[OAuthEnv]:
    """Access tokens that live two seconds."""
    yield from _oauth_env(tmp_path, expires_in=2)


async def test_authorization_code_with_pkce_over_http(oauth: OAuthEnv) -> None:
    server = HttpGateway(oauth.gw, oauth.gw.root / "gateway.log")
    try:
        token = oauth.gw.cli("token", "create", "--agent", "bot").stdout.strip()
        async with http_client(server.url, token) as client:
            before = structured(await client.call_tool("call", {"tool": "people.me.get"}))
            assert before["status"] == "needs_auth", before
            link = structured(await client.call_tool("connect", {"connector": "people"}))["connect_url"]

            page = await get(link)
            assert 'name="client_id"' in page.text and "Continue to 127.0.0.1" in page.text
            assert "The app is the project's, team-wide" in page.text  # whatever the link's own scope
            # The page may send the form on to the provider, and nowhere else.
            assert f"form-action 'self' {oauth.auth.url}" in page.headers["content-security-policy"]
            assert f"{server.url}/oauth/callback" in page.text  # the redirect URI to register

            hops = await oauth_sign_in(link, CLIENT)
            start, provider, back = hops[1], hops[2], hops[3]
            assert start.status == 303 and start.location is not None
            assert start.location.startswith(f"{oauth.auth.url}/authorize?")
            assert CLIENT["client_secret"] not in start.location
            assert provider.status == 302 and provider.location is not None
            assert provider.location.startswith(f"{server.url}/oauth/callback?")
            assert back.status == 200 and "Connected" in back.text, back.text

            [authorize] = oauth.auth.events("authorize")
            assert authorize["code_challenge_method"] == "S256" and len(authorize["code_challenge"]) == 43
            assert len(authorize["state"]) >= 43 and authorize["client_id"] == CLIENT["client_id"]
            assert authorize["scope"] == "profile read"
            assert authorize["redirect_uri"] == f"{server.url}/oauth/callback"
            [exchange] = oauth.auth.events("token")
            assert exchange["grant_type"] == "authorization_code" and exchange["has_code_verifier"]
            assert exchange["client_auth"] == "basic" and exchange["status"] == 200

            me = structured(await client.call_tool("call", {"tool": "people.me.get"}))
            assert me["status"] == "ok" and me["data"]["sub"] == "johndoe", me
            assert oauth.api.accepted == [exchange["access_token"]]
            listed = structured(await client.call_tool("connectors", {}))["connectors"]
            assert {c["slug"]: c["status"] for c in listed} == {"people": "ready", "robots": "needs_auth"}

            # The state and the link are spent: replaying the callback or the form does nothing.
            replay = await get(provider.location)
            assert replay.status_code == 400 and "not recognised" in replay.text
            reuse = await post(link, {"csrf": csrf(page.text)})
            assert reuse.status_code == 410

            # A 403 is final: no refresh, no retry.
            forbidden = structured(await client.call_tool("call", {"tool": "people.forbidden.get"}))
            assert forbidden["status"] == "denied" and forbidden["reason"] == "upstream_forbidden", forbidden
            assert [r.path for r in oauth.api.echo.requests].count("/forbidden") == 1

            # A token the API stops accepting: one refresh (the server's refresh token), one retry.
            oauth.api.revoked.add(exchange["access_token"])
            again = structured(await client.call_tool("call", {"tool": "people.me.get"}))
            assert again["status"] == "ok", again
            assert [e["grant_type"] for e in oauth.auth.events("token")] == ["authorization_code", "refresh_token"]
            refreshed = oauth.auth.events("token")[-1]
            assert oauth.api.accepted[-1] == refreshed["access_token"]
    finally:
        server.stop()
    log = (oauth.gw.root / "gateway.log").read_text()
    for secret in (CLIENT["client_secret"], *oauth.auth.issued_tokens()):
        assert secret not in log


async def test_refresh_on_expiry(oauth_short: OAuthEnv) -> None:
    oauth = oauth_short
    server = HttpGateway(oauth.gw, oauth.gw.root / "gateway.log")
    try:
        token = oauth.gw.cli("token", "create", "--agent", "bot").stdout.strip()
        async with http_client(server.url, token) as client:
            link = structured(await client.call_tool("connect", {"connector": "people"}))["connect_url"]
            assert "Connected" in (await oauth_sign_in(link, CLIENT))[-1].text
            assert structured(await client.call_tool("call", {"tool": "people.me.get"}))["status"] == "ok"
            assert structured(await client.call_tool("call", {"tool": "people.me.get"}))["status"] == "ok"
            assert [e["grant_type"] for e in oauth.auth.events("token")] == ["authorization_code"]  # cached
            await anyio.sleep(2.1)  # the access token (2 s) has expired
            assert structured(await client.call_tool("call", {"tool": "people.me.get"}))["status"] == "ok"
            grants = [e["grant_type"] for e in oauth.auth.events("token")]
            assert grants == ["authorization_code", "refresh_token"]
            # The API never saw an expired token: every request it got was accepted.
            assert len(oauth.api.accepted) == len(oauth.api.echo.requests) == 3
    finally:
        server.stop()


async def test_no_login_loop_when_the_api_rejects_a_fresh_authorization(oauth: OAuthEnv) -> None:
    oauth.api.reject_all = True  # the account may not use this API, whatever token it gets
    server = HttpGateway(oauth.gw, oauth.gw.root / "gateway.log")
    try:
        token = oauth.gw.cli("token", "create", "--agent", "bot").stdout.strip()
        async with http_client(server.url, token) as client:
            link = structured(await client.call_tool("connect", {"connector": "people"}))["connect_url"]
            assert "Connected" in (await oauth_sign_in(link, CLIENT))[-1].text
            result = await client.call_tool("call", {"tool": "people.me.get"})
            body = structured(result)
            assert result.is_error and body["status"] == "error", body
            assert (body["reason"], body["upstream_status"]) == ("auth_failed", 401)
            assert "connect_url" not in body and "just authorized" in body["message"]
            # Exactly one refresh and one retry, then it stopped.
            assert [e["grant_type"] for e in oauth.auth.events("token")] == ["authorization_code", "refresh_token"]
            assert len(oauth.api.echo.requests) == 2
    finally:
        server.stop()


async def test_a_second_sign_in_replaces_the_team_token_set_only_once_an_operator_approves(oauth: OAuthEnv) -> None:
    server = HttpGateway(oauth.gw, oauth.gw.root / "gateway.log")
    try:
        token = oauth.gw.cli("token", "create", "--agent", "bot").stdout.strip()
        async with http_client(server.url, token) as client:
            first = structured(await client.call_tool("connect", {"connector": "people"}))
            assert "approval_id" not in first  # nothing to replace yet
            assert "Connected" in (await oauth_sign_in(first["connect_url"], CLIENT))[-1].text

            again = structured(await client.call_tool("connect", {"connector": "people"}))
            approval_id = again["approval_id"]
            waiting = await get(again["connect_url"])
            assert "Waiting for an operator" in waiting.text and "Continue to" not in waiting.text
            assert len(oauth.auth.events("authorize")) == 1  # the waiting page sends nobody to the provider

            oauth.gw.cli("approvals", "approve", approval_id)
            page = await get(again["connect_url"])
            assert "A team-wide credential:" in page.text and "replaces the team-wide credential" in page.text
            assert "Connected" in (await oauth_sign_in(again["connect_url"]))[-1].text
    finally:
        server.stop()
    audit = json.loads(oauth.gw.cli("audit", "--json").stdout)
    changes = [
        (r["requested"], json.loads(r["args_preview"])["replaced"], r["approved_by"])
        for r in audit
        if r["status"] == "credential_set"
    ]
    assert changes == [
        ("credential:people/oauth2_token", "team", "operator"),
        ("credential:people/oauth2_token", None, None),
        ("credential:people", None, None),
    ]
    assert CLIENT["client_secret"] not in json.dumps(audit)
    log = (oauth.gw.root / "gateway.log").read_text()
    assert "team-wide credential 'oauth2_token' of people replaced by token:" in log
    assert "(replacement approved by operator)" in log and CLIENT["client_secret"] not in log


async def test_a_denied_sign_in_leaves_the_link_usable(oauth: OAuthEnv) -> None:
    server = HttpGateway(oauth.gw, oauth.gw.root / "gateway.log")
    try:
        token = oauth.gw.cli("token", "create", "--agent", "bot").stdout.strip()
        async with http_client(server.url, token) as client:
            connect_url = structured(await client.call_tool("connect", {"connector": "people"}))["connect_url"]
        oauth.auth.command("deny-next-authorize")
        denied = await oauth_sign_in(connect_url, CLIENT)
        assert denied[-1].status == 400 and "did not grant access" in denied[-1].text, denied[-1].text
        assert "access_denied" in denied[-1].text
        # The client credentials were kept, so the second attempt asks only to continue.
        retry = await oauth_sign_in(connect_url)
        assert 'name="client_id"' not in retry[0].text
        assert "Connected" in retry[-1].text, retry[-1].text
    finally:
        server.stop()


async def test_client_credentials_over_http(oauth: OAuthEnv) -> None:
    server = HttpGateway(oauth.gw, oauth.gw.root / "gateway.log")
    try:
        token = oauth.gw.cli("token", "create", "--agent", "bot").stdout.strip()
        async with http_client(server.url, token) as client:
            link = structured(await client.call_tool("connect", {"connector": "robots"}))["connect_url"]
            page = await get(link)
            assert 'name="client_secret"' in page.text and f"{oauth.auth.url}/token" in page.text

            oauth.auth.command("reject-next-token")
            refused = await post(link, {"csrf": csrf(page.text), **CLIENT})
            assert refused.status_code == 400 and "invalid_grant" in refused.text, refused.text
            assert CLIENT["client_secret"] not in refused.text
            saved = await post(link, {"csrf": csrf(page.text), **CLIENT})
            assert saved.status_code == 200 and "Connected" in saved.text, saved.text

            for _ in range(2):
                me = structured(await client.call_tool("call", {"tool": "robots.me.get"}))
                assert me["status"] == "ok", me
            grants = [(e["grant_type"], e["client_auth"]) for e in oauth.auth.events("token")]
            # One for the page's check, one for the calls (then cached); client_secret_post as configured.
            assert grants == [("client_credentials", "post")] * 3
            assert all(e["scope"] == "api" for e in oauth.auth.events("token"))
    finally:
        server.stop()


async def test_authorization_code_in_stdio_mode(oauth: OAuthEnv) -> None:
    """stdio: the pages, the OAuth callback included, are served on loopback at public_url."""
    async with Client(oauth.gw.stdio_params(), mode="legacy") as client:
        link = structured(await client.call_tool("connect", {"connector": "people"}))["connect_url"]
        assert link.startswith(f"http://127.0.0.1:{oauth.gw.pages_port}/connect/")
        started = time.monotonic()
        hops = await oauth_sign_in(link, CLIENT)
        assert hops[2].location is not None
        assert hops[2].location.startswith(f"http://127.0.0.1:{oauth.gw.pages_port}/oauth/callback?")
        assert "Connected" in hops[-1].text, hops[-1].text
        me = structured(await client.call_tool("call", {"tool": "people.me.get"}))
        assert me["status"] == "ok", me
        assert time.monotonic() - started < 30


async def test_two_attempts_from_one_link_connect_once(oauth: OAuthEnv) -> None:
    """Each start gets its own state; only the first sign-in to come back may use the link."""
    server = HttpGateway(oauth.gw, oauth.gw.root / "gateway.log")
    try:
        token = oauth.gw.cli("token", "create", "--agent", "bot").stdout.strip()
        async with http_client(server.url, token) as client:
            link = structured(await client.call_tool("connect", {"connector": "people"}))["connect_url"]
        page = await get(link)
        async with httpx2.AsyncClient(timeout=15) as http:
            starts = [await http.post(link, data={"csrf": csrf(page.text), **CLIENT}) for _ in range(2)]
            states = {httpx2.URL(s.headers["location"]).params["state"] for s in starts}
            assert len(states) == 2
            backs = [(await http.get(s.headers["location"])).headers["location"] for s in starts]
            first = await http.get(backs[0])
            second = await http.get(backs[1])
        assert first.status_code == 200 and "Connected" in first.text
        assert second.status_code == 410 and "Link not valid" in second.text
        # The second code was never exchanged: the link was checked first.
        assert [e["grant_type"] for e in oauth.auth.events("token")] == ["authorization_code"]
    finally:
        server.stop()
