"""A uvicorn server run in the test's own event loop, for as long as a ``with`` block lasts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import uvicorn


@asynccontextmanager
async def serving(server: uvicorn.Server) -> AsyncIterator[None]:
    """Serve ``server`` in a task (no signal handlers: the test's loop), enter once it listens, stop on exit."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(server._serve)  # pyright: ignore[reportPrivateUsage]  # ``serve`` would take the signals
        with anyio.fail_after(10):
            while not server.started:  # noqa: ASYNC110 - uvicorn offers no event to wait on
                await anyio.sleep(0.02)
        try:
            yield
        finally:
            server.should_exit = True
