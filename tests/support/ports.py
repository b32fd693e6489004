"""A free loopback port for a process that a test starts later, picked below the kernel's ephemeral range.

A port found by binding to port 0 comes from the ephemeral range. That is also where every later bind
to 0 (an upstream the other xdist worker starts) and every outgoing connection draw their ports, so in
the seconds before the gateway binds the port, one of them can take it. The kernel never hands out a
port below that range by itself: only another pick like this one could collide with it, and the bind
check rules out a port already in use.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port"]

_LOWEST = 20000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    end = _ephemeral_start()
    if end - _LOWEST >= 1000:
        pick = random.SystemRandom()
        for _ in range(200):
            port = pick.randrange(_LOWEST, end)
            if _bindable(port):
                return port
    with socket.socket() as s:  # no room below the ephemeral range: the kernel's choice
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
