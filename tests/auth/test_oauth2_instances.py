"""``oauth2`` refresh with several gateway instances on one database (SQLite file and PostgreSQL).

Each instance is a real ``Gateway`` with a store connection, vault, token cache and in-process lock
of its own; what they share is the database, as two ``serve`` processes would. The provider rotates
refresh tokens: a second use of one is refused with ``invalid_grant``, so a duplicate refresh would
log the user out. What must hold: one refresh request per expiry or 401 whatever the number of
instances, every call succeeds, the token set stays connected, and no token reaches a log or a lease.

Two providers: the real authorization server (npm ``oauth2-mock-server`` with
``--rotate-refresh-tokens``, JWTs checked by ``ProtectedApi`` on loopback) for the concurrency
claims, and a dozen-line rotating token endpoint behind ``httpx2.MockTransport`` whose answers a test
can hold back, to stage the interleavings (a stale lease, a refused refresh) deterministically.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
import anyio.lowlevel
import httpx2
import pytest

from mcp_gateway.auth.oauth2 import TOKEN_NAME
from mcp_gateway.core import Gateway
from mcp_gateway.core.oauth2_lease import LEASE_KIND, RefreshLease, lease_key
from mcp_gateway.core.oauth2_pending import PendingAuthorization
from mcp_gateway.core.oauth2_tokens import OAuth2Tokens
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.primitives.crypto import AESGCMCipher
from mcp_gateway.primitives.secrets import PROJECT_WIDE
from mcp_gateway.services.approvals import ApprovalService
from mcp_gateway.services.audit import Auditor
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.services.links import LinkService
from mcp_gateway.store.contract import Store
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.model import ErrorResult, NeedsAuth, Ok
from tests.support.oauth2_server import OAuth2MockServer, ProtectedApi
from tests.support.upstream import LoopbackServer

pytestmark = pytest.mark.anyio

PROJECT = "instances"
CANARY = "CANARY-oauth2-instances-client-secret-7140"
CLIENT = {"client_id": "gw-instances", "client_secret": CANARY}
KEY = b"m" * 32

MANIFEST = """
project: instances
public_url: http://127.0.0.1:9
connectors:
  - slug: people
    base_url: {api}
    auth: {{type: oauth2, authorize_url: "{auth}/authorize", token_url: "{auth}/token", scopes: [read]}}
    source: {{http: {{actions: [{{path: me.get, method: GET, url: /me, summary: Who am I}}]}}}}
"""
LEASE = lease_key(PROJECT, "people", PROJECT_WIDE, TOKEN_NAME)

StoreFactory = Callable[[], Store]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgres"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Makes store instances over one database, one per gateway instance."""
    if request.param == "sqlite":
        return lambda: SQLiteStore(tmp_path / "shared.db")
    from mcp_gateway.store.postgres import PostgresStore  # the `postgres` extra (asyncpg)

    url = request.getfixturevalue("postgres_url")
    return lambda: PostgresStore(url)


@dataclass
class Instance:
    gateway: Gateway
    store: Store
    vault: CredentialVault

    async def call(self) -> Any:
        return await self.gateway.call(OPERATOR, "people.me.get")

    async def token_set(self) -> dict[str, str] | None:
        sealed = await self.vault.sealed("people", principal=OPERATOR.user, name=TOKEN_NAME)
        value = sealed.open().reveal() if sealed is not None else None
        assert value is None or isinstance(value, dict)
        return value


@asynccontextmanager
async def instances(
    new_store: StoreFactory,
    clock: FixedClock,
    *,
    api: str,
    auth: str,
    transport: httpx2.AsyncBaseTransport | None = None,
    refresh_wait: float | None = None,
    count: int = 2,
) -> AsyncIterator[list[Instance]]:
    """``count`` gateways over one database, each with everything else of its own. Without
    ``refresh_wait`` each gateway makes its own ``OAuth2Tokens``, as ``serve`` does."""
    async with AsyncExitStack() as stack:
        out = []
        for _ in range(count):
            manifest = parse_manifest(MANIFEST.format(api=api, auth=auth))
            store = await stack.enter_async_context(new_store())
            vault = CredentialVault(store, AESGCMCipher(KEY, project=PROJECT), project=PROJECT)
            http = await stack.enter_async_context(
                httpx2.AsyncClient(transport=transport, trust_env=False, follow_redirects=False)
            )
            gateway = Gateway(
                manifest=manifest,
                store=store,
                vault=vault,
                clock=clock,
                http=http,
                links=LinkService(store, clock, manifest.public_url),
                approvals=ApprovalService(store, clock),
                auditor=Auditor(store),
                oauth2=None
                if refresh_wait is None
                else OAuth2Tokens(http, vault, clock, store=store, project=PROJECT, refresh_wait=refresh_wait),
            )
            await gateway.sync()
            out.append(Instance(gateway, store, vault))
        await out[0].vault.put("people", CLIENT)
        yield out


