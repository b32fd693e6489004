"""Which gateway processes on one state folder are alive, told by lock files the OS lets go of.

Every open store of a state folder holds an exclusive ``flock`` on a file of its own in
``<state>/instances/`` for as long as it is open. The kernel releases the lock when the process
ends, however it ends (a crash, a SIGKILL, a power cut's reboot), so a file whose lock can be taken
belongs to a gateway that is gone. A starting gateway asks this before it marks the calls a gone
one left without an outcome ``interrupted``: a call another running gateway (a second stdio session,
``serve`` beside a CLI command) has in flight is not its to mark.

An instance's id is the first ``ID_CHARS`` characters of the call ids it hands out; ids written by
builds before this one name no lock file, so their calls count as left by a gone gateway, as they
always did.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

logger = logging.getLogger("mcp_gateway.store")

ID_CHARS = 8
"""Hex characters of an instance id: 31 random bits (PostgreSQL's advisory lock key is a signed int4)."""


def new_instance_id() -> str:
    return f"{secrets.randbelow(2**31):0{ID_CHARS}x}"


def instance_of(call_id: str) -> str:
    """The instance id a call id begins with."""
    return call_id[:ID_CHARS]


def _is_instance_id(name: str) -> bool:
    return len(name) == ID_CHARS and all(c in "0123456789abcdef" for c in name)


class InstanceLocks:
    """The lock files of one state folder's running gateways (``folder``: ``instances`` beside the database file)."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._held: tuple[str, int] | None = None

    @property
    def instance(self) -> str | None:
        """This store's instance id while it holds its lock; None when it could not take one."""
        return self._held[0] if self._held is not None else None

    def claim(self) -> str | None:
        """Take a new instance id and hold its lock until ``release``; the id, or None when the folder
        cannot hold lock files (read-only, full): then no call of this instance is ever told apart, and
        another start may mark them ``interrupted`` (their outcome still replaces the mark)."""
        if self._held is not None:
            return self._held[0]
        for _ in range(3):
            instance = new_instance_id()
            try:
                self._folder.mkdir(mode=0o700, exist_ok=True)
                fd = os.open(self._folder / instance, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                logger.debug("no instance lock file in %s (%s)", self._folder, exc.strerror)
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                # A sweeping gateway may have taken the new file for a dead one's and removed it
                # between its creation and this lock: then it is held under no name; take another.
                if os.fstat(fd).st_ino == os.stat(self._folder / instance).st_ino:
                    self._held = (instance, fd)
                    break
            except OSError:
                pass
            os.close(fd)
        else:
            return None
        self._sweep()
        return self._held[0]

    def release(self) -> None:
        if self._held is None:
            return
        instance, fd = self._held
        self._held = None
        with contextlib.suppress(OSError):
            (self._folder / instance).unlink()
        os.close(fd)  # the lock goes with the last descriptor

    def alive(self, instances: Iterable[str]) -> set[str]:
        """Of ``instances``, those a running process (this one included) holds the lock of."""
        return {instance for instance in set(instances) if _is_instance_id(instance) and self._held_elsewhere(instance)}

    def _held_elsewhere(self, instance: str) -> bool:
        if self._held is not None and self._held[0] == instance:
            return True
        try:
            fd = os.open(self._folder / instance, os.O_RDWR)
        except OSError:
            return False  # no file: its gateway stopped cleanly, or never had one
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        else:
            with contextlib.suppress(OSError):
                (self._folder / instance).unlink()  # its gateway is gone: the file is litter
            return False
        finally:
            os.close(fd)

    def _sweep(self) -> None:
        """Remove the files of gateways that died (a lock anyone can take), so the folder stays small."""
        try:
            names = [entry.name for entry in os.scandir(self._folder)]
        except OSError:
            return
        for name in names:
            if _is_instance_id(name):
                self._held_elsewhere(name)
