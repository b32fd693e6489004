"""``OperatorTokens``: operator tokens as rows of a store shared by every instance.

Each test runs over the in-memory store and over SQLite; "two instances" are two services over
two store instances of one database, as two gateway processes (or a CLI and a server) are.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from mcp_gateway.services import outage_grace
from mcp_gateway.services.operator_tokens import LEGACY_META_KEY, OPERATOR_TOKEN_PREFIX, OperatorToken, OperatorTokens
from mcp_gateway.services.tokens import TokenService
from mcp_gateway.store import MemoryStore, SQLiteStore, Store
from mcp_gateway.store.contract import OperatorTokenRecord
from mcp_gateway.store.memory import MemoryData
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.errors import StoreUnavailable

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
StoreFactory = Callable[[], Store]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiosqlite


@pytest.fixture(params=["memory", "sqlite"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    if request.param == "memory":
        data = MemoryData()
        return lambda: MemoryStore(data)
    return lambda: SQLiteStore(tmp_path / "gateway.db")


@pytest.fixture
async def store(store_factory: StoreFactory) -> AsyncIterator[Store]:
    s = store_factory()
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def other(store: Store, store_factory: StoreFactory) -> AsyncIterator[Store]:
    """A second instance over the same database: another gateway process."""
    s = store_factory()
    await s.open()
    try:
        yield s
    finally:
        await s.close()


def _service(store: Store) -> OperatorTokens:
    return OperatorTokens(store, FixedClock(T0))


async def test_create_verify_revoke(store: Store) -> None:
    tokens = _service(store)
    made, token = await tokens.create()
    assert token.startswith(OPERATOR_TOKEN_PREFIX) and len(token) > 40
    assert made == OperatorToken(made.id, "2026-01-01T12:00:00+00:00", False)
    assert await tokens.verify(token) == made.id
    assert await tokens.active(made.id)
    assert await tokens.list() == [made]

    # Only the hash is stored.
    record = await store.get_operator_token(made.id)
    assert record is not None and token not in record.model_dump_json()

    assert await tokens.revoke(made.id) is True
    assert await tokens.revoke(made.id) is False
    assert await tokens.verify(token) is None
    assert not await tokens.active(made.id)
    assert await tokens.list() == [OperatorToken(made.id, made.created_at, True)]


async def test_verify_refuses_what_is_not_a_live_operator_token(store: Store) -> None:
    tokens = _service(store)
    _, token = await tokens.create()
    for candidate in (None, "", token[:-1], "mgw_" + token[4:], token + "x" * 300, OPERATOR_TOKEN_PREFIX):
        assert await tokens.verify(candidate) is None
    assert not await tokens.active("unknown")
    assert await tokens.revoke("unknown") is False


async def test_agent_tokens_are_not_operator_tokens(store: Store) -> None:
    _, agent_token = await TokenService(store, FixedClock(T0)).create("bot")
    tokens = _service(store)
    assert await tokens.verify(agent_token) is None
    assert await tokens.list() == []


async def test_an_earlier_builds_meta_list_is_imported_once(store: Store, other: Store) -> None:
    live, revoked = "mgo_" + "a" * 43, "mgo_" + "b" * 43

    def digest(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    await store.set_meta(
        LEGACY_META_KEY,
        [
            {"id": "old1", "hash": digest(live), "created_at": "2025-06-01T08:00:00+00:00", "revoked": False},
            {"id": "old2", "hash": digest(revoked), "created_at": "2025-06-02T08:00:00+00:00", "revoked": True},
            {"id": 3, "hash": None},  # unreadable: skipped
            "junk",
        ],
    )
    first, second = _service(store), _service(other)
    async with anyio.create_task_group() as tg:  # two instances importing at once
        tg.start_soon(first.list)
        tg.start_soon(second.list)
    assert await first.list() == [
        OperatorToken("old1", "2025-06-01T08:00:00+00:00", False),
        OperatorToken("old2", "2025-06-02T08:00:00+00:00", True),
    ]
    assert await first.verify(live) == "old1"
    assert await second.verify(revoked) is None
    assert await store.get_meta(LEGACY_META_KEY) is None  # emptied: not imported again

    # A revoke after the import sticks, even for an instance that imports later.
    assert await first.revoke("old1") is True
    await store.set_meta(LEGACY_META_KEY, [{"id": "old1", "hash": digest(live), "created_at": "x", "revoked": False}])
    assert await _service(other).verify(live) is None


async def test_interleaved_creates_and_revokes_across_instances_lose_nothing(store: Store, other: Store) -> None:
    """The old JSON list was read-modify-written whole: two instances could drop each other's token."""
    services = [_service(store), _service(other)]
    made: list[tuple[OperatorToken, str]] = []

    async def create(tokens: OperatorTokens) -> None:
        made.append(await tokens.create())

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(create, services[i % 2])
    assert len({m.id for m, _ in made}) == 12
    for tokens in services:
        assert {t.id for t in await tokens.list()} == {m.id for m, _ in made}

    # Revoke half from both instances at once, while more are created: one winner per revoke, no loss.
    wins: list[bool] = []

    async def revoke(tokens: OperatorTokens, token_id: str) -> None:
        wins.append(await tokens.revoke(token_id))

    doomed = [m.id for m, _ in made[:6]]
    async with anyio.create_task_group() as tg:
        for token_id in doomed:
            tg.start_soon(revoke, services[0], token_id)
            tg.start_soon(revoke, services[1], token_id)
            tg.start_soon(create, services[1])
    assert sorted(wins) == [False] * 6 + [True] * 6
    listed = {t.id: t.revoked for t in await services[0].list()}
    assert len(listed) == 18
    assert {i for i, revoked in listed.items() if revoked} == set(doomed)
    for m, token in made:
        assert (await services[1].verify(token) is None) == (m.id in doomed)


class _Down(MemoryStore):
    """A store whose operator-token lookups fail as a database outage does, while ``down``."""

    down = False

    async def find_operator_token(self, token_hash: str) -> OperatorTokenRecord | None:
        if self.down:
            raise StoreUnavailable("the database is unreachable")
        return await super().find_operator_token(token_hash)


async def test_an_operator_token_verified_lately_still_opens_metrics_in_an_outage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # /metrics is behind an operator token on the main app, and an outage is when it matters most.
    async with _Down() as store:
        operators = OperatorTokens(store, FixedClock(T0))
        shown, token = await operators.create()
        revoked, gone = await operators.create()
        _, never_seen = await operators.create()
        assert await operators.verify(token) == shown.id
        assert await operators.verify(gone) == revoked.id
        assert await operators.revoke(revoked.id)
        store.down = True
        assert await operators.verify(token) == shown.id
        for refused in (gone, never_seen):  # revoked before the outage; never verified by this process
            with pytest.raises(StoreUnavailable):
                await operators.verify(refused)
        now = time.monotonic()
        monkeypatch.setattr(time, "monotonic", lambda: now + outage_grace.OUTAGE_GRACE + 1)
        with pytest.raises(StoreUnavailable):
            await operators.verify(token)
