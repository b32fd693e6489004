"""Store outages and metrics in the core (issue 12 items 2 and 3): a store that cannot be reached
answers ``store_unavailable`` with a hint (through ``call`` and through the MCP meta-tools), logs
the outage once when it starts and once when it ends, and ``StoreHealth.ready`` follows it; every
call is counted in the gateway's metrics by connector, status and reason."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_gateway.core import result_payload
from mcp_gateway.server.tools import build_mcp_server
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.errors import StoreUnavailable

from .test_gateway import OPERATOR, harness

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
