"""PostgreSQL-specific behaviour of ``PostgresStore``; the shared contract runs in test_store.py.

Each test gets a fresh database of the session's throwaway cluster (``postgres_url``, from
tests/support/postgres.py): migrations under concurrency, refusing what is not ours, column types,
and errors that never show the URL's password.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import anyio
import asyncpg
import pytest

from mcp_gateway.store import AuditRecord, Store
from mcp_gateway.store import _postgres_schema as schema
from mcp_gateway.store.postgres import PostgresStore
from mcp_gateway.vocabulary.errors import GatewayError
from tests.support.ports import free_port as _free_port
from tests.support.postgres import PostgresCluster
from tests.support.protocols import protocol_methods

pytestmark = pytest.mark.anyio

CANARY = "CANARY-db-pass-7731"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # asyncpg runs on asyncio only


@pytest.fixture
async def db(postgres_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A direct connection to the test's database, for looking behind the store's back."""
    conn = await asyncpg.connect(postgres_url)
    try:
        yield conn
    finally:
        await conn.close()


async def _versions(db: asyncpg.Connection) -> list[int]:
    return [r["version"] for r in await db.fetch("SELECT version FROM schema_version ORDER BY version")]


async def test_concurrent_first_open_migrates_once(postgres_url: str, db: asyncpg.Connection) -> None:
    stores = [PostgresStore(postgres_url) for _ in range(6)]
    async with anyio.create_task_group() as tg:
        for s in stores:
            tg.start_soon(s.open)
    try:
        await stores[0].set_meta("k", "v")
        assert await stores[-1].get_meta("k") == "v"
    finally:
        for s in stores:
            await s.close()
    assert await _versions(db) == list(range(1, schema.SCHEMA_VERSION + 1))


async def test_columns_are_bytea_and_timestamptz(postgres_url: str, db: asyncpg.Connection) -> None:
    async with PostgresStore(postgres_url):
        pass
    types = {
        (r["table_name"], r["column_name"]): r["data_type"]
        for r in await db.fetch("SELECT table_name, column_name, data_type FROM information_schema.columns")
    }
    assert types["credential", "sealed"] == "bytea"
    assert types["catalog", "actions"] == "bytea"
    for column in [("link", "expires_at"), ("approval", "decided_at"), ("audit", "at"), ("token", "created_at")]:
        assert types[column] == "timestamp with time zone", column


async def test_refuses_a_newer_schema(postgres_url: str, db: asyncpg.Connection) -> None:
    async with PostgresStore(postgres_url) as store:
        await store.set_meta("k", "v")
    future = schema.SCHEMA_VERSION + 1
    await db.execute("INSERT INTO schema_version (version) VALUES ($1)", future)
    store = PostgresStore(postgres_url)
    with pytest.raises(GatewayError, match=rf"newer mcp-gateway \(schema version {future}; this build knows up to"):
        await store.open()
    with pytest.raises(RuntimeError, match="not open"):  # a refused open leaves nothing half-open
        await store.get_meta("k")


async def test_refuses_tables_it_did_not_create(postgres_url: str, db: asyncpg.Connection) -> None:
    await db.execute("CREATE TABLE token (body text)")
    clash = r"tables named like mcp-gateway's \(token\) that mcp-gateway did not create"
    with pytest.raises(GatewayError, match=clash):
        await PostgresStore(postgres_url).open()
    assert await db.fetchval("SELECT to_regclass('schema_version')") is None  # nothing was created

    await db.execute("DROP TABLE token")
    await db.execute("CREATE TABLE schema_version (installed_rank integer)")  # e.g. an old Flyway table
    with pytest.raises(GatewayError, match="schema_version table of another application"):
        await PostgresStore(postgres_url).open()


async def test_other_applications_tables_are_left_alone(postgres_url: str, db: asyncpg.Connection) -> None:
    await db.execute("CREATE TABLE notes (body text)")
    async with PostgresStore(postgres_url) as store:
        await store.set_meta("k", 1)
    assert await db.fetchval("SELECT count(*) FROM notes") == 0


