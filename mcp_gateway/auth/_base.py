"""Shared pieces of the auth kinds: the secret has the shape the kind needs and is wire-safe, and
what signing kinds read from the final request.

Every message here names the kind and the field at fault, never the value.
"""

from __future__ import annotations

import secrets

import httpx2

from ..primitives.secrets import SecretValue
from ..vocabulary.errors import CredentialError

__all__ = ["check_header_value", "random_nonce", "request_body", "secret_fields", "secret_text"]

_RESET_HINT = "enter it again with `mcp-gateway secret set`"


def secret_text(kind: str, secret: SecretValue) -> str:
    """The secret as one string, for kinds that take a plain string."""
    value = secret.reveal()
    if not isinstance(value, str):
        raise CredentialError(f"{kind} auth needs a plain-string secret, but a JSON object is stored; {_RESET_HINT}")
    return value


def secret_fields(kind: str, secret: SecretValue, required: tuple[str, ...]) -> dict[str, str]:
    """The secret as a JSON object holding at least ``required``."""
    value = secret.reveal()
    if not isinstance(value, dict):
        raise CredentialError(f"{kind} auth needs a JSON-object secret, but a plain string is stored; {_RESET_HINT}")
    missing = [f for f in required if not value.get(f)]
    if missing:
        raise CredentialError(f"the stored {kind} secret has no {', '.join(map(repr, missing))}; {_RESET_HINT}")
    return value


def check_header_value(kind: str, where: str, value: str) -> str:
    """Refuse values that would end the header early (CR, LF) or are not valid in one (NUL)."""
    if "\r" in value or "\n" in value or "\0" in value:
        raise CredentialError(
            f"the {kind} secret cannot go in {where}: it contains a line break or NUL character; {_RESET_HINT}"
        )
    return value


def random_nonce() -> str:
    """A fresh nonce: 30 hex digits (120 random bits). Servers built on oauthlib accept 20 to 30
    alphanumerics by default, so a longer or URL-safe-base64 nonce would be refused there."""
    return secrets.token_hex(15)


def request_body(request: httpx2.Request) -> bytes:
    """The body exactly as it will be sent, for the kinds that sign it.

    ``LastMeterAuth`` sets ``requires_request_body`` for those kinds, so httpx2 has read a streamed
    body before the auth flow runs; bodies built by ``execution.build_request`` are bytes anyway.
    An unread stream raises ``httpx2.RequestNotRead``: a bug in the caller, not the agent's mistake.
    """
    return request.content
