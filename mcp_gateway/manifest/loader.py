"""The manifest: its top-level models and the loader, whose errors are located.

Every problem becomes an ``Issue`` naming the file, the line, the field as a YAML path
(``connectors[0].auth.type``), what is wrong and how to fix it; all problems of a file are
reported at once, in line order. Duplicate YAML keys are errors (YAML would silently keep the
last one, and a second ``policies:`` must not erase the first).

Relative paths in a manifest resolve against the manifest's own folder (``Manifest.resolve``).
A connector may name a ``catalog:`` entry (``bundled/catalog/<name>.yaml``): the entry's connector
fields are defaults and the manifest's own fields win (``headers`` merge key by key, and so does
``auth`` when the manifest leaves its type out or repeats it), the entry's relative source paths
resolve against the catalog folder, and keys that are not connector fields (an entry may carry
other metadata) are ignored.

Policy matchers are compiled here, once, at load: an invalid or catastrophic regex in a rule's
``match`` becomes a matcher that never matches plus a ``diagnostics()`` entry that ``validate``
reports (fail safe), while a broken ``when`` is an error.

This module holds the top-level models and the entry points; the package's other modules hold the
parts (see ``mcp_gateway.manifest``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..policy import Condition, Matcher, compile_matcher
from ..primitives.file_kinds import not_a_file
from ..primitives.public_url import public_url_problem
from ..vocabulary.errors import GatewayError, Issue, ManifestError
from ..vocabulary.model import PolicyAction, Risk
from .auth import (
    AuthConfig,
    MtlsAuth,
    NoAuth,
    auth_headers,
    refuse_static_headers,
)
from .bundled import CATALOG_DIR, DEFAULT_MANIFEST
from .catalog import CatalogUse, catalog_entry, merge_defaults, unfilled
from .issues import describe, located_issue
from .sources import (
    GraphQLSource,
    HttpSource,
    McpSource,
    McpSpec,
    OpenAPISource,
    PostmanSource,
    SourceConfig,
)
from .traffic_settings import AgentLimitsConfig, CircuitBreakerConfig, LimitConfig, RetryConfig
from .validation import SLUG_RE, STRICT, Problem, choose, url_problem
from .yaml_lines import Loc, dotted, line_for, read_yaml

__all__ = [
    "AgentConfig",
    "ConnectorConfig",
    "DiscoveryConfig",
    "EmbeddingsEndpoint",
    "Manifest",
    "PolicyRule",
    "load_manifest",
    "parse_manifest",
]


# -- policy ---------------------------------------------------------------------------------


class PolicyRule(BaseModel):
    """One ``policies`` entry; its ``matcher`` is compiled once, when the rule is validated."""

    model_config = STRICT
    match: str = Field(min_length=1)
    action: PolicyAction
    when: dict[str, Condition] | None = None
    separate_approver: bool = False
    """With ``require_approval``: the approver must be someone other than the user who asked
    (as the project-wide ``approvals.separate_approver``, for this rule's calls only)."""

    _matcher: Matcher = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._matcher = compile_matcher(self.match)

    @model_validator(mode="after")
    def _separate_approver_needs_approval(self) -> PolicyRule:
        if self.separate_approver and self.action != "require_approval":
            raise Problem(
                f"separate_approver applies to require_approval rules, not to {self.action!r}",
                "drop separate_approver, or use 'action: require_approval'",
                key="separate_approver",
            )
        return self

    @property
    def matcher(self) -> Matcher:
        return self._matcher


# -- connectors, agents, manifest ----------------------------------------------------------


class TlsConfig(BaseModel):
    """A connector's TLS trust: which CAs sign its server's certificate."""

    model_config = STRICT
    ca_file: str = Field(min_length=1)
    """PEM file of the CA(s) that sign the upstream's server certificate, for a private PKI (relative to the
    manifest's folder); trusted instead of the system's store by the connector's calls, its OAuth2 token
    requests to the same host and ``doctor``'s handshake. No client certificate is needed (that is ``mtls``)."""


class ConnectorConfig(BaseModel):
    model_config = STRICT
    slug: str
    name: str | None = None
    description: str = ""
    catalog: str | None = None
    source: SourceConfig | None = None
    base_url: str | None = None
    auth: AuthConfig = Field(default_factory=NoAuth)
    headers: dict[str, str] = Field(default_factory=dict)
    sensitive: bool = False
    request_action: bool = False
    confine_to_base_path: bool = True
    """The ``request`` action keeps absolute same-origin URLs below ``base_url``'s path."""
    trust_annotations: bool = True
    timeout: float = Field(30.0, gt=0, le=600)
    policies: list[PolicyRule] = Field(default_factory=list)
    risk: dict[str, Risk] = Field(default_factory=dict)
    """Per-action risk overrides, by relative action path."""
    credentials: Literal["shared", "per_user"] = "shared"
    """Whose credential a call carries: ``shared`` (the caller's own, else the project-wide one) or
    ``per_user`` (only the caller's own: each user connects their own account)."""
    trace_context: bool = True
    """Send W3C trace context (``traceparent``) on this connector's upstream HTTP requests; ``false``
    for an upstream that must not learn the caller's trace ids."""
    circuit_breaker: CircuitBreakerConfig | None = None
    """Fail fast after consecutive upstream failures; None: no circuit breaker."""
    retries: RetryConfig = RetryConfig()
    """Retries of reads after a transient upstream failure; none by default."""
    trust: Literal["review", "pinned", "auto"] | None = None
    """How far what the upstream says is trusted (``review.py``): ``review`` quarantines new
    and changed actions until an operator approves them, ``pinned`` approves them as they load but
    still quarantines instruction-like text, ``auto`` approves everything. Unset: ``review`` for an
    ``mcp`` source, ``pinned`` otherwise (see ``effective_trust``)."""
    max_result_chars: int | None = Field(None, gt=0)
    """The most characters of a call's result data that reach the model (longer: cut, ``truncated``)."""
    tls: TlsConfig | None = None
    """The CAs trusted for the upstream's server certificate (``tls.ca_file``); None: the system's store."""

    @property
    def ca_file(self) -> str | None:
        """The CA file this connector trusts, as written: ``tls.ca_file``, else an ``mtls`` auth's own."""
        if self.tls is not None:
            return self.tls.ca_file
        return self.auth.ca_file if isinstance(self.auth, MtlsAuth) else None

    @model_validator(mode="after")
    def _one_ca_file(self) -> ConnectorConfig:
        if self.tls is not None and isinstance(self.auth, MtlsAuth) and self.auth.ca_file is not None:
            raise Problem(
                "both tls.ca_file and auth.ca_file name the CA to trust",
                "keep one: tls.ca_file (auth.ca_file is its older spelling, for mtls only)",
                key="tls",
            )
        return self

    @property
    def effective_trust(self) -> Literal["review", "pinned", "auto"]:
        if self.trust is not None:
            return self.trust
        return "review" if isinstance(self.source, McpSource) else "pinned"

    @field_validator("slug")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not SLUG_RE.match(v):
            raise Problem(
                f"{v!r} is not a valid slug",
                "use lowercase letters, digits, '_' or '-', starting with a letter, at most 63 characters, "
                "e.g. 'github'",
            )
        return v

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, v: str | None) -> str | None:
        # Checked here, not at the first call: there, every call failed with an internal error.
        # The value is not quoted: a credential pasted into the wrong key would reach the log.
        if v is None:
            return v
        try:
            parts = urlsplit(v.strip())
            parts.port  # noqa: B018 - raises on a port that is no number
        except ValueError:
            parts = None
        if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise Problem(
                "base_url is not an http(s) URL with a host",
                "write the API's full base URL, e.g. 'https://api.example.com/v1'",
            )
        return v

    @field_validator("headers")
    @classmethod
    def _no_credential_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        return refuse_static_headers(headers, "under 'auth:'")

    @property
    def display_name(self) -> str:
        return self.name or self.slug


