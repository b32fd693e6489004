"""``SQLiteStore``: the embedded ``Store``, one SQLite file beside the project.

Design:

- One aiosqlite connection in autocommit mode, and one ``anyio.Lock`` around every use of it.
  aiosqlite already runs statements one at a time on its own thread; the lock is what keeps one
  task's statement from landing inside another task's open transaction.
- WAL journal, ``synchronous=NORMAL`` (durable across a process crash, at most the last commits
  lost on power loss: fine for a cache, approvals and audit), foreign keys on, and a busy timeout
  so a second gateway process on the same file waits instead of failing.
- State changes that must happen exactly once are compare-and-set in SQL (``UPDATE ... WHERE
  status = ?``), so they stay exactly-once across processes, not just across tasks.
- The schema is an ordered list of migrations; ``PRAGMA user_version`` records how many have run
  (``_sqlite_schema.py``). A file written by a newer build is refused rather than guessed at.
- A catalog is one row per connector: its actions as zlib-compressed JSON, decoded with pydantic's
  JSON validator off the event loop (``_rows.py``, shared with ``PostgresStore``). Loading GitHub's
  ~1,200 actions this way takes tens of ms.
- Datetimes are stored as fixed-width ISO-8601 UTC text, so SQL comparisons (``expires_at > ?``) are
  plain string comparisons, and come back timezone-aware UTC.
- Credentials arrive already sealed; they are stored and returned byte for byte, and never logged.
- Credential and token lookups, made on every call, are answered from memory while a counter that
  triggers bump on every write to those tables stands still (``_access.py``); the counter is read
  on the synchronous audit connection (below), so a cached lookup makes no thread hop and, that
  connection having written the last audit row itself, reads no page from the file.
- Audit: a call's ``started`` row goes to ``audit_open`` (a WITHOUT ROWID table of the calls in
  flight, a page or two), its outcome is appended to ``audit``, whose trigger deletes the open row
  in the same statement. So ``audit`` is append-only with one index (time), and a call writes ~4.3
  pages to the WAL (it was ~7.6 when the outcome overwrote the ``started`` row in ``audit``, through
  a unique index on call_id and a partial one on status). Rows are appended many at a time
  (``append_audits``): up to 55 rows of a kind are one multi-row INSERT, one statement and so one
  transaction and one hop to aiosqlite's thread.
- Audit rows can also be written on the caller's thread (``append_audits_now``), on a synchronous
  connection of their own that never waits for a lock: a commit in WAL mode with
  ``synchronous=NORMAL`` is a write to the WAL, no fsync, where the hop to aiosqlite's
  thread and back costs several times that in thread wake-ups and GIL hand-offs. When the write lock
  is held (a transaction of this store, another process) it answers False at once and the caller
  takes the queued path. That connection never checkpoints (a checkpoint fsyncs, which must not
  block the event loop): ``checkpoint_audits`` does it on aiosqlite's thread, and restarts the WAL
  once it has grown past ``WAL_RESTART_FRAMES`` (under a steady stream of calls SQLite never would).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
from collections.abc import AsyncGenerator, Callable, Collection, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from time import monotonic
from types import TracebackType
from typing import Any, Self, TypeVar

import aiosqlite
import anyio
from pydantic import BaseModel

from ..primitives.secrets import CredentialKey
from ..vocabulary.errors import StateUnwritable, StoreUnavailable, StoreUnopenable
from ..vocabulary.model import ACTIONS_ADAPTER
from ._access import AccessCache, GenerationProbe
from ._rows import (
    CATALOG_COLUMNS,
    CREDENTIAL_KEY,
    ActionsDecoder,
    RecordColumns,
    audit_identity,
    aware,
    catalog_params,
    credential_key,
    dump_meta,
    load_catalog,
    load_meta,
    replayed_rows,
    split_audits,
)
from ._sqlite_schema import SCHEMA_VERSION, migrate
from .contract import (
    ActionReviewRecord,
    ApprovalRecord,
    ApprovalStatus,
    AuditRecord,
    CatalogRecord,
    ConnectorState,
    LinkRecord,
    OperatorTokenRecord,
    TokenRecord,
    UseRecord,
)
from .instance_locks import InstanceLocks, instance_of

__all__ = ["SCHEMA_VERSION", "SQLiteStore", "unwritable"]

logger = logging.getLogger(__name__)

_M = TypeVar("_M", bound=BaseModel)

_BUSY_TIMEOUT_MS = 5000
_RESTART_WAIT_MS = 200
"""How long the WAL restart waits for other connections' locks before leaving it to the next run."""
WAL_RESTART_FRAMES = 4096
"""WAL frames (~16 MB of 4 KB pages, ~950 calls' audit rows) past which ``checkpoint_audits`` restarts
the WAL. SQLite starts the WAL over from its beginning only when a write begins with every frame
already copied back, and the PASSIVE checkpoint never gets there while calls keep committing: its
fsyncs take milliseconds, during which the next calls append frames. The WAL then grew for as long
as calls kept coming (~18 KB a call: 94 MB after 5,000 calls), each commit extending the file and
each page lookup searching a longer WAL index (a call's two commits grew costlier
as the WAL grew)."""
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
"""Primary result codes of a write that would have had to wait for another connection's lock."""
_BUSY_SHORT_MS = 250
"""The wait for a write lock held elsewhere for ``_LOCKED_SECONDS`` after one statement waited the whole
busy timeout for it."""
_LOCKED_SECONDS = 10.0
_LOCKED = "database is locked"
_DAMAGED = (
    ": the file is damaged; stop the gateway, restore the file from a backup (or recover what it holds with "
    "`sqlite3 FILE .recover`), then start it again; `mcp-gateway doctor` checks the file"
)
_UNAVAILABLE_SIGNS = {
    "unable to open database": "",
    "database disk image is malformed": _DAMAGED,
    "file is not a database": _DAMAGED,
    "disk i/o error": "",
    "database or disk is full": ": its disk is full; free some space",
    "readonly database": ": the file or its folder is read-only; check their owner and permissions",
    # Past the busy timeout.
    _LOCKED: ": another process holds its write lock (a backup, a sqlite3 shell, a stuck "
    "gateway); try again once it lets go",
}
"""A ``DatabaseError`` with one of these is the file being unusable for now, not a bug
(``StoreUnavailable``: the agent is told to retry, the operator's log gets one line, not a traceback),
and what the operator can do about it, appended to its message."""
_LASTING_SIGNS = frozenset(
    {
        "unable to open database",
        "database or disk is full",
        "readonly database",
        "database disk image is malformed",
        "file is not a database",
    }
)
"""The signs of storage that stays unusable until the operator acts (``StoreUnavailable.lasting``)."""


