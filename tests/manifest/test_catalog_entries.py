"""Every catalog entry, end to end: used from a manifest (``catalog: <name>``, ``base_url`` pointed at a
loopback upstream), the gateway syncs it to the number of actions this table states, and one read of it
reaches the upstream with the stored credential exactly where the API expects it (header, query, HTTP Basic,
custom headers, an OAuth 2 access token) and the entry's required static headers beside it.

The counts are what the normalizer makes of each bundled spec (catalog/SOURCES.md lists them with their
origin): a change in the spec or in the normalizer that moves one shows here. Linear's schema is read
from the live endpoint at sync, so its row counts the loopback GraphQL server's fields instead.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx2
import pytest

from mcp_gateway.auth.oauth2 import TOKEN_NAME
from mcp_gateway.core import Gateway, result_payload
from mcp_gateway.manifest import (
    CATALOG_DIR,
    ApiKeyAuth,
    BasicAuth,
    BearerAuth,
    CustomAuth,
    OAuth2Auth,
    parse_manifest,
)
from mcp_gateway.runtime import Settings, open_gateway
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.vocabulary.clock import FixedClock
from tests.support.graphql_upstream import GraphQLApp
from tests.support.upstream import EchoApp, LoopbackServer, RecordedRequest, echo_app

pytestmark = pytest.mark.anyio

SECRET = "catalog-canary-0123456789abcdef"
"""The stored credential (or, for OAuth 2, the stored access token)."""
BASIC = {"username": "AC0123", "password": SECRET}
FIELDS = {"client_id": "client-0123", "secret": SECRET}
"""A JSON secret for the ``custom`` kind (Plaid's two headers)."""


@dataclass(frozen=True)
class Entry:
    actions: int
    """Actions after sync: one per OpenAPI operation or Postman request of the bundled spec."""
    tool: str
    """A read action (Plaid has only POSTs: a harmless one) called against the loopback upstream."""
    path: str
    """The path that call reaches, below the (loopback) base URL."""
    args: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    """Static headers the entry must send on every request."""


ENTRIES: dict[str, Entry] = {
    "asana": Entry(167, "get_users", "/users"),
    "box": Entry(260, "get_users_me", "/users/me"),
    "digitalocean": Entry(290, "account_get", "/v2/account"),
    "figma": Entry(54, "get_me", "/v1/me"),
    "github": Entry(
        1223,
        "users.get_authenticated",
        "/user",
        headers={"accept": "application/vnd.github+json", "x-github-api-version": "2022-11-28"},
    ),
    "gmail": Entry(79, "gmail_users_get_profile", "/gmail/v1/users/me/profile", {"userId": "me"}),
    "google-calendar": Entry(37, "calendar_calendar_list_list", "/users/me/calendarList"),
    "google-drive": Entry(50, "drive_about_get", "/about"),
    "google-sheets": Entry(17, "sheets_spreadsheets_get", "/v4/spreadsheets/sheet-1", {"spreadsheetId": "sheet-1"}),
    "jira": Entry(499, "get_current_user", "/rest/api/3/myself"),
    "launchdarkly": Entry(105, "get_me", "/members/me"),
    "linear": Entry(5, "query.ping", "/graphql"),  # the schema of tests/support/graphql_upstream.py, introspected
    "netlify": Entry(181, "get_current_user", "/user"),
    "notion": Entry(24, "get_self", "/v1/users/me", headers={"notion-version": "2025-09-03"}),
    "nytimes-books": Entry(6, "get_lists_best_sellers_history_json", "/lists/best-sellers/history.json"),
    "petstore": Entry(20, "get_inventory", "/store/inventory"),
    "plaid": Entry(200, "categories_get", "/categories/get", {"body": {}}, headers={"plaid-version": "2020-09-14"}),
    "sendgrid": Entry(334, "get_user_profile", "/user/profile"),
    # Slack's spec declares the token as a `token` parameter of most methods too; the entry names it
    # (credential_params), so the agent passes nothing and the token goes in the Authorization header.
    "slack": Entry(174, "auth_test", "/auth.test"),
    "square": Entry(200, "list_locations", "/v2/locations"),
    "stripe": Entry(417, "get_account", "/v1/account", headers={"stripe-version": "2020-08-27"}),
    "telnyx": Entry(361, "get_user_balance", "/balance"),
    "twilio": Entry(195, "list_account", "/2010-04-01/Accounts.json"),
    "wise": Entry(66, "profiles.get_profiles", "/v1/profiles"),
    "youtube": Entry(80, "youtube_channels_list", "/youtube/v3/channels", {"part": ["snippet"], "mine": True}),
    "zoom": Entry(373, "user", "/users/me", {"userId": "me"}),
}


def using(name: str) -> str:
    # Jira's entry has no base_url that works for everyone (fill_in): a manifest must set one.
    return f"connectors:\n  - slug: {name}\n    catalog: {name}\n    base_url: https://acme.atlassian.net\n"


def test_the_table_covers_the_whole_catalog() -> None:
    assert set(ENTRIES) == {p.stem for p in CATALOG_DIR.glob("*.yaml")}
    assert len(ENTRIES) >= 25


def test_sources_md_names_every_entry() -> None:
    sources = (CATALOG_DIR / "SOURCES.md").read_text(encoding="utf-8")
    for name in ENTRIES:
        assert f"| `{name}` |" in sources, name


def test_oauth2_entries_name_the_providers_endpoints() -> None:
    for name in ENTRIES:
        (cfg,) = parse_manifest(using(name)).connectors
        if isinstance(cfg.auth, OAuth2Auth):
            assert cfg.auth.flow == "authorization_code"
            for url in (cfg.auth.authorize_url, cfg.auth.token_url):
                assert url is not None and url.startswith("https://") and "127.0.0.1" not in url, (name, url)


def test_google_entries_ask_for_a_refresh_token() -> None:
    # Without access_type=offline Google returns no refresh token, and the connection dies with the
    # access token after an hour; without prompt=consent an account that granted access once gets none.
    google = []
    for name in ENTRIES:
        (cfg,) = parse_manifest(using(name)).connectors
        if isinstance(cfg.auth, OAuth2Auth) and "accounts.google.com" in (cfg.auth.authorize_url or ""):
            google.append(name)
            params = httpx2.URL(cfg.auth.authorize_url or "").params
            assert (params.get("access_type"), params.get("prompt")) == ("offline", "consent"), name
    assert sorted(google) == ["gmail", "google-calendar", "google-drive", "google-sheets", "youtube"]


# -- end to end --------------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[EchoApp, str]]:
    app = echo_app()
    with LoopbackServer(app) as server:
        yield app, server.base_url


@asynccontextmanager
async def gateway(name: str, base_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    manifest = parse_manifest(
        f"project: catalog-entries\ndefault_mode: allow_all\npublic_url: http://127.0.0.1:1\n"
        f"connectors:\n  - slug: {name}\n    catalog: {name}\n    base_url: {base_url}\n",
        base_dir=tmp_path,
    )
    settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": "k" * 40})
    async with open_gateway(settings, manifest=manifest, clock=FixedClock()) as gw:
        yield gw


async def store_credential(gw: Gateway, name: str, auth: Any) -> None:
    """What an operator would store for this auth kind (for OAuth 2: the client, and a connected token set)."""
    match auth:
        case BasicAuth():
            await gw._vault.put(name, BASIC)
        case CustomAuth():
            await gw._vault.put(name, FIELDS)
        case OAuth2Auth():
            await gw._vault.put(name, {"client_id": "client-0123", "client_secret": "client-secret-0123"})
            expires = gw.clock.now() + timedelta(hours=1)
            await gw._vault.put(
                name,
                {"access_token": SECRET, "expires_at": expires.isoformat(), "scope": "", "verified": "1"},
                name=TOKEN_NAME,
            )
        case _:
            await gw._vault.put(name, SECRET)


def assert_credential_placed(request: RecordedRequest, auth: Any) -> None:
    """The credential is where the API reads it, and nowhere else on the request."""
    elsewhere = dict(request.headers)
    match auth:
        case BearerAuth(header=header, prefix=prefix):
            assert request.headers[header.lower()] == f"{prefix} {SECRET}".strip()
            elsewhere.pop(header.lower())
        case OAuth2Auth():
            assert request.headers["authorization"] == f"Bearer {SECRET}"
            elsewhere.pop("authorization")
        case BasicAuth():
            expected = base64.b64encode(f"{BASIC['username']}:{SECRET}".encode()).decode()
            assert request.headers["authorization"] == f"Basic {expected}"
            elsewhere.pop("authorization")
        case ApiKeyAuth(in_="header", name=header, prefix=prefix):
            assert request.headers[header.lower()] == prefix + SECRET
            elsewhere.pop(header.lower())
        case ApiKeyAuth(in_="query", name=param):
            assert (param, SECRET) in request.query_params
            assert "authorization" not in request.headers
        case CustomAuth(headers=templates):
            for header, template in templates.items():
                assert request.headers[header.lower()] == template.format(secret=SimpleNamespace(**FIELDS))
                elsewhere.pop(header.lower())
        case other:
            raise AssertionError(f"no placement check for {other!r}")
    assert SECRET not in repr(elsewhere)
    assert SECRET not in request.body.decode("utf-8", "replace")
    if not isinstance(auth, ApiKeyAuth) or auth.in_ != "query":
        assert SECRET not in request.query


BIG = 300
"""Entries with more actions than this take a second or more to sync on a busy machine: marked slow."""


HTTP_ENTRIES = [
    pytest.param(n, marks=pytest.mark.slow) if ENTRIES[n].actions > BIG else n for n in sorted(ENTRIES) if n != "linear"
]


async def test_the_sign_in_keeps_the_entrys_authorize_parameters(tmp_path: Path, upstream: tuple[EchoApp, str]) -> None:
    # RFC 6749 3.1: the authorization endpoint's own query is kept when the flow adds its parameters.
    async with gateway("gmail", upstream[1], tmp_path) as gw:
        (cfg,) = gw.manifest.connectors
        assert isinstance(cfg.auth, OAuth2Auth)
        _, link = await gw.links.mint("connect", connector="gmail", principal="operator")
        url = httpx2.URL(
            await gw.credentials.oauth2.begin(
                cfg.auth,
                connector="gmail",
                principal="operator",
                client_id="client-0123",
                link_token="link",
                redirect_uri="http://127.0.0.1:1/oauth/callback",
                link_expires_at=link.expires_at,
            )
        )
    assert (url.host, url.path) == ("accounts.google.com", "/o/oauth2/v2/auth")
    assert (url.params["access_type"], url.params["prompt"], url.params["response_type"]) == (
        "offline",
        "consent",
        "code",
    )
    assert url.params["scope"] == "https://mail.google.com/" and url.params["code_challenge_method"] == "S256"


@pytest.mark.parametrize("name", HTTP_ENTRIES)
async def test_entry_syncs_and_its_credential_reaches_the_upstream(
    name: str, tmp_path: Path, upstream: tuple[EchoApp, str]
) -> None:
    app, base_url = upstream
    entry = ENTRIES[name]
    async with gateway(name, base_url, tmp_path) as gw:
        (cfg,) = gw.manifest.connectors
        await store_credential(gw, name, cfg.auth)
        (info,) = result_payload(await gw.connectors(OPERATOR))["connectors"]
        assert (info["status"], info["actions"], info["auth_configured"]) == ("ready", entry.actions, True), info

        seen = len(app.requests)
        result = result_payload(await gw.call(OPERATOR, f"{name}.{entry.tool}", entry.args))
        assert result["status"] == "ok", result
        assert len(app.requests) == seen + 1
        request = app.requests[-1]
        assert request.path == entry.path
        assert_credential_placed(request, cfg.auth)
        for header, value in entry.headers.items():
            assert request.headers[header] == value
        assert SECRET not in repr(result)  # the echoed credential is redacted on the way back


async def test_linear_introspects_with_the_credential_and_calls_with_it(tmp_path: Path) -> None:
    app = GraphQLApp(token=SECRET)
    with LoopbackServer(app) as server:
        async with gateway("linear", f"{server.base_url}/graphql", tmp_path) as gw:
            # With no key stored, the first sync tries introspection without one (a public schema
            # would load); this endpoint refuses it.
            before = len(app.requests)
            assert all("authorization" not in r.headers for r in app.requests)
            await gw._vault.put("linear", SECRET)
            # It could not load before a key was stored; a sync now introspects with it.
            await gw.refresh_connector("linear", principal=OPERATOR.user)
            (info,) = result_payload(await gw.connectors(OPERATOR))["connectors"]
            assert info["status"] == "ready", info
            assert info["actions"] == ENTRIES["linear"].actions
            result = result_payload(await gw.call(OPERATOR, f"linear.{ENTRIES['linear'].tool}", {}))
            assert result["status"] == "ok", result
            assert result["data"] == {"data": {"ping": "pong"}}
        assert app.requests[before:] and all(
            r.headers.get("authorization") == f"Bearer {SECRET}" for r in app.requests[before:]
        )
