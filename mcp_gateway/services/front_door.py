"""The front door: access tokens from an identity provider, validated locally.

The gateway is an OAuth 2.1 *resource server* as the MCP authorization specification describes: a
client that gets a 401 reads the Protected Resource Metadata (RFC 9728), signs the user in at the
authorization server, and comes back with a JWT access token minted for this gateway. Validation
happens here, without a round trip per request:

- the signature, against the issuer's JWKS (fetched over HTTPS, cached; an unknown ``kid`` triggers
  one refresh, at most every ``MIN_REFRESH_SECONDS``, so a flood of forged ``kid`` values cannot make
  us hammer the identity provider); only asymmetric algorithms are accepted (``none`` and HMAC
  would let anyone who knows the public key, or nobody at all, mint tokens);
- ``iss`` equals the configured issuer; ``aud`` contains this gateway's resource URL (RFC 8707: a
  token minted for another resource is refused, so tokens are never passed through);
- ``exp`` and ``nbf`` with a small leeway; the required scopes.

What the token says about who is calling becomes the SDK's ``AccessToken`` (``subject`` = the
``user_claim``, ``client_id`` = ``azp``/``client_id``), plus the claims the gateway maps to a user,
groups and an agent. Nothing from the token is ever forwarded upstream.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote_plus

import anyio
import httpx2
import jwt
from jwt import PyJWK
from mcp.server.auth.provider import AccessToken

__all__ = [
    "ALLOWED_ALGORITHMS",
    "FRONT_DOOR_SECRETS",
    "FrontDoorSettings",
    "Introspector",
    "JwksCache",
    "JwtVerifier",
    "TokenRefused",
    "client_basic",
    "looks_like_jwt",
]

logger = logging.getLogger(__name__)

ALLOWED_ALGORITHMS: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
MIN_REFRESH_SECONDS: Final = 30.0
"""An unknown ``kid`` refreshes the JWKS at most this often."""
JWKS_MAX_AGE_SECONDS: Final = 3600.0
JWKS_MAX_BYTES: Final = 256 * 1024
JWKS_MAX_KEYS: Final = 50
FRONT_DOOR_SECRETS: Final = "_front_door"
"""The vault's reserved connector for the front door's own client secrets (``secret set --front-door
NAME``): ``approver`` (the approval page's sign-in client) and ``introspection`` (RFC 7662). Connector
slugs cannot start with ``_``, so it never clashes with one."""
FRONT_DOOR_SECRET_NAMES: Final = ("approver", "introspection")


class TokenRefused(Exception):
    """Why a token was refused (a log-only code; the client sees ``invalid_token`` or ``insufficient_scope``)."""

    def __init__(self, code: str, *, insufficient_scope: bool = False) -> None:
        super().__init__(code)
        self.code = code
        self.insufficient_scope = insufficient_scope


@dataclass(frozen=True)
class FrontDoorSettings:
    issuer: str
    audience: str
    """This gateway's resource URL (``<public_url>/mcp``) as the identity provider puts it in ``aud``."""
    jwks_url: str
    scopes: tuple[str, ...] = ()
    """Scopes every token must carry."""
    user_claim: str = "sub"
    agent_claim: str | None = None
    groups_claim: str = "groups"
    leeway_seconds: float = 30.0


class JwksCache:
    """The issuer's signing keys by ``kid``, refreshed when stale or when a token names an unknown key."""

    def __init__(self, url: str, http: httpx2.AsyncClient, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._url = url
        self._http = http
        self._clock = clock
        self._keys: dict[str, PyJWK] = {}
        self._fetched_at: float | None = None
        self._lock = anyio.Lock()

    async def key(self, kid: str | None) -> PyJWK:
        now = self._clock()
        stale = self._fetched_at is None or now - self._fetched_at > JWKS_MAX_AGE_SECONDS
        if stale or (kid not in self._keys and self._may_refresh(now)):
            await self._refresh()
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        found = self._keys.get(kid or "")
        if found is None:
            raise TokenRefused("unknown_kid")
        return found

    def _may_refresh(self, now: float) -> bool:
        return self._fetched_at is None or now - self._fetched_at >= MIN_REFRESH_SECONDS

    async def _refresh(self) -> None:
        async with self._lock:
            if self._fetched_at is not None and self._clock() - self._fetched_at < 1.0:
                return  # another request refreshed while this one waited
            try:
                response = await self._http.get(self._url, timeout=10.0)
                if response.status_code != 200 or len(response.content) > JWKS_MAX_BYTES:
                    raise ValueError(f"HTTP {response.status_code}, {len(response.content)} bytes")
                document = json.loads(response.content)
            except (httpx2.HTTPError, ValueError) as exc:
                # Keep the keys we had: an identity provider's hiccup must not log everyone out.
                logger.warning("front door: cannot refresh the JWKS from %s: %s", self._url, exc)
                self._fetched_at = self._clock()
                return
            keys: dict[str, PyJWK] = {}
            for entry in (document.get("keys") or [])[:JWKS_MAX_KEYS] if isinstance(document, dict) else []:
                if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                    continue
                try:
                    key = PyJWK.from_dict(entry)
                except jwt.PyJWTError:
                    continue
                if key.algorithm_name in ALLOWED_ALGORITHMS or "alg" not in entry:
                    keys[str(entry.get("kid", ""))] = key
            self._keys = keys
            self._fetched_at = self._clock()


@dataclass(frozen=True)
class Caller:
    """Who a valid token says is calling."""

    user: str
    agent: str | None
    groups: tuple[str, ...]
    client_id: str
    scopes: tuple[str, ...]
    claims: Mapping[str, Any] = field(repr=False)


class JwtVerifier:
    """The SDK's ``TokenVerifier`` for JWT access tokens of one issuer (see the module docstring)."""

    def __init__(self, settings: FrontDoorSettings, jwks: JwksCache) -> None:
        self.settings = settings
        self._jwks = jwks

    async def verify_token(self, token: str) -> AccessToken | None:
        """``TokenVerifier``: the token's ``AccessToken``, or None when it is not valid here."""
        try:
            return await self.verify(token)
        except TokenRefused as refused:
            logger.info("front door refused a token: %s", refused.code)
            return None

    async def verify(self, token: str) -> AccessToken:
        """Like ``verify_token``, raising ``TokenRefused`` with the reason."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRefused("malformed") from None
        algorithm = header.get("alg")
        if algorithm not in ALLOWED_ALGORITHMS:
            raise TokenRefused("algorithm_not_allowed")
        key = await self._jwks.key(header.get("kid"))
        s = self.settings
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=[algorithm],
                audience=s.audience,
                issuer=s.issuer,
                leeway=s.leeway_seconds,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused("expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefused("not_yet_valid") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused("wrong_audience") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused("wrong_issuer") from None
        except jwt.PyJWTError:
            raise TokenRefused("invalid_signature_or_claims") from None
        return _access_token(token, claims, s)

    def caller(self, access: AccessToken) -> Caller:
        """The user, agent and groups the verified token names."""
        claims = access.claims or {}
        s = self.settings
        agent = claims.get(s.agent_claim) if s.agent_claim else None
        groups = claims.get(s.groups_claim) or ()
        return Caller(
            user=access.subject or access.client_id,
            agent=str(agent) if isinstance(agent, str) and agent else None,
            groups=tuple(str(g) for g in groups) if isinstance(groups, list | tuple) else (),
            client_id=access.client_id,
            scopes=tuple(access.scopes),
            claims=claims,
        )


def _access_token(token: str, claims: dict[str, Any], s: FrontDoorSettings) -> AccessToken:
    """What a token whose signature (or introspection) and ``iss``/``aud``/``exp`` passed says, once
    its scopes and user claim pass too: the same for a JWT and an introspected opaque token."""
    scopes = _scopes(claims)
    missing = [scope for scope in s.scopes if scope not in scopes]
    if missing:
        raise TokenRefused("missing_scope:" + ",".join(missing), insufficient_scope=True)
    user = claims.get(s.user_claim)
    if not isinstance(user, str) or not user:
        raise TokenRefused("no_user_claim")
    client_id = str(claims.get("azp") or claims.get("client_id") or "unknown-client")
    return AccessToken(
        token=token,
        client_id=client_id,
        scopes=list(scopes),
        expires_at=int(claims["exp"]) if isinstance(claims.get("exp"), int | float) else None,
        resource=s.audience,
        subject=user,
        claims=claims,
    )


def client_basic(client_id: str, secret: str) -> str:
    """The ``Authorization`` value of a client authenticating with HTTP Basic at the issuer: both
    parts form-urlencoded before the Basic encoding (RFC 6749 section 2.3.1)."""
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}".encode()
    return "Basic " + base64.b64encode(pair).decode()


def looks_like_jwt(token: str) -> bool:
    """Three base64url parts whose first decodes as a JOSE header: a JWT to check locally; anything
    else is opaque, for introspection."""
    if token.count(".") != 2:
        return False
    try:
        jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        return False
    return True


IntrospectionSecret = Callable[[], Awaitable[str | None]]
"""Opens the introspection client's secret when a request needs it (None: a public client)."""


class Introspector:
    """RFC 7662 token introspection for opaque access tokens, with the same checks as a JWT's.

    The issuer's introspection endpoint is asked (``token`` + ``token_type_hint``, the gateway's
    client authenticating with HTTP Basic); an answer is cached under the token's SHA-256 for at most
    ``CACHE_SECONDS`` (never past the token's ``exp``; a refusal for ``NEGATIVE_CACHE_SECONDS``), at
    most ``CACHE_ENTRIES`` of them. ``active`` must be true; ``aud`` must name this gateway (required:
    an answer without one could be a token for any resource), ``iss`` if present the issuer,
    ``exp``/``nbf`` with the leeway; then scopes and the user claim as for a JWT.
    """

    CACHE_SECONDS: Final = 60.0
    NEGATIVE_CACHE_SECONDS: Final = 10.0
    CACHE_ENTRIES: Final = 1000
    MAX_BYTES: Final = 64 * 1024

    def __init__(
        self,
        settings: FrontDoorSettings,
        url: str,
        client_id: str,
        secret: IntrospectionSecret,
        http: httpx2.AsyncClient,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.url = url
        self._client_id = client_id
        self._secret = secret
        self._http = http
        self._clock = clock
        self._cache: dict[str, tuple[float, dict[str, Any] | None]] = {}
        """SHA-256 of the token -> (until when the answer holds, the claims or None for a refusal)."""

    async def verify(self, token: str) -> AccessToken:
        """The token's ``AccessToken`` if the issuer says it is active for this gateway; else ``TokenRefused``."""
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            claims = cached[1]
        else:
            claims = await self._ask(token)
            self._remember(key, claims, now)
        if claims is None:
            raise TokenRefused("inactive")
        self._check(claims, self._clock())
        return _access_token(token, claims, self.settings)

    async def _ask(self, token: str) -> dict[str, Any] | None:
        headers = {"Accept": "application/json"}
        secret = await self._secret()
        form = {"token": token, "token_type_hint": "access_token"}
        if secret is not None:
            headers["Authorization"] = client_basic(self._client_id, secret)
        else:
            form["client_id"] = self._client_id
        try:
            response = await self._http.post(self.url, data=form, headers=headers, timeout=10.0)
            if response.status_code != 200 or len(response.content) > self.MAX_BYTES:
                raise ValueError(f"HTTP {response.status_code}")
            answer = json.loads(response.content)
        except (httpx2.HTTPError, ValueError) as exc:
            # Not cached: the next request asks again. The token is never logged, nor the answer.
            logger.warning("front door: token introspection at %s failed: %s", self.url, type(exc).__name__)
            raise TokenRefused("introspection_unavailable") from None
        if not isinstance(answer, dict) or answer.get("active") is not True:
            return None
        return answer

    def _check(self, claims: Mapping[str, Any], now: float) -> None:
        s = self.settings
        if "iss" in claims and claims["iss"] != s.issuer:
            raise TokenRefused("wrong_issuer")
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if s.audience not in audiences:
            raise TokenRefused("wrong_audience")
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if isinstance(exp, int | float) and exp + s.leeway_seconds < now:
            raise TokenRefused("expired")
        if isinstance(nbf, int | float) and nbf - s.leeway_seconds > now:
            raise TokenRefused("not_yet_valid")

    def _remember(self, key: str, claims: dict[str, Any] | None, now: float) -> None:
        until = now + (self.CACHE_SECONDS if claims is not None else self.NEGATIVE_CACHE_SECONDS)
        exp = claims.get("exp") if claims is not None else None
        if isinstance(exp, int | float):
            until = min(until, float(exp))
        if len(self._cache) >= self.CACHE_ENTRIES:
            # Bounded: drop what has lapsed, else the oldest tenth (dicts keep insertion order).
            lapsed = [k for k, (t, _) in self._cache.items() if t <= now]
            for k in lapsed or list(self._cache)[: self.CACHE_ENTRIES // 10]:
                del self._cache[k]
        self._cache[key] = (until, claims)


def _scopes(claims: Mapping[str, Any]) -> Sequence[str]:
    raw = claims.get("scope", claims.get("scp", ""))
    if isinstance(raw, str):
        return raw.split()
    if isinstance(raw, list | tuple):
        return [str(s) for s in raw]
    return []
