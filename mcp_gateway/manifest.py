"""The manifest (SPEC 3.4): its pydantic schema and a YAML loader whose errors are located.

Every validation error names the file, the line, the field and a fix. Relative paths in a
manifest resolve against the manifest's own folder (and, for ``catalog:`` defaults, against the
catalog folder). Policy matchers are compiled here, once, at load: an invalid regex becomes a
matcher that never matches plus a diagnostic that ``validate`` reports (fail safe, SPEC 6).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import Issue, ManifestError
from .model import Risk
from .policy import Condition, Matcher, compile_matcher

__all__ = [
    "AgentConfig",
    "ApiKeyAuth",
    "AuthConfig",
    "BasicAuth",
    "BearerAuth",
    "ConnectorConfig",
    "CustomAuth",
    "HttpActionConfig",
    "Manifest",
    "NoAuth",
    "PolicyRule",
    "load_manifest",
    "parse_manifest",
]

SLUG_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
CATALOG_DIR = PACKAGE_ROOT / "catalog"
DEFAULT_MANIFEST = PACKAGE_ROOT / "manifests" / "default.yaml"

_STRICT = ConfigDict(extra="forbid", frozen=True)


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
            raise ValueError("custom auth needs at least one header template")
        if not any("{secret" in v for v in headers.values()):
            raise ValueError("no header template uses {secret}; write e.g. 'X-Token: \"{secret}\"'")
        return headers


class OAuth1Auth(BaseModel):
    model_config = _STRICT
    type: Literal["oauth1"]
    signature_method: Literal["HMAC-SHA1", "HMAC-SHA256"] = "HMAC-SHA1"


class HmacAuth(BaseModel):
    model_config = _STRICT
    type: Literal["hmac"]
    algorithm: Literal["sha256", "sha512"] = "sha256"
    header: str = "X-Signature"
    encoding: Literal["hex", "base64"] = "hex"
    signed: Literal["body", "method_path_timestamp_body"] = "body"
    separator: str = "\n"
    timestamp_header: str | None = None
    prefix: str = ""


class AwsSigV4Auth(BaseModel):
    model_config = _STRICT
    type: Literal["aws_sigv4"]
    service: str
    region: str
    unsigned_payload: bool = False


class MtlsAuth(BaseModel):
    model_config = _STRICT
    type: Literal["mtls"]


class OAuth2Auth(BaseModel):
    model_config = _STRICT
    type: Literal["oauth2"]
    flow: Literal["authorization_code", "client_credentials"] = "authorization_code"
    authorize_url: str | None = None
    token_url: str
    scopes: list[str] = Field(default_factory=list)


AuthConfig = Annotated[
    NoAuth | BearerAuth | BasicAuth | ApiKeyAuth | CustomAuth | OAuth1Auth | HmacAuth | AwsSigV4Auth | MtlsAuth | OAuth2Auth,
    Field(discriminator="type"),
]

# Headers that carry credentials: static headers may never set them (SPEC 5).
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-auth-token", "x-amz-security-token"}
)


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

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        v = v.upper()
        if v not in {"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"}:
            raise ValueError(f"unknown HTTP method {v!r}; use GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS")
        return v


class HttpActions(BaseModel):
    model_config = _STRICT
    actions: list[HttpActionConfig]


class HttpSource(BaseModel):
    model_config = _STRICT
    http: HttpActions


class UnsupportedSource(BaseModel):
    """Source kinds named by the SPEC that this build does not normalize yet (postman, graphql, mcp)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    postman: Any = None
    graphql: Any = None
    mcp: Any = None

    @model_validator(mode="after")
    def _one_kind(self) -> UnsupportedSource:
        kinds = [k for k in ("postman", "graphql", "mcp") if getattr(self, k) is not None]
        extra = list((self.model_extra or {}).keys())
        if extra or len(kinds) != 1:
            raise ValueError("a source is exactly one of: openapi, http, postman, graphql, mcp")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in ("postman", "graphql", "mcp") if getattr(self, k) is not None)


SourceConfig = OpenAPISource | HttpSource | UnsupportedSource


# -- policy ---------------------------------------------------------------------------------


class PolicyRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    match: str
    action: Literal["always_run", "require_approval", "block"]
    when: dict[str, Condition] | None = None
    matcher: Matcher = Field(default=None, exclude=True)  # type: ignore[assignment]

    @model_validator(mode="after")
    def _compile(self) -> PolicyRule:
        object.__setattr__(self, "matcher", compile_matcher(self.match))
        return self


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
            raise ValueError("a slug is lowercase letters, digits, '_' or '-', starting with a letter (e.g. 'github')")
        return v

    @field_validator("headers")
    @classmethod
    def _no_credential_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name in headers:
            if name.lower() in CREDENTIAL_HEADERS:
                raise ValueError(f"static header {name!r} would carry a credential; declare it under 'auth:' instead")
        return headers

    @property
    def display_name(self) -> str:
        return self.name or self.slug


