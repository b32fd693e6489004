"""A TCP proxy on loopback that a test can cut: the network between a gateway and its database.

    with CuttableProxy(5432) as proxy:          # 127.0.0.1:<proxy.port> -> 127.0.0.1:5432
        ...                                     # clients connect to proxy.port
        proxy.cut()                             # every connection reset, new ones closed at once
        proxy.restore()                         # forwarding again

It runs an asyncio loop in a thread of its own, so ``cut`` and ``restore`` may be called from any
thread (a test's body, an upstream's handler in uvicorn's thread) and return once they took effect.
A cut resets connections (``abort``: the client sees the connection drop at once, as when a
database stops or a link fails), and accepts then closes any new one, so a client fails fast rather
than waiting for a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self

__all__ = ["CuttableProxy"]

_CHUNK = 65536


class CuttableProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self._target = (target_host, target_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.cut_now = False
        self.cuts = 0
        self.port = 0

    def __enter__(self) -> Self:
        self._thread.start()
        self._call(self._start())
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._call(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def cut(self) -> None:
        """Reset every connection and refuse new ones until ``restore``."""
        self._call(self._cut())

    def restore(self) -> None:
        self._call(self._restore())

    def _call(self, coroutine: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        await self._cut()
        if self._server is not None:
            self._server.close()

    async def _cut(self) -> None:
        self.cut_now = True
        self.cuts += 1
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    async def _restore(self) -> None:
        self.cut_now = False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_now:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        pair = {writer, up_writer}
        self._open |= pair
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            self._open -= pair
            for w in pair:
                w.transport.abort()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(_CHUNK):
                writer.write(data)
                await writer.drain()
        writer.transport.abort()  # one side ended: so does the other