async def test_migrations_apply_in_order_and_roll_back_on_failure(
    postgres_url: str, db: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with PostgresStore(postgres_url) as store:
        await store.set_meta("k", "v")
    v1 = schema.SCHEMA_VERSION

    broken = (*schema.MIGRATIONS, ("CREATE TABLE extra (x integer)", "CREATE TABLE broken (syntax error"))
    monkeypatch.setattr(schema, "MIGRATIONS", broken)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", v1 + 1)
    with pytest.raises(GatewayError, match="PostgresSyntaxError"):
        await PostgresStore(postgres_url).open()
    assert await _versions(db) == list(range(1, v1 + 1))
    assert await db.fetchval("SELECT to_regclass('extra')") is None

    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS[:v1], ("CREATE TABLE extra (x integer)",)))
    async with PostgresStore(postgres_url) as store:
        assert await store.get_meta("k") == "v"  # existing data carried over
    assert await _versions(db) == list(range(1, v1 + 2))
    assert await db.fetchval("SELECT to_regclass('extra')") is not None


async def test_unreachable_database_is_one_clear_error_without_the_password() -> None:
    url = f"postgresql://gw:{CANARY}@127.0.0.1:{_free_port()}/gateway?sslmode=disable"
    store = PostgresStore(url)
    assert CANARY not in repr(store) and "gw:***@127.0.0.1" in repr(store)
    with pytest.raises(GatewayError) as caught:
        await store.open()
    text = str(caught.value)
    assert CANARY not in text and "\n" not in text
    assert f"postgresql://gw:***@127.0.0.1:{url.split(':')[3].split('/')[0]}/gateway" in text
    assert "check that the server is running and reachable" in text and "$MCP_GATEWAY_DATABASE_URL" in text
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # no driver traceback


async def test_a_missing_database_names_it_without_the_password(postgres_cluster: PostgresCluster) -> None:
    url = f"postgresql://postgres:{CANARY}@127.0.0.1:{postgres_cluster.port}/no_such_db"
    with pytest.raises(GatewayError, match='database "no_such_db" does not exist') as caught:
        await PostgresStore(url).open()
    assert CANARY not in str(caught.value)


async def test_password_in_a_query_parameter_is_redacted_too() -> None:
    store = PostgresStore(f"postgresql://gw@127.0.0.1:{_free_port()}/gateway?password={CANARY}")
    with pytest.raises(GatewayError) as caught:
        await store.open()
    assert CANARY not in str(caught.value) and "password=***" in str(caught.value)
    assert CANARY not in repr(store)


async def test_rejects_naive_datetimes(postgres_url: str) -> None:
    async with PostgresStore(postgres_url) as store:
        with pytest.raises(ValueError, match="naive datetime"):
            await store.consume_link("h1", datetime(2026, 1, 1))


async def test_use_before_open_is_a_clear_error(postgres_url: str) -> None:
    with pytest.raises(RuntimeError, match="not open"):
        await PostgresStore(postgres_url).get_meta("k")


async def test_tables_go_into_the_urls_schema(postgres_url: str, db: asyncpg.Connection) -> None:
    # libpq-style options in the URL reach the server: one database can hold several gateways.
    await db.execute("CREATE SCHEMA gw_a")
    async with PostgresStore(f"{postgres_url}?search_path=gw_a") as store:
        await store.set_meta("k", "a")
    assert await db.fetchval("SELECT value FROM gw_a.meta WHERE key = 'k'") == '"a"'
    assert await db.fetchval("SELECT to_regclass('public.meta')") is None


def test_postgres_store_satisfies_protocol() -> None:
    for name, member in protocol_methods(Store).items():
        assert name in vars(PostgresStore), name
        assert inspect.signature(getattr(PostgresStore, name)) == inspect.signature(member), name