class AgentConfig(BaseModel):
    model_config = _STRICT
    name: str
    connectors: list[str] = Field(default_factory=list)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    project: str = "default"
    default_mode: Literal["risk", "allow_all"] = "risk"
    public_url: str = "http://127.0.0.1:8765"
    policies: list[PolicyRule] = Field(default_factory=list)
    connectors: list[ConnectorConfig] = Field(default_factory=list)
    agents: list[AgentConfig] | None = None
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)
    """The folder relative source paths resolve against."""

    @model_validator(mode="after")
    def _cross_checks(self) -> Manifest:
        seen: set[str] = set()
        for c in self.connectors:
            if c.slug in seen:
                raise ValueError(f"duplicate connector slug {c.slug!r}; every connector needs its own slug")
            seen.add(c.slug)
        for a in self.agents or []:
            for slug in a.connectors:
                if slug not in seen:
                    raise ValueError(f"agent {a.name!r} is granted unknown connector {slug!r}")
        return self

    def connector(self, slug: str) -> ConnectorConfig | None:
        return next((c for c in self.connectors if c.slug == slug), None)

    def resolve(self, ref: str) -> str:
        """A source reference as a URL or an absolute path."""
        if ref.startswith(("http://", "https://")):
            return ref
        path = Path(ref)
        return str(path if path.is_absolute() else (self.base_dir / path))

    def diagnostics(self) -> list[str]:
        """Non-fatal problems ``validate`` reports: matchers that can never match."""
        out: list[str] = []
        for where, rules in [("policies", self.policies)] + [
            (f"connectors[{c.slug}].policies", c.policies) for c in self.connectors
        ]:
            for i, rule in enumerate(rules):
                if rule.matcher.error:
                    out.append(f"{where}[{i}].match {rule.match!r}: {rule.matcher.error}; this rule never matches")
        return out


# -- loading --------------------------------------------------------------------------------


class _LineLoader(yaml.SafeLoader):
    """A SafeLoader that remembers the line of every mapping key, by its path."""


def _compose_lines(text: str) -> dict[tuple[str | int, ...], int]:
    lines: dict[tuple[str | int, ...], int] = {}
    root = yaml.compose(text, Loader=_LineLoader)

    def walk(node: yaml.Node, path: tuple[str | int, ...]) -> None:
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = path + (k.value,)
                lines[key] = k.start_mark.line + 1
                walk(v, key)
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                walk(v, (*path, i))

    if root is not None:
        walk(root, ())
    return lines


_FIXES = {
    "extra_forbidden": "remove it, or check its spelling against SPEC 3.4",
    "missing": "add it",
    "union_tag_invalid": "use one of the listed values",
    "literal_error": "use one of the listed values",
}


def _line_for(loc: tuple[str | int, ...], lines: dict[tuple[str | int, ...], int]) -> int | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def _clean_loc(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    # pydantic puts union arm names (``OpenAPISource``, ``bearer``) into locations; they are not YAML keys.
    arms = {"OpenAPISource", "HttpSource", "UnsupportedSource", "function-after[_compile(), PolicyRule]"}
    out: list[str | int] = []
    for part in loc:
        if isinstance(part, str) and (part in arms or part.startswith("function-")):
            continue
        out.append(part)
    return tuple(out)


def _merge_catalog(raw: dict[str, Any], catalog_dir: Path, file: str, line: int | None) -> dict[str, Any]:
    name = raw.get("catalog")
    if not name:
        return raw
    entry_path = catalog_dir / f"{name}.yaml"
    if not entry_path.is_file():
        known = sorted(p.stem for p in catalog_dir.glob("*.yaml"))
        raise ManifestError(
            [Issue(file, line, "catalog", f"no catalog entry {name!r}", f"use one of: {', '.join(known) or 'none'}")]
        )
    entry = yaml.safe_load(entry_path.read_text()) or {}
    source = entry.get("source")
    if isinstance(source, dict) and isinstance(source.get("openapi"), str):
        ref = source["openapi"]
        if not ref.startswith(("http://", "https://")) and not Path(ref).is_absolute():
            source = {"openapi": str((catalog_dir / ref).resolve())}
    merged = {k: v for k, v in entry.items() if k not in ("slug", "source")}
    if source is not None:
        merged["source"] = source
    merged.update(raw)
    return merged


def parse_manifest(text: str, *, file: str = "<manifest>", base_dir: Path | None = None,
                   catalog_dir: Path = CATALOG_DIR) -> Manifest:
    """Validate manifest text. Raises ``ManifestError`` listing every located problem."""
    try:
        data = yaml.safe_load(text)
        lines = _compose_lines(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ManifestError([Issue(file, line, "", f"not valid YAML: {problem}",
                                   "check indentation and quoting around this line")]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ManifestError([Issue(file, 1, "", "a manifest is a YAML mapping", "start with 'project: NAME'")])
    connectors = data.get("connectors") or []
    if isinstance(connectors, list):
        data["connectors"] = [
            _merge_catalog(c, catalog_dir, file, lines.get(("connectors", i)))
            if isinstance(c, dict) else c
            for i, c in enumerate(connectors)
        ]
    try:
        return Manifest.model_validate({**data, "base_dir": base_dir or Path.cwd()})
    except ValidationError as exc:
        issues = []
        for err in exc.errors():
            loc = _clean_loc(tuple(err["loc"]))
            field = ".".join(str(p) for p in loc)
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "union_tag_invalid":
                msg = f"unknown value {err.get('input', {}).get('type', '')!r}; " + msg.split(";")[0].split(" does not match")[0]
                msg = f"{msg.rstrip('; ')}; expected one of {err.get('ctx', {}).get('expected_tags', '')}"
            issues.append(Issue(file, _line_for(loc, lines), field, msg, _FIXES.get(err["type"], "")))
        raise ManifestError(issues) from None


def load_manifest(path: str | Path | None = None) -> Manifest:
    """Load a manifest file (the bundled default when ``path`` is None)."""
    p = Path(path) if path is not None else DEFAULT_MANIFEST
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError([Issue(str(p), None, "", f"cannot read the manifest: {exc.strerror}",
                                   "check the path given to --manifest")]) from None
    return parse_manifest(text, file=str(p), base_dir=p.resolve().parent)
