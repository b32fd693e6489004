"""``runtime``: which store the settings select, and that the database URL's password never shows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcp_gateway.errors import GatewayError
from mcp_gateway.runtime import Settings, open_store
from mcp_gateway.store import SQLiteStore

pytestmark = pytest.mark.anyio

PASSWORD = "CANARY-settings-pass-9043"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_the_database_url_comes_from_the_flag_else_the_environment(tmp_path: Path) -> None:
    env = {"MCP_GATEWAY_DATABASE_URL": f"postgresql://gw:{PASSWORD}@db/env", "MCP_GATEWAY_STATE_DIR": str(tmp_path)}
    assert Settings.from_env(env).database_url == f"postgresql://gw:{PASSWORD}@db/env"
    assert Settings.from_env(env, database_url="postgresql://gw@db/flag").database_url == "postgresql://gw@db/flag"
    assert Settings.from_env({"MCP_GATEWAY_DATABASE_URL": "  "}).database_url is None
    assert Settings.from_env({}).database_url is None
    assert PASSWORD not in repr(Settings.from_env(env))


async def test_no_url_is_sqlite_in_the_state_folder(tmp_path: Path) -> None:
    async with open_store(Settings.from_env({}, state_dir=str(tmp_path / "state"))) as store:
        assert isinstance(store, SQLiteStore)
    assert (tmp_path / "state" / "state.db").is_file()


async def test_a_postgres_url_selects_the_shared_store(tmp_path: Path, postgres_url: str) -> None:
    from mcp_gateway.store.postgres import PostgresStore

    settings = Settings.from_env({"MCP_GATEWAY_DATABASE_URL": postgres_url}, state_dir=str(tmp_path / "state"))
    async with open_store(settings) as store:
        assert isinstance(store, PostgresStore)
        await store.set_meta("k", "v")
    assert not (tmp_path / "state" / "state.db").exists()


async def test_another_scheme_is_refused_without_its_password(tmp_path: Path) -> None:
    settings = Settings.from_env({}, state_dir=str(tmp_path), database_url=f"mysql://gw:{PASSWORD}@db/gateway")
    with pytest.raises(GatewayError, match=r"mysql://gw:\*\*\*@db/gateway is not a PostgreSQL URL") as caught:
        async with open_store(settings):
            pass
    assert PASSWORD not in str(caught.value)


async def test_a_missing_driver_says_which_extra_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp_gateway.store.postgres", None)  # as if asyncpg were not installed
    settings = Settings.from_env({}, state_dir=str(tmp_path), database_url=f"postgresql://gw:{PASSWORD}@db/x")
    with pytest.raises(GatewayError, match=r"pip install 'mcp-gateway\[postgres\]'") as caught:
        async with open_store(settings):
            pass
    assert PASSWORD not in str(caught.value)
