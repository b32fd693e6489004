"""``MemoryStore``: the whole ``Store`` in one process's memory, for tests and throwaway tools.

It passes the same contract suite as ``SQLiteStore`` and ``PostgresStore`` (tests/store/test_store.py),
so a test that uses it exercises the semantics the real backends promise:

- Every method runs without awaiting anything in between its read and its write, so on one event
  loop each is atomic: compare-and-set transitions (consuming a link, deciding an approval,
  revoking a token, taking an ephemeral entry) have exactly one winner.
- Several ``MemoryStore`` instances built over one ``MemoryData`` share it, as two gateway
  processes share one database; the data outlives ``close``, like a file does.
- Datetimes must be timezone-aware (a naive one is a ``ValueError``, as in the SQL stores) and come
  back as UTC; listings have the SQL stores' order; ``meta`` values round-trip through JSON.
- A catalog is kept as its encoded (compressed JSON) form and decoded on read with the same
  ``ActionsDecoder`` hook the SQL stores take, so no caller shares mutable state with the store.

Nothing is persisted and nothing is sealed here beyond what the caller hands in (credentials arrive
sealed already).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self, TypeVar

from pydantic import BaseModel

from ..primitives.secrets import CredentialKey
from ..vocabulary.model import ACTIONS_ADAPTER
from ._rows import (
    ActionsDecoder,
    audit_identity,
    aware,
    catalog_params,
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

__all__ = ["MemoryData", "MemoryStore"]

logger = logging.getLogger(__name__)

_M = TypeVar("_M", bound=BaseModel)
_at = operator.attrgetter("at")


def _utc(record: _M) -> _M:
    """``record`` with every datetime field in UTC; a naive one is refused (``aware``)."""
    update = {
        name: aware(value).astimezone(UTC)
        for name in type(record).model_fields
        if isinstance(value := getattr(record, name), datetime)
    }
    return record.model_copy(update=update) if update else record


@dataclass(eq=False)
class _Ephemeral:
    value: bytes
    expires_at: datetime


@dataclass(eq=False)
class MemoryData:
    """What a database would hold: share one between ``MemoryStore`` instances to share state."""

    catalogs: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    """Catalog rows by slug, as the SQL stores' columns (``fingerprint``, ``info``, ``actions``)."""
    states: dict[str, ConnectorState] = field(default_factory=dict[str, ConnectorState])
    credentials: dict[CredentialKey, bytes] = field(default_factory=dict[CredentialKey, bytes])
    tokens: dict[str, TokenRecord] = field(default_factory=dict[str, TokenRecord])
    operator_tokens: dict[str, OperatorTokenRecord] = field(default_factory=dict[str, OperatorTokenRecord])
    links: dict[str, LinkRecord] = field(default_factory=dict[str, LinkRecord])
    approvals: dict[str, ApprovalRecord] = field(default_factory=dict[str, ApprovalRecord])
    audit: list[AuditRecord] = field(default_factory=list[AuditRecord])
    audit_open: dict[str, AuditRecord] = field(default_factory=dict[str, AuditRecord])
    """``started`` (and then ``interrupted``) rows by call_id until their outcome settles them."""
    ephemeral: dict[tuple[str, str], _Ephemeral] = field(default_factory=dict[tuple[str, str], _Ephemeral])
    meta: dict[str, str] = field(default_factory=dict[str, str])
    vectors: dict[tuple[str, bytes], bytes] = field(default_factory=dict[tuple[str, bytes], bytes])
    action_reviews: dict[tuple[str, str], ActionReviewRecord] = field(
        default_factory=dict[tuple[str, str], ActionReviewRecord]
    )
    action_review_changes: int = 0
    uses: dict[tuple[str, str, str], UseRecord] = field(default_factory=dict[tuple[str, str, str], UseRecord])


