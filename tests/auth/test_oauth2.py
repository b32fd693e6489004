"""``oauth2`` in process: PKCE and state, the code exchange, the token cache, refresh on expiry and
once after a 401, no login loop, 403 never retried, client credentials, and what never leaks.

The gateway is the real one (SQLite store, AES-GCM vault, FixedClock); the provider and the API
are a dozen-line token endpoint and a dozen-line upstream behind ``httpx2.MockTransport`` (STYLE 9).
The same flows run against a real authorization server in ``tests/e2e/test_oauth2.py``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
import anyio.lowlevel
import httpx2
import pytest

from mcp_gateway.auth.oauth2 import TOKEN_NAME, pkce_challenge
from mcp_gateway.core import Gateway, oauth2_tokens, result_payload
from mcp_gateway.core.oauth2_pending import PENDING_KIND
from mcp_gateway.core.oauth2_tokens import OAuth2Tokens
from mcp_gateway.core.results import SecretLink
from mcp_gateway.manifest import ConnectorConfig, OAuth2Auth, parse_manifest
from mcp_gateway.primitives.crypto import AESGCMCipher
from mcp_gateway.services.approvals import ApprovalService
from mcp_gateway.services.audit import Auditor
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.services.identity import OPERATOR, Principal
from mcp_gateway.services.links import LinkService
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.errors import CredentialMissing, ManifestError, StoreUnavailable
from mcp_gateway.vocabulary.model import Denied, ErrorResult, NeedsAuth, Ok
from tests.support.raw_http import RawAnswer, RawHttpServer, RawRequest

pytestmark = pytest.mark.anyio

CANARY = "CANARY-oauth2-client-secret-0451"
CLIENT = {"client_id": "gw-client", "client_secret": CANARY}

MANIFEST = """
project: unit
public_url: http://pages.test
connectors:
  - slug: code
    base_url: http://api.test
    auth: {{type: oauth2, authorize_url: "http://auth.test/authorize?prompt=consent", token_url: http://auth.test/token,
            scopes: [read, write], client_auth: {client_auth}}}
    source: {{http: {{actions: [{{path: me.get, method: GET, url: /me, summary: Who am I}},
                                {{path: forbidden.get, method: GET, url: /forbidden, summary: Not allowed}}]}}}}
  - slug: machine
    base_url: http://api.test
    auth: {{type: oauth2, flow: client_credentials, token_url: http://auth.test/token, scopes: [api]}}
    source: {{http: {{actions: [{{path: me.get, method: GET, url: /me, summary: Who am I}}]}}}}
  - slug: personal
    base_url: http://api.test
    credentials: per_user
    auth: {{type: oauth2, authorize_url: http://auth.test/authorize, token_url: http://auth.test/token}}
    source: {{http: {{actions: [{{path: me.get, method: GET, url: /me, summary: Who am I}}]}}}}
"""


@dataclass
class Provider:
    """A token endpoint and an API in one: tokens it issues are valid at the API until revoked."""

    expires_in: Any = 3600
    refresh_error: str | None = None
    refresh_status: int = 400
    """The status of a refused refresh (``refresh_error`` set): 400, or a busy (429) or failing (5xx) endpoint."""
    retry_after: str | None = None
    client_error: str | None = None
    """The ``error`` a client_credentials request is answered with, over HTTP 200 (set: refused)."""
    rotate: bool = False
    """Each refresh answers a new refresh token (the old one is spent)."""
    token_requests: list[dict[str, Any]] = field(default_factory=list)
    api_requests: list[httpx2.Request] = field(default_factory=list)
    valid: set[str] = field(default_factory=set)
    issued: int = 0
    api_rejects_all: bool = False
    """The API answers 401 to every token, new ones included (the account may not use it)."""

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        await anyio.lowlevel.checkpoint()  # interleave concurrent callers, as a network would
        if request.url.host == "auth.test":
            return self._token(request)
        # A copy: the auth flow re-sends the same request object with a new header after a 401.
        self.api_requests.append(httpx2.Request(request.method, request.url, headers=request.headers.copy()))
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if token not in self.valid or self.api_rejects_all:
            return httpx2.Response(401, json={"error": "invalid_token"})
        if request.url.path == "/forbidden":
            return httpx2.Response(403, json={"message": "not for you"})
        return httpx2.Response(200, json={"token": token})

    def _token(self, request: httpx2.Request) -> httpx2.Response:
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        form["basic"] = request.headers.get("authorization", "")
        self.token_requests.append(form)
        if form["grant_type"] == "client_credentials" and self.client_error:
            return httpx2.Response(200, json={"error": self.client_error})
        if form["grant_type"] == "refresh_token" and self.refresh_error:
            headers = {"Retry-After": self.retry_after} if self.retry_after else {}
            body = {"error": self.refresh_error, "error_description": f"echo {form}"}
            return httpx2.Response(self.refresh_status, json=body, headers=headers)
        self.issued += 1
        access = f"at-{self.issued}"
        self.valid.add(access)
        body: dict[str, Any] = {"access_token": access, "token_type": "Bearer", "scope": form.get("scope", "")}
        if self.expires_in is not None:
            body["expires_in"] = self.expires_in
        if form["grant_type"] == "authorization_code":
            body["refresh_token"] = "rt-1"
        elif form["grant_type"] == "refresh_token" and self.rotate:
            body["refresh_token"] = f"rt-{self.issued}"
        # json.dumps writes what a provider may send and httpx2 refuses to: Infinity, NaN.
        return httpx2.Response(200, content=json.dumps(body), headers={"Content-Type": "application/json"})

    def grants(self) -> list[str]:
        return [r["grant_type"] for r in self.token_requests]


@dataclass
class Env:
    gateway: Gateway
    vault: CredentialVault
    clock: FixedClock
    provider: Provider
    store: SQLiteStore

    async def authorize(self, connector: str = "code", principal: str = "operator") -> None:
        """What a human does through the connect page and the provider: begin, come back, exchange
        (and save where ``/oauth/callback`` does: under the linked user for a ``per_user`` connector)."""
        link, record = await self.gateway.links.mint("connect", connector=connector, principal=principal)
        token = link.rsplit("/", 1)[1]
        cfg, auth = self.config_of(connector), self.config(connector)
        url = await self.gateway.credentials.oauth2.begin(
            auth,
            connector=connector,
            principal=principal,
            client_id=CLIENT["client_id"],
            link_token=token,
            redirect_uri="http://pages.test/oauth/callback",
            link_expires_at=record.expires_at,
        )
        state = httpx2.URL(url).params["state"]
        pending = await self.gateway.credentials.oauth2.take(state)
        assert pending is not None
        token_set = await self.gateway.credentials.oauth2.exchange(auth, pending, "the-code")
        owner = {"principal": pending.principal} if cfg.credentials == "per_user" else {}
        await self.gateway.credentials.oauth2.save(connector, token_set, **owner)

    def config_of(self, connector: str) -> ConnectorConfig:
        cfg = self.gateway.manifest.connector(connector)
        assert cfg is not None
        return cfg

    def config(self, connector: str) -> OAuth2Auth:
        auth = self.config_of(connector).auth
        assert isinstance(auth, OAuth2Auth)
        return auth


@asynccontextmanager
async def env(
    tmp_path: Path, *, client_auth: str = "basic", client: bool = True, **provider: Any
) -> AsyncIterator[Env]:
    manifest = parse_manifest(MANIFEST.format(client_auth=client_auth), base_dir=tmp_path)
    clock = FixedClock()
    upstream = Provider(**provider)
    async with SQLiteStore(tmp_path / "s.db") as store:
        vault = CredentialVault(store, AESGCMCipher(b"k" * 32, project="unit"), project="unit")
        if client:
            for slug in ("code", "machine", "personal"):
                await vault.put(slug, CLIENT)
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream)) as http:
            gateway = Gateway(
                manifest=manifest,
                store=store,
                vault=vault,
                clock=clock,
                http=http,
                links=LinkService(store, clock, manifest.public_url),
                approvals=ApprovalService(store, clock),
                auditor=Auditor(store),
            )
            await gateway.sync()
            yield Env(gateway, vault, clock, upstream, store)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- PKCE, state and the code exchange -------------------------------------------------------------


def test_pkce_s256_matches_rfc_7636_appendix_b() -> None:
    assert (
        pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )


async def test_authorize_url_carries_state_and_an_s256_challenge(tmp_path: Path) -> None:
    async with env(tmp_path) as e:
        cfg = e.gateway.manifest.connector("code")
        assert cfg is not None
        _, record = await e.gateway.links.mint("connect", connector="code", principal="operator")
        urls = [
            httpx2.URL(
                await e.gateway.credentials.oauth2.begin(
                    cfg.auth,  # type: ignore[arg-type]
                    connector="code",
                    principal="operator",
                    client_id="gw-client",
                    link_token="link",
                    redirect_uri="http://pages.test/oauth/callback",
                    link_expires_at=record.expires_at,
                )
            )
            for _ in range(2)
        ]
        params = urls[0].params
        assert (urls[0].host, urls[0].path, params["prompt"]) == ("auth.test", "/authorize", "consent")
        assert params["response_type"] == "code" and params["client_id"] == "gw-client"
        assert params["redirect_uri"] == "http://pages.test/oauth/callback"
        assert params["scope"] == "read write" and params["code_challenge_method"] == "S256"
        assert len(base64.urlsafe_b64decode(params["state"] + "=")) == 32  # 256 bits
        assert len(params["code_challenge"]) == 43
        assert CANARY not in str(urls[0])
        # A fresh state and challenge every time.
        assert urls[0].params["state"] != urls[1].params["state"]
        assert urls[0].params["code_challenge"] != urls[1].params["code_challenge"]

        pending = await e.gateway.credentials.oauth2.take(params["state"])
        assert pending is not None and pending.link_token == "link"
        assert pkce_challenge(pending.verifier) == params["code_challenge"]
        assert CANARY not in repr(pending) and pending.verifier not in repr(pending)
        assert await e.gateway.credentials.oauth2.take(params["state"]) is None  # used once
        assert await e.gateway.credentials.oauth2.take("made-up-state") is None
        e.clock.advance(11 * 60)
        assert await e.gateway.credentials.oauth2.take(urls[1].params["state"]) is None  # expired after ten minutes


async def test_an_authorization_in_flight_is_stored_sealed_and_any_instance_takes_it_once(tmp_path: Path) -> None:
    async with env(tmp_path) as e:
        cfg = e.gateway.manifest.connector("code")
        assert cfg is not None
        _, record = await e.gateway.links.mint("connect", connector="code", principal="operator")
        url = httpx2.URL(
            await e.gateway.credentials.oauth2.begin(
                cfg.auth,  # type: ignore[arg-type]
                connector="code",
                principal="operator",
                client_id="gw-client",
                link_token="link-token-4711",
                redirect_uri="http://pages.test/oauth/callback",
                link_expires_at=record.expires_at,
            )
        )
        state = url.params["state"]
        # The provider sends the human back to another instance: its own tokens over the same database.
        async with SQLiteStore(tmp_path / "s.db") as elsewhere_store:
            rows = await elsewhere_store._fetchall("SELECT kind, key, value FROM ephemeral")
            [(kind, key, sealed)] = [tuple(r) for r in rows]
            assert kind == PENDING_KIND and key == hashlib.sha256(state.encode()).hexdigest()
            assert b"link-token-4711" not in sealed and state.encode() not in sealed  # sealed, state never stored
            elsewhere = OAuth2Tokens(e.gateway._http, e.vault, e.clock, store=elsewhere_store)
            pending = await elsewhere.take(state)
            assert pending is not None and pending.link_token == "link-token-4711"
            assert pkce_challenge(pending.verifier) == url.params["code_challenge"]
            assert pending.verifier.encode() not in sealed
        assert await e.gateway.credentials.oauth2.take(state) is None  # taken once, whichever instance took it


async def test_code_exchange_sends_the_verifier_and_authenticates_the_client(tmp_path: Path) -> None:
    async with env(tmp_path) as e:
        assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), NeedsAuth)  # client stored, no tokens
        listed = {c["slug"]: c for c in result_payload(await e.gateway.connectors(OPERATOR))["connectors"]}
        assert listed["code"]["status"] == "needs_auth" and listed["machine"]["status"] == "ready"
        await e.authorize()
        exchange = e.provider.token_requests[-1]
        assert exchange["grant_type"] == "authorization_code" and exchange["code"] == "the-code"
        assert exchange["redirect_uri"] == "http://pages.test/oauth/callback" and len(exchange["code_verifier"]) >= 43
        assert exchange["basic"] == "Basic " + base64.b64encode(f"gw-client:{CANARY}".encode()).decode()
        assert "client_secret" not in exchange

        result = await e.gateway.call(OPERATOR, "code.me.get")
        assert isinstance(result, Ok) and result.data == {"token": "[redacted]"}, result  # echoed token redacted
        assert e.provider.api_requests[-1].headers["authorization"] == "Bearer at-1"
        stored = await e.vault.sealed("code", principal="operator", name=TOKEN_NAME)
        assert stored is not None
        token_set = stored.open().reveal()
        assert isinstance(token_set, dict)
        assert (token_set["access_token"], token_set["refresh_token"], token_set["verified"]) == ("at-1", "rt-1", "1")
        listed = {c["slug"]: c for c in result_payload(await e.gateway.connectors(OPERATOR))["connectors"]}
        assert listed["code"]["status"] == "ready"


async def test_client_secret_post(tmp_path: Path) -> None:
    async with env(tmp_path, client_auth="post") as e:
        await e.authorize()
        exchange = e.provider.token_requests[-1]
        assert (exchange["client_id"], exchange["client_secret"], exchange["basic"]) == ("gw-client", CANARY, "")


# -- the cache, expiry and 401s --------------------------------------------------------------------


async def test_tokens_are_cached_then_refreshed_on_expiry(tmp_path: Path) -> None:
    async with env(tmp_path, expires_in=3600) as e:
        await e.authorize()
        for _ in range(3):
            assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)
        assert e.provider.grants() == ["authorization_code"]
        e.clock.advance(3600 - 29)  # inside the 30 s margin: refreshed before the upstream could see it expire
        assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)
        assert e.provider.grants() == ["authorization_code", "refresh_token"]
        assert e.provider.token_requests[-1]["refresh_token"] == "rt-1"
        assert e.provider.api_requests[-1].headers["authorization"] == "Bearer at-2"
        stored = await e.vault.sealed("code", principal="operator", name=TOKEN_NAME)
        assert stored is not None
        token_set = stored.open().reveal()
        assert isinstance(token_set, dict)
        # The provider sent no new refresh token, so the old one is kept (RFC 6749 section 6).
        assert (token_set["access_token"], token_set["refresh_token"]) == ("at-2", "rt-1")


@pytest.mark.parametrize("lifetime", [10**30, float("inf"), float("nan"), "9" * 5000, 1e308])
async def test_any_lifetime_a_provider_gives_is_survived_and_a_rotated_refresh_token_kept(
    tmp_path: Path, lifetime: Any
) -> None:
    async with env(tmp_path, expires_in=lifetime, rotate=True) as e:
        await e.authorize()
        assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)
        assert isinstance(await e.gateway.call(OPERATOR, "machine.me.get"), Ok)
        e.provider.valid.clear()  # revoked upstream: a refresh, which rotates the refresh token
        assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)
        stored = await e.vault.sealed("code", principal="operator", name=TOKEN_NAME)
        assert stored is not None
        token_set = stored.open().reveal()
        assert isinstance(token_set, dict) and token_set["refresh_token"] == f"rt-{e.provider.issued}"
        if lifetime == lifetime:  # cut to at most a year; NaN (unequal to itself) is no lifetime at all
            left = datetime.fromisoformat(token_set["expires_at"]) - e.clock.now()
            assert timedelta(days=300) < left <= timedelta(days=366), left


async def test_a_refreshed_set_is_kept_through_a_short_store_outage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A provider that rotates refresh tokens has spent the old one once it answers: the new set is the
    # only authorization left, so a store that refuses it for a moment is asked again, not given up on.
    async with env(tmp_path, expires_in=3600) as e:
        await e.authorize()
        e.clock.advance(3600)
        put, refusals = e.vault.put, [2]

        async def flaky(*args: Any, **kwargs: Any) -> None:
            if refusals[0]:
                refusals[0] -= 1
                raise StoreUnavailable("the SQLite database s.db cannot be used (disk I/O error)")
            await put(*args, **kwargs)

        monkeypatch.setattr(e.vault, "put", flaky)
        assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)
        assert refusals == [0] and e.provider.grants() == ["authorization_code", "refresh_token"]
        stored = await e.vault.sealed("code", principal="operator", name=TOKEN_NAME)
        assert stored is not None and stored.open().reveal()["access_token"] == "at-2"  # type: ignore[index]


async def test_a_refreshed_set_the_store_refuses_is_used_from_memory_and_stored_once_it_can_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A read-only database (a standby after a failover) refuses the rotated set: the old refresh token
    # is spent, so this process keeps the new set, never sends the spent one again, and stores the set
    # once the database takes writes.
    monkeypatch.setattr(oauth2_tokens, "STORE_AGAIN_EVERY", 0.0)
    async with env(tmp_path, expires_in=3600, rotate=True) as e:
        await e.authorize()
        e.clock.advance(3600)
        put, refusing = e.vault.put, [True]

        async def read_only(*args: Any, **kwargs: Any) -> None:
            if refusing[0]:
                raise StoreUnavailable("the PostgreSQL database at db refuses writes (read-only)", lasting=True)
            await put(*args, **kwargs)

        monkeypatch.setattr(e.vault, "put", read_only)
        with caplog.at_level(logging.ERROR, logger="mcp_gateway.core.oauth2_tokens"):
            assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)
        assert len([r for r in caplog.records if "could not be stored" in r.getMessage()]) == 1
        assert "keeps it in memory" in caplog.text
        e.clock.advance(3600)  # its access token expires too while the database still refuses
        with caplog.at_level(logging.ERROR, logger="mcp_gateway.core.oauth2_tokens"):
            assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)
        assert len([r for r in caplog.records if "could not be stored" in r.getMessage()]) == 1  # said once
        spent = [r["refresh_token"] for r in e.provider.token_requests if r["grant_type"] == "refresh_token"]
        assert spent == ["rt-1", "rt-2"]  # each used once
        refusing[0] = False
        assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)
        stored = await e.vault.sealed("code", principal="operator", name=TOKEN_NAME)
        assert stored is not None and stored.open().reveal()["refresh_token"] == "rt-3"  # type: ignore[index]
        assert e.provider.grants().count("refresh_token") == 2


async def test_a_refresh_lease_the_store_did_not_release_is_taken_back_not_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with env(tmp_path, expires_in=3600, rotate=True) as e:
        await e.authorize()
        assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)
        delete, refusals = e.store.delete_ephemeral, [1]

        async def down_once(*args: Any, **kwargs: Any) -> Any:
            if refusals[0]:
                refusals[0] -= 1
                raise StoreUnavailable("the PostgreSQL database at db refuses writes (read-only)", lasting=True)
            return await delete(*args, **kwargs)

        monkeypatch.setattr(e.store, "delete_ephemeral", down_once)
        e.provider.valid.clear()  # revoked upstream: a refresh, whose lease the store keeps
        assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)
        assert refusals == [0]
        e.provider.valid.clear()  # again, while that lease still lives: it is this process's own
        with anyio.fail_after(5):
            result = await e.gateway.call(OPERATOR, "code.me.get")
        assert isinstance(result, Ok), result
        assert e.provider.grants() == ["authorization_code", "refresh_token", "refresh_token"]


async def test_a_401_refreshes_once_and_retries(tmp_path: Path) -> None:
    async with env(tmp_path) as e:
        await e.authorize()
        assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)
        e.provider.valid.discard("at-1")  # revoked upstream, still unexpired here
        result = await e.gateway.call(OPERATOR, "code.me.get")
        assert isinstance(result, Ok), result
        assert e.provider.grants() == ["authorization_code", "refresh_token"]
        sent = [r.headers["authorization"] for r in e.provider.api_requests]
        assert sent == ["Bearer at-1", "Bearer at-1", "Bearer at-2"]


async def test_no_login_loop_right_after_authorizing(tmp_path: Path) -> None:
    """The human has just authorized and the upstream still says 401: a terminal error, no new link."""
    async with env(tmp_path) as e:
        await e.authorize()
        e.provider.api_rejects_all = True
        result = await e.gateway.call(OPERATOR, "code.me.get")
        assert isinstance(result, ErrorResult), result
        assert (result.reason, result.upstream_status) == ("auth_failed", 401)
        assert "just authorized" in result.message and "will not help" in result.message
        assert e.provider.grants() == ["authorization_code", "refresh_token"]  # one refresh, then stop
        assert len(e.provider.api_requests) == 2


async def test_a_working_authorization_that_stops_working_asks_for_a_reconnect(tmp_path: Path) -> None:
    async with env(tmp_path) as e:
        await e.authorize()
        assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)  # verified now
        e.provider.api_rejects_all = True
        result = await e.gateway.call(OPERATOR, "code.me.get")
        assert isinstance(result, NeedsAuth), result
        assert result.connect_url.startswith("http://pages.test/connect/")
        assert e.provider.grants() == ["authorization_code", "refresh_token"]


async def test_a_403_is_final_and_never_retried(tmp_path: Path) -> None:
    async with env(tmp_path) as e:
        await e.authorize()
        result = await e.gateway.call(OPERATOR, "code.forbidden.get")
        assert isinstance(result, Denied) and result.reason == "upstream_forbidden", result
        assert len(e.provider.api_requests) == 1
        assert e.provider.grants() == ["authorization_code"]


@pytest.mark.parametrize("expired", [True, False], ids=["expired", "rejected-401"])
async def test_a_dead_grant_forgets_the_authorization_on_the_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, expired: bool
) -> None:
    async with env(tmp_path, refresh_error="invalid_grant") as e:
        await e.authorize()
        if expired:
            e.clock.advance(7200)
        else:
            e.provider.valid.clear()  # revoked upstream: a 401, then the refresh is refused
        with caplog.at_level(logging.DEBUG):
            result = await e.gateway.call(OPERATOR, "code.me.get")
        assert isinstance(result, NeedsAuth), result
        # What happened, in words: the provider ended the sign-in (not a made-up or bare 401).
        assert "invalid_grant" in result.reason and "team-wide sign-in" in result.reason, result.reason
        assert "(401)" not in result.reason
        rows = [r for r in await e.store.list_audit(20) if r.status == "credential_deleted"]
        assert [(r.requested, r.user) for r in rows] == [("credential:code/oauth2_token", "operator")]
        assert json.loads(rows[0].args_preview)["scope"] == "team"
        assert await e.vault.sealed("code", principal="operator", name=TOKEN_NAME) is None
        assert await e.vault.sealed("code", principal="operator") is not None  # the client stays
        assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), NeedsAuth)
        assert e.provider.grants() == ["authorization_code", "refresh_token"]  # the dead token is not tried again
        assert CANARY not in caplog.text and "rt-1" not in caplog.text


@pytest.mark.parametrize(
    ("status", "error", "reason"),
    [
        (429, "slow_down", "rate_limited"),
        (503, "temporarily_unavailable", "upstream_error"),
        (400, "invalid_client", "auth_failed"),
        (401, "invalid_client", "auth_failed"),
        (400, "unauthorized_client", "auth_failed"),
    ],
)
async def test_a_refresh_refused_for_another_reason_keeps_the_sign_in(
    tmp_path: Path, status: int, error: str, reason: str
) -> None:
    async with env(tmp_path, refresh_error=error, refresh_status=status, retry_after="7") as e:
        await e.authorize()
        e.clock.advance(7200)
        result = await e.gateway.call(OPERATOR, "code.me.get")
        assert isinstance(result, ErrorResult) and result.reason == reason, result
        assert "(401)" not in result.message and CANARY not in result.message and "rt-1" not in result.message
        if reason == "auth_failed":  # the operator's client configuration is what to fix
            assert "mcp-gateway secret set code" in result.message and "sign-ins are kept" in result.message
        else:
            assert result.retry_after == 7 and "7 s" in (result.hint or ""), result
        assert await e.vault.sealed("code", principal="operator", name=TOKEN_NAME) is not None
        assert not [r for r in await e.store.list_audit(20) if r.status == "credential_deleted"]
        e.provider.refresh_error = None  # the provider answers again, or the operator fixed the client
        assert isinstance(await e.gateway.call(OPERATOR, "code.me.get"), Ok)
        assert e.provider.grants() == ["authorization_code", "refresh_token", "refresh_token"]


async def test_a_refresh_refused_for_its_scopes_or_an_unknown_code_says_so_without_guessing(tmp_path: Path) -> None:
    for error, reason, says in (
        ("invalid_scope", "connector_error", "refuses the scopes the manifest asks for"),
        ("unsupported_grant_type", "connector_error", "does not take this grant type"),
        ("quota_gremlins", "auth_failed", "cannot tell why"),
    ):
        async with env(tmp_path / error, refresh_error=error) as e:
            await e.authorize()
            e.clock.advance(7200)
            result = await e.gateway.call(OPERATOR, "code.me.get")
            assert isinstance(result, ErrorResult) and result.reason == reason, result
            assert error in result.message and says in result.message, result.message
            assert "does not accept the gateway's OAuth2 client" not in result.message
            assert "sign-ins are kept" in result.message and "rt-1" not in result.message
            assert await e.vault.sealed("code", principal="operator", name=TOKEN_NAME) is not None


async def test_a_client_refused_its_scopes_is_the_operators_to_fix_not_a_reconnect(tmp_path: Path) -> None:
    async with env(tmp_path, client_error="invalid_scope") as e:
        result = await e.gateway.call(OPERATOR, "machine.me.get")
    assert isinstance(result, ErrorResult) and result.reason == "connector_error", result
    assert "invalid_scope" in result.message and "`scopes`" in result.message
    assert "Reconnecting would not help" in result.message


def _cut_400(request: RawRequest) -> RawAnswer:
    body = b'{"error": "invalid_cli'
    head = f"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {len(body) + 40}\r\n\r\n"
    return RawAnswer(head.encode() + body, close=True)


async def test_a_token_endpoint_answer_cut_short_is_what_its_status_says_not_unreachable(tmp_path: Path) -> None:
    from mcp_gateway.auth.oauth2 import AuthorizationRefused, request_token

    with RawHttpServer(_cut_400) as server:
        config = OAuth2Auth.model_validate(
            {"type": "oauth2", "flow": "client_credentials", "token_url": f"{server.base_url}/token"}
        )
        async with httpx2.AsyncClient() as http:
            with pytest.raises(AuthorizationRefused) as info:
                await request_token(http, "machine", config, CLIENT, {"grant_type": "refresh_token"}, time_limit=5)
    assert "refused the request (HTTP 400, its answer cut short)" in str(info.value), info.value
    assert info.value.code == ""


async def test_no_named_secret_can_take_the_place_of_a_sign_in(tmp_path: Path) -> None:
    bob = Principal(user="bob", agent="bob-bot")
    async with env(tmp_path) as e:
        for connector in ("code", "personal", "machine"):
            result = await e.gateway.request_secret(bob, connector, TOKEN_NAME)
            assert isinstance(result, Denied) and result.reason == "invalid_args", result
            assert "call connect" in result.message and "another name" in result.message
        # A link minted for that name before it was refused stores nothing either.
        cfg = e.config_of("code")
        _, record = await e.gateway.links.mint("secret", connector="code", principal="bob", secret_name=TOKEN_NAME)
        assert not (await e.gateway.credentials.permit(record, cfg)).may_save
        assert isinstance(await e.gateway.request_secret(bob, "code", "webhook"), SecretLink)


async def test_concurrent_calls_with_an_expired_token_refresh_once(tmp_path: Path) -> None:
    async with env(tmp_path) as e:
        await e.authorize()
        e.clock.advance(7200)
        results: list[Any] = []

        async def one() -> None:
            results.append(await e.gateway.call(OPERATOR, "code.me.get"))

        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(one)
        assert all(isinstance(r, Ok) for r in results), results
        assert e.provider.grants() == ["authorization_code", "refresh_token"]


# -- per_user: each user's own token set -------------------------------------------------------------


MARIA, BOB = Principal(user="maria"), Principal(user="bob")
SHARED_SET = {"access_token": "shared-at", "refresh_token": "shared-rt", "expires_at": "", "verified": "1"}


async def test_a_per_user_connector_uses_only_the_callers_own_token_set(tmp_path: Path) -> None:
    async with env(tmp_path, refresh_error="invalid_grant") as e:
        await e.vault.put("personal", SHARED_SET, name=TOKEN_NAME)  # project-wide: never a per_user call's
        assert isinstance(await e.gateway.call(MARIA, "personal.me.get"), NeedsAuth)
        assert not await e.gateway.credentials.oauth2.ready(e.config("personal"), "personal", "maria", personal=True)
        assert e.provider.api_requests == []

        await e.authorize("personal", principal="maria")
        result = await e.gateway.call(MARIA, "personal.me.get")
        assert isinstance(result, Ok), result
        assert isinstance(await e.gateway.call(BOB, "personal.me.get"), NeedsAuth)  # maria's stays maria's
        assert await e.gateway._broker.needs_auth(e.config_of("personal"), "bob")
        assert not await e.gateway._broker.needs_auth(e.config_of("personal"), "maria")

        e.clock.advance(7200)  # maria's token expires, and her refresh will be refused
        await e.authorize("personal", principal="bob")
        assert isinstance(await e.gateway.call(BOB, "personal.me.get"), Ok)
        assert isinstance(await e.gateway.call(MARIA, "personal.me.get"), NeedsAuth)
        # Her refused refresh forgot her set only: bob's and the project-wide one stay.
        assert await e.vault.sealed("personal", principal="maria", name=TOKEN_NAME, own_only=True) is None
        assert await e.vault.sealed("personal", principal="bob", name=TOKEN_NAME, own_only=True) is not None
        assert isinstance(await e.gateway.call(BOB, "personal.me.get"), Ok)
        assert await e.gateway._broker.needs_auth(e.config_of("personal"), "maria")
        sent = [r.headers["authorization"] for r in e.provider.api_requests]
        # at-1 maria's, at-2 bob's: each call carried its caller's own token, never the shared one.
        assert sent == ["Bearer at-1", "Bearer at-2", "Bearer at-2"], sent


async def test_a_per_user_token_session_never_falls_back_to_the_shared_set(tmp_path: Path) -> None:
    async with env(tmp_path) as e:
        await e.vault.put("personal", SHARED_SET, name=TOKEN_NAME)
        cfg = e.config("personal")
        client = await e.vault.sealed("personal", principal="maria")
        with pytest.raises(CredentialMissing):
            await e.gateway.credentials.oauth2.token(
                e.gateway.credentials.oauth2.session(cfg, "personal", "maria", client, personal=True)
            )
        shared = await e.gateway.credentials.oauth2.token(
            e.gateway.credentials.oauth2.session(cfg, "personal", "maria", client)
        )
        assert shared.stored_as == "*"  # the same call for a shared connector: the project's set


# -- client credentials ------------------------------------------------------------------------------


async def test_client_credentials_fetches_caches_and_renews(tmp_path: Path) -> None:
    async with env(tmp_path, expires_in=600) as e:
        for _ in range(3):
            assert isinstance(await e.gateway.call(OPERATOR, "machine.me.get"), Ok)
        assert e.provider.grants() == ["client_credentials"]
        assert e.provider.token_requests[0]["scope"] == "api"
        e.clock.advance(600)
        assert isinstance(await e.gateway.call(OPERATOR, "machine.me.get"), Ok)
        e.provider.valid.discard("at-2")
        assert isinstance(await e.gateway.call(OPERATOR, "machine.me.get"), Ok)
        assert e.provider.grants() == ["client_credentials"] * 3
        assert await e.vault.sealed("machine", principal="operator", name=TOKEN_NAME) is None  # memory only
        e.provider.api_rejects_all = True
        result = await e.gateway.call(OPERATOR, "machine.me.get")
        assert isinstance(result, ErrorResult) and result.reason == "auth_failed", result
        assert "call connect" in result.message


async def test_a_client_replaced_elsewhere_is_used_from_the_next_call(tmp_path: Path) -> None:
    # The store is the truth: a team's client credentials replaced by another process (``mcp-gateway
    # secret set``, a teammate's page on another instance) mint the next call's token, not once the old
    # client's token expires an hour later.
    async with env(tmp_path, expires_in=3600) as e:
        assert isinstance(await e.gateway.call(OPERATOR, "machine.me.get"), Ok)
        assert isinstance(await e.gateway.call(OPERATOR, "machine.me.get"), Ok)
        first = e.provider.token_requests[-1]["basic"]
        await e.vault.put("machine", {**CLIENT, "client_secret": "rotated-secret"})
        assert isinstance(await e.gateway.call(OPERATOR, "machine.me.get"), Ok)
        assert e.provider.grants() == ["client_credentials"] * 2
        assert e.provider.token_requests[-1]["basic"] != first
        assert e.provider.api_requests[-1].headers["authorization"] == "Bearer at-2"


async def test_without_client_credentials_the_call_asks_for_a_link(tmp_path: Path) -> None:
    async with env(tmp_path, client=False) as e:
        for tool in ("machine.me.get", "code.me.get"):
            result = await e.gateway.call(OPERATOR, tool)
            assert isinstance(result, NeedsAuth), result
        assert e.provider.token_requests == [] and e.provider.api_requests == []


async def test_token_endpoint_failures_say_what_happened_without_quoting_it(tmp_path: Path) -> None:
    async with env(tmp_path, refresh_error="invalid_client") as e:
        await e.authorize()
        cfg = e.gateway.manifest.connector("machine")
        assert cfg is not None

        async def refuse(request: httpx2.Request) -> httpx2.Response:
            # A provider that quotes what it was sent, the client secret included.
            return httpx2.Response(401, json={"error": "invalid_client", "error_description": request.content.decode()})

        from mcp_gateway.auth.oauth2 import AuthorizationRefused

        async with httpx2.AsyncClient(transport=httpx2.MockTransport(refuse)) as http:
            e.gateway.credentials.oauth2._http = http
            with pytest.raises(AuthorizationRefused) as info:
                await e.gateway.credentials.oauth2.check_client(cfg.auth, "machine", CLIENT)  # type: ignore[arg-type]
        assert "invalid_client" in str(info.value) and "401" in str(info.value)
        assert CANARY not in str(info.value)

        async def down(request: httpx2.Request) -> httpx2.Response:
            raise httpx2.ConnectError("refused", request=request)

        async with httpx2.AsyncClient(transport=httpx2.MockTransport(down)) as http:
            e.gateway.credentials.oauth2._http = http
            result = await e.gateway.call(OPERATOR, "machine.me.get")
        assert isinstance(result, ErrorResult) and result.reason == "upstream_unreachable", result
        assert "token endpoint of machine (auth.test)" in result.message and CANARY not in result.message


async def test_a_token_endpoint_that_echoes_a_sent_secret_as_its_error_code_is_not_quoted(tmp_path: Path) -> None:
    # The client secret (letters, digits, dashes) and its hex both look like an RFC 6749 error code, and
    # most of its hex split by a dot is none of the forms the redactor knows.
    hexed = CANARY.encode().hex()
    async with env(tmp_path) as e:
        cfg = e.gateway.manifest.connector("machine")
        assert cfg is not None
        from mcp_gateway.auth.oauth2 import AuthorizationRefused

        for echoed in (CANARY, hexed, hexed.upper(), f"{hexed[:28]}.{hexed[28:56]}"):

            async def echo(request: httpx2.Request, code: str = echoed) -> httpx2.Response:
                return httpx2.Response(400, json={"error": code})

            async with httpx2.AsyncClient(transport=httpx2.MockTransport(echo)) as http:
                e.gateway.credentials.oauth2._http = http
                with pytest.raises(AuthorizationRefused) as info:
                    await e.gateway.credentials.oauth2.check_client(cfg.auth, "machine", CLIENT)  # type: ignore[arg-type]
                assert info.value.code == "" and echoed not in str(info.value), info.value
                # A call whose client the token endpoint refuses asks for the client again (no internal error).
                await e.vault.put("machine", CLIENT)
                result = await e.gateway.call(OPERATOR, "machine.me.get")
            assert isinstance(result, NeedsAuth) and "refused the request (HTTP 400)" in result.reason, result
            assert echoed not in json.dumps(result_payload(result))


def test_the_code_flow_needs_an_authorize_url() -> None:
    text = "connectors:\n  - slug: x\n    base_url: http://a\n    auth: {type: oauth2, token_url: http://t/token}\n"
    with pytest.raises(ManifestError, match="authorize_url"):
        parse_manifest(text)
    with pytest.raises(ManifestError, match="not an http"):
        parse_manifest(text.replace("http://t/token", "t/token, flow: client_credentials"))


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_a_token_endpoint_that_redirects_is_a_token_url_to_fix_not_a_wait(status: int) -> None:
    from mcp_gateway.auth._oauth2_endpoint import request_token
    from mcp_gateway.vocabulary.errors import UpstreamError

    sent: list[httpx2.Request] = []

    def endpoint(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(status, headers={"Location": "https://elsewhere.test/token"})

    config = OAuth2Auth(type="oauth2", flow="client_credentials", token_url="https://idp.test/token")
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint)) as http:
        with pytest.raises(UpstreamError) as info:
            client = {"client_id": "cid", "client_secret": CANARY}
            await request_token(http, "occ", config, client, {"grant_type": "client_credentials"}, time_limit=5)
    assert info.value.reason == "connector_error" and info.value.upstream_status == status
    message = str(info.value)
    assert f"answered HTTP {status}, a redirect" in message and "set the connector's token_url" in message
    assert "try again later" not in message and CANARY not in message and "elsewhere" not in message
    assert [str(r.url) for r in sent] == ["https://idp.test/token"]


async def test_a_client_refused_with_an_unknown_code_says_the_code_and_that_the_gateway_cannot_tell_why(
    tmp_path: Path,
) -> None:
    async with env(tmp_path / "unknown", client_error="quota_gremlins") as e:
        result = await e.gateway.call(OPERATOR, "machine.me.get")
    assert isinstance(result, ErrorResult) and result.reason == "auth_failed", result
    assert "quota_gremlins" in result.message and "cannot tell why" in result.message, result.message
    assert "may be wrong: ask the user to reconnect" not in result.message
    async with env(tmp_path / "client", client_error="invalid_client") as e:
        refused = await e.gateway.call(OPERATOR, "machine.me.get")
    assert isinstance(refused, NeedsAuth) and "client credentials may be wrong" in refused.reason, refused
