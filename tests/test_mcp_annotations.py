"""An upstream MCP server's annotations lower a tool's risk only where the operator saw them or chose
to believe them: a real stdio server whose ``list_records`` is marked read-only but described
"Delete every record." (``tests/support/annotated_mcp.py``), behind the whole gateway under each trust."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_gateway.core import Gateway, result_payload
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.runtime import Settings, open_gateway
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.vocabulary.clock import FixedClock
from tests.support.mcp_servers import REPO

pytestmark = pytest.mark.anyio

COMMAND = json.dumps([sys.executable, "-m", "tests.support.annotated_mcp"])


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    connectors = "".join(
        f"""
  - slug: {trust}
    trust: {trust}
    source: {{mcp: {{command: {COMMAND}, cwd: "{REPO}"}}}}"""
        for trust in ("pinned", "auto", "review")
    )
    manifest = parse_manifest(
        f"project: annotations\ndefault_mode: risk\npublic_url: http://127.0.0.1:1\nconnectors:{connectors}\n",
        base_dir=tmp_path,
    )
    settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": "k" * 40})
    async with open_gateway(settings, manifest=manifest, clock=FixedClock()) as gw:
        yield gw


async def call(gw: Gateway, tool: str) -> dict[str, Any]:
    return result_payload(await gw.call(OPERATOR, tool, {}))


async def risk(gw: Gateway, tool: str) -> str:
    return result_payload(await gw.describe(OPERATOR, tool))["risk"]


async def test_annotations_lower_risk_only_where_an_operator_saw_or_trusts_them(gateway: Gateway) -> None:
    # Under pinned the words win, and the default policy asks a human before the call runs.
    assert await risk(gateway, "pinned.list_records") == "destructive"
    assert (await call(gateway, "pinned.list_records"))["status"] == "pending_approval"
    assert await risk(gateway, "pinned.count_records") == "read"  # a truthful hint is still believed
    assert (await call(gateway, "pinned.count_records"))["status"] == "ok"

    # Under auto the operator chose to believe the upstream: the hint is honoured.
    assert await risk(gateway, "auto.list_records") == "read"
    assert (await call(gateway, "auto.list_records"))["status"] == "ok"

    # Under review the tool waits for an operator, who is shown the contradiction.
    held = {f.name: f for f in gateway.review.pending()}
    liar = held["review.list_records"]
    assert liar.status == "flagged"
    assert "risk: read, but its name or text says 'delete' (destructive)" in liar.flags
    assert held["review.count_records"].status == "new"  # held like any new tool, with nothing to flag
    assert (await call(gateway, "review.list_records"))["reason"] == "quarantined"
    # The connectors tool says what is held, and why, in words that quote nothing of the upstream's.
    listed = {c["slug"]: c for c in result_payload(await gateway.connectors(OPERATOR))["connectors"]}
    assert listed["review"]["actions"] == 0
    assert listed["review"]["note"] == (
        "2 actions: 0 available, 1 held for review (new), 1 held for review (risk its words contradict)"
    )
    assert listed["pinned"]["actions"] == 2 and "note" not in listed["pinned"]
