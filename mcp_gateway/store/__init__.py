"""Persistence: the ``Store`` protocol (split by role), its record models, and the embedded
``SQLiteStore``. ``PostgresStore`` (``store.postgres``, needs asyncpg) and ``MemoryStore``
(``store.memory``) implement the same protocol."""

from __future__ import annotations

from .base import (
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
    "VectorStore",
]
