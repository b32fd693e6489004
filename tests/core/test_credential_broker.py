"""``CredentialBroker``: the one place a call, a sync and an MCP tool listing get their auth from."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from mcp_gateway.auth import LastMeterAuth
from mcp_gateway.primitives.secrets import SecretValue
from tests.core.test_gateway import SECRET, harness

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def sent_with(auth: LastMeterAuth) -> httpx2.Request:
    """The request as the auth flow puts the credential on it (the last meter)."""
    flow = auth.sync_auth_flow(httpx2.Request("GET", "http://upstream.test/items/1"))
    return next(flow)


async def test_a_stored_credential_goes_on_the_request_and_is_reported_for_redaction(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        broker = h.gateway._broker
        cfg = h.gateway._catalogs.config("api")
        credential = await broker.for_call(cfg, "alice")  # alice has none of her own: the project-wide one
        assert credential.missing is None and credential.sealed is not None
        seen: list[SecretValue] = []
        auth = broker.auth_for(cfg, "alice", credential.sealed, on_secret=seen.append)
        assert sent_with(auth).headers["Authorization"] == f"Bearer {SECRET}"
        assert [s.reveal() for s in seen] == [SECRET]
        assert await broker.configured(cfg) and not await broker.needs_auth(cfg)


async def test_without_a_credential_a_call_is_told_to_connect_and_sync_fails_closed(tmp_path: Path) -> None:
    async with harness(tmp_path, secret=None) as h:
        broker = h.gateway._broker
        cfg = h.gateway._catalogs.config("api")
        credential = await broker.for_call(cfg, "alice")
        assert credential.sealed is None
        assert credential.missing == "api needs a bearer credential; ask the user to open the link."
        assert await broker.needs_auth(cfg)
        sync_auth = await broker.sync_auth(cfg, on_secret=lambda _: None)
        assert sync_auth.credential is None


async def test_a_connector_without_auth_needs_nothing(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        broker = h.gateway._broker
        cfg = h.gateway._catalogs.config("open")
        assert await broker.for_call(cfg, "alice") == (await broker.for_call(cfg, "bob"))
        assert (await broker.for_call(cfg, "alice")).missing is None
        assert await broker.sealed(cfg, "alice") is None
        assert "Authorization" not in sent_with(broker.auth_for(cfg, "alice", None)).headers
        assert await broker.configured(cfg)


async def test_a_per_user_connector_carries_only_the_callers_own_credential(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:  # a project-wide credential is stored
        broker = h.gateway._broker
        cfg = h.gateway._catalogs.config("api").model_copy(update={"credentials": "per_user"})
        alice = await broker.for_call(cfg, "alice")
        assert alice.sealed is None and alice.missing is not None  # never the project-wide one
        assert await broker.needs_auth(cfg, "alice") and not await broker.needs_auth(cfg)
        await h.gateway._vault.put("api", "alice-own", principal="alice")
        mine = await broker.for_call(cfg, "alice")
        assert mine.sealed is not None and mine.sealed.open().reveal() == "alice-own"
        assert (await broker.for_call(cfg, "bob")).sealed is None  # alice's stays alice's
        assert not await broker.needs_auth(cfg, "alice") and await broker.needs_auth(cfg, "bob")
