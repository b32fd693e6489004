"""``PostgresStore``: the ``Store`` shared by several gateway instances behind a load balancer.

Driver: asyncpg. The gateway is a pure asyncio server (anyio on its asyncio backend, uvicorn,
the MCP SDK), and asyncpg is asyncio-native with its own connection pool, the binary protocol
(``bytea`` and ``timestamptz`` come back as ``bytes`` and aware UTC ``datetime`` with no text
round trip) and prepared statements cached per connection. psycopg 3 would also do, but brings
its async API as a layer over a sync core, a separate pool package, and a libpq (binary wheel)
dependency; nothing here needs what it adds. Like aiosqlite, asyncpg runs on asyncio only.

Design, mirroring ``SQLiteStore`` (same protocol, same contract tests, the same record <-> row
conversion in ``_rows.py``):

- A connection pool (``asyncpg.create_pool``); every method is one statement, or one short
  transaction on one pooled connection. Nothing is held across awaits of the caller. So each can run
  again whole when the server rolls it back for a deadlock or a serialization failure (``_run``).
- Nothing here leaves session state on a connection (no ``SET``, ``LISTEN``, session-level advisory
  locks or ``WITH HOLD`` cursors; the migration lock is transaction-scoped), so a connection goes
  back to the pool without asyncpg's default reset query (``RESET ALL``, ``UNLISTEN *``, ...): that
  query is a round trip of its own on every release, which doubled the round trips of every store
  method, two audit rows per call included. asyncpg still rolls back a transaction left open.
- State changes that must happen exactly once are one conditional statement: ``UPDATE ... WHERE
  status = $n RETURNING``. Under READ COMMITTED a concurrent UPDATE re-checks the WHERE against
  the row the winner committed, so of any number of instances exactly one sees a row come back.
- The schema is an ordered list of migrations recorded in ``schema_version`` (one row per step).
  The steps run in one transaction under a transaction-scoped advisory lock, so two instances
  starting at once against an empty database migrate it once: the second waits, then finds
  nothing to do. DDL is transactional here, so a failing step leaves nothing behind. A database
  migrated by a newer build is refused rather than guessed at.
- Sealed credentials and compressed catalogs are ``bytea``; times are ``timestamptz`` (compared by
  instant, returned as UTC); listings sort with ``COLLATE "C"`` so the order is byte order, as in
  SQLite, whatever the database's default collation.
- The database URL may carry a password: it is never logged, and every error message shows the
  URL with the password replaced (``redact_url``). An unreachable database is one ``StoreUnopenable``
  saying what to check.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import asyncpg
from pydantic import BaseModel

from ..primitives.secrets import CredentialKey
from ..vocabulary.errors import StoreUnavailable, StoreUnopenable
from ..vocabulary.model import ACTIONS_ADAPTER
from ._postgres_schema import SCHEMA_VERSION, migrate
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
from .database_url import redact_url, scrub
from .instance_locks import ID_CHARS, instance_of, new_instance_id
from .wait_budget import current_budget

__all__ = ["SCHEMA_VERSION", "PostgresBuckets", "PostgresStore"]

logger = logging.getLogger(__name__)

_M = TypeVar("_M", bound=BaseModel)
_T = TypeVar("_T")

_INSTANCE_LOCKS = 0x4D434757
"""The first key of every instance's session advisory lock (``_claim_instance``); the second is its id."""
_CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a connection: a firewalled host should fail the start, not hang it."""
_COMMAND_TIMEOUT = 15.0
"""Seconds one statement may take: a server that stops answering (frozen, a network that drops
packets) is an outage (``StoreUnavailable``: the agent is told to retry), not a call that hangs for
as long as it lasts. Every statement here is a point read or write, or a short migration. Inside an
agent's request what is left of its wait budget (``wait_budget.STORE_WAIT_SECONDS`` for all its
statements together) cuts it shorter."""
_POOL_MAX = 10
_REPLAYABLE = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)
"""What the server rolls a transaction back for to say "run it again" (40P01, 40001): it kept none of it."""
_REPLAYS = 2
"""Times a statement or transaction rolled back so is run again before the conflict is an outage."""
_REPLAY_PAUSE = 0.02
"""Seconds before the first run again (jittered, doubling): the other side of the conflict finishes meanwhile."""
_NO_SLOT = (asyncpg.TooManyConnectionsError, asyncpg.CannotConnectNowError)
"""A new connection the server refused before anything ran on it: no connection slot left for the
gateway's role or the server (53300), or a server starting up or shutting down (57P03)."""
_SLOT_WAIT = 5.0
"""Seconds a statement outside any request (a sync, the audit writer) waits for one of the pool's own
connections when the server has no slot for a new one; inside a request, what is left of its wait budget."""
_SLOT_RETRY_FIRST, _SLOT_RETRY_MAX = 0.05, 0.5
"""Seconds between two tries for a connection meanwhile: doubling from the first to the last."""
# What a bad URL, an unreachable or refusing server raise from asyncpg (socket errors are OSError).
_DRIVER_ERRORS = (OSError, TimeoutError, ValueError, asyncpg.PostgresError, asyncpg.InterfaceError)
# What a lost or refused connection raises once open (the server stopped, restarting or unreachable):
# a transient outage (``StoreUnavailable``), not a bug. ``InternalClientError`` is asyncpg's "cannot
# switch to state N" on a connection the server dropped mid-protocol.
# A pool that opens a new connection meets the server's refusals too: a password changed or a login
# revoked (class 28), no connection slot or disk left (class 53), the database dropped. Each is an outage
# for the requests it fails (503, a JSON-RPC error), not a bug (500 with a traceback).
# So is a server whose state refuses every request alike, whatever the request: a read-only server (a
# standby the URL reaches after a failover), rights on the tables taken away, tables that are not there
# (a failover to a new, empty server), a transaction rolled back for a conflict (class 40).
# So is a statement cancelled for waiting too long, on a lock held elsewhere mostly: the role's
# ``lock_timeout`` (55P03) or ``statement_timeout`` (57014, class 57 with the server's shutdowns). The same
# statement passes once that lock is let go of.
_OUTAGE_ERRORS = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.OperatorInterventionError,
    asyncpg.LockNotAvailableError,
    asyncpg.InternalClientError,
    asyncpg.InvalidAuthorizationSpecificationError,
    asyncpg.InsufficientResourcesError,
    asyncpg.InvalidCatalogNameError,
    asyncpg.ReadOnlySQLTransactionError,
    asyncpg.InsufficientPrivilegeError,
    asyncpg.UndefinedTableError,
    asyncpg.TransactionRollbackError,
)