class AgentConfig(BaseModel):
    model_config = STRICT
    name: str = Field(min_length=1)
    connectors: list[str] = Field(default_factory=list)
    users: list[str] = Field(default_factory=list)
    """With ``users`` or ``groups``: this grant applies only to these users (front door), or members of these groups."""
    groups: list[str] = Field(default_factory=list)

    @property
    def restricted(self) -> bool:
        return bool(self.users or self.groups)


def _secure_or_loopback(url: str) -> bool:
    """``url`` is https, or plain http to this machine (a local identity provider, a test)."""
    if url.startswith("https://"):
        return True
    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


class FrontDoorConfig(BaseModel):
    """``front_door``: accept access tokens from an identity provider (OAuth 2.1 resource server)."""

    model_config = STRICT
    issuer: str = Field(min_length=1)
    audience: str | None = None
    """The ``aud`` tokens must carry: this gateway's resource URL (default ``<public_url>/mcp``)."""
    jwks_url: str | None = None
    """Default: ``jwks_uri`` from the issuer's metadata, fetched when serving starts."""
    scopes: list[str] = Field(default_factory=list)
    """Scopes every token must carry (advertised in the protected resource metadata)."""
    user_claim: str = "sub"
    agent_claim: str | None = None
    """The claim naming the agent; default the token's client (``azp``/``client_id``)."""
    groups_claim: str = "groups"
    agents_by_claim: dict[str, str] = Field(default_factory=dict)
    """The agent claim's value (or the client id) -> the agent name the ``agents`` grants use."""
    static_tokens: bool = True
    """Whether ``token create`` tokens keep working beside the identity provider's."""
    approver_client_id: str | None = None
    """The gateway's own client at the issuer, for approvers signing in on the approval page
    (authorization code + PKCE; redirect URI ``<public_url>/approvals/callback``). A public client,
    unless ``secret set --front-door approver`` stored its secret."""
    introspection_url: str | None = None
    """RFC 7662: opaque (non-JWT) access tokens are checked at this endpoint (default: the issuer
    metadata's ``introspection_endpoint`` when ``introspection_client_id`` is set)."""
    introspection_client_id: str | None = None
    """The client the gateway authenticates as at the introspection endpoint; its secret is stored
    with ``secret set --front-door introspection``."""

    @field_validator("issuer", "audience", "jwks_url", "introspection_url")
    @classmethod
    def _url(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise Problem(f"{v!r} is not an http(s) URL", "write the full URL, e.g. 'https://login.example.com'")
        if v is not None and info.field_name != "audience" and not _secure_or_loopback(v):
            # The keys that sign every token, the issuer's metadata naming them and the verdict on an
            # opaque token: whoever sits on a plain-http path could mint tokens the gateway accepts.
            raise Problem(
                f"{v!r} is plain http on a host that is not loopback: anyone on the network path could "
                "substitute the keys or answers that decide who gets in",
                "use the https URL (plain http is accepted only for 127.0.0.1, ::1 or localhost)",
            )
        return v


class ApprovalsConfig(BaseModel):
    model_config = STRICT
    separate_approver: bool = False
    """An approval must come from someone other than the user who asked (an operator token, or a
    front-door sign-in of another user)."""


class EmbeddingsEndpoint(BaseModel):
    """An OpenAI-compatible ``/embeddings`` endpoint for hybrid discovery (OpenAI, Ollama, vLLM, TEI...).

    ``url`` is the API base (``http://localhost:11434/v1``); the request goes to ``{url}/embeddings``.
    Its API key, if it needs one, is stored sealed like a connector secret:
    ``mcp-gateway secret set --discovery`` (stdin; filed under the reserved connector ``_discovery``).
    """

    model_config = STRICT
    url: str = Field(min_length=1)
    model: str = Field(min_length=1)


class DiscoveryConfig(BaseModel):
    """How ``discover`` ranks (docs/discovery.md).

    ``mode: auto`` (the default) fuses the lexical ranker with dense retrieval whenever the ``embeddings``
    extra is installed (or ``embeddings`` names an endpoint), else ranks lexically; ``lexical`` never
    loads a model; ``hybrid`` refuses to start without one. The older ``reranker: minilm`` means
    ``hybrid`` and ``reranker: none`` means ``lexical`` (when ``mode`` is not given)."""

    model_config = STRICT
    reranker: Literal["none", "minilm"] | None = None
    """Deprecated spelling of ``mode`` (``minilm`` -> ``hybrid``, ``none`` -> ``lexical``)."""
    mode: Literal["auto", "lexical", "hybrid"] | None = None
    """``auto`` when neither this nor ``reranker`` is given."""
    embeddings: EmbeddingsEndpoint | None = None
    """An OpenAI-compatible endpoint instead of the bundled local model."""
    learn: Literal["agent", "project", "off"] = "agent"
    """Whose successful calls lift the actions they used for later, similar queries: each agent its
    own (``agent``), every agent of the project together (``project``), or nobody (``off``: nothing is
    recorded and nothing lifted)."""

    @field_validator("learn", mode="before")
    @classmethod
    def _off_as_yaml_reads_it(cls, value: object) -> object:
        # YAML reads a bare ``off`` (and ``no``, ``false``) as False: that is what was meant.
        return "off" if value is False else value

    @property
    def effective_mode(self) -> Literal["auto", "lexical", "hybrid"]:
        if self.mode is not None:
            return self.mode
        if self.reranker is not None:
            return "hybrid" if self.reranker == "minilm" else "lexical"
        return "auto"


_DEFER_CROSS_CHECKS = "defer_cross_checks"


@dataclass(frozen=True)
class _Origin:
    """Where a parsed manifest came from, so later diagnostics can be located too."""

    file: str
    lines: dict[Loc, int] = field(default_factory=dict)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    project: str = Field("default", min_length=1)
    default_mode: Literal["risk", "allow_all"] = "risk"
    public_url: str = "http://127.0.0.1:8765"
    policies: list[PolicyRule] = Field(default_factory=list)
    connectors: list[ConnectorConfig] = Field(default_factory=list)
    agents: list[AgentConfig] | None = None
    discovery: DiscoveryConfig = Field(default_factory=DiscoveryConfig)
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)
    """The folder relative source paths resolve against."""
    front_door: FrontDoorConfig | None = None
    """Access tokens from an identity provider (docs/front-door.md)."""
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    limits: list[LimitConfig] = Field(default_factory=list)
    """Rate limits and concurrency caps per agent, connector or action pattern."""
    agent_limits: AgentLimitsConfig = Field(default_factory=AgentLimitsConfig)
    """Running calls, ``wait`` sleepers and elicitation watchers one agent may hold at once."""

    _origin: _Origin | None = PrivateAttr(default=None)

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, v: str) -> str:
        if (problem := public_url_problem(v)) is not None:
            raise Problem(problem, "write the base humans open, e.g. 'http://127.0.0.1:8765'")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _cross_checks(self, info: ValidationInfo) -> Manifest:
        # parse_manifest reports these itself, each at its own line; direct construction raises.
        if info.context and info.context.get(_DEFER_CROSS_CHECKS):
            return self
        problems = self._cross_problems()
        if problems:
            raise ValueError("; ".join(f"{dotted(loc)}: {message}" for loc, message, _ in problems))
        return self

    def _cross_problems(self) -> list[_Located]:
        """Problems that span fields, each with its location and fix."""
        out: list[_Located] = []
        first: dict[str, int] = {}
        for i, c in enumerate(self.connectors):
            if c.slug in first:
                why = f"duplicate connector slug {c.slug!r}: connectors[{first[c.slug]}] has it too"
                out.append((("connectors", i, "slug"), why, "give every connector its own slug"))
            first.setdefault(c.slug, i)
            out += _connector_problems(i, c)
        agents: dict[str, int] = {}
        for j, agent in enumerate(self.agents or []):
            if agent.name in agents and not agent.restricted and not (self.agents or [])[agents[agent.name]].restricted:
                why = f"duplicate agent {agent.name!r}: agents[{agents[agent.name]}] has it too"
                out.append((("agents", j, "name"), why, "merge the two entries' connectors into one"))
            agents.setdefault(agent.name, j)
            for k, slug in enumerate(agent.connectors):
                if slug not in first:
                    why = f"agent {agent.name!r} is granted unknown connector {slug!r}"
                    out.append((("agents", j, "connectors", k), why, choose(slug, list(first), "connector slugs")))
        return out

    def connector(self, slug: str) -> ConnectorConfig | None:
        return next((c for c in self.connectors if c.slug == slug), None)

    def resolve(self, ref: str) -> str:
        """A source reference as a URL or an absolute path (relative ones against the manifest's folder)."""
        if ref.startswith(("http://", "https://")):
            return ref
        path = Path(ref).expanduser()
        return str(path if path.is_absolute() else (self.base_dir / path))

    def diagnostic_issues(self, read_spec: Callable[[str, Path], None] | None = None) -> list[Issue]:
        """Non-fatal problems ``validate`` reports (and exits non-zero on): rules that can never match,
        spec files that do not exist, and (with ``read_spec(kind, path)``, which raises ``GatewayError``
        on a file that does not parse; kind is ``openapi``, ``postman`` or ``schema``) specs that do not parse."""
        origin = self._origin or _Origin(file="<manifest>")
        out: list[Issue] = []
        layers: list[tuple[Loc, list[PolicyRule]]] = [(("policies",), self.policies)]
        layers += [(("connectors", i, "policies"), c.policies) for i, c in enumerate(self.connectors)]
        for prefix, rules in layers:
            for j, rule in enumerate(rules):
                if rule.matcher.error:
                    loc = (*prefix, j, "match")
                    out.append(
                        Issue(
                            origin.file,
                            line_for(loc, origin.lines),
                            dotted(loc),
                            f"{rule.match!r} never matches: {rule.matcher.error}",
                            "fix the pattern, or use a glob such as 'issues.*'; until then this rule is ignored",
                        )
                    )
        for loc, ref in self.local_files():
            path = Path(self.resolve(ref))
            if not path.is_file():
                out.append(
                    Issue(
                        origin.file,
                        line_for(loc, origin.lines),
                        dotted(loc),
                        f"{ref!r}: no such file ({path})",
                        "fix the path: a relative one starts at the manifest's folder",
                    )
                )
                continue
            try:
                if read_spec is not None:
                    read_spec(str(loc[-1]), path)
            except GatewayError as exc:
                out.append(
                    Issue(
                        origin.file,
                        line_for(loc, origin.lines),
                        dotted(loc),
                        f"{ref!r} does not parse: {exc}",
                        "fix the file, or point at the right one",
                    )
                )
        return out

    def local_files(self) -> list[tuple[Loc, str]]:
        """Every spec or schema file the connectors' sources name on disk (not URLs), with its location."""
        out: list[tuple[Loc, str]] = []
        for i, c in enumerate(self.connectors):
            src = c.source
            if isinstance(src, OpenAPISource):
                out.append((("connectors", i, "source", "openapi"), src.openapi))
            elif isinstance(src, PostmanSource):
                out.append((("connectors", i, "source", "postman"), src.postman))
            elif isinstance(src, GraphQLSource) and src.graphql.schema_ is not None:
                out.append((("connectors", i, "source", "graphql", "schema"), src.graphql.schema_))
        return [(loc, ref) for loc, ref in out if not ref.startswith(("http://", "https://"))]

    def diagnostics(self, read_spec: Callable[[str, Path], None] | None = None) -> list[str]:
        """``diagnostic_issues`` as text, one ``file:line: field: problem (fix: …)`` each."""
        return [str(issue) for issue in self.diagnostic_issues(read_spec)]


