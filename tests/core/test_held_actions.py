"""``HeldActions``: the operator's side of the quarantine — what is held, a decision on it, and a
decision another instance took, seen once asked to ``refresh``."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_gateway.manifest import parse_manifest
from mcp_gateway.runtime import Settings, open_gateway
from mcp_gateway.services.identity import OPERATOR
from tests.test_runtime import HIDING, KEY

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_decision_elsewhere_counts_once_refreshed(tmp_path: Path) -> None:
    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, state_dir=str(tmp_path))
    manifest = parse_manifest(HIDING, base_dir=tmp_path)
    async with (
        open_gateway(settings, manifest=manifest, embed=False) as here,
        open_gateway(settings, manifest=manifest, embed=False) as there,
    ):
        [held] = here.review.pending()
        assert held.name == "notes.notes.list" and held.status == "flagged"
        assert (await here.describe(OPERATOR, held.name)).status == "denied"  # quarantined: not shown
        assert await there.review.decide("notes.nothing", approve=True, by="test") is None
        assert await there.review.decide(held.name, approve=True, by="test") == held
        assert there.review.pending() == []
        assert here.review.pending() == [held]  # not re-read yet
        await here.review.refresh()
        assert here.review.pending() == []
        assert here.review.withheld() == {}  # no upstream failed with text kept from agents
