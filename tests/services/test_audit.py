"""The audit writer (``audit.Auditor``): rows written off the call path, in batches, never lost on a
clean stop, failures counted, and a full queue slowing the callers down rather than dropping rows.

The store is a real ``SQLiteStore`` behind a small gate that can hold the writer mid-write or make
it fail, so every ordering below is forced, not waited for.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from mcp_gateway.manifest import parse_manifest
from mcp_gateway.runtime import Settings, open_gateway
from mcp_gateway.services import audit
from mcp_gateway.services.audit import Auditor
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.store import AuditRecord, SQLiteStore
from mcp_gateway.store.audit_journal import AuditJournal
from mcp_gateway.vocabulary.clock import FixedClock

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _row(i: int) -> AuditRecord:
    return AuditRecord(
        at=datetime(2026, 1, 1, tzinfo=UTC),
        user="alice",
        agent=None,
        requested=f"op_{i}",
        connector=None,
        action=None,
        args_preview="{}",
        fingerprint=None,
        verdict=None,
        verdict_source=None,
        status="ok",
        latency_ms=float(i),
    )


class GatedStore(SQLiteStore):
    """An ``SQLiteStore`` whose audit writes wait for ``gate`` (when closed) and can be made to fail."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate: anyio.Event | None = None
        self.entered = anyio.Event()
        """Set when a write reaches the gate."""
        self.fail = False
        self.batches: list[int] = []
        self.checkpoints = 0

    async def append_audits(self, records: Sequence[AuditRecord]) -> None:
        await self._pass(len(records))
        await super().append_audits(records)

    async def append_audit(self, record: AuditRecord) -> None:
        await self._pass(1)
        await super().append_audits([record])

    def append_audits_now(self, records: Sequence[AuditRecord]) -> bool:
        # A closed gate or a failing disk is a write that cannot be done at once: the queued path.
        if self.gate is not None or self.fail:
            return False
        return super().append_audits_now(records)

    async def checkpoint_audits(self) -> None:
        self.checkpoints += 1
        await super().checkpoint_audits()

    async def _pass(self, rows: int) -> None:
        self.batches.append(rows)
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise OSError("disk full")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[GatedStore]:
    async with GatedStore(tmp_path / "gateway.db") as s:
        yield s


async def _requested(store: SQLiteStore) -> list[str]:
    return [r.requested for r in reversed(await store.list_audit(limit=10_000))]


async def test_without_the_writer_record_writes_before_returning(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False)
    await auditor.record(_row(1))
    assert await _requested(store) == ["op_1"]


async def test_record_returns_before_the_row_is_written_and_flush_waits_for_it(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False)
    store.gate = anyio.Event()
    async with auditor.running():
        with anyio.fail_after(1):
            await auditor.record(_row(1))  # returns although the write is held at the gate
        await store.entered.wait()
        assert await _requested(store) == []
        async with anyio.create_task_group() as tg:
            flushed = anyio.Event()

            async def flush() -> None:
                await auditor.flush()
                flushed.set()

            tg.start_soon(flush)
            await anyio.wait_all_tasks_blocked()
            assert not flushed.is_set()
            store.gate.set()
        assert await _requested(store) == ["op_1"]
    assert auditor.failures == 0


async def test_recent_shows_rows_still_queued_when_it_was_asked(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False, linger=60)
    with anyio.fail_after(10):  # recent does not wait out the linger either
        async with auditor.running():
            for i in range(3):
                await auditor.record(_row(i))
            await anyio.wait_all_tasks_blocked()
            assert store.batches == []  # queued, not written
            assert [r.requested for r in await auditor.recent(2)] == ["op_2", "op_1"]  # newest first, capped
            assert store.batches == [3]


async def test_rows_queued_meanwhile_go_in_one_batch(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False)
    store.gate = anyio.Event()
    async with auditor.running():
        await auditor.record(_row(0))
        await store.entered.wait()  # the writer holds row 0 at the gate
        for i in range(1, 101):
            await auditor.record(_row(i))
        store.gate.set()
        await auditor.flush()
        assert store.batches == [1, 100]
        assert await _requested(store) == [f"op_{i}" for i in range(101)]


