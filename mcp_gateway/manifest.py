"""The manifest (SPEC 3.4): its pydantic schema and a YAML loader whose errors are located.

Every problem becomes an ``Issue`` naming the file, the line, the field as a YAML path
(``connectors[0].auth.type``), what is wrong and how to fix it; all problems of a file are
reported at once, in line order. Duplicate YAML keys are errors (YAML would silently keep the
last one, and a second ``policies:`` must not erase the first).

Relative paths in a manifest resolve against the manifest's own folder (``Manifest.resolve``).
A connector may name a ``catalog:`` entry (``catalog/<name>.yaml``): the entry's connector
fields are defaults and the manifest's own fields win (``headers`` merge key by key, and so does
``auth`` when the manifest leaves its type out or repeats it), the entry's relative source paths
resolve against the catalog folder, and keys that are not connector fields (an entry may carry
other metadata) are ignored.

Policy matchers are compiled here, once, at load: an invalid or catastrophic regex in a rule's
``match`` becomes a matcher that never matches plus a ``diagnostics()`` entry that ``validate``
reports (fail safe, SPEC 6), while a broken ``when`` is an error.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .errors import Issue, ManifestError
from .model import PolicyAction, Risk
from .policy import OPERATORS, Condition, Matcher, compile_matcher

__all__ = [
    "AUTH_TYPES",
    "CATALOG_DIR",
    "CREDENTIAL_HEADERS",
    "DEFAULT_MANIFEST",
    "SOURCE_KINDS",
    "AgentConfig",
    "ApiKeyAuth",
    "AuthConfig",
    "AwsSigV4Auth",
    "BasicAuth",
    "BearerAuth",
    "ConnectorConfig",
    "CustomAuth",
    "GraphQLSource",
    "HmacAuth",
    "HttpActionConfig",
    "HttpActions",
    "HttpSource",
    "Manifest",
    "McpSource",
    "MtlsAuth",
    "NoAuth",
    "OAuth1Auth",
    "OAuth2Auth",
    "OpenAPISource",
    "PolicyRule",
    "PostmanSource",
    "SourceConfig",
    "auth_headers",
    "load_manifest",
    "parse_manifest",
]

SLUG_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
ACTION_PATH_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
CATALOG_DIR = PACKAGE_ROOT / "catalog"
DEFAULT_MANIFEST = PACKAGE_ROOT / "manifests" / "default.yaml"

_STRICT = ConfigDict(extra="forbid", frozen=True)

Loc = tuple[str | int, ...]


class _Problem(ValueError):
    """A validator's complaint that already knows its fix (kept apart so the Issue can show both)."""

    def __init__(self, problem: str, fix: str, *, key: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix
        self.key = key
        """The offending key below the validated field, when the field is a mapping."""


# -- auth -----------------------------------------------------------------------------------


class NoAuth(BaseModel):
    model_config = _STRICT
    type: Literal["none"] = "none"


class BearerAuth(BaseModel):
    model_config = _STRICT
    type: Literal["bearer"]
    header: str = "Authorization"
    prefix: str = "Bearer"


class BasicAuth(BaseModel):
    model_config = _STRICT
    type: Literal["basic"]


class ApiKeyAuth(BaseModel):
    model_config = _STRICT
    type: Literal["api_key"]
    in_: Literal["header", "query", "cookie"] = Field("header", alias="in")
    name: str = "X-API-Key"
    prefix: str = ""
    """Prepended to the key (``Token `` for RealWorld's ``Authorization: Token <jwt>``)."""


class CustomAuth(BaseModel):
    """Headers built from templates: ``{secret}`` is the whole secret, ``{secret.field}`` one field of a JSON secret."""

    model_config = _STRICT
    type: Literal["custom"]
    headers: dict[str, str]

    @field_validator("headers")
    @classmethod
    def _has_placeholder(cls, headers: dict[str, str]) -> dict[str, str]:
        if not headers:
            raise _Problem("custom auth needs at least one header template", "write e.g. 'X-Token: \"{secret}\"'")
        if not any("{secret" in v for v in headers.values()):
            raise _Problem("no header template uses {secret}", "write e.g. 'X-Token: \"{secret}\"'")
        return headers


class OAuth1Auth(BaseModel):
    """OAuth 1.0a request signing (RFC 5849) in the Authorization header.

    The secret is ``{consumer_key, consumer_secret, token, token_secret}``.
    """

    model_config = _STRICT
    type: Literal["oauth1"]
    signature_method: Literal["HMAC-SHA1", "HMAC-SHA256"] = "HMAC-SHA1"
    realm: str | None = None
    """Sent first in the header as ``realm="..."`` (RFC 5849 section 3.5.1); not part of the signature."""
    body_hash: bool = True
    """Add ``oauth_body_hash`` (base64 SHA-1 of the body) to requests whose body is not form-encoded, as oauthlib
    does (draft-eaton-oauth-bodyhash-00), so a JSON body is covered by the signature too. Set false for a
    server that refuses protocol parameters it does not know."""

    @field_validator("realm")
    @classmethod
    def _realm(cls, v: str | None) -> str | None:
        if v is not None and any(c in v for c in '"\\\r\n'):
            raise _Problem("the realm contains a quote, backslash or line break", "use plain text, e.g. 'Photos'")
        return v


_HMAC_PLACEHOLDERS = ("method", "path", "timestamp", "body")


class HmacAuth(BaseModel):
    """Request signing with a shared secret (a plain string), as webhook-style APIs do.

    The signed message is the body, or ``method``, ``path``, ``timestamp`` and ``body`` joined by
    ``separator``, or ``template`` when given: e.g. Slack's ``"v0:{timestamp}:{body}"``, Coinbase's
    ``"{timestamp}{method}{path}{body}"``. ``{path}`` is the path with its query string, as sent.
    The header gets ``prefix`` + the digest in ``encoding`` (GitHub: ``prefix: "sha256="``).
    """

    model_config = _STRICT
    type: Literal["hmac"]
    algorithm: Literal["sha1", "sha256", "sha384", "sha512"] = "sha256"
    header: str = "X-Signature"
    encoding: Literal["hex", "base64"] = "hex"
    signed: Literal["body", "method_path_timestamp_body"] = "body"
    separator: str = "\n"
    template: str | None = None
    """Overrides ``signed``/``separator``: text with ``{method}``, ``{path}``, ``{timestamp}``, ``{body}``."""
    timestamp_header: str | None = None
    """Header that carries the signing time; needed whenever the message includes it."""
    timestamp_format: Literal["unix", "unix_ms", "iso8601"] = "unix"
    """Seconds or milliseconds since the epoch, or ISO 8601 UTC with milliseconds (``2026-01-01T00:00:00.000Z``)."""
    prefix: str = ""
    key_encoding: Literal["utf8", "hex", "base64"] = "utf8"
    """How the stored secret becomes the HMAC key: its UTF-8 bytes, or decoded from hex or base64."""

    @field_validator("template")
    @classmethod
    def _template(cls, v: str | None) -> str | None:
        if v is None:
            return v
        names = re.findall(r"\{([^{}]*)\}", v)
        unknown = [n for n in names if n not in _HMAC_PLACEHOLDERS]
        if unknown:
            raise _Problem(
                f"unknown placeholder {{{unknown[0]}}} in the signing template",
                "use only {method}, {path}, {timestamp} and {body}",
            )
        if not names:
            raise _Problem("the signing template uses no placeholder", "sign at least the body, e.g. '{body}'")
        return v

    @model_validator(mode="after")
    def _timestamp_is_sent(self) -> HmacAuth:
        if self.signs_timestamp and not self.timestamp_header:
            raise _Problem(
                "the signed message includes the timestamp, but no header sends it, so the upstream cannot check it",
                "add e.g. 'timestamp_header: X-Timestamp'",
                key="timestamp_header",
            )
        return self

    @property
    def signs_timestamp(self) -> bool:
        if self.template is not None:
            return "{timestamp}" in self.template
        return self.signed == "method_path_timestamp_body"


class AwsSigV4Auth(BaseModel):
    """AWS Signature Version 4 in the Authorization header.

    The secret is ``{access_key_id, secret_access_key, session_token?}``; ``service`` and ``region`` form
    the credential scope (``s3`` gets S3's rules: an unnormalized path and ``X-Amz-Content-SHA256``).
    """

    model_config = _STRICT
    type: Literal["aws_sigv4"]
    service: str
    """The signing name of the service: ``execute-api``, ``s3``, ``dynamodb``, ``es`` ..."""
    region: str
    unsigned_payload: bool = False
    """Sign ``UNSIGNED-PAYLOAD`` instead of the body's SHA-256 (over https only: over plain http the body is
    always signed, the rule botocore states for insecure connections)."""

    @field_validator("service", "region")
    @classmethod
    def _scope_part(cls, v: str) -> str:
        # Both go into the credential scope ``date/region/service/aws4_request``.
        if not re.fullmatch(r"[a-z0-9-]+", v):
            raise _Problem(
                f"{v!r} is not an AWS service or region name",
                "use lower-case letters, digits and '-', e.g. 'execute-api' or 'eu-west-1'",
            )
        return v


class MtlsAuth(BaseModel):
    """A client certificate presented in the TLS handshake; the secret is ``{cert_pem, key_pem}``."""

    model_config = _STRICT
    type: Literal["mtls"]
    ca_file: str | None = None
    """PEM file of the CA(s) that sign the upstream's server certificate, for a private PKI (relative to the
    manifest's folder). Without it the system's trust store is used."""


class OAuth2Auth(BaseModel):
    """OAuth 2.0 (RFC 6749): the authorization code grant with PKCE (a human signs in through a connect
    link), or the client credentials grant. The secret is the client's ``{client_id, client_secret}``;
    tokens are obtained, stored and refreshed by the gateway (``auth/oauth2.py``)."""

    model_config = _STRICT
    type: Literal["oauth2"]
    flow: Literal["authorization_code", "client_credentials"] = "authorization_code"
    authorize_url: str | None = None
    """The provider's authorization endpoint; needed for ``authorization_code``."""
    token_url: str
    scopes: list[str] = Field(default_factory=list)
    client_auth: Literal["basic", "post"] = "basic"
    """How the client authenticates at the token endpoint (RFC 6749 section 2.3.1): HTTP Basic
    (``client_secret_basic``) or ``client_id``/``client_secret`` in the form (``client_secret_post``)."""

    @field_validator("authorize_url", "token_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^/?#\s]+", v):
            raise _Problem(
                f"{v!r} is not an http(s) URL", "write the provider's full URL, e.g. 'https://auth.example.com/token'"
            )
        return v

    @model_validator(mode="after")
    def _authorize_url_for_code_flow(self) -> OAuth2Auth:
        if self.flow == "authorization_code" and not self.authorize_url:
            raise _Problem(
                "the authorization_code flow needs the provider's authorization endpoint",
                "add e.g. 'authorize_url: https://auth.example.com/authorize', or use 'flow: client_credentials'",
                key="authorize_url",
            )
        return self


AuthConfig = Annotated[
    NoAuth
    | BearerAuth
    | BasicAuth
    | ApiKeyAuth
    | CustomAuth
    | OAuth1Auth
    | HmacAuth
    | AwsSigV4Auth
    | MtlsAuth
    | OAuth2Auth,
    Field(discriminator="type"),
]
AUTH_TYPES = ("bearer", "basic", "custom", "api_key", "oauth1", "hmac", "aws_sigv4", "mtls", "oauth2", "none")

# Headers that carry credentials: static headers may never set them (SPEC 5).
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-auth-token", "x-amz-security-token"}
)


