"""Persistence: the ``Store`` protocol, its record models, and the embedded ``SQLiteStore``."""

from __future__ import annotations

from .base import (
    ApprovalRecord,
    ApprovalStatus,
    AuditRecord,
    CatalogRecord,
    ConnectorState,
    CredentialKey,
    LinkKind,
    LinkRecord,
    Store,
    TokenRecord,
)
from .sqlite import SQLiteStore

__all__ = [
    "ApprovalRecord",
    "ApprovalStatus",
    "AuditRecord",
    "CatalogRecord",
    "ConnectorState",
    "CredentialKey",
    "LinkKind",
    "LinkRecord",
    "SQLiteStore",
    "Store",
    "TokenRecord",
]
