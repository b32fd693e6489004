"""What a path is when it is no regular file: a directory, a named pipe, a device or a socket.

Files named by an operator (the manifest, the specs it points at) are read whole. Read as a file, a
named pipe no one writes to waits for ever and a device such as ``/dev/zero`` never ends, so every
reader asks first and refuses in words.
"""

from __future__ import annotations

import stat
from pathlib import Path

__all__ = ["not_a_file"]


def _kind_of_mode(mode: int) -> str | None:
    """What a path of ``mode`` (``st_mode``) is when it is no regular file; None when it is one."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "no regular file"


def not_a_file(path: Path) -> str | None:
    """What ``path`` is when it is no regular file (None when it is one), following symlinks.

    Raises:
        OSError: ``path`` cannot be looked at (``FileNotFoundError`` when there is nothing there).
    """
    return _kind_of_mode(path.stat().st_mode)