class MemoryStore:
    """The ``Store`` protocol over a ``MemoryData`` (a new, empty one unless given).

    Args:
        data: the state to use; pass the same object to several instances to share it.
        decode_actions: validates a stored catalog's actions JSON, as in the SQL stores.

    Example:
        async with MemoryStore() as store:
            await store.set_meta("project", "demo")
    """

    def __init__(
        self, data: MemoryData | None = None, *, decode_actions: ActionsDecoder = ACTIONS_ADAPTER.validate_json
    ) -> None:
        self._data = data if data is not None else MemoryData()
        self._decode_actions = decode_actions
        self._open = False

    def __repr__(self) -> str:
        return f"MemoryStore(at {id(self._data):#x})"

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        self._open = True

    async def close(self) -> None:
        self._open = False

    def _d(self) -> MemoryData:
        if not self._open:
            raise RuntimeError(f"{self!r} is not open: await store.open() first")
        return self._data

    # -- catalog ----------------------------------------------------------------------------------

    async def get_catalog(self, slug: str) -> CatalogRecord | None:
        row = self._d().catalogs.get(slug)
        if row is None:
            return None
        return await load_catalog(slug, row, logger, self._decode_actions)

    async def put_catalog(self, record: CatalogRecord) -> None:
        self._d()  # fails before the work when not open
        slug, fingerprint, info, blob = await catalog_params(record)
        self._d().catalogs[slug] = {"fingerprint": fingerprint, "info": info, "actions": blob}

    async def delete_catalog(self, slug: str) -> None:
        self._d().catalogs.pop(slug, None)

    async def put_connector_state(self, state: ConnectorState) -> None:
        self._d().states[state.slug] = _utc(state)

    async def list_connector_states(self) -> list[ConnectorState]:
        states = self._d().states
        return [states[slug] for slug in sorted(states)]

    # -- credentials ------------------------------------------------------------------------------

    async def put_credential(self, key: CredentialKey, sealed: bytes) -> None:
        self._d().credentials[key] = bytes(sealed)

    async def get_credential(self, key: CredentialKey) -> bytes | None:
        return self._d().credentials.get(key)

    async def delete_credential(self, key: CredentialKey) -> None:
        self._d().credentials.pop(key, None)

    async def list_credentials(self) -> list[CredentialKey]:
        return sorted(self._d().credentials, key=lambda k: (k.connector, k.principal, k.name))

    async def replace_all_credentials(self, sealed: dict[CredentialKey, bytes]) -> None:
        self._d().credentials = {k: bytes(v) for k, v in sealed.items()}

    # -- tokens -------------------------------------------------------------------------------------

    async def put_token(self, token: TokenRecord) -> None:
        tokens = self._d().tokens
        if any(t.token_hash == token.token_hash and t.id != token.id for t in tokens.values()):
            raise ValueError("a token with this hash exists")  # the SQL stores' UNIQUE constraint
        tokens[token.id] = _utc(token)

    async def find_token(self, token_hash: str) -> TokenRecord | None:
        return next((t for t in self._d().tokens.values() if t.token_hash == token_hash), None)

    async def list_tokens(self) -> list[TokenRecord]:
        return sorted(self._d().tokens.values(), key=lambda t: (t.created_at, t.id))

    async def revoke_token(self, token_id: str) -> bool:
        tokens = self._d().tokens
        token = tokens.get(token_id)
        if token is None or token.revoked:
            return False
        tokens[token_id] = token.model_copy(update={"revoked": True})
        return True

    # -- operator tokens ----------------------------------------------------------------------------

    async def add_operator_token(self, token: OperatorTokenRecord) -> bool:
        tokens = self._d().operator_tokens
        if token.id in tokens or any(t.token_hash == token.token_hash for t in tokens.values()):
            return False
        tokens[token.id] = _utc(token)
        return True

    async def find_operator_token(self, token_hash: str) -> OperatorTokenRecord | None:
        return next((t for t in self._d().operator_tokens.values() if t.token_hash == token_hash), None)

    async def get_operator_token(self, token_id: str) -> OperatorTokenRecord | None:
        return self._d().operator_tokens.get(token_id)

    async def list_operator_tokens(self) -> list[OperatorTokenRecord]:
        return sorted(self._d().operator_tokens.values(), key=lambda t: (t.created_at, t.id))

    async def revoke_operator_token(self, token_id: str) -> bool:
        tokens = self._d().operator_tokens
        token = tokens.get(token_id)
        if token is None or token.revoked:
            return False
        tokens[token_id] = token.model_copy(update={"revoked": True})
        return True

    # -- links --------------------------------------------------------------------------------------

    async def put_link(self, link: LinkRecord) -> None:
        self._d().links[link.token_hash] = _utc(link)

    async def get_link(self, token_hash: str) -> LinkRecord | None:
        return self._d().links.get(token_hash)

    async def consume_link(self, token_hash: str, now: datetime) -> LinkRecord | None:
        now = aware(now).astimezone(UTC)
        links = self._d().links
        link = links.get(token_hash)
        if link is None or link.used_at is not None or link.expires_at <= now:
            return None
        used = links[token_hash] = link.model_copy(update={"used_at": now})
        return used

    async def release_link(self, token_hash: str, used_at: datetime) -> bool:
        links = self._d().links
        link = links.get(token_hash)
        if link is None or link.used_at is None or link.used_at != aware(used_at):
            return False
        links[token_hash] = link.model_copy(update={"used_at": None})
        return True

    # -- approvals ------------------------------------------------------------------------------------

    async def put_approval(self, approval: ApprovalRecord) -> None:
        self._d().approvals[approval.id] = _utc(approval)

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        return self._d().approvals.get(approval_id)

    async def transition_approval(
        self,
        approval_id: str,
        from_status: ApprovalStatus,
        to_status: ApprovalStatus,
        now: datetime,
        by: str | None = None,
    ) -> bool:
        now = aware(now).astimezone(UTC)
        approvals = self._d().approvals
        approval = approvals.get(approval_id)
        if approval is None or approval.status != from_status:
            return False
        decided_at = approval.decided_at if approval.decided_at is not None else now
        decided_by = approval.decided_by if approval.decided_by is not None else by
        approvals[approval_id] = approval.model_copy(
            update={"status": to_status, "decided_at": decided_at, "decided_by": decided_by}
        )
        return True

    async def list_approvals(self, status: ApprovalStatus | None = None) -> list[ApprovalRecord]:
        found = (a for a in self._d().approvals.values() if status is None or a.status == status)
        return sorted(found, key=lambda a: (a.created_at, a.id))

    # -- audit ----------------------------------------------------------------------------------------

    async def append_audit(self, record: AuditRecord) -> None:
        await self.append_audits([record])

    async def append_audits(self, records: Sequence[AuditRecord]) -> None:
        parts = split_audits([_utc(r) for r in records])  # all validated before any is kept: all or none
        data = self._d()
        for rows, open_rows in parts:
            for row in rows:
                call_id = row.call_id
                if not open_rows:  # an outcome settles its call's open row, like the SQL stores' trigger
                    data.audit.append(row)
                    if call_id is not None:
                        data.audit_open.pop(call_id, None)
                elif call_id is not None:  # always: split_audits refuses a started row without one
                    data.audit_open[call_id] = row

    async def replay_audits(self, records: Sequence[AuditRecord]) -> int:
        rows = [_utc(r) for r in replayed_rows(records)]
        data = self._d()
        present = {audit_identity(r) for r in data.audit}
        added = 0
        for row in rows:
            if row.status == "started":  # open, unless its outcome is in already
                assert row.call_id is not None  # replayed_rows checked it
                settled = any(r.call_id == row.call_id and r.at >= row.at for r in data.audit)
                if not settled:
                    data.audit_open.setdefault(row.call_id, row)
                continue
            if row.call_id is not None:
                data.audit_open.pop(row.call_id, None)
            if audit_identity(row) not in present:
                data.audit.append(row)
                present.add(audit_identity(row))
                added += 1
        return added

    async def interrupt_started_audits(self, keep: Collection[str] = ()) -> int:
        opened = self._d().audit_open
        kept = set(keep)
        started = [call_id for call_id, r in opened.items() if r.status == "started" and call_id not in kept]
        for call_id in started:
            opened[call_id] = opened[call_id].model_copy(update={"status": "interrupted"})
        return len(started)

    async def list_audit(self, limit: int = 50) -> list[AuditRecord]:
        """The ``limit`` newest rows, newest first (ties in ``at``: open rows first, then by insertion order)."""
        data = self._d()
        # Newest first, stable: equal times keep this order (open rows, then the newest appended).
        rows = sorted([*reversed(data.audit_open.values()), *reversed(data.audit)], key=_at, reverse=True)
        return rows[: max(limit, 0)]

    # -- short-lived shared state -----------------------------------------------------------------------

    async def put_ephemeral(self, kind: str, key: str, value: bytes, expires_at: datetime, now: datetime) -> bool:
        now, expires_at = aware(now), aware(expires_at)
        entries = self._d().ephemeral
        for k in [k for k, e in entries.items() if e.expires_at <= now]:
            del entries[k]
        if (kind, key) in entries:
            return False
        entries[kind, key] = _Ephemeral(bytes(value), expires_at)
        return True

    async def get_ephemeral(self, kind: str, key: str, now: datetime) -> bytes | None:
        entry = self._d().ephemeral.get((kind, key))
        return entry.value if entry is not None and entry.expires_at > aware(now) else None

    async def take_ephemeral(self, kind: str, key: str, now: datetime) -> bytes | None:
        entry = self._d().ephemeral.pop((kind, key), None)
        return entry.value if entry is not None and entry.expires_at > aware(now) else None

    async def delete_ephemeral(self, kind: str, key: str) -> None:
        self._d().ephemeral.pop((kind, key), None)

    # -- misc -------------------------------------------------------------------------------------------

    async def get_meta(self, key: str) -> Any | None:
        text = self._d().meta.get(key)
        return load_meta(text) if text is not None else None

    async def set_meta(self, key: str, value: Any) -> None:
        """Store any JSON-serializable value under ``key`` (a ``None`` value reads back as absent)."""
        self._d().meta[key] = dump_meta(value)

    # -- discovery vectors -------------------------------------------------------------------------

    async def get_vectors(self, model: str, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        rows = self._d().vectors
        return {bytes(d): rows[(model, bytes(d))] for d in digests if (model, bytes(d)) in rows}

    async def put_vectors(self, model: str, vectors: Mapping[bytes, bytes]) -> None:
        rows = self._d().vectors
        for digest, vector in vectors.items():
            rows[(model, bytes(digest))] = bytes(vector)

    # -- action reviews -----------------------------------------------------------------------------

    async def put_action_review(self, record: ActionReviewRecord) -> None:
        reviews = self._d().action_reviews
        reviews.pop((record.name, record.fingerprint), None)  # a replaced decision moves to the end
        reviews[(record.name, record.fingerprint)] = _utc(record)
        self._d().action_review_changes += 1

    async def list_action_reviews(self) -> list[ActionReviewRecord]:
        return sorted(self._d().action_reviews.values(), key=lambda r: r.decided_at)

    async def action_reviews_version(self) -> str:
        return str(self._d().action_review_changes)

    # -- what discover learned from use ----------------------------------------------------------

    async def record_use(self, record: UseRecord) -> None:
        self._d().uses[(record.scope, record.action, record.query)] = _utc(record)

    async def list_uses(self, scope: str, limit: int) -> list[UseRecord]:
        mine = sorted((r for r in self._d().uses.values() if r.scope == scope), key=lambda r: (r.action, r.query))
        return sorted(mine, key=_at, reverse=True)[: max(limit, 0)]

    async def forget_uses(self, before: datetime) -> int:
        uses = self._d().uses
        old = [key for key, record in uses.items() if record.at < aware(before)]
        for key in old:
            del uses[key]
        return len(old)