_Located = tuple[Loc, str, str]
"""A problem found after validation: (location, problem, fix)."""


def _connector_problems(i: int, c: ConnectorConfig) -> list[_Located]:
    out: list[_Located] = []
    written = auth_headers(c.auth)
    for name in c.headers:
        if name.lower() in written:
            why = f"static header {name!r} is the header that auth type {c.auth.type!r} sets"
            out.append(
                (("connectors", i, "headers", name), why, "remove it: the gateway writes it from the credential")
            )
    if isinstance(c.source, HttpSource):
        seen: dict[str, int] = {}
        for j, action in enumerate(c.source.http.actions):
            if action.path in seen:
                why = f"duplicate action path {action.path!r}: actions[{seen[action.path]}] has it too"
                loc = ("connectors", i, "source", "http", "actions", j, "path")
                out.append((loc, why, "give every action of a connector its own path"))
            seen.setdefault(action.path, j)
    if isinstance(c.source, McpSource):
        out += _mcp_problems(i, c, c.source.mcp)
    for loc, what, url in _source_urls(i, c):
        if (problem := url_problem(url)) is not None:
            why, fix = problem
            out.append((loc, f"connector {c.slug!r}: its {what} URL {why}", fix))
    return out


def _source_urls(i: int, c: ConnectorConfig) -> list[tuple[Loc, str, str]]:
    """The URLs ``c``'s source is fetched from, with their location and what each names."""
    src: Loc = ("connectors", i, "source")
    match c.source:
        case OpenAPISource(openapi=ref) if ref.startswith(("http://", "https://")):
            return [((*src, "openapi"), "spec", ref)]
        case PostmanSource(postman=ref) if ref.startswith(("http://", "https://")):
            return [((*src, "postman"), "collection", ref)]
        case McpSource(mcp=McpSpec(url=str(url))):
            return [((*src, "mcp", "url"), "MCP server", url)]
        case _:
            return []


