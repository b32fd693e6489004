"""Last-meter auth: put a connector's credential on the final outbound request.

``LastMeterAuth`` is an ``httpx2.Auth``: the client hands its ``auth_flow`` the request exactly
as it will be sent, and that is the only moment a stored credential is decrypted for a call.
``apply_auth`` is the one function that writes a secret onto a request; it dispatches on the
manifest's ``auth:`` block, one module per kind. The signing kinds (``oauth1``, ``hmac``,
``aws_sigv4``) run last, over the final method, URL, query and body, and get their time and nonce
from the caller so tests can fix them. ``mtls`` writes nothing on the request: its certificate
goes in the TLS handshake, by a client of its own (``mtls.MtlsClients``). ``oauth2`` gets its
access token from an ``oauth2.OAuth2Session`` (cached, refreshed on expiry and once after a 401: a
second ``yield`` in ``async_auth_flow``, as httpx2's ``DigestAuth`` does).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Generator
from typing import assert_never

import httpx2

from ..manifest import (
    ApiKeyAuth,
    AuthConfig,
    AwsSigV4Auth,
    BasicAuth,
    BearerAuth,
    CustomAuth,
    HmacAuth,
    MtlsAuth,
    NoAuth,
    OAuth1Auth,
    OAuth2Auth,
)
from ..manifest.auth import needs_secret
from ..primitives.secrets import SealedCredential, SecretValue
from ..vocabulary.clock import Clock, SystemClock
from ..vocabulary.errors import CredentialError, CredentialMissing, UnsupportedAuth
from ..vocabulary.model import AuthKind
from ._base import random_nonce
from .api_key import apply_api_key
from .basic import apply_basic
from .bearer import apply_bearer
from .custom import apply_custom
from .hmac import apply_hmac
from .mtls import MtlsClients
from .oauth1 import apply_oauth1
from .oauth2 import OAuth2Session, apply_oauth2
from .sigv4 import apply_sigv4

__all__ = ["BODY_SIGNING_KINDS", "LastMeterAuth", "MtlsClients", "apply_auth", "needs_secret"]

BODY_SIGNING_KINDS: frozenset[AuthKind] = frozenset({"oauth1", "hmac", "aws_sigv4"})
"""Kinds whose signature covers the body, so httpx2 must read it before the auth flow runs."""


def apply_auth(
    request: httpx2.Request,
    config: AuthConfig,
    secret: SecretValue | None,
    *,
    connector: str | None = None,
    clock: Clock | None = None,
    nonce: Callable[[], str] = random_nonce,
) -> None:
    """Write the credential onto ``request`` as ``config`` says. The request is mutated in place.

    Args:
        request: the final request, as it will go on the wire (for the signing kinds, with its body read).
        config: the connector's ``auth:`` block.
        secret: the opened credential; None only for ``none``.
        connector: named in ``CredentialMissing`` when there is no secret.
        clock: the signing time of ``oauth1``, ``hmac`` and ``aws_sigv4`` (default: the system clock).
        nonce: the ``oauth1`` nonce source.

    Raises:
        CredentialMissing: the kind needs a secret and none was given.
        CredentialError: the secret has the wrong shape or cannot be placed (never holding it).
        ArgumentError: the request cannot be signed as it is (an ``oauth_`` parameter of its own).
        UnsupportedAuth: the kind is not implemented in this build.
    """
    try:
        _apply_kind(request, config, secret, connector=connector, clock=clock, nonce=nonce)
    except UnicodeEncodeError:
        # A value stored before such values were refused where they are entered; the error's own text
        # would point at the offending characters, so it is dropped.
        raise CredentialError(
            f"the stored {config.type} secret holds a character an HTTP header cannot carry (beyond ASCII); "
            "enter it again in plain ASCII with `mcp-gateway secret set` (or reconnect)"
        ) from None


def _apply_kind(
    request: httpx2.Request,
    config: AuthConfig,
    secret: SecretValue | None,
    *,
    connector: str | None,
    clock: Clock | None,
    nonce: Callable[[], str],
) -> None:
    match config:
        case NoAuth():
            return
        case OAuth2Auth():
            # ``secret`` is the access token an OAuth2Session obtained (auth/oauth2.py), not the client's.
            apply_oauth2(request, _present(secret, connector))
        case OAuth1Auth():
            now = (clock or SystemClock()).now()
            apply_oauth1(request, config, _present(secret, connector), now=now, nonce=nonce())
        case HmacAuth():
            apply_hmac(request, config, _present(secret, connector), now=(clock or SystemClock()).now())
        case AwsSigV4Auth():
            apply_sigv4(request, config, _present(secret, connector), now=(clock or SystemClock()).now())
        case MtlsAuth():
            # Nothing goes on the request: the certificate is presented in the TLS handshake by the
            # connector's own client (MtlsClients), which the HTTP executor picks.
            _present(secret, connector)
        case BearerAuth():
            apply_bearer(request, config, _present(secret, connector))
        case BasicAuth():
            apply_basic(request, config, _present(secret, connector))
        case ApiKeyAuth():
            apply_api_key(request, config, _present(secret, connector))
        case CustomAuth():
            apply_custom(request, config, _present(secret, connector))
        case _:
            assert_never(config)


def _present(secret: SecretValue | None, connector: str | None) -> SecretValue:
    if secret is None:
        raise CredentialMissing(connector or "(unnamed)")
    return secret


class LastMeterAuth(httpx2.Auth):
    """Open the connector's sealed credential and apply it to the final request.

    Args:
        config: the connector's ``auth:`` block.
        credential: what ``CredentialVault.sealed`` found; None when nothing is stored.
        on_secret: called with the opened secret before it is applied, so the caller can learn
            what to redact from the response without ever holding the secret itself.
        connector: named in ``CredentialMissing`` when ``credential`` is None.
        clock: the signing time (default: the system clock); each request is signed when sent.
        nonce: the ``oauth1`` nonce source.
        oauth2: for ``oauth2`` connectors, where this call's access token comes from.
    """

    def __init__(
        self,
        config: AuthConfig,
        credential: SealedCredential | None,
        *,
        on_secret: Callable[[SecretValue], None] | None = None,
        connector: str | None = None,
        clock: Clock | None = None,
        nonce: Callable[[], str] = random_nonce,
        oauth2: OAuth2Session | None = None,
    ) -> None:
        self._config = config
        self._oauth2 = oauth2
        self._credential = credential
        self._on_secret = on_secret
        self._connector = connector or (credential.key.connector if credential is not None else None)
        self._clock = clock or SystemClock()
        self._nonce = nonce
        self.requires_request_body = config.type in BODY_SIGNING_KINDS

    @property
    def config(self) -> AuthConfig:
        """The connector's ``auth:`` block (the HTTP executor picks an mTLS client by it)."""
        return self._config

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if not isinstance(self._config, OAuth2Auth):
            # What httpx2's own async flow over ``auth_flow`` does, without the sync generator under
            # it: every call goes through here, and each generator layer was a measurable cost.
            if self.requires_request_body:
                await request.aread()
            self._apply(request)
            response = yield request
            if self.requires_response_body:
                await response.aread()
            return
        if self._oauth2 is None:
            raise UnsupportedAuth("an oauth2 connector needs the gateway's token store; this client has none")
        flow = self._oauth2.flow(request, self._on_secret)
        try:
            request = await flow.__anext__()
            while True:
                response = yield request
                try:
                    request = await flow.asend(response)
                except StopAsyncIteration:
                    return
        finally:
            await flow.aclose()

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        if isinstance(self._config, OAuth2Auth):
            # Getting a token is I/O: only the async flow above can do it.
            raise UnsupportedAuth("oauth2 connectors are called through the async client only")
        self._apply(request)
        yield request

    def _apply(self, request: httpx2.Request) -> None:
        """Open the credential and write it onto ``request`` (any kind but ``oauth2``)."""
        if isinstance(self._config, MtlsAuth):
            # The certificate travels in the handshake, not on the request: nothing to decrypt here.
            if self._credential is None:
                raise CredentialMissing(self._connector or "(unnamed)")
            return
        secret: SecretValue | None = None
        if self._credential is not None and needs_secret(self._config):
            secret = self._credential.open()
            if self._on_secret is not None:
                self._on_secret(secret)
        apply_auth(request, self._config, secret, connector=self._connector, clock=self._clock, nonce=self._nonce)
        del secret  # hold the plaintext no longer than building this request takes

    @property
    def credential(self) -> SealedCredential | None:
        """Which stored credential this applies (still sealed; its repr names it, never its bytes)."""
        return self._credential

    def open_secret(self) -> SecretValue | None:
        """The opened secret, for a last meter that is not an HTTP request: a stdio MCP server's
        environment, filled in as the child is spawned (``execution/mcp_sessions.py``). Feeds ``on_secret``
        like ``auth_flow`` does. None for ``auth: none``.

        Raises:
            CredentialMissing: the kind needs a secret and none is stored.
            CredentialError: the stored secret cannot be opened.
        """
        if not needs_secret(self._config):
            return None
        if self._credential is None:
            raise CredentialMissing(self._connector or "(unnamed)")
        secret = self._credential.open()
        if self._on_secret is not None:
            self._on_secret(secret)
        return secret

    def __repr__(self) -> str:
        return f"LastMeterAuth(type={self._config.type!r}, credential={self._credential!r})"