async def test_the_writer_lingers_for_a_batch_and_flush_cuts_it_short(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False, linger=60)
    with anyio.fail_after(10):  # neither flush nor the close waits out the linger
        async with auditor.running():
            for i in range(5):
                await auditor.record(_row(i))
            await anyio.wait_all_tasks_blocked()
            assert store.batches == []  # still waiting for more rows to join
            await auditor.flush()
            assert store.batches == [5]
            await auditor.record(_row(5))
            await anyio.wait_all_tasks_blocked()
            assert store.batches == [5]  # lingering again after the flush
    assert store.batches == [5, 1]
    assert len(await _requested(store)) == 6


async def test_batches_are_capped(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False, max_batch=30)
    store.gate = anyio.Event()
    async with auditor.running():
        await auditor.record(_row(0))
        await store.entered.wait()
        for i in range(1, 71):
            await auditor.record(_row(i))
        store.gate.set()
        await auditor.flush()
    assert store.batches == [1, 30, 30, 10]
    assert len(await _requested(store)) == 71


async def test_leaving_running_writes_everything_queued(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False)
    store.gate = anyio.Event()
    async with auditor.running():
        for i in range(50):
            await auditor.record(_row(i))
        await store.entered.wait()
        assert await _requested(store) == []
        store.gate.set()  # opened only as the gateway closes
    assert await _requested(store) == [f"op_{i}" for i in range(50)]
    assert auditor.failures == 0


async def test_a_cancelled_gateway_still_writes_what_was_queued(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False)
    store.gate = anyio.Event()
    with anyio.CancelScope() as scope:
        async with auditor.running():
            for i in range(5):
                await auditor.record(_row(i))
            await store.entered.wait()
            scope.cancel()  # SIGTERM-like: the body is cancelled with rows still queued
            store.gate.set()
            await anyio.sleep_forever()
    assert await _requested(store) == [f"op_{i}" for i in range(5)]


async def test_an_error_in_the_body_propagates_unwrapped_after_the_drain(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False)
    with pytest.raises(LookupError, match="the body's own error"):
        async with auditor.running():
            await auditor.record(_row(1))
            raise LookupError("the body's own error")
    assert await _requested(store) == ["op_1"]


async def test_after_close_record_writes_directly(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False)
    async with auditor.running():
        await auditor.record(_row(1))
        await auditor.close()  # what a signal handler does before ending the process
        await auditor.record(_row(2))
        assert await _requested(store) == ["op_1", "op_2"]


async def test_failures_are_counted_and_never_raised(store: GatedStore, caplog: pytest.LogCaptureFixture) -> None:
    auditor = Auditor(store, durable=False)
    store.fail = True
    with caplog.at_level(logging.WARNING, logger="mcp_gateway.services.audit"):
        await auditor.record(_row(0))  # direct
        store.gate = anyio.Event()
        async with auditor.running():
            await auditor.record(_row(1))
            await store.entered.wait()
            for i in range(2, 6):
                await auditor.record(_row(i))
            store.gate.set()
            await auditor.flush()
    assert auditor.failures == 6
    assert "audit write failed" in caplog.text
    assert await _requested(store) == []


async def test_a_full_queue_makes_the_caller_wait_for_room(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False, max_queued=2, full_wait=30)
    store.gate = anyio.Event()
    async with auditor.running():
        await auditor.record(_row(0))
        await store.entered.wait()  # row 0 is at the gate; the queue holds 2 more
        await auditor.record(_row(1))
        await auditor.record(_row(2))
        returned = anyio.Event()

        async def blocked() -> None:
            await auditor.record(_row(3))
            returned.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(blocked)
            await anyio.wait_all_tasks_blocked()
            assert not returned.is_set()  # backpressure: the fourth call waits
            store.gate.set()
        await auditor.flush()
    assert auditor.failures == 0
    assert await _requested(store) == [f"op_{i}" for i in range(4)]


async def test_a_queue_that_stays_full_counts_the_row_as_failed(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False, max_queued=1, full_wait=0.05)
    store.gate = anyio.Event()
    async with auditor.running():
        await auditor.record(_row(0))
        await store.entered.wait()
        await auditor.record(_row(1))
        with anyio.fail_after(5):
            await auditor.record(_row(2))  # gives up after full_wait
        assert auditor.failures == 1
        store.gate.set()
    assert await _requested(store) == ["op_0", "op_1"]


