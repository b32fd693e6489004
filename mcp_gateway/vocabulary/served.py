"""The served-address record: where a running gateway of this state folder serves its pages.

``serve --transport http`` (and ``pages``) write ``<state>/served.json`` once they listen and remove
it when they stop. A command run beside them (``connect``, ``call``) reads it, so the links it mints
point at the address actually served rather than at a default nothing listens on, and ``add`` or
``remove`` can tell whether the running server took the edit (it records the manifest it loaded).

A record whose process is gone, or whose port no longer answers, is stale (a killed server never
removed it) and is ignored. Standard library only: the CLI reads it without importing the gateway.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

__all__ = [
    "RECORD_NAME",
    "ServedAddress",
    "answers",
    "forget",
    "manifest_digest",
    "read_served",
    "record",
    "url_answers",
]

RECORD_NAME = "served.json"


@dataclass(frozen=True)
class ServedAddress:
    url: str
    """The base of the links the server hands out (its pages)."""
    pid: int
    host: str
    port: int
    transport: str
    """``http`` (MCP at ``<url>/mcp`` too) or ``pages`` (only the human pages)."""
    manifest: str
    """The manifest file it loaded (absolute), or ``bundled``."""
    manifest_digest: str
    """sha256 of that manifest's text as last loaded: a reload rewrites it."""


def record(state_dir: Path, served: ServedAddress) -> None:
    """Write the record atomically (a reader never sees half of it); the folder is made if need be."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = state_dir / RECORD_NAME
    tmp = path.with_name(f".{RECORD_NAME}.{os.getpid()}")
    tmp.write_text(json.dumps(asdict(served)), encoding="utf-8")
    tmp.replace(path)


def forget(state_dir: Path) -> None:
    """Remove the record if it is this process's (another server may have started since)."""
    path = state_dir / RECORD_NAME
    current = _load(path)
    if current is not None and current.pid == os.getpid():
        with contextlib.suppress(OSError):
            path.unlink()


def read_served(state_dir: Path, *, timeout: float = 0.3) -> ServedAddress | None:
    """The live record of this state folder, or None (none, unreadable, or stale)."""
    served = _load(state_dir / RECORD_NAME)
    if served is None or not _alive(served.pid) or not answers(served.host, served.port, timeout=timeout):
        return None
    return served


def answers(host: str, port: int, *, timeout: float = 0.3) -> bool:
    """Whether something accepts TCP connections at ``host:port`` (a wildcard bind is tried on loopback)."""
    target = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
    try:
        with socket.create_connection((target.strip("[]"), port), timeout=timeout):
            return True
    except OSError:
        return False


def url_answers(url: str, *, timeout: float = 0.3) -> bool:
    """Whether something listens where ``url`` points (its host and port)."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    return bool(parts.hostname) and answers(parts.hostname or "", port, timeout=timeout)


def manifest_digest(path: Path | None) -> str:
    """sha256 of the manifest file's bytes (``bundled`` for the bundled default; empty when unreadable)."""
    if path is None:
        return "bundled"
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _load(path: Path) -> ServedAddress | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return ServedAddress(**data)
    except (OSError, ValueError, TypeError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it exists
    except OSError:
        return False
    return True
