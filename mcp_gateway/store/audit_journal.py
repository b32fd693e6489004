"""``AuditJournal``: audit rows the store could not take, kept on the local disk until it can.

An answer never goes back without a durable record of it (``audit.Auditor``). When the database
refuses a call's outcome row for longer than the retry window, or its ``started`` row before the
request leaves, the row is appended here: one JSON
line per row, in the state folder, fsynced before the append returns. The row is the audit row
itself (``AuditRecord``: arguments already redacted and capped), so the journal holds exactly what
the audit table would, never a secret.

``replay`` hands the rows to ``AuditStore.replay_audits``, which appends each one the log does not
hold yet (keyed by the call's id and instant): replaying twice, or again after a crash between the
store's commit and the journal's removal, adds nothing. Replay takes the journal's whole content at
once by renaming it to ``audit-journal.replaying.jsonl`` (appends then start a new file), and removes
that file only after the store committed its rows; a replay that fails leaves it for the next one.

Files, all in the state folder (created 0700 when first needed; PostgreSQL needs no state folder
otherwise), each 0600:

- ``audit-journal.jsonl``: the appends.
- ``audit-journal.replaying.jsonl``: the rows a replay took, until the store has them.
- ``audit-journal.rejected.jsonl``: lines that were not a row (a write torn by a crash or a full
  disk), kept for an operator rather than deleted; the rows around them are replayed.
- ``audit-journal.lock``: an advisory lock (``flock``) that keeps an append from landing in a file
  a replay is taking, across threads and processes sharing the folder; a second one,
  ``audit-journal.replay.lock``, keeps two replays of one folder apart.

A torn last line (a crash mid-append) never costs the lines before it: each line stands alone, an
append after a torn one starts on a new line, and the torn one is set aside as rejected.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Generator, Sequence
from pathlib import Path

import anyio
from pydantic import ValidationError

from .contract import AuditRecord, AuditStore

try:  # POSIX; elsewhere one process per state folder is assumed
    import fcntl
except ImportError:  # pragma: no cover - not on the platforms the gateway ships for
    fcntl = None  # type: ignore[assignment]

__all__ = ["JOURNAL_NAME", "AuditJournal"]

logger = logging.getLogger(__name__)

JOURNAL_NAME = "audit-journal.jsonl"
_REPLAYING = "audit-journal.replaying.jsonl"
_REJECTED = "audit-journal.rejected.jsonl"
_LOCK = "audit-journal.lock"
_REPLAY_LOCK = "audit-journal.replay.lock"
REPLAY_BATCH = 200
"""Rows handed to the store in one transaction during a replay."""


class AuditJournal:
    """The append-only journal of audit rows in ``folder`` (the gateway's state folder)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / JOURNAL_NAME
        self._replaying = folder / _REPLAYING
        self._rejected = folder / _REJECTED
        self._threads = threading.Lock()
        self._replay = anyio.Lock()

    def __repr__(self) -> str:
        return f"AuditJournal({str(self.folder)!r})"

    # -- appending -----------------------------------------------------------------------------------

    def append(self, rows: Sequence[AuditRecord]) -> None:
        """Append ``rows``, one line each, and fsync them; the lines are on disk when this returns.
        Blocking (a disk write and an fsync): call it from a worker thread.

        Raises:
            OSError: the folder or file cannot be created or written (a full disk, a read-only
                folder); nothing of ``rows`` counts as journaled then.
        """
        if not rows:
            return
        data = b"".join(row.model_dump_json().encode() + b"\n" for row in rows)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self._locked(_LOCK):
            created = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)  # read: its last byte
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # after a torn line: ours starts a line of its own
                try:
                    _write_all(fd, data)
                    os.fsync(fd)
                except OSError:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, size)  # no half line left behind to tear the next append
                    raise
            finally:
                os.close(fd)
            if created:
                _fsync_folder(self.folder)  # the new file's name is durable too

    # -- reading -------------------------------------------------------------------------------------

    def pending(self) -> bool:
        """Whether rows may be waiting for a replay (a journal or a replay's file exists)."""
        return self.path.exists() or self._replaying.exists()

    def call_ids(self) -> set[str]:
        """The call ids of the outcome rows waiting for a replay: calls whose outcome is known, which
        the start-up recovery must not mark ``interrupted`` (a journaled ``started`` row alone says
        nothing of its outcome). Blocking (reads the files)."""
        if not self.folder.is_dir():
            return set()
        with self._locked(_LOCK):
            rows = [r for p in (self._replaying, self.path) for r in self._read(p, reject=False)]
        return {r.call_id for r in rows if r.call_id is not None and r.status != "started"}

    # -- replaying -----------------------------------------------------------------------------------

    async def replay(self, store: AuditStore) -> int:
        """Hand every journaled row to ``store`` (``replay_audits``), then forget them; how many rows
        the store appended (rows it already held are not counted). Returns 0 at once while another
        process replays this folder.

        Raises:
            Exception: whatever the store raised (it is down again): the rows stay journaled.
            OSError: the journal cannot be read or renamed.
        """
        async with self._replay:
            with self._try_locked(_REPLAY_LOCK) as mine:
                if not mine:
                    return 0
                added = 0
                while True:
                    rows = await anyio.to_thread.run_sync(self._take)
                    if rows is None:
                        return added
                    for start in range(0, len(rows), REPLAY_BATCH):
                        added += await store.replay_audits(rows[start : start + REPLAY_BATCH])
                    await anyio.to_thread.run_sync(self._forget)

    def _take(self) -> list[AuditRecord] | None:
        """The rows of the replay's file, moving the journal there first unless a failed replay left
        one; None when there is nothing to replay."""
        if not self.folder.is_dir():
            return None
        with self._locked(_LOCK):
            if not self._replaying.exists():
                if not self.path.exists():
                    return None
                os.replace(self.path, self._replaying)
                _fsync_folder(self.folder)
            return self._read(self._replaying, reject=True)

    def _forget(self) -> None:
        """The store has the replay's rows: remove its file."""
        self._replaying.unlink(missing_ok=True)
        _fsync_folder(self.folder)

    def _read(self, path: Path, *, reject: bool) -> list[AuditRecord]:
        """The rows in ``path``; lines that are not a row are skipped (and, with ``reject``, copied to
        the rejected file and logged: a torn write, or a line nobody can read)."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        rows: list[AuditRecord] = []
        bad: list[bytes] = []
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                rows.append(AuditRecord.model_validate_json(line))
            except ValidationError:
                bad.append(line)
        if bad and reject:
            _append_synced(self._rejected, b"".join(line + b"\n" for line in bad))
            # Only rows stay behind: a replay that fails now does not set the same lines aside twice.
            _replace_synced(path, b"".join(row.model_dump_json().encode() + b"\n" for row in rows))
            logger.warning(
                "audit journal: %d line(s) were not a row (a torn write?); kept in %s, the other %d row(s) replayed",
                len(bad),
                self._rejected.name,
                len(rows),
            )
        return rows

    # -- locking -------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, name: str) -> Generator[None]:
        """Exclusive across this process's threads and, through ``flock``, other processes."""
        with self._threads:
            if fcntl is None:
                yield
                return
            fd = os.open(self.folder / name, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the lock

    @contextlib.contextmanager
    def _try_locked(self, name: str) -> Generator[bool]:
        """``flock`` without waiting: True when this process holds it for the block."""
        if fcntl is None or not self.folder.is_dir():
            yield True
            return
        fd = os.open(self.folder / name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _append_synced(path: Path, data: bytes) -> None:
    _write_synced(path, data, os.O_APPEND)


def _replace_synced(path: Path, data: bytes) -> None:
    """``path`` now holds ``data``, whole (written beside it, fsynced, renamed over it)."""
    temporary = path.with_name(f".{path.name}.tmp")
    _write_synced(temporary, data, os.O_TRUNC)
    os.replace(temporary, path)
    _fsync_folder(path.parent)


def _write_synced(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | mode, 0o600)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    """Make a file's creation, rename or removal in ``folder`` durable (POSIX; a no-op elsewhere)."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
