"""The door to ``/mcp`` over HTTP: static bearer tokens and, with ``front_door``, an identity provider's.

Without ``front_door`` only ``token create`` tokens open it and a request without one gets a 401
whose short JSON body says how to get one.
With it the gateway is an OAuth 2.1 resource server (the MCP authorization specification):

- ``/.well-known/oauth-protected-resource`` and ``/.well-known/oauth-protected-resource/mcp``
  (RFC 9728) name the authorization server and the scopes, so a client that gets a 401 can sign
  its user in on its own;
- a 401 carries ``WWW-Authenticate: Bearer resource_metadata="…"`` (with ``error="invalid_token"``
  when a token was presented but refused: bad signature, another audience, expired, unknown key),
  a token without a required scope gets 403 ``error="insufficient_scope"``;
- a valid token becomes the ``Principal``: the user claim, the groups, and the agent (the agent
  claim or the client id, through ``agents_by_claim``). The token itself stays here: it is never
  forwarded upstream (upstream credentials come from the vault).

Either way the request's ``scope["user"]`` is the SDK's ``AuthenticatedUser``, which is what the
SDK's session manager binds a session to: a session id presented with another subject's token is
answered as if it did not exist.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import httpx2
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..core.health import STORE_BROKEN_HINT, STORE_UNAVAILABLE_HINT, StoreHealth
from ..manifest import FrontDoorConfig
from ..primitives.secrets import PROJECT_WIDE, SealedCredential
from ..services.front_door import (
    FRONT_DOOR_SECRETS,
    FrontDoorSettings,
    IntrospectionSecret,
    Introspector,
    JwksCache,
    JwtVerifier,
    TokenRefused,
    looks_like_jwt,
)
from ..services.identity import OPERATOR, Principal
from ..services.logs import REQUESTER
from ..services.tokens import TOKEN_PREFIX, TokenService
from ..vocabulary.errors import GatewayError, StoreUnavailable
from .tools import PRINCIPAL_SCOPE_KEY

__all__ = ["FrontDoor", "Gate", "IssuerEndpoints", "open_front_door"]

logger = logging.getLogger(__name__)
MCP_PATH = "/mcp"
STATIC_ISSUER = "mcp-gateway:static-token"
"""The ``iss`` recorded for static-token callers, so their sessions never match a front-door subject's."""


@dataclass(frozen=True)
class IssuerEndpoints:
    """Where the issuer's metadata (RFC 8414 / OpenID discovery) says its endpoints are; what the
    approver sign-in and token introspection need. None when not asked for or not advertised."""

    authorization: str | None = None
    token: str | None = None


class SealedSecrets(Protocol):
    """Where the front door's own client secrets are kept (the vault, or the pages' ``CredentialDesk``)."""

    async def sealed(self, connector: str, *, principal: str, name: str = "default") -> SealedCredential | None: ...