async def authorize(instance: Instance, http: httpx2.AsyncClient) -> None:
    """The human's part, without a browser: start on one instance, let the provider redirect with a
    code, finish on the same instance (which instance does not matter: the state is in the store)."""
    gateway = instance.gateway
    cfg = gateway.manifest.connector("people")
    assert cfg is not None
    link, record = await gateway.links.mint("connect", connector="people", principal=OPERATOR.user)
    url = await gateway.credentials.oauth2.begin(
        cfg.auth,  # type: ignore[arg-type]
        connector="people",
        principal=OPERATOR.user,
        client_id=CLIENT["client_id"],
        link_token=link.rsplit("/", 1)[1],
        redirect_uri="http://127.0.0.1:9/oauth/callback",
        link_expires_at=record.expires_at,
    )
    response = await http.get(url)
    back = httpx2.URL(response.headers["location"])
    pending = await gateway.credentials.oauth2.take(back.params["state"])
    assert pending is not None
    token_set = await gateway.credentials.oauth2.exchange(cfg.auth, pending, back.params["code"])  # type: ignore[arg-type]
    await gateway.credentials.oauth2.save("people", token_set)


async def call_all(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run every call at once; their results in order."""
    results: list[Any] = [None] * len(calls)

    async def one(i: int) -> None:
        results[i] = await calls[i]()

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(one, i)
    return results


# -- against the real authorization server -----------------------------------------------------------


@dataclass
class RealProvider:
    auth: OAuth2MockServer
    api: ProtectedApi
    api_url: str
    _syncs: int = 0

    async def token_events(self) -> list[dict[str, Any]]:
        """Every token endpoint exchange so far; a round trip through the server's command channel
        first, so no event written before now is still in the pipe."""
        self._syncs += 1
        await anyio.to_thread.run_sync(self.auth.command, f"sync-{self._syncs}")
        return self.auth.events("token")

    async def refreshes(self) -> list[dict[str, Any]]:
        return [e for e in await self.token_events() if e["grant_type"] == "refresh_token"]


@pytest.fixture
def real() -> Iterator[RealProvider]:
    with OAuth2MockServer(rotate_refresh_tokens=True) as auth:
        api = ProtectedApi(auth.jwks())
        with LoopbackServer(api) as server:
            yield RealProvider(auth, api, server.base_url)


def assert_nothing_leaked(text: str, secrets: list[str]) -> None:
    for secret in [CANARY, *secrets]:
        assert secret not in text


@pytest.mark.slow  # the npm oauth2-mock-server runs as a child process
async def test_two_instances_refresh_an_expired_token_once(
    new_store: StoreFactory, real: RealProvider, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FixedClock()
    async with instances(new_store, clock, api=real.api_url, auth=real.auth.url) as (a, b):
        async with httpx2.AsyncClient(trust_env=False, follow_redirects=False) as http:
            await authorize(a, http)
        assert [type(await i.call()) for i in (a, b)] == [Ok, Ok]  # both cache the first access token
        first = await a.token_set()
        assert first is not None and first["verified"] == "1"

        clock.advance(2 * 3600)  # expired for both instances
        with caplog.at_level(logging.DEBUG):
            results = await call_all([i.call for i in (a, b) for _ in range(4)])
        assert all(isinstance(r, Ok) for r in results), results

        [refresh] = await real.refreshes()  # exactly one refresh reached the token endpoint
        assert (refresh["status"], refresh["reused_refresh_token"]) == (200, False)
        assert refresh["refresh_token_sent"] == first["refresh_token"]
        stored = await b.token_set()
        assert stored is not None  # still connected, with the rotated refresh token
        assert (stored["access_token"], stored["refresh_token"]) == (refresh["access_token"], refresh["refresh_token"])
        assert set(real.api.accepted[2:]) == {refresh["access_token"]}  # every call used the new token
        assert await a.store.get_ephemeral(LEASE_KIND, LEASE, clock.now()) is None  # the lease was released
        assert_nothing_leaked(caplog.text, real.auth.issued_tokens())


@pytest.mark.slow  # the npm oauth2-mock-server runs as a child process
async def test_after_a_401_every_instance_reads_the_vault_and_one_refreshes(
    new_store: StoreFactory, real: RealProvider
) -> None:
    clock = FixedClock()
    async with instances(new_store, clock, api=real.api_url, auth=real.auth.url, count=3) as group:
        async with httpx2.AsyncClient(trust_env=False, follow_redirects=False) as http:
            await authorize(group[0], http)
        assert all([isinstance(await i.call(), Ok) for i in group])
        first = await group[0].token_set()
        assert first is not None
        real.api.revoked.add(first["access_token"])  # unexpired here, refused upstream: every cache is stale

        results = await call_all([i.call for i in group for _ in range(3)])
        assert all(isinstance(r, Ok) for r in results), results
        [refresh] = await real.refreshes()
        assert refresh["status"] == 200
        stored = await group[1].token_set()
        assert stored is not None and stored["access_token"] == refresh["access_token"]

        # Later, one instance refreshes after a 401; another, whose cached token is now stale, gets a
        # 401 for it too and takes the newer token from the vault instead of refreshing again.
        real.api.revoked.add(refresh["access_token"])
        assert isinstance(await group[2].call(), Ok)
        assert isinstance(await group[0].call(), Ok)
        refreshes = await real.refreshes()
        assert len(refreshes) == 2 and not any(e["reused_refresh_token"] for e in refreshes)
        assert real.api.accepted[-1] == real.api.accepted[-2] == refreshes[-1]["access_token"]


# -- staged interleavings, against a token endpoint the test holds back ------------------------------


@dataclass
class Held:
    refresh_token: str
    release: anyio.Event = field(default_factory=anyio.Event)


@dataclass
class RotatingProvider:
    """A token endpoint that rotates refresh tokens (each works once) and an API accepting the access
    tokens it issued. While ``hold`` is set, refresh answers wait in ``held`` until released."""

    hold: bool = False
    held: list[Held] = field(default_factory=list)
    live: set[str] = field(default_factory=set)
    valid: set[str] = field(default_factory=set)
    refreshes: list[tuple[str, int]] = field(default_factory=list)
    """(refresh token presented, status answered), in the order answered."""
    sent: list[str] = field(default_factory=list)
    """Access tokens the API received."""
    issued: int = 0
    _arrived: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        await anyio.lowlevel.checkpoint()
        if request.url.host == "auth.test":
            return await self._token(request)
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        self.sent.append(token)
        return httpx2.Response(200, json={"ok": True}) if token in self.valid else httpx2.Response(401)

    async def _token(self, request: httpx2.Request) -> httpx2.Response:
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        if form["grant_type"] == "refresh_token":
            if self.hold:
                held = Held(form["refresh_token"])
                self.held.append(held)
                self._arrived.set()
                self._arrived = anyio.Event()
                await held.release.wait()
            if form["refresh_token"] not in self.live:
                self.refreshes.append((form["refresh_token"], 400))
                return httpx2.Response(400, json={"error": "invalid_grant"})
            self.live.discard(form["refresh_token"])
        self.issued += 1
        access, refresh = f"at-{self.issued}", f"rt-{self.issued}"
        self.valid.add(access)
        self.live.add(refresh)
        if form["grant_type"] == "refresh_token":
            self.refreshes.append((form["refresh_token"], 200))
        body = {"access_token": access, "refresh_token": refresh, "token_type": "Bearer", "expires_in": 3600}
        return httpx2.Response(200, json=body)

    async def wait_held(self, count: int) -> None:
        with anyio.fail_after(10):
            while len(self.held) < count:
                await self._arrived.wait()


@asynccontextmanager
async def staged(
    new_store: StoreFactory, **options: Any
) -> AsyncIterator[tuple[list[Instance], RotatingProvider, FixedClock]]:
    """Two instances, authorized (at-1, rt-1), each with at-1 cached and verified."""
    provider = RotatingProvider()
    clock = FixedClock()
    transport = httpx2.MockTransport(provider)
    async with instances(
        new_store, clock, api="http://api.test", auth="http://auth.test", transport=transport, **options
    ) as group:
        cfg = group[0].gateway.manifest.connector("people")
        assert cfg is not None
        pending = PendingAuthorization(connector="people", principal=OPERATOR.user, link_token="t", verifier="v" * 43)
        token_set = await group[0].gateway.credentials.oauth2.exchange(cfg.auth, pending, "the-code")  # type: ignore[arg-type]
        await group[0].gateway.credentials.oauth2.save("people", token_set)
        assert all([isinstance(await i.call(), Ok) for i in group])
        yield group, provider, clock


async def test_the_instance_without_the_lease_waits_for_the_refresh(
    new_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    async with staged(new_store) as ((a, b), provider, clock):
        clock.advance(2 * 3600)
        provider.hold = True
        results: dict[str, Any] = {}
        with caplog.at_level(logging.DEBUG):
            async with anyio.create_task_group() as tg:

                async def run(name: str, instance: Instance) -> None:
                    results[name] = await instance.call()

                tg.start_soon(run, "a", a)
                await provider.wait_held(1)
                # A holds the lease while its refresh is in flight; the lease names no secret.
                lease = await a.store.get_ephemeral(LEASE_KIND, LEASE, clock.now())
                assert lease is not None and len(lease) == 32 and lease.decode().isalnum()
                assert LEASE == hashlib.sha256(json.dumps([PROJECT, "people", "*", TOKEN_NAME]).encode()).hexdigest()
                tg.start_soon(run, "b", b)
                await anyio.sleep(0.5)  # B polls the vault meanwhile
                assert "b" not in results and len(provider.held) == 1  # B waits and sends nothing
                provider.held[0].release.set()
        assert isinstance(results["a"], Ok) and isinstance(results["b"], Ok), results
        assert provider.refreshes == [("rt-1", 200)]
        assert provider.sent[-2:] == ["at-2", "at-2"]
        assert await a.store.get_ephemeral(LEASE_KIND, LEASE, clock.now()) is None
        assert_nothing_leaked(caplog.text, ["at-1", "rt-1", "at-2", "rt-2"])


async def test_a_refusal_after_another_instance_rotated_the_token_uses_the_newer_set(
    new_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """B's refresh outlives its lease; A, taking the lease over, refreshes with the same refresh token
    and is refused. A reads the vault again, finds B's rotated set, and uses it: nobody is logged out."""
    async with staged(new_store) as ((a, b), provider, clock):
        clock.advance(2 * 3600)
        provider.hold = True
        results: dict[str, Any] = {}
        b_done = anyio.Event()
        with caplog.at_level(logging.DEBUG):
            async with anyio.create_task_group() as tg:

                async def run(name: str, instance: Instance) -> None:
                    results[name] = await instance.call()
                    if name == "b":
                        b_done.set()

                tg.start_soon(run, "b", b)
                await provider.wait_held(1)
                clock.advance(31)  # B's lease expires under it (a stalled instance)
                tg.start_soon(run, "a", a)
                await provider.wait_held(2)
                assert [h.refresh_token for h in provider.held] == ["rt-1", "rt-1"]
                provider.held[0].release.set()  # B's refresh succeeds and stores at-2 / rt-2
                with anyio.fail_after(10):
                    await b_done.wait()
                provider.held[1].release.set()  # A's use of rt-1 is refused: invalid_grant
        assert isinstance(results["a"], Ok) and isinstance(results["b"], Ok), results
        assert provider.refreshes == [("rt-1", 200), ("rt-1", 400)]
        stored = await a.token_set()
        assert stored is not None and (stored["access_token"], stored["refresh_token"]) == ("at-2", "rt-2")
        assert provider.sent[-2:] == ["at-2", "at-2"]
        assert "changed meanwhile" in caplog.text and "a human must connect it again" not in caplog.text
        # B's release did not drop A's lease, and A released its own.
        assert await a.store.get_ephemeral(LEASE_KIND, LEASE, clock.now()) is None
        assert_nothing_leaked(caplog.text, ["at-1", "rt-1", "at-2", "rt-2"])


async def test_a_refused_refresh_still_disconnects_every_instance_once(new_store: StoreFactory) -> None:
    async with staged(new_store) as ((a, b), provider, clock):
        provider.live.clear()  # the user revoked the authorization at the provider
        clock.advance(2 * 3600)
        results = await call_all([a.call, b.call, a.call, b.call])
        assert all(isinstance(r, NeedsAuth) for r in results), results
        assert provider.refreshes == [("rt-1", 400)]  # one refusal, not one per instance
        assert await a.token_set() is None and await b.vault.sealed("people", principal=OPERATOR.user) is not None


async def test_a_lease_left_by_a_crashed_instance_delays_the_refresh_until_it_expires(
    new_store: StoreFactory,
) -> None:
    async with staged(new_store, refresh_wait=0.3) as ((a, _b), provider, clock):
        clock.advance(2 * 3600)
        crashed = RefreshLease(a.store, clock, LEASE)  # claimed, then its instance died
        assert await crashed.claim()
        result = await a.call()
        assert isinstance(result, ErrorResult) and result.reason == "upstream_timeout", result
        assert "another gateway instance" in result.message and "try the call again" in result.message
        assert provider.refreshes == [] and await a.token_set() is not None
        clock.advance(31)  # the lease has expired: the next call refreshes
        assert isinstance(await a.call(), Ok)
        assert provider.refreshes == [("rt-1", 200)]
