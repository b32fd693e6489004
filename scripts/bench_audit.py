"""The durable audit's store writes alone: one call's ``started`` row, then its outcome, each
committed before the next, as ``Gateway.call`` does for a call that reaches the upstream.

SQLite (default): through ``SQLiteStore.append_audits_now``, the caller-thread write the ``Auditor``
uses, on a file already holding ``--rows`` finished rows, with the ``Auditor``'s WAL checkpoint
every ``CHECKPOINT_EVERY`` rows counted in (run beside the calls, as the ``Auditor``'s writer task
does: calls keep committing while it copies and syncs); also the WAL frames (pages) a call writes,
and the size of the WAL file at the end. PostgreSQL (``--database-url``): through
``PostgresStore.append_audit``, one round trip per row. Prints the CPU
per call of this process (the minimum and median over rounds: other processes only ever add to
it), the wall time per call, and the load average, which bounds what these figures mean.

Usage (from the repo root): python scripts/bench_audit.py [--calls 2000] [--rounds 5] [--rows 20000]
    [--database-url postgresql://...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp_gateway.services.audit import CHECKPOINT_EVERY  # noqa: E402
from mcp_gateway.store import AuditRecord, SQLiteStore  # noqa: E402


def _row(call_id: str, status: str) -> AuditRecord:
    return AuditRecord.model_validate(
        {
            "at": datetime.now(UTC),
            "user": "operator",
            "agent": None,
            "requested": "bench.items.get",
            "connector": "bench",
            "action": "bench.items.get",
            "args_preview": '{"id":"1"}',
            "fingerprint": "f" * 64,
            "verdict": "always_run",
            "verdict_source": "risk_default",
            "status": status,
            "upstream_status": 200 if status == "ok" else None,
            "latency_ms": 0.5,
            "call_id": call_id,
        }
    )


def _calls(n: int) -> list[tuple[AuditRecord, AuditRecord]]:
    return [(_row(c, "started"), _row(c, "ok")) for c in (uuid.uuid4().hex for _ in range(n))]


def _report(store: str, cpu: list[float], wall: list[float], extra: str = "") -> None:
    load = Path("/proc/loadavg").read_text().split()[0]
    print(
        f"{store}: started + outcome per call, CPU min {min(cpu):.1f} median {statistics.median(cpu):.1f} µs, "
        f"wall median {statistics.median(wall):.1f} µs{extra}; load average {load}"
    )


async def sqlite(opts: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        path = Path(tmp) / "state.db"
        async with SQLiteStore(path) as store:
            for start in range(0, opts.rows, 50):
                await store.append_audits([_row(uuid.uuid4().hex, "ok") for _ in range(min(50, opts.rows - start))])
            await store.checkpoint_audits()
            cpu: list[float] = []
            wall: list[float] = []
            housekeeping = _Housekeeping(store)
            async with anyio.create_task_group() as tg:
                for _ in range(opts.rounds):
                    calls = _calls(opts.calls)
                    rows = 0
                    c0, w0 = time.process_time(), time.perf_counter()
                    for started, outcome in calls:
                        for row in (started, outcome):
                            if not store.append_audits_now((row,)):
                                await store.append_audits([row])  # the Auditor's queued path: after the lock
                            rows += 1
                            if rows % CHECKPOINT_EVERY == 0:
                                housekeeping.ask(tg)
                        # A call awaits its upstream here: the loop runs, and so does the housekeeping.
                        await anyio.lowlevel.checkpoint()
                    cpu.append((time.process_time() - c0) / opts.calls * 1e6)
                    wall.append((time.perf_counter() - w0) / opts.calls * 1e6)
            wal_mb = (path.parent / f"{path.name}-wal").stat().st_size / 1e6
            # Pages a call writes: after a checkpoint with nothing else writing, the WAL starts over
            # with the next write, so the frames a checkpoint then reports are the calls' alone.
            await store.checkpoint_audits()
            for started, outcome in _calls(100):
                store.append_audits_now((started,))
                store.append_audits_now((outcome,))
            pages = await _wal_frames(store) / 100
            _report("SQLite", cpu, wall, f", {pages:.2f} WAL pages, WAL file {wal_mb:.1f} MB at the end")


class _Housekeeping:
    """The ``Auditor``'s housekeeping: run by its writer task every ``CHECKPOINT_EVERY`` rows, one at a
    time, while calls go on writing (a request to run while one runs is dropped, as a full queue's)."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._running = False

    def ask(self, tg: anyio.abc.TaskGroup) -> None:
        if not self._running:
            self._running = True
            tg.start_soon(self._run)

    async def _run(self) -> None:
        try:
            await self._store.checkpoint_audits()
        finally:
            self._running = False


async def _wal_frames(store: SQLiteStore) -> int:
    result = await store._fetchall("PRAGMA wal_checkpoint(PASSIVE)")  # pyright: ignore[reportPrivateUsage]
    return int(next(iter(result))[1])


async def postgres(opts: argparse.Namespace) -> None:
    from mcp_gateway.store.postgres import PostgresStore

    async with PostgresStore(opts.database_url) as store:
        await store.append_audits([_row(uuid.uuid4().hex, "ok") for _ in range(min(opts.rows, 2000))])
        cpu: list[float] = []
        wall: list[float] = []
        for _ in range(opts.rounds):
            calls = _calls(opts.calls)
            c0, w0 = time.process_time(), time.perf_counter()
            for started, outcome in calls:
                await store.append_audit(started)
                await store.append_audit(outcome)
            cpu.append((time.process_time() - c0) / opts.calls * 1e6)
            wall.append((time.perf_counter() - w0) / opts.calls * 1e6)
        _report("PostgreSQL", cpu, wall)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=2000, help="calls per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rows", type=int, default=20000, help="finished rows in the table before measuring")
    p.add_argument("--database-url", help="a PostgreSQL URL (a database of its own: rows are added to it)")
    return p.parse_args()


if __name__ == "__main__":
    options = parse_args()
    anyio.run(postgres if options.database_url else sqlite, options)