@dataclass(frozen=True)
class FrontDoor:
    """A configured front door: the verifier, the resource it guards and how to map callers."""

    config: FrontDoorConfig
    verifier: JwtVerifier
    resource_url: str
    endpoints: IssuerEndpoints = IssuerEndpoints()
    http: httpx2.AsyncClient | None = None
    """The client that talks to the identity provider (metadata, keys, token endpoint)."""
    introspector: Introspector | None = None
    """With ``introspection_client_id``: opaque (non-JWT) tokens are checked at the issuer (RFC 7662)."""

    async def verify(self, token: str) -> AccessToken:
        """A JWT checked locally, else an opaque token introspected; ``TokenRefused`` says why not."""
        if looks_like_jwt(token) or self.introspector is None:
            return await self.verifier.verify(token)
        return await self.introspector.verify(token)

    @property
    def metadata_url(self) -> str:
        return str(build_resource_metadata_url(AnyHttpUrl(self.resource_url)))

    def routes(self) -> list[Route]:
        """The protected resource metadata (RFC 9728) at the path-suffixed and the root well-known URL.

        Written here rather than with the SDK's ``create_protected_resource_routes``: its URL type
        adds a slash to a bare-origin issuer, and clients compare the issuer string exactly (RFC 8414)."""
        document: dict[str, object] = {
            "resource": self.resource_url,
            "authorization_servers": [self.config.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-gateway",
        }
        if self.config.scopes:
            document["scopes_supported"] = list(self.config.scopes)

        async def metadata(request: Request) -> Response:
            headers = {"Access-Control-Allow-Origin": "*", "Cache-Control": "public, max-age=3600"}
            if request.method == "OPTIONS":
                return Response(status_code=204, headers=headers | {"Access-Control-Allow-Methods": "GET, OPTIONS"})
            return JSONResponse(document, headers=headers)

        suffixed = urlsplit(self.metadata_url).path
        paths = dict.fromkeys((suffixed, "/.well-known/oauth-protected-resource"))
        return [Route(path, metadata, methods=["GET", "OPTIONS"]) for path in paths]

    def principal(self, access: AccessToken) -> Principal | None:
        caller = self.verifier.caller(access)
        if caller.user in (PROJECT_WIDE, OPERATOR.user) or caller.user.startswith("token:"):
            return None  # a name the gateway reserves (the project-wide credential, the operator, static tokens)
        raw_agent = caller.agent or caller.client_id
        agent = self.config.agents_by_claim.get(raw_agent, raw_agent)
        return Principal(user=caller.user, agent=agent, groups=caller.groups)


async def open_front_door(
    config: FrontDoorConfig, public_url: str, http: httpx2.AsyncClient, vault: SealedSecrets | None = None
) -> FrontDoor:
    """The front door for ``config``: the JWKS URL from the manifest, else from the issuer's metadata
    (read too when approvers sign in, for the authorization and token endpoints, and for the
    introspection endpoint unless the manifest names it). ``vault`` holds the introspection
    client's secret (``secret set --front-door introspection``)."""
    resource_url = config.audience or f"{public_url.rstrip('/')}{MCP_PATH}"
    introspects = config.introspection_client_id is not None
    metadata: dict[str, object] = {}
    if (
        config.jwks_url is None
        or config.approver_client_id is not None
        or (introspects and config.introspection_url is None)
    ):
        metadata = await _issuer_metadata(config.issuer, http)
    jwks_url = config.jwks_url or _metadata_url(metadata, "jwks_uri")
    endpoints = IssuerEndpoints()
    if config.approver_client_id is not None:
        endpoints = IssuerEndpoints(
            authorization=_metadata_url(metadata, "authorization_endpoint"),
            token=_metadata_url(metadata, "token_endpoint"),
        )
    settings = FrontDoorSettings(
        issuer=config.issuer,
        audience=resource_url,
        jwks_url=jwks_url,
        scopes=tuple(config.scopes),
        user_claim=config.user_claim,
        agent_claim=config.agent_claim,
        groups_claim=config.groups_claim,
    )
    verifier = JwtVerifier(settings, JwksCache(jwks_url, http))
    introspector = None
    if config.introspection_client_id is not None:
        url = config.introspection_url or _metadata_url(metadata, "introspection_endpoint")
        introspector = Introspector(settings, url, config.introspection_client_id, _sealed_secret(vault), http)
    return FrontDoor(config, verifier, resource_url, endpoints, http, introspector)


def _sealed_secret(vault: SealedSecrets | None) -> IntrospectionSecret:
    """The introspection client's secret, opened from the vault when a request needs it (so storing
    or changing it takes effect without a restart); None when none is stored."""

    async def secret() -> str | None:
        if vault is None:
            return None
        sealed = await vault.sealed(FRONT_DOOR_SECRETS, principal=PROJECT_WIDE, name="introspection")
        value = sealed.open().reveal() if sealed is not None else None
        return value if isinstance(value, str) else None

    return secret


async def _issuer_metadata(issuer: str, http: httpx2.AsyncClient) -> dict[str, object]:
    base = issuer.rstrip("/")
    tried: list[str] = []
    for path in ("/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"):
        url = base + path
        tried.append(url)
        try:
            response = await http.get(url, timeout=10.0)
            document = response.json() if response.status_code == 200 else None
        except (httpx2.HTTPError, ValueError):
            continue
        if isinstance(document, dict) and isinstance(document.get("jwks_uri"), str):
            return document
    raise GatewayError(
        f"front_door: cannot read a jwks_uri from the issuer's metadata ({', '.join(tried)}): check that the "
        "issuer is reachable from the gateway and its URL is right, or set front_door.jwks_url"
    )


_WITHOUT = {
    "jwks_uri": "set front_door.jwks_url",
    "introspection_endpoint": "set front_door.introspection_url",
}


def _metadata_url(metadata: dict[str, object], key: str) -> str:
    value = metadata.get(key)
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise GatewayError(
            f"front_door: the issuer's metadata names no {key}; "
            + _WITHOUT.get(key, "approvers cannot sign in without it (remove front_door.approver_client_id)")
        )
    return value


class Gate:
    """ASGI middleware: ``/mcp`` needs a valid bearer token; the principal goes into the scope.

    ``mcp``: the endpoint at ``/mcp`` itself, which a request for exactly that path that passed the
    door is handed to directly, not through ``app``'s router and middleware (which are for the pages:
    a per-request cost on every MCP message otherwise)."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenService,
        front_door: FrontDoor | None = None,
        health: StoreHealth | None = None,
        *,
        mcp: ASGIApp | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.front_door = front_door
        self.health = health
        self.mcp = mcp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].rstrip("/") == MCP_PATH:
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        door = self.front_door
        static = door is None or door.config.static_tokens
        if static and (door is None or (token or "").startswith(TOKEN_PREFIX)):
            try:
                principal = await self.tokens.verify(token)
            except StoreUnavailable as exc:
                # No tool runs: a short 503 the client can retry, logged once per outage, not a 500.
                if self.health is not None:
                    self.health.failed(exc)
                await _store_unavailable(send, lasting=exc.lasting)
                return
            if principal is not None:
                await self._enter_as(scope, receive, send, principal, _static_user(principal.user, principal.agent))
                return
        if door is None:
            await _refuse(send, 401, "Bearer")
            return
        challenge = f'Bearer resource_metadata="{door.metadata_url}"'
        if not token:
            await _refuse(send, 401, challenge)
            return
        try:
            access = await door.verify(token)
        except TokenRefused as refused:
            logger.info("front door refused a token: %s", refused.code)
            if refused.insufficient_scope:
                scopes = " ".join(door.config.scopes)
                await _refuse(send, 403, f'Bearer error="insufficient_scope", scope="{scopes}", ' + challenge[7:])
            else:
                await _refuse(send, 401, 'Bearer error="invalid_token", ' + challenge[7:])
            return
        principal = door.principal(access)
        if principal is None:
            logger.info("front door refused a token: reserved user name")
            await _refuse(send, 401, 'Bearer error="invalid_token", ' + challenge[7:])
            return
        await self._enter(scope, receive, send, principal, access)

    async def _enter(
        self, scope: Scope, receive: Receive, send: Send, principal: Principal, access: AccessToken
    ) -> None:
        await self._enter_as(scope, receive, send, principal, AuthenticatedUser(access))

    async def _enter_as(
        self, scope: Scope, receive: Receive, send: Send, principal: Principal, user: AuthenticatedUser
    ) -> None:
        scope[PRINCIPAL_SCOPE_KEY] = principal
        scope["user"] = user  # what the SDK binds a session to
        if self.mcp is not None and scope["path"] == MCP_PATH:
            requester = REQUESTER.set(principal.label)  # named in what the SDK logs of this request
            try:
                await self.mcp(scope, receive, send)
            finally:
                REQUESTER.reset(requester)
        else:
            await self.app(scope, receive, send)


@functools.lru_cache(maxsize=1024)
def _static_user(user: str, agent: str | None) -> AuthenticatedUser:
    """The SDK's user for a static-token caller, made once per caller rather than on every request
    (the token itself is still verified on every request: a revoked one stops working at once)."""
    access = AccessToken(token="", client_id=agent or "", scopes=[], subject=user, claims={"iss": STATIC_ISSUER})
    return AuthenticatedUser(access)


def _store_unavailable_rpc(hint: str) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32603,
                "message": f"store_unavailable: {hint}",
                "data": {"reason": "store_unavailable", "hint": hint},
            },
        }
    ).encode()


_STORE_UNAVAILABLE_RPC = _store_unavailable_rpc(STORE_UNAVAILABLE_HINT)
"""The 503 of an MCP request whose token cannot be checked, as a JSON-RPC error: MCP clients surface a
JSON-RPC error body at any status (the SDK's streamable HTTP client does), where a bare 503 reads as
"Server returned an error response", without the reason or what to do."""
_STORE_BROKEN_RPC = _store_unavailable_rpc(STORE_BROKEN_HINT)
"""The same for storage that refuses until its operator acts (``StoreUnavailable.lasting``): no retry soon."""


async def _store_unavailable(send: Send, *, lasting: bool = False) -> None:
    body = _STORE_BROKEN_RPC if lasting else _STORE_UNAVAILABLE_RPC
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if not lasting:
        headers.append((b"retry-after", b"5"))
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


_REFUSALS: dict[str, bytes] = {
    kind: json.dumps({"error": kind, "message": message}).encode()
    for kind, message in {
        "unauthorized": "send Authorization: Bearer <token>; "
        "an operator mints one with: mcp-gateway token create --agent NAME",
        "invalid_token": "the bearer token was not accepted (unknown, expired or revoked): get a new one",
        "insufficient_scope": "the token lacks a scope this gateway requires (see WWW-Authenticate)",
    }.items()
}
"""The short JSON bodies of a refusal: what to do next, the same for every caller (nothing to probe)."""


async def _refuse(send: Send, status: int, challenge: str) -> None:
    kind = next((k for k in ("insufficient_scope", "invalid_token") if f'error="{k}"' in challenge), "unauthorized")
    body = _REFUSALS[kind]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"www-authenticate", challenge.encode()),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None
