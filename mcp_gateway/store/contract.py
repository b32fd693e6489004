"""The ``Store`` protocol: everything the gateway persists, behind one async interface.

The protocol is split by role (``CatalogStore``, ``CredentialStore``, ``TokenStore``,
``OperatorTokenStore``, ``LinkStore``, ``ApprovalStore``, ``AuditStore``, ``EphemeralStore``,
``MetaStore``) and ``Store`` combines them with the lifecycle: a service takes the narrowest role
it needs (``CredentialVault`` a ``CredentialStore``, ``LinkService`` a ``LinkStore``, ...), so what
it can touch is visible in its signature and a test fake implements only that.

Implementations: ``SQLiteStore`` (embedded default), ``PostgresStore`` (several instances
sharing one database) and ``MemoryStore`` (one process, nothing persisted: tests and tools); all
three pass the same contract suite. Every method is a single statement or a short transaction, state
transitions that must happen exactly once (consuming a link, deciding an approval, taking an
ephemeral entry) are compare-and-set, and no method leaks a driver type. Secrets only ever
arrive here sealed (``bytes`` from ``crypto``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ..primitives.secrets import CredentialKey
from ..vocabulary.model import (
    Action,
    ApprovalKind,
    ApprovalStatus,
    AuditReason,
    AuditStatus,
    ConnectorStatus,
    PolicyAction,
    Risk,
    VerdictSource,
)

__all__ = [
    "ActionReviewRecord",
    "ActionReviewStore",
    "ApprovalRecord",
    "ApprovalStatus",
    "ApprovalStore",
    "AuditRecord",
    "AuditStore",
    "CachedCredentialStore",
    "CatalogRecord",
    "CatalogStore",
    "ConnectorState",
    "CredentialStore",
    "EphemeralStore",
    "InlineAuditStore",
    "LinkKind",
    "LinkRecord",
    "LinkStore",
    "MetaStore",
    "OperatorTokenRecord",
    "OperatorTokenStore",
    "Store",
    "TokenRecord",
    "TokenStore",
    "UseRecord",
    "UseStore",
    "VectorStore",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ConnectorState(BaseModel):
    """What the last sync found for one connector."""

    model_config = _FROZEN
    slug: str
    source: str
    """A short description of the source (``openapi:catalog/specs/github.json.gz``)."""
    status: ConnectorStatus
    actions: int
    error: str | None = None
    synced_at: datetime


class CatalogRecord(BaseModel):
    """The normalized actions of one connector, and the fingerprint of the content they came from."""

    model_config = _FROZEN
    slug: str
    fingerprint: str
    actions: list[Action]
    files: list[str] = []
    """Absolute paths of every file the normalizer read (the spec first), for change detection."""
    base_url: str | None = None
    """The base URL the source itself declares (OpenAPI ``servers``), used when the manifest gives none."""


class TokenRecord(BaseModel):
    model_config = _FROZEN
    id: str
    """Public, non-secret id (shown by ``token list``, used by ``token revoke``)."""
    agent: str
    token_hash: str
    created_at: datetime
    revoked: bool = False


class OperatorTokenRecord(BaseModel):
    """An operator token (the ``/operator`` page), apart from the agents' MCP tokens: one opens no
    MCP session, the other no overview. Only the token's SHA-256 is stored."""

    model_config = _FROZEN
    id: str
    """Public, non-secret id (shown by ``token list``, used by ``token revoke``)."""
    token_hash: str
    created_at: datetime
    revoked: bool = False


LinkKind = Literal["connect", "secret", "approval"]


class LinkRecord(BaseModel):
    """A single-use capability link handed to a human. Only the hash of its token is stored."""

    model_config = _FROZEN
    token_hash: str
    kind: LinkKind
    connector: str
    principal: str
    secret_name: str = "default"
    approval_id: str | None = None
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None
    agent: str | None = None
    """The agent that asked for it; None for a person's or the operator's own command (``mcp-gateway
    connect``). An agent of the operator's own session (``serve --agent``) is not the operator."""