def auth_headers(auth: BaseModel) -> frozenset[str]:
    """The (lower-cased) header names an auth kind writes on the outbound request."""
    names: set[str] = set()
    if isinstance(auth, BearerAuth | HmacAuth):
        names.add(auth.header)
        if isinstance(auth, HmacAuth) and auth.timestamp_header:
            names.add(auth.timestamp_header)
    elif isinstance(auth, ApiKeyAuth) and auth.in_ == "header":
        names.add(auth.name)
    elif isinstance(auth, CustomAuth):
        names.update(auth.headers)
    elif isinstance(auth, BasicAuth | OAuth1Auth | OAuth2Auth):
        names.add("Authorization")
    elif isinstance(auth, AwsSigV4Auth):
        names.update({"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"})
    return frozenset(n.lower() for n in names)


# -- sources --------------------------------------------------------------------------------


class OpenAPISource(BaseModel):
    model_config = _STRICT
    openapi: str
    """A file path (relative to the manifest) or an http(s) URL; ``.gz`` files are decompressed."""


class HttpActionConfig(BaseModel):
    model_config = _STRICT
    path: str
    method: str = "GET"
    url: str
    summary: str = ""
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    risk: Risk | None = None
    params: dict[str, Literal["path", "query", "header", "cookie", "body"]] = Field(default_factory=dict)
    """Optional placement per argument; unlisted args go to the path if templated, else body or query."""

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not ACTION_PATH_RE.match(v):
            raise _Problem(
                f"action path {v!r} is not dot-separated words",
                "use letters, digits, '_' and '-' between dots, e.g. 'deploys.create'",
            )
        return v

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        upper = v.upper()
        if upper not in {"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"}:
            raise _Problem(f"unknown HTTP method {v!r}", "use GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS")
        return upper


