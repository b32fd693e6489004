"""``oauth2``: access tokens from an OAuth 2.0 provider (RFC 6749), put on the request as a bearer token.

Two grants. **Authorization code with PKCE** (RFC 7636, S256) for APIs that act for a person: the
connect page sends the human to the provider with a fresh ``state`` and code challenge, the provider
sends them back to ``/oauth/callback``, and the code is exchanged there. **Client credentials** for
APIs that act as the client itself: a token is fetched whenever one is needed.

Where things live:

- The client's own credentials ``{client_id, client_secret}`` are the connector's ``default``
  credential, entered on a page or with ``secret set``, sealed like every other secret.
- The token set from an authorization (access and refresh token, expiry, and whether the upstream
  has accepted it yet) is the credential named ``oauth2_token`` (``TOKEN_NAME``), sealed too.
- Access tokens in use are cached in memory with their expiry (SPEC 5), so a call opens nothing
  while its token is fresh. A token is refreshed shortly before it expires, and once after a 401.
- Authorizations in flight (state -> PKCE verifier and the connect link) live in the store for ten
  minutes, so the provider may send the human back to any instance behind a load balancer. A
  state is 256 random bits, stored as its SHA-256, and taken at most once (atomically, in any
  instance). The verifier and link travel encrypted under a key derived from the state itself:
  the database alone opens nothing, and only the human's browser (and the provider) holds the state.

No login loop: a token set that no upstream has accepted yet is *unverified*. If the upstream
still answers 401 to it after the one renewal, the human has just authorized and trying again
will not help, so the call ends with a terminal ``auth_failed`` error instead of another link.
A previously working token set that stops working gets one refresh, then ``needs_auth``.

Token endpoint answers are never quoted: only their status and a sanitized ``error`` code reach a
message, since a provider may echo what it was sent (the client secret among it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import secrets
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote_plus

import anyio
import httpx2

from ..clock import Clock
from ..credentials import PROJECT_WIDE, CredentialVault, SealedCredential, SecretValue
from ..errors import CredentialError, CredentialMissing, GatewayError, UpstreamError
from ..manifest import OAuth2Auth
from ..store.base import Store
from ._base import check_header_value, secret_fields
from ._oauth2_pending import PENDING_KIND, PendingAuthorization, open_pending, seal_pending

__all__ = [
    "CALLBACK_PATH",
    "TOKEN_NAME",
    "AuthorizationRefused",
    "OAuth2Session",
    "OAuth2Tokens",
    "PendingAuthorization",
    "apply_oauth2",
    "pkce_challenge",
]

logger = logging.getLogger(__name__)

TOKEN_NAME = "oauth2_token"
"""The credential name under which a connector's token set is sealed."""
CALLBACK_PATH = "/oauth/callback"
STATE_TTL = timedelta(minutes=10)
MAX_TOKEN_RESPONSE = 64 * 1024
_ERROR_CODE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def apply_oauth2(request: httpx2.Request, access_token: SecretValue) -> None:
    """Put an access token on the request (RFC 6750 section 2.1)."""
    token = access_token.reveal()
    if not isinstance(token, str):
        raise CredentialError("the oauth2 access token has the wrong shape; connect the connector again")
    request.headers["Authorization"] = check_header_value("oauth2", "header 'Authorization'", f"Bearer {token}")


