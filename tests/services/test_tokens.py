"""``TokenService``: agents' bearer tokens, minted once, stored as a hash, checked on every request."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from mcp_gateway.services import outage_grace
from mcp_gateway.services.identity import Principal
from mcp_gateway.services.tokens import TOKEN_PREFIX, TokenService
from mcp_gateway.store import MemoryStore
from mcp_gateway.store.contract import TokenRecord
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.errors import StoreUnavailable

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_create_then_verify_names_the_agent() -> None:
    async with MemoryStore() as store:
        tokens = TokenService(store, FixedClock(T0))
        record, token = await tokens.create("ci-bot")
        assert token.startswith(TOKEN_PREFIX) and len(token) > 40
        assert (record.agent, record.created_at, record.revoked) == ("ci-bot", T0, False)
        assert token not in record.model_dump_json()  # only the hash is stored
        assert await store.list_tokens() == [record]
        assert await tokens.verify(token) == Principal(user=f"token:{record.id}", agent="ci-bot")


async def test_verify_refuses_unknown_revoked_and_oversized_tokens() -> None:
    async with MemoryStore() as store:
        tokens = TokenService(store, FixedClock(T0))
        record, token = await tokens.create("ci-bot")
        for candidate in (None, "", token[:-1], "mgw_" + "x" * 300):
            assert await tokens.verify(candidate) is None
        assert await store.revoke_token(record.id)
        assert await tokens.verify(token) is None


async def test_tokens_are_distinct() -> None:
    async with MemoryStore() as store:
        tokens = TokenService(store, FixedClock(T0))
        made = [await tokens.create("bot") for _ in range(5)]
        assert len({t for _, t in made}) == len({r.id for r, _ in made}) == 5


async def test_list_and_revoke_go_through_the_service() -> None:
    async with MemoryStore() as store:
        tokens = TokenService(store, FixedClock(T0))
        kept, _ = await tokens.create("a")
        dropped, token = await tokens.create("b")
        assert await tokens.revoke(dropped.id)
        assert not await tokens.revoke(dropped.id) and not await tokens.revoke("nosuch")
        listed = {r.id: r.revoked for r in await tokens.list()}
        assert listed == {kept.id: False, dropped.id: True}
        assert await tokens.verify(token) is None


class _Down(MemoryStore):
    """A store whose token lookups fail as a database outage does, while ``down``."""

    down = False

    async def find_token(self, token_hash: str) -> TokenRecord | None:
        if self.down:
            raise StoreUnavailable("the database is unreachable")
        return await super().find_token(token_hash)


async def test_a_token_verified_lately_is_taken_while_the_store_is_down(monkeypatch: pytest.MonkeyPatch) -> None:
    # An MCP client sends more than the request that runs a tool (its tool list, to check the result):
    # refused in an outage, those turned an answer already given into "nothing was run, retry".
    async with _Down() as store:
        tokens = TokenService(store, FixedClock(T0))
        _, token = await tokens.create("ci-bot")
        _, never_seen = await tokens.create("other-bot")
        principal = await tokens.verify(token)
        store.down = True
        assert await tokens.verify(token) == principal
        with pytest.raises(StoreUnavailable):
            await tokens.verify(never_seen)  # not verified before the outage: no answer without the store
        now = time.monotonic()
        monkeypatch.setattr(time, "monotonic", lambda: now + outage_grace.OUTAGE_GRACE + 1)
        with pytest.raises(StoreUnavailable):
            await tokens.verify(token)  # verified too long ago


async def test_a_token_revoked_is_not_taken_in_a_later_outage() -> None:
    async with _Down() as store:
        tokens = TokenService(store, FixedClock(T0))
        record, token = await tokens.create("ci-bot")
        await tokens.verify(token)
        assert await tokens.revoke(record.id)
        store.down = True
        with pytest.raises(StoreUnavailable):
            await tokens.verify(token)
        store.down = False
        other, second = await tokens.create("ci-bot")
        await tokens.verify(second)
        await store.revoke_token(other.id)  # revoked by another process: seen at the next lookup
        assert await tokens.verify(second) is None
        store.down = True
        with pytest.raises(StoreUnavailable):
            await tokens.verify(second)
