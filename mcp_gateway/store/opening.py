"""The store the settings select: PostgreSQL for a ``postgresql://`` URL, else SQLite in the state folder.

Here rather than in ``runtime`` (which re-exports ``open_store``), so that a command that only reads
the store (``audit``, ``token list``, ``approvals list``) opens it without importing the gateway core.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from ..primitives.catalog_memory import validate_actions
from ..vocabulary.errors import StateUnwritable, StoreUnopenable
from .database_url import is_postgres_url, redact_url, unescaped_userinfo

if TYPE_CHECKING:
    from ..vocabulary.settings import Settings
    from .contract import Store

__all__ = ["open_store", "store_for"]


def store_for(settings: Settings, *, create_tables: bool = True) -> Store:
    """The store, not yet opened. Stored catalogs decode with ``catalog_memory.validate_actions``.
    ``create_tables``: False to refuse a PostgreSQL database without the gateway's tables, not create them."""
    url = settings.database_url
    if not url:
        from .sqlite import SQLiteStore, unwritable

        try:
            settings.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise StoreUnopenable(
                f"the state folder {settings.state_dir} is a file (or under one), not a folder: move it aside, or "
                "give --state-dir another folder"
            ) from None
        except OSError as exc:
            raise StateUnwritable(unwritable(settings.state_dir, exc)) from None
        return SQLiteStore(settings.database, decode_actions=validate_actions)
    if not is_postgres_url(url):
        raise StoreUnopenable(
            f"the database URL {redact_url(url)} is not a PostgreSQL URL; give postgresql://user:password@host:5432/"
            "database, or unset $MCP_GATEWAY_DATABASE_URL (and drop --database-url) to use the embedded SQLite "
            "database in the state folder"
        )
    if (problem := unescaped_userinfo(url)) is not None:
        raise StoreUnopenable(problem)
    try:
        from .postgres import PostgresStore
    except ImportError:
        raise StoreUnopenable(
            "a PostgreSQL database URL is set but its driver is not installed; run: "
            "python3 -m pip install 'mcp-action-gateway[postgres]'"
        ) from None
    return PostgresStore(url, decode_actions=validate_actions, create_tables=create_tables)


@asynccontextmanager
async def open_store(settings: Settings, *, create_tables: bool = True) -> AsyncGenerator[Store]:
    """The store the settings select, opened, and closed on leaving (``create_tables``: see ``store_for``)."""
    store = store_for(settings, create_tables=create_tables)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
