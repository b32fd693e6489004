"""``links``: what a link token is made of, and ``human_link``, the seam that reads the link a
meta-tool result hands a human (for offering it another way, e.g. as an MCP URL elicitation)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from mcp_gateway.services.links import LinkService, hash_link_token, human_link
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.errors import StoreUnavailable

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_tokens_have_256_bits_and_only_their_hash_is_kept(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        links = LinkService(store, FixedClock(), "http://pages.test/")
        url, record = await links.mint("secret", connector="api", principal="operator")
        token = url.removeprefix("http://pages.test/secrets/")
        assert len(base64.urlsafe_b64decode(token + "=")) == 32
        assert record.token_hash == hash_link_token(token) != token
        assert (await store.get_link(record.token_hash)) == record


def test_human_link_reads_every_kind_of_result() -> None:
    pending = {
        "status": "pending_approval",
        "approval_id": "apr_x",
        "approval_url": "http://pages.test/approvals/tok-a",
        "summary": "api.items.create (write) {}",
        "expires_at": "2026-01-01T00:15:00+00:00",
        "reason": "This action needs a human's approval.",
    }
    link = human_link(pending)
    assert link is not None
    assert (link.kind, link.url, link.link_id) == ("approval", pending["approval_url"], hash_link_token("tok-a"))
    assert link.expires_at is not None and link.expires_at.minute == 15 and "approval" in link.message
    needs_auth = human_link({"status": "needs_auth", "connect_url": "http://p/connect/t", "reason": "connect it"})
    assert needs_auth is not None and (needs_auth.kind, needs_auth.message) == ("connect", "connect it")
    secret = human_link({"status": "link", "secret_url": "http://p/secrets/s", "message": "paste it"})
    assert secret is not None and secret.kind == "secret"
    assert human_link({"status": "ok", "data": {"connect_url": "not ours"}}) is None
    assert human_link({"status": "denied", "reason": "policy_block"}) is None


async def test_record_reads_a_link_by_its_hash_used_or_not(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        links = LinkService(store, FixedClock(), "http://pages.test/")
        url, record = await links.mint("connect", connector="api", principal="maria")
        token = url.removeprefix("http://pages.test/connect/")
        assert await links.record(record.token_hash) == record
        assert await links.record(token) is None  # the token itself is not what is stored
        await links.consume("connect", token)
        used = await links.record(record.token_hash)
        assert used is not None and used.used_at is not None
        assert await links.peek("connect", token) is None  # peek hides a used link; record does not


async def test_a_link_given_back_while_the_store_is_down_is_unused_at_its_next_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        clock = FixedClock()
        links = LinkService(store, clock, "http://pages.test/")
        url, _ = await links.mint("connect", connector="api", principal="maria")
        token = url.removeprefix("http://pages.test/connect/")
        used_at = clock.now()
        assert await links.consume("connect", token, at=used_at) is not None
        release = store.release_link

        async def down(*_: object) -> bool:
            raise StoreUnavailable("the SQLite database s.db cannot be used (disk I/O error)")

        monkeypatch.setattr(store, "release_link", down)
        assert not await links.give_back(token, used_at)
        with pytest.raises(StoreUnavailable):
            await links.peek("connect", token)  # still down: the page says to retry
        monkeypatch.setattr(store, "release_link", release)
        assert await links.peek("connect", token) is not None
        assert await links.consume("connect", token) is not None and await links.peek("connect", token) is None
