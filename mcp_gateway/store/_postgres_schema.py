"""The PostgreSQL schema: versioned migrations, applied once however many instances start together.

``schema_version`` holds one row per applied step. ``migrate`` runs every pending step in one
transaction under a transaction-scoped advisory lock: two instances opening an empty database at
the same moment take turns, and the second finds nothing left to do. DDL is transactional in
PostgreSQL, so a step that fails leaves the schema (and the version) exactly as it was.
"""

from __future__ import annotations

import logging

import asyncpg

from ..vocabulary.errors import StoreUnopenable

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate"]

logger = logging.getLogger(__name__)

# pg_advisory_xact_lock key: "mcpg" in ASCII, so it cannot collide by accident with another
# application's lock on the same database.
MIGRATION_LOCK = 0x6D637067

_V8_AUDIT_COLUMNS = (
    'at, "user", agent, requested, connector, action, args_preview, fingerprint, verdict, verdict_source, '
    "status, reason, upstream_status, latency_ms, call_id, approved_by"
)
"""The columns ``audit`` and ``audit_open`` had at migration 8 (frozen with it, like every step)."""

# Migration N (1-based) brings the schema from version N-1 to N. Append only: never edit a step that
# has shipped. Column names equal the record fields (``"user"`` is quoted: a reserved word here).
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE catalog (
            slug        text PRIMARY KEY,
            fingerprint text NOT NULL,
            info        text NOT NULL DEFAULT '{}',
            actions     bytea NOT NULL
        )""",
        """CREATE TABLE connector_state (
            slug      text PRIMARY KEY,
            source    text NOT NULL,
            status    text NOT NULL,
            actions   integer NOT NULL,
            error     text,
            synced_at timestamptz NOT NULL
        )""",
        """CREATE TABLE credential (
            connector text NOT NULL,
            principal text NOT NULL,
            name      text NOT NULL,
            sealed    bytea NOT NULL,
            PRIMARY KEY (connector, principal, name)
        )""",
        """CREATE TABLE token (
            id         text PRIMARY KEY,
            agent      text NOT NULL,
            token_hash text NOT NULL UNIQUE,
            created_at timestamptz NOT NULL,
            revoked    boolean NOT NULL DEFAULT false
        )""",
        """CREATE TABLE link (
            token_hash  text PRIMARY KEY,
            kind        text NOT NULL,
            connector   text NOT NULL,
            principal   text NOT NULL,
            secret_name text NOT NULL,
            approval_id text,
            created_at  timestamptz NOT NULL,
            expires_at  timestamptz NOT NULL,
            used_at     timestamptz
        )""",
        """CREATE TABLE approval (
            id             text PRIMARY KEY,
            fingerprint    text NOT NULL,
            principal      text NOT NULL,
            agent          text,
            tool           text NOT NULL,
            risk           text NOT NULL,
            summary        text NOT NULL,
            arguments      text NOT NULL DEFAULT '',
            verdict_source text NOT NULL,
            verdict_rule   text,
            status         text NOT NULL,
            created_at     timestamptz NOT NULL,
            expires_at     timestamptz NOT NULL,
            decided_at     timestamptz
        )""",
        "CREATE INDEX approval_by_status ON approval (status, created_at)",
        """CREATE TABLE audit (
            id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            at              timestamptz NOT NULL,
            "user"          text NOT NULL,
            agent           text,
            requested       text NOT NULL,
            connector       text,
            action          text,
            args_preview    text NOT NULL,
            fingerprint     text,
            verdict         text,
            verdict_source  text,
            status          text NOT NULL,
            reason          text,
            upstream_status integer,
            latency_ms      double precision NOT NULL
        )""",
        "CREATE INDEX audit_by_time ON audit (at DESC, id DESC)",
        """CREATE TABLE meta (
            key   text PRIMARY KEY,
            value text NOT NULL
        )""",
        # Short-lived state every instance must see (operator sessions, OAuth2 authorizations in
        # flight, request-state nonces): see Store.put_ephemeral.
        """CREATE TABLE ephemeral (
            kind       text NOT NULL,
            key        text NOT NULL,
            value      bytea NOT NULL,
            expires_at timestamptz NOT NULL,
            PRIMARY KEY (kind, key)
        )""",
        "CREATE INDEX ephemeral_by_expiry ON ephemeral (expires_at)",
    ),
    # 2: operator tokens, one row each (they were one JSON list in `meta`, rewritten whole by every
    # create or revoke, so two instances could lose each other's change; ``OperatorTokens`` imports
    # that list once).
    (
        """CREATE TABLE operator_token (
            id         text PRIMARY KEY,
            token_hash text NOT NULL UNIQUE,
            created_at timestamptz NOT NULL,
            revoked    boolean NOT NULL DEFAULT false
        )""",
    ),
    # 3: durable audit: see the SQLite schema's migration 6.
    (
        "ALTER TABLE audit ADD COLUMN call_id text",
        "CREATE UNIQUE INDEX audit_by_call ON audit (call_id)",
        "CREATE INDEX audit_started ON audit (status) WHERE status = 'started'",
    ),
    # 4: token buckets every instance shares (traffic.BucketStore, see store/postgres.py PostgresBuckets).
    (
        """CREATE TABLE rate_bucket (
            key     text PRIMARY KEY,
            tat     double precision NOT NULL,
            allowed boolean NOT NULL
        )""",
    ),
    # 5: embedding vectors for hybrid discover, by model and text digest (DenseEmbedder); every
    # instance on this database reuses them.
    (
        """CREATE TABLE discovery_vector (
            model  text NOT NULL,
            digest bytea NOT NULL,
            vector bytea NOT NULL,
            PRIMARY KEY (model, digest)
        )""",
    ),
    # 6: operators' decisions on upstream actions' snapshots (pinning and review).
    (
        """CREATE TABLE action_review (
            name        text NOT NULL,
            fingerprint text NOT NULL,
            decision    text NOT NULL,
            snapshot    text NOT NULL,
            decided_at  timestamptz NOT NULL,
            decided_by  text NOT NULL,
            PRIMARY KEY (name, fingerprint)
        )""",
    ),
    # 7: who decided an approval, whether the requester was barred from it, and on the audit row of
    # the call it let run, who approved it.
    (
        "ALTER TABLE approval ADD COLUMN separate_approver boolean NOT NULL DEFAULT false",
        "ALTER TABLE approval ADD COLUMN decided_by text",
        "ALTER TABLE audit ADD COLUMN approved_by text",
    ),
    # 8: a call's ``started`` row in ``audit_open`` until its outcome, appended to ``audit``, deletes
    # it in the same statement (see the SQLite schema's migration 10): ``audit`` loses its unique
    # index on call_id and its partial one on status, and no longer gets a dead row version per call.
    (
        """CREATE TABLE audit_open (
            call_id         text PRIMARY KEY,
            at              timestamptz NOT NULL,
            "user"          text NOT NULL,
            agent           text,
            requested       text NOT NULL,
            connector       text,
            action          text,
            args_preview    text NOT NULL,
            fingerprint     text,
            verdict         text,
            verdict_source  text,
            status          text NOT NULL,
            reason          text,
            upstream_status integer,
            latency_ms      double precision NOT NULL,
            approved_by     text
        )""",
        f"INSERT INTO audit_open ({_V8_AUDIT_COLUMNS}) SELECT {_V8_AUDIT_COLUMNS} FROM audit "
        "WHERE status = 'started' AND call_id IS NOT NULL",
        "DELETE FROM audit WHERE status = 'started' AND call_id IS NOT NULL",
        "DROP INDEX audit_started",
        "DROP INDEX audit_by_call",
    ),
    # 9: the approval page shows what the action does and where the call goes, and an approval may
    # be for replacing a team-wide credential rather than for a call.
    (
        "ALTER TABLE approval ADD COLUMN does text NOT NULL DEFAULT ''",
        "ALTER TABLE approval ADD COLUMN calls text NOT NULL DEFAULT ''",
        "ALTER TABLE approval ADD COLUMN kind text NOT NULL DEFAULT 'call'",
    ),
    # 10: what discover learns from use: the action a query led to, one row per distinct query.
    (
        """CREATE TABLE discovery_use (
            scope  text NOT NULL,
            action text NOT NULL,
            query  text NOT NULL,
            who    text NOT NULL,
            words  text NOT NULL,
            model  text,
            vector bytea,
            at     timestamptz NOT NULL,
            PRIMARY KEY (scope, action, query)
        )""",
        "CREATE INDEX discovery_use_recent ON discovery_use (scope, at)",
    ),
    # 11: a link remembers the agent that asked for it (see the SQLite schema's migration 13).
    ("ALTER TABLE link ADD COLUMN agent text",),
    # 12: an approval covers the request as built (see the SQLite schema's migration 14).
    ("ALTER TABLE approval ADD COLUMN sends text NOT NULL DEFAULT ''",),
    # 13: the path a same-origin redirect led a call to (see the SQLite schema's migration 15).
    (
        "ALTER TABLE audit ADD COLUMN redirected_to text",
        "ALTER TABLE audit_open ADD COLUMN redirected_to text",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this build writes; a database at a higher version is refused."""