# -- tables and statements -------------------------------------------------------------------


def _ts(value: datetime) -> str:
    """Fixed-width UTC text: lexicographic order is time order, so SQL can compare it directly."""
    if value.tzinfo is UTC and value.year >= 1000:
        # What the clock gives: the same text from isoformat (C, no format string to interpret).
        return value.isoformat(timespec="microseconds")[:-6] + "Z"
    return aware(value).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _insert_sql(table: str, columns: Sequence[str], key: Sequence[str] = ()) -> str:
    """An INSERT, or with ``key`` an upsert that overwrites every other column (``put_*`` semantics)."""
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    if key:
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
        sql += f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
    return sql


class _Table(RecordColumns[_M]):
    """A record table in SQLite: ``?`` placeholders, datetimes as the fixed-width text of ``_ts``."""

    def __init__(self, name: str, model: type[_M], key: Sequence[str] = ()) -> None:
        super().__init__(model)
        self.select = f"SELECT {', '.join(self.columns)} FROM {name}"
        self.insert = _insert_sql(name, self.columns, key)

    def params(self, record: _M) -> tuple[object, ...]:
        return self.values(record, _ts)

    def load(self, row: sqlite3.Row) -> _M:
        # fromisoformat maps the trailing Z to datetime.UTC itself, not an equivalent offset.
        return self.record(row, datetime.fromisoformat)


_STATES = _Table("connector_state", ConnectorState, ["slug"])
_TOKENS = _Table("token", TokenRecord, ["id"])
_OPERATOR_TOKENS = _Table("operator_token", OperatorTokenRecord)  # inserted once, never overwritten
_LINKS = _Table("link", LinkRecord, ["token_hash"])
_APPROVALS = _Table("approval", ApprovalRecord, ["id"])
_AUDIT = _Table("audit", AuditRecord)  # append-only; an outcome's trigger settles its ``audit_open`` row
_REVIEWS = _Table("action_review", ActionReviewRecord, ["name", "fingerprint"])
_USES = _Table("discovery_use", UseRecord, ["scope", "action", "query"])  # one row per distinct query
# Rows are only ever added or re-decided (an upsert with a new decided_at), never deleted: the
# count, the newest decision and the number of approvals together change with every decision.
_REVIEWS_VERSION = "SELECT count(*), max(decided_at), coalesce(sum(decision = 'approved'), 0) FROM action_review"

_CATALOG_UPSERT = _insert_sql("catalog", CATALOG_COLUMNS, ["slug"])
_CREDENTIAL_INSERT = _insert_sql("credential", (*CREDENTIAL_KEY, "sealed"))
_CREDENTIAL_UPSERT = _insert_sql("credential", (*CREDENTIAL_KEY, "sealed"), CREDENTIAL_KEY)
_CREDENTIAL_WHERE = "WHERE connector = ? AND principal = ? AND name = ?"
_META_UPSERT = _insert_sql("meta", ("key", "value"), ["key"])


def _always_current() -> int:
    return 0


def _never_current() -> None:
    return None


_UNKNOWN = bytes(bytearray(b"no answer in memory"))
"""``cached_credential``'s marker for a key the cache has no answer for: an object of its own,
compared by identity, so no stored value can be mistaken for it."""

_AUDIT_ROWS_PER_STATEMENT = 55
"""55 rows x 17 columns stays under 999 bound parameters, the limit of SQLite builds before 3.32."""


@functools.lru_cache(maxsize=2 * _AUDIT_ROWS_PER_STATEMENT)
def _audit_insert(rows: int, open_rows: bool) -> str:
    """One INSERT of ``rows`` rows into ``audit`` (outcomes) or ``audit_open`` (``started`` rows): a
    single statement is atomic on its own in autocommit mode, its trigger included."""
    values = "(" + ", ".join("?" for _ in _AUDIT.columns) + ")"
    if not open_rows:
        return f"INSERT INTO audit ({', '.join(_AUDIT.columns)}) VALUES " + ", ".join([values] * rows)
    updates = ", ".join(f"{c} = excluded.{c}" for c in _AUDIT.columns if c != "call_id")
    return (
        f"INSERT INTO audit_open ({', '.join(_AUDIT.columns)}) VALUES "
        + ", ".join([values] * rows)
        + f" ON CONFLICT (call_id) DO UPDATE SET {updates}"
    )


_AUDIT_COLUMNS = ", ".join(_AUDIT.columns)
_AUDIT_HELD = "SELECT 1 FROM audit WHERE at = ? AND call_id IS ? AND user = ? AND requested = ? LIMIT 1"
"""Whether ``audit`` holds a row already (``audit_identity``): ``at`` first, so its index finds it."""
_AUDIT_SETTLED = "SELECT 1 FROM audit WHERE at >= ? AND call_id = ? LIMIT 1"
"""Whether a call started at ``at`` has its outcome in ``audit`` (no later than its start: the time index)."""
_AUDIT_OPEN_REPLAY = (
    f"INSERT INTO audit_open ({', '.join(_AUDIT.columns)}) VALUES ({', '.join('?' for _ in _AUDIT.columns)}) "
    "ON CONFLICT (call_id) DO NOTHING"
)
"""A replayed ``started`` row: never over a row already open (one marked ``interrupted`` stays so)."""
_AUDIT_LIST = (
    f"SELECT {_AUDIT_COLUMNS} FROM ("
    f"SELECT {_AUDIT_COLUMNS}, 0 AS part, NULL AS id FROM (SELECT * FROM audit_open ORDER BY at DESC LIMIT ?1) "
    f"UNION ALL SELECT {_AUDIT_COLUMNS}, 1, id FROM (SELECT * FROM audit ORDER BY at DESC, id DESC LIMIT ?1)"
    ") ORDER BY at DESC, part, id DESC LIMIT ?1"
)
"""The newest rows of ``audit_open`` and ``audit`` together, in one statement (one snapshot: a call
settling meanwhile is seen in exactly one of them); equal times list open rows first."""


