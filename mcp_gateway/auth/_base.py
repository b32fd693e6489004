"""Shared checks for the auth kinds: the secret has the shape the kind needs, and is wire-safe.

Every message here names the kind and the field at fault, never the value.
"""

from __future__ import annotations

from ..credentials import SecretValue
from ..errors import CredentialError

__all__ = ["check_header_value", "secret_fields", "secret_text"]

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
    if any(c in value for c in "\r\n\0"):
        raise CredentialError(
            f"the {kind} secret cannot go in {where}: it contains a line break or NUL character; {_RESET_HINT}"
        )
    return value