class HttpActions(BaseModel):
    model_config = _STRICT
    actions: list[HttpActionConfig]


class HttpSource(BaseModel):
    model_config = _STRICT
    http: HttpActions


class PostmanSource(BaseModel):
    model_config = _STRICT
    postman: str
    """A Postman v2.1 collection: a file path (relative to the manifest) or an http(s) URL."""


class GraphQLSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    schema_: str | None = Field(None, alias="schema")
    """An SDL file or an introspection JSON file (relative to the manifest)."""
    introspect: bool = False
    """Introspect the live endpoint (the connector's base_url) at sync."""

    @model_validator(mode="after")
    def _one_way(self) -> GraphQLSpec:
        if (self.schema_ is None) == (not self.introspect):
            raise _Problem(
                "a graphql source needs exactly one of 'schema' or 'introspect: true'",
                "write 'graphql: {schema: schema.graphql}' or 'graphql: {introspect: true}'",
            )
        return self


class GraphQLSource(BaseModel):
    model_config = _STRICT
    graphql: GraphQLSpec


class McpSpec(BaseModel):
    model_config = _STRICT
    command: list[str] | None = None
    """A stdio server: the command and its arguments."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment for a stdio server (beside a minimal inherited one: PATH, HOME, ...). A value may use
    ``{secret}`` (or ``{secret.<field>}`` for a JSON secret): the connector's stored credential, filled in
    server-side when the child is spawned, e.g. ``GITHUB_TOKEN: "{secret}"`` with ``auth: {type: bearer}``."""
    cwd: str | None = None
    """A stdio server's working directory (relative to the manifest's folder)."""
    url: str | None = None
    """A remote server's URL (streamable HTTP, or legacy SSE with ``transport: sse``)."""
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    headers: dict[str, str] = Field(default_factory=dict)
    """Static, non-secret headers for a remote server; the credential goes in by the connector's ``auth:``."""

    @field_validator("headers")
    @classmethod
    def _no_credential_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name in headers:
            if name.lower() in CREDENTIAL_HEADERS:
                raise _Problem(
                    f"static header {name!r} would carry a credential",
                    "remove it: declare the credential under the connector's 'auth:' and store it with "
                    "'mcp-gateway secret set'",
                    key=name,
                )
        return headers

    @property
    def uses_secret(self) -> bool:
        """Whether an ``env`` value takes the connector's credential."""
        return any("{secret" in value for value in self.env.values())

    @model_validator(mode="after")
    def _one_way(self) -> McpSpec:
        if (self.command is None) == (self.url is None):
            raise _Problem(
                "an mcp source needs exactly one of 'command' or 'url'",
                "write 'mcp: {command: [mcp-server-time]}' or 'mcp: {url: http://127.0.0.1:3001/mcp}'",
            )
        if self.command is not None and not self.command:
            raise _Problem("'command' is empty", "give the program and its arguments, e.g. [mcp-server-time]")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise _Problem(f"{self.url!r} is not an http(s) URL", "write e.g. 'url: http://127.0.0.1:3001/mcp'")
        if self.url is not None and (self.env or self.cwd):
            raise _Problem(
                "'env' and 'cwd' apply to a stdio server ('command'), not to a 'url'",
                "remove them; a remote server takes 'headers' and the connector's 'auth:'",
            )
        if self.command is not None and self.headers:
            raise _Problem(
                "'headers' apply to a remote server ('url'), not to a stdio 'command'", "pass values through 'env'"
            )
        return self


