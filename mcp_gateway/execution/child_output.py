"""What a stdio upstream writes besides the protocol -- its stderr, and stray lines on its stdout --
as log records, redacted and escaped.

A child started with a credential in its environment may print it: a debug line, a crash dump of
its environment, a base64 ``Authorization`` header. Inherited, its stderr would be the gateway's
own (the log an operator reads, the output of ``connectors`` or ``doctor``), bypassing the log's
secret filter and its format. So the child writes into a pipe instead, and a reader thread turns
each line into one log record under the connector's name: every form of every secret this process
has opened redacted (``logs.known_secrets``, the same set the log filter uses), control and invisible
characters escaped, cut at ``MAX_LINE``. One record a line keeps the log's format (one JSON object
a line with ``--log-format json``); WARNING keeps it visible at the default level, where "its stderr
is in the gateway's log" sends the operator.

A stdout line that is not JSON-RPC is read by the MCP SDK, which logs a parse error carrying a
pydantic traceback whose ``input_value`` is the line cut in its middle: a secret across the cut
would no longer match any form the filter knows, and its first half would be logged. ``StrayStdout``
rewrites that record from the whole line (``ValidationError.errors()`` keeps it), redacted and
escaped the same way, on one line and without the SDK's traceback. A line that is JSON-RPC nested
deeper than the SDK parses is not stray: ``mcp_answers`` reads it again and logs what it did with it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final, TextIO

import anyio
from pydantic import ValidationError

from ..primitives.escapes import escaped
from ..services.logs import known_secrets

__all__ = ["MAX_LINE", "StrayStdout", "child_stderr"]

logger = logging.getLogger(__name__)

MAX_LINE: Final = 4000
"""Bytes of one stderr line that are logged; the rest of a longer line is dropped (a child that
writes megabytes without a newline must not grow the gateway's memory or one log record)."""
LAST_WORDS: Final = 0.5
"""Seconds the block's end waits for the reader to log what the child wrote before it ended (a
crash's last lines belong before the gateway's own word on it); a grandchild that keeps the pipe
open is not waited for longer."""


@asynccontextmanager
async def child_stderr(slug: str) -> AsyncIterator[TextIO]:
    """The write end of a pipe to give a child as its stderr; its lines are logged for ``slug``
    (and the SDK's record of a stray stdout line is rewritten, ``StrayStdout``).

        Close it once the child is started (the child holds its own copy): the reader ends when every
        copy is closed. Leaving the block closes it too, started or not, and waits ``LAST_WORDS`` at
        most for the reader to end."""
    _STRAY.install()
    read_fd, write_fd = os.pipe()
    try:
        writer = os.fdopen(write_fd, "w")
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    reader = threading.Thread(target=_read, args=(read_fd, slug), name=f"stderr of {slug}", daemon=True)
    try:
        reader.start()
    except BaseException:
        os.close(read_fd)
        writer.close()
        raise
    try:
        yield writer
    finally:
        writer.close()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(reader.join, LAST_WORDS)


def _read(read_fd: int, slug: str) -> None:
    budget = _Budget()
    try:
        with os.fdopen(read_fd, "rb") as pipe:
            cut = False
            while line := pipe.readline(MAX_LINE):
                long = len(line) >= MAX_LINE and not line.endswith(b"\n")  # else the last line, unended
                if not cut and budget.take(slug):
                    _log(slug, line.decode("utf-8", "replace").rstrip("\r\n"), cut=long)
                cut = long  # the rest of a long line, up to its newline, is dropped
        budget.settle(slug)
    except Exception:  # a thread's uncaught error would be printed raw on stderr, outside the log
        logger.warning("stopped reading the stderr of %s's MCP server", slug, exc_info=True)


LINES_PER_SECOND: Final = 20
"""Stderr lines of one child logged per second, after a burst of ``BURST_LINES``: the pipe is still
read whole (a child blocks on a full pipe), but a child that writes megabytes does not write them
into the gateway's log; what is dropped is counted there."""
BURST_LINES: Final = 200


class _Budget:
    """A token bucket of log lines for one child's stderr."""

    def __init__(self) -> None:
        self.tokens = float(BURST_LINES)
        self.last = time.monotonic()
        self.dropped = 0

    def take(self, slug: str) -> bool:
        now = time.monotonic()
        self.tokens = min(float(BURST_LINES), self.tokens + (now - self.last) * LINES_PER_SECOND)
        self.last = now
        if self.tokens < 1:
            self.dropped += 1
            return False
        self.tokens -= 1
        self.settle(slug)
        return True

    def settle(self, slug: str) -> None:
        """Say how many lines were dropped since the last that was logged."""
        if self.dropped:
            logger.warning(
                "%s's MCP server wrote %d more stderr lines than the log takes (%d a second); they were not logged",
                slug,
                self.dropped,
                LINES_PER_SECOND,
                extra={"connector": slug},
            )
            self.dropped = 0


def _shown(text: str, *, cut: bool) -> str:
    # A cut may split a secret: the redactor then drops a tail that starts one.
    return escaped(known_secrets().redact(text, truncated=cut)) + (" [cut]" if cut else "")


def _log(slug: str, text: str, *, cut: bool) -> None:
    if not text.strip():
        return
    shown = _shown(text, cut=cut)
    logger.warning("%s's MCP server (stderr): %s", slug, shown, extra={"connector": slug})


_SDK_PARSE_ERROR: Final = "Failed to parse JSONRPC message from server"
_SDK_LOGGER: Final = "mcp.client.stdio"


class StrayStdout(logging.Filter):
    """On the SDK's stdio logger: its parse-error record for a stdout line that is not JSON-RPC,
    rewritten from the whole line (redacted, escaped, cut at ``MAX_LINE``), without the traceback."""

    def install(self) -> None:
        sdk = logging.getLogger(_SDK_LOGGER)
        if self not in sdk.filters:
            sdk.addFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _SDK_PARSE_ERROR or not record.exc_info:
            return True
        exc = record.exc_info[1]
        errors = exc.errors() if isinstance(exc, ValidationError) else []
        line = errors[0].get("input") if errors else None
        if errors and errors[0].get("type") == "json_invalid" and "recursion limit" in errors[0].get("msg", ""):
            # A message nested deeper than the SDK's parser goes: ``mcp_answers`` reads it and logs what it did.
            return False
        if isinstance(line, str):
            cut = len(line) > MAX_LINE
            shown = _shown(line[:MAX_LINE], cut=cut)
            record.msg, record.args = "%s: a line on its stdout is not JSON-RPC: %s", (_SDK_PARSE_ERROR, shown)
        else:  # not the shape expected: its kind only, for the SDK's message may quote the line
            record.msg, record.args = "%s (%s)", (_SDK_PARSE_ERROR, type(exc).__name__)
        record.exc_info, record.exc_text = None, None
        return True


_STRAY = StrayStdout()
