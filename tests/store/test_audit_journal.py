"""``AuditJournal``: appended rows are on disk (fsynced) when ``append`` returns, a replay hands each
to the store exactly once (a crash mid-replay included), and a torn last line costs no other row."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from mcp_gateway.store import MemoryStore
from mcp_gateway.store.audit_journal import AuditJournal
from mcp_gateway.store.contract import AuditRecord
from mcp_gateway.store.memory import MemoryData

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _row(i: int, *, call_id: str | None = None, status: str = "ok") -> AuditRecord:
    return AuditRecord.model_validate(
        {
            "at": T0 + timedelta(milliseconds=i),
            "user": "alice",
            "agent": "bot",
            "requested": f"api.items.get_{i}",
            "connector": "api",
            "action": f"api.items.get_{i}",
            "args_preview": '{"token":"[REDACTED]"}',
            "fingerprint": None,
            "verdict": "always_run",
            "verdict_source": "risk_default",
            "status": status,
            "upstream_status": 200,
            "latency_ms": 1.25,
            "call_id": call_id if call_id is not None else f"call-{i}",
        }
    )


@pytest.fixture
async def store() -> MemoryStore:
    s = MemoryStore(MemoryData())
    await s.open()
    return s


class CrashAfterCommit(MemoryStore):
    """Commits a replay's rows, then fails as a process killed before it could forget them would."""

    async def replay_audits(self, records: Sequence[AuditRecord]) -> int:
        await super().replay_audits(records)
        raise ConnectionResetError("the gateway died after the commit")


class Down(MemoryStore):
    async def replay_audits(self, records: Sequence[AuditRecord]) -> int:
        raise ConnectionRefusedError("the database is down")


async def test_rows_are_appended_one_line_each_and_replayed_once(tmp_path: Path, store: MemoryStore) -> None:
    journal = AuditJournal(tmp_path / "state")
    assert not journal.pending() and await journal.replay(store) == 0  # no folder yet: nothing to do
    journal.append([_row(1)])
    journal.append([_row(2), _row(3, call_id="")])
    assert journal.pending()
    assert len(journal.path.read_bytes().splitlines()) == 3
    assert oct(journal.path.stat().st_mode & 0o777) == "0o600"
    assert oct(journal.folder.stat().st_mode & 0o777) == "0o700"
    assert journal.call_ids() == {"call-1", "call-2", ""}

    assert await journal.replay(store) == 3
    assert not journal.pending() and journal.call_ids() == set()
    assert await store.list_audit() == [_row(3, call_id=""), _row(2), _row(1)]  # the very rows, instants exact
    assert await journal.replay(store) == 0
    assert len(await store.list_audit()) == 3


async def test_append_fsyncs_the_line_and_the_new_file_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = AuditJournal(tmp_path)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        target = Path(os.readlink(f"/proc/self/fd/{fd}"))
        synced.append("folder" if target.is_dir() else target.name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    journal.append([_row(1)])
    assert synced == [journal.path.name, "folder"]  # the line, then the folder holding the new file
    synced.clear()
    journal.append([_row(2)])
    assert synced == [journal.path.name]  # the file exists: only the line


async def test_a_failed_fsync_is_an_error_and_leaves_no_half_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = AuditJournal(tmp_path)
    journal.append([_row(1)])
    before = journal.path.read_bytes()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        journal.append([_row(2)])
    assert journal.path.read_bytes() == before


async def test_a_crash_mid_replay_replays_again_without_duplicates(tmp_path: Path) -> None:
    data = MemoryData()
    journal = AuditJournal(tmp_path)
    journal.append([_row(1), _row(2)])
    crashing = CrashAfterCommit(data)
    await crashing.open()
    with pytest.raises(ConnectionResetError):
        await journal.replay(crashing)
    journal.append([_row(3)])  # a row journaled meanwhile goes to a new file
    assert journal.call_ids() == {"call-1", "call-2", "call-3"}

    restarted = AuditJournal(tmp_path)  # the next start, with the rows committed but still journaled
    store = MemoryStore(data)
    await store.open()
    assert await restarted.replay(store) == 1  # rows 1 and 2 were committed: only row 3 is new
    assert sorted(r.call_id or "" for r in await store.list_audit()) == ["call-1", "call-2", "call-3"]
    assert not restarted.pending()


async def test_a_store_that_is_down_keeps_the_rows(tmp_path: Path) -> None:
    journal = AuditJournal(tmp_path)
    journal.append([_row(1)])
    down = Down(MemoryData())
    await down.open()
    with pytest.raises(ConnectionRefusedError):
        await journal.replay(down)
    assert journal.pending() and journal.call_ids() == {"call-1"}


async def test_a_torn_last_line_costs_no_other_row(tmp_path: Path, store: MemoryStore) -> None:
    journal = AuditJournal(tmp_path)
    journal.append([_row(1), _row(2)])
    whole = journal.path.read_bytes()
    torn = _row(3).model_dump_json().encode()[:40]
    journal.path.write_bytes(whole + torn)  # a crash in the middle of an append
    journal.append([_row(4)])  # starts a line of its own, not glued to the torn one
    assert journal.call_ids() == {"call-1", "call-2", "call-4"}

    assert await journal.replay(store) == 3
    assert sorted(r.call_id or "" for r in await store.list_audit()) == ["call-1", "call-2", "call-4"]
    assert (tmp_path / "audit-journal.rejected.jsonl").read_bytes() == torn + b"\n"  # kept for an operator
    assert not journal.pending()


async def test_a_torn_line_is_set_aside_once_when_the_replay_fails(tmp_path: Path, store: MemoryStore) -> None:
    journal = AuditJournal(tmp_path)
    journal.append([_row(1)])
    journal.path.write_bytes(journal.path.read_bytes() + b'{"at": "2026-')
    down = Down(MemoryData())
    await down.open()
    with pytest.raises(ConnectionRefusedError):
        await journal.replay(down)
    assert await journal.replay(store) == 1
    assert (tmp_path / "audit-journal.rejected.jsonl").read_bytes() == b'{"at": "2026-\n'


async def test_appends_beside_a_replay_are_each_replayed_once(tmp_path: Path, store: MemoryStore) -> None:
    journal = AuditJournal(tmp_path)
    journal.append([_row(0)])

    def appender(start: int) -> None:
        for i in range(start, start + 50):
            journal.append([_row(i)])

    threads = [threading.Thread(target=appender, args=(1 + 50 * n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    added = 0
    while any(t.is_alive() for t in threads):
        added += await journal.replay(store)
        await anyio.sleep(0.001)
    for thread in threads:
        thread.join()
    added += await journal.replay(store)
    assert added == 151
    replayed = sorted(r.call_id or "" for r in await store.list_audit(limit=1000))
    assert replayed == sorted(f"call-{i}" for i in range(151))


async def test_a_second_replayer_of_the_same_folder_stands_aside(tmp_path: Path, store: MemoryStore) -> None:
    # Another process (the CLI beside a server) replaying the same folder holds its replay lock.
    import fcntl

    journal = AuditJournal(tmp_path)
    journal.append([_row(1)])
    fd = os.open(tmp_path / "audit-journal.replay.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert await journal.replay(store) == 0
        assert journal.pending()
    finally:
        os.close(fd)
    assert await journal.replay(store) == 1
