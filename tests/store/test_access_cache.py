"""Credential and token lookups answered from memory (``store/_access.py``), and when they must not be.

Two ``SQLiteStore`` instances on one file stand for two processes (``serve`` and the CLI's
``secret set`` / ``token revoke``); a raw ``sqlite3`` connection stands for any other writer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mcp_gateway.primitives.secrets import CredentialKey
from mcp_gateway.store import AuditRecord, SQLiteStore, TokenRecord
from mcp_gateway.store._access import MAX_ENTRIES, AccessCache

pytestmark = pytest.mark.anyio

KEY = CredentialKey(connector="github", principal="*")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "gateway.db"


@pytest.fixture
async def serve(path: Path) -> AsyncIterator[SQLiteStore]:
    """The long-running gateway's store."""
    async with SQLiteStore(path) as store:
        yield store


@pytest.fixture
async def cli(serve: SQLiteStore, path: Path) -> AsyncIterator[SQLiteStore]:
    """Another process's store on the same file, opened after ``serve``."""
    async with SQLiteStore(path) as store:
        yield store


def _token(id: str, token_hash: str) -> TokenRecord:
    return TokenRecord(id=id, agent="bot", token_hash=token_hash, created_at=T0)


def _raw(path: Path, sql: str, params: tuple[object, ...] = ()) -> None:
    db = sqlite3.connect(path)
    try:
        db.execute(sql, params)
        db.commit()
    finally:
        db.close()