class McpSource(BaseModel):
    model_config = _STRICT
    mcp: McpSpec


SOURCE_KINDS = ("openapi", "http", "postman", "graphql", "mcp")
_SOURCE_CLASSES: dict[str, type[BaseModel]] = {
    "openapi": OpenAPISource,
    "http": HttpSource,
    "postman": PostmanSource,
    "graphql": GraphQLSource,
    "mcp": McpSource,
}


def _source_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        kinds = [k for k in SOURCE_KINDS if k in value]
        return kinds[0] if len(kinds) == 1 else None
    for kind, cls in _SOURCE_CLASSES.items():
        if isinstance(value, cls):
            return kind
    return None


# Dispatch on the one key a source has, so a mistake inside `openapi:` is reported once, for
# that kind, instead of once per kind it failed to be.
SourceConfig = Annotated[
    Annotated[OpenAPISource, Tag("openapi")]
    | Annotated[HttpSource, Tag("http")]
    | Annotated[PostmanSource, Tag("postman")]
    | Annotated[GraphQLSource, Tag("graphql")]
    | Annotated[McpSource, Tag("mcp")],
    Discriminator(
        _source_kind,
        custom_error_type="source_kind",
        custom_error_message="a source is exactly one of: " + ", ".join(SOURCE_KINDS),
    ),
]


# -- policy ---------------------------------------------------------------------------------


class PolicyRule(BaseModel):
    """One ``policies`` entry; its ``matcher`` is compiled once, when the rule is validated."""

    model_config = _STRICT
    match: str = Field(min_length=1)
    action: PolicyAction
    when: dict[str, Condition] | None = None

    _matcher: Matcher = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._matcher = compile_matcher(self.match)

    @property
    def matcher(self) -> Matcher:
        return self._matcher


# -- connectors, agents, manifest ----------------------------------------------------------


class ConnectorConfig(BaseModel):
    model_config = _STRICT
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
    trust_annotations: bool = True
    timeout: float = Field(30.0, gt=0, le=600)
    policies: list[PolicyRule] = Field(default_factory=list)
    risk: dict[str, Risk] = Field(default_factory=dict)
    """Per-action risk overrides, by relative action path."""

    @field_validator("slug")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not SLUG_RE.match(v):
            raise _Problem(
                f"{v!r} is not a valid slug",
                "use lowercase letters, digits, '_' or '-', starting with a letter, at most 63 characters, "
                "e.g. 'github'",
            )
        return v

    @field_validator("headers")
    @classmethod
    def _no_credential_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name in headers:
            if name.lower() in CREDENTIAL_HEADERS:
                raise _Problem(
                    f"static header {name!r} would carry a credential",
                    "remove it: declare the credential under 'auth:' and store it with 'mcp-gateway secret set'",
                    key=name,
                )
        return headers

    @property
    def display_name(self) -> str:
        return self.name or self.slug