def _mcp_problems(i: int, c: ConnectorConfig, spec: McpSpec) -> list[_Located]:
    """Where an MCP connector's credential goes must be said: a stdio child gets it only through
    an ``env`` template, so a secret with nowhere to go (or a template with no secret) is an error."""
    out: list[_Located] = []
    src: Loc = ("connectors", i, "source", "mcp")
    if spec.command is not None and not isinstance(c.auth, NoAuth) and not spec.uses_secret:
        why = f"auth type {c.auth.type!r} needs a place for the credential, but no 'env' value uses {{secret}}"
        out.append(((*src, "env"), why, "add e.g. 'env: {API_TOKEN: \"{secret}\"}', or set 'auth: {type: none}'"))
    if spec.uses_secret and isinstance(c.auth, NoAuth):
        why = "an 'env' value uses {secret}, but the connector declares no auth, so no credential is stored for it"
        out.append(((*src, "env"), why, "add 'auth: {type: bearer}' to the connector (any kind with a secret)"))
    if c.request_action:
        why = "the generic request action sends HTTP to a base_url; an MCP server has none"
        out.append((("connectors", i, "request_action"), why, "remove 'request_action'"))
    return out


_CONNECTOR_KEYS = frozenset(ConnectorConfig.model_fields) - {"slug", "catalog"}
"""The connector fields a catalog entry may supply: all but ``slug`` and ``catalog`` itself."""


