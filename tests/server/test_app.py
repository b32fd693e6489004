"""What ``serve`` does to the process once started (``server/app.py``): the heap settled once; under
stdio, a minted link handed out only once its page answers."""

from __future__ import annotations

import gc
import time
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from mcp_gateway.server import app
from mcp_gateway.server.app import YOUNG_COLLECTION_THRESHOLD, StdioPages, _settle_heap  # pyright: ignore[reportPrivateUsage]


def test_the_start_is_frozen_once_and_young_collections_come_less_often() -> None:
    threshold = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    try:
        gc.set_threshold(700, 10, 10)
        _settle_heap()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, 10, 10)
        gc.set_threshold(700, 10, 10)
        _settle_heap()  # once per process: a second server in it changes nothing
        assert gc.get_threshold() == (700, 10, 10)
        gc.unfreeze()
        gc.set_threshold(0, 10, 10)
        _settle_heap()
        assert gc.get_threshold() == (0, 10, 10)  # collection switched off stays off
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.anyio
async def test_a_minted_link_waits_for_the_pages_server_to_listen() -> None:
    pages = StdioPages()
    server: Any = SimpleNamespace(started=False)

    async def start_slowly() -> None:
        await pages.requested.wait()
        pages.server = server
        await anyio.sleep(0.3)  # jinja2 and uvicorn loading on a busy host
        server.started = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(start_slowly)
        began = time.monotonic()
        await pages.wanted()
        assert server.started and time.monotonic() - began >= 0.25
    began = time.monotonic()
    await pages.wanted()  # listening already: the next link is handed out at once
    assert time.monotonic() - began < 0.1


@pytest.mark.anyio
async def test_a_link_waits_no_longer_once_the_pages_cannot_be_served(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = StdioPages()
    pages.done.set()  # another gateway serves them, or serving failed: nothing to wait for
    began = time.monotonic()
    await pages.wanted()
    assert time.monotonic() - began < 0.1
    monkeypatch.setattr(app, "PAGES_WAIT", 0.2)
    stuck = StdioPages()  # a server that never starts: the link goes out after PAGES_WAIT
    stuck.server = SimpleNamespace(started=False)  # pyright: ignore[reportAttributeAccessIssue]
    began = time.monotonic()
    await stuck.wanted()
    assert 0.15 <= time.monotonic() - began < 2
