"""OAuth2 authorizations in flight: what the callback needs, sealed for the shared store.

Between the connect page sending a human to the provider and the provider sending them back to
``/oauth/callback`` (on whichever instance the load balancer picks), the gateway keeps the PKCE
verifier and the connect link the sign-in belongs to. They are stored under the SHA-256 of the
``state`` and encrypted (AES-256-GCM) under a key derived from the state itself with HKDF: the
state is never stored, so a leaked database row opens nothing, while the one request that
carries the state back can open it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["PENDING_KIND", "PendingAuthorization", "open_pending", "seal_pending"]

PENDING_KIND = "oauth2_state"
"""The ``Store`` ephemeral kind of authorizations in flight (key: the state's SHA-256)."""
_INFO = b"mcp-gateway/oauth2-state/v1"
_NONCE_BYTES = 12


@dataclass(frozen=True)
class PendingAuthorization:
    """One human on their way to the provider: what the callback needs to finish, bound to one link."""

    connector: str
    principal: str
    link_token: str
    """The connect link it came from; consumed when the authorization completes."""
    verifier: str = ""
    redirect_uri: str = ""
    expires_at: datetime | None = None

    def __repr__(self) -> str:
        return f"PendingAuthorization(connector={self.connector!r}, principal={self.principal!r})"


def _state_cipher(state: str) -> AESGCM:
    # Derived from the state, which is never stored (only its SHA-256 is): a leaked database row
    # reveals neither the PKCE verifier nor the connect link it belongs to.
    key = HKDF(algorithm=SHA256(), length=32, salt=None, info=_INFO).derive(state.encode())
    return AESGCM(key)


def seal_pending(state: str, pending: PendingAuthorization) -> bytes:
    fields = {
        "connector": pending.connector,
        "principal": pending.principal,
        "link_token": pending.link_token,
        "verifier": pending.verifier,
        "redirect_uri": pending.redirect_uri,
        "expires_at": pending.expires_at.isoformat() if pending.expires_at else None,
    }
    nonce = os.urandom(_NONCE_BYTES)
    return nonce + _state_cipher(state).encrypt(nonce, json.dumps(fields).encode(), _INFO)


def open_pending(state: str, sealed: bytes) -> PendingAuthorization | None:
    try:
        fields = json.loads(_state_cipher(state).decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], _INFO))
        expires = fields.pop("expires_at")
        return PendingAuthorization(**fields, expires_at=datetime.fromisoformat(expires) if expires else None)
    except (InvalidTag, ValueError, TypeError, KeyError, AttributeError):
        return None  # not ours, or tampered with: as unknown as a made-up state
