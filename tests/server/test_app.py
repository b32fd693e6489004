"""What ``serve`` does to the process once started (``server/app.py``): the heap settled once; under
stdio, a minted link handed out only once its page answers."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from mcp_gateway.server import app
from mcp_gateway.server.app import YOUNG_COLLECTION_THRESHOLD, StdioPages, _settle_heap  # pyright: ignore[reportPrivateUsage]
from mcp_gateway.vocabulary.errors import LinksUnavailable
from mcp_gateway.vocabulary.served import ServedAddress, record


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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # as serve runs


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port another program listens on (a squatter, or a gateway of another state folder)."""
    with socket.create_server(("127.0.0.1", 0)) as other:
        yield other.getsockname()[1]


@pytest.mark.anyio
async def test_pages_never_share_a_port_another_program_listens_on(held_port: int) -> None:
    # Whatever listens there would receive what a human pastes: the pages move to a free port.
    pages = StdioPages()
    sock = await pages.claim(f"http://127.0.0.1:{held_port}")
    assert sock is not None and pages.unavailable is None
    with sock:
        moved = sock.getsockname()[1]
        assert moved != held_port and sock.getsockname()[0] == "127.0.0.1"


@pytest.mark.anyio
async def test_pages_at_an_address_the_operator_chose_are_refused_when_another_program_holds_it(
    held_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    pages = StdioPages(chosen=True)
    assert await pages.claim(f"http://127.0.0.1:{held_port}") is None
    assert pages.unavailable is not None and f"127.0.0.1:{held_port}" in pages.unavailable
    assert "public_url" in pages.unavailable and "no link is handed out" in caplog.text
    pages.done.set()
    with pytest.raises(LinksUnavailable, match="No link was handed out"):
        await pages.wanted()


@pytest.mark.anyio
async def test_pages_at_a_free_port_are_bound_there(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    sock = await StdioPages(tmp_path, chosen=True).claim(f"http://127.0.0.1:{port}")
    assert sock is not None
    with sock:
        assert sock.getsockname()[1] == port


@pytest.mark.anyio
async def test_pages_a_gateway_of_this_state_folder_serves_are_left_to_it(tmp_path: Path, held_port: int) -> None:
    base = f"http://127.0.0.1:{held_port}"
    record(tmp_path, ServedAddress(base, os.getpid(), "127.0.0.1", held_port, "http", "bundled", ""))
    pages = StdioPages(tmp_path, chosen=True)
    assert await pages.claim(base) is None and pages.unavailable is None


@pytest.mark.anyio
async def test_the_metrics_listener_stops_quietly_when_the_gateway_stops(caplog: pytest.LogCaptureFixture) -> None:
    import httpx2

    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    gateway: Any = SimpleNamespace(operators=None)  # the routes read the rest per request; none is made here
    before = asyncio.all_tasks()
    with caplog.at_level(logging.DEBUG):
        async with anyio.create_task_group() as tg:
            tg.start_soon(app.serve_metrics, gateway, "127.0.0.1", port)
            async with httpx2.AsyncClient() as client:
                for _ in range(200):
                    try:
                        await client.get(f"http://127.0.0.1:{port}/nothing")
                        break
                    except httpx2.TransportError:
                        await anyio.sleep(0.02)
                else:
                    pytest.fail("the metrics listener never answered")
            tg.cancel_scope.cancel()  # what a SIGTERM to serve does to it
        await anyio.sleep(0.1)
        # A task the listener left behind is cancelled as the process exits, and uvicorn logs that as an
        # ERROR with a traceback (its lifespan task did): none is left.
        left = {t for t in asyncio.all_tasks() - before if t is not asyncio.current_task() and not t.done()}
        assert left == set()
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
