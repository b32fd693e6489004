"""Persistence: the ``Store`` protocol (split by role), its record models, and the embedded
``SQLiteStore``. ``PostgresStore`` (``store.postgres``, needs asyncpg) and ``MemoryStore``
(``store.memory``) implement the same protocol.

The names below are imported on first use: importing one submodule (``store.stored_state``, the
read-only view the command line's stored-state answers read) must not load aiosqlite, the event loop
and every record model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .contract import (
        ApprovalRecord,
        ApprovalStatus,
        ApprovalStore,
        AuditRecord,
        AuditStore,
        CatalogRecord,
        CatalogStore,
        ConnectorState,
        CredentialStore,
        EphemeralStore,
        LinkKind,
        LinkRecord,
        LinkStore,
        MetaStore,
        OperatorTokenRecord,
        OperatorTokenStore,
        Store,
        TokenRecord,
        TokenStore,
        UseRecord,
        UseStore,
        VectorStore,
    )
    from .memory import MemoryStore
    from .sqlite import SQLiteStore

__all__ = [
    "ApprovalRecord",
    "ApprovalStatus",
    "ApprovalStore",
    "AuditRecord",
    "AuditStore",
    "CatalogRecord",
    "CatalogStore",
    "ConnectorState",
    "CredentialStore",
    "EphemeralStore",
    "LinkKind",
    "LinkRecord",
    "LinkStore",
    "MemoryStore",
    "MetaStore",
    "OperatorTokenRecord",
    "OperatorTokenStore",
    "SQLiteStore",
    "Store",
    "TokenRecord",
    "TokenStore",
    "UseRecord",
    "UseStore",
    "VectorStore",
]

_HOMES = {name: "contract" for name in __all__} | {"MemoryStore": "memory", "SQLiteStore": "sqlite"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value