async def test_a_stuck_writer_cannot_hold_the_shutdown_forever(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False, drain_timeout=0.1)
    store.gate = anyio.Event()  # never opened
    with anyio.fail_after(5):
        async with auditor.running():
            for i in range(4):
                await auditor.record(_row(i))
            await store.entered.wait()
    assert auditor.failures == 4  # the batch at the gate and the rows behind it, each counted


async def test_the_writer_runs_once_at_a_time(store: GatedStore) -> None:
    auditor = Auditor(store, durable=False)
    async with auditor.running():
        with pytest.raises(RuntimeError, match="already running"):
            async with auditor.running():
                pass
    async with auditor.running():  # and may run again after it stopped
        await auditor.record(_row(1))
    assert await _requested(store) == ["op_1"]


# -- durable: the caller waits for its batch's commit (issue 12) ---------------------------------------------


async def test_durable_record_returns_once_its_row_is_committed(store: GatedStore) -> None:
    auditor = Auditor(store)
    assert auditor.durable
    store.gate = anyio.Event()
    async with auditor.running():
        returned = anyio.Event()

        async def call() -> None:
            await auditor.record(_row(1))
            assert await _requested(store) == ["op_1"]  # in the table when the answer would go back
            returned.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await store.entered.wait()
            await anyio.wait_all_tasks_blocked()
            assert not returned.is_set()  # held at the gate with its row
            store.gate.set()
    assert returned.is_set()
    assert auditor.failures == 0


async def test_durable_rows_recorded_meanwhile_commit_together(store: GatedStore) -> None:
    auditor = Auditor(store)
    store.gate = anyio.Event()
    done: list[int] = []

    async def call(i: int) -> None:
        await auditor.record(_row(i))
        done.append(i)

    async with auditor.running():
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, 0)
            await store.entered.wait()  # row 0's batch is being written
            for i in range(1, 51):
                tg.start_soon(call, i)
            await anyio.wait_all_tasks_blocked()
            assert done == []
            store.gate.set()
        assert store.batches == [1, 50]  # a group commit, not 51 commits
        assert sorted(done) == list(range(51))


async def test_durable_record_returns_when_its_batch_failed(store: GatedStore) -> None:
    auditor = Auditor(store)
    store.fail = True
    async with auditor.running():
        with anyio.fail_after(5):
            await auditor.record(_row(1))  # counted, never raised: the call was already decided
    assert auditor.failures == 1


async def test_durable_rows_are_written_by_the_caller_while_nothing_is_queued(
    store: GatedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit, "CHECKPOINT_EVERY", 3)
    auditor = Auditor(store)
    async with auditor.running():
        for i in range(7):
            await auditor.record(_row(i))
            assert (await _requested(store))[-1] == f"op_{i}"  # committed before record returned
        await auditor.flush()
    assert store.batches == []  # no row went through the writer
    assert store.checkpoints == 2  # the WAL upkeep, after rows 3 and 6, ran on the writer
    assert auditor.failures == 0


async def test_a_write_lock_held_elsewhere_sends_the_row_through_the_queue(store: GatedStore, tmp_path: Path) -> None:
    other = sqlite3.connect(tmp_path / "gateway.db", isolation_level=None)
    auditor = Auditor(store)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process mid-transaction
        async with auditor.running():
            returned = anyio.Event()

            async def call() -> None:
                await auditor.record(_row(1))
                returned.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await store.entered.wait()  # queued, never blocking the event loop on the lock
                assert not returned.is_set()
                other.rollback()
    finally:
        other.close()
    assert store.batches == [1]
    assert await _requested(store) == ["op_1"]
    assert auditor.failures == 0


async def test_started_rows_are_marked_interrupted_on_start(tmp_path: Path) -> None:
    settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": "k" * 40})
    settings.state_dir.mkdir(parents=True)
    async with SQLiteStore(settings.database) as s:
        await s.append_audit(_row(1).model_copy(update={"status": "started", "call_id": "x1"}))
        await s.append_audit(_row(2))
    manifest = parse_manifest(MANIFEST, base_dir=tmp_path)
    async with open_gateway(settings, manifest=manifest, clock=FixedClock()) as gw:
        rows = {r.requested: r.status for r in await gw.auditor.recent()}
    assert rows == {"op_1": "interrupted", "op_2": "ok"}


