"""How far a running gateway's background embedding is, for the other processes of its state folder.

``serve`` embeds in the background what no ``sync`` embedded; while it does, it keeps its discovery
line (``discovery: hybrid (…; embedding 256 of 1,400 actions)``) in ``discovery-embedding.json`` in
the state folder, and removes the file when it is done. ``mcp-gateway connectors``, another process,
reads it back (whichever way it answers), so the operator sees the embedding run. Nothing heavy is
imported here: the command line's light path reads it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["LEXICAL_LINE", "PROGRESS_FILE", "clear_progress", "hybrid_line", "progress_elsewhere", "write_progress"]

PROGRESS_FILE = "discovery-embedding.json"

LEXICAL_LINE = "discovery: lexical only"
"""The discovery line when ``discover`` ranks by words alone."""


def hybrid_line(label: str, ready: int, scheduled: int, embedding: tuple[int, int] | None = None) -> str:
    """The discovery line when ``discover`` ranks by meaning too: the model (``label``), how many of
    the ``scheduled`` connectors are embedded, and how far a running embedding is."""
    if embedding is None:
        running = ""
    elif embedding[0] == 0:  # counted by finished batches: none yet (a small connector is one batch)
        running = f"; embedding {embedding[1]:,} actions"
    else:
        running = f"; embedding {embedding[0]:,} of {embedding[1]:,} actions"
    return f"discovery: hybrid ({label}; {ready} of {scheduled} connectors embedded{running})"


def write_progress(state_dir: Path, line: str) -> None:
    """Keep this process's discovery line for the others (replaced whole: a reader never sees half)."""
    target = state_dir / PROGRESS_FILE
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    try:
        partial.write_text(json.dumps({"pid": os.getpid(), "line": line}), encoding="utf-8")
        partial.replace(target)
    except OSError:
        pass  # a read-only or vanished folder: only the other processes' view is lost


def clear_progress(state_dir: Path) -> None:
    try:
        (state_dir / PROGRESS_FILE).unlink(missing_ok=True)
    except OSError:
        pass


def progress_elsewhere(state_dir: Path) -> str | None:
    """The discovery line another live process of ``state_dir`` is embedding under, else None."""
    try:
        kept = json.loads((state_dir / PROGRESS_FILE).read_text(encoding="utf-8"))
        pid, line = int(kept["pid"]), str(kept["line"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return None  # it ended mid-embedding: nothing runs now
    except OSError:
        pass  # it exists, under another user
    return line