# -- entry points ---------------------------------------------------------------------------


def parse_manifest(
    text: str, *, file: str = "<manifest>", base_dir: Path | None = None, catalog_dir: Path = CATALOG_DIR
) -> Manifest:
    """Validate manifest text. Raises ``ManifestError`` listing every located problem.

    Args:
        text: the YAML.
        file: the name issues carry (the manifest's path).
        base_dir: the folder relative paths resolve against (default: the working directory).
        catalog_dir: where ``catalog:`` entries live.
    """
    data, lines, issues = read_yaml(text, file)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ManifestError(
            [
                Issue(
                    file,
                    1,
                    "",
                    f"a manifest is a YAML mapping, not {describe(data, reveal=False)}",
                    "start with 'project: NAME' and list connectors under 'connectors:'",
                )
            ]
        )
    if "base_dir" in data:
        # Not a manifest key: the folder is where the file lives. (It is a field only for Python callers.)
        data = {k: v for k, v in data.items() if k != "base_dir"}
        issues.append(
            Issue(
                file,
                lines.get(("base_dir",)),
                "base_dir",
                "unknown key 'base_dir'",
                "remove it: paths resolve against the manifest's folder",
            )
        )

    uses: dict[int, CatalogUse] = {}
    raw_connectors = data.get("connectors")
    if isinstance(raw_connectors, list):
        merged_connectors: list[Any] = []
        for i, raw in enumerate(raw_connectors):
            if isinstance(raw, dict) and raw.get("catalog") is not None:
                line = lines.get(("connectors", i, "catalog"))
                found = catalog_entry(raw["catalog"], catalog_dir, file, line, i, connector_keys=_CONNECTOR_KEYS)
                if isinstance(found, list):
                    issues.extend(found)
                else:
                    defaults, uses[i] = found
                    issues.extend(unfilled(uses[i], raw, file, line, i))
                    raw = merge_defaults(defaults, raw)
            merged_connectors.append(raw)
        data = {**data, "connectors": merged_connectors}
    else:
        raw_connectors = []

    manifest: Manifest | None = None
    try:
        manifest = Manifest.model_validate(
            {**data, "base_dir": base_dir or Path.cwd()}, context={_DEFER_CROSS_CHECKS: True}
        )
    except ValidationError as exc:
        issues.extend(
            located_issue(err, file, lines, uses, raw_connectors, root=Manifest)
            for err in exc.errors(include_url=False)
        )
    if manifest is not None:
        for loc, message, fix in manifest._cross_problems():
            issues.append(Issue(file, line_for(loc, lines), dotted(loc), message, fix))
    if issues or manifest is None:
        raise ManifestError(sorted(issues, key=lambda i: (i.file != file, i.file, i.line or 0)))
    manifest._origin = _Origin(file, lines)
    return manifest


