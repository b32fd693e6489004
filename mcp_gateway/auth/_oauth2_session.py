"""One call's use of an ``oauth2`` connector: the access token it carries, and the auth flow that puts
it on the request, renews it once after a 401 and tells a login loop from an expired authorization.

Where the tokens come from (the cache, the vault, the token endpoint) is a ``TokenSource``: the
gateway's token broker ``mcp_gateway.core.oauth2_tokens.OAuth2Tokens``, which this package does not
import (it needs the store and the vault).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import httpx2

from ..manifest import OAuth2Auth
from ..primitives.secrets import SealedCredential, SecretValue
from ..vocabulary.errors import CredentialError, UpstreamError
from ._base import check_header_value

__all__ = ["IssuedToken", "OAuth2Session", "TokenSource", "apply_oauth2"]


def apply_oauth2(request: httpx2.Request, access_token: SecretValue) -> None:
    """Put an access token on the request (RFC 6750 section 2.1)."""
    token = access_token.reveal()
    if not isinstance(token, str):
        raise CredentialError("the oauth2 access token has the wrong shape; connect the connector again")
    request.headers["Authorization"] = check_header_value("oauth2", "header 'Authorization'", f"Bearer {token}")


@dataclass(frozen=True)
class IssuedToken:
    """An access token ready to use. Its repr shows only where it came from and when it expires."""

    access: SecretValue
    expires_at: datetime | None
    verified: bool
    """False until an upstream has answered something other than 401 to it (see ``oauth2``: no login loop)."""
    stored_as: str | None
    """The principal its token set is sealed under, or None for a client credentials token (memory only)."""

    def fresh(self, now: datetime) -> bool:
        return self.expires_at is None or now < self.expires_at


class TokenSource(Protocol):
    """Where a session's access tokens come from, and where it reports what the upstream said of them."""

    async def token(self, session: OAuth2Session) -> IssuedToken: ...

    async def renew(self, session: OAuth2Session, rejected: IssuedToken) -> IssuedToken | None: ...

    async def confirm(self, session: OAuth2Session, token: IssuedToken) -> None: ...

    def evict(self, session: OAuth2Session) -> None: ...


class OAuth2Session:
    """One call's use of an ``oauth2`` connector: the auth flow ``LastMeterAuth`` delegates to."""

    def __init__(
        self,
        tokens: TokenSource,
        config: OAuth2Auth,
        connector: str,
        principal: str,
        client: SealedCredential | None,
        *,
        personal: bool = False,
    ) -> None:
        self._tokens = tokens
        self.config = config
        self.connector = connector
        self.principal = principal
        self.client = client
        self.personal = personal
        """Only ``principal``'s own token set will do (``credentials: per_user``), never the project-wide one."""

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