class ApprovalRecord(BaseModel):
    model_config = _FROZEN
    id: str
    fingerprint: str
    """sha256 over (principal, qualified tool, canonical final args): an approval covers one call."""
    principal: str
    agent: str | None
    tool: str
    risk: Risk
    summary: str
    """Redacted, human-readable description of the call."""
    arguments: str = ""
    """The call's final arguments as indented JSON, redacted and capped, for the approval page."""
    verdict_source: VerdictSource
    verdict_rule: str | None = None
    status: ApprovalStatus = "pending"
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None = None
    separate_approver: bool = False
    """Only someone other than ``principal`` may approve it (the rule's or the project's ``separate_approver``)."""
    decided_by: str | None = None
    """Who decided: ``operator`` (the overview, the CLI) or the user who signed in on the approval page."""
    does: str = ""
    """What the action does, in the catalog's words (its summary), for the approval page."""
    calls: str = ""
    """Where the call goes: the HTTP method and URL, or the upstream MCP tool and its server."""
    sends: str = ""
    """sha256 of the request as built (``call_target.what_it_sends``): the approval covers those bytes,
    not only the arguments (defaults, static headers and where each argument goes included). For a
    ``credential`` approval: the revision of the credential it was asked to replace (``CredentialOrigins``)."""
    kind: ApprovalKind = "call"
    """``call``: one call of ``tool``; ``credential``: replacing a connector's team-wide credential
    through a connect or secret link (only an operator may approve it)."""


class AuditRecord(BaseModel):
    """One call decision. ``args_preview`` is already redacted and capped."""

    model_config = _FROZEN
    at: datetime
    user: str
    agent: str | None
    requested: str
    connector: str | None
    action: str | None
    args_preview: str
    fingerprint: str | None
    verdict: PolicyAction | None
    verdict_source: VerdictSource | None
    status: AuditStatus
    reason: AuditReason | None = None
    upstream_status: int | None = None
    latency_ms: float
    call_id: str | None = None
    """Set on a call that reached for the upstream: its ``started`` row and its outcome share it, and
    appending the outcome settles the ``started`` (or ``interrupted``) row: one row per call. A
    ``started`` row without one is refused (``ValueError``): nothing could ever settle it."""
    approved_by: str | None = None
    """For a call run under an approval: who approved it (``operator``, or the user who signed in on
    the approval page); None when nobody known did, or no approval was needed."""
    redirected_to: str | None = None
    """The path (no query) a same-origin redirect led the call to, whose answer it returned; None when
    it followed none."""


class ActionReviewRecord(BaseModel):
    """An operator's decision on one exact snapshot of an action: ``approved`` pins that
    fingerprint (the action is visible while it stays the same), ``denied`` keeps it quarantined and
    off the review list."""

    model_config = _FROZEN
    name: str
    """The action's qualified name."""
    fingerprint: str
    decision: Literal["approved", "denied"]
    snapshot: str
    """The agent-visible snapshot decided on, as JSON text (``review.snapshot``)."""
    decided_at: datetime
    decided_by: str


class UseRecord(BaseModel):
    """A discovered action that was then called successfully, and the query that found it: what
    ``discover`` learns from (``core.use_memory``). Nothing of the query is kept but its ``words`` the
    catalog itself uses (an argument, a name or a pasted key is never one of them)."""

    model_config = _FROZEN
    scope: str
    """Whose memory it is: one agent's, or the whole project's (``discovery.learn``)."""
    action: str
    """The qualified name of the action called."""
    query: str
    """A digest of ``words``: one row per distinct query, however often it leads to the call."""
    who: str
    """The principal that used it (in a project-wide scope, each counts apart)."""
    words: str
    """The query's words that are words of the catalog, in order, space-separated."""
    model: str | None = None
    """The embedding model of ``vector`` (None: no vector, lexical discovery)."""
    vector: bytes | None = None
    """``words`` embedded by ``model``: little-endian float32."""
    at: datetime
    """The latest such use."""


class CatalogStore(Protocol):
    """The sync's cache: normalized catalogs and what the last sync found per connector."""

    async def get_catalog(self, slug: str) -> CatalogRecord | None:
        """The stored catalog, or None if there is none or this build can no longer read it."""
        ...

    async def put_catalog(self, record: CatalogRecord) -> None: ...
    async def delete_catalog(self, slug: str) -> None: ...
    async def put_connector_state(self, state: ConnectorState) -> None: ...
    async def list_connector_states(self) -> list[ConnectorState]: ...


class CredentialStore(Protocol):
    """Sealed credentials (bytes from ``crypto``, never plaintext): the ``CredentialVault``'s."""

    async def put_credential(self, key: CredentialKey, sealed: bytes) -> None: ...
    async def get_credential(self, key: CredentialKey) -> bytes | None: ...
    async def delete_credential(self, key: CredentialKey) -> None: ...
    async def list_credentials(self) -> list[CredentialKey]: ...
    async def replace_all_credentials(self, sealed: dict[CredentialKey, bytes]) -> None:
        """Rewrite every credential in one transaction (key rotation)."""
        ...