OUR_TABLES = (
    "catalog",
    "connector_state",
    "credential",
    "token",
    "link",
    "approval",
    "audit",
    "meta",
    "ephemeral",
    "operator_token",
    "rate_bucket",
    "discovery_vector",
    "action_review",
    "audit_open",
    "discovery_use",
)


async def migrate(conn: asyncpg.Connection, where: str, *, create: bool = True) -> None:
    """Bring the schema in ``conn``'s current schema to ``SCHEMA_VERSION``.

    ``create``: False to refuse a database without the gateway's tables rather than create them there
    (``doctor``: an empty database may be a failover to a new server, not a new set-up).

    Raises:
        StoreUnopenable: the database holds tables of ours that we did not create, was migrated by
            a newer build, or (``create`` False) has none of ours. ``where`` (the redacted URL) names it.
    """
    async with conn.transaction():
        # Held until commit: a second instance starting now waits here, then sees our version.
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        version = await _version(conn, where, create=create)
        if version > SCHEMA_VERSION:
            raise StoreUnopenable(
                f"the database at {where} was migrated by a newer mcp-gateway (schema version {version}; "
                f"this build knows up to {SCHEMA_VERSION}); upgrade every instance of mcp-gateway"
            )
        for number in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[number - 1]:
                await conn.execute(statement)
            await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", number)
            logger.debug("applied schema migration %d", number)


async def _version(conn: asyncpg.Connection, where: str, *, create: bool) -> int:
    rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    tables = {r["tablename"] for r in rows}
    if "schema_version" not in tables:
        clash = sorted(tables & set(OUR_TABLES))
        if clash:
            raise StoreUnopenable(
                f"the database at {where} already has tables named like mcp-gateway's ({', '.join(clash)}) "
                "that mcp-gateway did not create; point the gateway at a database or schema of its own"
            )
        if not create:
            raise StoreUnopenable(
                f"the database at {where} has no gateway tables: a new database, or a failover to a new, empty "
                "server. If it should hold the gateway's state, point the URL back at that database or restore "
                "it from a backup; if it is a new database, start `mcp-gateway serve` (or run `mcp-gateway sync`) "
                "once to create the tables"
            )
        await conn.execute(
            "CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        return 0
    try:
        return int(await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_version"))
    except asyncpg.UndefinedColumnError:
        raise StoreUnopenable(
            f"the database at {where} has a schema_version table of another application; "
            "point the gateway at a database or schema of its own"
        ) from None
