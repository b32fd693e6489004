"""The gateway's catalog lifecycle: loading connectors (sync, reload, one connector's refresh) and
the credentials a source reads with while it loads (GraphQL introspection, MCP tool listing).

``CatalogLifecycle`` is a mixin of ``Gateway``: the state it keeps (catalogs, back-off, connectors
awaiting a credential) is set up in ``Gateway.__init__`` and read by the permission view and the
call pipeline, so the methods live here and the attributes stay on the one object.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import httpx2
import jsonschema

from .auth import LastMeterAuth, needs_secret
from .auth.oauth2 import OAuth2Tokens
from .clock import Clock
from .core.sync import ConnectorCatalog, McpTools, Progress, sync_connector, sync_manifest
from .credentials import CredentialVault
from .discovery import DiscoveryIndex
from .errors import GatewayError, SourceError
from .execution.executor import Executor, HttpExecutor
from .execution.graphql_introspection import GraphQLServices
from .manifest import ConnectorConfig, Manifest, OAuth2Auth
from .recovery import Backoff
from .secrets import PROJECT_WIDE, SecretValue
from .sources.graphql import GraphQLSchemas
from .sources.mcp import ToolLister
from .store.base import ConnectorState, Store

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["CatalogLifecycle"]


class CatalogLifecycle:
    """Loads and reloads the connectors' catalogs and keeps the discovery index in step with them."""

    # Set by ``Gateway.__init__``.
    manifest: Manifest
    store: Store
    vault: CredentialVault
    clock: Clock
    http: httpx2.AsyncClient
    graphql_schemas: GraphQLSchemas
    executors: dict[str, Executor]
    index: DiscoveryIndex
    oauth2: OAuth2Tokens
    _http_executor: HttpExecutor
    _catalogs: dict[str, ConnectorCatalog]
    _validators: dict[str, jsonschema.protocols.Validator]
    _backoff: Backoff
    _refreshing: dict[str, anyio.Lock]
    _awaiting_credential: set[str]

    async def _sync_auth(self, cfg: ConnectorConfig, on_secret: Callable[[SecretValue], None]) -> httpx2.Auth:
        """The project-wide credential, for what a source reads at sync (GraphQL introspection)."""
        sealed = await self.vault.sealed(cfg.slug, principal=PROJECT_WIDE) if needs_secret(cfg.auth) else None
        session = (
            self.oauth2.session(cfg.auth, cfg.slug, PROJECT_WIDE, sealed) if isinstance(cfg.auth, OAuth2Auth) else None
        )
        return LastMeterAuth(cfg.auth, sealed, on_secret=on_secret, connector=cfg.slug, oauth2=session)

    async def sync(self, progress: Progress | None = None) -> list[ConnectorState]:
        """Load every connector (best effort) and index what loaded."""
        graphql = GraphQLServices(
            self.graphql_schemas, self.http, self._sync_auth, client_for=self._http_executor.client_for
        )
        catalogs = await sync_manifest(
            self.manifest, self.store, self.clock, progress, graphql=graphql, mcp_tools=self._mcp_tools(PROJECT_WIDE)
        )
        for slug in set(self._catalogs) - set(catalogs):
            self.index.remove_connector(slug)
        for slug, catalog in list(catalogs.items()):
            previous = self._catalogs.get(slug)
            # Only a connector whose content changed is re-indexed (SPEC 12: re-sync is incremental).
            if previous is None or previous.fingerprint is None or previous.fingerprint != catalog.fingerprint:
                self.index.replace_connector(slug, catalog.actions)
                self._validators = {k: v for k, v in self._validators.items() if not k.startswith(f"{slug}.")}
            else:  # unchanged: keep the actions the index holds, not a second, equal copy (SPEC 12)
                catalogs[slug] = dataclasses.replace(catalog, actions=previous.actions)
        self._catalogs = catalogs
        return [c.state for c in catalogs.values()]

    async def reload(self, manifest: Manifest, progress: Progress | None = None) -> list[ConnectorState]:
        """Adopt a new, already validated manifest and re-sync. A manifest that failed to load
        never reaches here, so a broken edit changes nothing (SPEC 4)."""
        if manifest.project != self.manifest.project:
            raise GatewayError(
                f"the manifest's project changed ({self.manifest.project!r} -> {manifest.project!r}); stored "
                "credentials are bound to the project, so restart the gateway to switch projects"
            )
        self.manifest = manifest
        return await self.sync(progress)

    async def refresh_connector(self, slug: str, *, principal: str = PROJECT_WIDE) -> ConnectorState:
        """Load one connector again, as a sync of just it would, and re-index it.

        Used when a call names an action of a connector in error (its upstream was down at sync),
        with the caller's credential (else the project-wide one). Concurrent calls share one
        attempt; ``Backoff`` spaces failed attempts out.
        """
        cfg = self._config(slug)
        lock = self._refreshing.setdefault(slug, anyio.Lock())
        async with lock:
            current = self._catalogs.get(slug)
            if current is not None and current.state.status != "error":
                return current.state  # another call recovered it while this one waited
            graphql = GraphQLServices(
                self.graphql_schemas, self.http, self._sync_auth, client_for=self._http_executor.client_for
            )
            catalog = await sync_connector(
                cfg, self.manifest, self.store, self.clock, graphql=graphql, mcp_tools=self._mcp_tools(principal)
            )
            if catalog.state.status == "error":
                self._backoff.failed(slug)
            else:
                self._backoff.succeeded(slug)
            self.index.replace_connector(slug, catalog.actions)
            self._validators = {k: v for k, v in self._validators.items() if not k.startswith(f"{slug}.")}
            self._catalogs = {**self._catalogs, slug: catalog}
            return catalog.state

    def _mcp_tools(self, principal: str) -> McpTools:
        """Lists an MCP connector's tools through the MCP executor's pool, with ``principal``'s credential
        (else the project-wide one)."""

        async def list_tools(cfg: ConnectorConfig) -> list[types.Tool]:
            lister = self.executors.get("mcp")
            if not isinstance(lister, ToolLister):
                raise SourceError("this gateway has no MCP client registered, so MCP connectors cannot load")
            sealed = await self.vault.sealed(cfg.slug, principal=principal) if needs_secret(cfg.auth) else None
            if needs_secret(cfg.auth) and sealed is None:
                self._awaiting_credential.add(cfg.slug)
                raise SourceError(
                    f"{cfg.slug} needs a {cfg.auth.type} credential before its tools can be listed; store one "
                    f"(`mcp-gateway secret set {cfg.slug}` or the connect tool), then call one of its tools or sync"
                )
            oauth2 = (
                self.oauth2.session(cfg.auth, cfg.slug, principal, sealed) if isinstance(cfg.auth, OAuth2Auth) else None
            )
            auth = LastMeterAuth(cfg.auth, sealed, connector=cfg.slug, oauth2=oauth2)
            self._awaiting_credential.discard(cfg.slug)
            return await lister.list_tools(cfg, auth=auth)

        return list_tools

    def _config(self, slug: str) -> ConnectorConfig:
        cfg = self.manifest.connector(slug)
        assert cfg is not None, slug
        return cfg