class TokenStore(Protocol):
    """Agents' bearer tokens, by hash: the ``TokenService``'s."""

    async def put_token(self, token: TokenRecord) -> None: ...
    async def find_token(self, token_hash: str) -> TokenRecord | None:
        """The token with this hash, revoked or not: the caller checks ``revoked``."""
        ...

    async def list_tokens(self) -> list[TokenRecord]: ...
    async def revoke_token(self, token_id: str) -> bool:
        """True only for the one caller that revoked it; False if unknown or already revoked."""
        ...


class OperatorTokenStore(Protocol):
    """Operator tokens, one row each, by hash: the ``OperatorTokens`` service's."""

    async def add_operator_token(self, token: OperatorTokenRecord) -> bool:
        """Insert unless a token with this id or hash exists; True if inserted. Never overwrites, so
        importing the same token twice (from two instances) keeps whichever state is stored."""
        ...

    async def find_operator_token(self, token_hash: str) -> OperatorTokenRecord | None:
        """The token with this hash, revoked or not: the caller checks ``revoked``."""
        ...

    async def get_operator_token(self, token_id: str) -> OperatorTokenRecord | None: ...
    async def list_operator_tokens(self) -> list[OperatorTokenRecord]:
        """Oldest first (ties by id)."""
        ...

    async def revoke_operator_token(self, token_id: str) -> bool:
        """Compare-and-set: True only for the one caller that revoked it."""
        ...


class LinkStore(Protocol):
    """Single-use capability links, by hash: the ``LinkService``'s."""

    async def put_link(self, link: LinkRecord) -> None: ...
    async def get_link(self, token_hash: str) -> LinkRecord | None: ...
    async def consume_link(self, token_hash: str, now: datetime) -> LinkRecord | None:
        """Mark the link used if it is unused and unexpired; return it, else None. Atomic."""
        ...

    async def release_link(self, token_hash: str, used_at: datetime) -> bool:
        """Make the link unused again if it was used at exactly ``used_at`` (the instant its consumer
        passed to ``consume_link``): True when it is. Compare-and-set, so only the consumer that used
        it gives it back, and a link another consumer used stays used."""
        ...


class ApprovalStore(Protocol):
    """Approval requests and their compare-and-set decisions: the ``ApprovalService``'s."""

    async def put_approval(self, approval: ApprovalRecord) -> None: ...
    async def get_approval(self, approval_id: str) -> ApprovalRecord | None: ...
    async def transition_approval(
        self,
        approval_id: str,
        from_status: ApprovalStatus,
        to_status: ApprovalStatus,
        now: datetime,
        by: str | None = None,
    ) -> bool:
        """Compare-and-set the status; True only for the one caller that made the change. ``by``
        (who decided) is kept from the first transition that names one, like ``decided_at``."""
        ...

    async def list_approvals(self, status: ApprovalStatus | None = None) -> list[ApprovalRecord]: ...


class AuditStore(Protocol):
    """The append-only audit log: the ``Auditor``'s."""

    async def append_audit(self, record: AuditRecord) -> None: ...
    async def append_audits(self, records: Sequence[AuditRecord]) -> None:
        """Append rows in one transaction: all of them or none."""
        ...

    async def list_audit(self, limit: int = 50) -> list[AuditRecord]:
        """The ``limit`` newest rows, newest first."""
        ...

    async def interrupt_started_audits(self, keep: Collection[str] = ()) -> int:
        """Mark every ``started`` row ``interrupted`` (a call whose outcome was never written: the
        gateway died while it ran), but for the calls in ``keep`` (their outcome is known, waiting in
        a journal) and those a running instance on the same database has in flight (the store's
        ``instance`` id begins their call id, and the store can tell it is alive); how many. An
        outcome written later still replaces the row."""
        ...

    async def replay_audits(self, records: Sequence[AuditRecord]) -> int:
        """Append outcome rows in one transaction, leaving out each one the log already holds (the
        same ``at``, ``call_id``, ``user`` and ``requested``: the same row), so a journal replayed
        twice, or after a write whose commit was never acknowledged, adds nothing the second time.
        Each row appended or left out settles its call's open row, ``interrupted`` included. How
        many were appended.

        Raises:
            ValueError: a ``started`` row (only outcomes are replayed).
        """
        ...


@runtime_checkable
class InlineAuditStore(Protocol):
    """An audit log that can also take rows synchronously, on the caller's thread, when that costs
    less than handing them to a worker (``SQLiteStore``: a WAL append). The ``Auditor`` uses it for
    durable rows and falls back to the queued ``append_audits`` when it answers False or raises."""

    def append_audits_now(self, records: Sequence[AuditRecord]) -> bool:
        """Write rows now, all or none, without ever waiting for a lock; False when that is not possible."""
        ...

    async def checkpoint_audits(self) -> None:
        """The housekeeping the synchronous writes leave to a worker (SQLite: the WAL checkpoint)."""
        ...