# -- through the whole gateway -------------------------------------------------------------------------------

MANIFEST = """
project: audited
default_mode: allow_all
public_url: http://127.0.0.1:1
connectors:
  - slug: local
    base_url: http://127.0.0.1:1
    source:
      http:
        actions:
          - path: items.get
            method: GET
            url: /items/{id}
            summary: Fetch one item
            input_schema: {type: object, required: [id], properties: {id: {type: string}}}
"""


async def test_open_gateway_writes_one_row_per_decision_in_the_background(tmp_path: Path) -> None:
    manifest = parse_manifest(MANIFEST, base_dir=tmp_path)
    settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": "k" * 40})
    async with open_gateway(settings, manifest=manifest, clock=FixedClock()) as gw:
        for batch in range(5):  # 16 at a time: the most one agent may have in flight (core/bounds.py)
            async with anyio.create_task_group() as tg:
                for i in range(batch * 8, batch * 8 + 8):
                    # Invalid arguments and unknown actions: decisions that need no upstream.
                    tg.start_soon(gw.call, OPERATOR, "local.items.get", {"id": i})
                    tg.start_soon(gw.call, OPERATOR, f"local.nothing_{i}", {})
        await gw.auditor.flush()
        assert len(await gw.auditor.recent(1000)) == 80
        for i in range(10):
            await gw.call(OPERATOR, "local.items.get", {"id": i})
        store_path = settings.database
    # Closed: the last ten were written on the way out, if not before.
    async with SQLiteStore(store_path) as store:
        rows = await store.list_audit(limit=1000)
    assert len(rows) == 90
    assert {r.reason for r in rows} == {"invalid_args", "action_not_found"}


# -- no answer without a durable record: retry, journal, replay -------------------------------------------


def _call(i: int, status: str = "ok") -> AuditRecord:
    return _row(i).model_copy(update={"call_id": f"c{i}", "status": status})


async def _until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(5):
        while not condition():  # noqa: ASYNC110 - the writer and the replay task have no event to wait on
            await anyio.sleep(0.01)


async def test_a_refused_outcome_is_retried_until_the_store_takes_it(store: GatedStore, tmp_path: Path) -> None:
    auditor = Auditor(store, journal=AuditJournal(tmp_path / "state"), retry_for=5)
    store.fail = True
    async with auditor.running():
        async with anyio.create_task_group() as tg:
            done: list[bool] = []

            async def call() -> None:
                done.append(await auditor.record(_call(1)))

            tg.start_soon(call)
            await _until(lambda: len(store.batches) >= 2)  # the first write and a retry failed
            assert done == []  # the answer waits for the record
            store.fail = False
        assert done == [True]
    assert (auditor.journaled, auditor.failures) == (0, 0)
    assert await _requested(store) == ["op_1"]


