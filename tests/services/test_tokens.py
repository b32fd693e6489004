"""``TokenService``: agents' bearer tokens, minted once, stored as a hash, checked on every request."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mcp_gateway.services.identity import Principal
from mcp_gateway.services.tokens import TOKEN_PREFIX, TokenService
from mcp_gateway.store import MemoryStore
from mcp_gateway.vocabulary.clock import FixedClock

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