class AgentConfig(BaseModel):
    model_config = _STRICT
    name: str = Field(min_length=1)
    connectors: list[str] = Field(default_factory=list)


_DEFER_CROSS_CHECKS = "defer_cross_checks"


@dataclass(frozen=True)
class _Origin:
    """Where a parsed manifest came from, so later diagnostics can be located too."""

    file: str
    lines: dict[Loc, int] = field(default_factory=dict)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    project: str = Field("default", min_length=1)
    default_mode: Literal["risk", "allow_all"] = "risk"
    public_url: str = "http://127.0.0.1:8765"
    policies: list[PolicyRule] = Field(default_factory=list)
    connectors: list[ConnectorConfig] = Field(default_factory=list)
    agents: list[AgentConfig] | None = None
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)
    """The folder relative source paths resolve against."""

    _origin: _Origin | None = PrivateAttr(default=None)

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise _Problem(f"{v!r} is not an http(s) URL", "write the base humans open, e.g. 'http://127.0.0.1:8765'")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _cross_checks(self, info: ValidationInfo) -> Manifest:
        # parse_manifest reports these itself, each at its own line; direct construction raises.
        if info.context and info.context.get(_DEFER_CROSS_CHECKS):
            return self
        problems = self._cross_problems()
        if problems:
            raise ValueError("; ".join(f"{_dotted(loc)}: {message}" for loc, message, _ in problems))
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
            if agent.name in agents:
                why = f"duplicate agent {agent.name!r}: agents[{agents[agent.name]}] has it too"
                out.append((("agents", j, "name"), why, "merge the two entries' connectors into one"))
            agents.setdefault(agent.name, j)
            for k, slug in enumerate(agent.connectors):
                if slug not in first:
                    why = f"agent {agent.name!r} is granted unknown connector {slug!r}"
                    out.append((("agents", j, "connectors", k), why, _choose(slug, list(first), "connector slugs")))
        return out

    def connector(self, slug: str) -> ConnectorConfig | None:
        return next((c for c in self.connectors if c.slug == slug), None)

    def resolve(self, ref: str) -> str:
        """A source reference as a URL or an absolute path (relative ones against the manifest's folder)."""
        if ref.startswith(("http://", "https://")):
            return ref
        path = Path(ref).expanduser()
        return str(path if path.is_absolute() else (self.base_dir / path))

    def diagnostic_issues(self) -> list[Issue]:
        """Non-fatal problems ``validate`` reports (and exits non-zero on): rules that can never match."""
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
                            _line_for(loc, origin.lines),
                            _dotted(loc),
                            f"{rule.match!r} never matches: {rule.matcher.error}",
                            "fix the pattern, or use a glob such as 'issues.*'; until then this rule is ignored",
                        )
                    )
        return out

    def diagnostics(self) -> list[str]:
        """``diagnostic_issues`` as text, one ``file:line: field: problem (fix: …)`` each."""
        return [str(issue) for issue in self.diagnostic_issues()]


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
    return out


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


# -- reading YAML with lines ----------------------------------------------------------------


def _read_yaml(text: str, file: str) -> tuple[Any, dict[Loc, int], list[Issue]]:
    """Parse one YAML document: its data, the line of every key and item, and duplicate keys."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        duplicates = _duplicate_keys(node, file) if node is not None else []
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise ManifestError([_yaml_issue(exc, file)]) from None
    finally:
        loader.dispose()
    lines: dict[Loc, int] = {}
    if node is not None:
        _collect_lines(node, (), lines, set())
    return data, lines, duplicates


_YAML_HINTS = (
    ("'\\t'", "indent with spaces: YAML does not allow tabs"),
    ("block mapping start", "indent this key like the keys beside it"),
    ("<block end>", "indent this line like the lines beside it"),
    ("mapping values are not allowed", "quote a value that contains ': '"),
    ("another document", "remove the '---' line: a manifest is one document"),
    ("found undefined alias", "define the '&anchor' before using '*anchor'"),
    ("found unexpected end of stream", "close the quote or bracket opened earlier"),
)


def _yaml_issue(exc: yaml.YAMLError, file: str) -> Issue:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    context, problem = getattr(exc, "context", None), getattr(exc, "problem", None)
    text = "; ".join(p for p in (context, problem) if p) or str(exc)
    where = f" (column {mark.column + 1})" if mark is not None else ""
    fix = next((hint for needle, hint in _YAML_HINTS if needle in text), "check the indentation and quoting here")
    return Issue(file, mark.line + 1 if mark is not None else None, "", f"not valid YAML{where}: {text}", fix)


def _collect_lines(node: yaml.Node, path: Loc, lines: dict[Loc, int], active: set[int]) -> None:
    if id(node) in active:  # an alias that contains itself
        return
    active.add(id(node))
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                lines[(*path, key.value)] = key.start_mark.line + 1
                _collect_lines(value, (*path, key.value), lines, active)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _collect_lines(item, (*path, i), lines, active)
    active.discard(id(node))


def _duplicate_keys(root: yaml.Node, file: str) -> list[Issue]:
    issues: list[Issue] = []
    stack: list[tuple[yaml.Node, Loc]] = [(root, ())]
    visited: set[int] = set()
    while stack:
        node, path = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                    continue
                line = key.start_mark.line + 1
                if key.value in first:
                    issues.append(
                        Issue(
                            file,
                            line,
                            _dotted((*path, key.value)),
                            f"key {key.value!r} appears twice (first on line {first[key.value]})",
                            "merge the two into one; YAML would silently keep only the last",
                        )
                    )
                first.setdefault(key.value, line)
                stack.append((value, (*path, key.value)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*path, i)) for i, item in enumerate(node.value))
    return issues


def _line_for(loc: Loc, lines: dict[Loc, int]) -> int | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def _dotted(loc: Loc) -> str:
    """A location as a YAML path: ``connectors[0].auth.type``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