async def test_an_outcome_refused_past_the_window_is_journaled_then_replayed_once(
    store: GatedStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = AuditJournal(tmp_path / "state")
    auditor = Auditor(store, journal=journal, retry_for=0.2, replay_every=60)
    store.fail = True
    with caplog.at_level(logging.INFO):
        async with auditor.running():
            with anyio.fail_after(5):
                assert await auditor.record(_call(1)) is True  # durable: on the local disk
            assert (auditor.journaled, auditor.failures, auditor.journal_pending) == (1, 0, True)
            assert await _requested(store) == []
            store.fail = False
            assert await auditor.record(_call(2)) is True  # the store answers again: the replay starts
            await _until(lambda: auditor.replayed == 1)
            assert not auditor.journal_pending and not journal.pending()
            assert await auditor.replay() == 0  # exactly once
    assert sorted(await _requested(store)) == ["op_1", "op_2"]
    assert "journaled in" in caplog.text and "replayed 1 journaled outcome row" in caplog.text


class Down(GatedStore):
    """Refuses replays too while ``fail``, as a database that is down does."""

    async def replay_audits(self, records: Sequence[AuditRecord]) -> int:
        if self.fail:
            raise OSError("disk full")
        return await super().replay_audits(records)


async def test_journaling_through_an_outage_is_one_line_then_one_a_minute(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A busy gateway journals a row per call: a line each flooded the log for the whole outage.
    journal = AuditJournal(tmp_path / "state")
    store = Down(tmp_path / "down.db")
    await store.open()
    auditor = Auditor(store, journal=journal, retry_for=0.01, replay_every=60)
    store.fail = True
    with caplog.at_level(logging.WARNING, logger="mcp_gateway.services.audit"):
        async with auditor.running():
            for i in range(10):
                assert await auditor.record(_call(i)) is True
            said = [r.getMessage() for r in caplog.records if "journaled in" in r.getMessage()]
            assert len(said) == 1 and said[0].startswith("audit: the store refused 1 audit row(s)"), said
            store.fail = False
            assert await auditor.replay() == 10
            store.fail = True  # a second outage is told at once
            assert await auditor.record(_call(11)) is True
    await store.close()
    said = [r.getMessage() for r in caplog.records if "journaled in" in r.getMessage()]
    assert len(said) == 2 and "(11 so far)" in said[1], said


async def test_an_outcome_neither_the_store_nor_the_journal_takes_is_written_once_the_disk_has_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A full disk under both: the call's answer said its outcome was not recorded, and the audit kept
    # "started" for good (a restart then called it interrupted), one warning per call meanwhile.
    journal = AuditJournal(tmp_path / "state")
    store = Down(tmp_path / "down.db")
    await store.open()
    full = [True]
    append = journal.append

    def no_room(rows: Sequence[AuditRecord]) -> None:
        if full[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        append(rows)

    monkeypatch.setattr(journal, "append", no_room)
    auditor = Auditor(store, journal=journal, retry_for=0.01, replay_every=0.05)
    store.fail = True
    with caplog.at_level(logging.WARNING, logger="mcp_gateway.services.audit"):
        async with auditor.running():
            for i in range(3):
                assert await auditor.record(_call(i)) is False  # the agent is told it is not recorded
            store.fail, full[0] = False, False
            with anyio.fail_after(5):
                while len(await _requested(store)) < 3:  # noqa: ASYNC110 - the replay task writes them, no event
                    await anyio.sleep(0.02)
    assert sorted(await _requested(store)) == ["op_0", "op_1", "op_2"]
    await store.close()
    lost = [r.getMessage() for r in caplog.records if "audit write failed" in r.getMessage()]
    assert len(lost) == 1 and "kept in memory" in lost[0], lost


async def test_a_started_row_the_store_refuses_is_journaled_at_once(store: GatedStore, tmp_path: Path) -> None:
    # Its request waits to leave: no retries, and a record even if the process dies mid-call.
    journal = AuditJournal(tmp_path / "state")
    auditor = Auditor(store, journal=journal, retry_for=30)
    store.fail = True
    async with auditor.running():
        with anyio.fail_after(5):
            assert await auditor.record(_call(1, "started")) is True
    assert (auditor.journaled, auditor.failures) == (1, 0)
    assert journal.pending() and journal.call_ids() == set()  # its outcome is not known


async def test_a_journaled_start_without_an_outcome_is_marked_interrupted_at_the_next_start(
    store: GatedStore, tmp_path: Path
) -> None:
    # The store was down when the call left, and the process died before its outcome (no outcome row).
    journal = AuditJournal(tmp_path / "state")
    dying = Auditor(store, journal=journal, retry_for=0.05)
    store.fail = True
    async with dying.running():
        assert await dying.record(_call(1, "started")) is True
        assert await dying.record(_call(2, "started")) is True
        store.fail = False
        assert await dying.record(_call(2)) is True  # this one's outcome made it to the store
    # The next start: the journal is replayed, then the calls without an outcome are marked.
    assert await Auditor(store, journal=AuditJournal(tmp_path / "state")).interrupt_started() == 1
    rows = await store.list_audit()
    assert sorted((r.call_id, r.status) for r in rows) == [("c1", "interrupted"), ("c2", "ok")]


async def test_a_started_row_nobody_can_take_is_refused(store: GatedStore, tmp_path: Path) -> None:
    (tmp_path / "full").write_text("")  # the journal's folder cannot be made: a full or read-only disk
    auditor = Auditor(store, journal=AuditJournal(tmp_path / "full" / "state"), retry_for=0.05)
    store.fail = True
    async with auditor.running():
        assert await auditor.record(_call(1, "started")) is False
    assert (auditor.journaled, auditor.failures) == (0, 1)


async def test_without_durable_the_writer_journals_a_refused_batch(store: GatedStore, tmp_path: Path) -> None:
    journal = AuditJournal(tmp_path / "state")
    auditor = Auditor(store, durable=False, journal=journal)
    store.fail = True
    async with auditor.running():
        await auditor.record(_call(1, "started"))
        await auditor.record(_call(1))
        await auditor.flush()
    assert (auditor.journaled, auditor.failures) == (2, 0)  # the start too: nobody waited for either
    assert journal.call_ids() == {"c1"}


class Flaky(GatedStore):
    """Down (every write and replay refused) while ``fail``."""

    async def replay_audits(self, records: Sequence[AuditRecord]) -> int:
        if self.fail:
            raise OSError("still down")
        return await super().replay_audits(records)


async def test_a_journal_is_replayed_every_few_seconds_once_the_store_is_back_without_another_call(
    tmp_path: Path,
) -> None:
    # It waited for the next row the store committed: other instances' `audit` missed the call until then.
    async with Flaky(tmp_path / "gateway.db") as store:
        journal = AuditJournal(tmp_path / "state")
        auditor = Auditor(store, journal=journal, retry_for=0.1, replay_every=0.2)
        store.fail = True
        async with auditor.running():
            assert await auditor.record(_call(1)) is True
            assert auditor.journal_pending
            store.fail = False  # back; no call follows
            await _until(lambda: auditor.replayed == 1)
            assert not auditor.journal_pending and not journal.pending()
        assert await _requested(store) == ["op_1"]


class NoReplay(GatedStore):
    async def replay_audits(self, records: Sequence[AuditRecord]) -> int:
        raise OSError("still down")


@pytest.mark.parametrize("replays", [True, False])
async def test_recovery_never_marks_a_journaled_call_interrupted(tmp_path: Path, replays: bool) -> None:
    async with (GatedStore if replays else NoReplay)(tmp_path / "gateway.db") as store:
        journal = AuditJournal(tmp_path / "state")
        await store.append_audits([_call(1, "started"), _call(2, "started")])  # two calls in flight
        journal.append([_call(1)])  # c1 answered, its outcome journaled; c2 died with its gateway
        auditor = Auditor(store, journal=journal)  # the next start
        async with auditor.running():
            assert await auditor.interrupt_started() == 1
        statuses = {r.call_id: r.status for r in await store.list_audit()}
    assert statuses == {"c1": "ok" if replays else "started", "c2": "interrupted"}
    assert journal.pending() is not replays


async def test_a_stalled_postgres_holds_a_call_s_two_rows_one_wait_budget(postgres_url: str, tmp_path: Path) -> None:
    # Its started row, then its outcome row, each waited out the statement timeout (15 s) and the
    # outcome its retries too: 34 s before the agent heard anything. Both are journaled within one budget.
    import asyncpg

    from mcp_gateway.store.postgres import PostgresStore
    from mcp_gateway.store.wait_budget import request_budget

    journal = AuditJournal(tmp_path / "state")
    started = _row(1).model_copy(update={"call_id": "c1", "status": "started"})
    async with PostgresStore(postgres_url) as store:
        auditor = Auditor(store, journal=journal, retry_for=3.0)
        db = await asyncpg.connect(postgres_url)
        try:
            async with auditor.running():
                stall = db.transaction()
                await stall.start()
                await db.execute("LOCK TABLE audit_open IN ACCESS EXCLUSIVE MODE")
                began = anyio.current_time()
                with request_budget(1.0):
                    assert await auditor.record(started)
                    assert await auditor.record(started.model_copy(update={"status": "ok"}))
                assert anyio.current_time() - began < 2.5
                await stall.rollback()
        finally:
            await db.close()
        assert journal.call_ids() == {"c1"}
        assert await auditor.replay() >= 1
        assert [(r.call_id, r.status) for r in await store.list_audit(10)] == [("c1", "ok")]