async def test_audit_batches_are_one_transaction(postgres_url: str) -> None:
    rows = [
        AuditRecord(
            at=datetime(2026, 1, 1, 12, 0, i, tzinfo=UTC),
            user="alice",
            agent=None,
            requested=f"github.issues.get_{i}",
            connector="github",
            action=f"issues.get_{i}",
            args_preview="{}",
            fingerprint=None,
            verdict="always_run",
            verdict_source="risk_default",
            status="ok",
            latency_ms=1.0,
        )
        for i in range(3)
    ]
    async with PostgresStore(postgres_url) as store:
        await store.append_audits(rows)
        await store.append_audits([])
        assert await store.list_audit() == rows[::-1]
        broken = rows[0].model_copy(update={"upstream_status": 2**40})  # out of the column's range
        with pytest.raises(asyncpg.DataError):
            await store.append_audits([rows[1], rows[2], broken])
        assert len(await store.list_audit()) == 3  # none of the failed batch


async def test_a_pooled_connection_goes_back_without_a_reset_round_trip(
    postgres_url: str, db: asyncpg.Connection
) -> None:
    async with PostgresStore(postgres_url, max_connections=1) as store:
        await store.set_meta("k", "v")
        # The backend's last statement is the store's own: asyncpg's reset query (RESET ALL,
        # UNLISTEN *, ...) would have been one more round trip after it, on every release.
        last = await db.fetchval("SELECT query FROM pg_stat_activity WHERE application_name = 'mcp-gateway'")
        assert last is not None and "INSERT INTO meta" in last and "RESET ALL" not in last
        # A transaction that failed midway is still rolled back before the connection is reused.
        with pytest.raises(asyncpg.DataError):
            await store.append_audits([_row(0), _row(1).model_copy(update={"upstream_status": 2**40})])
        assert await store.get_meta("k") == "v"
        assert [r.requested for r in await store.list_audit()] == []
        await store.append_audit(_row(2))
        assert [r.requested for r in await store.list_audit()] == ["op_2"]


def _row(i: int) -> AuditRecord:
    return AuditRecord(
        at=datetime(2026, 1, 1, 12, 0, i, tzinfo=UTC),
        user="alice",
        agent=None,
        requested=f"op_{i}",
        connector=None,
        action=None,
        args_preview="{}",
        fingerprint=None,
        verdict=None,
        verdict_source=None,
        status="denied",
        latency_ms=1.0,
    )


