"""Last-meter auth: put a connector's credential on the final outbound request (SPEC 2.1, 5).

``LastMeterAuth`` is an ``httpx2.Auth``: the client hands its ``auth_flow`` the request exactly
as it will be sent, and that is the only moment a stored credential is decrypted for a call.
``apply_auth`` is the one function that writes a secret onto a request; it dispatches on the
manifest's ``auth:`` block, one module per kind. Kinds this build cannot apply yet raise
``UnsupportedAuth`` rather than sending the request without credentials.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import assert_never

import httpx2

from ..credentials import SealedCredential, SecretValue
from ..errors import CredentialMissing, UnsupportedAuth
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
from .api_key import apply_api_key
from .basic import apply_basic
from .bearer import apply_bearer
from .custom import apply_custom

__all__ = ["SUPPORTED_KINDS", "LastMeterAuth", "apply_auth", "needs_secret"]

SUPPORTED_KINDS = ("none", "bearer", "basic", "api_key", "custom")


def needs_secret(config: AuthConfig) -> bool:
    """Whether calls through a connector with this auth need a stored credential."""
    return not isinstance(config, NoAuth)


def apply_auth(
    request: httpx2.Request, config: AuthConfig, secret: SecretValue | None, *, connector: str | None = None
) -> None:
    """Write the credential onto ``request`` as ``config`` says. The request is mutated in place.

    Args:
        request: the final request, as it will go on the wire.
        config: the connector's ``auth:`` block.
        secret: the opened credential; None only for ``none``.
        connector: named in ``CredentialMissing`` when there is no secret.

    Raises:
        CredentialMissing: the kind needs a secret and none was given.
        CredentialError: the secret has the wrong shape or cannot be placed (never holding it).
        UnsupportedAuth: the kind is not implemented in this build.
    """
    match config:
        case NoAuth():
            return
        case OAuth1Auth() | HmacAuth() | AwsSigV4Auth() | MtlsAuth() | OAuth2Auth():
            raise _unsupported(config.type)
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


def _unsupported(kind: str) -> UnsupportedAuth:
    return UnsupportedAuth(
        f"auth kind {kind!r} is not implemented in this build yet; this connector cannot be called "
        f"until it is. If the API also accepts one of {', '.join(SUPPORTED_KINDS)}, "
        "declare that under the connector's 'auth:' instead"
    )


class LastMeterAuth(httpx2.Auth):
    """Open the connector's sealed credential and apply it to the final request.

    Args:
        config: the connector's ``auth:`` block.
        credential: what ``CredentialVault.sealed`` found; None when nothing is stored.
        on_secret: called with the opened secret before it is applied, so the caller can learn
            what to redact from the response without ever holding the secret itself.
        connector: named in ``CredentialMissing`` when ``credential`` is None.
    """

    def __init__(
        self,
        config: AuthConfig,
        credential: SealedCredential | None,
        *,
        on_secret: Callable[[SecretValue], None] | None = None,
        connector: str | None = None,
    ) -> None:
        self._config = config
        self._credential = credential
        self._on_secret = on_secret
        self._connector = connector or (credential.key.connector if credential is not None else None)

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        if self._config.type not in SUPPORTED_KINDS:
            # Fail before decrypting: no secret is opened for a request that cannot be sent.
            raise _unsupported(self._config.type)
        secret: SecretValue | None = None
        if needs_secret(self._config) and self._credential is not None:
            secret = self._credential.open()
            if self._on_secret is not None:
                self._on_secret(secret)
        apply_auth(request, self._config, secret, connector=self._connector)
        del secret  # hold the plaintext no longer than building this request takes
        yield request

    def __repr__(self) -> str:
        return f"LastMeterAuth(type={self._config.type!r}, credential={self._credential!r})"
