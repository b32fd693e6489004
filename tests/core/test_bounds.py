"""Bounds on what one agent can hold open: concurrent calls and ``wait`` sleepers past their caps
are answered ``error``/``rate_limited`` with a message that says what to do; the caps are the
manifest's ``agent_limits`` (validated, located when wrong, adopted on reload)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from mcp_gateway.core import result_payload
from mcp_gateway.core.bounds import Slots
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.vocabulary.errors import ManifestError

from .test_gateway import Harness, Upstream, harness, manifest_text

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
    assert "already has 1 call running" in refused["message"]  # one call, not "1 calls"
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


async def _at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, calls: int, gather: int
) -> list[dict[str, Any]]:
    """``calls`` calls of one agent started together; the upstream holds each request until
    ``gather`` of them have arrived, so every call admitted is running when the last one asks."""
    arrived, all_in = 0, anyio.Event()
    answer = Upstream.__call__

    async def gathered(self: Upstream, request: httpx2.Request) -> httpx2.Response:
        nonlocal arrived
        arrived += 1
        if arrived == gather:
            all_in.set()
        await all_in.wait()
        return await answer(self, request)

    monkeypatch.setattr(Upstream, "__call__", gathered)
    results: list[dict[str, Any]] = []

    async def one() -> None:
        results.append(result_payload(await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})))

    async with harness(tmp_path, text) as h:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(calls):
                    tg.start_soon(one)
    return results


async def test_agent_limits_let_thirty_two_calls_of_one_agent_run_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = manifest_text() + "agent_limits: {running_calls: 32}\n"
    results = await _at_once(tmp_path, monkeypatch, text, calls=32, gather=32)
    assert [r["status"] for r in results] == ["ok"] * 32


async def test_by_default_the_seventeenth_running_call_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = await _at_once(tmp_path, monkeypatch, manifest_text(), calls=17, gather=16)
    refused = [r for r in results if r["status"] != "ok"]
    assert len(results) == 17 and len(refused) == 1
    assert refused[0]["reason"] == "rate_limited"
    assert "already has 16 calls running" in refused[0]["message"]
    assert "agent_limits.running_calls" in refused[0]["hint"]


def test_bad_agent_limits_are_located() -> None:
    text = manifest_text() + "agent_limits:\n  running_calls: 0\n  waiting: 3\n"
    with pytest.raises(ManifestError) as caught:
        parse_manifest(text, file="m.yaml")
    issues = caught.value.issues
    assert [i.field for i in issues] == ["agent_limits.running_calls", "agent_limits.waiting"]
    assert all(i.file == "m.yaml" and i.line is not None and i.fix for i in issues)
    assert "waiting_calls" in str(issues[1].fix)  # the setting it probably meant


async def test_a_reload_adopts_new_agent_limits(h: Harness) -> None:
    assert (h.gateway.bounds.calls.limit, h.gateway.bounds.waits.limit) == (16, 8)
    key = f"agent:{OPERATOR.label}"
    assert h.gateway.bounds.calls.take(key)  # held across the reload
    raised = "agent_limits: {running_calls: 40, waiting_calls: 2, watchers_per_session: 3, watchers_per_agent: 5}\n"
    await h.gateway.reload(parse_manifest(manifest_text() + raised, base_dir=h.gateway.manifest.base_dir))
    bounds = h.gateway.bounds
    assert (bounds.calls.limit, bounds.waits.limit) == (40, 2)
    assert (bounds.watchers_per_session.limit, bounds.watchers_per_agent.limit) == (3, 5)
    assert bounds.calls.held(key) == 1
