"""What every command shares: the user-phrased error, the exit codes, and the two output shapes
(a table for people, JSON with ``--json``). Imports nothing heavy: ``--help`` and ``--version`` load it.

Agents and upstreams choose much of what a command prints (tool names, arguments, summaries, error
messages): ``table`` and ``print_json`` escape control and invisible characters in every value they
print, and a command writing such a string in its own text passes it through ``escaped`` first.
Only text the gateway itself wrote is printed as it is."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..primitives.escapes import escaped, escaped_json

__all__ = [
    "EXIT_CONFIG",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_STORE",
    "CliError",
    "escaped",
    "holding_collector",
    "link_hint",
    "print_json",
    "started",
    "table",
]

EXIT_OK = 0
"""The command did what was asked (a call's status ok, needs_auth or pending_approval)."""
EXIT_FAILED = 1
"""The operation failed: a call denied or in error, a connector that failed to sync, a problem found."""
EXIT_CONFIG = 2
"""Usage or configuration error: a bad option, an unreadable or invalid manifest, an unknown id."""
EXIT_STORE = 3
"""The state store cannot be opened (database unreachable, state folder not writable)."""


class CliError(Exception):
    """An error already phrased for the user; printed without a traceback, exiting with ``code``."""

    def __init__(self, message: str, code: int = EXIT_CONFIG) -> None:
        super().__init__(message)
        self.code = code


def print_json(data: Any) -> None:
    import json

    # json.dumps escapes C0 controls itself; escaped_json does the rest (DEL, C1, bidi, zero-width, tags).
    sys.stdout.write(escaped_json(json.dumps(data, indent=2, ensure_ascii=False, default=str)) + "\n")


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    cells = [[("" if v is None else escaped(str(v))) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    # Cap every column but the last, which is usually the one with the reason in it.
    widths = [min(w, 60) for w in widths[:-1]] + widths[-1:]
    line = "  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))
    sys.stdout.write(line.rstrip() + "\n")
    for row in cells:
        out = "  ".join((v if len(v) <= w else v[: w - 1] + "…").ljust(w) for v, w in zip(row, widths, strict=True))
        sys.stdout.write(out.rstrip() + "\n")


def link_hint(data: Any, public_url: str) -> str | None:
    """How to open a link minted from the command line, or None when the answer carries none.

    A link is served by a running gateway at ``public_url``; a CLI command exits right after
    minting it, so the human needs ``serve --transport http`` or ``pages`` running to open it.
    """
    if not isinstance(data, dict):
        return None
    found = (data.get(k) for k in ("connect_url", "approval_url", "url"))
    links = [u for u in found if isinstance(u, str) and u.startswith(public_url)]
    if not links:
        return None
    return (
        f"to open {links[0]} the pages must be served at {public_url}: keep `mcp-gateway pages` "
        "(or `mcp-gateway serve --transport http`) running with the same manifest and state folder"
    )


_held = False


@contextmanager
def holding_collector(*, exiting: bool = False) -> Iterator[None]:
    """The cyclic garbage collector off for the command's start (``started`` turns it back on), and as
    it was before once the command returns (``main`` also runs inside test processes).

    ``exiting``: the process ends once the command returns. Everything allocated meanwhile is moved
    out of the collector's sight (``gc.freeze``) before it comes back on: its first pass would walk
    every object of the run, and the interpreter's pass at exit again, to free
    nothing that exit does not free anyway."""
    global _held
    if not gc.isenabled():
        yield
        return
    gc.disable()
    _held = True
    try:
        yield
    finally:
        _held = False
        if exiting:
            gc.freeze()
        gc.enable()


def started() -> None:
    """A long-running command is up: the collector runs again (a one-shot command ends first)."""
    global _held
    if _held:
        _held = False
        gc.enable()