def _generation(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT value FROM generation WHERE scope = 'access'").fetchone()[0])
    finally:
        db.close()


# -- what is served from memory ---------------------------------------------------------------------


async def test_lookups_are_served_from_memory_while_nothing_changed(serve: SQLiteStore, path: Path) -> None:
    await serve.put_credential(KEY, b"sealed-1")
    await serve.put_token(_token("t1", "h1"))
    assert await serve.get_credential(KEY) == b"sealed-1"
    assert (await serve.find_token("h1")) == _token("t1", "h1")

    # Proof that the answers now come from memory: change the rows behind the counter's back
    # (triggers dropped, so nothing bumps it) and the store still answers what it cached.
    _raw(path, "DROP TRIGGER credential_update_bumps_access")
    _raw(path, "DROP TRIGGER token_update_bumps_access")
    _raw(path, "UPDATE credential SET sealed = ?", (b"sealed-2",))
    _raw(path, "UPDATE token SET revoked = 1")
    assert await serve.get_credential(KEY) == b"sealed-1"
    assert not (await serve.find_token("h1")).revoked  # type: ignore[union-attr]

    # The moment the counter moves, both are read again.
    _raw(path, "UPDATE generation SET value = value + 1")
    assert await serve.get_credential(KEY) == b"sealed-2"
    assert (await serve.find_token("h1")).revoked  # type: ignore[union-attr]


async def test_a_missing_credential_is_remembered_too(serve: SQLiteStore, cli: SQLiteStore) -> None:
    other = CredentialKey(connector="github", principal="alice")
    assert await serve.get_credential(other) is None  # the principal's own, then the project-wide one
    assert serve._access.credentials == {other: None}
    await cli.put_credential(other, b"alice's")
    assert await serve.get_credential(other) == b"alice's"


async def test_the_first_cached_credential_of_several_keys_under_one_counter_read(
    serve: SQLiteStore, cli: SQLiteStore, path: Path
) -> None:
    own = CredentialKey(connector="github", principal="alice")
    keys = [own, KEY]
    assert serve.cached_credential(keys) is None  # nothing read yet: memory cannot tell
    await serve.put_credential(KEY, b"shared")
    assert await serve.get_credential(own) is None
    assert serve.cached_credential(keys) is None  # the project-wide one not read since the write
    assert await serve.get_credential(KEY) == b"shared"
    assert serve.cached_credential(keys) == (KEY, b"shared")
    assert serve.cached_credential([own]) == (None, None)

    reads: list[int | None] = []
    read = serve._access._read_generation

    def counted() -> int | None:
        reads.append(read())
        return reads[-1]

    serve._access._read_generation = counted
    assert serve.cached_credential(keys) == (KEY, b"shared")
    assert len(reads) == 1  # one read of the counter for both keys

    await cli.put_credential(own, b"alice's")  # another process: the counter moves
    assert serve.cached_credential(keys) is None
    assert await serve.get_credential(own) == b"alice's"
    assert serve.cached_credential(keys) == (own, b"alice's")


# -- writes in this process -----------------------------------------------------------------------


async def test_writes_in_this_process_are_seen_at_once(serve: SQLiteStore) -> None:
    await serve.put_credential(KEY, b"v1")
    assert await serve.get_credential(KEY) == b"v1"
    await serve.put_credential(KEY, b"v2")
    assert await serve.get_credential(KEY) == b"v2"
    await serve.replace_all_credentials({KEY: b"v3"})
    assert await serve.get_credential(KEY) == b"v3"
    await serve.delete_credential(KEY)
    assert await serve.get_credential(KEY) is None

    await serve.put_token(_token("t1", "h1"))
    assert not (await serve.find_token("h1")).revoked  # type: ignore[union-attr]
    assert await serve.revoke_token("t1")
    assert (await serve.find_token("h1")).revoked  # type: ignore[union-attr]


async def test_in_memory_database_invalidates_on_its_own_writes() -> None:
    async with SQLiteStore(":memory:") as store:
        await store.put_credential(KEY, b"v1")
        assert await store.get_credential(KEY) == b"v1"
        assert store._access.credentials == {KEY: b"v1"}
        await store.put_credential(KEY, b"v2")
        assert await store.get_credential(KEY) == b"v2"
        await store.put_token(_token("t1", "h1"))
        assert await store.find_token("h1") is not None
        await store.revoke_token("t1")
        assert (await store.find_token("h1")).revoked  # type: ignore[union-attr]


# -- writes by another process ---------------------------------------------------------------------


async def test_a_secret_set_elsewhere_is_used_by_the_next_lookup(serve: SQLiteStore, cli: SQLiteStore) -> None:
    assert await serve.get_credential(KEY) is None
    await cli.put_credential(KEY, b"from the cli")
    assert await serve.get_credential(KEY) == b"from the cli"
    await cli.put_credential(KEY, b"replaced")
    assert await serve.get_credential(KEY) == b"replaced"
    await cli.delete_credential(KEY)
    assert await serve.get_credential(KEY) is None
    await cli.put_credential(KEY, b"rotated-old")
    assert await serve.get_credential(KEY) == b"rotated-old"
    await cli.replace_all_credentials({KEY: b"rotated-new"})
    assert await serve.get_credential(KEY) == b"rotated-new"


async def test_a_token_revoked_elsewhere_fails_the_very_next_check(serve: SQLiteStore, cli: SQLiteStore) -> None:
    await cli.put_token(_token("t1", "h1"))
    found = await serve.find_token("h1")
    assert found is not None and not found.revoked
    assert await serve.find_token("h1") == found  # cached
    assert await cli.revoke_token("t1")
    revoked = await serve.find_token("h1")
    assert revoked is not None and revoked.revoked


async def test_any_writer_moves_the_counter(serve: SQLiteStore, path: Path) -> None:
    """The triggers live in the schema: a writer that knows nothing of the cache still invalidates it."""
    _raw(path, "INSERT INTO credential VALUES ('github', '*', 'default', ?)", (b"raw",))
    assert await serve.get_credential(KEY) == b"raw"
    _raw(path, "UPDATE credential SET sealed = ?", (b"raw-2",))
    assert await serve.get_credential(KEY) == b"raw-2"
    _raw(path, "DELETE FROM credential")
    assert await serve.get_credential(KEY) is None

    _raw(path, "INSERT INTO token VALUES ('t9', 'bot', 'h9', '2026-01-01T00:00:00.000000Z', 0)")
    assert (await serve.find_token("h9")) is not None
    _raw(path, "UPDATE token SET revoked = 1 WHERE id = 't9'")
    assert (await serve.find_token("h9")).revoked  # type: ignore[union-attr]
    _raw(path, "DELETE FROM token")
    assert await serve.find_token("h9") is None


async def test_only_credential_and_token_writes_move_the_counter(serve: SQLiteStore, path: Path) -> None:
    start = _generation(path)
    await serve.append_audit(_audit(1))
    await serve.set_meta("k", "v")
    assert await serve.revoke_token("unknown") is False  # no row changed, no bump
    assert _generation(path) == start
    await serve.put_credential(KEY, b"x")
    await serve.put_token(_token("t1", "h1"))
    await serve.revoke_token("t1")
    assert _generation(path) == start + 3


async def test_writes_elsewhere_between_inline_audit_rows_are_seen(
    serve: SQLiteStore, cli: SQLiteStore, path: Path
) -> None:
    """The counter is read on the connection that writes the audit rows inline (``GenerationProbe``, borrowed):
    its own commits keep its page cache, another writer's must still reach the next lookup."""
    await serve.put_credential(KEY, b"v1")
    for round_ in range(3):
        assert serve.append_audits_now([_audit(round_)])
        assert await serve.get_credential(KEY) == f"v{round_ + 1}".encode()
        assert serve.append_audits_now([_audit(round_ + 10)])
        if round_ == 0:
            await cli.put_credential(KEY, b"v2")
        else:
            _raw(path, "UPDATE credential SET sealed = ?", (f"v{round_ + 2}".encode(),))
    assert await serve.get_credential(KEY) == b"v4"


def _read_syscalls() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("syscr:"):
            return int(line.split()[1])
    raise AssertionError("no syscr in /proc/self/io")


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's per-process I/O counters")
async def test_a_cached_lookup_after_an_inline_audit_row_reads_nothing_from_the_file(serve: SQLiteStore) -> None:
    """A call writes its audit rows, then the next call's lookup reads the counter: on the audit
    connection that is served from its page cache; a connection of its own re-read three pages
    from the file each time (~150 reads here)."""
    await serve.put_credential(KEY, b"v1")
    assert await serve.get_credential(KEY) == b"v1"
    calls = 50
    before = _read_syscalls()
    for i in range(calls):
        assert serve.append_audits_now([_audit(i)])
        assert await serve.get_credential(KEY) == b"v1"
    assert _read_syscalls() - before < calls // 2


async def test_closing_the_store_closes_the_borrowed_connection_once(path: Path) -> None:
    store = SQLiteStore(path)
    for _ in range(2):  # open again after close: a new audit connection, a new probe on it
        await store.open()
        await store.put_credential(KEY, b"v1")
        assert store.append_audits_now([_audit(1)])
        assert await store.get_credential(KEY) == b"v1"
        await store.close()


# -- what is never cached --------------------------------------------------------------------------


async def test_unknown_tokens_are_not_remembered(serve: SQLiteStore) -> None:
    for i in range(100):
        assert await serve.find_token(f"guess-{i}") is None
    assert serve._access.tokens == {}


async def test_an_unreadable_counter_bypasses_the_cache(serve: SQLiteStore, path: Path) -> None:
    await serve.put_credential(KEY, b"v1")
    serve._access = AccessCache(lambda: None)  # as when the read-only connection cannot answer
    assert await serve.get_credential(KEY) == b"v1"
    assert serve._access.credentials == {}
    _raw(path, "DROP TRIGGER credential_update_bumps_access")
    _raw(path, "UPDATE credential SET sealed = ?", (b"v2",))
    assert await serve.get_credential(KEY) == b"v2"  # read from the file every time


async def test_the_maps_are_capped(serve: SQLiteStore) -> None:
    for i in range(MAX_ENTRIES + 5):
        await serve.get_credential(CredentialKey(connector="c", principal=f"p{i}"))
    assert 0 < len(serve._access.credentials) <= MAX_ENTRIES


# -- AccessCache on its own: reads racing writes ------------------------------------------------------


def test_a_read_that_raced_a_local_write_is_not_kept() -> None:
    cache = AccessCache(lambda: 7)
    ticket = cache.ticket()
    cache.invalidate()  # a write in this process finished while the read was in flight
    cache.keep_credential(ticket, KEY, b"maybe stale")
    assert cache.credentials == {}
    cache.keep_credential(cache.ticket(), KEY, b"fresh")
    assert cache.credentials == {KEY: b"fresh"}


def test_a_read_under_an_older_counter_is_not_kept() -> None:
    generation = [1]
    cache = AccessCache(lambda: generation[0])
    old = cache.ticket()
    generation[0] = 2
    cache.ticket()  # another lookup saw the counter move
    cache.keep_token(old, _token("t1", "h1"))
    assert cache.tokens == {}


def test_the_counter_moving_drops_everything() -> None:
    generation = [1]
    cache = AccessCache(lambda: generation[0])
    cache.keep_credential(cache.ticket(), KEY, b"x")
    cache.keep_token(cache.ticket(), _token("t1", "h1"))
    assert cache.ticket() is not None and cache.credentials and cache.tokens
    generation[0] = 2
    assert cache.ticket() == (2, 0)
    assert cache.credentials == {} and cache.tokens == {}


# -- batched audit rows ------------------------------------------------------------------------------


def _audit(i: int, *, user: str | None = "alice") -> AuditRecord:
    data = {
        "at": T0,
        "user": user,
        "agent": None,
        "requested": f"github.op_{i}",
        "connector": "github",
        "action": f"github.op_{i}",
        "args_preview": "{}",
        "fingerprint": None,
        "verdict": "always_run",
        "verdict_source": "risk_default",
        "status": "ok",
        "latency_ms": float(i),
    }
    # model_construct skips validation: a NOT NULL column left empty makes the database refuse the row.
    return AuditRecord(**data) if user is not None else AuditRecord.model_construct(**data)


@pytest.mark.parametrize("rows", [1, 64, 65, 300])
async def test_append_audits_writes_every_row_in_order(serve: SQLiteStore, rows: int) -> None:
    batch = [_audit(i) for i in range(rows)]
    await serve.append_audits(batch)
    assert await serve.list_audit(limit=1000) == batch[::-1]


@pytest.mark.parametrize("rows", [3, 100])
async def test_append_audits_is_all_or_none(serve: SQLiteStore, rows: int) -> None:
    batch = [_audit(i) for i in range(rows)]
    batch[rows // 2] = _audit(999, user=None)
    with pytest.raises(sqlite3.IntegrityError):
        await serve.append_audits(batch)
    assert await serve.list_audit() == []
    await serve.append_audits([])
    assert await serve.list_audit() == []