def blank_manifest(path: Path | None) -> bool:
    """Whether the manifest file holds nothing but blank lines, comments and document markers: a file
    being saved (truncated, then written) reads so for a moment. Loaded, it is a valid manifest with no
    connector and no agent; a running gateway must not take it for the operator's intent."""
    if path is None:
        return False
    try:
        text = path.read_bytes()
    except OSError:
        return False
    return all(not line.strip() or line.lstrip().startswith((b"#", b"---", b"...")) for line in text.splitlines())


def load_manifest(path: str | Path | None = None, *, catalog_dir: Path = CATALOG_DIR) -> Manifest:
    """Load a manifest file (the bundled default when ``path`` is None)."""
    p = Path(path) if path is not None else DEFAULT_MANIFEST
    try:
        kind = not_a_file(p)
        if kind is not None:
            # Read as a file, a FIFO no one writes to waits for ever and a device such as /dev/zero never ends.
            fix = "give --manifest the path of a YAML file"
            raise ManifestError([Issue(str(p), None, "", f"cannot read the manifest: it is {kind}, not a file", fix)])
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        fix = (
            "check the path given by --manifest or $MCP_GATEWAY_MANIFEST"
            if path is not None
            else "the bundled default manifest is missing from this installation: reinstall mcp-gateway, "
            "or give a manifest with --manifest"
        )
        raise ManifestError([Issue(str(p), None, "", f"cannot read the manifest: {exc.strerror}", fix)]) from None
    except UnicodeDecodeError:
        raise ManifestError(
            [Issue(str(p), None, "", "the manifest is not UTF-8 text", "save it as UTF-8 (it is YAML)")]
        ) from None
    return parse_manifest(text, file=str(p), base_dir=p.resolve().parent, catalog_dir=catalog_dir)
