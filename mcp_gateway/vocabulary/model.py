"""The gateway's vocabulary: actions, their bindings, connector status and call results.

Everything here is pure data (frozen pydantic models, no I/O). A normalized ``Action`` is what
every source (OpenAPI, hand-written HTTP, later Postman, GraphQL, MCP) turns into; its
``binding`` is a discriminated union on ``kind`` so execution dispatches with ``match`` and an
unhandled new kind fails type-checking. ``CallResult`` is likewise a union on ``status``: it is
the one shape ``call`` hands back to an agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = [
    "AUTH_KINDS",
    "Action",
    "ActionSummary",
    "AuthKind",
    "Binding",
    "CallResult",
    "ConnectorInfo",
    "ConnectorStatus",
    "Denied",
    "DeniedReason",
    "ErrorReason",
    "ErrorResult",
    "GraphQLBinding",
    "HttpBinding",
    "ListedStatus",
    "McpBinding",
    "NeedsAuth",
    "Ok",
    "OpenAPIBinding",
    "ParamLocation",
    "ParamSpec",
    "ParamStyle",
    "PendingApproval",
    "PolicyAction",
    "PostmanBinding",
    "RequestBinding",
    "Risk",
    "Verdict",
    "VerdictSource",
    "a_credential",
    "withheld_note",
]

Risk = Literal["read", "write", "destructive"]
AuthKind = Literal["none", "bearer", "basic", "api_key", "custom", "oauth1", "hmac", "aws_sigv4", "mtls", "oauth2"]
"""The kinds of ``auth:`` a connector declares: one model each in ``manifest/auth.py`` (its ``type``), one
module each in ``auth/``. Adding a kind starts here; the type checker and ``tests/manifest/test_auth_kinds.py``
then point at every place that must follow."""
AUTH_KINDS: tuple[AuthKind, ...] = get_args(AuthKind)


def a_credential(kind: str) -> str:
    """``kind`` with its article, as read aloud: "an oauth2 credential", "a bearer credential"."""
    article = "an" if kind[:1] in "aeiou" or kind in ("hmac", "mtls") else "a"
    return f"{article} {kind} credential"


ParamLocation = Literal["path", "query", "header", "cookie", "body"]
ParamStyle = Literal[
    "form", "simple", "label", "matrix", "spaceDelimited", "pipeDelimited", "tabDelimited", "deepObject", "json"
]
"""How an array or object argument is written: OpenAPI's ``style`` values, ``tabDelimited`` for Swagger 2's
``collectionFormat: tsv``, and ``json`` for a value sent as one JSON text (a parameter described by a JSON
``content``, a multipart part of an object)."""
ConnectorStatus = Literal["ready", "needs_auth", "error"]
ListedStatus = Literal["ready", "needs_auth", "error", "loading"]
"""A connector's status as ``connectors`` lists it: ``loading`` while the gateway's start-up sync (or a
reload) has not loaded it yet."""
PolicyAction = Literal["always_run", "require_approval", "block"]
VerdictSource = Literal["project", "connector", "sensitive", "allow_all", "risk_default"]

DeniedReason = Literal[
    "connector_not_found",
    "action_not_found",
    "connector_not_assigned",
    "policy_block",
    "approval_denied",
    "approval_mismatch",
    "approval_expired",
    "invalid_args",
    "upstream_forbidden",
    "quarantined",
]
ErrorReason = Literal[
    "upstream_error",
    "upstream_timeout",
    "upstream_unreachable",
    "upstream_redirect_refused",
    "auth_failed",
    "connector_error",
    "internal_error",
    "store_unavailable",
    "rate_limited",
    "upstream_unavailable",
]

# -- what the store records (typed with this vocabulary) ----------------------------------------
# Kept as one block, apart from the Literals above, so that concurrent additions merge cleanly.
CallStatus = Literal["ok", "pending_approval", "needs_auth", "denied", "error"]
"""How a call ended: the ``status`` of its ``CallResult``, as the audit row records it."""
AuditReason = Literal[DeniedReason, ErrorReason, "needs_auth"]
"""The audit row's ``reason``: a ``Denied``'s or ``ErrorResult``'s reason, or ``needs_auth``."""
ApprovalStatus = Literal["pending", "approved", "denied", "consumed", "expired"]
"""Where an approval stands; it moves only by compare-and-set (``Store.transition_approval``)."""
ApprovalKind = Literal["call", "credential"]
"""What an approval lets happen: one call, or one replacement of a team-wide credential."""
AuditStatus = Literal[CallStatus, "started", "interrupted", "cancelled", "credential_set", "credential_deleted"]
"""The audit row's ``status``: a ``CallStatus`` once the call ended; ``started`` while a call that
reached for the upstream has no outcome yet; ``interrupted`` when the gateway stopped (crashed) before
writing one (marked on the next start); ``cancelled`` when the client gave up on a call whose request
had left (it may have taken effect); ``credential_set`` for a credential stored or replaced (its
row names who, the connector, team-wide or personal, and who approved it; never the value);
``credential_deleted`` for a stored credential deleted (by whom or on which provider's word, and how)."""
__all__ += ["ApprovalKind", "ApprovalStatus", "AuditReason", "AuditStatus", "CallStatus"]

