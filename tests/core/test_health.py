"""Store outages and metrics in the core (issue 12 items 2 and 3): a store that cannot be reached
answers ``store_unavailable`` with a hint (through ``call`` and through the MCP meta-tools), logs
the outage once when it starts and once when it ends, and ``StoreHealth.ready`` follows it; every
call is counted in the gateway's metrics by connector, status and reason."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_gateway.core import health as health_module
from mcp_gateway.core import result_payload
from mcp_gateway.server.tools import build_mcp_server
from mcp_gateway.store.audit_journal import AuditJournal
from mcp_gateway.store.contract import AuditRecord
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.errors import StoreUnavailable

from .test_gateway import OPERATOR, Harness, harness

pytestmark = pytest.mark.anyio


class OutageStore(SQLiteStore):
    """An SQLite store whose every statement fails as an unreachable database while ``down``."""

    down = False

    def _check(self) -> None:
        if OutageStore.down:
            raise StoreUnavailable("the SQLite database test.db cannot be used (disk I/O error)")

    async def _execute(self, sql: str, params: Sequence[object] = ()) -> int:
        self._check()
        return await super()._execute(sql, params)

    async def _fetchone(self, sql: str, params: Sequence[object] = ()) -> Any:
        self._check()
        return await super()._fetchone(sql, params)

    async def _fetchall(self, sql: str, params: Sequence[object] = ()) -> Iterable[Any]:
        self._check()
        return await super()._fetchall(sql, params)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_an_outage_answers_store_unavailable_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    OutageStore.down = False
    async with harness(tmp_path, store_cls=OutageStore) as h:
        gateway = h.gateway
        assert (await gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "ok"
        assert await gateway.health.ready()
        OutageStore.down = True
        with caplog.at_level(logging.WARNING):
            for _ in range(3):  # a write asks for an approval: a store write
                result = result_payload(await gateway.call(OPERATOR, "api.items.create", {"name": "x"}))
                assert result["status"] == "error" and result["reason"] == "store_unavailable"
                assert "Retry" in result["hint"]
            async with Client(build_mcp_server(gateway, default_principal=OPERATOR)) as client:
                answer = await client.call_tool("connectors", {})
                assert answer.is_error
                assert answer.structured_content is not None
                assert answer.structured_content["reason"] == "store_unavailable"
            gateway.health._checked_at = float("-inf")  # past the readiness cache
            assert not await gateway.health.ready()
            OutageStore.down = False
            assert (await gateway.call(OPERATOR, "api.items.get", {"id": "3"})).status == "ok"
        warnings = [r.getMessage() for r in caplog.records if r.name == "mcp_gateway.store"]
        assert len(warnings) == 2, warnings
        assert warnings[0].startswith("store unavailable: the SQLite database test.db cannot be used")
        assert warnings[1].startswith("store reachable again after")
        assert "Traceback" not in caplog.text

        text = (await gateway.scrape.render()).decode()
        ok = 'mcp_gateway_calls_total{connector="api",reason="none",risk="read",status="ok"} 2.0'
        down = 'mcp_gateway_calls_total{connector="api",reason="store_unavailable",risk="write",status="error"} 3.0'
        assert ok in text and down in text
        assert 'mcp_gateway_upstream_seconds_count{connector="api"} 2.0' in text
        assert 'mcp_gateway_tool_requests_total{tool="connectors"} 1.0' in text
        assert "mcp_gateway_store_up 1.0" in text
        assert 'mcp_gateway_connector_ready{connector="api"} 1.0' in text


class AuditRefused(SQLiteStore):
    """Refuses audit rows while ``down`` (a disk that filled up, then was freed); every other write works."""

    down = False

    async def append_audit(self, record: AuditRecord) -> None:
        if AuditRefused.down:
            raise OSError("disk full")
        await super().append_audit(record)

    async def append_audits(self, records: Sequence[AuditRecord]) -> None:
        if AuditRefused.down:
            raise OSError("disk full")
        await super().append_audits(records)


@asynccontextmanager
async def journaling(tmp_path: Path, store_cls: type[SQLiteStore]) -> AsyncIterator[Harness]:
    """A harness whose refused audit rows go to a journal, ``AuditRefused.down`` reset whatever happens."""
    try:
        async with harness(tmp_path, store_cls=store_cls, journal=AuditJournal(tmp_path / "state")) as h:
            yield h
    finally:
        AuditRefused.down = False


def store_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mcp_gateway.store"]


async def test_calls_journaled_in_an_outage_do_not_say_the_store_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    AuditRefused.down = True
    async with journaling(tmp_path, AuditRefused) as h:
        with caplog.at_level(logging.WARNING):
            for _ in range(2):  # each runs: its rows go to the journal
                assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "ok"
            assert not h.gateway.health.up
            said = store_lines(caplog)
            assert len(said) == 1 and said[0].startswith("store unavailable: SQLiteStore("), said
            assert "refused an audit write: OSError" in said[0] and str(tmp_path) in said[0]
            AuditRefused.down = False
            assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "2"})).status == "ok"
            assert h.gateway.health.up
        said = store_lines(caplog)
        assert len(said) == 2 and said[1].startswith("store reachable again after"), said


class WritesRefused(AuditRefused):
    """A full disk: every read works, every write fails, while ``down``."""

    async def _execute(self, sql: str, params: Sequence[object] = ()) -> int:
        if AuditRefused.down:
            raise StoreUnavailable("the SQLite database test.db cannot be used (database or disk is full)")
        return await super()._execute(sql, params)


async def test_readiness_after_a_refused_write_asks_a_write_not_a_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    AuditRefused.down = False
    async with journaling(tmp_path, WritesRefused) as h:
        health = h.gateway.health
        assert await health.ready()
        AuditRefused.down = True
        with caplog.at_level(logging.WARNING):
            assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "ok"  # journaled
            for _ in range(2):  # a read would answer: readiness stays down while writes fail
                health._checked_at = float("-inf")
                assert not await health.ready()
            AuditRefused.down = False
            health._checked_at = float("-inf")
            assert await health.ready()
        said = store_lines(caplog)
        assert len(said) == 2 and said[1].startswith("store reachable again after"), said


async def test_a_wait_cut_short_by_an_outage_is_audited_as_what_the_agent_was_told(tmp_path: Path) -> None:
    OutageStore.down = False
    try:
        async with harness(tmp_path, store_cls=OutageStore, journal=AuditJournal(tmp_path / "state")) as h:

            async def database_stops(_pending: object) -> None:
                h.clock.advance(1)  # a replayed row with the same instant as a stored one is taken for it
                OutageStore.down = True

            answer = result_payload(
                await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"}, wait=30, on_pending=database_stops)
            )
            assert answer["status"] == "error" and answer["reason"] == "store_unavailable", answer
            assert "nothing was run" in answer["message"] and "approval_id=" in answer["message"]
            assert h.upstream.requests == []
            OutageStore.down = False
            await h.gateway.auditor.flush()
            await h.gateway.auditor.replay()
            rows = [r for r in await h.store.list_audit(10) if r.requested == "api.items.create"]
            assert [r.status for r in rows] == ["error", "pending_approval"], rows
            assert rows[0].reason == "store_unavailable"
    finally:
        OutageStore.down = False


class ReadOnlyFile(SQLiteStore):
    """Every write fails as SQLite fails on a read-only file (or folder) while ``down``; reads work."""

    down = False

    async def _execute(self, sql: str, params: Sequence[object] = ()) -> int:
        if ReadOnlyFile.down:
            raise self._outage(sqlite3.OperationalError("attempt to write a readonly database"))
        return await super()._execute(sql, params)

    async def append_audits(self, records: Sequence[AuditRecord]) -> None:
        if ReadOnlyFile.down:
            raise self._outage(sqlite3.OperationalError("attempt to write a readonly database"))
        await super().append_audits(records)

    async def append_audit(self, record: AuditRecord) -> None:
        await self.append_audits([record])


async def test_a_read_only_database_is_logged_with_its_cause_and_the_agent_is_not_told_to_retry_soon(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    try:
        async with harness(tmp_path, store_cls=ReadOnlyFile, journal=AuditJournal(tmp_path / "state")) as h:
            ReadOnlyFile.down = True
            with caplog.at_level(logging.WARNING):
                assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "ok"  # journaled
                refused = result_payload(await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"}))
        said = store_lines(caplog)
        assert len(said) == 1, said
        assert str(tmp_path / "s.db") in said[0] and "attempt to write a readonly database" in said[0], said
        assert "the file or its folder is read-only; check their owner and permissions" in said[0]
        assert refused["reason"] == "store_unavailable" and "Traceback" not in str(refused)
        assert "Retrying soon will not help" in refused["hint"] and "Retry in a few seconds" not in refused["hint"]
    finally:
        ReadOnlyFile.down = False


async def test_a_long_outage_is_summarized_and_its_end_said_before_what_the_replay_took(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    AuditRefused.down = True
    async with journaling(tmp_path, AuditRefused) as h:
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "ok"
            assert len(store_lines(caplog)) == 1  # three calls, one line
            monkeypatch.setattr(health_module, "SUMMARY_EVERY", 0.0)  # as if a minute went by
            assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "2"})).status == "ok"
            monkeypatch.setattr(health_module, "SUMMARY_EVERY", 60.0)
            summary = store_lines(caplog)[1:]
            assert summary and all(line.startswith("store still unavailable after") for line in summary), summary
            assert "audit row write(s) refused so far" in summary[0], summary
            AuditRefused.down = False
            assert await h.gateway.auditor.replay() > 0
        lines = [r.getMessage() for r in caplog.records]
        back = next(i for i, line in enumerate(lines) if line.startswith("store reachable again after"))
        replayed = next(i for i, line in enumerate(lines) if line.startswith("audit: replayed"))
        assert back < replayed, lines
        assert "0 request(s) answered store_unavailable" in lines[back] and "audit row write(s) refused" in lines[back]


def test_an_outage_that_comes_and_goes_within_seconds_is_one_outage_in_the_log(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lock on one table fails some statements while others pass: the log read "unavailable",
    # "reachable again after 0.0 s", "unavailable" in turns, several times a second.
    health = health_module.StoreHealth(None, where="the PostgreSQL database at db")
    stalled = StoreUnavailable("the PostgreSQL database at db did not answer within 5 s (a lock held elsewhere)")
    with caplog.at_level(logging.WARNING):
        for _ in range(5):
            health.failed(stalled)
            assert not health.up
            health.succeeded()
            assert health.up  # readiness follows each answer
        lines = store_lines(caplog)
        assert len(lines) == 2 and lines[0].startswith("store unavailable:") and "a lock held" in lines[0], lines
        monkeypatch.setattr(health_module, "STEADY_FOR", 0.0)  # as if it held for a while
        health.succeeded()
        health.succeeded()
    lines = store_lines(caplog)
    assert len(lines) == 3 and "without a failure" in lines[2] and "5 request(s)" in lines[2], lines