def _audit_statements(records: Sequence[AuditRecord]) -> list[tuple[str, Sequence[object]]]:
    """The multi-row INSERTs that append ``records``, in order (``split_audits``), each of at most
    ``_AUDIT_ROWS_PER_STATEMENT`` rows: one statement for a call's row or a one-kind batch."""
    parts = split_audits(records)
    if len(records) == 1:  # a call's row, written inline: no list to flatten
        return [(_audit_insert(1, parts[0][1]), _AUDIT.params(records[0]))]
    statements: list[tuple[str, Sequence[object]]] = []
    for rows, open_rows in parts:
        for start in range(0, len(rows), _AUDIT_ROWS_PER_STATEMENT):
            chunk = rows[start : start + _AUDIT_ROWS_PER_STATEMENT]
            params = [value for record in chunk for value in _AUDIT.params(record)]
            statements.append((_audit_insert(len(chunk), open_rows), params))
    return statements


# -- the store ---------------------------------------------------------------------------------


_VECTOR_CHUNK = 500
"""Digests per ``IN (...)`` lookup (well under SQLite's bound-parameter limit)."""


def unwritable(path: Path, exc: OSError) -> str:
    """Why the state folder (or the database in it) cannot be created, and the two ways out."""
    return (
        f"cannot create {path} ({exc.strerror or exc}): make the state folder writable by this user, or give "
        "--state-dir (or $MCP_GATEWAY_STATE_DIR) a folder it can write"
    )


