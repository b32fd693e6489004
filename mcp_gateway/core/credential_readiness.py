"""Whether a connector's calls could run without a human connecting first, from which credentials
are stored: the keys only (connector, principal, name), never a value, and nothing decrypted.

The one decision behind ``connectors``' status, ``discover``'s and ``describe``'s ``needs_auth`` and
a call's "connect first": ``CredentialBroker`` and ``OAuth2Tokens`` ask it over the vault's keys,
and the command line's stored-state answers (``cli/listing.py``, ``cli/stored_discover.py``) over the
keys the state file holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..manifest import ConnectorConfig, OAuth2Auth
from ..manifest.auth import needs_secret
from ..primitives.secrets import OAUTH2_TOKEN_NAME, PROJECT_WIDE, CredentialKey

__all__ = ["configured", "oauth2_ready", "uncarried_personal"]


def oauth2_ready(auth: OAuth2Auth, keys: Iterable[CredentialKey], principal: str | None, *, personal: bool) -> bool:
    """Whether a call could get a token: the client's credentials are stored, and for the
    authorization code grant a token set too. ``keys`` are the connector's. With ``personal`` the
    token set must be ``principal``'s own (the client's credentials stay the project's)."""
    usable = (principal, PROJECT_WIDE)
    mine = [k for k in keys if principal is None or k.principal in usable]
    if not any(k.name == "default" for k in mine):
        return False
    if auth.flow == "client_credentials":
        return True
    owners = (principal,) if personal else usable
    return any(k.name == OAUTH2_TOKEN_NAME and (principal is None or k.principal in owners) for k in mine)


def configured(cfg: ConnectorConfig, keys: Iterable[CredentialKey], principal: str | None = None) -> bool:
    """Whether calls to ``cfg`` could run without a human connecting first (an oauth2 authorization
    code connector needs its token set too, not just the client's credentials). ``keys`` are the
    stored ones (any connector's). With ``principal``, for a ``per_user`` connector: whether that user
    has connected (one user's state is not another's)."""
    own = [k for k in keys if k.connector == cfg.slug]
    per_user = principal is not None and cfg.credentials == "per_user"
    if isinstance(cfg.auth, OAuth2Auth):
        if per_user:
            return oauth2_ready(cfg.auth, own, principal, personal=principal != PROJECT_WIDE)
        if cfg.credentials == "shared":  # the team's sign-in: a personal one left from per_user is not used
            return oauth2_ready(cfg.auth, own, PROJECT_WIDE, personal=True)
        return oauth2_ready(cfg.auth, own, None, personal=False)
    if not needs_secret(cfg.auth):
        return True
    if per_user:
        return any(k.principal == principal for k in own)
    if cfg.credentials == "shared":  # its calls carry only the team's (``credential_broker.carrier``)
        return any(k.principal == PROJECT_WIDE for k in own)
    return bool(own)


def uncarried_personal(cfg: ConnectorConfig, keys: Iterable[CredentialKey]) -> list[CredentialKey]:
    """The personal credentials stored for ``cfg`` that no call carries: on a ``shared`` connector,
    those left from a time it was ``per_user`` (its calls carry only the team's). For the operator,
    never an agent: they name other users."""
    if cfg.credentials != "shared":
        return []
    return [k for k in keys if k.connector == cfg.slug and k.principal != PROJECT_WIDE]