def _choose(given: str, known: list[str], what: str) -> str:
    if not known:
        return f"there are no {what} to choose from"
    close = difflib.get_close_matches(given, known, n=1, cutoff=0.6)
    listed = ", ".join(known)
    return f"did you mean {close[0]!r}? The {what} are: {listed}" if close else f"use one of the {what}: {listed}"


# -- catalog --------------------------------------------------------------------------------


@dataclass
class _CatalogUse:
    """The catalog entry one connector used, and which of its keys the entry supplied."""

    name: str
    file: str
    lines: dict[Loc, int]
    keys: set[str]


_CONNECTOR_KEYS = set(ConnectorConfig.model_fields) - {"slug", "catalog"}
_PATH_KEYS: dict[str, str | None] = {"openapi": None, "postman": None, "graphql": "schema"}
"""Where a source kind keeps a file path: the kind's value itself (None), or this key below it."""


def _catalog_entry(
    name: Any, catalog_dir: Path, file: str, line: int | None, index: int
) -> tuple[dict[str, Any], _CatalogUse] | list[Issue]:
    where = _dotted(("connectors", index, "catalog"))
    known = sorted(p.stem for p in catalog_dir.glob("*.yaml"))
    if not isinstance(name, str) or not SLUG_RE.match(name):
        return [Issue(file, line, where, f"{name!r} is not a catalog entry name", _choose(str(name), known, "entries"))]
    entry_path = catalog_dir / f"{name}.yaml"
    if not entry_path.is_file():
        return [
            Issue(file, line, where, f"no catalog entry {name!r} in {catalog_dir}", _choose(name, known, "entries"))
        ]
    try:
        entry, lines, duplicates = _read_yaml(entry_path.read_text(encoding="utf-8"), str(entry_path))
    except ManifestError as exc:
        return exc.issues
    except (OSError, UnicodeDecodeError) as exc:
        return [Issue(str(entry_path), None, "", f"cannot read the catalog entry: {exc}", "check the file")]
    if duplicates:
        return duplicates
    if not isinstance(entry, dict):
        return [Issue(str(entry_path), 1, "", "a catalog entry is a YAML mapping", "start with 'name: …'")]
    defaults = {k: v for k, v in entry.items() if k in _CONNECTOR_KEYS}
    source = defaults.get("source")
    if isinstance(source, dict):
        defaults["source"] = _resolve_source_paths(source, catalog_dir)
    return defaults, _CatalogUse(name, str(entry_path), lines, set(defaults))


