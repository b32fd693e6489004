"""Sync (SPEC 4): manifest connectors -> normalized, persisted catalogs. Best effort per connector.

A connector whose source cannot be read or normalized gets ``status=error`` with its reason and
zero actions; the others load. A source is re-normalized only when its content changes: the
fingerprint covers the bytes of every file the normalizer read (the spec and its relative-file
``$ref`` targets), the connector's settings that shape actions, and the normalizer's version,
so restarting on an unchanged spec only reads the stored catalog back.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from .catalog_memory import CatalogSharing, release_free_memory
from .clock import Clock
from .errors import GatewayError, SourceError
from .manifest import (
    ConnectorConfig,
    GraphQLSource,
    GraphQLSpec,
    HttpSource,
    Manifest,
    McpSource,
    OpenAPISource,
    PostmanSource,
    auth_headers,
)
from .model import Action
from .redaction import Redactor
from .sources.graphql import GraphQLSchemas, GraphQLServices, introspect, normalize_graphql, read_schema
from .sources.http import normalize_http_actions
from .sources.mcp import normalize_mcp_tools, tools_digest
from .sources.openapi import load_openapi
from .sources.postman import load_postman
from .sources.request import with_request_action
from .store.base import CatalogRecord, ConnectorState, Store

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["ConnectorCatalog", "sync_connector", "sync_manifest"]

logger = logging.getLogger(__name__)
NORMALIZER_VERSION = "1"
Progress = Callable[[str, str], None]
"""Called with (slug, phase) as a connector loads: ``start``, ``cached``, ``normalized``, ``error``."""
McpTools = Callable[[ConnectorConfig], Awaitable[Sequence["types.Tool"]]]
"""Lists an MCP connector's tools (``Gateway`` binds it to the MCP executor's pool and the credential)."""


@dataclass(frozen=True)
class ConnectorCatalog:
    state: ConnectorState
    actions: list[Action]
    base_url: str | None
    fingerprint: str | None = None
    """Changes exactly when the actions may have changed; None for a connector that failed."""


def describe_source(cfg: ConnectorConfig) -> str:
    match cfg.source:
        case OpenAPISource(openapi=ref):
            return f"openapi:{Path(ref).name if not ref.startswith('http') else ref}"
        case HttpSource(http=h):
            return f"http:{len(h.actions)} actions"
        case PostmanSource(postman=ref):
            return f"postman:{Path(ref).name if not ref.startswith('http') else ref}"
        case GraphQLSource(graphql=g):
            return f"graphql:{Path(g.schema_).name}" if g.schema_ else "graphql:introspect"
        case McpSource(mcp=m):
            return f"mcp:{m.url}" if m.url else f"mcp:{' '.join(m.command or [])}"
        case None:
            return "none"


def _settings_digest(cfg: ConnectorConfig) -> str:
    shaping = {
        "v": NORMALIZER_VERSION,
        "slug": cfg.slug,
        "risk": cfg.risk,
        "source": cfg.source.model_dump(mode="json") if cfg.source else None,
        # Postman drops the headers the connector's auth writes, so the auth shapes actions too.
        "auth": cfg.auth.model_dump(mode="json") if isinstance(cfg.source, PostmanSource) else None,
        "request_action": cfg.request_action,
        "trust_annotations": cfg.trust_annotations,
    }
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()


def _files_digest(files: list[str]) -> str | None:
    h = hashlib.sha256()
    for f in files:
        try:
            h.update(f.encode() + b"\0" + Path(f).read_bytes() + b"\0")
        except OSError:
            return None
    return h.hexdigest()


def _fingerprint(cfg: ConnectorConfig, files: list[str]) -> str | None:
    files_digest = _files_digest(files)
    return None if files_digest is None else f"{_settings_digest(cfg)}:{files_digest}"


async def _normalize(
    cfg: ConnectorConfig,
    manifest: Manifest,
    cached: CatalogRecord | None,
    graphql: GraphQLServices,
    mcp_tools: McpTools | None = None,
) -> tuple[list[Action], str | None, str, list[str]]:
    """Returns (actions, spec base_url, fingerprint, files), reusing the stored catalog when unchanged."""
    match cfg.source:
        case HttpSource(http=h):
            return normalize_http_actions(cfg.slug, h.actions, cfg.risk), None, _settings_digest(cfg), []
        case OpenAPISource(openapi=ref):
            resolved = manifest.resolve(ref)
            if not resolved.startswith(("http://", "https://")):
                if cached is not None and cached.files and cached.files[0] == resolved:
                    fp = await anyio.to_thread.run_sync(_fingerprint, cfg, cached.files)
                    if fp is not None and fp == cached.fingerprint:
                        return cached.actions, cached.base_url, fp, cached.files
            spec = await load_openapi(resolved, connector=cfg.slug, risk_overrides=cfg.risk)
            files = spec.files
            fp = await anyio.to_thread.run_sync(_fingerprint, cfg, files) if files else None
            return spec.actions, spec.base_url, fp or _settings_digest(cfg) + ":url", files
        case PostmanSource(postman=ref):
            resolved = manifest.resolve(ref)
            reused = await _reuse(cfg, cached, resolved)
            if reused is not None:
                return reused
            collection = await load_postman(
                resolved,
                connector=cfg.slug,
                risk_overrides=cfg.risk,
                auth_type=cfg.auth.type,
                auth_headers=auth_headers(cfg.auth),
            )
            files = collection.files
            fp = await anyio.to_thread.run_sync(_fingerprint, cfg, files) if files else None
            return collection.actions, collection.base_url, fp or _settings_digest(cfg) + ":url", files
        case GraphQLSource(graphql=spec):
            return await _normalize_graphql(cfg, manifest, cached, spec, graphql)
        case McpSource():
            if mcp_tools is None:
                raise SourceError("this gateway was started without an MCP client, so MCP connectors cannot load")
            tools = await mcp_tools(cfg)
            fp = f"{_settings_digest(cfg)}:{tools_digest(tools)}"
            if cached is not None and cached.fingerprint == fp:
                return cached.actions, None, fp, []
            actions = normalize_mcp_tools(
                cfg.slug, tools, trust_annotations=cfg.trust_annotations, risk_overrides=cfg.risk
            )
            return actions, None, fp, []
        case None:
            return [], None, _settings_digest(cfg), []


async def _reuse(
    cfg: ConnectorConfig, cached: CatalogRecord | None, resolved: str
) -> tuple[list[Action], str | None, str, list[str]] | None:
    """The stored catalog, when it came from this same local file and nothing that shapes it changed."""
    if resolved.startswith(("http://", "https://")) or cached is None or not cached.files:
        return None
    if cached.files[0] != resolved:
        return None
    fp = await anyio.to_thread.run_sync(_fingerprint, cfg, cached.files)
    if fp is None or fp != cached.fingerprint:
        return None
    return cached.actions, cached.base_url, fp, cached.files


async def _normalize_graphql(
    cfg: ConnectorConfig, manifest: Manifest, cached: CatalogRecord | None, spec: GraphQLSpec, graphql: GraphQLServices
) -> tuple[list[Action], str | None, str, list[str]]:
    """A schema file is fingerprinted like a spec; a live endpoint is introspected on every sync
    (there is no cheaper way to know it changed) and fingerprinted by the answer."""
    if spec.schema_ is not None:
        resolved = manifest.resolve(spec.schema_)
        if resolved.startswith(("http://", "https://")):
            raise SourceError(
                f"graphql schema {resolved!r} is a URL; give a schema file, or 'introspect: true' to read the schema "
                "from the endpoint at base_url"
            )
        reused = await _reuse(cfg, cached, resolved)
        if reused is None:
            schema = await anyio.to_thread.run_sync(read_schema, resolved)
            actions = await anyio.to_thread.run_sync(
                lambda: normalize_graphql(schema, connector=cfg.slug, risk_overrides=cfg.risk)
            )
            del schema  # parsed again only if an agent's __select needs checking (GraphQLSchemas)
            fp = await anyio.to_thread.run_sync(_fingerprint, cfg, [resolved])
            reused = actions, None, fp or _settings_digest(cfg) + ":file", [resolved]
        graphql.schemas.put_file(cfg.slug, resolved)
        return reused
    if not cfg.base_url:
        raise SourceError("'introspect: true' reads the schema from base_url, and this connector has none; set it")
    if graphql.http is None or graphql.auth_for is None:
        raise SourceError("introspection needs the running gateway's HTTP client; sync through the gateway")
    redactor = Redactor()
    auth = await graphql.auth_for(cfg, redactor.add)
    client = graphql.client_for(cfg, auth) if graphql.client_for else graphql.http
    schema, digest = await introspect(
        client, cfg.base_url, auth=auth, headers=cfg.headers, timeout=cfg.timeout, redactor=redactor
    )
    fp = f"{_settings_digest(cfg)}:introspection:{digest}"
    if cached is not None and cached.fingerprint == fp:
        actions = cached.actions
    else:
        actions = await anyio.to_thread.run_sync(
            lambda: normalize_graphql(schema, connector=cfg.slug, risk_overrides=cfg.risk)
        )
    graphql.schemas.put(cfg.slug, schema)
    return actions, None, fp, []


async def sync_connector(
    cfg: ConnectorConfig,
    manifest: Manifest,
    store: Store,
    clock: Clock,
    progress: Progress | None = None,
    *,
    graphql: GraphQLServices | None = None,
    mcp_tools: McpTools | None = None,
    sharing: CatalogSharing | None = None,
) -> ConnectorCatalog:
    """``sharing``: the table this connector's catalog shares equal values through; ``sync_manifest``
    passes one for all its connectors, and a catalog normalized just now then comes back with no
    actions: they are parked in ``sharing`` and ``sync_manifest`` fills them in after the last parse.
    Without it the connector gets a table of its own and the heap is trimmed after."""
    parked = False
    table = sharing or CatalogSharing()
    source = describe_source(cfg)
    if progress:
        progress(cfg.slug, "start")
    try:
        with table.active():  # the store shares a stored catalog's actions as it decodes them
            cached = await store.get_catalog(cfg.slug)
        actions, spec_base_url, fp, files = await _normalize(
            cfg, manifest, cached, graphql or GraphQLServices(GraphQLSchemas()), mcp_tools
        )
        reused = cached is not None and cached.fingerprint == fp
        if not reused:
            if cfg.request_action:
                actions = with_request_action(cfg, actions)
            await store.put_catalog(
                CatalogRecord(slug=cfg.slug, fingerprint=fp, actions=actions, files=files, base_url=spec_base_url)
            )
        # The catalog stays resident for the process's life: equal values become one object (SPEC 12).
        if sharing is not None and not reused:
            await anyio.to_thread.run_sync(sharing.park, cfg.slug, actions)
            parked = True
        else:  # what the store decoded is shared already, and skipped
            await anyio.to_thread.run_sync(table.share_actions, actions)
        if sharing is None:
            table.clear()
            release_free_memory()
        state = ConnectorState(
            slug=cfg.slug, source=source, status="ready", actions=len(actions), synced_at=clock.now()
        )
        if progress:
            progress(cfg.slug, "cached" if reused else "normalized")
    except GatewayError as exc:
        actions, spec_base_url, fp = [], None, None
        state = ConnectorState(
            slug=cfg.slug, source=source, status="error", actions=0, error=str(exc), synced_at=clock.now()
        )
        if progress:
            progress(cfg.slug, "error")
    except Exception as exc:
        logger.exception("connector %s failed to load", cfg.slug)
        actions, spec_base_url, fp = [], None, None
        state = ConnectorState(
            slug=cfg.slug,
            source=source,
            status="error",
            actions=0,
            error=f"unexpected {type(exc).__name__} while loading; run with --debug for details",
            synced_at=clock.now(),
        )
        if progress:
            progress(cfg.slug, "error")
    await store.put_connector_state(state)
    return ConnectorCatalog(
        state=state, actions=[] if parked else actions, base_url=cfg.base_url or spec_base_url, fingerprint=fp
    )


async def sync_manifest(
    manifest: Manifest,
    store: Store,
    clock: Clock,
    progress: Progress | None = None,
    *,
    graphql: GraphQLServices | None = None,
    mcp_tools: McpTools | None = None,
) -> dict[str, ConnectorCatalog]:
    """Sync every connector in order. ``graphql`` carries the schema cache the GraphQL executor
    shares and, for ``introspect: true``, the HTTP client and the connector's auth. ``mcp_tools``
    lists an MCP connector's tools (the gateway binds it to its MCP executor and the credential)."""
    sharing = CatalogSharing()  # one table for the whole manifest: connectors share with each other too
    catalogs = {
        c.slug: await sync_connector(
            c, manifest, store, clock, progress, graphql=graphql, mcp_tools=mcp_tools, sharing=sharing
        )
        for c in manifest.connectors
    }
    for slug, actions in (await anyio.to_thread.run_sync(sharing.unpark)).items():
        if catalogs[slug].state.status == "ready":
            catalogs[slug] = replace(catalogs[slug], actions=actions)
    sharing.clear()  # the table and the specs parsed meanwhile are garbage now: give the heap back
    release_free_memory()
    return catalogs
