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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from .clock import Clock
from .errors import GatewayError
from .manifest import ConnectorConfig, GraphQLSource, HttpSource, Manifest, McpSource, OpenAPISource, PostmanSource
from .model import Action
from .sources.http import normalize_http_actions
from .sources.openapi import load_openapi
from .store.base import CatalogRecord, ConnectorState, Store

__all__ = ["ConnectorCatalog", "sync_connector", "sync_manifest"]

logger = logging.getLogger(__name__)
NORMALIZER_VERSION = "1"
Progress = Callable[[str, str], None]
"""Called with (slug, phase) as a connector loads: ``start``, ``cached``, ``normalized``, ``error``."""


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
    cfg: ConnectorConfig, manifest: Manifest, cached: CatalogRecord | None
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
        case PostmanSource() | GraphQLSource() | McpSource():
            kind = describe_source(cfg).partition(":")[0]
            raise GatewayError(f"{kind} sources are not supported by this build yet")
        case None:
            return [], None, _settings_digest(cfg), []


async def sync_connector(
    cfg: ConnectorConfig, manifest: Manifest, store: Store, clock: Clock, progress: Progress | None = None
) -> ConnectorCatalog:
    source = describe_source(cfg)
    if progress:
        progress(cfg.slug, "start")
    try:
        cached = await store.get_catalog(cfg.slug)
        actions, spec_base_url, fp, files = await _normalize(cfg, manifest, cached)
        reused = cached is not None and cached.fingerprint == fp
        if not reused:
            await store.put_catalog(
                CatalogRecord(slug=cfg.slug, fingerprint=fp, actions=actions, files=files, base_url=spec_base_url)
            )
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
    return ConnectorCatalog(state=state, actions=actions, base_url=cfg.base_url or spec_base_url, fingerprint=fp)


async def sync_manifest(
    manifest: Manifest, store: Store, clock: Clock, progress: Progress | None = None
) -> dict[str, ConnectorCatalog]:
    return {c.slug: await sync_connector(c, manifest, store, clock, progress) for c in manifest.connectors}