def _resolve_source_paths(source: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Make a catalog entry's relative source paths absolute, against the catalog folder."""
    out = dict(source)
    for kind, below in _PATH_KEYS.items():
        value = out.get(kind)
        if below is None and isinstance(value, str):
            out[kind] = _absolute(value, folder)
        elif below is not None and isinstance(value, dict) and isinstance(value.get(below), str):
            out[kind] = {**value, below: _absolute(value[below], folder)}
    return out


def _absolute(ref: str, folder: Path) -> str:
    if ref.startswith(("http://", "https://")) or Path(ref).expanduser().is_absolute():
        return ref
    return str((folder / ref).resolve())


def _merge(defaults: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    merged = {**defaults, **raw}
    base_auth, own_auth = defaults.get("auth"), raw.get("auth")
    # Refining the catalog's auth (other scopes, another header) must not mean restating it all.
    if (
        isinstance(base_auth, dict)
        and isinstance(own_auth, dict)
        and own_auth.get("type", base_auth.get("type")) == base_auth.get("type")
    ):
        merged["auth"] = {**base_auth, **own_auth}
    if isinstance(defaults.get("headers"), dict) and isinstance(raw.get("headers"), dict):
        merged["headers"] = {**defaults["headers"], **raw["headers"]}
    return merged


# -- turning pydantic errors into issues ----------------------------------------------------


def _unwrap(tp: Any) -> Any:
    """Strip ``Annotated`` and ``| None`` until something else shows."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
            continue
        if get_origin(tp) in (typing.Union, types.UnionType):
            arms = [a for a in get_args(tp) if a is not type(None)]
            if len(arms) == 1:
                tp = arms[0]
                continue
        return tp


def _union_arms(tp: Any) -> dict[str, Any] | None:
    """The labels pydantic puts into an error location for each arm of a union, if ``tp`` is one."""
    tp = _unwrap(tp)
    if get_origin(tp) not in (typing.Union, types.UnionType):
        return None
    arms: dict[str, Any] = {}
    for arm in get_args(tp):
        if arm is type(None):
            continue
        if get_origin(arm) is Annotated:
            for meta in get_args(arm)[1:]:
                if isinstance(meta, Tag):
                    arms[meta.tag] = get_args(arm)[0]
        inner = _unwrap(arm)
        if isinstance(inner, type):
            arms[inner.__name__] = inner
            if issubclass(inner, BaseModel) and "type" in inner.model_fields:
                for literal in get_args(inner.model_fields["type"].annotation):
                    arms[str(literal)] = inner
    return arms


def _child(tp: Any, part: str | int) -> Any:
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
        for name, info in tp.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    origin = get_origin(tp)
    if origin in (list, tuple) and isinstance(part, int):
        return get_args(tp)[0]
    if origin is dict and isinstance(part, str):
        return get_args(tp)[1]
    return None


def _walk_loc(raw: Loc) -> tuple[Loc, type[BaseModel] | None]:
    """Drop pydantic's union-arm labels from ``raw``; also the model the location ends in."""
    clean: list[str | int] = []
    tp: Any = Manifest
    for part in raw:
        if isinstance(part, str) and part.startswith("function-"):
            continue
        arms = _union_arms(tp)
        if arms is not None and isinstance(part, str) and part in arms:
            tp = arms[part]
            continue
        clean.append(part)
        tp = _child(tp, part)
    model = _unwrap(tp)
    return tuple(clean), model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _keys_of(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items() if not info.exclude]


def _describe(value: Any, *, reveal: bool) -> str:
    if value is None:
        return "empty (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if not reveal:
        return _KIND_NAMES.get(type(value).__name__, "a value")
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_KIND_NAMES = {"str": "a string", "int": "a number", "float": "a number", "bool": "a boolean"}
_MAPPING = ("a mapping", "write 'key: value' lines (or '{key: value}') here")
_EXPECTED: dict[str, tuple[str, str]] = {
    "string_type": ("a string", "write text here, quoted if it looks like a number or a boolean"),
    "list_type": ("a list", "write a list: '[a, b]', or one '- item' line each"),
    "dict_type": _MAPPING,
    "model_type": _MAPPING,
    "model_attributes_type": _MAPPING,
    "bool_type": ("true or false", "write true or false"),
    "bool_parsing": ("true or false", "write true or false"),
    "int_type": ("a whole number", "write a whole number"),
    "int_parsing": ("a whole number", "write a whole number"),
    "float_type": ("a number", "write a number"),
    "float_parsing": ("a number", "write a number"),
}
_FIX_BY_FIELD = {
    "gt": "write a plain number, e.g. 'gt: 10000'",
    "gte": "write a plain number, e.g. 'gte: 10000'",
    "lt": "write a plain number, e.g. 'lt: 10000'",
    "lte": "write a plain number, e.g. 'lte: 10000'",
    "matches": "simplify the regex as described",
    "in": "write a list, e.g. 'in: [main, master]'",
    "not_in": "write a list, e.g. 'not_in: [main, master]'",
}


def _issue(err: Any, file: str, lines: dict[Loc, int], uses: dict[int, _CatalogUse], raw: list[Any]) -> Issue:
    loc, message, fix = _explain(err)
    use = uses.get(loc[1]) if len(loc) > 2 and loc[0] == "connectors" and isinstance(loc[1], int) else None
    own = raw[loc[1]] if use is not None and isinstance(raw[loc[1]], dict) else {}
    if use is not None and loc[2] in use.keys and loc[2] not in own:
        # The value came from the catalog entry: point there, and say which connector used it.
        inner = loc[2:]
        where = f"catalog entry {use.name!r}, used by {_dotted(loc[:2])}"
        return Issue(use.file, _line_for(inner, use.lines), _dotted(inner), f"{message} ({where})", fix)
    return Issue(file, _line_for(loc, lines), _dotted(loc), message, fix)


def _explain(err: Any) -> tuple[Loc, str, str]:
    """One pydantic error as (YAML location, problem, fix), in the manifest's own words."""
    raw_loc = tuple(err["loc"])
    loc, model = _walk_loc(raw_loc)
    kind: str = err["type"]
    ctx: dict[str, Any] = err.get("ctx") or {}
    value = err.get("input")
    # Header values may hold a token someone pasted by mistake: describe them, never echo them.
    got = _describe(value, reveal="headers" not in loc)
    field_fix = _FIX_BY_FIELD.get(str(loc[-1]) if loc else "", "")
    fallback = "change the value as described"

    if kind == "extra_forbidden":
        message, fix = _unknown_key(str(loc[-1]), loc, _walk_loc(raw_loc[:-1])[1])
        return loc, message, fix
    if kind == "missing":
        return loc, f"missing required key {loc[-1]!r}", f"add '{loc[-1]}: …'"
    if kind in ("union_tag_invalid", "union_tag_not_found") and loc[-1:] == ("auth",):
        valid = ", ".join(AUTH_TYPES)
        if kind == "union_tag_not_found":
            return loc, "an auth block needs a 'type'", f"add 'type:' with one of: {valid}"
        return (*loc, "type"), f"unknown auth type {ctx.get('tag')!r}", f"use one of: {valid}"
    if kind == "source_kind":
        found = ", ".join(map(str, value)) if isinstance(value, dict) else got
        message = f"a source is exactly one of: {', '.join(SOURCE_KINDS)} (found: {found or 'nothing'})"
        return loc, message, "write e.g. 'source: { openapi: specs/api.json }'"
    if kind == "literal_error" and ctx.get("expected"):
        return loc, f"must be {ctx['expected']}, not {got}", f"write {ctx['expected']}"
    if kind == "value_error":
        error = ctx.get("error")
        if isinstance(error, _Problem):
            return (*loc, error.key) if error.key is not None else loc, error.problem, error.fix
        message = str(error) if error is not None else str(err["msg"]).removeprefix("Value error, ")
        if model is Condition:
            return loc, message, "write at least one operator, e.g. 'amount: {gt: 10000}'"
        return loc, message, field_fix or fallback
    if kind in _EXPECTED:
        expected, type_fix = _EXPECTED[kind]
        return loc, f"should be {expected}, not {got}", field_fix or type_fix
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return loc, "must not be empty", "write a value, or remove the key"
    return loc, f"{str(err['msg']).replace('Input should be', 'should be')}, not {got}", field_fix or fallback


def _unknown_key(key: str, loc: Loc, parent: type[BaseModel] | None) -> tuple[str, str]:
    if parent is Condition:
        return f"unknown operator {key!r}", _choose(key, list(OPERATORS), "operators")
    if parent in _SOURCE_CLASSES.values() and loc[-2:-1] == ("source",):
        kinds = ", ".join(SOURCE_KINDS)
        return f"unknown key {key!r} in a source", f"a source has exactly one key, its kind ({kinds}); remove {key!r}"
    keys = _keys_of(parent) if parent else []
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    if close:
        return f"unknown key {key!r}", f"did you mean {close[0]!r}? Otherwise remove it"
    return f"unknown key {key!r}", "remove it" + (f"; the keys here are: {', '.join(keys)}" if keys else "")


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
    data, lines, issues = _read_yaml(text, file)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ManifestError(
            [
                Issue(
                    file,
                    1,
                    "",
                    f"a manifest is a YAML mapping, not {_describe(data, reveal=False)}",
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

    uses: dict[int, _CatalogUse] = {}
    raw_connectors = data.get("connectors")
    if isinstance(raw_connectors, list):
        merged_connectors: list[Any] = []
        for i, raw in enumerate(raw_connectors):
            if isinstance(raw, dict) and raw.get("catalog") is not None:
                found = _catalog_entry(raw["catalog"], catalog_dir, file, lines.get(("connectors", i, "catalog")), i)
                if isinstance(found, list):
                    issues.extend(found)
                else:
                    defaults, uses[i] = found
                    raw = _merge(defaults, raw)
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
        issues.extend(_issue(err, file, lines, uses, raw_connectors) for err in exc.errors(include_url=False))
    if manifest is not None:
        for loc, message, fix in manifest._cross_problems():
            issues.append(Issue(file, _line_for(loc, lines), _dotted(loc), message, fix))
    if issues or manifest is None:
        raise ManifestError(sorted(issues, key=lambda i: (i.file != file, i.file, i.line or 0)))
    manifest._origin = _Origin(file, lines)
    return manifest


def load_manifest(path: str | Path | None = None, *, catalog_dir: Path = CATALOG_DIR) -> Manifest:
    """Load a manifest file (the bundled default when ``path`` is None)."""
    p = Path(path) if path is not None else DEFAULT_MANIFEST
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(
            [Issue(str(p), None, "", f"cannot read the manifest: {exc.strerror}", "check the path given to --manifest")]
        ) from None
    except UnicodeDecodeError:
        raise ManifestError(
            [Issue(str(p), None, "", "the manifest is not UTF-8 text", "save it as UTF-8 (it is YAML)")]
        ) from None
    return parse_manifest(text, file=str(p), base_dir=p.resolve().parent, catalog_dir=catalog_dir)
