"""The SQLite schema: versioned migrations, applied once however many processes open a new file together.

``PRAGMA user_version`` in the file header counts the steps applied and ``PRAGMA application_id``
marks the file as ours. ``migrate`` runs every pending step in one ``BEGIN IMMEDIATE`` transaction:
the write lock is taken before the version is read, so two processes opening a new file at once
take turns and the second finds nothing left to do; both pragmas are written inside that
transaction, so a step that fails leaves the schema (and the version) exactly as it was. A file
written by a newer build, or by another application, is refused rather than guessed at.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ..vocabulary.errors import StoreUnopenable
from ._access import ACCESS_MIGRATION

if TYPE_CHECKING:
    import aiosqlite  # only migrate needs it: reading SCHEMA_VERSION loads no event loop

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_VERSION", "migrate"]

logger = logging.getLogger(__name__)

# "mcpg" in ASCII: marks the file as ours, so pointing the gateway at some other SQLite database
# fails with a clear message instead of a migration colliding with someone else's tables.
APPLICATION_ID = 0x6D637067

_V10_AUDIT_COLUMNS = (
    "at, user, agent, requested, connector, action, args_preview, fingerprint, verdict, verdict_source, "
    "status, reason, upstream_status, latency_ms, call_id, approved_by"
)
"""The columns ``audit`` and ``audit_open`` had at migration 10 (frozen with it, like every step)."""

# Migration N (1-based) brings the schema from version N-1 to N. Append only: never edit a step that
# has shipped, since databases in the field have already run it.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        # Everything in CatalogRecord except slug, fingerprint and actions lives in `info` (JSON),
        # so a new optional field there needs no migration.
        """CREATE TABLE catalog (
            slug        TEXT PRIMARY KEY,
            fingerprint TEXT NOT NULL,
            info        TEXT NOT NULL DEFAULT '{}',
            actions     BLOB NOT NULL
        )""",
        """CREATE TABLE connector_state (
            slug      TEXT PRIMARY KEY,
            source    TEXT NOT NULL,
            status    TEXT NOT NULL,
            actions   INTEGER NOT NULL,
            error     TEXT,
            synced_at TEXT NOT NULL
        )""",
        """CREATE TABLE credential (
            connector TEXT NOT NULL,
            principal TEXT NOT NULL,
            name      TEXT NOT NULL,
            sealed    BLOB NOT NULL,
            PRIMARY KEY (connector, principal, name)
        )""",
        """CREATE TABLE token (
            id         TEXT PRIMARY KEY,
            agent      TEXT NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            revoked    INTEGER NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE link (
            token_hash  TEXT PRIMARY KEY,
            kind        TEXT NOT NULL,
            connector   TEXT NOT NULL,
            principal   TEXT NOT NULL,
            secret_name TEXT NOT NULL,
            approval_id TEXT,
            created_at  TEXT NOT NULL,
            expires_at  TEXT NOT NULL,
            used_at     TEXT
        )""",
        """CREATE TABLE approval (
            id             TEXT PRIMARY KEY,
            fingerprint    TEXT NOT NULL,
            principal      TEXT NOT NULL,
            agent          TEXT,
            tool           TEXT NOT NULL,
            risk           TEXT NOT NULL,
            summary        TEXT NOT NULL,
            verdict_source TEXT NOT NULL,
            verdict_rule   TEXT,
            status         TEXT NOT NULL,
            created_at     TEXT NOT NULL,
            expires_at     TEXT NOT NULL,
            decided_at     TEXT
        )""",
        "CREATE INDEX approval_by_status ON approval (status, created_at)",
        """CREATE TABLE audit (
            id              INTEGER PRIMARY KEY,
            at              TEXT NOT NULL,
            user            TEXT NOT NULL,
            agent           TEXT,
            requested       TEXT NOT NULL,
            connector       TEXT,
            action          TEXT,
            args_preview    TEXT NOT NULL,
            fingerprint     TEXT,
            verdict         TEXT,
            verdict_source  TEXT,
            status          TEXT NOT NULL,
            reason          TEXT,
            upstream_status INTEGER,
            latency_ms      REAL NOT NULL
        )""",
        # Newest first is the only read; the index (which carries the rowid) serves ORDER BY at, id.
        "CREATE INDEX audit_by_time ON audit (at)",
        """CREATE TABLE meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )""",
    ),
    # 2: the approval page shows the call's (redacted) arguments.
    ("ALTER TABLE approval ADD COLUMN arguments TEXT NOT NULL DEFAULT ''",),
    # 3: short-lived state any instance may be handed (Store.put_ephemeral).
    (
        """CREATE TABLE ephemeral (
            kind       TEXT NOT NULL,
            key        TEXT NOT NULL,
            value      BLOB NOT NULL,
            expires_at TEXT NOT NULL,
            PRIMARY KEY (kind, key)
        )""",
        "CREATE INDEX ephemeral_by_expiry ON ephemeral (expires_at)",
    ),
    # 4: a counter that every credential or token write bumps, so the lookups each call makes can
    # be answered from memory until it moves (see _access.py).
    ACCESS_MIGRATION,
    # 5: operator tokens, one row each (they were one JSON list in `meta`, rewritten whole by every
    # create or revoke, so two instances could lose each other's change; ``OperatorTokens`` imports
    # that list once).
    (
        """CREATE TABLE operator_token (
            id         TEXT PRIMARY KEY,
            token_hash TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            revoked    INTEGER NOT NULL DEFAULT 0
        )""",
    ),
    # 6: durable audit: a call that reaches for the upstream writes a ``started`` row
    # first; its outcome overwrites that row (upsert on call_id; NULLs never conflict), and the
    # rows left ``started`` by a crash are marked ``interrupted`` on the next start.
    (
        "ALTER TABLE audit ADD COLUMN call_id TEXT",
        "CREATE UNIQUE INDEX audit_by_call ON audit (call_id)",
        "CREATE INDEX audit_started ON audit (status) WHERE status = 'started'",
    ),
    # 7: embedding vectors for hybrid discover, by model and text digest (DenseEmbedder).
    (
        """CREATE TABLE discovery_vector (
            model  TEXT NOT NULL,
            digest BLOB NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (model, digest)
        ) WITHOUT ROWID""",
    ),
    # 8: operators' decisions on upstream actions' snapshots (pinning and review).
    (
        """CREATE TABLE action_review (
            name        TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            decision    TEXT NOT NULL,
            snapshot    TEXT NOT NULL,
            decided_at  TEXT NOT NULL,
            decided_by  TEXT NOT NULL,
            PRIMARY KEY (name, fingerprint)
        )""",
    ),
    # 9: who decided an approval, whether the requester was barred from it, and on the audit row of
    # the call it let run, who approved it.
    (
        "ALTER TABLE approval ADD COLUMN separate_approver INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE approval ADD COLUMN decided_by TEXT",
        "ALTER TABLE audit ADD COLUMN approved_by TEXT",
    ),
    # 10: a call's ``started`` row goes to a small table of its own, ``audit_open``, which its outcome
    # (an append to ``audit``) empties again through a trigger, in the same statement. Migration 6
    # had the outcome overwrite its ``started`` row in ``audit``, which needed two more indexes there
    # (a unique one on call_id, a partial one on status) and changed indexed columns on every call:
    # each call wrote ~7.6 pages to the WAL, now ~4.3. ``audit_open`` holds the calls in flight (and
    # the ``interrupted`` ones, whose outcome never came), so it stays a page or two; ``list_audit``
    # shows both tables. Rows a crash left ``started`` move over, to be marked by the next start.
    (
        # WITHOUT ROWID: one b-tree keyed by call_id, not a rowid table and an index beside it.
        """CREATE TABLE audit_open (
            call_id         TEXT PRIMARY KEY,
            at              TEXT NOT NULL,
            user            TEXT NOT NULL,
            agent           TEXT,
            requested       TEXT NOT NULL,
            connector       TEXT,
            action          TEXT,
            args_preview    TEXT NOT NULL,
            fingerprint     TEXT,
            verdict         TEXT,
            verdict_source  TEXT,
            status          TEXT NOT NULL,
            reason          TEXT,
            upstream_status INTEGER,
            latency_ms      REAL NOT NULL,
            approved_by     TEXT
        ) WITHOUT ROWID""",
        f"INSERT INTO audit_open ({_V10_AUDIT_COLUMNS}) SELECT {_V10_AUDIT_COLUMNS} FROM audit "
        "WHERE status = 'started' AND call_id IS NOT NULL",
        "DELETE FROM audit WHERE status = 'started' AND call_id IS NOT NULL",
        "DROP INDEX audit_started",
        "DROP INDEX audit_by_call",
        # Whoever appends the outcome (this build, a batch, a hand-typed INSERT) settles the open row.
        """CREATE TRIGGER audit_settles_open AFTER INSERT ON audit WHEN NEW.call_id IS NOT NULL
        BEGIN DELETE FROM audit_open WHERE call_id = NEW.call_id; END""",
    ),
    # 11: the approval page shows what the action does and where the call goes, and an approval may
    # be for replacing a team-wide credential rather than for a call.
    (
        "ALTER TABLE approval ADD COLUMN does TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE approval ADD COLUMN calls TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE approval ADD COLUMN kind TEXT NOT NULL DEFAULT 'call'",
    ),
    # 12: what discover learns from use: the action a query led to, one row per distinct query.
    (
        """CREATE TABLE discovery_use (
            scope  TEXT NOT NULL,
            action TEXT NOT NULL,
            query  TEXT NOT NULL,
            who    TEXT NOT NULL,
            words  TEXT NOT NULL,
            model  TEXT,
            vector BLOB,
            at     TEXT NOT NULL,
            PRIMARY KEY (scope, action, query)
        ) WITHOUT ROWID""",
        "CREATE INDEX discovery_use_recent ON discovery_use (scope, at)",
    ),
    # 13: a link remembers the agent that asked for it: an agent of the operator's own stdio session
    # is not the operator, and may not replace a team-wide credential without an operator's approval.
    ("ALTER TABLE link ADD COLUMN agent TEXT",),
    # 14: an approval covers the request as built (its digest), not only its arguments.
    ("ALTER TABLE approval ADD COLUMN sends TEXT NOT NULL DEFAULT ''",),
    # 15: on a call's audit row, the path a same-origin redirect led it to, whose answer it returned.
    (
        "ALTER TABLE audit ADD COLUMN redirected_to TEXT",
        "ALTER TABLE audit_open ADD COLUMN redirected_to TEXT",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this build writes; a database with a higher ``user_version`` is refused."""


