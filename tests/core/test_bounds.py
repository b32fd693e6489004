"""Bounds on what one agent can hold open (issue 13, item 6): concurrent calls and ``wait`` sleepers
past their caps are answered ``error``/``rate_limited`` with a message that says what to do."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from mcp_gateway.core import result_payload
from mcp_gateway.core.bounds import Slots
from mcp_gateway.identity import OPERATOR

from .test_gateway import Harness, harness

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    async with harness(tmp_path) as built:
        yield built


def test_slots_are_all_or_nothing_and_given_back() -> None:
    slots = Slots(2)
    assert slots.take("a", "s") and slots.take("a", "s")
    assert not slots.take("a", "t") and slots.held("t") == 0  # nothing taken when one key is full
    slots.give("a", "s")
    with slots.holding("a") as taken:
        assert taken and slots.held("a") == 2
    assert slots.held("a") == 1


async def test_calls_past_the_cap_are_rate_limited(h: Harness) -> None:
    h.gateway.bounds.calls.limit = 1
    key = f"agent:{OPERATOR.label}"
    assert h.gateway.bounds.calls.take(key)  # one call of this agent is running
    refused = result_payload(await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"}))
    assert refused["status"] == "error" and refused["reason"] == "rate_limited"
    assert "calls running" in refused["message"]
    h.gateway.bounds.calls.give(key)
    assert result_payload(await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"}))["status"] == "ok"
    await h.auditor.flush()
    assert "rate_limited" in [r.reason for r in await h.store.list_audit(10)]


async def test_wait_sleepers_past_the_cap_do_not_sleep(h: Harness) -> None:
    h.gateway.bounds.waits.limit = 1
    sleeping = anyio.Event()

    async def on_pending(_: object) -> None:
        sleeping.set()

    async def waiting() -> None:
        await h.gateway.call(OPERATOR, "api.items.create", {"name": "a"}, wait=30, on_pending=on_pending)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiting)
        with anyio.fail_after(10):
            await sleeping.wait()
        assert h.gateway.bounds.waits.held(OPERATOR.label) == 1
        second = result_payload(await h.gateway.call(OPERATOR, "api.items.create", {"name": "b"}, wait=30))
        assert second["status"] == "error" and second["reason"] == "rate_limited"
        assert "approval_id" in str(second["message"]) and "waiting for a human's approval" in str(second["message"])
        tg.cancel_scope.cancel()
    assert h.gateway.bounds.waits.held(OPERATOR.label) == 0  # given back on cancellation
