"""What a stdio upstream writes to stderr, read line by line into the gateway's log.

A child started with a credential in its environment may print it: a debug line, a crash dump of
its environment, a base64 ``Authorization`` header. Inherited, its stderr would be the gateway's
own (the log an operator reads, the output of ``connectors`` or ``doctor``), bypassing the log's
secret filter and its format. So the child writes into a pipe instead, and a reader thread turns
each line into one log record under the connector's name: every form of every secret this process
has opened redacted (``logs.known_secrets``, the same set the log filter uses), control and invisible
characters escaped, cut at ``MAX_LINE``. One record a line keeps the log's format (one JSON object
a line with ``--log-format json``); WARNING keeps it visible at the default level, where "its stderr
is in the gateway's log" sends the operator.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final, TextIO

import anyio

from ..escapes import escaped
from ..logs import known_secrets

__all__ = ["MAX_LINE", "child_stderr"]

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
    """The write end of a pipe to give a child as its stderr; its lines are logged for ``slug``.

    Close it once the child is started (the child holds its own copy): the reader ends when every
    copy is closed. Leaving the block closes it too, started or not, and waits ``LAST_WORDS`` at
    most for the reader to end."""
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
    with os.fdopen(read_fd, "rb") as pipe:
        cut = False
        while line := pipe.readline(MAX_LINE):
            long = len(line) >= MAX_LINE and not line.endswith(b"\n")  # else the last line, unended
            if not cut:
                _log(slug, line.decode("utf-8", "replace").rstrip("\r\n"), cut=long)
            cut = long  # the rest of a long line, up to its newline, is dropped


def _log(slug: str, text: str, *, cut: bool) -> None:
    if not text.strip():
        return
    # A cut may split a secret: the redactor then drops a tail that starts one.
    shown = escaped(known_secrets().redact(text, truncated=cut)) + (" [cut]" if cut else "")
    logger.warning("%s's MCP server (stderr): %s", slug, shown, extra={"connector": slug})