# defer_build: a model's validator is built when first used, not at import, so a command that never
# makes one of these (``connectors`` read from the store) does not pay for building them all.
_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


def risk_of_method(method: str) -> Risk:
    """Risk from HTTP semantics: safe methods read, DELETE destroys, the rest write."""
    method = method.upper()
    if method in ("GET", "HEAD", "OPTIONS"):
        return "read"
    if method == "DELETE":
        return "destructive"
    return "write"


class ParamSpec(BaseModel):
    """Where one argument of an HTTP-like action goes on the wire."""

    model_config = _FROZEN

    name: str
    """The argument's name as the agent passes it (a key of ``input_schema.properties``)."""
    location: ParamLocation
    wire_name: str | None = None
    """The name on the wire when it differs from ``name`` (e.g. a header ``X-Request-Id``)."""
    style_explode: bool = True
    """OpenAPI ``explode``: ``a=1&a=2`` (True) or ``a=1,2`` (False) for an array in the query, and the like
    for the other styles."""
    style: ParamStyle | None = None
    """How an array or object value is written (``execution/param_styles.py``). None: commas for an
    array (repeated in the query when ``style_explode``), compact JSON for an object."""
    file: bool = False
    """A multipart body part that is a file: sent with a filename (``{content, filename?, content_type?}``
    or the text content alone)."""
    content_type: str | None = None
    """A multipart body part's own ``Content-Type`` (the description's ``encoding``), when it names one."""

    @property
    def on_wire(self) -> str:
        return self.wire_name or self.name


class _HttpLikeBinding(BaseModel):
    model_config = _FROZEN

    method: str
    url: str
    """A path template relative to the connector's ``base_url`` (``/repos/{owner}/{repo}``)."""
    params: tuple[ParamSpec, ...] = ()
    body: Literal["json", "form", "multipart", "raw", "none"] = "json"
    """How arguments placed in the body are encoded. ``multipart``: form-data parts (an object value
    ``{content, filename?, content_type?}`` is a file part); ``raw``: ``body_param``'s string as is."""
    body_param: str | None = None
    """When set, this argument *is* the whole body (a non-object JSON body); else body args form an object."""
    body_type: str | None = None
    """The ``Content-Type`` a ``raw`` body goes out with, as the description names its media type
    (``text/plain``, ``application/octet-stream``, ``application/xml``); None: ``text/plain; charset=utf-8``."""


class OpenAPIBinding(_HttpLikeBinding):
    kind: Literal["openapi"] = "openapi"
    operation_id: str | None = None


class HttpBinding(_HttpLikeBinding):
    kind: Literal["http"] = "http"


class PostmanBinding(_HttpLikeBinding):
    """A Postman request: HTTP-like once its ``{{variables}}`` and ``:path`` params are resolved."""

    kind: Literal["postman"] = "postman"
    headers: tuple[tuple[str, str], ...] = ()
    """The collection's literal, non-credential headers (``Content-Type``, ``X-Requested-With``)."""


class GraphQLBinding(BaseModel):
    """One root field of a GraphQL schema, executed with variables (never inlined values)."""

    model_config = _FROZEN
    kind: Literal["graphql"] = "graphql"
    operation: Literal["query", "mutation"]
    field: str
    variable_types: dict[str, str] = Field(default_factory=dict)
    """Argument name -> its GraphQL type as written in a variable definition (``ID!``, ``[String!]``)."""
    selection: str = ""
    """The default selection set (without braces); empty for a scalar or enum result."""


class McpBinding(BaseModel):
    """A tool of an upstream MCP server, called by its own name."""

    model_config = _FROZEN
    kind: Literal["mcp"] = "mcp"
    tool: str


class RequestBinding(BaseModel):
    """The generic ``request`` action: method, relative path, query, headers and body from the agent."""

    model_config = _FROZEN
    kind: Literal["request"] = "request"


Binding = Annotated[
    OpenAPIBinding | HttpBinding | PostmanBinding | GraphQLBinding | McpBinding | RequestBinding,
    Field(discriminator="kind"),
]