class SQLiteStore:
    """The ``Store`` protocol over one SQLite file (or ``":memory:"`` for tests).

    Args:
        path: The database file. Its directory is created if missing; a new file is made private
            to the current user (0600), since it holds sealed credentials and token hashes.
        decode_actions: validates a stored catalog's actions JSON (on a worker thread); the
            runtime passes ``catalog_memory.validate_actions`` to share equal values.

    Example:
        async with SQLiteStore(tmp_path / "gateway.db") as store:
            await store.set_meta("project", "demo")
    """

    def __init__(self, path: str | Path, *, decode_actions: ActionsDecoder = ACTIONS_ADAPTER.validate_json) -> None:
        self._path = path if path == ":memory:" else Path(path)
        self._decode_actions = decode_actions
        self._db: aiosqlite.Connection | None = None
        self._lock = anyio.Lock()
        self._locked_until = 0.0
        """Until when (``monotonic``) statements wait ``_BUSY_SHORT_MS`` at most for a write lock held
        elsewhere: one statement waited the whole busy timeout for it just before."""
        self._short_wait = False
        self._probe: GenerationProbe | None = None
        self._access = AccessCache(_never_current)
        self._audit_db: sqlite3.Connection | None = None
        """The synchronous connection of ``append_audits_now`` (None: a private in-memory database)."""
        self._file: tuple[int, int] | None = None
        """The open database file's device and inode (``_check_file``); None in memory or closed."""
        self._wal_warned = False
        """The deleted write-ahead log was logged (once per open file)."""
        self._wal_gone = False
        self._wal: tuple[int, int] | None = None
        """The write-ahead log's device and inode as the store opened it (``_check_file``)."""
        """The write-ahead log was missing, its index present, as ``open`` began."""
        self._instances = InstanceLocks(self._path.parent / "instances") if isinstance(self._path, Path) else None

    @property
    def instance(self) -> str | None:
        """This open store's instance id (the prefix of the call ids its gateway hands out), held
        alive by a lock file while it is open; None in memory or when no lock file could be made."""
        return self._instances.instance if self._instances is not None else None

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self._path)!r})"

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, set the pragmas and run any pending migrations. Idempotent.

        Raises:
            GatewayError: the file is not an SQLite database, belongs to another application, or
                was written by a newer mcp-gateway.
        """
        async with self._lock:
            if self._db is not None:
                return
            if isinstance(self._path, Path):
                if self._path.is_dir():
                    raise StoreUnopenable(
                        f"{self._path} is a folder, not the gateway's database file: move it aside, or point "
                        "the gateway at another state folder"
                    )
                self._create_private_file(self._path)
            # Looked at before connecting: the connection itself may create an empty log in its place.
            self._wal_gone = isinstance(self._path, Path) and self._wal_deleted()
            try:
                db = await aiosqlite.connect(self._path, isolation_level=None)
            except sqlite3.Error as exc:
                raise StoreUnopenable(f"cannot open {self._path} as the gateway's database ({exc})") from None
            try:
                db.row_factory = sqlite3.Row
                await self._configure(db)
                await migrate(db, self._path)
            except BaseException as exc:
                with anyio.CancelScope(shield=True):
                    await db.close()
                if isinstance(exc, sqlite3.DatabaseError):  # locked elsewhere, a full disk, a damaged file: say so
                    raise self._outage(exc) from None
                raise
            self._db = db
            if isinstance(self._path, Path):
                found = self._path.stat()
                self._file = (found.st_dev, found.st_ino)
                self._wal = self._wal_identity()
            self._audit_db = self._open_audit_writer()
            self._access = AccessCache(self._open_probe())
            if self._instances is not None:
                await anyio.to_thread.run_sync(self._instances.claim)

    async def close(self) -> None:
        """Close the connection, after any operation in flight. Idempotent; ``open`` may follow."""
        async with self._lock:
            if self._db is None:
                return
            db, self._db = self._db, None
            self._file = self._wal = None
            self._wal_warned = False
            self._access = AccessCache(_never_current)
            if self._probe is not None:
                self._probe.close()
                self._probe = None
            if self._audit_db is not None:
                self._audit_db.close()
                self._audit_db = None
            if self._instances is not None:
                self._instances.release()
            with anyio.CancelScope(shield=True):
                await db.close()

    def _open_probe(self) -> Callable[[], int | None]:
        """How the access cache learns whether credentials or tokens changed (see ``_access.py``)."""
        if not isinstance(self._path, Path):
            # A private in-memory database: only this store writes it, and its writes invalidate.
            return _always_current
        if self._audit_db is not None:
            # Its page cache survives its own audit commits, where a connection of the probe's own
            # would read the counter's pages again after each (``GenerationProbe``).
            self._probe = GenerationProbe(self._audit_db, owned=False)
            return self._probe.read
        try:
            self._probe = GenerationProbe.read_only(self._path)
        except sqlite3.Error as exc:
            # Without the counter no cached answer could be trusted: every lookup reads the file.
            logger.warning("%s: cannot open the read-only connection (%s); lookups will not be cached", self, exc)
            return _never_current
        return self._probe.read

    def _open_audit_writer(self) -> sqlite3.Connection | None:
        """The connection ``append_audits_now`` writes on, or None when there cannot be one."""
        if not isinstance(self._path, Path):
            return None  # a private in-memory database has one connection only
        try:
            db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            logger.warning("%s: cannot open the audit connection (%s); audit rows take the queued path", self, exc)
            return None
        try:
            # busy_timeout 0: a held write lock makes the write fail at once, never block the loop.
            # synchronous is per connection (the default, FULL, would fsync every commit).
            for pragma in ("busy_timeout = 0", "synchronous = NORMAL", "wal_autocheckpoint = 0"):
                db.execute(f"PRAGMA {pragma}")
        except sqlite3.Error:
            db.close()
            return None
        return db

    @staticmethod
    def _create_private_file(path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # O_EXCL: only a file we create here gets 0600; an existing file keeps the mode its owner chose.
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass
        except OSError as exc:
            raise StateUnwritable(unwritable(path, exc)) from None

    async def _configure(self, db: aiosqlite.Connection) -> None:
        try:
            # busy_timeout first: the pragmas below may need to wait for another process's lock.
            await db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            await self._enable_wal(db)
            await db.execute("PRAGMA synchronous = NORMAL")
            await db.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            if self._wal_gone and "disk i/o error" in str(exc).lower():
                raise StoreUnopenable(
                    f"cannot open {self._path} ({exc}): another process (a running gateway) has it open, and its "
                    f"write-ahead log {self._path}-wal was deleted; restart that gateway (it writes what the log "
                    "holds into the database as it stops, and the file opens again). Do not move the database "
                    "file aside: that loses what the log holds"
                ) from None
            # Typically "file is not a database"; say which file and what to do.
            raise StoreUnopenable(
                f"cannot open {self._path} as the gateway's database ({exc}); "
                "point the gateway at another file or move this one aside"
            ) from None

    def _wal_deleted(self) -> bool:
        """Whether the file's write-ahead log looks deleted while its shared-memory index says it is in use:
        gone, or empty (a process that failed to open the file since left an empty one in its place)."""
        try:
            return Path(f"{self._path}-shm").exists() and Path(f"{self._path}-wal").stat().st_size == 0
        except FileNotFoundError:
            return True

    def _wal_identity(self) -> tuple[int, int] | None:
        try:
            found = Path(f"{self._path}-wal").stat()
        except FileNotFoundError:
            return None
        return found.st_dev, found.st_ino

    @staticmethod
    async def _enable_wal(db: aiosqlite.Connection) -> None:
        # Switching a new file to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at once
        # there instead of calling the busy handler: two processes starting together (serve and a
        # CLI command on first run) must retry rather than fail.
        for attempt in range(100):
            try:
                await db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or attempt == 99:
                    raise
                await anyio.sleep(0.05)

    # -- plumbing ---------------------------------------------------------------------------------

    def _conn(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError(f"{self!r} is not open: await store.open() first")
        return self._db

    async def _execute(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run one statement (autocommitted); return the number of rows it changed."""
        self._check_file()  # a write into a deleted file would say it was stored
        async with self._lock:
            await self._patience()
            try:
                async with self._conn().execute(sql, params) as cursor:
                    return cursor.rowcount
            except sqlite3.DatabaseError as exc:
                raise self._outage(exc) from None

    async def _fetchone(self, sql: str, params: Sequence[object] = ()) -> sqlite3.Row | None:
        """The first row of a point read. ``execute_fetchall`` is one hop to aiosqlite's thread, where
        execute + fetchone + close would be three."""
        async with self._lock:
            await self._patience()
            try:
                rows = await self._conn().execute_fetchall(sql, params)
            except sqlite3.DatabaseError as exc:
                raise self._outage(exc) from None
        return next(iter(rows), None)

    async def _fetchall(self, sql: str, params: Sequence[object] = ()) -> Iterable[sqlite3.Row]:
        async with self._lock:
            await self._patience()
            try:
                return await self._conn().execute_fetchall(sql, params)
            except sqlite3.DatabaseError as exc:
                raise self._outage(exc) from None

    async def ping(self) -> None:
        """One round trip; raises ``StoreUnavailable`` when the database file cannot be used, or is no
        longer the file at its path (``_check_file``)."""
        self._check_file()
        await self._fetchone("SELECT 1")

    async def probe_write(self) -> None:
        """One small committed write; raises ``StoreUnavailable`` when writes fail though reads work (a full
        disk, a write lock held elsewhere past the busy timeout), which ``ping`` does not see."""
        await self._execute(_META_UPSERT, ("health_probe", dump_meta(datetime.now(UTC).isoformat())))

    async def damage(self) -> str | None:
        """What ``PRAGMA quick_check`` finds wrong in the file (``doctor``), or None when it is whole. It reads
        every page: for a command, not for a request."""
        async with self._lock:
            try:
                rows = list(await self._conn().execute_fetchall("PRAGMA quick_check"))
                found = [str(row[0]) for row in rows]
            except sqlite3.DatabaseError as exc:
                found = [str(exc)]
        if found == ["ok"]:
            return None
        return f"the SQLite database {self._path} is damaged ({'; '.join(found[:3])[:300]})"

    def _check_file(self) -> None:
        """Raise ``StoreUnavailable`` when the file at the store's path is not the one it has open.

        SQLite writes to the file it opened: deleted, or replaced by another (a restore moved over it),
        it takes every row on, into a file nobody will read again, and the answers say they were
        recorded. One ``stat``, before each audit write and each health ping."""
        if self._file is None or not isinstance(self._path, Path):
            return
        try:
            found = self._path.stat()
        except FileNotFoundError:
            raise StoreUnavailable(
                f"the SQLite database {self._path} was deleted while the gateway had it open: restart the "
                "gateway (what could not be written is in its audit journal)",
                lasting=True,
            ) from None
        if not self._wal_warned and self._wal is not None and self._wal_identity() != self._wal:
            # SQLite goes on through its open descriptor, and what the log holds reaches the database when
            # the gateway stops: refusing would stop the calls for nothing; only a restart ends it.
            self._wal_warned = True
            logger.warning(
                "the SQLite database's write-ahead log %s-wal was deleted while the gateway had it open: the gateway "
                "goes on, and what the log holds is written into the database when it stops; restart the gateway "
                "soon (until then no other command can open the database), and do not move the database file aside",
                self._path,
            )
        if (found.st_dev, found.st_ino) != self._file:
            raise StoreUnavailable(
                f"the SQLite database {self._path} was replaced while the gateway had it open (a restore or "
                "a move): restart the gateway to use the new file (what could not be written is in its audit journal)",
                lasting=True,
            )

    async def _patience(self) -> None:
        """Set how long the next statement waits for a write lock held elsewhere (under ``_lock``): the
        whole busy timeout, or, for a while after one statement waited all of it in vain, a short wait,
        so that a call of several statements answers ``store_unavailable`` in seconds, not in several
        busy timeouts."""
        short = monotonic() < self._locked_until
        if short != self._short_wait and self._db is not None:
            await self._db.execute(f"PRAGMA busy_timeout = {_BUSY_SHORT_MS if short else _BUSY_TIMEOUT_MS}")
            self._short_wait = short

    def _outage(self, exc: sqlite3.DatabaseError) -> Exception:
        """``StoreUnavailable`` for a file that cannot be used now (a lost or full disk, I/O errors, a
        read-only file, a damaged one, a write lock held elsewhere past the busy timeout); any other
        ``DatabaseError`` (bad SQL, a constraint) as it is."""
        text = str(exc).lower()
        sign = next((sign for sign in _UNAVAILABLE_SIGNS if sign in text), None)
        if sign is None:
            return exc
        if sign == _LOCKED:
            self._locked_until = monotonic() + _LOCKED_SECONDS
        advice = _UNAVAILABLE_SIGNS[sign]
        return StoreUnavailable(
            f"the SQLite database {self._path} cannot be used ({str(exc)[:200]}){advice}",
            lasting=sign in _LASTING_SIGNS,
        )

    @asynccontextmanager
    async def _transaction(self) -> AsyncGenerator[aiosqlite.Connection]:
        """One write transaction; a lock held elsewhere, a full disk or a lost file is ``StoreUnavailable``
        (``_outage``), as for a single statement."""
        self._check_file()
        async with self._lock:
            await self._patience()
            db = self._conn()
            try:
                await db.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise self._outage(exc) from None
            try:
                yield db
            except BaseException as exc:
                # Shielded: under a cancelled scope the rollback would itself be cancelled, leaving
                # the shared connection inside a transaction for every later caller.
                with anyio.CancelScope(shield=True):
                    await self._rollback(db)
                if isinstance(exc, sqlite3.DatabaseError):
                    raise self._outage(exc) from None
                raise
            with anyio.CancelScope(shield=True):
                try:
                    await db.commit()
                except sqlite3.DatabaseError as exc:
                    await self._rollback(db)
                    raise self._outage(exc) from None

    @staticmethod
    async def _rollback(db: aiosqlite.Connection) -> None:
        try:
            await db.rollback()
        except sqlite3.OperationalError:
            pass  # no transaction left to roll back (SQLite ended it on a full disk or I/O error)

    # -- catalog ------------------------------------------------------------------------------------

    async def get_catalog(self, slug: str) -> CatalogRecord | None:
        """The stored catalog, or None if there is none or this build can no longer read it.

        The catalog is a cache of what the sources normalize to: a row written by a build whose
        ``Action`` had another shape is reported as a miss, so the next sync rebuilds it instead
        of the connector failing.
        """
        row = await self._fetchone("SELECT fingerprint, info, actions FROM catalog WHERE slug = ?", (slug,))
        if row is None:
            return None
        return await load_catalog(slug, row, logger, self._decode_actions)

    async def put_catalog(self, record: CatalogRecord) -> None:
        await self._execute(_CATALOG_UPSERT, await catalog_params(record))

    async def delete_catalog(self, slug: str) -> None:
        await self._execute("DELETE FROM catalog WHERE slug = ?", (slug,))

    async def put_connector_state(self, state: ConnectorState) -> None:
        await self._execute(_STATES.insert, _STATES.params(state))

    async def list_connector_states(self) -> list[ConnectorState]:
        rows = await self._fetchall(f"{_STATES.select} ORDER BY slug")
        return [_STATES.load(row) for row in rows]

    # -- credentials ----------------------------------------------------------------------------------

    async def put_credential(self, key: CredentialKey, sealed: bytes) -> None:
        try:
            await self._execute(_CREDENTIAL_UPSERT, (key.connector, key.principal, key.name, bytes(sealed)))
        finally:
            self._access.invalidate()

    async def get_credential(self, key: CredentialKey) -> bytes | None:
        """The sealed bytes, from memory while no credential or token changed (``_access.py``)."""
        ticket = self._access.ticket()
        if ticket is not None and key in self._access.credentials:
            return self._access.credentials[key]
        row = await self._fetchone(
            f"SELECT sealed FROM credential {_CREDENTIAL_WHERE}", (key.connector, key.principal, key.name)
        )
        sealed = bytes(row["sealed"]) if row is not None else None
        self._access.keep_credential(ticket, key, sealed)
        return sealed

    def cached_credential(self, keys: Sequence[CredentialKey]) -> tuple[CredentialKey | None, bytes | None] | None:
        """The first of ``keys`` with a credential, from memory under one read of the access counter
        (a call looks up its principal's own credential, then the project-wide one: one read, not
        two); None when memory cannot tell, and the caller asks ``get_credential``."""
        ticket = self._access.ticket()
        if ticket is None:
            return None
        cached = self._access.credentials
        for key in keys:
            sealed = cached.get(key, _UNKNOWN)
            if sealed is _UNKNOWN:
                return None
            if sealed is not None:
                return key, sealed
        return None, None

    async def delete_credential(self, key: CredentialKey) -> None:
        try:
            await self._execute(f"DELETE FROM credential {_CREDENTIAL_WHERE}", (key.connector, key.principal, key.name))
        finally:
            self._access.invalidate()

    async def list_credentials(self) -> list[CredentialKey]:
        rows = await self._fetchall(
            "SELECT connector, principal, name FROM credential ORDER BY connector, principal, name"
        )
        return [credential_key(r) for r in rows]

    async def replace_all_credentials(self, sealed: dict[CredentialKey, bytes]) -> None:
        """Rewrite every credential in one transaction (key rotation): all of them, or none."""
        params = [(k.connector, k.principal, k.name, bytes(v)) for k, v in sealed.items()]
        try:
            async with self._transaction() as db:
                await db.execute("DELETE FROM credential")
                await db.executemany(_CREDENTIAL_INSERT, params)
        finally:
            self._access.invalidate()

    # -- tokens ---------------------------------------------------------------------------------------

    async def put_token(self, token: TokenRecord) -> None:
        try:
            await self._execute(_TOKENS.insert, _TOKENS.params(token))
        finally:
            self._access.invalidate()

    async def find_token(self, token_hash: str) -> TokenRecord | None:
        """The token with this hash, revoked or not: the caller checks ``revoked``. Known tokens are
        answered from memory while no credential or token changed; unknown ones always read the file."""
        ticket = self._access.ticket()
        if ticket is not None and (cached := self._access.tokens.get(token_hash)) is not None:
            return cached
        row = await self._fetchone(f"{_TOKENS.select} WHERE token_hash = ?", (token_hash,))
        if row is None:
            return None
        record = _TOKENS.load(row)
        self._access.keep_token(ticket, record)
        return record

    async def list_tokens(self) -> list[TokenRecord]:
        rows = await self._fetchall(f"{_TOKENS.select} ORDER BY created_at, id")
        return [_TOKENS.load(row) for row in rows]

    async def revoke_token(self, token_id: str) -> bool:
        """True if this call revoked the token; False if it is unknown or already revoked."""
        try:
            return await self._execute("UPDATE token SET revoked = 1 WHERE id = ? AND revoked = 0", (token_id,)) == 1
        finally:
            self._access.invalidate()

    # -- operator tokens ----------------------------------------------------------------------------------

    async def add_operator_token(self, token: OperatorTokenRecord) -> bool:
        """Insert unless the id or hash is taken; True if inserted (never overwrites)."""
        sql = _OPERATOR_TOKENS.insert.replace("INSERT INTO", "INSERT OR IGNORE INTO", 1)
        return await self._execute(sql, _OPERATOR_TOKENS.params(token)) == 1

    async def find_operator_token(self, token_hash: str) -> OperatorTokenRecord | None:
        row = await self._fetchone(f"{_OPERATOR_TOKENS.select} WHERE token_hash = ?", (token_hash,))
        return _OPERATOR_TOKENS.load(row) if row is not None else None

    async def get_operator_token(self, token_id: str) -> OperatorTokenRecord | None:
        row = await self._fetchone(f"{_OPERATOR_TOKENS.select} WHERE id = ?", (token_id,))
        return _OPERATOR_TOKENS.load(row) if row is not None else None

    async def list_operator_tokens(self) -> list[OperatorTokenRecord]:
        rows = await self._fetchall(f"{_OPERATOR_TOKENS.select} ORDER BY created_at, id")
        return [_OPERATOR_TOKENS.load(row) for row in rows]

    async def revoke_operator_token(self, token_id: str) -> bool:
        """Compare-and-set: True only for the one caller, in any process, that revoked it."""
        sql = "UPDATE operator_token SET revoked = 1 WHERE id = ? AND revoked = 0"
        return await self._execute(sql, (token_id,)) == 1

    # -- links ------------------------------------------------------------------------------------------

    async def put_link(self, link: LinkRecord) -> None:
        await self._execute(_LINKS.insert, _LINKS.params(link))

    async def get_link(self, token_hash: str) -> LinkRecord | None:
        row = await self._fetchone(f"{_LINKS.select} WHERE token_hash = ?", (token_hash,))
        return _LINKS.load(row) if row is not None else None

    async def consume_link(self, token_hash: str, now: datetime) -> LinkRecord | None:
        """Mark the link used if it is unused and unexpired; return it, else None. Atomic.

        The conditional UPDATE is the whole decision: of any number of consumers, in this process
        or another, exactly one sees a changed row. The read-back shares its transaction, so a
        cancelled caller rolls the consumption back instead of losing the link.
        """
        stamp = _ts(now)
        async with self._transaction() as db:
            async with db.execute(
                "UPDATE link SET used_at = ? WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?",
                (stamp, token_hash, stamp),
            ) as cursor:
                if cursor.rowcount != 1:
                    return None
            async with db.execute(f"{_LINKS.select} WHERE token_hash = ?", (token_hash,)) as cursor:
                row = await cursor.fetchone()
        return _LINKS.load(row) if row is not None else None

    async def release_link(self, token_hash: str, used_at: datetime) -> bool:
        changed = await self._execute(
            "UPDATE link SET used_at = NULL WHERE token_hash = ? AND used_at = ?", (token_hash, _ts(used_at))
        )
        return changed == 1

    # -- approvals ---------------------------------------------------------------------------------------

    async def put_approval(self, approval: ApprovalRecord) -> None:
        await self._execute(_APPROVALS.insert, _APPROVALS.params(approval))

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        row = await self._fetchone(f"{_APPROVALS.select} WHERE id = ?", (approval_id,))
        return _APPROVALS.load(row) if row is not None else None

    async def transition_approval(
        self,
        approval_id: str,
        from_status: ApprovalStatus,
        to_status: ApprovalStatus,
        now: datetime,
        by: str | None = None,
    ) -> bool:
        """Compare-and-set the status; True only for the one caller that made the change.

        ``decided_at`` keeps the first transition's time: approving at T1 then consuming at T2
        still says the human decided at T1.
        """
        changed = await self._execute(
            "UPDATE approval SET status = ?, decided_at = COALESCE(decided_at, ?), "
            "decided_by = COALESCE(decided_by, ?) WHERE id = ? AND status = ?",
            (to_status, _ts(now), by, approval_id, from_status),
        )
        return changed == 1

    async def list_approvals(self, status: ApprovalStatus | None = None) -> list[ApprovalRecord]:
        if status is None:
            rows = await self._fetchall(f"{_APPROVALS.select} ORDER BY created_at, id")
        else:
            rows = await self._fetchall(f"{_APPROVALS.select} WHERE status = ? ORDER BY created_at, id", (status,))
        return [_APPROVALS.load(row) for row in rows]

    # -- audit -------------------------------------------------------------------------------------------

    async def append_audit(self, record: AuditRecord) -> None:
        await self.append_audits([record])

    async def append_audits(self, records: Sequence[AuditRecord]) -> None:
        """Append rows in one transaction: all of them, or none (the background audit writer's batch).
        ``started`` rows go to ``audit_open`` before the outcomes go to ``audit``, whose trigger
        settles the open row of the same call (which may be in this very batch)."""
        self._check_file()
        statements = _audit_statements(records)
        if len(statements) == 1:
            await self._fetchall(*statements[0])
        elif statements:
            async with self._transaction() as db:
                for sql, params in statements:
                    await db.execute(sql, params)

    def append_audits_now(self, records: Sequence[AuditRecord]) -> bool:
        """Write rows now, on the caller's thread, all or none; False (nothing written) when this
        cannot be done without waiting: the write lock is held, or there is no audit connection.

        Raises:
            StoreUnavailable: the database file cannot be used.
            sqlite3.Error: any other failure.
        """
        db = self._audit_db
        if db is None or not records:
            return False
        self._check_file()
        statements = _audit_statements(records)
        try:
            if len(statements) == 1:  # what every call writes: one row, one statement, one commit
                db.execute(*statements[0])
                return True
            db.execute("BEGIN IMMEDIATE")  # fails at once when locked: busy_timeout is 0
            try:
                for sql, params in statements:
                    db.execute(sql, params)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.rollback()
                raise
        except sqlite3.DatabaseError as exc:
            if ((exc.sqlite_errorcode or 0) & 0xFF) in _BUSY_CODES:  # an extended code has the primary in its low byte
                return False
            raise self._outage(exc) from None
        return True

    async def checkpoint_audits(self) -> None:
        """Copy the WAL back into the database file, on aiosqlite's thread: the audit connection never
        does it itself (see the module docstring). PASSIVE waits for no reader or writer; once the WAL
        has grown past ``WAL_RESTART_FRAMES`` a RESTART follows, so that the next write starts the WAL
        over from its beginning (see ``WAL_RESTART_FRAMES``)."""
        async with self._lock:
            db = self._conn()
            try:
                rows = await db.execute_fetchall("PRAGMA wal_checkpoint(PASSIVE)")
                busy, frames, _ = next(iter(rows), (1, 0, 0))
                if busy or frames < WAL_RESTART_FRAMES:
                    return
                # RESTART holds the write lock while it copies what is left (a few frames: PASSIVE
                # just copied the rest) and syncs, then waits for readers of the old WAL: briefly, so
                # a long reader elsewhere (another process) only postpones it to the next run.
                await db.execute(f"PRAGMA busy_timeout = {_RESTART_WAIT_MS}")
                try:
                    await db.execute_fetchall("PRAGMA wal_checkpoint(RESTART)")
                finally:
                    await db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            except sqlite3.DatabaseError as exc:
                raise self._outage(exc) from None

    async def list_audit(self, limit: int = 50) -> list[AuditRecord]:
        """The ``limit`` newest rows of ``audit`` and ``audit_open``, newest first (ties in ``at``: open
        rows first, then by insertion order)."""
        return [_AUDIT.load(row) for row in await self._fetchall(_AUDIT_LIST, (max(limit, 0),))]

    async def replay_audits(self, records: Sequence[AuditRecord]) -> int:
        """Append the outcomes ``audit`` does not hold yet, in one transaction (see ``AuditStore``); a
        row already there still settles its call's open row. A ``started`` row opens its call unless
        its outcome is in ``audit`` already; how many outcomes were appended."""
        rows = replayed_rows(records)
        added = 0
        async with self._transaction() as db:
            for record in rows:
                at, call_id, user, requested = audit_identity(record)
                if record.status == "started":  # open, unless its outcome is in already
                    if not await db.execute_fetchall(_AUDIT_SETTLED, (_ts(at), call_id)):
                        await db.execute(_AUDIT_OPEN_REPLAY, _AUDIT.params(record))
                    continue
                found = await db.execute_fetchall(_AUDIT_HELD, (_ts(at), call_id, user, requested))
                if found:
                    if call_id is not None:
                        await db.execute("DELETE FROM audit_open WHERE call_id = ?", (call_id,))
                    continue
                await db.execute(_audit_insert(1, False), _AUDIT.params(record))  # its trigger settles
                added += 1
        return added

    async def interrupt_started_audits(self, keep: Collection[str] = ()) -> int:
        started = [row[0] for row in await self._fetchall("SELECT call_id FROM audit_open WHERE status = 'started'")]
        if not started:
            return 0
        alive: set[str] = set()
        if self._instances is not None:
            alive = await anyio.to_thread.run_sync(self._instances.alive, {instance_of(c) for c in started})
        gone = sorted(c for c in started if c not in keep and instance_of(c) not in alive)
        if not gone:
            return 0
        return await self._execute(
            "UPDATE audit_open SET status = 'interrupted' WHERE status = 'started' "
            "AND call_id IN (SELECT value FROM json_each(?))",
            (json.dumps(gone),),
        )

    # -- short-lived shared state ----------------------------------------------------------------------

    async def put_ephemeral(self, kind: str, key: str, value: bytes, expires_at: datetime, now: datetime) -> bool:
        """Store ``value`` unless an unexpired entry holds (kind, key); True if stored. Expired entries
        are purged first, in the same transaction, so an expired one counts as absent."""
        async with self._transaction() as db:
            await db.execute("DELETE FROM ephemeral WHERE expires_at <= ?", (_ts(now),))
            async with db.execute(
                "INSERT INTO ephemeral (kind, key, value, expires_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (kind, key) DO NOTHING",
                (kind, key, bytes(value), _ts(expires_at)),
            ) as cursor:
                return cursor.rowcount == 1

    async def get_ephemeral(self, kind: str, key: str, now: datetime) -> bytes | None:
        row = await self._fetchone(
            "SELECT value FROM ephemeral WHERE kind = ? AND key = ? AND expires_at > ?", (kind, key, _ts(now))
        )
        return bytes(row["value"]) if row is not None else None

    async def take_ephemeral(self, kind: str, key: str, now: datetime) -> bytes | None:
        """Remove the entry and return its value if it was unexpired; one taker wins, in any process."""
        async with self._transaction() as db:
            async with db.execute(
                "DELETE FROM ephemeral WHERE kind = ? AND key = ? RETURNING value, expires_at", (kind, key)
            ) as cursor:
                row = await cursor.fetchone()
        if row is None or row["expires_at"] <= _ts(now):
            return None
        return bytes(row["value"])

    async def delete_ephemeral(self, kind: str, key: str) -> None:
        await self._execute("DELETE FROM ephemeral WHERE kind = ? AND key = ?", (kind, key))

    # -- misc ----------------------------------------------------------------------------------------------

    async def get_meta(self, key: str) -> Any | None:
        row = await self._fetchone("SELECT value FROM meta WHERE key = ?", (key,))
        return load_meta(row["value"]) if row is not None else None

    async def set_meta(self, key: str, value: Any) -> None:
        """Store any JSON-serializable value under ``key`` (a ``None`` value reads back as absent)."""
        await self._execute(_META_UPSERT, (key, dump_meta(value)))

    # -- discovery vectors -------------------------------------------------------------------------

    async def get_vectors(self, model: str, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        for start in range(0, len(digests), _VECTOR_CHUNK):
            chunk = list(digests[start : start + _VECTOR_CHUNK])
            marks = ", ".join("?" * len(chunk))
            rows = await self._fetchall(
                # A value of another type (text written by hand or another tool, valid UTF-8 or not) is no
                # vector: left out here, so it is embedded again, never decoded.
                f"SELECT digest, vector FROM discovery_vector WHERE model = ? AND digest IN ({marks}) "
                "AND typeof(vector) = 'blob'",
                (model, *chunk),
            )
            found.update((bytes(row["digest"]), bytes(row["vector"])) for row in rows)
        return found

    async def put_vectors(self, model: str, vectors: Mapping[bytes, bytes]) -> None:
        if not vectors:
            return
        params = [(model, bytes(digest), bytes(vector)) for digest, vector in vectors.items()]
        async with self._transaction() as db:
            await db.executemany(
                "INSERT INTO discovery_vector (model, digest, vector) VALUES (?, ?, ?) "
                "ON CONFLICT (model, digest) DO UPDATE SET vector = excluded.vector",
                params,
            )

    # -- action reviews -------------------------------------------------------------------------------

    async def put_action_review(self, record: ActionReviewRecord) -> None:
        await self._execute(_REVIEWS.insert, _REVIEWS.params(record))

    async def list_action_reviews(self) -> list[ActionReviewRecord]:
        rows = await self._fetchall(f"{_REVIEWS.select} ORDER BY decided_at, name")
        return [_REVIEWS.load(row) for row in rows]

    async def action_reviews_version(self) -> str:
        row = await self._fetchone(_REVIEWS_VERSION)
        return "" if row is None else "/".join(str(value) for value in row)

    # -- what discover learned from use ----------------------------------------------------------

    async def record_use(self, record: UseRecord) -> None:
        await self._execute(_USES.insert, _USES.params(record))

    async def list_uses(self, scope: str, limit: int) -> list[UseRecord]:
        rows = await self._fetchall(
            f"{_USES.select} WHERE scope = ? ORDER BY at DESC, action, query LIMIT ?", (scope, max(limit, 0))
        )
        return [_USES.load(row) for row in rows]

    async def forget_uses(self, before: datetime) -> int:
        return await self._execute("DELETE FROM discovery_use WHERE at < ?", (_ts(before),))