async def test_a_statement_the_server_does_not_answer_in_time_is_an_outage(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A frozen server (or a network dropping packets) made a call hang for as long as it lasted.
    from mcp_gateway.store import postgres as postgres_module
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    monkeypatch.setattr(postgres_module, "_COMMAND_TIMEOUT", 0.5)
    async with PostgresStore(postgres_url) as store:
        with pytest.raises(StoreUnavailable, match=r"did not answer within 0\.5 s"):
            await store._fetchrow("SELECT pg_sleep(5)")  # pyright: ignore[reportPrivateUsage]
        assert await store.get_meta("nothing") is None  # the pool serves the next statement


@pytest.mark.parametrize(
    ("refusal", "raised_by"),
    [
        ("ALTER ROLE {role} NOLOGIN", "InvalidAuthorizationSpecificationError"),  # a login revoked (class 28)
        ("ALTER ROLE {role} CONNECTION LIMIT 0", "TooManyConnectionsError"),  # no slot left (class 53)
    ],
)
async def test_a_server_that_refuses_new_logins_is_an_outage_not_a_bug(
    postgres_url: str, db: asyncpg.Connection, refusal: str, raised_by: str
) -> None:
    # The pool meets these when it opens a connection: they were raised as they came, a 500 with a
    # traceback at the HTTP edge, instead of store_unavailable.
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    role = f"gw_{_free_port()}"
    await db.execute(f"CREATE ROLE {role} LOGIN")
    base, _, database = postgres_url.rpartition("/")
    await db.execute(f"ALTER DATABASE {database} OWNER TO {role}")
    url = f"postgresql://{role}@{base.rpartition('@')[2]}/{database}"
    async with PostgresStore(url) as store:
        await db.execute(refusal.format(role=role))
        await db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
        said: list[str] = []
        for _ in range(3):
            with pytest.raises(StoreUnavailable) as outage:
                await store.get_meta("anything")
            said.append(str(outage.value))
        assert raised_by in said[-1]


async def test_a_stalled_database_answers_one_request_within_its_wait_budget(
    postgres_url: str, db: asyncpg.Connection
) -> None:
    # A lock held elsewhere made every statement wait out the whole statement timeout: a call of
    # several statements held its agent for several of them.
    from mcp_gateway.store.wait_budget import request_budget
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    async with PostgresStore(postgres_url) as store:
        stall = db.transaction()
        await stall.start()
        await db.execute("LOCK TABLE meta IN ACCESS EXCLUSIVE MODE")
        try:
            began = time.monotonic()
            with request_budget(1.0) as budget:
                for key in ("first", "second"):  # the second has nothing left: refused at once
                    with pytest.raises(StoreUnavailable, match="did not answer within 1 s"):
                        await store.get_meta(key)
            assert time.monotonic() - began < 1.9 and budget.left == 0
        finally:
            await stall.rollback()
        assert await store.get_meta("first") is None  # the pool serves the next statement


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        # A failover that leaves the URL on a hot standby answers reads and refuses writes (25006).
        ("ALTER ROLE {role} SET default_transaction_read_only = on", "read-only, a standby"),
        ("REASSIGN OWNED BY {role} TO postgres", "grant that user its rights"),  # rights taken away (42501)
        ("DROP SCHEMA public CASCADE; CREATE SCHEMA public", "has no gateway tables"),  # a new, empty server (42P01)
    ],
)
async def test_a_server_that_cannot_serve_the_gateway_is_an_outage_that_says_why(
    postgres_url: str, db: asyncpg.Connection, fault: str, said: str
) -> None:
    # Each was raised as it came: a call answered internal_error, a page a bare 500, /readyz stayed ready.
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    role = f"gw_{_free_port()}"
    await db.execute(f"CREATE ROLE {role} LOGIN")
    base, _, database = postgres_url.rpartition("/")
    await db.execute(f"ALTER DATABASE {database} OWNER TO {role}")
    await db.execute(f"ALTER SCHEMA public OWNER TO {role}")
    url = f"postgresql://{role}@{base.rpartition('@')[2]}/{database}"
    async with PostgresStore(url) as store:
        await store.set_meta("k", "v")
        await db.execute(fault.format(role=role))
        await db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
        outages: list[StoreUnavailable] = []
        for _ in range(3):  # the first may meet a connection the termination closed
            with pytest.raises(StoreUnavailable) as outage:
                await store.set_meta("k", "w")
            outages.append(outage.value)
        assert outages[-1].lasting and said in str(outages[-1]), outages
        with pytest.raises(StoreUnavailable) as pinged:  # readiness sees it before any write fails
            await store.ping()
        assert said in str(pinged.value)


async def _limited_role(db: asyncpg.Connection, postgres_url: str) -> tuple[str, str]:
    """A login role owning the test's database (limits apply to it, not to a superuser), and its URL."""
    role = f"gw_{_free_port()}"
    await db.execute(f"CREATE ROLE {role} LOGIN")
    base, _, database = postgres_url.rpartition("/")
    await db.execute(f"ALTER DATABASE {database} OWNER TO {role}")
    await db.execute(f"ALTER SCHEMA public OWNER TO {role}")
    return role, f"postgresql://{role}@{base.rpartition('@')[2]}/{database}"


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        # 55P03 was raised as it came: internal_error for agents, a bare 500 on pages, "unexpected" in the CLI.
        ("lock_timeout", "waited longer than the gateway user's lock_timeout"),
        # 57014 was an outage already, said to be "unreachable": the operator checked the network, not locks.
        ("statement_timeout", "ran past the gateway user's statement_timeout"),
    ],
)
async def test_a_statement_cancelled_for_waiting_on_a_lock_is_an_outage_naming_the_lock(
    postgres_url: str, db: asyncpg.Connection, setting: str, said: str
) -> None:
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    role, url = await _limited_role(db, postgres_url)
    await db.execute(f"ALTER ROLE {role} SET {setting} = '200ms'")
    async with PostgresStore(url) as store:
        await store.set_meta("k", "v")
        await db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
        holder = db.transaction()
        await holder.start()
        await db.execute("LOCK TABLE meta IN ACCESS EXCLUSIVE MODE")
        try:
            outages: list[StoreUnavailable] = []
            for _ in range(3):  # the first may meet a connection the termination closed
                with pytest.raises(StoreUnavailable) as outage:
                    await store.set_meta("k", "w")
                outages.append(outage.value)
        finally:
            await holder.rollback()
        said_last = str(outages[-1])
        assert said in said_last and "pg_locks" in said_last and "unreachable" not in said_last, outages
        assert not outages[-1].lasting
        await store.set_meta("k", "w")  # the same statement passes once the lock is let go of