def pkce_challenge(verifier: str) -> str:
    """RFC 7636 section 4.2, ``S256``: BASE64URL(SHA256(ASCII(verifier))) without padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode()


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class AuthorizationRefused(GatewayError):
    """The provider or its token endpoint said no. The message is safe for a page (no secret, no body)."""


@dataclass(frozen=True)
class IssuedToken:
    """An access token ready to use. Its repr shows only where it came from and when it expires."""

    access: SecretValue
    expires_at: datetime | None
    verified: bool
    """False until an upstream has answered something other than 401 to it (see the module docstring)."""
    stored_as: str | None
    """The principal its token set is sealed under, or None for a client credentials token (memory only)."""

    def fresh(self, now: datetime) -> bool:
        return self.expires_at is None or now < self.expires_at


class OAuth2Tokens:
    """Tokens for every ``oauth2`` connector of one gateway: the cache, the grants and the callbacks.

    Args:
        http: the shared client (no proxy from the environment, no redirects followed).
        vault: where client credentials and token sets are sealed.
        clock: for expiry.
        store: where authorizations in flight wait for the callback (shared by every instance).
        timeout: seconds for one token endpoint exchange.
    """

    def __init__(
        self, http: httpx2.AsyncClient, vault: CredentialVault, clock: Clock, *, store: Store, timeout: float = 15.0
    ) -> None:
        self._http = http
        self._vault = vault
        self._clock = clock
        self._store = store
        self._timeout = timeout
        self._cache: dict[tuple[str, str], IssuedToken] = {}
        self._locks: dict[tuple[str, str], anyio.Lock] = {}

    # -- the call path --------------------------------------------------------------------------

    def session(
        self, config: OAuth2Auth, connector: str, principal: str, client: SealedCredential | None
    ) -> OAuth2Session:
        """What ``LastMeterAuth`` runs for one call of an ``oauth2`` connector."""
        return OAuth2Session(self, config, connector, principal, client)

    async def ready(self, config: OAuth2Auth, connector: str, principal: str | None = None) -> bool:
        """Whether a call could get a token without a human: client credentials are stored, and for
        the authorization code grant a token set too. Decrypts nothing."""
        names = {
            k.name
            for k in await self._vault.keys(connector)
            if principal is None or k.principal in (principal, PROJECT_WIDE)
        }
        if "default" not in names:
            return False
        return config.flow == "client_credentials" or TOKEN_NAME in names

    def forget(self, connector: str) -> None:
        """Drop every cached token of a connector (a new authorization or client replaced them)."""
        for key in [k for k in self._cache if k[0] == connector]:
            del self._cache[key]

    async def token(self, session: OAuth2Session) -> IssuedToken:
        """A fresh access token for this call: cached, else stored, else refreshed or fetched.

        Raises:
            CredentialMissing: nothing to get one with (no client, no authorization, refresh refused).
            CredentialError: a stored credential cannot be opened.
            UpstreamError: the token endpoint could not be reached or answered nonsense.
        """
        key = (session.connector, session.principal)
        now = self._clock.now()
        cached = self._cache.get(key)
        if cached is not None and cached.fresh(now):
            return cached
        async with self._lock(key):
            cached = self._cache.get(key)
            if cached is not None and cached.fresh(self._clock.now()):
                return cached  # another call renewed it while this one waited
            issued = await self._obtain(session, rejected=None)
            self._cache[key] = issued
            return issued

    async def renew(self, session: OAuth2Session, rejected: IssuedToken) -> IssuedToken | None:
        """Another token after ``rejected`` drew a 401: a newer stored one, a refreshed one, or a new
        client credentials token. None when there is no way to get one without a human."""
        key = (session.connector, session.principal)
        async with self._lock(key):
            cached = self._cache.get(key)
            if cached is not None and cached is not rejected and cached.fresh(self._clock.now()):
                return cached
            self._cache.pop(key, None)
            try:
                issued = await self._obtain(session, rejected=rejected)
            except CredentialMissing:
                return None
            self._cache[key] = issued
            return issued

    async def confirm(self, session: OAuth2Session, token: IssuedToken) -> None:
        """The upstream accepted ``token``: mark its stored token set verified (once)."""
        key = (session.connector, session.principal)
        verified = IssuedToken(token.access, token.expires_at, True, token.stored_as)
        if self._cache.get(key) is token:
            self._cache[key] = verified
        if token.stored_as is None:
            return
        sealed = await self._vault.sealed(session.connector, principal=token.stored_as, name=TOKEN_NAME)
        if sealed is None:
            return
        stored = _token_set(sealed)
        # Only the set this token came from: a newer authorization stays unverified until it works.
        if stored.get("access_token") == token.access.reveal() and stored.get("verified") != "1":
            await self._vault.put(
                session.connector, {**stored, "verified": "1"}, principal=token.stored_as, name=TOKEN_NAME
            )

    def evict(self, session: OAuth2Session) -> None:
        self._cache.pop((session.connector, session.principal), None)

    def _lock(self, key: tuple[str, str]) -> anyio.Lock:
        # One renewal per token set at a time: providers that rotate refresh tokens invalidate the
        # old one on use, so two concurrent refreshes would log the second caller out.
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = anyio.Lock()
        return lock

    async def _obtain(self, session: OAuth2Session, rejected: IssuedToken | None) -> IssuedToken:
        config = session.config
        if config.flow == "client_credentials":
            form = {"grant_type": "client_credentials", **_scope(config)}
            answer = await self._grant(session.connector, config, _client(session.client, session.connector), form)
            return self._issued(answer, verified=True, stored_as=None)
        sealed = await self._vault.sealed(session.connector, principal=session.principal, name=TOKEN_NAME)
        if sealed is None:
            raise CredentialMissing(session.connector, TOKEN_NAME)
        stored = _token_set(sealed)
        current = self._from_set(stored, stored_as=sealed.key.principal)
        rejected_same = rejected is not None and rejected.access.reveal() == stored["access_token"]
        if current.fresh(self._clock.now()) and not rejected_same:
            return current
        refresh_token = stored.get("refresh_token")
        if not refresh_token:
            raise CredentialMissing(session.connector, TOKEN_NAME)
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        try:
            answer = await self._grant(session.connector, config, _client(session.client, session.connector), form)
        except AuthorizationRefused:
            # The provider no longer honours this authorization (revoked, expired): forget it, so
            # the next call hands out a connect link instead of trying the dead refresh token again.
            await self._vault.delete(session.connector, principal=sealed.key.principal, name=TOKEN_NAME)
            logger.warning("oauth2 refresh for %s was refused; a human must connect it again", session.connector)
            raise CredentialMissing(session.connector, TOKEN_NAME) from None
        # RFC 6749 section 6: the provider may keep the refresh token; the set keeps its verified flag.
        new_set = self._token_set(answer, refresh_token=refresh_token, verified=stored.get("verified", "0"))
        await self._vault.put(session.connector, new_set, principal=sealed.key.principal, name=TOKEN_NAME)
        return self._from_set(new_set, stored_as=sealed.key.principal)

    # -- the human side -------------------------------------------------------------------------

    async def begin(
        self,
        config: OAuth2Auth,
        *,
        connector: str,
        principal: str,
        client_id: str,
        link_token: str,
        redirect_uri: str,
        link_expires_at: datetime,
    ) -> str:
        """Start an authorization; returns the provider URL to send the human to.

        The state and PKCE verifier are new for every start, so opening a connect page twice gives
        two independent attempts, of which only the first to complete can use the link.
        """
        assert config.authorize_url is not None  # the manifest requires it for this flow
        now = self._clock.now()
        expires_at = min(now + STATE_TTL, link_expires_at)
        state = secrets.token_urlsafe(32)
        verifier = secrets.token_urlsafe(48)  # 64 characters of the RFC 7636 alphabet
        pending = PendingAuthorization(
            connector=connector,
            principal=principal,
            link_token=link_token,
            verifier=verifier,
            redirect_uri=redirect_uri,
            expires_at=expires_at,
        )
        # Expired entries are purged by every put, so abandoned sign-ins cannot pile up.
        await self._store.put_ephemeral(PENDING_KIND, _digest(state), seal_pending(state, pending), expires_at, now)
        params = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            **_scope(config),
            "state": state,
            "code_challenge": pkce_challenge(verifier),
            "code_challenge_method": "S256",
        }
        return str(httpx2.URL(config.authorize_url).copy_merge_params(params))

    async def take(self, state: str) -> PendingAuthorization | None:
        """The authorization this state belongs to, removed so that it works once (whichever instance
        the callback reaches); None if unknown or late."""
        if not state or len(state) > 512:
            return None
        sealed = await self._store.take_ephemeral(PENDING_KIND, _digest(state), self._clock.now())
        return open_pending(state, sealed) if sealed is not None else None

    async def exchange(self, config: OAuth2Auth, pending: PendingAuthorization, code: str) -> dict[str, str]:
        """Trade the code for a token set (RFC 6749 section 4.1.3, with the PKCE verifier). Returns the
        set, still unsaved: the caller stores it once the link is consumed (``save``).

        Raises:
            AuthorizationRefused: the token endpoint refused the code.
            CredentialMissing: the client credentials disappeared meanwhile.
            UpstreamError: the token endpoint could not be reached.
        """
        client = await self._vault.sealed(pending.connector, principal=pending.principal)
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": pending.redirect_uri,
            "code_verifier": pending.verifier,
        }
        answer = await self._grant(pending.connector, config, _client(client, pending.connector), form)
        return self._token_set(answer, refresh_token=None, verified="0")

    async def save(self, connector: str, token_set: dict[str, str]) -> None:
        """Seal a new token set (project-wide, like every credential a page stores) and use it from now on."""
        await self._vault.put(connector, token_set, name=TOKEN_NAME)
        self.forget(connector)

    async def check_client(self, config: OAuth2Auth, connector: str, client: dict[str, str]) -> None:
        """For client credentials: get one token with these credentials before they are stored, so a
        typo shows on the page rather than on the agent's next call. The token is not kept.

        Raises:
            AuthorizationRefused: the token endpoint refused the client.
            UpstreamError: the token endpoint could not be reached.
        """
        await self._grant(connector, config, client, {"grant_type": "client_credentials", **_scope(config)})

    # -- the token endpoint ---------------------------------------------------------------------

    async def _grant(
        self, connector: str, config: OAuth2Auth, client: dict[str, str], form: dict[str, str]
    ) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if config.client_auth == "basic":
            # RFC 6749 section 2.3.1: each part form-urlencoded before the Basic encoding.
            pair = f"{quote_plus(client['client_id'])}:{quote_plus(client['client_secret'])}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form = {**form, "client_id": client["client_id"], "client_secret": client["client_secret"]}
        url = httpx2.URL(config.token_url)
        where = f"the token endpoint of {connector} ({url.host})"
        try:
            with anyio.fail_after(self._timeout):
                async with self._http.stream(
                    "POST", url, data=form, headers=headers, timeout=self._timeout, follow_redirects=False
                ) as response:
                    body = await _read_capped(response)
        except (TimeoutError, httpx2.TimeoutException):
            raise UpstreamError("upstream_timeout", f"{where} did not answer in time; try again later") from None
        except httpx2.HTTPError as exc:
            raise UpstreamError(
                "upstream_unreachable",
                f"could not reach {where} ({type(exc).__name__}); check the connector's token_url and try again",
            ) from None
        answer = _json_object(body)
        if response.status_code >= 400 or answer is None or "error" in (answer or {}):
            code = _error_code(answer)
            if 400 <= response.status_code < 500 or code:
                raise AuthorizationRefused(
                    f"{where} refused the request (HTTP {response.status_code}{', ' + code if code else ''})"
                )
            raise UpstreamError(
                "upstream_error",
                f"{where} answered HTTP {response.status_code} without a token; try again later",
                upstream_status=response.status_code,
            )
        access = answer.get("access_token")
        token_type = str(answer.get("token_type", "bearer"))
        if not isinstance(access, str) or not access or token_type.lower() != "bearer":
            raise UpstreamError(
                "upstream_error",
                f"{where} answered without a bearer access_token; the gateway can only use bearer tokens",
            )
        return answer

    def _issued(self, answer: dict[str, Any], *, verified: bool, stored_as: str | None) -> IssuedToken:
        return IssuedToken(
            SecretValue(answer["access_token"]), self._expiry(answer.get("expires_in")), verified, stored_as
        )

    def _token_set(self, answer: dict[str, Any], *, refresh_token: str | None, verified: str) -> dict[str, str]:
        expires_at = self._expiry(answer.get("expires_in"))
        token_set = {
            "access_token": str(answer["access_token"]),
            "expires_at": expires_at.isoformat() if expires_at else "",
            "scope": str(answer.get("scope", ""))[:1000],
            "verified": verified,
        }
        refresh = answer.get("refresh_token") or refresh_token
        if isinstance(refresh, str) and refresh:
            token_set["refresh_token"] = refresh
        return token_set

    def _from_set(self, stored: dict[str, str], *, stored_as: str) -> IssuedToken:
        expires = stored.get("expires_at") or ""
        try:
            expires_at = datetime.fromisoformat(expires) if expires else None
        except ValueError:
            expires_at = self._clock.now()  # unreadable: treat as expired, so it is refreshed
        return IssuedToken(SecretValue(stored["access_token"]), expires_at, stored.get("verified") == "1", stored_as)

    def _expiry(self, expires_in: Any) -> datetime | None:
        """When to stop using a token: its lifetime less a margin (a tenth, at most 30 s), so a token
        does not expire between the check and the upstream reading it."""
        if isinstance(expires_in, str) and expires_in.isdigit():
            expires_in = int(expires_in)
        if not isinstance(expires_in, int | float) or isinstance(expires_in, bool) or expires_in <= 0:
            return None
        margin = min(30.0, expires_in / 10)
        return self._clock.now() + timedelta(seconds=float(expires_in) - margin)

    def __repr__(self) -> str:
        return f"OAuth2Tokens(cached={len(self._cache)})"


class OAuth2Session:
    """One call's use of an ``oauth2`` connector: the auth flow ``LastMeterAuth`` delegates to."""

    def __init__(
        self,
        tokens: OAuth2Tokens,
        config: OAuth2Auth,
        connector: str,
        principal: str,
        client: SealedCredential | None,
    ) -> None:
        self._tokens = tokens
        self.config = config
        self.connector = connector
        self.principal = principal
        self.client = client

    async def flow(
        self, request: httpx2.Request, on_secret: Callable[[SecretValue], None] | None
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """Bearer token on, send; on a 401 one renewal and one retry (the second ``yield``, as
        httpx2's ``DigestAuth`` does); a 403 or anything else is the caller's to map."""
        token = await self._tokens.token(self)
        self._put(request, token, on_secret)
        response = yield request
        if response.status_code != 401:
            if not token.verified:
                await self._tokens.confirm(self, token)
            return
        renewed = await self._tokens.renew(self, token)
        if renewed is None:
            self._tokens.evict(self)
            self._terminal_if_fresh(token)
            return
        self._put(request, renewed, on_secret)
        response = yield request
        if response.status_code == 401:
            self._tokens.evict(self)
            self._terminal_if_fresh(renewed)
        elif not renewed.verified:
            await self._tokens.confirm(self, renewed)

    def _terminal_if_fresh(self, token: IssuedToken) -> None:
        if self.config.flow == "client_credentials":
            raise UpstreamError(
                "auth_failed",
                f"{self.connector} rejects the tokens its token endpoint issues to this client (401), even a "
                "new one. Retrying will not help: the client may lack access to this API or need other scopes. "
                "Tell the user; to enter other client credentials, call connect.",
                upstream_status=401,
            )
        if not token.verified:
            raise UpstreamError(
                "auth_failed",
                f"The user just authorized {self.connector}, but it still rejects the new token (401). Sending "
                "another connect link will not help: the account may lack access to this API, or the connector "
                "may need other scopes. Tell the user what happened.",
                upstream_status=401,
            )

    @staticmethod
    def _put(request: httpx2.Request, token: IssuedToken, on_secret: Callable[[SecretValue], None] | None) -> None:
        if on_secret is not None:
            on_secret(token.access)
        apply_oauth2(request, token.access)

    def __repr__(self) -> str:
        return f"OAuth2Session(connector={self.connector!r}, principal={self.principal!r}, flow={self.config.flow!r})"


# -- helpers ----------------------------------------------------------------------------------


def _scope(config: OAuth2Auth) -> dict[str, str]:
    return {"scope": " ".join(config.scopes)} if config.scopes else {}


def _client(sealed: SealedCredential | None, connector: str) -> dict[str, str]:
    if sealed is None:
        raise CredentialMissing(connector)
    return secret_fields("oauth2", sealed.open(), ("client_id", "client_secret"))


def _token_set(sealed: SealedCredential) -> dict[str, str]:
    value = sealed.open().reveal()
    if not isinstance(value, dict) or not value.get("access_token"):
        raise CredentialError(
            f"the stored oauth2 token set of {sealed.key.connector!r} is unreadable; connect it again"
        )
    return value


async def _read_capped(response: httpx2.Response) -> bytes:
    body = b""
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_TOKEN_RESPONSE:
            break
    return body[:MAX_TOKEN_RESPONSE]


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _error_code(answer: dict[str, Any] | None) -> str:
    """The RFC 6749 section 5.2 ``error`` code if it looks like one; never free text from the provider."""
    code = (answer or {}).get("error")
    return code if isinstance(code, str) and _ERROR_CODE.match(code) else ""