@runtime_checkable
class CachedCredentialStore(Protocol):
    """Credentials a store can also answer from memory, synchronously (``SQLiteStore``: its access
    cache). The ``CredentialVault`` asks it first, then the store itself when it cannot tell."""

    def cached_credential(self, keys: Sequence[CredentialKey]) -> tuple[CredentialKey | None, bytes | None] | None:
        """The first of ``keys`` that holds a credential, as (key, sealed bytes), or (None, None) when
        none does, all read under one check that nothing changed; None when memory cannot tell."""
        ...


class EphemeralStore(Protocol):
    """Short-lived shared state.

    What a human page or a retry may hand to any instance behind a load balancer: operator
    sessions, OAuth2 authorizations in flight, refresh leases, single-use request-state nonces.
    ``kind`` names the use, ``key`` is already a hash or random id; values are opaque (sealed when
    secret).
    """

    async def put_ephemeral(self, kind: str, key: str, value: bytes, expires_at: datetime, now: datetime) -> bool:
        """Store ``value`` unless an unexpired entry holds (kind, key); True if stored. Atomic, so it
        doubles as claim-once. Entries expired at ``now`` are purged."""
        ...

    async def get_ephemeral(self, kind: str, key: str, now: datetime) -> bytes | None:
        """The value if the entry exists and is unexpired at ``now``."""
        ...

    async def take_ephemeral(self, kind: str, key: str, now: datetime) -> bytes | None:
        """Remove the entry; its value if it was unexpired. Of concurrent takers exactly one gets it."""
        ...

    async def delete_ephemeral(self, kind: str, key: str) -> None: ...


class ActionReviewStore(Protocol):
    """Operators' decisions on upstream actions' snapshots (pinning)."""

    async def put_action_review(self, record: ActionReviewRecord) -> None:
        """Record a decision; a later one on the same (name, fingerprint) replaces it."""
        ...

    async def list_action_reviews(self) -> list[ActionReviewRecord]:
        """Every decision, oldest first."""
        ...

    async def action_reviews_version(self) -> str:
        """An opaque value that changes whenever a decision is recorded, by this process or any
        other on the same database: one small aggregate instead of every snapshot, so that a
        reader can skip ``list_action_reviews`` when nothing changed."""
        ...


class MetaStore(Protocol):
    """Small JSON values by key. Last write wins: not for anything two instances update together."""

    async def get_meta(self, key: str) -> Any | None: ...
    async def set_meta(self, key: str, value: Any) -> None:
        """Store any JSON-serializable value under ``key`` (a ``None`` value reads back as absent)."""
        ...


class VectorStore(Protocol):
    """Embedding vectors for hybrid ``discover``, keyed by (model, text digest): raw little-endian float32
    bytes. Shared by every instance on one database, so a restart or a second instance embeds nothing
    an earlier one already did (``discovery.dense.DenseEmbedder``)."""

    async def get_vectors(self, model: str, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        """The stored vectors among ``digests`` (missing ones are simply absent)."""
        ...

    async def put_vectors(self, model: str, vectors: Mapping[bytes, bytes]) -> None:
        """Store (or overwrite) vectors."""
        ...


class UseStore(Protocol):
    """What ``discover`` learned from use: which action a query led to (``core.use_memory``)."""

    async def record_use(self, record: UseRecord) -> None:
        """Add a use; the same (scope, action, query) again replaces the row (one row per distinct query)."""
        ...

    async def list_uses(self, scope: str, limit: int) -> list[UseRecord]:
        """The ``limit`` most recent uses of ``scope``, newest first (ties by action, then query)."""
        ...

    async def forget_uses(self, before: datetime) -> int:
        """Delete every use last made before ``before`` (decayed to nothing); how many."""
        ...


class Store(
    CatalogStore,
    CredentialStore,
    TokenStore,
    OperatorTokenStore,
    LinkStore,
    ApprovalStore,
    AuditStore,
    EphemeralStore,
    MetaStore,
    VectorStore,
    ActionReviewStore,
    UseStore,
    Protocol,
):
    """Persistence for the gateway: every role, and the lifecycle. All methods are safe to call
    concurrently."""

    async def open(self) -> None:
        """Create or migrate the schema. Idempotent."""
        ...

    async def close(self) -> None: ...
