"""The permission view: which connectors and actions a principal may see and address, and the
policy verdict on a call, over the catalogs ``CatalogLifecycle`` keeps loaded.

``PermissionView`` is a mixin of ``Gateway``; it holds no state of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._gateway_catalog import CatalogLifecycle
from .auth import needs_secret
from .discovery import summary_of
from .identity import Principal, granted_connectors
from .manifest import ConnectorConfig, OAuth2Auth
from .model import Action, Denied, Verdict
from .policy import effective_risk, evaluate, is_hidden

__all__ = ["SUGGESTIONS", "PermissionView"]

SUGGESTIONS = 3
"""How many close names an unknown action's denial suggests."""


class PermissionView(CatalogLifecycle):
    """Grant and policy, applied to the loaded catalogs: what a principal sees and what a rule decides."""

    def _visible(self, principal: Principal) -> frozenset[str]:
        return granted_connectors(self.manifest, principal) & self._catalogs.keys()

    def _hidden(self, action: Action) -> bool:
        cfg = self._config(action.connector)
        return is_hidden(
            qualified_name=action.qualified_name,
            path=action.path,
            project_rules=self.manifest.policies,
            connector_rules=cfg.policies,
        )

    def _allow(self, action: Action) -> bool:
        return not self._hidden(action)

    def _lookup(self, principal: Principal, name: str, *, include_hidden: bool = False) -> Action | None:
        """The action this principal may address by ``name``. ``call`` includes blocked ones, so
        the agent learns that a rule (and which layer) stopped it rather than a bare not-found."""
        action = self.index.resolve(name)
        if action is None or action.connector not in self._visible(principal):
            return None
        return None if not include_hidden and self._hidden(action) else action

    def _verdict(self, action: Action, args: Mapping[str, Any]) -> Verdict:
        cfg = self._config(action.connector)
        return evaluate(
            qualified_name=action.qualified_name,
            path=action.path,
            risk=effective_risk(action, args),
            args=args,
            project_rules=self.manifest.policies,
            connector_rules=cfg.policies,
            sensitive=cfg.sensitive,
            default_mode=self.manifest.default_mode,
        )

    async def _needs_auth(self, slug: str) -> bool:
        return not await self._configured(self._config(slug))

    async def _configured(self, cfg: ConnectorConfig) -> bool:
        """Whether calls could run without a human connecting first (an oauth2 authorization code
        connector needs its token set too, not just the client's credentials)."""
        if isinstance(cfg.auth, OAuth2Auth):
            return await self.oauth2.ready(cfg.auth, cfg.slug)
        return not needs_secret(cfg.auth) or await self.vault.configured(cfg.slug)

    def _not_found(self, principal: Principal, name: str) -> Denied:
        visible = self._visible(principal)
        suggestions = self.index.suggest(name, limit=SUGGESTIONS, connectors=visible, allow=self._allow)
        hint = f" Closest: {', '.join(a.qualified_name for a in suggestions)}." if suggestions else ""
        return Denied(
            reason="action_not_found",
            message=f"No action named {name!r}.{hint} Use discover to search by intent.",
            suggestions=[
                {"name": a.qualified_name, "summary": summary_of(a), "risk": a.risk, "input_schema": a.input_schema}
                for a in suggestions
            ],
        )
