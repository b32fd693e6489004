"""``Catalogs``: the review decisions behind the quarantine are read from the store only when one
was taken, here or by another process on the same database."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.store.contract import ActionReviewRecord
from mcp_gateway.store.sqlite import SQLiteStore
from tests.core.test_gateway import harness, manifest_text

pytestmark = pytest.mark.anyio


class CountingStore(SQLiteStore):
    """Counts the full reads of the decisions (every snapshot, parsed)."""

    reads = 0

    async def list_action_reviews(self) -> list[ActionReviewRecord]:
        self.reads += 1
        return await super().list_action_reviews()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_decisions_are_read_again_only_after_one_was_taken_elsewhere(tmp_path: Path) -> None:
    reviewed = manifest_text().replace(
        "base_url: http://open.test\n", "base_url: http://open.test\n    trust: review\n"
    )
    async with harness(tmp_path, reviewed, store_cls=CountingStore) as h:
        assert isinstance(h.store, CountingStore)
        held = h.gateway._catalogs.quarantined("open.things.list")
        assert held is not None
        before = h.store.reads
        for _ in range(3):
            await h.gateway.discover(OPERATOR, "list the things")
            await h.gateway.describe(OPERATOR, "api.items.get")
        assert h.store.reads == before  # nothing decided: no snapshot read

        # `mcp-gateway review` (or another instance) approves it through its own connection.
        other = SQLiteStore(tmp_path / "s.db")
        await other.open()
        try:
            await other.put_action_review(
                ActionReviewRecord(
                    name=held.name,
                    fingerprint=held.fingerprint,
                    decision="approved",
                    snapshot="{}",
                    decided_at=h.clock.now(),
                    decided_by="cli",
                )
            )
        finally:
            await other.close()
        found = await h.gateway.discover(OPERATOR, "list the things")
        assert h.store.reads == before + 1
        assert h.gateway._catalogs.quarantined("open.things.list") is None
        assert "open.things.list" in str(found)
        await h.gateway.discover(OPERATOR, "list the things")
        assert h.store.reads == before + 1


async def test_a_sync_warns_of_each_connector_that_failed_to_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = manifest_text() + (
        "  - slug: billing\n"
        "    base_url: http://billing.test\n"
        "    source: {openapi: https://user:CANARY-pw@specs.test/billing.json?access_token=CANARY-tok}\n"
    )
    with caplog.at_level(logging.WARNING, logger="mcp_gateway.core.catalogs"):
        async with harness(tmp_path, broken) as h:
            warned = [r.getMessage() for r in caplog.records if "failed to load" in r.getMessage()]
            assert len(warned) == 1 and warned[0].startswith("connector billing failed to load: https://user:***@")
            assert "CANARY" not in warned[0]
            caplog.clear()
            await h.gateway.reload(h.gateway.manifest)
    assert [r.getMessage() for r in caplog.records if "failed to load" in r.getMessage()] == warned
