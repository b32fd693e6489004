"""A port already in use, said in one line: which port, and who holds it when that can be told.

Checked before the gateway is assembled, so ``serve --transport http`` and ``pages`` stop at once
with the reason instead of syncing every connector first and then failing inside uvicorn.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from ..vocabulary.served import read_served
from .output import EXIT_CONFIG, CliError

__all__ = ["check_port_free", "port_holder"]


def check_port_free(host: str, port: int, state_dir: Path, *, instead: str) -> None:
    """Raise ``CliError`` when ``host:port`` cannot be listened on. ``instead`` says how to pick
    another (``--port N``, ``--public-url URL``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As uvicorn binds: a port left in TIME_WAIT by a server just stopped is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                holder = port_holder(port, state_dir)
                by = f" by {holder}" if holder else ""
                raise CliError(f"port {port} on {host} is already in use{by}; {instead}", EXIT_CONFIG) from None
            if exc.errno == errno.EACCES:
                raise CliError(f"no permission to listen on port {port} on {host}; {instead}", EXIT_CONFIG) from None
            raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", EXIT_CONFIG) from None


def port_holder(port: int, state_dir: Path) -> str | None:
    """Who listens on ``port``: a gateway of this state folder, else a process of this user by pid and
    program name (Linux ``/proc``), else None."""
    served = read_served(state_dir)
    if served is not None and served.port == port:
        what = "mcp-gateway serve" if served.transport == "http" else "mcp-gateway pages"
        return f"{what} (pid {served.pid}, this state folder, at {served.url})"
    pid = _listening_pid(port)
    if pid is None:
        return None
    program = _program(pid)
    return f"pid {pid} ({program})" if program else f"pid {pid}"


def _program(pid: int) -> str:
    """The program's name alone (``python3``, ``nginx``): never the rest of its command line, whose
    arguments may hold another program's password."""
    try:
        first = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
    except OSError:
        return ""
    return Path(first.decode(errors="replace")).name[:40]


def _listening_pid(port: int) -> int | None:
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # another user's process, or gone
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return int(pid)
    return None


def _listening_inodes(port: int) -> set[str]:
    """The inodes of the sockets listening on ``port`` (``/proc/net/tcp*``, state 0A)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found