async def test_no_free_connection_slot_waits_for_one_of_the_pools_own(
    postgres_url: str, db: asyncpg.Connection
) -> None:
    # Other clients held every slot: the calls the pool's connections could not serve at once failed at
    # once as "unreachable", though those connections were free a moment later.
    from mcp_gateway.store.wait_budget import request_budget
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    role, url = await _limited_role(db, postgres_url)
    async with PostgresStore(url) as store:
        await store.get_meta("warm")  # the pool's one connection, plus the instance lock's
        await db.execute(f"ALTER ROLE {role} CONNECTION LIMIT 2")

        async def statement() -> None:
            with request_budget(5.0):
                await store._fetchrow("SELECT pg_sleep(0.2)")  # pyright: ignore[reportPrivateUsage]

        began = time.monotonic()
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(statement)
        assert time.monotonic() - began < 4.0

        holder = anyio.Event()

        async def hold() -> None:
            with request_budget(5.0):
                holder.set()
                await store._fetchrow("SELECT pg_sleep(1.5)")  # pyright: ignore[reportPrivateUsage]

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await holder.wait()
            await anyio.sleep(0.1)
            with request_budget(0.5), pytest.raises(StoreUnavailable) as outage:
                await store.get_meta("k")
            said = str(outage.value)
            assert "has no free connections" in said and "max_connections" in said and "unreachable" not in said


class _ReadyGateway:
    """What ``/readyz`` reads of a gateway: its store's health and whether catalogs loaded."""

    def __init__(self, store: PostgresStore) -> None:
        from types import SimpleNamespace

        from mcp_gateway.core.health import StoreHealth

        self.health = StoreHealth(store.ping, store.probe_write, where=repr(store))
        self.manifest = SimpleNamespace(connectors=[])
        self.operators = None

    def states(self) -> dict[str, object]:
        return {}


async def _readyz(gateway: _ReadyGateway) -> tuple[int, dict[str, object]]:
    import json

    from starlette.requests import Request

    from mcp_gateway.server.observability import observability_routes

    route = observability_routes(gateway, metrics_token=False)[0]  # type: ignore[arg-type]
    answer = await route.endpoint(Request({"type": "http", "method": "GET", "path": "/readyz", "headers": []}))
    return answer.status_code, json.loads(bytes(answer.body))


async def test_readiness_sees_a_gateway_table_locked_elsewhere_and_names_it(
    postgres_url: str, db: asyncpg.Connection
) -> None:
    # The ping read schema_version only: /readyz stayed 200 while every call waited on the locked table.
    from mcp_gateway.core import health

    async with PostgresStore(postgres_url) as store:
        gateway = _ReadyGateway(store)
        assert await _readyz(gateway) == (200, {"status": "ready", "store": True, "catalog": True})
        holder = db.transaction()
        await holder.start()
        await db.execute("LOCK TABLE credential IN ACCESS EXCLUSIVE MODE")
        try:
            await anyio.sleep(health.PING_CACHE)
            began = time.monotonic()
            status, body = await _readyz(gateway)
            assert time.monotonic() - began < health.PING_TIMEOUT
        finally:
            await holder.rollback()
        assert status == 503 and body["store"] is False, body
        cause = str(body["cause"])
        assert (
            "table credential" in cause
            and "AccessExclusiveLock" in cause
            and str(await db.fetchval("SELECT pg_backend_pid()")) in cause
        )
        assert "postgresql://" not in cause  # anyone may read /readyz: the database is not named
        await anyio.sleep(health.PING_CACHE)
        assert (await _readyz(gateway))[0] == 200  # ready again once the lock is let go of