class Action(BaseModel):
    """One callable thing in the catalog, whatever source it came from."""

    model_config = _FROZEN

    connector: str
    path: str
    """Dot-separated, stable and unique within the connector (``issues.create``)."""
    summary: str = ""
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """Read-only: in a loaded catalog, equal sub-trees are one object shared by many actions, and
    mutating methods raise (``catalog_memory.FrozenDict``); copy it to build another."""
    risk: Risk = "write"
    binding: Binding
    group: str = ""
    """Where the source files the action, as words for discovery: the OpenAPI operation's first tag,
    the Postman folder path, the GraphQL field's result type, the MCP tool's title. Empty when none."""
    response_fields: str = ""
    """The field names of a successful response, space-separated, for discovery (a weak field: what the
    action returns, "available" for a balance). Empty when the source does not say."""
    aliases: tuple[str, ...] = Field(default=(), exclude_if=lambda aliases: not aliases)
    """Paths earlier releases gave this action, still resolving to it (``describe``, ``call``) so a name
    an agent or a policy already holds keeps working; not listed, not searched. Left out of the stored
    JSON when empty."""

    @property
    def qualified_name(self) -> str:
        return f"{self.connector}.{self.path}"


ACTIONS_ADAPTER: TypeAdapter[list[Action]] = TypeAdapter(list[Action], config=ConfigDict(defer_build=True))
"""Decodes and encodes a stored catalog; built on first use (it builds ``Action``'s validator)."""


class Verdict(BaseModel):
    """The policy engine's answer: what to do, and which layer said so."""

    model_config = _FROZEN

    action: PolicyAction
    source: VerdictSource
    rule: str | None = None
    """The matching rule's pattern, for ``describe`` and the audit row; None for defaults."""
    separate_approver: bool = False
    """The rule asks that someone other than the requester approves (``require_approval`` only)."""


# -- what the meta-tools return -------------------------------------------------------------


class ConnectorInfo(BaseModel):
    model_config = _FROZEN

    slug: str
    name: str
    description: str = ""
    status: ListedStatus
    actions: int
    """The actions agents may use (``withheld`` are the others)."""
    auth: str
    """The auth kind the connector needs (``bearer``, ``none`` ...); never a value."""
    auth_configured: bool
    error: str | None = None
    warning: str | None = None
    """Something an operator must look at while the connector still works (its API description
    moved its servers to another origin: calls keep going to the pinned one until approved)."""
    withheld: dict[str, int] | None = None
    """Actions loaded but not available, by why: ``held for review (hides text)``, ``hidden by
    policy`` …; None when there are none."""
    note: str | None = None
    """``withheld`` in a sentence (``withheld_note``), so a count never differs from a sync's unexplained."""


def withheld_note(available: int, withheld: Mapping[str, int] | None) -> str | None:
    """ "273 actions: 268 available, 5 held for review (hides text)"; None when nothing is withheld."""
    if not withheld:
        return None
    total = available + sum(withheld.values())
    return f"{total} actions: {available} available, " + ", ".join(f"{n} {why}" for why, n in withheld.items())


class ActionSummary(BaseModel):
    """One discover hit: enough to call without a second round trip for simple actions."""

    model_config = _FROZEN

    name: str
    summary: str
    risk: Risk
    needs_approval: bool
    needs_auth: bool
    params: list[str]
    required: list[str]
    score: float


class Ok(BaseModel):
    model_config = _FROZEN
    status: Literal["ok"] = "ok"
    http_status: int | None = None
    data: Any = None
    truncated: bool | None = None
    unmatched_fields: list[str] | None = None
    """The ``fields`` paths that matched nothing in the upstream's answer (absent when all matched)."""
    non_finite_replaced: bool | None = None
    """True when the upstream's answer held numbers JSON cannot carry (``NaN``, ``Infinity``, ``1e400``):
    each is ``null`` in ``data`` (absent when there were none)."""
    note: str | None = None
    """What the agent should know of how ``data`` was read: a JSON answer larger than the gateway reads,
    cut before it could be parsed, so ``fields`` could not be applied (absent otherwise)."""


class PendingApproval(BaseModel):
    model_config = _FROZEN
    status: Literal["pending_approval"] = "pending_approval"
    approval_id: str
    approval_url: str
    summary: str
    expires_at: str
    reason: str = (
        "This action needs a human's approval. Send the link to the user; after they approve, "
        "retry the same call with approval_id."
    )


class NeedsAuth(BaseModel):
    model_config = _FROZEN
    status: Literal["needs_auth"] = "needs_auth"
    connector: str
    connect_url: str
    reason: str


class Denied(BaseModel):
    model_config = _FROZEN
    status: Literal["denied"] = "denied"
    reason: DeniedReason
    message: str
    source: VerdictSource | None = None
    rule: str | None = None
    suggestions: list[dict[str, Any]] | None = None
    errors: list[dict[str, Any]] | None = None


class ErrorResult(BaseModel):
    model_config = _FROZEN
    status: Literal["error"] = "error"
    reason: ErrorReason
    message: str
    upstream_status: int | None = None
    upstream_message: str | None = None
    hint: str | None = None
    retry_after: float | None = None
    """Seconds to wait before calling again (``rate_limited``, ``upstream_unavailable``, an upstream
    429/503 that said ``Retry-After``)."""


CallResult = Annotated[Ok | PendingApproval | NeedsAuth | Denied | ErrorResult, Field(discriminator="status")]