async def migrate(db: aiosqlite.Connection, where: str | Path) -> None:
    """Bring the database on ``db`` (an autocommit connection) to ``SCHEMA_VERSION``.

    Raises:
        StoreUnopenable: the file belongs to another application, holds tables mcp-gateway did not
            create, or was written by a newer build. ``where`` (the file) names it in the message.
    """
    # A file already at this version needs no write lock: reading the audit or the pending approvals
    # must work while another process holds the lock (a stuck writer, a backup).
    if (
        await _pragma_int(db, "user_version") == SCHEMA_VERSION
        and await _pragma_int(db, "application_id") == APPLICATION_ID
    ):
        return
    # IMMEDIATE takes the write lock before reading the version, so two processes opening a
    # new file at once run the migrations once: the second waits, then finds nothing to do.
    await db.execute("BEGIN IMMEDIATE")
    try:
        version = await _pragma_int(db, "user_version")
        app_id = await _pragma_int(db, "application_id")
        if app_id not in (0, APPLICATION_ID):
            raise StoreUnopenable(
                f"{where} is an SQLite database of another application (application_id {app_id:#x}); "
                "point the gateway at its own file"
            )
        if version > SCHEMA_VERSION:
            raise StoreUnopenable(
                f"{where} was written by a newer mcp-gateway (schema version {version}; this build "
                f"knows up to {SCHEMA_VERSION}); upgrade mcp-gateway, or point it at another database file"
            )
        if version == 0 and app_id == 0 and await _has_tables(db):
            raise StoreUnopenable(
                f"{where} is an SQLite database that mcp-gateway did not create; point the gateway at its own file"
            )
        for number in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[number - 1]:
                await db.execute(statement)
            # Both pragmas are written to the file header inside this transaction, so a failed
            # step leaves the version where it was.
            await db.execute(f"PRAGMA user_version = {number}")
            logger.debug("%s: applied schema migration %d", where, number)
        if app_id == 0:
            await db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    except BaseException:
        import anyio

        with anyio.CancelScope(shield=True):
            await db.rollback()
        raise
    await db.commit()


async def _pragma_int(db: aiosqlite.Connection, name: str) -> int:
    async with db.execute(f"PRAGMA {name}") as cursor:
        row = await cursor.fetchone()
    return int(row[0]) if row is not None else 0


async def _has_tables(db: aiosqlite.Connection) -> bool:
    async with db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' LIMIT 1") as cursor:
        return await cursor.fetchone() is not None
