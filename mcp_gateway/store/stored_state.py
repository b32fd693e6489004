"""A read-only view of the SQLite state file, in one snapshot, with no event loop.

``SQLiteStore`` is the state's one writer: it needs aiosqlite and an event loop, and opening it
migrates the file. A command that only reads what the last sync left (the command line's
``connectors`` and ``discover``, answered without assembling a gateway) reads it through this view
instead: the file opened with ``mode=ro`` (nothing written, nothing migrated), every read in one
transaction, and the same rows the ``Store`` protocol returns read back the way it reads them
(``CatalogStore``'s connector states and catalog fingerprints, ``CredentialStore.list_credentials``'
keys, a catalog's actions decoded as ``store.catalog_lines`` writes them). What the view decides is
nothing: the answers are computed by the same code that computes them over the store.

``StoredState.open`` answers None for a file this build would migrate or does not own. A row this
build cannot read raises ``StateUnreadable``.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._sqlite_schema import APPLICATION_ID, SCHEMA_VERSION
from .catalog_lines import ActionLines

if TYPE_CHECKING:
    from ..primitives.secrets import CredentialKey
    from ..vocabulary.model import Action

__all__ = ["StateUnreadable", "StoredCatalog", "StoredState"]


class StateUnreadable(ValueError):
    """A file or row not as this build writes it (the store itself would say what it makes of it)."""


@dataclass(frozen=True)
class StoredCatalog:
    """What the last sync left for one connector: its state row, and its catalog row's fingerprint
    and spec files (its actions are read apart: ``StoredState.action_lines``, ``actions``)."""

    status: str
    actions: int
    error: str | None
    fingerprint: str
    files: list[str]


class StoredState:
    """The state file opened read-only, one snapshot for every read until ``close``."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    @classmethod
    def open(cls, path: Path) -> StoredState | None:
        """The file at ``path``; None when it needs a migration or is not a gateway's state."""
        try:
            db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise StateUnreadable(str(exc)) from None
        try:
            db.execute("PRAGMA busy_timeout = 5000")
            (version,) = db.execute("PRAGMA user_version").fetchone()
            (application,) = db.execute("PRAGMA application_id").fetchone()
            if version != SCHEMA_VERSION or application != APPLICATION_ID:
                db.close()
                return None
            db.execute("BEGIN")  # one snapshot for every read that follows
        except sqlite3.Error as exc:
            db.close()
            raise StateUnreadable(str(exc)) from None
        return cls(db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> StoredState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def catalogs(self) -> dict[str, StoredCatalog]:
        """Every connector with both a state row and a stored catalog, by slug."""
        try:
            states = {
                slug: (status, int(actions), error)
                for slug, status, actions, error in self._db.execute(
                    "SELECT slug, status, actions, error FROM connector_state"
                )
            }
            out: dict[str, StoredCatalog] = {}
            for slug, fingerprint, info in self._db.execute("SELECT slug, fingerprint, info FROM catalog"):
                if slug in states:
                    files: list[object] = json.loads(info or "{}").get("files") or []
                    out[slug] = StoredCatalog(*states[slug], str(fingerprint), [str(f) for f in files])
        except (sqlite3.Error, ValueError, TypeError, AttributeError) as exc:
            raise StateUnreadable(str(exc)) from None
        return out

    def credential_keys(self) -> list[CredentialKey]:
        """Which credentials are stored, as ``CredentialStore.list_credentials`` gives them (never a value)."""
        from ..primitives.secrets import CredentialKey

        try:
            rows = self._db.execute(
                "SELECT connector, principal, name FROM credential ORDER BY connector, principal, name"
            ).fetchall()
        except sqlite3.Error as exc:
            raise StateUnreadable(str(exc)) from None
        return [CredentialKey(connector=c, principal=p, name=n) for c, p, n in rows]

    def meta_rows(self, prefix: str) -> list[tuple[str, Any]]:
        """The meta table's rows whose key begins with ``prefix`` (``MetaStore``), each value decoded;
        one whose value is no JSON is left out."""
        try:
            rows = self._db.execute(
                "SELECT key, value FROM meta WHERE substr(key, 1, ?) = ? ORDER BY key", (len(prefix), prefix)
            ).fetchall()
        except sqlite3.Error as exc:
            raise StateUnreadable(str(exc)) from None
        out: list[tuple[str, Any]] = []
        for key, value in rows:
            try:
                out.append((key, json.loads(value)))
            except (ValueError, TypeError):
                continue
        return out

    def has_uses(self) -> bool:
        """Whether ``discover`` has learned from any use (``UseStore``): a ranking may then be lifted."""
        try:
            return self._db.execute("SELECT 1 FROM discovery_use LIMIT 1").fetchone() is not None
        except sqlite3.Error as exc:
            raise StateUnreadable(str(exc)) from None

    def action_lines(self, slug: str) -> ActionLines | None:
        """``slug``'s stored actions, each decoded when first read; None when the row is not in the
        line layout (written by an earlier build)."""
        try:
            return ActionLines.read(self._blob(slug), slug)
        except zlib.error as exc:
            raise StateUnreadable(f"the stored catalog of {slug} does not decompress: {exc}") from None

    def actions(self, slug: str) -> list[Action]:
        """``slug``'s stored actions, all decoded and validated."""
        from ..vocabulary.model import ACTIONS_ADAPTER

        try:
            return ACTIONS_ADAPTER.validate_json(zlib.decompress(self._blob(slug)))
        except (zlib.error, ValueError) as exc:
            raise StateUnreadable(f"the stored catalog of {slug} does not decode: {exc}") from None

    def _blob(self, slug: str) -> bytes:
        try:
            row = self._db.execute("SELECT actions FROM catalog WHERE slug = ?", (slug,)).fetchone()
        except sqlite3.Error as exc:
            raise StateUnreadable(str(exc)) from None
        if row is None:
            raise StateUnreadable(f"no stored catalog for {slug}")
        return bytes(row[0])
