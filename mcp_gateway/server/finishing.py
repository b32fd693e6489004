"""Every request a stdio client sent before closing stdin is answered before the session ends.

The SDK's session ends at its read stream's end and cancels what is still running: a request being
handled is answered ``Connection closed``, one whose task had not started yet is never answered at
all. A client that writes its requests and closes stdin at once (``cat requests | mcp-gateway
serve``, a pipelined client) would lose its last ones. ``finishing`` stands between the transport and
the session: it notes each request passed on and each answer written, and holds the end of the
client's stream back until every request read has been answered: at most ``FINISH_SECONDS``, and
no longer once the server asks the client something (an elicitation), which no answer can reach now.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

import anyio
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

__all__ = ["FINISH_SECONDS", "finishing"]

FINISH_SECONDS = 10.0
"""Seconds the requests still running at the client's EOF have to be answered (the HTTP transport's
default drain on SIGTERM); those running longer are then cut, answered ``Connection closed``."""


class _Ledger:
    """The requests read and not answered yet, and whether the server waits on the client."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.open: set[int | str] = set()
        self.asking = False
        self.settled: anyio.Event | None = None  # made at the client's EOF, set when nothing is left to wait for

    def done(self) -> bool:
        return not self.open or self.asking

    def check(self) -> None:
        if self.settled is not None and self.done():
            self.settled.set()

    async def finish(self) -> None:
        if self.done():
            return
        self.settled = anyio.Event()
        with anyio.move_on_after(self.seconds):
            await self.settled.wait()


class _Reader:
    """The session's read stream: the transport's, whose end waits for the answers (``_Ledger``)."""

    def __init__(self, inner: Any, ledger: _Ledger) -> None:
        self._inner = inner
        self._ledger = ledger

    @property
    def last_context(self) -> Any:  # duck-typed by the SDK: the sender's context, when the stream keeps one
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._inner.receive()
        except anyio.EndOfStream:
            await self._ledger.finish()
            raise
        if isinstance(item, SessionMessage):
            message = item.message
            if isinstance(message, JSONRPCRequest):
                self._ledger.open.add(message.id)
            elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
                cancelled = (message.params or {}).get("requestId")  # never answered: nothing to wait for
                if isinstance(cancelled, int | str):
                    self._ledger.open.discard(cancelled)
        return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _Writer:
    """The session's write stream: the transport's, noting each answer once it is handed over."""

    def __init__(self, inner: Any, ledger: _Ledger) -> None:
        self._inner = inner
        self._ledger = ledger

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(item)
        message = item.message
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self._ledger.open.discard(message.id)
        elif isinstance(message, JSONRPCRequest):
            self._ledger.asking = True
        self._ledger.check()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        await self.aclose()


def finishing(read_stream: Any, write_stream: Any, *, seconds: float = FINISH_SECONDS) -> tuple[_Reader, _Writer]:
    """The session's streams over the transport's: the read stream ends only once every request read
    has been answered, or ``seconds`` after the transport's end, or the server asked the client something."""
    ledger = _Ledger(seconds)
    return _Reader(read_stream, ledger), _Writer(write_stream, ledger)
