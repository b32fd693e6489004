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
from ..credentials import CredentialVault
from ..manifest import ConnectorConfig, OAuth2Auth
from ..model import a_credential
from ..secrets import PROJECT_WIDE, SealedCredential, SecretValue
from .oauth2_tokens import OAuth2Tokens

__all__ = ["CallCredential", "CredentialBroker"]


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

    async def sealed(self, cfg: ConnectorConfig, principal: str) -> SealedCredential | None:
        """``principal``'s credential for ``cfg`` (else the project-wide one); None when the connector
        needs none or none is stored."""
        return await self.vault.sealed(cfg.slug, principal=principal) if needs_secret(cfg.auth) else None

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
            self.oauth2.session(cfg.auth, cfg.slug, principal, sealed) if isinstance(cfg.auth, OAuth2Auth) else None
        )
        return LastMeterAuth(cfg.auth, sealed, on_secret=on_secret, connector=cfg.slug, oauth2=session)

    async def sync_auth(self, cfg: ConnectorConfig, on_secret: Callable[[SecretValue], None]) -> LastMeterAuth:
        """The project-wide credential, for what a source reads at sync (GraphQL introspection)."""
        return self.auth_for(cfg, PROJECT_WIDE, await self.sealed(cfg, PROJECT_WIDE), on_secret=on_secret)

    async def for_call(self, cfg: ConnectorConfig, user: str) -> CallCredential:
        """The credential ``user``'s call of ``cfg`` carries, or why a human must connect first."""
        sealed = await self.sealed(cfg, user)
        if needs_secret(cfg.auth) and sealed is None:
            return CallCredential(
                None, f"{cfg.slug} needs {a_credential(cfg.auth.type)}; ask the user to open the link."
            )
        if isinstance(cfg.auth, OAuth2Auth) and not await self.oauth2.ready(cfg.auth, cfg.slug, user):
            return CallCredential(
                sealed, f"{cfg.slug} needs the user to sign in with OAuth2; ask them to open the link."
            )
        return CallCredential(sealed)

    async def configured(self, cfg: ConnectorConfig) -> bool:
        """Whether calls could run without a human connecting first (an oauth2 authorization code
        connector needs its token set too, not just the client's credentials)."""
        if isinstance(cfg.auth, OAuth2Auth):
            return await self.oauth2.ready(cfg.auth, cfg.slug)
        return not needs_secret(cfg.auth) or await self.vault.configured(cfg.slug)

    async def needs_auth(self, cfg: ConnectorConfig) -> bool:
        return not await self.configured(cfg)
