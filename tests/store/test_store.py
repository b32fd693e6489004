"""Contract tests for every ``Store`` implementation, then SQLite-specific behaviour.

The contract half runs against each backend in ``store_factory``'s params: SQLite, PostgreSQL and
the in-memory fake. A factory makes new store instances over one shared database (for the fake,
one shared ``MemoryData``), so "two instances" stands for two gateway processes.
"""

from __future__ import annotations

import inspect
import logging
import os
import random
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Protocol

import anyio
import pytest

from mcp_gateway.primitives.secrets import CredentialKey
from mcp_gateway.store import (
    ApprovalRecord,
    ApprovalStatus,
    AuditRecord,
    CatalogRecord,
    ConnectorState,
    LinkRecord,
    MemoryStore,
    OperatorTokenRecord,
    SQLiteStore,
    Store,
    TokenRecord,
)
from mcp_gateway.store import _sqlite_schema as sqlite_schema
from mcp_gateway.store import sqlite as sqlite_module
from mcp_gateway.store.memory import MemoryData
from mcp_gateway.vocabulary.errors import GatewayError
from mcp_gateway.vocabulary.model import Action, HttpBinding, OpenAPIBinding, ParamSpec
from tests.support.protocols import protocol_methods

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)
StoreFactory = Callable[[], Store]