async def _no_session_state(conn: asyncpg.Connection) -> None:
    """The pool's reset on release: nothing to undo (see the module docstring). asyncpg has already
    rolled back an open transaction and dropped listeners, locally, before it calls this."""


# -- tables and statements -----------------------------------------------------------------------


def _q(column: str) -> str:
    return f'"{column}"'


def _insert_sql(table: str, columns: Sequence[str], key: Sequence[str] = ()) -> str:
    """An INSERT, or with ``key`` an upsert that overwrites every other column (``put_*`` semantics)."""
    values = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
    sql = f"INSERT INTO {table} ({', '.join(map(_q, columns))}) VALUES ({values})"
    if key:
        updates = ", ".join(f"{_q(c)} = excluded.{_q(c)}" for c in columns if c not in key)
        sql += f" ON CONFLICT ({', '.join(map(_q, key))}) DO UPDATE SET {updates}"
    return sql


class _Table(RecordColumns[_M]):
    """A record table in PostgreSQL: ``$n`` placeholders, quoted column names (``"user"`` is a reserved
    word), datetimes as ``timestamptz`` that asyncpg hands back as aware UTC ``datetime``."""

    def __init__(self, name: str, model: type[_M], key: Sequence[str] = ()) -> None:
        super().__init__(model)
        self.select = f"SELECT {', '.join(map(_q, self.columns))} FROM {name}"
        self.returning = f"RETURNING {', '.join(map(_q, self.columns))}"
        self.insert = _insert_sql(name, self.columns, key)

    def params(self, record: _M) -> tuple[object, ...]:
        return self.values(record, aware)

    def load(self, row: asyncpg.Record) -> _M:
        return self.record(row)


_STATES = _Table("connector_state", ConnectorState, ["slug"])
_TOKENS = _Table("token", TokenRecord, ["id"])
_OPERATOR_TOKENS = _Table("operator_token", OperatorTokenRecord)  # inserted once, never overwritten
_LINKS = _Table("link", LinkRecord, ["token_hash"])
_APPROVALS = _Table("approval", ApprovalRecord, ["id"])
_AUDIT = _Table("audit", AuditRecord)  # append-only: an outcome is one more row
_AUDIT_OPEN = _Table("audit_open", AuditRecord, ["call_id"])  # upsert: a retried ``started`` row is one row
_USES = _Table("discovery_use", UseRecord, ["scope", "action", "query"])  # one row per distinct query
# An outcome settles its call's open row in the same statement (one round trip, one snapshot).
_AUDIT_SETTLE = (
    f"WITH settled AS (DELETE FROM audit_open WHERE call_id = ${_AUDIT.columns.index('call_id') + 1}) " + _AUDIT.insert
)
_AUDIT_COLUMNS = ", ".join(map(_q, _AUDIT.columns))
_AUDIT_HELD = 'SELECT 1 FROM audit WHERE at = $1 AND call_id IS NOT DISTINCT FROM $2 AND "user" = $3 AND requested = $4'
"""Whether ``audit`` holds a row already (``audit_identity``): ``at`` first, so its index finds it."""
_AUDIT_SETTLED = "SELECT 1 FROM audit WHERE at >= $1 AND call_id = $2 LIMIT 1"
"""Whether a call started at ``at`` has its outcome in ``audit`` (no later than its start: the time index)."""
_AUDIT_OPEN_REPLAY = _insert_sql("audit_open", _AUDIT.columns) + " ON CONFLICT (call_id) DO NOTHING"
"""A replayed ``started`` row: never over a row already open (one marked ``interrupted`` stays so)."""
_AUDIT_LIST = (
    f"SELECT {_AUDIT_COLUMNS} FROM ("
    f"(SELECT {_AUDIT_COLUMNS}, 0 AS part, NULL::bigint AS id FROM audit_open ORDER BY at DESC LIMIT $1) "
    f"UNION ALL (SELECT {_AUDIT_COLUMNS}, 1, id FROM audit ORDER BY at DESC, id DESC LIMIT $1)"
    ") AS newest ORDER BY at DESC, part, id DESC LIMIT $1"
)
"""The newest rows of ``audit_open`` and ``audit`` together, in one statement (one snapshot: a call
settling meanwhile is seen in exactly one of them); equal times list open rows first."""
_REVIEWS = _Table("action_review", ActionReviewRecord, ["name", "fingerprint"])
# Rows are only ever added or re-decided (an upsert with a new decided_at), never deleted: the
# count, the newest decision and the number of approvals together change with every decision.
_REVIEWS_VERSION = "SELECT count(*), max(decided_at), count(*) FILTER (WHERE decision = 'approved') FROM action_review"

