"""Which credential a connector's traffic carries, and whether it has one yet.

Three things send a connector's credential upstream: a ``call``, a sync reading the source with it
(GraphQL introspection, with the project-wide credential) and the listing of an MCP server's tools
(with the caller's credential, else the project-wide one). They all build their ``LastMeterAuth``
here, with ``auth_for``, so the credential is chosen, sealed and (for ``oauth2``) tied to a token
session the same way everywhere. The broker never opens a secret: ``LastMeterAuth`` does, while
the outbound request is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..auth import LastMeterAuth, needs_secret
from ..manifest import ConnectorConfig, OAuth2Auth
from ..primitives.secrets import PROJECT_WIDE, SealedCredential, SecretValue
from ..services.credentials import CredentialVault
from ..services.logs import known_secrets
from ..vocabulary.model import a_credential
from . import credential_readiness
from .known_credentials import KnownCredentials
from .oauth2_tokens import OAuth2Tokens

__all__ = ["CallCredential", "CredentialBroker", "carrier"]


class _Unset:
    """``for_call``'s "look the credential up": None is an answer (none stored)."""


UNSET = _Unset()


@dataclass(frozen=True)
class CallCredential:
    """What a call will send: the sealed credential (None for a connector that needs none), or
    ``missing``, why it cannot run until a human connects."""

    sealed: SealedCredential | None
    missing: str | None = None


class CredentialBroker:
    """Looks up sealed credentials in the vault and wraps them in the auth object a request carries."""

    def __init__(self, vault: CredentialVault, oauth2: OAuth2Tokens) -> None:
        self.vault = vault
        self.oauth2 = oauth2
        self.known = KnownCredentials(vault)
        """Every stored credential taught to the redaction of rows and logs, before a call records anything."""

    async def sealed(self, cfg: ConnectorConfig, principal: str) -> SealedCredential | None:
        """The credential ``principal``'s traffic to ``cfg`` carries: on a ``credentials: per_user``
        connector their own, else the project-wide one (a personal one left from a ``per_user``
        period is not used, see ``carrier``); None when the connector needs none or none is stored."""
        if not needs_secret(cfg.auth):
            return None
        principal = carrier(cfg, principal)
        return await self.vault.sealed(cfg.slug, principal=principal, own_only=_own_only(cfg, principal))

    def auth_for(
        self,
        cfg: ConnectorConfig,
        principal: str,
        sealed: SealedCredential | None,
        *,
        on_secret: Callable[[SecretValue], None] | None = None,
    ) -> LastMeterAuth:
        """The auth a request to ``cfg``'s upstream carries: ``sealed`` opened at the last moment, and
        for ``oauth2`` the token session of ``principal``. ``on_secret`` learns every value sent (for
        redacting it from the answer)."""
        session = (
            self.oauth2.session(cfg.auth, cfg.slug, principal, sealed, personal=_personal(cfg, principal))
            if isinstance(cfg.auth, OAuth2Auth)
            else None
        )
        return LastMeterAuth(cfg.auth, sealed, on_secret=_also_logged(on_secret), connector=cfg.slug, oauth2=session)

    async def sync_auth(self, cfg: ConnectorConfig, on_secret: Callable[[SecretValue], None]) -> LastMeterAuth:
        """The project-wide credential, for what a source reads at sync (GraphQL introspection)."""
        return self.auth_for(cfg, PROJECT_WIDE, await self.sealed(cfg, PROJECT_WIDE), on_secret=on_secret)

    async def learned(self, cfg: ConnectorConfig, principal: str) -> SealedCredential | None:
        """``sealed``, taught to the redaction of rows and logs: an agent may pass it as an argument
        (a user pasted it into the chat), and what the call records must not keep it."""
        sealed = await self.sealed(cfg, principal)
        if sealed is not None:
            self.known.learn(sealed)
        return sealed

    async def for_call(
        self, cfg: ConnectorConfig, user: str, *, sealed: SealedCredential | _Unset | None = UNSET
    ) -> CallCredential:
        """The credential ``user``'s call of ``cfg`` carries (``sealed`` when the caller has just
        looked it up with ``learned``), or why a human must connect first."""
        if isinstance(sealed, _Unset):
            sealed = await self.learned(cfg, user)
        if needs_secret(cfg.auth) and sealed is None:
            return CallCredential(
                None, f"{cfg.slug} needs {a_credential(cfg.auth.type)}; ask the user to open the link."
            )
        if isinstance(cfg.auth, OAuth2Auth) and not await self.oauth2.ready(
            cfg.auth, cfg.slug, carrier(cfg, user), personal=_personal(cfg, user)
        ):
            return CallCredential(
                sealed, f"{cfg.slug} needs the user to sign in with OAuth2; ask them to open the link."
            )
        return CallCredential(sealed)

    async def configured(self, cfg: ConnectorConfig, principal: str | None = None) -> bool:
        """Whether calls could run without a human connecting first (an oauth2 authorization code
        connector needs its token set too, not just the client's credentials). With ``principal``, for
        a ``per_user`` connector: whether that user has connected (one user's state is not another's)."""
        if not needs_secret(cfg.auth):
            return True
        return credential_readiness.configured(cfg, await self.vault.keys(cfg.slug), principal)

    async def needs_auth(self, cfg: ConnectorConfig, principal: str | None = None) -> bool:
        return not await self.configured(cfg, principal)


def carrier(cfg: ConnectorConfig, principal: str) -> str:
    """Whose credential ``principal``'s calls of ``cfg`` carry: their own on a ``per_user`` connector,
    else the team's. A personal credential stored while the connector was ``per_user`` stays in the
    vault when it goes back to ``shared`` but is not used: the team's is what the operator rotates and
    every user is told is carried (``doctor`` names the leftovers)."""
    return principal if cfg.credentials == "per_user" else PROJECT_WIDE


def _personal(cfg: ConnectorConfig, principal: str) -> bool:
    """A ``per_user`` connector's calls carry the caller's own credential, never the project-wide one."""
    return cfg.credentials == "per_user" and principal != PROJECT_WIDE


def _own_only(cfg: ConnectorConfig, principal: str) -> bool:
    """Whether the stored credential must be ``principal``'s own. For ``oauth2`` it is the client's,
    which the project shares; what is personal there is the token set, which ``OAuth2Tokens`` reads
    only under the caller (``_personal``)."""
    return _personal(cfg, principal) and not isinstance(cfg.auth, OAuth2Auth)


def _also_logged(on_secret: Callable[[SecretValue], None] | None) -> Callable[[SecretValue], None]:
    """``on_secret``, plus the log filter learning the secret: every value opened for a request is
    then redacted from every log line, whichever library writes it."""
    known = known_secrets()
    if on_secret is None:
        return known.add

    def both(secret: SecretValue) -> None:
        known.add(secret)
        on_secret(secret)

    return both
