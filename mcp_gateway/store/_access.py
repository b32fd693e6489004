"""What every call reads (credentials, bearer tokens), kept in memory while the database says it
has not changed.

The call path looks up the caller's sealed credential and, over HTTP, the bearer token's record on
every request. Through aiosqlite each lookup is a hop to its worker thread and back (a thread
wake-up each way, dearer on a loaded machine); two of them per call were most of the gateway's own cost.

Correctness rests on one counter. Migration 4 adds the ``generation`` table and triggers that bump
its ``access`` row inside the same transaction as every insert, update or delete of ``credential``
or ``token`` rows, whoever writes them: this process, ``mcp-gateway secret set`` or ``token revoke``
in another, an older build (triggers live in the schema), or a hand-typed UPDATE. Before answering
from memory, ``AccessCache.ticket`` reads that counter; if it moved, everything cached is dropped.
So a revoked token stops working on the very next request, and a secret set from the CLI is used
by the next call; there is no time-based staleness at all.

The counter is read on a synchronous ``sqlite3`` connection, on the event loop itself: one indexed
point read in WAL mode, where readers never wait for writers, several times cheaper than the
cheapest aiosqlite round trip on an idle machine (where the thread hop is also CPU). That is the
store's audit connection when it has one (``GenerationProbe``: it writes a call's audit rows, so
its page cache is still current at the next call's read, where any other connection re-reads the
counter's pages after every audit commit), else a read-only connection of its own. Its busy
timeout is short (zero on the audit connection); if it cannot answer (a checkpoint restart, a
locked file) the cache is bypassed for that lookup and the ordinary aiosqlite path answers.

What is cached is exactly what the table holds: sealed bytes (opened only inside the last meter,
as before) and token records (hashes, never tokens). Unknown tokens are not cached, so guessing
cannot grow memory; both maps are capped anyway.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # annotations only: the schema (``ACCESS_MIGRATION``) is read without the record models
    from ..primitives.secrets import CredentialKey
    from .contract import TokenRecord

__all__ = ["ACCESS_MIGRATION", "AccessCache", "GenerationProbe", "Ticket"]

logger = logging.getLogger(__name__)

_PROBE_BUSY_MS: Final = 20
"""How long a counter read may wait on a lock before the cache is bypassed (it blocks the loop)."""
MAX_ENTRIES: Final = 4096
"""Past this many entries a map is emptied: far more principals than a gateway serves."""

_COUNTER = "UPDATE generation SET value = value + 1 WHERE scope = 'access'"
ACCESS_MIGRATION: Final[tuple[str, ...]] = (
    "CREATE TABLE generation (scope TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT INTO generation (scope, value) VALUES ('access', 0)",
    *(
        f"CREATE TRIGGER {table}_{event.lower()}_bumps_access AFTER {event} ON {table} BEGIN {_COUNTER}; END"
        for table in ("credential", "token")
        for event in ("INSERT", "UPDATE", "DELETE")
    ),
)
"""Schema migration 4 (append-only, like every migration): the counter and its six triggers."""

_READ_COUNTER = "SELECT value FROM generation WHERE scope = 'access'"

Ticket = tuple[int, int]
"""(database generation, local epoch) at the moment a lookup started; see ``AccessCache.keep``."""


class GenerationProbe:
    """A synchronous connection that reads the access counter (and nothing else).

    The connection is the store's audit connection when it has one, borrowed (``owned=False``:
    ``close`` leaves it to the store): a connection keeps its page cache across its own commits, but
    drops it at its next read once another connection has written. A connection of its own saw the
    audit writes as someone else's, and so read the counter's pages again (three ``pread``s and their
    parsing) on every call; the writer reads them from memory. Each read is still its own read
    transaction, at the newest commit of any connection or process, so what it answers is the same.
    A borrowed ``db`` must be in autocommit mode and only ever used on one thread at a time (the
    event loop's), so no read lands inside one of its own transactions. Without one, ``read_only``
    opens a connection of the probe's own.
    """

    def __init__(self, db: sqlite3.Connection, *, owned: bool) -> None:
        self._db = db
        self._owned = owned

    @classmethod
    def read_only(cls, path: Path) -> GenerationProbe:
        """A read-only connection of its own on ``path``, the database file already migrated by the store."""
        # mode=ro: this connection can never write, whatever a bug asks of it. as_uri escapes
        # '?', '#' and spaces in the path.
        db = sqlite3.connect(
            path.absolute().as_uri() + "?mode=ro", uri=True, isolation_level=None, check_same_thread=False
        )
        try:
            db.execute(f"PRAGMA busy_timeout = {_PROBE_BUSY_MS}")
        except sqlite3.Error:
            db.close()
            raise
        return cls(db, owned=True)

    def read(self) -> int | None:
        """The counter, or None when it cannot be read right now (the caller then bypasses the cache)."""
        try:
            # fetchall steps the statement to its end, so no read transaction stays open to hold
            # back the WAL checkpoint.
            rows = self._db.execute(_READ_COUNTER).fetchall()
        except sqlite3.Error as exc:
            logger.debug("access counter unreadable (%s); reading from the database instead", type(exc).__name__)
            return None
        return int(rows[0][0]) if rows else None

    def close(self) -> None:
        if self._owned:
            self._db.close()


class AccessCache:
    """Credential and token lookups answered from memory while the access counter stands still.

    Args:
        read_generation: returns the database's access counter, or None when it cannot tell (then
            nothing is answered from memory). A private in-memory database, which no other
            connection can write, passes a constant: local writes invalidate through ``invalidate``.

    Usage, for one lookup: ``ticket = cache.ticket()``; answer from the map if the ticket is not
    None and the key is there; else read the database and ``cache.keep(ticket, ...)`` the answer.
    """

    def __init__(self, read_generation: Callable[[], int | None]) -> None:
        self._read_generation = read_generation
        self._generation: int | None = None
        """The counter the cached entries were read under."""
        self._epoch = 0
        """Bumped by every local write, so a read that raced one cannot store what it read."""
        self.credentials: dict[CredentialKey, bytes | None] = {}
        """Sealed bytes by key; None records that no such credential exists."""
        self.tokens: dict[str, TokenRecord] = {}
        """Token records by hash (revoked ones too: the caller checks ``revoked``)."""

    def ticket(self) -> Ticket | None:
        """Check the counter, dropping everything if it moved; None when the cache must not answer."""
        generation = self._read_generation()
        if generation != self._generation:
            self._clear()
            self._generation = generation
        return None if generation is None else (generation, self._epoch)

    def keep_credential(self, ticket: Ticket | None, key: CredentialKey, sealed: bytes | None) -> None:
        if self._current(ticket):
            if len(self.credentials) >= MAX_ENTRIES:
                self.credentials.clear()
            self.credentials[key] = sealed

    def keep_token(self, ticket: Ticket | None, record: TokenRecord) -> None:
        if self._current(ticket):
            if len(self.tokens) >= MAX_ENTRIES:
                self.tokens.clear()
            self.tokens[record.token_hash] = record

    def invalidate(self) -> None:
        """A write of this process to credentials or tokens: forget everything at once."""
        self._epoch += 1
        self._clear()

    def _current(self, ticket: Ticket | None) -> bool:
        # A value read under an older counter or before a local write may already be stale; the
        # next lookup reads again instead. (A foreign write between the ticket and the read is
        # safe: the value is newer than its ticket says, and the next ticket drops it.)
        return ticket is not None and ticket == (self._generation, self._epoch)

    def _clear(self) -> None:
        self.credentials.clear()
        self.tokens.clear()