_CATALOG_UPSERT = _insert_sql("catalog", CATALOG_COLUMNS, ["slug"])
_CREDENTIAL_INSERT = _insert_sql("credential", (*CREDENTIAL_KEY, "sealed"))
_CREDENTIAL_UPSERT = _insert_sql("credential", (*CREDENTIAL_KEY, "sealed"), CREDENTIAL_KEY)
_CREDENTIAL_WHERE = "WHERE connector = $1 AND principal = $2 AND name = $3"
_META_UPSERT = _insert_sql("meta", ("key", "value"), ["key"])
_PING = "SELECT current_setting('transaction_read_only') AS read_only FROM schema_version LIMIT 1"
"""Whether writes would be refused (a standby, a database set read-only)."""
_READ_TABLES = ("credential", "token", "operator_token", "link", "approval", "connector_state", "catalog")
"""Tables a call or a page reads."""
_WRITE_TABLES = ("audit", "audit_open", "rate_bucket", "meta", "ephemeral")
"""Tables every call writes (its audit rows, rate limits) or a page (sessions, nonces)."""
_READY_LOCK_WAIT_MS = 300
"""How long readiness waits for a table's lock: a lock held elsewhere longer than this stalls requests."""
_READY_LOCKS = (
    f"SET LOCAL lock_timeout = {_READY_LOCK_WAIT_MS}; "
    f"LOCK TABLE {', '.join(_READ_TABLES)} IN ACCESS SHARE MODE; "
    f"LOCK TABLE {', '.join(_WRITE_TABLES)} IN ROW EXCLUSIVE MODE"
)
"""The locks the gateway's own statements take on its tables (a read's, a write's), taken and let go of
at once: a table another session holds locked against them stalls every request that uses it, though
``schema_version`` still answers. Several statements in one round trip (no parameters: asyncpg sends them
as one simple query); ``SET LOCAL`` ends with the transaction, so the pooled connection keeps no setting."""
_LOCK_HOLDERS = """
SELECT c.relname AS "table", l.mode, l.pid, coalesce(a.application_name, '') AS application
FROM pg_locks l JOIN pg_class c ON c.oid = l.relation LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.granted AND l.pid <> pg_backend_pid() AND c.relnamespace = current_schema()::regnamespace
  AND c.relname = ANY($1::text[])
  AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
ORDER BY c.relname, l.pid
"""
"""Who holds a lock on the gateway's tables that its statements wait behind (what readiness names)."""
_C = 'COLLATE "C"'


def _changed(status: str) -> int:
    """Rows changed, from asyncpg's command tag (``UPDATE 1``, ``DELETE 0``)."""
    count = status.rsplit(" ", 1)[-1]
    return int(count) if count.isdigit() else 0


# -- the store -------------------------------------------------------------------------------------


