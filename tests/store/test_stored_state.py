"""The read-only view of the SQLite state file (``store.stored_state``) reads back what ``SQLiteStore``
wrote, as the store's own methods return it, writes nothing, and refuses what this build would
migrate or does not own.
"""

from __future__ import annotations

import sqlite3
import zlib
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from mcp_gateway.primitives.secrets import CredentialKey
from mcp_gateway.store import CatalogRecord, ConnectorState, SQLiteStore
from mcp_gateway.store.contract import UseRecord
from mcp_gateway.store.stored_state import StateUnreadable, StoredCatalog, StoredState
from mcp_gateway.vocabulary.model import Action, HttpBinding

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _action(slug: str, n: int) -> Action:
    return Action(
        connector=slug,
        path=f"items.op{n}",
        summary=f"Operation {n}",
        aliases=(f"old.op{n}",) if n == 1 else (),
        binding=HttpBinding(method="GET", url=f"/items/{n}"),
    )


async def _write(path: Path) -> list[CredentialKey]:
    """A state file as a sync and two stored credentials leave it."""
    store = SQLiteStore(path)
    await store.open()
    try:
        await store.put_catalog(
            CatalogRecord(slug="one", fingerprint="fp-1", actions=[_action("one", n) for n in range(3)], files=["/a"])
        )
        await store.put_connector_state(
            ConnectorState(slug="one", source="http", status="ready", actions=3, synced_at=T0)
        )
        await store.put_catalog(CatalogRecord(slug="two", fingerprint="fp-2", actions=[]))
        await store.put_connector_state(
            ConnectorState(slug="two", source="http", status="error", actions=0, error="boom", synced_at=T0)
        )
        # A state row without a catalog (a connector that never loaded): not a stored catalog.
        await store.put_connector_state(
            ConnectorState(slug="three", source="x", status="error", actions=0, synced_at=T0)
        )
        for key in (
            CredentialKey(connector="one", principal="*", name="default"),
            CredentialKey(connector="one", principal="alice", name="oauth2_token"),
        ):
            await store.put_credential(key, b"\x00sealed")
        return await store.list_credentials()
    finally:
        await store.close()


@pytest.fixture
def state_file(tmp_path: Path) -> tuple[Path, list[CredentialKey]]:
    path = tmp_path / "state.db"
    keys = anyio.run(_write, path)
    return path, keys


def test_it_reads_back_what_the_store_wrote(state_file: tuple[Path, list[CredentialKey]]) -> None:
    path, keys = state_file
    view = StoredState.open(path)
    assert view is not None
    with view:
        assert view.catalogs() == {
            "one": StoredCatalog(status="ready", actions=3, error=None, fingerprint="fp-1", files=["/a"]),
            "two": StoredCatalog(status="error", actions=0, error="boom", fingerprint="fp-2", files=[]),
        }
        assert view.credential_keys() == keys  # as CredentialStore.list_credentials gives them
        assert view.actions("one") == [_action("one", n) for n in range(3)]
        lines = view.action_lines("one")
        assert lines is not None and len(lines) == 3 and lines.decoded == 0
        lines.expect([f"items.op{n}" for n in range(3)])
        assert lines[1] == _action("one", 1) and lines.decoded == 1
        assert view.actions("two") == []
        assert not view.has_uses()
        with pytest.raises(StateUnreadable, match="no stored catalog"):
            view.actions("three")


def test_it_sees_whether_discover_learned_from_use(state_file: tuple[Path, list[CredentialKey]]) -> None:
    path, _ = state_file

    async def learn() -> None:
        store = SQLiteStore(path)
        await store.open()
        try:
            use = UseRecord(scope="agent:bot", action="one.items.op1", query="q", who="bot", words="op", at=T0)
            await store.record_use(use)
        finally:
            await store.close()

    anyio.run(learn)
    view = StoredState.open(path)
    assert view is not None
    with view:
        assert view.has_uses()


def test_it_writes_nothing(state_file: tuple[Path, list[CredentialKey]]) -> None:
    path, _ = state_file
    before = path.read_bytes()
    view = StoredState.open(path)
    assert view is not None
    with view, pytest.raises(sqlite3.OperationalError, match="readonly"):
        view._db.execute("DELETE FROM credential")
    assert path.read_bytes() == before


def test_one_snapshot_for_every_read(state_file: tuple[Path, list[CredentialKey]]) -> None:
    path, keys = state_file
    view = StoredState.open(path)
    assert view is not None
    with view:
        assert view.credential_keys() == keys
        # Another process stores a credential meanwhile: this view still reads its snapshot.
        with closing(sqlite3.connect(path)) as db, db:
            db.execute(
                "INSERT INTO credential (connector, principal, name, sealed) VALUES ('two', '*', 'default', x'00')"
            )
        assert view.credential_keys() == keys
    again = StoredState.open(path)
    assert again is not None
    with again:
        assert len(again.credential_keys()) == len(keys) + 1


def test_a_file_to_migrate_or_not_ours_is_refused(tmp_path: Path, state_file: tuple[Path, list[CredentialKey]]) -> None:
    path, _ = state_file
    with closing(sqlite3.connect(path)) as db:
        (version,) = db.execute("PRAGMA user_version").fetchone()
        db.execute(f"PRAGMA user_version = {version - 1}")
    assert StoredState.open(path) is None  # the store would migrate it first
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as db:
        db.execute("CREATE TABLE t (x)")
    assert StoredState.open(other) is None  # another application's file
    (tmp_path / "text.db").write_text("not a database at all, just text " * 100)
    with pytest.raises(StateUnreadable):
        StoredState.open(tmp_path / "text.db")


def test_a_row_it_cannot_read_is_unreadable(state_file: tuple[Path, list[CredentialKey]]) -> None:
    path, _ = state_file
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE catalog SET actions = ? WHERE slug = 'one'", (b"not zlib",))
        db.execute("UPDATE catalog SET actions = ? WHERE slug = 'two'", (zlib.compress(b'[{"connector": 1}]'),))
    view = StoredState.open(path)
    assert view is not None
    with view:
        for read in (view.actions, view.action_lines):
            with pytest.raises(StateUnreadable):
                read("one")
        with pytest.raises(StateUnreadable):
            view.actions("two")
        assert view.action_lines("two") is None  # not one action a line: written by an earlier build
