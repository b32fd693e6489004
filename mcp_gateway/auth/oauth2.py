"""``oauth2``: access tokens from an OAuth 2.0 provider (RFC 6749), put on the request as a bearer token.

What lives here is what one request needs and nothing that keeps state: the names the protocol
fixes (the callback path, the credential name of a token set), the PKCE challenge (RFC 7636), the
token endpoint exchange (``_oauth2_endpoint``) and one call's session (``_oauth2_session``), which
gets its access token from a ``TokenSource``. Where tokens come from and are kept (the memory
cache, the vault, refresh leases and authorizations in flight in the shared store) is the token
broker ``mcp_gateway.core.oauth2_tokens.OAuth2Tokens``: it needs the store and the vault, which
this package must not import.
"""

from __future__ import annotations

import base64
import hashlib

from ..primitives.secrets import OAUTH2_TOKEN_NAME
from ._oauth2_endpoint import AuthorizationRefused, request_token
from ._oauth2_session import IssuedToken, OAuth2Session, TokenSource, apply_oauth2

__all__ = [
    "CALLBACK_PATH",
    "TOKEN_NAME",
    "AuthorizationRefused",
    "IssuedToken",
    "OAuth2Session",
    "TokenSource",
    "apply_oauth2",
    "pkce_challenge",
    "request_token",
]

TOKEN_NAME = OAUTH2_TOKEN_NAME
"""The credential name under which a connector's token set is sealed."""
CALLBACK_PATH = "/oauth/callback"


def pkce_challenge(verifier: str) -> str:
    """RFC 7636 section 4.2, ``S256``: BASE64URL(SHA256(ASCII(verifier))) without padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode()
