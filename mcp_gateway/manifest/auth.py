"""The ``auth:`` models of a connector, one per ``type``, and the headers each writes.

How each kind is applied to a request lives in ``mcp_gateway/auth/``; these are only the manifest's schema.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ..primitives.rerouting import rerouting
from ..vocabulary.model import AuthKind
from .validation import STRICT, Problem

__all__ = [
    "AUTH_TYPES",
    "CREDENTIAL_HEADERS",
    "ApiKeyAuth",
    "AuthConfig",
    "AwsSigV4Auth",
    "BasicAuth",
    "BearerAuth",
    "CustomAuth",
    "HmacAuth",
    "MtlsAuth",
    "NoAuth",
    "OAuth1Auth",
    "OAuth2Auth",
    "auth_headers",
    "needs_secret",
    "refuse_static_headers",
]


class NoAuth(BaseModel):
    model_config = STRICT
    type: Literal["none"] = "none"


class BearerAuth(BaseModel):
    model_config = STRICT
    type: Literal["bearer"]
    header: str = "Authorization"
    prefix: str = "Bearer"


class BasicAuth(BaseModel):
    model_config = STRICT
    type: Literal["basic"]


class ApiKeyAuth(BaseModel):
    model_config = STRICT
    type: Literal["api_key"]
    in_: Literal["header", "query", "cookie"] = Field("header", alias="in")
    name: str = "X-API-Key"
    prefix: str = ""
    """Prepended to the key (``Token `` for RealWorld's ``Authorization: Token <jwt>``)."""


class CustomAuth(BaseModel):
    """Headers built from templates: ``{secret}`` is the whole secret, ``{secret.field}`` one field of a JSON secret."""

    model_config = STRICT
    type: Literal["custom"]
    headers: dict[str, str]

    @field_validator("headers")
    @classmethod
    def _has_placeholder(cls, headers: dict[str, str]) -> dict[str, str]:
        if not headers:
            raise Problem("custom auth needs at least one header template", "write e.g. 'X-Token: \"{secret}\"'")
        if not any("{secret" in v for v in headers.values()):
            raise Problem("no header template uses {secret}", "write e.g. 'X-Token: \"{secret}\"'")
        return headers


class OAuth1Auth(BaseModel):
    """OAuth 1.0a request signing (RFC 5849) in the Authorization header.

    The secret is ``{consumer_key, consumer_secret, token, token_secret}``.
    """

    model_config = STRICT
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
            raise Problem("the realm contains a quote, backslash or line break", "use plain text, e.g. 'Photos'")
        return v


_HMAC_PLACEHOLDERS = ("method", "path", "timestamp", "body")


class HmacAuth(BaseModel):
    """Request signing with a shared secret (a plain string), as webhook-style APIs do.

    The signed message is the body, or ``method``, ``path``, ``timestamp`` and ``body`` joined by
    ``separator``, or ``template`` when given: e.g. Slack's ``"v0:{timestamp}:{body}"``, Coinbase's
    ``"{timestamp}{method}{path}{body}"``. ``{path}`` is the path with its query string, as sent.
    The header gets ``prefix`` + the digest in ``encoding`` (GitHub: ``prefix: "sha256="``).
    """

    model_config = STRICT
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
            raise Problem(
                f"unknown placeholder {{{unknown[0]}}} in the signing template",
                "use only {method}, {path}, {timestamp} and {body}",
            )
        if not names:
            raise Problem("the signing template uses no placeholder", "sign at least the body, e.g. '{body}'")
        return v

    @model_validator(mode="after")
    def _timestamp_is_sent(self) -> HmacAuth:
        if self.signs_timestamp and not self.timestamp_header:
            raise Problem(
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

    model_config = STRICT
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
            raise Problem(
                f"{v!r} is not an AWS service or region name",
                "use lower-case letters, digits and '-', e.g. 'execute-api' or 'eu-west-1'",
            )
        return v


class MtlsAuth(BaseModel):
    """A client certificate presented in the TLS handshake; the secret is ``{cert_pem, key_pem}``."""

    model_config = STRICT
    type: Literal["mtls"]
    ca_file: str | None = None
    """PEM file of the CA(s) that sign the upstream's server certificate, for a private PKI (relative to the
    manifest's folder). Without it the system's trust store is used."""


class OAuth2Auth(BaseModel):
    """OAuth 2.0 (RFC 6749): the authorization code grant with PKCE (a human signs in through a connect
    link), or the client credentials grant. The secret is the client's ``{client_id, client_secret}``;
    tokens are obtained, stored and refreshed by the gateway (``auth/oauth2.py``)."""

    model_config = STRICT
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
            raise Problem(
                f"{v!r} is not an http(s) URL", "write the provider's full URL, e.g. 'https://auth.example.com/token'"
            )
        return v

    @model_validator(mode="after")
    def _authorize_url_for_code_flow(self) -> OAuth2Auth:
        if self.flow == "authorization_code" and not self.authorize_url:
            raise Problem(
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


def needs_secret(config: AuthConfig) -> bool:
    """Whether calls through a connector with this auth need a stored credential."""
    return not isinstance(config, NoAuth)


AUTH_TYPES: tuple[AuthKind, ...] = (
    "bearer",
    "basic",
    "custom",
    "api_key",
    "oauth1",
    "hmac",
    "aws_sigv4",
    "mtls",
    "oauth2",
    "none",
)
"""Every kind, in the order error messages list them (the common ones first)."""

# Headers that carry credentials: static headers may never set them.
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-auth-token", "x-amz-security-token"}
)


def refuse_static_headers(headers: dict[str, str], where: str) -> dict[str, str]:
    """``headers`` unchanged, or a Problem naming the first one that would carry a credential or make
    servers on the way use another method, URL or client (``X-HTTP-Method-Override``, ``X-Forwarded-For``).

    ``where`` says where the credential belongs instead ("under 'auth:'", …).
    """
    for name in headers:
        if name.lower() in CREDENTIAL_HEADERS:
            raise Problem(
                f"static header {name!r} would carry a credential",
                f"remove it: declare the credential {where} and store it with 'mcp-gateway secret set'",
                key=name,
            )
        if rerouting(name):
            raise Problem(
                f"static header {name!r} makes servers on the way use another method, URL or client than "
                "each action's own, which policy and approvals judge",
                "remove it; an action that needs another method or path is declared with that method and path",
                key=name,
            )
    return headers


def auth_params(auth: BaseModel) -> frozenset[tuple[str, str]]:
    """``(location, name)`` of everything an auth kind writes on the outbound request (header names
    lower-cased): a spec's parameter there would carry the credential, so it is not an argument."""
    places = {("header", name) for name in auth_headers(auth)}
    if isinstance(auth, ApiKeyAuth) and auth.in_ != "header":
        places.add((auth.in_, auth.name))
    return frozenset(places)


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