class PostgresStore:
    """The ``Store`` protocol over one PostgreSQL database, shared by any number of gateway instances.

    Args:
        url: ``postgresql://user:password@host:port/database`` (libpq-style parameters such as
            ``sslmode`` allowed). Tables go into the connection's current schema.
        max_connections: the pool's upper bound per instance.
        decode_actions: validates a stored catalog's actions JSON (on a worker thread); the
            runtime passes ``catalog_memory.validate_actions`` to share equal values.
        create_tables: False to refuse, on ``open``, a database without the gateway's tables instead of
            creating them there (``doctor``, which must not set up what may be the wrong database).

    Example:
        async with PostgresStore("postgresql://gw@db.internal/gateway") as store:
            await store.set_meta("project", "demo")
    """

    def __init__(
        self,
        url: str,
        *,
        max_connections: int = _POOL_MAX,
        decode_actions: ActionsDecoder = ACTIONS_ADAPTER.validate_json,
        create_tables: bool = True,
    ) -> None:
        self._url = url
        self._create_tables = create_tables
        self._decode_actions = decode_actions
        self._max = max_connections
        self._pool: asyncpg.Pool | None = None
        self._lock = anyio.Lock()
        self._instance: tuple[str, asyncpg.Connection] | None = None
        self._wanting = 0
        """Statements holding or getting a pooled connection now: when the server has no slot for a new
        one, another's comes back to the pool in a moment."""

    @property
    def instance(self) -> str | None:
        """This open store's instance id (the prefix of the call ids its gateway hands out), held alive
        by a session advisory lock on a connection of its own; None when that could not be taken."""
        return self._instance[0] if self._instance is not None else None

    def __repr__(self) -> str:
        return f"PostgresStore({redact_url(self._url)!r})"

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- lifecycle ---------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect the pool and run any pending migrations. Idempotent.

        Raises:
            StoreUnopenable: the database cannot be reached or refuses us (the message names the URL
                with its password redacted, and what to check), is not ours, or is newer than us.
        """
        async with self._lock:
            if self._pool is not None:
                return
            try:
                pool = await asyncpg.create_pool(
                    self._url,
                    min_size=1,
                    max_size=self._max,
                    timeout=_CONNECT_TIMEOUT,
                    command_timeout=_COMMAND_TIMEOUT,
                    server_settings={"application_name": "mcp-gateway"},
                    reset=_no_session_state,
                )
            except _DRIVER_ERRORS as exc:
                raise StoreUnopenable(self._unusable(exc)) from None
            try:
                async with pool.acquire() as conn:
                    await migrate(conn, redact_url(self._url), create=self._create_tables)
            except _DRIVER_ERRORS as exc:
                with anyio.CancelScope(shield=True):
                    await pool.close()
                raise StoreUnopenable(self._unusable(exc)) from None
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await pool.close()
                raise
            self._pool = pool
            self._instance = await self._claim_instance()

    async def _claim_instance(self) -> tuple[str, asyncpg.Connection] | None:
        """A session advisory lock held for this store's life: the server lets go of it when the
        session ends (the process died, or its host), which is how another instance starting tells
        this one's calls in flight from a dead one's. Not taken (None): those calls may be marked
        ``interrupted`` by such a start, and their outcome still replaces the mark."""
        instance = new_instance_id()
        try:
            conn = await asyncpg.connect(
                self._url,
                timeout=_CONNECT_TIMEOUT,
                command_timeout=_COMMAND_TIMEOUT,
                server_settings={"application_name": "mcp-gateway instance"},
            )
        except _DRIVER_ERRORS as exc:
            logger.debug("no instance lock on %s (%s)", redact_url(self._url), type(exc).__name__)
            return None
        try:
            if await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", _INSTANCE_LOCKS, int(instance, 16)):
                return instance, conn
        except _DRIVER_ERRORS as exc:
            logger.debug("no instance lock on %s (%s)", redact_url(self._url), type(exc).__name__)
        with anyio.CancelScope(shield=True):
            await conn.close()
        return None

    async def close(self) -> None:
        """Close the pool, after any operation in flight. Idempotent; ``open`` may follow."""
        async with self._lock:
            if self._pool is None:
                return
            pool, self._pool = self._pool, None
            held, self._instance = self._instance, None
            with anyio.CancelScope(shield=True):
                await pool.close()
                if held is not None:
                    with contextlib.suppress(*_DRIVER_ERRORS):
                        await held[1].close(timeout=_CONNECT_TIMEOUT)

    def _unusable(self, exc: BaseException) -> str:
        first_line = (str(exc) or type(exc).__name__).splitlines()[0]
        reason = scrub(f"{type(exc).__name__}: {first_line}", self._url)[:300]
        return (
            f"cannot use the PostgreSQL database at {redact_url(self._url)} ({reason}); check that the server "
            "is running and reachable at that host and port, that the user, password and database name in "
            "the database URL ($MCP_GATEWAY_DATABASE_URL or --database-url) are right, and that this user "
            "may create tables there"
        )

    # -- plumbing ------------------------------------------------------------------------------------

    def _p(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError(f"{self!r} is not open: await store.open() first")
        return self._pool

    @asynccontextmanager
    async def _waiting(self) -> AsyncGenerator[None]:
        """Bound the body (a statement, a transaction) by what is left of the request's wait budget
        (``store/wait_budget.py``), and charge it the wait; outside a request, by ``_COMMAND_TIMEOUT`` alone."""
        budget = current_budget()
        if budget is None:
            yield
            return
        left = budget.left
        if left <= 0:
            raise self._stalled(budget.seconds)
        began = time.monotonic()
        try:
            with anyio.fail_after(left) if left < _COMMAND_TIMEOUT else contextlib.nullcontext():
                yield
        except TimeoutError:
            raise self._stalled(budget.seconds) from None
        finally:
            budget.spent += time.monotonic() - began

    @asynccontextmanager
    async def _connection(self) -> AsyncGenerator[asyncpg.Connection]:
        """A pooled connection for the body. When the server refuses a new one (``_NO_SLOT``: other clients
        hold every slot, or it is starting up) while other statements of this store hold or are getting
        one of the pool's own connections, that one is free in a moment: the statement waits for it (what
        is left of the request's wait budget, else ``_SLOT_WAIT``) rather than fail at once. Nothing ran
        on a refused connection, so trying again repeats nothing."""
        pool = self._p()
        budget = current_budget()
        deadline = time.monotonic() + (budget.left if budget is not None else _SLOT_WAIT)
        delay = _SLOT_RETRY_FIRST
        self._wanting += 1
        try:
            while True:
                try:
                    conn: asyncpg.Connection = await pool.acquire()
                    break
                except _NO_SLOT:
                    # Alone: no connection of ours comes back to wait for (a role allowed none at all).
                    if self._wanting == 1 or time.monotonic() + delay >= deadline:
                        raise
                await anyio.sleep(delay)
                delay = min(delay * 2, _SLOT_RETRY_MAX)
            try:
                yield conn
            finally:
                await pool.release(conn)
        finally:
            self._wanting -= 1

    def _stalled(self, seconds: float) -> StoreUnavailable:
        return StoreUnavailable(
            f"the PostgreSQL database at {redact_url(self._url)} did not answer within {seconds:g} s, all one "
            "request may wait for it (a lock held elsewhere, or a server that stopped answering)"
        )

    async def _run(self, attempt: Callable[[asyncpg.Connection], Awaitable[_T]]) -> _T:
        """``attempt`` on a pooled connection, within the request's wait budget, its driver errors turned
        into outages. ``attempt`` is one statement or one transaction of its own, so when the server rolls
        it back for a conflict (``_REPLAYABLE``: a deadlock, a serialization failure) nothing of it was
        kept and it runs again whole, up to ``_REPLAYS`` times after a short jittered pause, while the
        budget has time left for it."""
        replays = 0
        try:
            while True:
                try:
                    async with self._waiting(), self._connection() as conn:
                        return await attempt(conn)
                except _REPLAYABLE:
                    pause = _REPLAY_PAUSE * (2**replays) * random.uniform(0.5, 1.5)
                    budget = current_budget()
                    if replays >= _REPLAYS or (budget is not None and budget.left <= pause):
                        raise
                replays += 1
                # Both sides of a deadlock may be ours (two requests): the jitter keeps their replays apart.
                await anyio.sleep(pause)
        except _OUTAGE_ERRORS as exc:
            raise self._outage(exc) from None
        except asyncpg.InterfaceError as exc:
            raise self._outage(exc) if _lost(exc) else exc from None

    async def _execute(self, sql: str, *params: object) -> int:
        async def attempt(conn: asyncpg.Connection) -> int:
            return _changed(await conn.execute(sql, *params))

        return await self._run(attempt)

    async def _executemany(self, sql: str, params: Sequence[Sequence[object]]) -> None:
        """One statement for many rows, atomic on its own: asyncpg pipelines them with one Sync at
        the end, so they are one implicit transaction and one round trip (no BEGIN and COMMIT)."""

        async def attempt(conn: asyncpg.Connection) -> None:
            await conn.executemany(sql, params)

        await self._run(attempt)

    async def _fetchrow(self, sql: str, *params: object) -> asyncpg.Record | None:
        async def attempt(conn: asyncpg.Connection) -> asyncpg.Record | None:
            return await conn.fetchrow(sql, *params)

        return await self._run(attempt)

    async def _fetch(self, sql: str, *params: object) -> list[asyncpg.Record]:
        async def attempt(conn: asyncpg.Connection) -> list[asyncpg.Record]:
            return await conn.fetch(sql, *params)

        return await self._run(attempt)

    async def _transact(self, body: Callable[[asyncpg.Connection], Awaitable[_T]]) -> _T:
        """``body`` in one transaction, committed when it returns; run again whole when the server rolls
        it back for a conflict (``_run``), so ``body`` must do nothing but its statements on ``conn``."""

        async def attempt(conn: asyncpg.Connection) -> _T:
            async with conn.transaction():
                return await body(conn)

        return await self._run(attempt)

    async def ping(self) -> None:
        """Readiness, in one short transaction; raises ``StoreUnavailable`` when the database cannot be
        reached, or answers but cannot serve the gateway: its tables missing or out of the user's reach,
        read-only (a standby after a failover), where every write would fail, or one of them locked by
        another session against the gateway's statements (the message names the table and who holds it)."""
        locked = False

        async def check(conn: asyncpg.Connection) -> asyncpg.Record | None:
            nonlocal locked
            try:
                await conn.execute(_READY_LOCKS)
            except asyncpg.LockNotAvailableError:
                locked = True
                raise
            return await conn.fetchrow(_PING)

        try:
            row = await self._transact(check)
        except StoreUnavailable:
            if not locked:
                raise
            raise await self._locked() from None
        if row is not None and row["read_only"] == "on":
            raise self._outage(asyncpg.ReadOnlySQLTransactionError("the server runs read-only transactions only"))

    async def _locked(self) -> StoreUnavailable:
        """The outage of a gateway table locked elsewhere, naming the table, the lock and its holder."""
        held = await self._fetch(_LOCK_HOLDERS, [*_READ_TABLES, *_WRITE_TABLES])
        named = "; ".join(
            f"table {r['table']} is held in {r['mode']} by another session (pid {r['pid']}"
            + (f", application {r['application'][:60]!r})" if r["application"] else ")")
            for r in held
        )
        brief = (named or "a table of the gateway is locked by another session") + (
            f": the gateway's statements wait behind it (readiness waited {_READY_LOCK_WAIT_MS} ms)"
        )
        return StoreUnavailable(f"the PostgreSQL database at {redact_url(self._url)}: {brief}; {_LOCKS}", brief=brief)

    async def probe_write(self) -> None:
        """One small committed write; raises ``StoreUnavailable`` when writes fail though reads work."""
        await self._execute(_META_UPSERT, "health_probe", dump_meta(datetime.now(UTC).isoformat()))

    def _outage(self, exc: BaseException) -> StoreUnavailable:
        """The outage ``exc`` is, its message naming the database, the cause and, for a server that
        refuses until someone acts on it (``lasting``), what to do."""
        first_line = next(iter(str(exc).splitlines()), "")
        reason = scrub(f"{type(exc).__name__}: {first_line}", self._url)[:200]
        where = f"the PostgreSQL database at {redact_url(self._url)}"
        if isinstance(exc, asyncpg.DiskFullError):
            return StoreUnavailable(
                f"{where} cannot write ({reason}): its server's disk is full; free some space there", lasting=True
            )
        if isinstance(exc, asyncpg.ReadOnlySQLTransactionError):
            return StoreUnavailable(
                f"{where} refuses writes ({reason}): it is read-only, a standby the URL reaches after a failover "
                "or a database set read-only; point the URL at the primary or make it writable",
                lasting=True,
            )
        if isinstance(exc, asyncpg.InsufficientPrivilegeError):
            return StoreUnavailable(
                f"{where} refuses the gateway's user ({reason}): grant that user its rights on the gateway's "
                "tables again (or give it back their ownership)",
                lasting=True,
            )
        if isinstance(exc, asyncpg.UndefinedTableError):
            return StoreUnavailable(
                f"{where} has no gateway tables ({reason}): it may be a new, empty server (a failover to an "
                "empty database); point the URL back at the gateway's database or restore it from a backup, "
                "or restart the gateway to create empty tables there (every credential, token and approval "
                "then has to be given again)",
                lasting=True,
            )
        if isinstance(exc, TimeoutError):
            return StoreUnavailable(
                f"{where} did not answer within {_COMMAND_TIMEOUT:g} s (a lock held elsewhere, or a server that "
                "stopped answering)"
            )
        if isinstance(exc, asyncpg.TransactionRollbackError):
            return StoreUnavailable(f"{where} rolled back a transaction ({reason}); try again")
        return StoreUnavailable(f"{where} {_refusal(exc)} ({reason}){_what_to_check(exc)}")

    # -- catalog ---------------------------------------------------------------------------------------

    async def get_catalog(self, slug: str) -> CatalogRecord | None:
        """The stored catalog, or None if there is none or this build can no longer read it (a miss,
        so the next sync rebuilds it)."""
        row = await self._fetchrow("SELECT fingerprint, info, actions FROM catalog WHERE slug = $1", slug)
        if row is None:
            return None
        return await load_catalog(slug, row, logger, self._decode_actions)

    async def put_catalog(self, record: CatalogRecord) -> None:
        await self._execute(_CATALOG_UPSERT, *await catalog_params(record))

    async def delete_catalog(self, slug: str) -> None:
        await self._execute("DELETE FROM catalog WHERE slug = $1", slug)

    async def put_connector_state(self, state: ConnectorState) -> None:
        await self._execute(_STATES.insert, *_STATES.params(state))

    async def list_connector_states(self) -> list[ConnectorState]:
        return [_STATES.load(r) for r in await self._fetch(f"{_STATES.select} ORDER BY slug {_C}")]

    # -- credentials -------------------------------------------------------------------------------------

    async def put_credential(self, key: CredentialKey, sealed: bytes) -> None:
        await self._execute(_CREDENTIAL_UPSERT, key.connector, key.principal, key.name, bytes(sealed))

    async def get_credential(self, key: CredentialKey) -> bytes | None:
        row = await self._fetchrow(
            f"SELECT sealed FROM credential {_CREDENTIAL_WHERE}", key.connector, key.principal, key.name
        )
        return bytes(row["sealed"]) if row is not None else None

    async def delete_credential(self, key: CredentialKey) -> None:
        await self._execute(f"DELETE FROM credential {_CREDENTIAL_WHERE}", key.connector, key.principal, key.name)

    async def list_credentials(self) -> list[CredentialKey]:
        rows = await self._fetch(
            f"SELECT connector, principal, name FROM credential ORDER BY connector {_C}, principal {_C}, name {_C}"
        )
        return [credential_key(r) for r in rows]

    async def replace_all_credentials(self, sealed: dict[CredentialKey, bytes]) -> None:
        """Rewrite every credential in one transaction (key rotation): all of them, or none."""
        params = [(k.connector, k.principal, k.name, bytes(v)) for k, v in sealed.items()]

        async def rewrite(conn: asyncpg.Connection) -> None:
            await conn.execute("DELETE FROM credential")
            if params:
                await conn.executemany(_CREDENTIAL_INSERT, params)

        await self._transact(rewrite)

    # -- tokens ------------------------------------------------------------------------------------------

    async def put_token(self, token: TokenRecord) -> None:
        await self._execute(_TOKENS.insert, *_TOKENS.params(token))

    async def find_token(self, token_hash: str) -> TokenRecord | None:
        """The token with this hash, revoked or not: the caller checks ``revoked``."""
        row = await self._fetchrow(f"{_TOKENS.select} WHERE token_hash = $1", token_hash)
        return _TOKENS.load(row) if row is not None else None

    async def list_tokens(self) -> list[TokenRecord]:
        return [_TOKENS.load(r) for r in await self._fetch(f"{_TOKENS.select} ORDER BY created_at, id {_C}")]

    async def revoke_token(self, token_id: str) -> bool:
        """True if this call revoked the token; False if it is unknown or already revoked."""
        row = await self._fetchrow(
            "UPDATE token SET revoked = true WHERE id = $1 AND NOT revoked RETURNING id", token_id
        )
        return row is not None

    # -- operator tokens ------------------------------------------------------------------------------------

    async def add_operator_token(self, token: OperatorTokenRecord) -> bool:
        """Insert unless the id or hash is taken; True if inserted (never overwrites)."""
        row = await self._fetchrow(
            f"{_OPERATOR_TOKENS.insert} ON CONFLICT DO NOTHING RETURNING id", *_OPERATOR_TOKENS.params(token)
        )
        return row is not None

    async def find_operator_token(self, token_hash: str) -> OperatorTokenRecord | None:
        row = await self._fetchrow(f"{_OPERATOR_TOKENS.select} WHERE token_hash = $1", token_hash)
        return _OPERATOR_TOKENS.load(row) if row is not None else None

    async def get_operator_token(self, token_id: str) -> OperatorTokenRecord | None:
        row = await self._fetchrow(f"{_OPERATOR_TOKENS.select} WHERE id = $1", token_id)
        return _OPERATOR_TOKENS.load(row) if row is not None else None

    async def list_operator_tokens(self) -> list[OperatorTokenRecord]:
        rows = await self._fetch(f"{_OPERATOR_TOKENS.select} ORDER BY created_at, id {_C}")
        return [_OPERATOR_TOKENS.load(r) for r in rows]

    async def revoke_operator_token(self, token_id: str) -> bool:
        """Compare-and-set: True only for the one caller, in any instance, that revoked it."""
        row = await self._fetchrow(
            "UPDATE operator_token SET revoked = true WHERE id = $1 AND NOT revoked RETURNING id", token_id
        )
        return row is not None

    # -- links -------------------------------------------------------------------------------------------

    async def put_link(self, link: LinkRecord) -> None:
        await self._execute(_LINKS.insert, *_LINKS.params(link))

    async def get_link(self, token_hash: str) -> LinkRecord | None:
        row = await self._fetchrow(f"{_LINKS.select} WHERE token_hash = $1", token_hash)
        return _LINKS.load(row) if row is not None else None

    async def consume_link(self, token_hash: str, now: datetime) -> LinkRecord | None:
        """Mark the link used if it is unused and unexpired; return it, else None. One statement:
        of any number of consumers, in this instance or another, exactly one gets the row back."""
        row = await self._fetchrow(
            "UPDATE link SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 "
            + _LINKS.returning,
            token_hash,
            aware(now),
        )
        return _LINKS.load(row) if row is not None else None

    async def release_link(self, token_hash: str, used_at: datetime) -> bool:
        changed = await self._execute(
            "UPDATE link SET used_at = NULL WHERE token_hash = $1 AND used_at = $2", token_hash, aware(used_at)
        )
        return changed == 1

    # -- approvals ----------------------------------------------------------------------------------------

    async def put_approval(self, approval: ApprovalRecord) -> None:
        await self._execute(_APPROVALS.insert, *_APPROVALS.params(approval))

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        row = await self._fetchrow(f"{_APPROVALS.select} WHERE id = $1", approval_id)
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

        ``decided_at`` and ``decided_by`` keep the first transition's (the human's decision, not the consumption).
        """
        row = await self._fetchrow(
            "UPDATE approval SET status = $1, decided_at = COALESCE(decided_at, $2), "
            "decided_by = COALESCE(decided_by, $3) WHERE id = $4 AND status = $5 RETURNING id",
            to_status,
            aware(now),
            by,
            approval_id,
            from_status,
        )
        return row is not None

    async def list_approvals(self, status: ApprovalStatus | None = None) -> list[ApprovalRecord]:
        order = f"ORDER BY created_at, id {_C}"
        if status is None:
            rows = await self._fetch(f"{_APPROVALS.select} {order}")
        else:
            rows = await self._fetch(f"{_APPROVALS.select} WHERE status = $1 {order}", status)
        return [_APPROVALS.load(r) for r in rows]

    # -- audit -----------------------------------------------------------------------------------------------

    async def append_audit(self, record: AuditRecord) -> None:
        await self.append_audits([record])

    async def append_audits(self, records: Sequence[AuditRecord]) -> None:
        """Append rows in one transaction: all of them, or none (the background audit writer's batch,
        see ``audit.Auditor``). ``started`` rows go to ``audit_open`` first, then the outcomes to
        ``audit``, each deleting its call's open row. Rows of one kind (a call's row, or a batch of
        starts or of outcomes) are one round trip; a batch of both kinds is one transaction."""
        parts = split_audits(records)
        if len(parts) == 1:
            rows, open_rows = parts[0]
            sql = _AUDIT_OPEN.insert if open_rows else _AUDIT_SETTLE
            if len(rows) == 1:
                await self._execute(sql, *_AUDIT.params(rows[0]))
            else:
                await self._executemany(sql, [_AUDIT.params(record) for record in rows])
            return
        if not parts:
            return

        async def append(conn: asyncpg.Connection) -> None:
            for rows, open_rows in parts:
                sql = _AUDIT_OPEN.insert if open_rows else _AUDIT_SETTLE
                await conn.executemany(sql, [_AUDIT.params(record) for record in rows])

        await self._transact(append)

    async def list_audit(self, limit: int = 50) -> list[AuditRecord]:
        """The ``limit`` newest rows of ``audit`` and ``audit_open``, newest first (ties in ``at``: open
        rows first, then by insertion order)."""
        return [_AUDIT.load(r) for r in await self._fetch(_AUDIT_LIST, max(limit, 0))]

    async def replay_audits(self, records: Sequence[AuditRecord]) -> int:
        """Append the outcomes ``audit`` does not hold yet, in one transaction (see ``AuditStore``); a
        row already there still settles its call's open row, and a ``started`` row opens its call
        unless its outcome is in ``audit`` already. A journal's replay is rare and short:
        a lookup per row is simpler than one statement that would need every column's type cast."""
        rows = replayed_rows(records)

        async def replay(conn: asyncpg.Connection) -> int:
            added = 0  # counted afresh by each run: a run rolled back added nothing
            for record in rows:
                at, call_id, user, requested = audit_identity(record)
                if record.status == "started":  # open, unless its outcome is in already
                    if not await conn.fetchval(_AUDIT_SETTLED, aware(at), call_id):
                        await conn.execute(_AUDIT_OPEN_REPLAY, *_AUDIT.params(record))
                    continue
                if await conn.fetchval(_AUDIT_HELD, aware(at), call_id, user, requested):
                    if call_id is not None:
                        await conn.execute("DELETE FROM audit_open WHERE call_id = $1", call_id)
                    continue
                await conn.execute(_AUDIT_SETTLE, *_AUDIT.params(record))
                added += 1
            return added

        return await self._transact(replay)

    async def interrupt_started_audits(self, keep: Collection[str] = ()) -> int:
        started = [row[0] for row in await self._fetch("SELECT call_id FROM audit_open WHERE status = 'started'")]
        if not started:
            return 0
        # Instances whose session still holds its advisory lock, on any host: their calls are running.
        locks = await self._fetch(
            "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = $1::bigint::oid AND objsubid = 2",
            _INSTANCE_LOCKS,
        )
        alive = {f"{row[0]:0{ID_CHARS}x}" for row in locks}
        gone = sorted(c for c in started if c not in keep and instance_of(c) not in alive)
        if not gone:
            return 0
        return await self._execute(
            "UPDATE audit_open SET status = 'interrupted' WHERE status = 'started' AND call_id = ANY($1::text[])",
            gone,
        )

    # -- short-lived shared state ------------------------------------------------------------------------------

    async def put_ephemeral(self, kind: str, key: str, value: bytes, expires_at: datetime, now: datetime) -> bool:
        """Store ``value`` unless a live entry holds (kind, key); True if stored. Expired entries (of
        every kind) are purged first, so an expired one counts as absent."""

        async def put(conn: asyncpg.Connection) -> asyncpg.Record | None:
            await conn.execute("DELETE FROM ephemeral WHERE expires_at <= $1", aware(now))
            return await conn.fetchrow(
                "INSERT INTO ephemeral (kind, key, value, expires_at) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT (kind, key) DO NOTHING RETURNING kind",
                kind,
                key,
                bytes(value),
                aware(expires_at),
            )

        return await self._transact(put) is not None

    async def get_ephemeral(self, kind: str, key: str, now: datetime) -> bytes | None:
        row = await self._fetchrow(
            "SELECT value FROM ephemeral WHERE kind = $1 AND key = $2 AND expires_at > $3", kind, key, aware(now)
        )
        return bytes(row["value"]) if row is not None else None

    async def take_ephemeral(self, kind: str, key: str, now: datetime) -> bytes | None:
        """Remove the entry and return its value if it was live. One DELETE: one taker wins."""
        row = await self._fetchrow(
            "DELETE FROM ephemeral WHERE kind = $1 AND key = $2 RETURNING value, expires_at", kind, key
        )
        if row is None or row["expires_at"] <= aware(now):
            return None
        return bytes(row["value"])

    async def delete_ephemeral(self, kind: str, key: str) -> None:
        await self._execute("DELETE FROM ephemeral WHERE kind = $1 AND key = $2", kind, key)

    # -- misc ----------------------------------------------------------------------------------------------------

    async def get_meta(self, key: str) -> Any | None:
        row = await self._fetchrow("SELECT value FROM meta WHERE key = $1", key)
        return load_meta(row["value"]) if row is not None else None

    async def set_meta(self, key: str, value: Any) -> None:
        """Store any JSON-serializable value under ``key`` (a ``None`` value reads back as absent)."""
        await self._execute(_META_UPSERT, key, dump_meta(value))

    # -- discovery vectors -------------------------------------------------------------------------

    async def get_vectors(self, model: str, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        if not digests:
            return {}
        rows = await self._fetch(
            "SELECT digest, vector FROM discovery_vector WHERE model = $1 AND digest = ANY($2::bytea[])",
            model,
            [bytes(d) for d in digests],
        )
        return {bytes(row["digest"]): bytes(row["vector"]) for row in rows}

    async def put_vectors(self, model: str, vectors: Mapping[bytes, bytes]) -> None:
        if not vectors:
            return
        params = [(model, bytes(digest), bytes(vector)) for digest, vector in vectors.items()]
        await self._executemany(
            "INSERT INTO discovery_vector (model, digest, vector) VALUES ($1, $2, $3) "
            "ON CONFLICT (model, digest) DO UPDATE SET vector = excluded.vector",
            params,
        )

    # -- action reviews ---------------------------------------------------------------------------------

    async def put_action_review(self, record: ActionReviewRecord) -> None:
        await self._execute(_REVIEWS.insert, *_REVIEWS.params(record))

    async def list_action_reviews(self) -> list[ActionReviewRecord]:
        rows = await self._fetch(f"{_REVIEWS.select} ORDER BY decided_at, name {_C}")
        return [_REVIEWS.load(r) for r in rows]

    async def action_reviews_version(self) -> str:
        row = await self._fetchrow(_REVIEWS_VERSION)
        return "" if row is None else "/".join(str(value) for value in row.values())

    # -- what discover learned from use ----------------------------------------------------------

    async def record_use(self, record: UseRecord) -> None:
        await self._execute(_USES.insert, *_USES.params(record))

    async def list_uses(self, scope: str, limit: int) -> list[UseRecord]:
        rows = await self._fetch(
            f"{_USES.select} WHERE scope = $1 ORDER BY at DESC, action {_C}, query {_C} LIMIT $2",
            scope,
            max(limit, 0),
        )
        return [_USES.load(row) for row in rows]

    async def forget_uses(self, before: datetime) -> int:
        return await self._execute("DELETE FROM discovery_use WHERE at < $1", aware(before))


class _OneLinePoolWarnings(logging.Filter):
    """asyncpg's pool logs a full traceback each time it fails to reconnect in the background (with
    back-off) while the database is down; ``StoreHealth`` already said the store is unavailable, so
    those records keep one line: the message and the error's type and first line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            first_line = next(iter(str(exc).splitlines()), "")
            record.msg = f"{record.getMessage()} ({type(exc).__name__}: {first_line})"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


logging.getLogger("asyncpg.pool").addFilter(_OneLinePoolWarnings())


_LOCKS = "look for a long transaction holding locks on the gateway's tables (pg_stat_activity, pg_locks) and end it"


def _refusal(exc: BaseException) -> str:
    """What the server did, for an outage with no remedy of its own: the database is reachable in most."""
    if isinstance(exc, asyncpg.LockNotAvailableError):
        return "cancelled a statement that waited longer than the gateway user's lock_timeout for a lock held elsewhere"
    if isinstance(exc, asyncpg.QueryCanceledError):
        return (
            "cancelled a statement that ran past the gateway user's statement_timeout (mostly waiting for a lock "
            "held elsewhere), or that an administrator cancelled"
        )
    if isinstance(exc, asyncpg.TooManyConnectionsError):
        return "has no free connections: other clients hold every connection slot it allows the gateway"
    if isinstance(exc, asyncpg.CannotConnectNowError):
        return "takes no connections for the moment: it is starting up, shutting down or recovering"
    if isinstance(exc, asyncpg.OperatorInterventionError):
        return "ended the gateway's connection: the server shut down or restarted, or an administrator ended it"
    if isinstance(exc, asyncpg.InsufficientResourcesError):
        return "lacks the resources to serve the gateway"
    if isinstance(exc, asyncpg.InvalidAuthorizationSpecificationError):
        return "refuses the gateway's login"
    return "is unreachable"


def _what_to_check(exc: BaseException) -> str:
    """Where the operator looks for a cause that is not the network: locks, connections, the role's settings."""
    if isinstance(exc, asyncpg.LockNotAvailableError):
        return f"; {_LOCKS}, or raise that user's lock_timeout (ALTER ROLE … SET lock_timeout)"
    if isinstance(exc, asyncpg.QueryCanceledError):
        return f"; {_LOCKS}, or check that user's statement_timeout (ALTER ROLE … SET statement_timeout)"
    if isinstance(exc, asyncpg.TooManyConnectionsError):
        return (
            ", and the gateway's own pooled connections stayed busy meanwhile; look for clients holding "
            "connections (pg_stat_activity), or raise max_connections or the user's CONNECTION LIMIT"
        )
    if isinstance(exc, asyncpg.InsufficientResourcesError):
        return "; check the server's memory, disk and limits"
    if isinstance(exc, asyncpg.InvalidAuthorizationSpecificationError):
        return "; check the user and password in the database URL, and that the user may log in"
    return ""


def _lost(exc: asyncpg.InterfaceError) -> bool:
    """Whether an ``InterfaceError`` is a lost connection (rather than a misuse, a bug)."""
    text = str(exc).lower()
    return "connection" in text and ("closed" in text or "lost" in text or "reset" in text)


# -- rate limits every instance shares -----------------------------------------------------------------------

_NOW = "extract(epoch from now())"
_TAKE = f"""
INSERT INTO rate_bucket AS b (key, tat, allowed) VALUES ($1, {_NOW} + 1.0 / $2::float8, true)
ON CONFLICT (key) DO UPDATE SET
    allowed = greatest(b.tat, {_NOW}) - {_NOW} <= ($3::float8 - 1.0) / $2::float8,
    tat = CASE WHEN greatest(b.tat, {_NOW}) - {_NOW} <= ($3::float8 - 1.0) / $2::float8
               THEN greatest(b.tat, {_NOW}) + 1.0 / $2::float8 ELSE b.tat END
RETURNING allowed, tat - {_NOW} - ($3::float8 - 1.0) / $2::float8 AS wait
"""
_GIVE_BACK = "UPDATE rate_bucket SET tat = tat - 1.0 / $2::float8 WHERE key = $1"


class PostgresBuckets:
    """Token buckets in the ``rate_bucket`` table, so a limit holds across every instance.

    Each bucket is one row holding its *theoretical arrival time* (GCRA, the token bucket as one
    number): a call may pass when ``tat - now <= (capacity - 1) / rate``, and then moves ``tat`` on
    by ``1 / rate``. Taking a token is one statement (``INSERT … ON CONFLICT DO UPDATE …
    RETURNING``): PostgreSQL locks the row for the update, so two instances never both take the
    last token; time is the database's ``now()``, so the instances' clocks do not matter. Cost: one
    round trip per applicable rate rule per call (measured by ``scripts/bench_call.py``).
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def take(self, key: str, *, rate: float, capacity: float) -> float:
        row = await self._store._fetchrow(_TAKE, _text_key(key), rate, capacity)  # pyright: ignore[reportPrivateUsage]
        if row is None or row["allowed"]:
            return 0.0
        return max(float(row["wait"]), 1e-3)

    async def give_back(self, key: str, *, rate: float, capacity: float) -> None:
        await self._store._execute(_GIVE_BACK, _text_key(key), rate)  # pyright: ignore[reportPrivateUsage]


def _text_key(key: str) -> str:
    # PostgreSQL text cannot hold NUL, which ``traffic`` puts between a rule's name and its subject.
    return key.replace("\0", "\x1f")