async def test_a_transaction_the_server_rolls_back_for_a_deadlock_runs_again_whole(
    postgres_url: str, db: asyncpg.Connection
) -> None:
    # 40P01 (and 40001) were an outage at once: the agent heard store_unavailable for a conflict
    # the server itself says to settle by running the transaction again.
    from mcp_gateway.store.wait_budget import request_budget

    database = postgres_url.rpartition("/")[2]
    # The store's session is the one that finds the deadlock (and is rolled back), soon; the other waits.
    await db.execute(f"ALTER DATABASE {database} SET deadlock_timeout = '100ms'")
    await db.execute("SET deadlock_timeout = '10s'")
    async with PostgresStore(postgres_url) as store:
        await store.set_meta("a", "0")
        await store.set_meta("b", "0")
        runs = 0
        holds_a = anyio.Event()

        async def both(conn: asyncpg.Connection) -> None:
            nonlocal runs
            runs += 1
            await conn.execute("UPDATE meta SET value = '\"store\"' WHERE key = 'a'")
            holds_a.set()
            await conn.execute("UPDATE meta SET value = '\"store\"' WHERE key = 'b'")

        other = db.transaction()
        await other.start()
        await db.execute("UPDATE meta SET value = '\"other\"' WHERE key = 'b'")
        async with anyio.create_task_group() as tg:

            async def run_store() -> None:
                with request_budget(5.0):
                    await store._transact(both)  # pyright: ignore[reportPrivateUsage]

            tg.start_soon(run_store)
            await holds_a.wait()
            await db.execute("UPDATE meta SET value = '\"other\"' WHERE key = 'a'")  # the deadlock
            await other.commit()
        assert runs == 2
        assert (await store.get_meta("a"), await store.get_meta("b")) == ("store", "store")


async def test_a_statement_the_server_rolls_back_for_a_deadlock_runs_again(
    postgres_url: str, db: asyncpg.Connection
) -> None:
    from mcp_gateway.store.wait_budget import request_budget

    database = postgres_url.rpartition("/")[2]
    await db.execute(f"ALTER DATABASE {database} SET deadlock_timeout = '100ms'")
    await db.execute("SET deadlock_timeout = '10s'")
    both = (  # one statement that takes a's row lock, then b's
        "DO $$ BEGIN UPDATE meta SET value = '\"store\"' WHERE key = 'a'; PERFORM pg_sleep(0.3); "
        "UPDATE meta SET value = '\"store\"' WHERE key = 'b'; END $$"
    )
    async with PostgresStore(postgres_url) as store:
        await store.set_meta("a", "0")
        await store.set_meta("b", "0")
        other = db.transaction()
        await other.start()
        await db.execute("UPDATE meta SET value = '\"other\"' WHERE key = 'b'")
        async with anyio.create_task_group() as tg:

            async def run_store() -> None:
                with request_budget(5.0):
                    await store._execute(both)  # pyright: ignore[reportPrivateUsage]

            tg.start_soon(run_store)
            # The store's statement holds a's lock once it sleeps: no event to wait on in another session.
            while not await db.fetchval("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'"):  # noqa: ASYNC110
                await anyio.sleep(0.02)
            await db.execute("UPDATE meta SET value = '\"other\"' WHERE key = 'a'")  # the deadlock
            await other.commit()
        assert (await store.get_meta("a"), await store.get_meta("b")) == ("store", "store")