@pytest.fixture
def anyio_backend() -> str:
    # aiosqlite hands results back through asyncio futures, so it runs on asyncio only.
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Makes new, unopened store instances that all share one database."""
    if request.param == "memory":
        data = MemoryData()
        return lambda: MemoryStore(data)
    if request.param == "sqlite":
        path = tmp_path / "gateway.db"
        return lambda: SQLiteStore(path)
    if request.param == "postgres":
        # A fresh database of the session's throwaway cluster (tests/support/postgres.py).
        url = request.getfixturevalue("postgres_url")
        from mcp_gateway.store.postgres import PostgresStore

        return lambda: PostgresStore(url)
    raise AssertionError(f"unknown store backend {request.param}")


@pytest.fixture
async def store(store_factory: StoreFactory) -> AsyncIterator[Store]:
    s = store_factory()
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def second(store: Store, store_factory: StoreFactory) -> AsyncIterator[Store]:
    """Another instance over the same database, opened after ``store``: another gateway process."""
    s = store_factory()
    await s.open()
    try:
        yield s
    finally:
        await s.close()


def _assert_utc(value: datetime | None) -> None:
    assert value is not None and value.tzinfo is not None and value.utcoffset() == timedelta(0)


# -- records --------------------------------------------------------------------------------------


def _action(i: int, connector: str = "github") -> Action:
    return Action(
        connector=connector,
        path=f"issues.get_{i}",
        summary=f"Get issue {i}",
        description="Gets one issue. Ünïcode ✓",
        input_schema={
            "type": "object",
            "properties": {"owner": {"type": "string"}, "number": {"type": "integer", "minimum": 1}},
            "required": ["owner", "number"],
        },
        risk="read",
        binding=OpenAPIBinding(
            method="GET",
            url="/repos/{owner}/issues/{number}",
            params=(ParamSpec(name="owner", location="path"), ParamSpec(name="number", location="path")),
            operation_id=f"issues/get-{i}",
        ),
    )


def _token(id: str, token_hash: str, at: datetime = T0) -> TokenRecord:
    return TokenRecord(id=id, agent="ci-bot", token_hash=token_hash, created_at=at)


def _link(token_hash: str = "h1", *, ttl: timedelta = timedelta(minutes=10)) -> LinkRecord:
    return LinkRecord(
        token_hash=token_hash,
        kind="secret",
        connector="github",
        principal="alice",
        secret_name="pat",
        created_at=T0,
        expires_at=T0 + ttl,
    )


def _approval(id: str = "ap1", *, at: datetime = T0, status: ApprovalStatus = "pending") -> ApprovalRecord:
    return ApprovalRecord(
        id=id,
        fingerprint=f"fp-{id}",
        principal="alice",
        agent="ci-bot",
        tool="github.issues.delete",
        risk="destructive",
        summary="DELETE /repos/acme/widgets/issues/7",
        verdict_source="risk_default",
        verdict_rule=None,
        status=status,
        created_at=at,
        expires_at=at + timedelta(minutes=15),
    )


def _audit(i: int, at: datetime) -> AuditRecord:
    return AuditRecord(
        at=at,
        user="alice",
        agent="ci-bot" if i % 2 else None,
        requested=f"github.issues.get_{i}",
        connector="github",
        action=f"issues.get_{i}",
        args_preview='{"owner": "acme"}',
        fingerprint=f"fp{i}",
        verdict="always_run",
        verdict_source="risk_default",
        status="ok",
        reason=None,
        upstream_status=200 if i % 2 else None,
        latency_ms=1.5 + i,
    )


# -- lifecycle -----------------------------------------------------------------------------------


async def test_open_and_close_are_idempotent(store_factory: StoreFactory) -> None:
    s = store_factory()
    await s.open()
    await s.open()
    await s.set_meta("k", 1)
    await s.close()
    await s.close()
    await s.open()  # a closed store may be opened again
    assert await s.get_meta("k") == 1
    await s.close()


async def test_data_survives_reopen(store_factory: StoreFactory) -> None:
    s = store_factory()
    await s.open()
    await s.put_credential(CredentialKey(connector="github", principal="*"), b"\x00sealed")
    await s.put_catalog(CatalogRecord(slug="github", fingerprint="fp", actions=[_action(1)]))
    await s.close()

    again = store_factory()
    await again.open()
    try:
        assert await again.get_credential(CredentialKey(connector="github", principal="*")) == b"\x00sealed"
        catalog = await again.get_catalog("github")
        assert catalog is not None and catalog.actions == [_action(1)]
    finally:
        await again.close()


# -- catalog -------------------------------------------------------------------------------------


async def test_catalog_round_trip(store: Store) -> None:
    assert await store.get_catalog("github") is None
    actions = [
        _action(1),
        Action(
            connector="github",
            path="notes.add",
            input_schema={"type": "object", "properties": {"body": {"type": "string"}}},
            binding=HttpBinding(
                method="POST", url="/notes", body="form", params=(ParamSpec(name="body", location="body"),)
            ),
        ),
    ]
    record = CatalogRecord(
        slug="github",
        fingerprint="sha256:abc",
        actions=actions,
        files=["/specs/github.json", "/specs/common.yaml"],
        base_url="https://api.github.com",
    )
    await store.put_catalog(record)
    assert await store.get_catalog("github") == record


async def test_catalog_put_replaces_and_delete_removes(store: Store) -> None:
    await store.put_catalog(CatalogRecord(slug="github", fingerprint="v1", actions=[_action(1)], files=["a"]))
    await store.put_catalog(CatalogRecord(slug="stripe", fingerprint="s1", actions=[]))
    await store.put_catalog(CatalogRecord(slug="github", fingerprint="v2", actions=[_action(2), _action(3)]))

    github = await store.get_catalog("github")
    assert github is not None
    assert (github.fingerprint, github.files, github.base_url) == ("v2", [], None)
    assert github.actions == [_action(2), _action(3)]

    await store.delete_catalog("github")
    await store.delete_catalog("never-stored")  # deleting nothing is not an error
    assert await store.get_catalog("github") is None
    stripe = await store.get_catalog("stripe")
    assert stripe is not None and stripe.actions == []


async def test_connector_states(store: Store) -> None:
    assert await store.list_connector_states() == []
    ready = ConnectorState(slug="stripe", source="openapi:specs/stripe.json", status="ready", actions=12, synced_at=T0)
    broken = ConnectorState(
        slug="github", source="openapi:specs/github.json", status="error", actions=0, error="bad spec", synced_at=T0
    )
    await store.put_connector_state(ready)
    await store.put_connector_state(broken)
    fixed = broken.model_copy(update={"status": "ready", "actions": 1200, "error": None, "synced_at": T0 + DAY})
    await store.put_connector_state(fixed)

    states = await store.list_connector_states()
    assert states == [fixed, ready]  # by slug, the second put replaced the first
    _assert_utc(states[0].synced_at)


async def test_action_reviews(store: Store) -> None:
    from mcp_gateway.store.contract import ActionReviewRecord

    assert await store.list_action_reviews() == []
    versions = [await store.action_reviews_version()]
    first = ActionReviewRecord(
        name="lab.echo",
        fingerprint="a" * 64,
        decision="approved",
        snapshot='{"name":"lab.echo"}',
        decided_at=T0,
        decided_by="operator",
    )
    later = first.model_copy(update={"fingerprint": "b" * 64, "decision": "denied", "decided_at": T0 + DAY})
    await store.put_action_review(later)
    versions.append(await store.action_reviews_version())
    await store.put_action_review(first)
    versions.append(await store.action_reviews_version())
    assert await store.list_action_reviews() == [first, later]  # oldest first
    assert await store.action_reviews_version() == versions[-1]  # reading changes nothing
    redecided = later.model_copy(update={"decision": "approved", "decided_at": T0 + 2 * DAY, "decided_by": "cli"})
    await store.put_action_review(redecided)  # same (name, fingerprint): replaced
    versions.append(await store.action_reviews_version())
    reviews = await store.list_action_reviews()
    assert reviews == [first, redecided]
    assert len(set(versions)) == 4  # every decision moved the version, the replacing one included
    _assert_utc(reviews[1].decided_at)


# -- credentials ----------------------------------------------------------------------------------

SEALED = bytes(range(256)) + b"\x00\x00" + bytes(range(255, -1, -1))  # every byte value, NULs included


async def test_credential_bytes_round_trip_exactly(store: Store) -> None:
    key = CredentialKey(connector="github", principal="*")
    assert await store.get_credential(key) is None
    await store.put_credential(key, SEALED)
    got = await store.get_credential(key)
    assert type(got) is bytes and got == SEALED


async def test_credentials_are_keyed_by_connector_principal_and_name(store: Store) -> None:
    project = CredentialKey(connector="github", principal="*")
    alice = CredentialKey(connector="github", principal="alice")
    alice_app = CredentialKey(connector="github", principal="alice", name="app")
    stripe = CredentialKey(connector="stripe", principal="*")
    for i, key in enumerate([stripe, alice_app, project, alice]):
        await store.put_credential(key, bytes([i]) * 8)
    await store.put_credential(alice, b"rotated")  # overwrite

    assert await store.list_credentials() == [project, alice_app, alice, stripe]  # sorted by key
    assert await store.get_credential(alice) == b"rotated"
    assert await store.get_credential(alice_app) == b"\x01" * 8

    await store.delete_credential(alice)
    await store.delete_credential(alice)  # deleting nothing is not an error
    assert await store.get_credential(alice) is None
    assert await store.list_credentials() == [project, alice_app, stripe]


async def test_replace_all_credentials(store: Store) -> None:
    old = CredentialKey(connector="old", principal="*")
    kept = CredentialKey(connector="github", principal="*")
    await store.put_credential(old, b"old")
    await store.put_credential(kept, b"under-old-key")

    new = CredentialKey(connector="stripe", principal="bob", name="live")
    await store.replace_all_credentials({kept: b"under-new-key", new: SEALED})
    assert await store.list_credentials() == [kept, new]
    assert await store.get_credential(kept) == b"under-new-key"
    assert await store.get_credential(new) == SEALED
    assert await store.get_credential(old) is None

    await store.replace_all_credentials({})
    assert await store.list_credentials() == []


# -- tokens --------------------------------------------------------------------------------------------


async def test_tokens(store: Store) -> None:
    assert await store.find_token("nope") is None
    first = _token("t1", "hash1", T0)
    second = _token("t2", "hash2", T0 + timedelta(seconds=1))
    await store.put_token(second)
    await store.put_token(first)

    assert await store.find_token("hash1") == first
    assert await store.list_tokens() == [first, second]  # oldest first
    _assert_utc((await store.list_tokens())[0].created_at)

    assert await store.revoke_token("t1") is True
    assert await store.revoke_token("t1") is False  # already revoked: nothing changed
    assert await store.revoke_token("unknown") is False
    revoked = await store.find_token("hash1")  # still found: the caller checks `revoked`
    assert revoked is not None and revoked.revoked is True
    still = await store.find_token("hash2")
    assert still is not None and still.revoked is False


async def test_operator_tokens(store: Store) -> None:
    assert await store.list_operator_tokens() == []
    assert await store.find_operator_token("nope") is None
    first = OperatorTokenRecord(id="o1", token_hash="ohash1", created_at=T0)
    second = OperatorTokenRecord(id="o2", token_hash="ohash2", created_at=T0 + timedelta(seconds=1))
    assert await store.add_operator_token(second) is True
    assert await store.add_operator_token(first) is True
    assert await store.list_operator_tokens() == [first, second]  # oldest first
    _assert_utc((await store.list_operator_tokens())[0].created_at)
    assert await store.find_operator_token("ohash2") == second
    assert await store.get_operator_token("o1") == first
    assert await store.get_operator_token("unknown") is None

    assert await store.revoke_operator_token("o1") is True
    assert await store.revoke_operator_token("o1") is False  # already revoked: nothing changed
    assert await store.revoke_operator_token("unknown") is False
    revoked = await store.find_operator_token("ohash1")  # still found: the caller checks `revoked`
    assert revoked is not None and revoked.revoked is True

    # Adding never overwrites: not a revoked token (an import run twice), not another token's hash.
    assert await store.add_operator_token(first) is False
    assert await store.add_operator_token(OperatorTokenRecord(id="o3", token_hash="ohash2", created_at=T0)) is False
    again = await store.get_operator_token("o1")
    assert again is not None and again.revoked is True
    assert [t.id for t in await store.list_operator_tokens()] == ["o1", "o2"]


async def test_operator_token_writes_across_instances_are_not_lost(store: Store, second: Store) -> None:
    """Row per token, revoke by compare-and-set: interleaved creates and revokes from two instances all land."""
    tokens = [OperatorTokenRecord(id=f"o{i}", token_hash=f"h{i}", created_at=T0) for i in range(20)]
    async with anyio.create_task_group() as tg:
        for i, token in enumerate(tokens):
            tg.start_soon((store if i % 2 else second).add_operator_token, token)
    assert {t.id for t in await store.list_operator_tokens()} == {t.id for t in tokens}

    wins: list[bool] = []

    async def revoke(s: Store, token_id: str) -> None:
        wins.append(await s.revoke_operator_token(token_id))

    async with anyio.create_task_group() as tg:
        for token in tokens[:10]:
            tg.start_soon(revoke, store, token.id)
            tg.start_soon(revoke, second, token.id)
    assert sorted(wins) == [False] * 10 + [True] * 10  # one winner per token
    listed = await second.list_operator_tokens()
    assert sorted(t.id for t in listed if t.revoked) == sorted(t.id for t in tokens[:10])


# -- links -----------------------------------------------------------------------------------------------


async def test_link_round_trip(store: Store) -> None:
    assert await store.get_link("h1") is None
    link = LinkRecord(
        token_hash="h1",
        kind="approval",
        connector="github",
        principal="alice",
        approval_id="ap1",
        created_at=T0,
        expires_at=T0 + timedelta(minutes=5),
    )
    await store.put_link(link)
    got = await store.get_link("h1")
    assert got == link and got is not None and got.secret_name == "default" and got.used_at is None
    _assert_utc(got.expires_at)


async def test_consume_link_once(store: Store) -> None:
    await store.put_link(_link("h1"))
    now = T0 + timedelta(minutes=1)
    used = await store.consume_link("h1", now)
    assert used is not None and used.used_at == now and used.token_hash == "h1"
    _assert_utc(used.used_at)
    assert await store.consume_link("h1", now) is None
    stored = await store.get_link("h1")
    assert stored is not None and stored.used_at == now
    assert await store.consume_link("unknown", now) is None


async def test_release_link_gives_back_only_its_own_consumption(store: Store) -> None:
    await store.put_link(_link("h1"))
    now = T0 + timedelta(minutes=1)
    assert not await store.release_link("h1", now)  # unused: nothing to give back
    assert await store.consume_link("h1", now) is not None
    assert not await store.release_link("h1", now + timedelta(microseconds=1))  # another consumer's instant
    assert not await store.release_link("unknown", now)
    assert await store.release_link("h1", now)
    stored = await store.get_link("h1")
    assert stored is not None and stored.used_at is None
    assert await store.consume_link("h1", now + timedelta(seconds=1)) is not None


async def test_consume_link_refuses_expired(store: Store) -> None:
    await store.put_link(_link("h1", ttl=timedelta(minutes=10)))
    assert await store.consume_link("h1", T0 + timedelta(minutes=10)) is None  # expiry instant is expired
    assert await store.consume_link("h1", T0 + timedelta(hours=1)) is None
    stored = await store.get_link("h1")
    assert stored is not None and stored.used_at is None
    # Microsecond precision survives, so the instant just before expiry still works.
    assert await store.consume_link("h1", T0 + timedelta(minutes=10) - timedelta(microseconds=1)) is not None


async def test_consume_link_compares_instants_not_offsets(store: Store) -> None:
    await store.put_link(_link("h1", ttl=timedelta(minutes=10)))
    # 13:05+02:00 is 11:05 UTC, before the link even exists at 12:00 UTC -> well within expiry.
    plus_two = datetime(2026, 1, 1, 13, 5, tzinfo=timezone(timedelta(hours=2)))
    used = await store.consume_link("h1", plus_two)
    assert used is not None and used.used_at == plus_two
    _assert_utc(used.used_at)


async def test_concurrent_consumers_have_one_winner(store: Store) -> None:
    await store.put_link(_link("h1"))
    results: list[LinkRecord | None] = []

    async def consume() -> None:
        results.append(await store.consume_link("h1", T0 + timedelta(seconds=5)))

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(consume)
    assert len(results) == 20
    assert sum(r is not None for r in results) == 1


async def test_concurrent_consumers_across_instances_have_one_winner(store: Store, second: Store) -> None:
    await store.put_link(_link("h1"))
    results: list[LinkRecord | None] = []

    async def consume(s: Store) -> None:
        results.append(await s.consume_link("h1", T0 + timedelta(seconds=5)))

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(consume, store if i % 2 else second)
    assert sum(r is not None for r in results) == 1


# -- approvals --------------------------------------------------------------------------------------------


async def test_approval_round_trip(store: Store) -> None:
    assert await store.get_approval("ap1") is None
    approval = _approval("ap1").model_copy(update={"agent": None, "verdict_rule": "github.issues.*"})
    await store.put_approval(approval)
    got = await store.get_approval("ap1")
    assert got == approval
    assert got is not None and got.decided_at is None
    _assert_utc(got.created_at)


async def test_transition_approval_is_compare_and_set(store: Store) -> None:
    await store.put_approval(_approval("ap1"))
    decided = T0 + timedelta(minutes=1)
    assert await store.transition_approval("ap1", "approved", "consumed", decided) is False  # not approved yet
    assert await store.transition_approval("ap1", "pending", "approved", decided) is True
    assert await store.transition_approval("ap1", "pending", "denied", decided) is False  # lost the race
    assert await store.transition_approval("missing", "pending", "approved", decided) is False

    assert await store.transition_approval("ap1", "approved", "consumed", decided + timedelta(minutes=1)) is True
    got = await store.get_approval("ap1")
    assert got is not None and got.status == "consumed"
    assert got.decided_at == decided  # the human's decision time, not the consumption's
    _assert_utc(got.decided_at)


async def test_an_approval_keeps_who_decided_it_and_whether_the_requester_could(store: Store) -> None:
    await store.put_approval(_approval("ap1").model_copy(update={"separate_approver": True}))
    decided = T0 + timedelta(minutes=1)
    assert await store.transition_approval("ap1", "pending", "approved", decided, by="bob") is True
    assert await store.transition_approval("ap1", "approved", "consumed", decided + timedelta(minutes=1)) is True
    got = await store.get_approval("ap1")
    assert got is not None and got.separate_approver and got.decided_by == "bob"  # the decider, not the consumer
    await store.put_approval(_approval("ap2"))
    plain = await store.get_approval("ap2")
    assert plain is not None and not plain.separate_approver and plain.decided_by is None


async def test_an_approval_keeps_what_the_page_shows_and_its_kind(store: Store) -> None:
    shown = {"does": "Send money \u202e to someone", "calls": "POST https://api.example.com/payments?x=1"}
    await store.put_approval(_approval("ap1").model_copy(update={**shown, "kind": "credential"}))
    got = await store.get_approval("ap1")
    assert got is not None and (got.does, got.calls, got.kind) == (shown["does"], shown["calls"], "credential")
    await store.put_approval(_approval("ap2"))
    plain = await store.get_approval("ap2")
    assert plain is not None and (plain.does, plain.calls, plain.kind) == ("", "", "call")


async def test_concurrent_deciders_have_one_winner(store: Store, second: Store) -> None:
    await store.put_approval(_approval("ap1"))
    wins: list[ApprovalStatus] = []

    async def decide(s: Store, to: ApprovalStatus) -> None:
        if await s.transition_approval("ap1", "pending", to, T0 + timedelta(seconds=1)):
            wins.append(to)

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(decide, (store, second)[i % 2], "approved" if i % 4 < 2 else "denied")
    assert len(wins) == 1
    got = await store.get_approval("ap1")
    assert got is not None and got.status == wins[0]


async def test_list_approvals(store: Store) -> None:
    assert await store.list_approvals() == []
    a = _approval("a", at=T0 + timedelta(seconds=2))
    b = _approval("b", at=T0)
    c = _approval("c", at=T0 + timedelta(seconds=1))
    for record in (a, b, c):
        await store.put_approval(record)
    await store.transition_approval("c", "pending", "denied", T0 + timedelta(seconds=3))

    assert [r.id for r in await store.list_approvals()] == ["b", "c", "a"]  # oldest first
    assert [r.id for r in await store.list_approvals("pending")] == ["b", "a"]
    assert [r.id for r in await store.list_approvals("denied")] == ["c"]
    assert await store.list_approvals("expired") == []


# -- audit ---------------------------------------------------------------------------------------------------


async def test_audit_newest_first(store: Store) -> None:
    assert await store.list_audit() == []
    rows = [_audit(i, T0 + timedelta(seconds=i)) for i in range(5)]
    # Appended out of time order: a slow call may be recorded after a later, faster one.
    for i in (0, 2, 1, 4, 3):
        await store.append_audit(rows[i])

    assert await store.list_audit() == rows[::-1]
    assert await store.list_audit(limit=2) == [rows[4], rows[3]]
    assert await store.list_audit(limit=0) == []
    _assert_utc((await store.list_audit(limit=1))[0].at)


async def test_audit_is_append_only(store: Store) -> None:
    row = _audit(1, T0)
    await store.append_audit(row)
    await store.append_audit(row)  # an identical second decision is a second row
    assert await store.list_audit() == [row, row]


async def test_audit_started_row_is_replaced_by_its_outcome(store: Store) -> None:
    started = _audit(1, T0).model_copy(update={"status": "started", "call_id": "c1", "upstream_status": None})
    other = _audit(2, T0 + timedelta(seconds=1))
    await store.append_audit(started)
    await store.append_audits([other])
    assert await store.list_audit() == [other, started]
    done = _audit(1, T0 + timedelta(seconds=2)).model_copy(update={"call_id": "c1"})
    await store.append_audits([done, _audit(3, T0 + timedelta(seconds=3))])
    rows = await store.list_audit()
    assert [r.call_id for r in rows] == [None, "c1", None]  # one row per call, not two
    assert rows[1] == done


async def test_audit_started_rows_are_interrupted(store: Store) -> None:
    a = _audit(1, T0).model_copy(update={"status": "started", "call_id": "a"})
    b = _audit(2, T0 + timedelta(seconds=1)).model_copy(update={"status": "started", "call_id": "b"})
    await store.append_audits([a, b, _audit(3, T0 + timedelta(seconds=2))])
    await store.append_audit(_audit(2, T0 + timedelta(seconds=3)).model_copy(update={"call_id": "b"}))
    assert await store.interrupt_started_audits() == 1
    assert await store.interrupt_started_audits() == 0
    statuses = {r.call_id: r.status for r in await store.list_audit()}
    assert statuses == {"a": "interrupted", "b": "ok", None: "ok"}
    # An outcome that arrives late (another instance's call) still wins over "interrupted".
    await store.append_audit(_audit(1, T0 + timedelta(seconds=4)).model_copy(update={"call_id": "a"}))
    assert {r.call_id: r.status for r in await store.list_audit()}["a"] == "ok"


async def test_audit_started_rows_in_keep_are_not_interrupted(store: Store) -> None:
    a = _audit(1, T0).model_copy(update={"status": "started", "call_id": "a"})
    b = _audit(2, T0).model_copy(update={"status": "started", "call_id": "b"})
    await store.append_audits([a, b])
    assert await store.interrupt_started_audits(keep={"b", "elsewhere"}) == 1
    assert {r.call_id: r.status for r in await store.list_audit()} == {"a": "interrupted", "b": "started"}


async def test_a_start_leaves_alone_the_calls_a_running_instance_has_in_flight(
    store: Store, store_factory: StoreFactory
) -> None:
    # Two gateways on one database (two stdio sessions on one state folder, two hosts on one
    # PostgreSQL): the one starting marked the other's running calls interrupted.
    if isinstance(store, MemoryStore):  # one process's memory: a start finds no other instance's calls
        assert getattr(store, "instance", None) is None
        await store.append_audits([_audit(1, T0).model_copy(update={"status": "started", "call_id": "c1"})])
        assert await store.interrupt_started_audits() == 1
        return
    running = getattr(store, "instance", None)
    assert running is not None and len(running) == 8
    mine = _audit(1, T0).model_copy(update={"status": "started", "call_id": running + "0" * 24})
    left = _audit(2, T0).model_copy(update={"status": "started", "call_id": "7" * 32})  # a dead instance's
    legacy = _audit(3, T0).model_copy(update={"status": "started", "call_id": "c1"})  # an older build's
    await store.append_audits([mine, left, legacy])
    starting = store_factory()
    await starting.open()
    try:
        assert getattr(starting, "instance", None) not in (None, running)
        assert await starting.interrupt_started_audits() == 2
        statuses = {r.call_id: r.status for r in await starting.list_audit()}
        assert statuses == {mine.call_id: "started", left.call_id: "interrupted", "c1": "interrupted"}
        await store.close()  # the running gateway stops (or dies) without the call's outcome
        assert await starting.interrupt_started_audits() == 1
        assert {r.call_id: r.status for r in await starting.list_audit()}[mine.call_id] == "interrupted"
    finally:
        await starting.close()


async def test_audit_replay_adds_each_outcome_once_and_settles_its_call(store: Store) -> None:
    at = T0 + timedelta(microseconds=123457)  # the instant survives each backend's storage exactly
    interrupted = _audit(1, T0).model_copy(update={"status": "started", "call_id": "c1"})
    running = _audit(2, T0).model_copy(update={"status": "started", "call_id": "c2"})
    await store.append_audits([interrupted, running])
    assert await store.interrupt_started_audits() == 2
    done = _audit(1, at).model_copy(update={"call_id": "c1"})
    denied = _audit(3, at).model_copy(update={"status": "denied", "reason": "policy_block"})  # no call_id
    committed = _audit(2, at).model_copy(update={"call_id": "c2"})
    await store.append_audit(committed)  # its commit was lost on the way back: journaled anyway
    assert await store.replay_audits([done, denied, committed]) == 2
    assert await store.replay_audits([done, denied, committed]) == 0  # a second replay adds nothing
    rows = await store.list_audit()
    assert sorted((r.call_id or "", r.status) for r in rows) == [("", "denied"), ("c1", "ok"), ("c2", "ok")]
    assert next(r for r in rows if r.call_id == "c1") == done
    # The same call at another instant, or another user's row at the same one, is a row of its own.
    assert await store.replay_audits([done.model_copy(update={"at": at + timedelta(microseconds=1)})]) == 1
    assert await store.replay_audits([denied.model_copy(update={"user": "bob"})]) == 1
    assert await store.replay_audits([]) == 0


async def test_audit_replay_of_a_started_row_opens_its_call_only_while_no_outcome_came(store: Store) -> None:
    # A started row the store refused was journaled: the process may have died before the outcome.
    lost = _audit(1, T0).model_copy(update={"status": "started", "call_id": "lost"})
    finished = _audit(2, T0).model_copy(update={"status": "started", "call_id": "done"})
    await store.append_audit(_audit(2, T0 + timedelta(seconds=1)).model_copy(update={"call_id": "done"}))
    assert await store.replay_audits([lost, finished]) == 0  # no outcome appended
    assert {r.call_id: r.status for r in await store.list_audit()} == {"lost": "started", "done": "ok"}
    assert await store.interrupt_started_audits() == 1  # the lost one only: a finished call never is
    assert await store.replay_audits([lost]) == 0  # again: the row marked interrupted stays so
    assert {r.call_id: r.status for r in await store.list_audit()} == {"lost": "interrupted", "done": "ok"}
    with pytest.raises(ValueError, match="call_id"):
        await store.replay_audits([lost.model_copy(update={"call_id": None})])


async def test_audit_batch_holding_a_call_start_and_outcome_leaves_one_row(store: Store) -> None:
    # The queued writer's batch (durable off) can hold a call's ``started`` row and its outcome.
    started = _audit(1, T0).model_copy(update={"status": "started", "call_id": "c1", "upstream_status": None})
    done = _audit(1, T0 + timedelta(seconds=2)).model_copy(update={"call_id": "c1"})
    other = _audit(2, T0 + timedelta(seconds=1)).model_copy(update={"status": "started", "call_id": "c2"})
    await store.append_audits([started, other, done])
    assert await store.list_audit() == [done, other]
    assert await store.interrupt_started_audits() == 1  # c2 only: c1 is settled
    assert [(r.call_id, r.status) for r in await store.list_audit()] == [("c1", "ok"), ("c2", "interrupted")]


async def test_audit_lists_calls_in_flight_among_the_finished_ones(store: Store) -> None:
    rows = [_audit(i, T0 + timedelta(seconds=i)) for i in range(4)]
    running = _audit(9, T0 + timedelta(seconds=2)).model_copy(update={"status": "started", "call_id": "r"})
    await store.append_audits(rows)
    await store.append_audit(running)
    assert await store.list_audit() == [rows[3], running, rows[2], rows[1], rows[0]]  # equal times: open first
    assert await store.list_audit(limit=2) == [rows[3], running]
    assert await store.list_audit(limit=0) == []


async def test_audit_refuses_a_started_row_without_call_id(store: Store) -> None:
    orphan = _audit(1, T0).model_copy(update={"status": "started"})
    with pytest.raises(ValueError, match="call_id"):
        await store.append_audits([_audit(2, T0), orphan])
    assert await store.list_audit() == []  # all or none


# -- short-lived shared state --------------------------------------------------------------------------------


async def test_ephemeral_round_trip_and_kinds(store: Store) -> None:
    later = T0 + timedelta(minutes=10)
    assert await store.get_ephemeral("session", "k", T0) is None
    assert await store.put_ephemeral("session", "k", SEALED, later, T0) is True
    assert await store.put_ephemeral("oauth2_state", "k", b"other kind", later, T0) is True  # kinds are apart
    got = await store.get_ephemeral("session", "k", T0 + timedelta(minutes=9))
    assert type(got) is bytes and got == SEALED
    assert await store.get_ephemeral("session", "k", later) is None  # the expiry instant is expired
    assert await store.get_ephemeral("oauth2_state", "k", T0) == b"other kind"

    await store.delete_ephemeral("session", "k")
    await store.delete_ephemeral("session", "k")  # deleting nothing is not an error
    assert await store.get_ephemeral("session", "k", T0) is None
    assert await store.get_ephemeral("oauth2_state", "k", T0) == b"other kind"


async def test_put_ephemeral_claims_once_until_expiry(store: Store) -> None:
    later = T0 + timedelta(minutes=1)
    assert await store.put_ephemeral("nonce", "n1", b"", later, T0) is True
    assert await store.put_ephemeral("nonce", "n1", b"again", later, T0 + timedelta(seconds=59)) is False
    assert await store.get_ephemeral("nonce", "n1", T0) == b""  # the loser changed nothing
    # Expired: counts as absent, so the key can be claimed again (and the old entry is purged).
    assert await store.put_ephemeral("nonce", "n1", b"new", later + timedelta(minutes=1), later) is True
    assert await store.get_ephemeral("nonce", "n1", later) == b"new"


async def test_put_ephemeral_purges_expired_entries(store: Store) -> None:
    await store.put_ephemeral("session", "old", b"x", T0 + timedelta(minutes=1), T0)
    await store.put_ephemeral("session", "new", b"y", T0 + DAY, T0 + timedelta(minutes=5))
    # Taking the purged one finds nothing, even "before" its expiry: it is gone, not just hidden.
    assert await store.take_ephemeral("session", "old", T0) is None
    assert await store.get_ephemeral("session", "new", T0 + timedelta(minutes=5)) == b"y"


async def test_take_ephemeral_once(store: Store, second: Store) -> None:
    await store.put_ephemeral("oauth2_state", "s", b"pending", T0 + timedelta(minutes=10), T0)
    assert await second.take_ephemeral("oauth2_state", "s", T0 + timedelta(minutes=1)) == b"pending"
    assert await store.take_ephemeral("oauth2_state", "s", T0 + timedelta(minutes=1)) is None
    assert await store.take_ephemeral("oauth2_state", "unknown", T0) is None

    await store.put_ephemeral("oauth2_state", "late", b"pending", T0 + timedelta(minutes=10), T0)
    assert await store.take_ephemeral("oauth2_state", "late", T0 + timedelta(minutes=10)) is None  # expired
    assert await store.get_ephemeral("oauth2_state", "late", T0) is None  # and removed all the same


async def test_concurrent_ephemeral_claims_and_takes_have_one_winner(store: Store, second: Store) -> None:
    claims: list[bool] = []
    takes: list[bytes | None] = []
    await store.put_ephemeral("oauth2_state", "s", b"v", T0 + DAY, T0)

    async def claim(s: Store) -> None:
        claims.append(await s.put_ephemeral("nonce", "n", b"", T0 + DAY, T0))

    async def take(s: Store) -> None:
        takes.append(await s.take_ephemeral("oauth2_state", "s", T0))

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(claim, (store, second)[i % 2])
            tg.start_soon(take, (second, store)[i % 2])
    assert sorted(claims) == [False] * 19 + [True]
    assert sum(t is not None for t in takes) == 1


# -- meta -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["text", 42, 2.5, True, [1, "two", None], {"nested": {"list": [1, 2], "flag": False}, "ü": "✓"}]
)
async def test_meta_round_trip(store: Store, value: object) -> None:
    assert await store.get_meta("k") is None
    await store.set_meta("k", value)
    assert await store.get_meta("k") == value


async def test_meta_overwrites(store: Store) -> None:
    await store.set_meta("key_fingerprint", "a")
    await store.set_meta("key_fingerprint", {"v": "b"})
    await store.set_meta("other", 1)
    assert await store.get_meta("key_fingerprint") == {"v": "b"}
    assert await store.get_meta("other") == 1


async def test_vectors_by_model_and_digest(store: Store, second: Store) -> None:
    a, b = bytes(range(16)), bytes(range(1, 17))
    assert await store.get_vectors("m", [a, b]) == {}
    await store.put_vectors("m", {a: b"\x00\x00\x80?", b: b"\x01\x02\x03\x04"})
    await store.put_vectors("other", {a: b"\x09\x09\x09\x09"})
    await second.put_vectors("m", {b: b"\x05\x06\x07\x08"})  # overwrites, from another instance
    await store.put_vectors("m", {})
    assert await store.get_vectors("m", [a, b, b"missing"]) == {a: b"\x00\x00\x80?", b: b"\x05\x06\x07\x08"}
    assert await store.get_vectors("m", []) == {}
    assert await second.get_vectors("other", [a, b]) == {a: b"\x09\x09\x09\x09"}
    many = {i.to_bytes(16, "big"): i.to_bytes(4, "little") for i in range(1200)}  # more than one IN (...) chunk
    await store.put_vectors("bulk", many)
    assert await second.get_vectors("bulk", list(many)) == many


async def test_uses_one_row_per_distinct_query(store: Store, second: Store) -> None:
    from mcp_gateway.store import UseRecord

    def use(action: str, query: str, at: datetime, who: str = "a", **extra: object) -> UseRecord:
        return UseRecord(scope="agent:a", action=action, query=query, who=who, words="create issue", at=at, **extra)

    assert await store.list_uses("agent:a", 10) == []
    await store.record_use(use("gh.issues.create", "q1", T0, model="m", vector=b"\x00\x00\x80?"))
    await store.record_use(use("gh.issues.create", "q2", T0 + DAY))
    await store.record_use(use("gh.issues.list", "q1", T0))
    await store.record_use(UseRecord(scope="project:p", action="gh.x", query="q1", who="b", words="x", at=T0))
    # The same query leading to the same action again: the row moves to the new time, nothing is added.
    await second.record_use(use("gh.issues.create", "q1", T0 + 2 * DAY, who="b"))
    uses = await store.list_uses("agent:a", 10)
    assert [(u.action, u.query, u.at) for u in uses] == [
        ("gh.issues.create", "q1", T0 + 2 * DAY),
        ("gh.issues.create", "q2", T0 + DAY),
        ("gh.issues.list", "q1", T0),
    ]
    assert uses[0].who == "b" and uses[0].model is None and uses[0].vector is None
    assert uses[0].at.tzinfo is not None and uses[0].at.utcoffset() == timedelta(0)
    assert [u.action for u in await second.list_uses("agent:a", 2)] == ["gh.issues.create", "gh.issues.create"]
    assert await store.list_uses("agent:a", 0) == []
    assert await store.forget_uses(T0 + DAY) == 2  # the list use and the other scope's
    assert [u.query for u in await second.list_uses("agent:a", 10)] == ["q1", "q2"]
    assert await second.list_uses("project:p", 10) == []


async def test_a_use_keeps_its_vector(store: Store) -> None:
    from mcp_gateway.store import UseRecord

    vector = bytes(range(256)) * 6
    await store.record_use(
        UseRecord(scope="s", action="a.b", query="q", who="w", words="w", model="m@int8", vector=vector, at=T0)
    )
    (got,) = await store.list_uses("s", 5)
    assert (got.model, got.vector, got.at) == ("m@int8", vector, T0)


# -- SQLite only ----------------------------------------------------------------------------------------------


def _pragma(path: Path, name: str) -> object:
    db = sqlite3.connect(path)
    try:
        return db.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        db.close()


async def test_sqlite_pragmas(tmp_path: Path) -> None:
    path = tmp_path / "gateway.db"
    async with SQLiteStore(path) as store:
        db = store._conn()
        settings = {}
        for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout"):
            async with db.execute(f"PRAGMA {name}") as cursor:
                row = await cursor.fetchone()
                assert row is not None
                settings[name] = row[0]
        assert settings == {"journal_mode": "wal", "synchronous": 1, "foreign_keys": 1, "busy_timeout": 5000}
    # WAL is a property of the file: another connection sees it too.
    assert _pragma(path, "journal_mode") == "wal"
    assert _pragma(path, "user_version") == sqlite_module.SCHEMA_VERSION


async def test_sqlite_in_memory() -> None:
    async with SQLiteStore(":memory:") as store:
        await store.set_meta("k", "v")
        assert await store.get_meta("k") == "v"


async def test_sqlite_creates_directory_and_private_file(tmp_path: Path) -> None:
    path = tmp_path / "state" / "nested" / "gateway.db"
    async with SQLiteStore(path) as store:
        await store.set_meta("k", "v")
    assert path.is_file()
    if sys.platform != "win32":
        assert path.stat().st_mode & 0o777 == 0o600


async def test_sqlite_use_before_open_is_a_clear_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "gateway.db")
    with pytest.raises(RuntimeError, match="not open"):
        await store.get_meta("k")


async def test_sqlite_refuses_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "gateway.db"
    async with SQLiteStore(path) as store:
        await store.set_meta("k", "v")
    future = sqlite_module.SCHEMA_VERSION + 1
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {future}")
    db.close()

    store = SQLiteStore(path)
    with pytest.raises(GatewayError, match=r"newer mcp-gateway \(schema version \d+; this build knows up to \d+\)"):
        await store.open()
    with pytest.raises(RuntimeError, match="not open"):  # a refused open leaves nothing half-open
        await store.get_meta("k")
    assert _pragma(path, "user_version") == future  # and the file untouched


async def test_sqlite_a_vector_written_as_text_is_no_vector(tmp_path: Path) -> None:
    # A row written by hand or another tool with a text value: missing (embedded again), not a TypeError
    # that stops every start.
    path = tmp_path / "s.db"
    a, b = bytes(range(16)), bytes(range(1, 17))
    async with SQLiteStore(path) as store:
        await store.put_vectors("m", {a: b"\x00\x00\x80?", b: b"\x01\x02\x03\x04"})
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE discovery_vector SET vector = 'not a vector' WHERE digest = ?", (b,))
        db.execute("UPDATE discovery_vector SET vector = CAST(x'ff00fe' AS TEXT) WHERE digest = ?", (a,))
    async with SQLiteStore(path) as store:
        assert await store.get_vectors("m", [a, b]) == {}  # text, UTF-8 or not, is no vector


async def test_sqlite_refuses_other_databases(tmp_path: Path) -> None:
    foreign = tmp_path / "other.db"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.commit()
    db.close()
    with pytest.raises(GatewayError, match="did not create"):
        await SQLiteStore(foreign).open()

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(GatewayError, match="cannot open"):
        await SQLiteStore(garbage).open()


async def test_sqlite_a_damaged_page_is_an_outage_naming_the_file_and_the_fix(tmp_path: Path) -> None:
    # "database disk image is malformed" is a DatabaseError, not an OperationalError: it was raised as
    # it came (a call's "Error executing tool call" with no audit row, a bare 500 on a credential page).
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    path = tmp_path / "s.db"
    key = CredentialKey(connector="pay", principal="alice", name="default")
    async with SQLiteStore(path) as store:
        await store.put_credential(key, b"sealed")
    with closing(sqlite3.connect(path)) as db:
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'credential'").fetchone()[0]
        size = db.execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as file:
        file.seek((root - 1) * size)
        file.write(random.Random(7).randbytes(size))
    async with SQLiteStore(path) as store:
        for attempt in (store.get_credential(key), store.put_credential(key, b"other")):
            with pytest.raises(StoreUnavailable) as outage:
                await attempt
            said = str(outage.value)
            assert outage.value.lasting and str(path) in said, said
            assert "malformed" in said and "restore the file from a backup" in said and "doctor" in said


async def test_sqlite_migrations_apply_in_order_and_roll_back_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "gateway.db"
    async with SQLiteStore(path) as store:
        await store.set_meta("k", "v")
    v1 = sqlite_module.SCHEMA_VERSION

    # A later build with one more step that fails halfway: nothing of it may stick.
    broken = (*sqlite_schema.MIGRATIONS, ("CREATE TABLE extra (x INTEGER)", "CREATE TABLE broken (syntax error"))
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS", broken)
    monkeypatch.setattr(sqlite_schema, "SCHEMA_VERSION", v1 + 1)
    with pytest.raises(sqlite3.OperationalError):
        await SQLiteStore(path).open()
    assert _pragma(path, "user_version") == v1
    db = sqlite3.connect(path)
    assert db.execute("SELECT 1 FROM sqlite_master WHERE name = 'extra'").fetchone() is None
    db.close()

    fixed = (*sqlite_schema.MIGRATIONS[:v1], ("CREATE TABLE extra (x INTEGER)",))
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS", fixed)
    async with SQLiteStore(path) as store:
        assert await store.get_meta("k") == "v"  # existing data carried over
    assert _pragma(path, "user_version") == v1 + 1
    db = sqlite3.connect(path)
    assert db.execute("SELECT 1 FROM sqlite_master WHERE name = 'extra'").fetchone() is not None
    db.close()


_BEFORE_AUDIT_OPEN = {"sqlite": 9, "postgres": 7}
"""The last schema version before ``audit_open`` (SQLite's migration 10, PostgreSQL's 8)."""


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_audit_upgrade_keeps_every_row_and_still_recovers_started_calls(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = [T0 + timedelta(seconds=i) for i in range(6)]
    finished = _audit(1, t[0]).model_copy(update={"call_id": "c-done"})
    denied = _audit(2, t[1]).model_copy(update={"status": "denied", "reason": "policy_block"})
    interrupted = _audit(3, t[2]).model_copy(update={"status": "interrupted", "call_id": "c-old"})
    started = _audit(4, t[3]).model_copy(update={"status": "started", "call_id": "c-run", "upstream_status": None})
    old_rows = [finished, denied, interrupted, started]
    # A database as the previous build left it, the rows written straight into its one audit table.
    before = _BEFORE_AUDIT_OPEN[backend]
    if backend == "sqlite":
        store_factory, audit_indexes = await _sqlite_before(tmp_path / "gateway.db", before, old_rows, monkeypatch)
    else:
        url = request.getfixturevalue("postgres_url")
        store_factory, audit_indexes = await _postgres_before(url, before, old_rows, monkeypatch)

    store = store_factory()
    await store.open()
    try:
        assert await store.list_audit() == old_rows[::-1]  # every row kept as it was, the call in flight too
        assert await store.interrupt_started_audits() == 1  # the upgraded start finds the started call
        assert [(r.call_id, r.status) for r in await store.list_audit()] == [
            ("c-run", "interrupted"),
            ("c-old", "interrupted"),
            (None, "denied"),
            ("c-done", "ok"),
        ]
        late = _audit(4, t[4]).model_copy(update={"call_id": "c-run"})
        await store.append_audit(late)  # its outcome after all (another instance's call): one row
        new_call = _audit(5, t[5]).model_copy(update={"status": "started", "call_id": "c-new"})
        await store.append_audit(new_call)
        await store.append_audit(new_call.model_copy(update={"status": "ok"}))
        rows = await store.list_audit()
        assert [(r.call_id, r.status) for r in rows] == [
            ("c-new", "ok"),
            ("c-run", "ok"),
            ("c-old", "interrupted"),
            (None, "denied"),
            ("c-done", "ok"),
        ]
    finally:
        await store.close()
    # What an outcome costs: besides its own row, only the time index changes (no upsert indexes).
    assert await audit_indexes() == ["audit_by_time"]


AuditIndexes = Callable[[], Awaitable[list[str]]]


class _AuditTable(Protocol):
    @property
    def columns(self) -> Sequence[str]: ...

    def params(self, record: AuditRecord) -> tuple[object, ...]: ...


_LATER_AUDIT_COLUMNS = ("redirected_to",)
"""Audit columns added after ``audit_open`` was: a database before it has none of them."""


def _then_columns(table: _AuditTable, rows: list[AuditRecord]) -> tuple[list[str], list[tuple[object, ...]]]:
    """The audit columns (and each row's values) a database from before ``audit_open`` had."""
    kept = [i for i, c in enumerate(table.columns) if c not in _LATER_AUDIT_COLUMNS]
    values = [table.params(r) for r in rows]
    return [table.columns[i] for i in kept], [tuple(v[i] for i in kept) for v in values]


async def _sqlite_before(
    path: Path, version: int, rows: list[AuditRecord], monkeypatch: pytest.MonkeyPatch
) -> tuple[StoreFactory, AuditIndexes]:
    with monkeypatch.context() as m:
        m.setattr(sqlite_schema, "MIGRATIONS", sqlite_schema.MIGRATIONS[:version])
        m.setattr(sqlite_schema, "SCHEMA_VERSION", version)
        async with SQLiteStore(path):
            pass
    db = sqlite3.connect(path)
    columns, params = _then_columns(sqlite_module._AUDIT, rows)
    db.executemany(f"INSERT INTO audit ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", params)
    db.commit()
    db.close()

    async def indexes() -> list[str]:
        db = sqlite3.connect(path)
        try:
            return [
                n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit'")
            ]
        finally:
            db.close()

    return lambda: SQLiteStore(path), indexes


async def _postgres_before(
    url: str, version: int, rows: list[AuditRecord], monkeypatch: pytest.MonkeyPatch
) -> tuple[StoreFactory, AuditIndexes]:
    import asyncpg

    from mcp_gateway.store import _postgres_schema as postgres_schema
    from mcp_gateway.store import postgres as postgres_module

    with monkeypatch.context() as m:
        m.setattr(postgres_schema, "MIGRATIONS", postgres_schema.MIGRATIONS[:version])
        m.setattr(postgres_schema, "SCHEMA_VERSION", version)
        async with postgres_module.PostgresStore(url):
            pass
    conn = await asyncpg.connect(url)
    try:
        columns, params = _then_columns(postgres_module._AUDIT, rows)
        places = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
        names = ", ".join(f'"{c}"' for c in columns)
        await conn.executemany(f"INSERT INTO audit ({names}) VALUES ({places})", params)
    finally:
        await conn.close()

    async def indexes() -> list[str]:
        conn = await asyncpg.connect(url)
        try:
            sql = "SELECT indexname FROM pg_indexes WHERE tablename = 'audit' AND indexname <> 'audit_pkey'"
            return [r[0] for r in await conn.fetch(sql)]
        finally:
            await conn.close()

    return lambda: postgres_module.PostgresStore(url), indexes


async def test_sqlite_inline_audit_write_of_a_start_and_its_outcome(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "gateway.db") as store:
        started = _audit(1, T0).model_copy(update={"status": "started", "call_id": "c1"})
        done = _audit(1, T0 + timedelta(seconds=1)).model_copy(update={"call_id": "c1"})
        running = _audit(2, T0).model_copy(update={"status": "started", "call_id": "c2"})
        assert store.append_audits_now([started, done, running])  # one transaction, started rows first
        assert await store.list_audit() == [done, running]
        other = sqlite3.connect(tmp_path / "gateway.db", isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another writer holds the lock: nothing is written, no wait
            assert not store.append_audits_now([done.model_copy(update={"call_id": "c2"}), started])
            other.rollback()
        finally:
            other.close()
        assert await store.list_audit() == [done, running]


async def test_sqlite_wal_starts_over_while_calls_keep_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Calls commit audit rows while the housekeeping checkpoints on aiosqlite's thread: a PASSIVE
    # checkpoint then never finds every frame copied, so SQLite never started the WAL over, and it
    # grew for as long as calls came. Past WAL_RESTART_FRAMES the housekeeping restarts it.
    monkeypatch.setattr(sqlite_module, "WAL_RESTART_FRAMES", 64)
    path = tmp_path / "gateway.db"
    written = 0
    async with SQLiteStore(path) as store:
        writing = True

        async def write() -> None:
            nonlocal written
            while writing:
                if store.append_audits_now([_audit(written, T0 + timedelta(microseconds=written))]):
                    written += 1  # False while the restart holds the write lock: a call queues its row then
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            for _ in range(30):
                await store.checkpoint_audits()
                await anyio.sleep(0.002)
            writing = False
        # A row adds ~2 frames (the table's page and its time index'). Without restarts the file held
        # every frame ever written (~2.2 per row); restarted, it is rewritten from its start, so it
        # holds the most written between two restarts: under 0.5 frames per row idle, 0.59 measured on a busy host
        # (the checkpoint thread starved while the writer keeps committing).
        frames = (path.parent / f"{path.name}-wal").stat().st_size // (4096 + 24)
        assert written >= 200
        assert frames < written
        assert len(await store.list_audit(limit=written + 1)) == written


async def test_sqlite_concurrent_first_open_migrates_once(tmp_path: Path) -> None:
    stores = [SQLiteStore(tmp_path / "gateway.db") for _ in range(4)]
    async with anyio.create_task_group() as tg:
        for s in stores:
            tg.start_soon(s.open)
    for s in stores:
        await s.close()
    assert _pragma(tmp_path / "gateway.db", "user_version") == sqlite_module.SCHEMA_VERSION


def test_sqlite_timestamp_text_is_fixed_width_utc_to_the_microsecond() -> None:
    # Every value, in order or not, across second boundaries, before 1970, past 2106 (years 1000 to
    # 9999), at the last microsecond of a second and in another zone gives the text strftime gives.
    rng = random.Random(7)
    edges = [
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2106, 2, 7, 6, 28, 15, 999_999, tzinfo=UTC),
        datetime(2106, 2, 7, 6, 28, 16, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(1000, 1, 1, tzinfo=UTC),
        datetime(2026, 12, 2, 16, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 12, 2, 17, 0, 0, 0, tzinfo=UTC),
        datetime(2026, 12, 2, 17, 0, 0, 1, tzinfo=timezone(timedelta(hours=2))),
    ]
    start = datetime(2026, 12, 2, 17, tzinfo=UTC)
    steps = [start + timedelta(microseconds=rng.randrange(-3_000_000, 3_000_000)) for _ in range(2000)]
    for value in [*edges, *steps, *reversed(edges)]:
        expected = f"{value.astimezone(UTC):%Y-%m-%dT%H:%M:%S.%f}Z"
        assert sqlite_module._ts(value) == expected, value


async def test_sqlite_rejects_naive_datetimes(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "gateway.db") as store:
        with pytest.raises(ValueError, match="naive datetime"):
            await store.consume_link("h1", datetime(2026, 1, 1))


async def test_sqlite_unreadable_catalog_is_a_miss(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "gateway.db"
    async with SQLiteStore(path) as store:
        await store.put_catalog(CatalogRecord(slug="github", fingerprint="fp", actions=[_action(1)]))
        db = sqlite3.connect(path)
        db.execute("UPDATE catalog SET actions = ?", (b"not zlib",))
        db.commit()
        db.close()
        with caplog.at_level(logging.WARNING):
            assert await store.get_catalog("github") is None
        assert "will be rebuilt" in caplog.text


def _synthetic_actions(n: int) -> list[Action]:
    """Actions shaped like a normalized GitHub operation: ~2 KB each, nested body schemas."""
    rng = random.Random(7)
    words = "repository owner issue pull request branch commit label milestone team release workflow".split()

    def prose(k: int) -> str:
        return " ".join(rng.choice(words) for _ in range(k))

    actions = []
    for i in range(n):
        props: dict[str, object] = {
            f"{rng.choice(words)}_{j}": {"type": rng.choice(["string", "integer", "boolean"]), "description": prose(12)}
            for j in range(rng.randint(4, 10))
        }
        props["labels"] = {
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "color": {"type": "string"}}},
            "description": prose(20),
        }
        props["state"] = {"type": "string", "enum": ["open", "closed", "all"], "default": "open"}
        actions.append(
            Action(
                connector="github",
                path=f"{rng.choice(words)}.op_{i}",
                summary=prose(6),
                description=prose(rng.randint(20, 80)),
                input_schema={"type": "object", "properties": props, "required": list(props)[:2]},
                risk=rng.choice(["read", "write", "destructive"]),
                binding=OpenAPIBinding(
                    method="POST",
                    url=f"/repos/{{owner}}/{{repo}}/op/{i}",
                    params=tuple(ParamSpec(name=k, location="body") for k in props),
                    operation_id=f"op-{i}",
                ),
            )
        )
    return actions


async def test_sqlite_large_catalog_loads_fast(tmp_path: Path) -> None:
    actions = _synthetic_actions(1200)
    path = tmp_path / "gateway.db"
    async with SQLiteStore(path) as store:
        await store.put_catalog(CatalogRecord(slug="github", fingerprint="fp", actions=actions))
    async with SQLiteStore(path) as store:  # a warm restart: new connection, nothing cached
        start = time.perf_counter()
        record = await store.get_catalog("github")
        elapsed = time.perf_counter() - start
    assert record is not None and record.actions == actions
    # SPEC 12 gives a warm restart 0.5 s in all; this load measures ~30 ms on 2 idle cores (the speed
    # itself is measured by scripts/bench_call.py). The bound only catches an order-of-magnitude loss,
    # loose enough for a busy CI machine.
    assert elapsed < 3.0, f"loading 1,200 actions took {elapsed:.3f}s"


def test_store_combines_every_role() -> None:
    methods = protocol_methods(Store)
    assert {"open", "close", "put_credential", "consume_link", "revoke_operator_token", "set_meta"} <= set(methods)
    assert len(methods) > 35


@pytest.mark.parametrize("implementation", [SQLiteStore, MemoryStore])
def test_store_satisfies_protocol(implementation: type) -> None:
    # A protocol method a store lacks or spells differently would otherwise fail only at a call site.
    for name, member in protocol_methods(Store).items():
        assert name in vars(implementation), name
        assert inspect.signature(getattr(implementation, name)) == inspect.signature(member), name


async def test_a_write_lock_held_elsewhere_past_the_busy_timeout_is_an_outage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process holding the write lock (a backup, a sqlite3 shell): the agent is told to retry
    # and the operator's log gets one line, where an OperationalError became an internal error.
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    monkeypatch.setattr(sqlite_module, "_BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "gateway.db"
    store = SQLiteStore(path)
    await store.open()
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        state = ConnectorState(slug="stripe", source="openapi:s.json", status="ready", actions=1, synced_at=T0)
        with pytest.raises(StoreUnavailable, match="database is locked"):
            await store.put_connector_state(state)
        # A write of several statements at once (a link used, a page's ephemeral state) too: no 500.
        with pytest.raises(StoreUnavailable, match="database is locked"):
            await store.consume_link("no-such-hash", T0)
        with pytest.raises(StoreUnavailable, match="database is locked"):
            await store.put_ephemeral("oauth", "k", b"v", T0 + timedelta(minutes=5), T0)
        # A CLI command opening the store meanwhile reads it (the audit, the pending approvals: what an
        # operator looks at during exactly that incident), and a write says what holds it.
        reader = SQLiteStore(path)
        await reader.open()
        try:
            assert await reader.list_audit(5) == []
            with pytest.raises(StoreUnavailable, match="another process holds its write lock"):
                await reader.set_meta("k", 1)
        finally:
            await reader.close()
        holder.execute("ROLLBACK")
        await store.put_connector_state(state)  # the lock gone, the store writes again
    finally:
        holder.close()
        await store.close()


async def test_after_one_statement_waited_the_whole_busy_timeout_the_next_ones_wait_little(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A call of several statements under a lock held elsewhere waited the busy timeout for each (15 s
    # before answering store_unavailable); after one has waited it all, the next wait a short while.
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    monkeypatch.setattr(sqlite_module, "_BUSY_TIMEOUT_MS", 50)
    now = [1000.0]
    monkeypatch.setattr(sqlite_module, "monotonic", lambda: now[0])
    path = tmp_path / "gateway.db"
    store = SQLiteStore(path)
    await store.open()
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        assert (await store._fetchone("PRAGMA busy_timeout"))[0] == 50  # type: ignore[index]
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StoreUnavailable, match="database is locked"):
            await store.set_meta("k", 1)
        assert (await store._fetchone("PRAGMA busy_timeout"))[0] == sqlite_module._BUSY_SHORT_MS  # type: ignore[index]
        holder.execute("ROLLBACK")
        now[0] += sqlite_module._LOCKED_SECONDS + 1  # a while later, the whole wait again
        assert (await store._fetchone("PRAGMA busy_timeout"))[0] == 50  # type: ignore[index]
        await store.set_meta("k", 1)
    finally:
        holder.close()
        await store.close()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_a_database_file_deleted_or_replaced_while_open_is_an_outage(tmp_path: Path, how: str) -> None:
    # SQLite keeps writing to the file it opened: rows went into a file nobody would read again,
    # and every answer said it was recorded.
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    path = tmp_path / "gateway.db"
    async with SQLiteStore(path) as store:
        await store.append_audit(_audit(1, T0))
        if how == "deleted":
            path.unlink()
        else:
            async with SQLiteStore(tmp_path / "restored.db"):
                pass
            os.replace(tmp_path / "restored.db", path)
        with pytest.raises(StoreUnavailable, match=f"was {how} while the gateway had it open"):
            await store.append_audit(_audit(2, T0))
        with pytest.raises(StoreUnavailable, match=how):
            store.append_audits_now([_audit(3, T0)])
        with pytest.raises(StoreUnavailable, match=how):
            await store.ping()
        # Nor are other writes taken into it: a secret or a used link there would be lost on restart.
        with pytest.raises(StoreUnavailable, match=how):
            await store.put_connector_state(
                ConnectorState(slug="s", source="openapi:s.json", status="ready", actions=1, synced_at=T0)
            )
        with pytest.raises(StoreUnavailable, match=how):
            await store.consume_link("no-such-hash", T0)


async def test_sqlite_a_deleted_write_ahead_log_says_restart_the_gateway_not_move_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Every command said "move this one aside", the one move that loses what the running gateway's log
    # holds; the running gateway said nothing.
    from mcp_gateway.cli.doctor import store_finding
    from mcp_gateway.vocabulary.settings import Settings

    path = tmp_path / "state.db"
    async with SQLiteStore(path) as serving:
        await serving.set_meta("a", 1)
        (tmp_path / "state.db-wal").unlink()
        with caplog.at_level(logging.WARNING, logger="mcp_gateway.store.sqlite"):
            await serving.set_meta("b", 2)  # it goes on, and says so once
            await serving.set_meta("c", 3)
        said = [r.getMessage() for r in caplog.records if "-wal was deleted" in r.getMessage()]
        assert len(said) == 1 and "restart the gateway" in said[0], said
        with pytest.raises(GatewayError) as refused:
            await SQLiteStore(path).open()
        assert "restart that gateway" in str(refused.value) and "Do not move" in str(refused.value)
        found = await store_finding(Settings(manifest_path=None, state_dir=tmp_path, env={}))
        assert found.level == "problem" and found.fix.startswith("restart the running gateway"), found
    async with SQLiteStore(path) as store:  # once it stopped, nothing was lost
        assert (await store.get_meta("a"), await store.get_meta("c")) == (1, 3)
