"""The loaded catalogs: each connector's actions and state, kept in step with the discovery index.

``Catalogs`` owns everything that changes when connectors load: the catalog per connector (from
``sync``), the back-off of connectors in error (``recovery.Backoff``), the MCP connectors waiting
for a credential before their tools can be listed, and the cached JSON Schema validators of the
actions' inputs (dropped with the actions they were built for). Loading goes through ``sync`` for
every connector, ``reload`` for a new manifest, and ``refresh`` for one connector a call names.
The credentials a source reads with while it loads come from the ``CredentialBroker``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import anyio
import httpx2

from ..auth import needs_secret
from ..discovery import DiscoveryIndex, ReviewCache
from ..discovery.hybrid import HybridSearch
from ..execution.graphql_introspection import GraphQLServices
from ..execution.mcp_sessions import McpExecutor
from ..manifest import ConnectorConfig, GraphQLSource, Manifest
from ..policy.review import (
    Finding,
    moved_origin,
    on_origin,
    origin_name,
    origin_of,
    origin_snapshot,
    review,
    same_source,
)
from ..policy.review import fingerprint as snapshot_fingerprint
from ..primitives.secrets import PROJECT_WIDE
from ..sources.graphql_schemas import GraphQLSchemas
from ..sources.mcp import listing_of
from ..store.contract import ActionReviewRecord, AuditRecord, ConnectorState, Store
from ..vocabulary.clock import Clock
from ..vocabulary.errors import GatewayError, SourceError, UpstreamError
from ..vocabulary.model import Action, ErrorResult, McpBinding, RequestBinding, a_credential
from .credential_broker import CredentialBroker
from .quick_schema import QuickCheck, quick_check
from .recovery import Backoff
from .sync import ConnectorCatalog, McpTools, Progress, fetched_base_url, sync_connector, sync_manifest

if TYPE_CHECKING:
    from collections.abc import Callable

    import mcp_types as types
    from jsonschema.protocols import Validator

__all__ = ["Catalogs"]

logger = logging.getLogger(__name__)

MAX_SCHEMA_ERRORS = 10
"""How many argument errors a call's denial lists (the first ones by path)."""
REINTROSPECT_EVERY = 60.0
"""The fewest seconds between two loads of an introspected GraphQL connector that calls found drifted."""


class Catalogs:
    """Loads and reloads the connectors' catalogs and keeps the discovery index in step with them.

    Args:
        manifest: the manifest in force; ``reload`` replaces it.
        client_for: picks the HTTP client per connector (an ``mtls`` one presents its certificate).
        tools: lists an upstream MCP server's tools; None when this gateway has no MCP client.
    """

    def __init__(
        self,
        *,
        manifest: Manifest,
        store: Store,
        clock: Clock,
        http: httpx2.AsyncClient,
        index: DiscoveryIndex,
        graphql_schemas: GraphQLSchemas,
        credentials: CredentialBroker,
        client_for: Callable[[ConnectorConfig, httpx2.Auth], httpx2.AsyncClient],
        tools: McpExecutor | None,
        dense: HybridSearch | None = None,
        review_cache: ReviewCache | None = None,
    ) -> None:
        self.manifest = manifest
        self.index = index
        self.dense = dense
        """Hybrid discover's vectors: told of every re-indexed connector, it embeds them in the background."""
        self.graphql_schemas = graphql_schemas
        """Schemas of GraphQL connectors, filled by sync, for checking an agent's ``__select``."""
        self.loaded: dict[str, ConnectorCatalog] = {}
        """The catalog of every connector of the manifest, by slug (replaced whole, never mutated)."""
        self.backoff = Backoff(clock)
        """When a connector in error may be reloaded again by a call (``refresh``)."""
        self.awaiting_credential: set[str] = set()
        """MCP connectors whose tools could not be listed for want of a credential."""
        self.refused_credential: dict[str, str] = {}
        """MCP connectors whose upstream refused the stored credential they listed their tools with (401),
        by that credential's fingerprint: a new one stored since may be tried at once."""
        self._store = store
        self._clock = clock
        self._http = http
        self._credentials = credentials
        self._client_for = client_for
        self._tools = tools
        if tools is not None:
            tools.listed = self.listed_tools
        self._review_cache = review_cache
        self._configs: tuple[Manifest | None, dict[str, ConnectorConfig]] = (None, {})
        self._validators: dict[str, tuple[QuickCheck | None, Validator]] = {}
        """Per action: the shortcut for plain schemas (``quick_schema``), and jsonschema's validator."""
        self._refreshing: dict[str, anyio.Lock] = {}
        self.quarantine: dict[str, Finding] = {}
        """Actions an operator must review before agents see or call them, by qualified name."""
        self.denied: set[tuple[str, str]] = set()
        """(name, fingerprint) an operator kept quarantined: off the review list until they change."""
        self._reviewed: dict[str, tuple[str | None, str]] = {}
        """Per connector, the catalog fingerprint and trust its last review was of."""
        self._decided: _Decisions | None = None
        """The decisions last read from the store, with the store's version of them at the time."""
        self._drifted: dict[str, float] = {}
        """When each introspected connector was last asked to load again for a drifted call (monotonic)."""
        self._to_reload: set[str] = set()
        self._reload_wanted = anyio.Event()

    # -- reading -----------------------------------------------------------------------------------

    def config(self, slug: str) -> ConnectorConfig:
        """The manifest's entry of a loaded connector."""
        cfg = self.config_of(slug)
        assert cfg is not None, slug
        return cfg

    def config_of(self, slug: str) -> ConnectorConfig | None:
        """``manifest.connector(slug)``, by a map kept per manifest (a call asks more than once)."""
        manifest = self.manifest
        if self._configs[0] is not manifest:
            configs: dict[str, ConnectorConfig] = {}
            for cfg in manifest.connectors:
                configs.setdefault(cfg.slug, cfg)  # the first of a slug, as Manifest.connector
            self._configs = (manifest, configs)
        return self._configs[1].get(slug)

    def states(self) -> list[ConnectorState]:
        return [c.state for c in self.loaded.values()]

    def request_fallback(self, action: Action) -> Action | None:
        """The connector's generic request action, unless ``action`` is it (or there is none)."""
        if isinstance(action.binding, RequestBinding):
            return None
        catalog = self.loaded.get(action.connector)
        actions = catalog.actions if catalog is not None else []
        return next((a for a in actions if isinstance(a.binding, RequestBinding)), None)

    def validate(self, action: Action, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Where ``args`` break the action's input schema (path and message, first ones first), or hold
        a number JSON cannot carry (``Infinity``, ``NaN``, ``1e400``: each encoder would send it its own way)."""
        if (where := _non_finite(args)) is not None:
            return [{"path": where or "(root)", "message": "not a finite number; JSON has no Infinity or NaN"}]
        known = self._validators.get(action.qualified_name)
        if known is None:
            import jsonschema  # here, not at module level: a heavy import a start need not pay
            from jsonschema.validators import validator_for
            from referencing import Registry

            cls = _bounded(validator_for(action.input_schema, default=jsonschema.Draft202012Validator))
            try:
                # An empty registry: a ``$ref`` resolves inside the schema (and the bundled metaschemas)
                # only. An upstream's schema must not make the gateway fetch a URL or read a file.
                known = (quick_check(action.input_schema), cls(action.input_schema, registry=Registry()))
            except jsonschema.SchemaError:
                known = _UNCHECKED
            self._validators[action.qualified_name] = known
        quick, validator = known
        if quick is not None and quick(args):
            return []
        try:
            errors = sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))[:MAX_SCHEMA_ERRORS]
        except Exception as exc:  # an unresolvable $ref, an unknown type: the schema, not the arguments
            # Said once, by kind only: the message of such an error quotes the schema, which may hold
            # whatever a file or an upstream put there.
            logger.warning(
                "the input schema of %s cannot be checked (%s); its arguments go to the upstream unchecked",
                action.qualified_name,
                type(exc).__name__,
            )
            self._validators[action.qualified_name] = _UNCHECKED
            return []
        return [{"path": "/".join(str(p) for p in e.absolute_path) or "(root)", "message": _message(e)} for e in errors]

    # -- loading -----------------------------------------------------------------------------------

    async def sync(
        self,
        progress: Progress | None = None,
        *,
        index: bool = True,
        share: bool = True,
        embed: bool = False,
        settled: Callable[[str], None] | None = None,
    ) -> list[ConnectorState]:
        """Load every connector (best effort) and index what loaded. ``index=False`` skips the index
        (a CLI listing that only reports states: indexing is most of a warm start) and the sharing of
        equal values that keeps a resident catalog small; the next sync indexes everything then.
        ``share=False`` skips only the sharing: a one-shot command exits before memory matters, and
        sharing triples the cost of decoding a stored catalog. ``embed=True`` (hybrid discovery only):
        the changed connectors are embedded before this returns, not in the background, so the vectors
        are in the store for the next start (the ``sync`` and ``add`` commands). ``settled``: told each
        connector whose load is over (``sync_manifest``), so ``adopt`` can serve it before the rest."""
        catalogs = await sync_manifest(
            self.manifest,
            self._store,
            self._clock,
            progress,
            graphql=self._graphql(),
            mcp_tools=self._mcp_tools(PROJECT_WIDE),
            share=index and share,  # a command that only reports states exits soon: no memory to save
            settled=settled,
        )
        if index:
            # What serves says of each connector that failed (a listing shows it in its table instead):
            # the error as stored, screened and without a URL's secrets; else the start says only "serving N".
            for slug, catalog in catalogs.items():
                if catalog.state.status == "error":
                    logger.warning("connector %s failed to load: %s", slug, catalog.state.error)
                elif catalog.kept is not None:
                    logger.warning(
                        "connector %s failed to load; still serving the %d actions loaded at %s: %s",
                        slug,
                        catalog.state.actions,
                        catalog.state.synced_at.isoformat(timespec="seconds"),
                        catalog.kept,
                    )
        if not index:  # no fingerprint kept: the next sync sees every connector as changed and indexes it
            if embed:
                await self._embed_now(catalogs, progress)
            self.loaded = catalogs
            await self.review(catalogs)  # what is held is part of what a listing reports
            self.loaded = {slug: dataclasses.replace(c, fingerprint=None) for slug, c in catalogs.items()}
            await self.pin_origins(self.loaded)
            return self.states()
        for slug in set(self.loaded) - set(catalogs):
            self.index.remove_connector(slug)
            self._embed(slug, ())
        # What each connector is, as the manifest says: a product named there is one it serves.
        about = {
            cfg.slug: " ".join(filter(None, (cfg.name, cfg.catalog, cfg.description)))
            for cfg in self.manifest.connectors
        }
        self.index.name_connectors(about)
        changed: dict[str, ConnectorCatalog] = {}
        for slug, catalog in list(catalogs.items()):
            previous = self.loaded.get(slug)
            # Only a connector whose content changed is re-indexed (re-sync is incremental).
            if previous is None or previous.fingerprint is None or previous.fingerprint != catalog.fingerprint:
                self.index.replace_connector(slug, catalog.actions, fingerprint=catalog.fingerprint)
                changed[slug] = catalog
                if not embed:
                    self._embed(slug, catalog.actions, catalog.fingerprint)
                self._forget_validators(slug)
            else:  # unchanged: keep the actions the index holds, not a second, equal copy
                catalogs[slug] = dataclasses.replace(catalog, actions=previous.actions)
        if embed:
            await self._embed_now(changed, progress)
        self.loaded = catalogs
        await self.review(catalogs)
        await self.pin_origins(catalogs)
        return self.states()

    async def reload(self, manifest: Manifest, progress: Progress | None = None) -> list[ConnectorState]:
        """Adopt a new, already validated manifest and re-sync. A manifest that failed to load
        never reaches here, so a broken edit changes nothing."""
        if manifest.project != self.manifest.project:
            raise GatewayError(
                f"the manifest's project changed ({self.manifest.project!r} -> {manifest.project!r}); stored "
                "credentials are bound to the project, so restart the gateway to switch projects"
            )
        previous, self.manifest = self.manifest, manifest
        try:
            return await self.sync(progress)
        except BaseException:
            self.manifest = previous  # nothing of the new one was installed: the catalogs are the old ones
            raise

    def listed_tools(self, slug: str) -> str | None:
        """The digest of the tools listing connector ``slug``'s catalog was built from (an MCP one), or None."""
        catalog = self.loaded.get(slug)
        return listing_of(catalog.fingerprint) if catalog is not None else None

    async def refresh(self, slug: str, *, principal: str = PROJECT_WIDE, changed: bool = False) -> ConnectorState:
        """Load one connector again, as a sync of just it would, and re-index it.

        Used when a call names an action of a connector in error (its upstream was down at sync),
        with the caller's credential (else the project-wide one), and with ``changed`` when its MCP
        server lists other tools than the catalog was built from (review holds what changed). Concurrent
        calls share one attempt; ``Backoff`` spaces failed attempts out.
        """
        cfg = self.config(slug)
        lock = self._refreshing.setdefault(slug, anyio.Lock())
        async with lock:
            current = self.loaded.get(slug)
            if current is not None and current.state.status != "error" and not changed:
                return current.state  # another call recovered it while this one waited
            catalog = await sync_connector(
                cfg,
                self.manifest,
                self._store,
                self._clock,
                graphql=self._graphql(),
                mcp_tools=self._mcp_tools(principal),
            )
            if catalog.state.status == "error":
                self.backoff.failed(slug)
            else:
                self.backoff.succeeded(slug)
            self.index.replace_connector(slug, catalog.actions, fingerprint=catalog.fingerprint)
            self._embed(slug, catalog.actions, catalog.fingerprint)
            self._forget_validators(slug)
            self.loaded = {**self.loaded, slug: catalog}
            await self.review([slug])
            await self.pin_origins([slug])
            return catalog.state

    def drifted(self, slug: str) -> bool:
        """A call found connector ``slug``'s upstream schema changed (``UpstreamError.drifted``): when it is
        introspected (``introspect: true``), have ``reload_drifted`` introspect it again, at most once per
        ``REINTROSPECT_EVERY`` seconds, and True (the agent is told to describe again). False for a schema
        read from a file, which only the operator can update."""
        cfg = self.config_of(slug)
        if cfg is None or not isinstance(cfg.source, GraphQLSource) or not cfg.source.graphql.introspect:
            return False
        now = time.monotonic()
        if now - self._drifted.get(slug, -math.inf) >= REINTROSPECT_EVERY:
            self._drifted[slug] = now
            self._to_reload.add(slug)
            self._reload_wanted.set()
        return True

    async def reload_drifted(self) -> None:
        """Load again, one at a time and for ever, the connectors ``drifted`` names: a background task of
        the running gateway (``runtime.open_gateway``), so the call that found the drift is answered at once."""
        while True:
            await self._reload_wanted.wait()
            self._reload_wanted = anyio.Event()
            while self._to_reload:
                slug = self._to_reload.pop()
                if self.config_of(slug) is None:
                    continue
                logger.warning("connector %s: its GraphQL schema changed upstream; introspecting it again", slug)
                try:
                    await self.refresh(slug, changed=True)
                except Exception as exc:  # the next drifted call, or the next sync, tries again
                    logger.warning("connector %s could not be introspected again (%s)", slug, type(exc).__name__)

    async def adopt(self, slug: str) -> None:
        """Serve connector ``slug`` while a sync still loads others: its own load is over (``settled``),
        so what it stored is read back and indexed, as ``refresh`` would, without loading it again. The
        sync's end keeps it as it is when nothing changed meanwhile."""
        if slug in self.loaded or self.manifest.connector(slug) is None:
            return
        async with self._refreshing.setdefault(slug, anyio.Lock()):
            if slug in self.loaded:
                return
            state = next((s for s in await self._store.list_connector_states() if s.slug == slug), None)
            if state is None:
                return
            record = await self._store.get_catalog(slug) if state.status == "ready" else None
            catalog = ConnectorCatalog(
                state=state,
                actions=record.actions if record is not None else [],
                base_url=self.config(slug).base_url or (record.base_url if record is not None else None),
                fingerprint=record.fingerprint if record is not None else None,
            )
            self.index.replace_connector(slug, catalog.actions, fingerprint=catalog.fingerprint)
            self._embed(slug, catalog.actions, catalog.fingerprint)
            self._forget_validators(slug)
            self.loaded = {**self.loaded, slug: catalog}
            await self.review([slug])
            await self.pin_origins([slug])

    async def _embed_now(self, catalogs: Mapping[str, ConnectorCatalog], progress: Progress | None) -> None:
        """Embed each catalog in turn (hybrid discovery only); one that fails is left to the background
        embedding of the next start, and ranks lexically until then."""
        if self.dense is None:
            return
        for slug, catalog in catalogs.items():
            if not catalog.actions:
                continue
            try:
                embedded = await self.dense.embed_now(slug, catalog.actions, catalog.fingerprint)
            except (GatewayError, OSError, ValueError) as exc:
                logger.warning("discovery: could not embed %s (it answers lexically meanwhile): %s", slug, exc)
                if progress is not None:
                    progress(slug, "not embedded (see the log); the next start embeds it")
                continue
            if progress is not None:
                progress(slug, f"embedded for hybrid discover ({embedded:,} of {len(catalog.actions):,} anew)")

    def _embed(self, slug: str, actions: Sequence[Action], fingerprint: str | None = None) -> None:
        """Schedule a re-indexed connector's vectors (hybrid discover); until they exist it ranks lexically."""
        if self.dense is not None:
            self.dense.schedule(slug, actions, fingerprint)

    # -- review ------------------------------------------------------------------------------------

    def quarantined(self, name: str) -> Finding | None:
        """The finding that keeps action ``name`` from agents, or None when it is approved."""
        return self.quarantine.get(name)

    def held_reason(self, name: str) -> str | None:
        """Why action ``name`` is held, in words an agent may read ("held for review (hides text)");
        None when it is not held."""
        finding = self.quarantine.get(name)
        if finding is None:
            return None
        if (name, finding.fingerprint) in self.denied:
            return "denied by an operator"
        return f"held for review ({finding.why})"

    async def review(self, slugs: Iterable[str], *, force: bool = False) -> None:
        """Compare the actions of ``slugs`` with the approved snapshots and quarantine what differs.

        Approved findings of an ``mcp`` source are pinned in the store (so that a later switch to
        ``trust: review`` starts from them); other sources are approved as they load without a row.
        A connector whose catalog and trust did not change since its last review is skipped.
        """
        todo = []
        for slug in slugs:
            catalog = self.loaded.get(slug)
            if catalog is None:
                continue
            key = (catalog.fingerprint, self.config(slug).effective_trust)
            if force or catalog.fingerprint is None or self._reviewed.get(slug) != key:
                todo.append((slug, catalog, key))
        for slug in set(self._reviewed) - set(self.loaded):
            self._drop_findings(slug)
            del self._reviewed[slug]
        if not todo:
            return
        approved, self.denied = await self._decisions()
        now = self._clock.now()
        held: list[tuple[str, Finding]] = []
        for slug, catalog, key in todo:
            cfg = self.config(slug)
            upstream = any(isinstance(a.binding, McpBinding) for a in catalog.actions)
            others = (
                [a.qualified_name for s, c in self.loaded.items() if s != slug for a in c.actions] if upstream else []
            )
            findings = review(
                catalog.actions,
                approved,
                trust=cfg.effective_trust,
                upstream=upstream,
                other_tools=others,
                scan=self._review_cache.scan(slug, catalog.fingerprint) if self._review_cache else None,
            )
            self._drop_findings(slug)
            for finding in findings:
                if finding.status != "approved":
                    self.quarantine[finding.name] = finding
                    held.append((slug, finding))
                elif upstream and approved.get(finding.name, ("",))[0] != finding.fingerprint:
                    await self._store.put_action_review(_decision(finding, "approved", f"trust:{key[1]}", now))
            self._reviewed[slug] = key
        await self._audit_held(held, now)

    async def refresh_decisions(self) -> None:
        """Apply decisions taken elsewhere (``mcp-gateway review``, another instance) to the quarantine:
        an approval of the exact fingerprint held makes the action visible at once.

        Every discover and describe asks this while something is quarantined. The decisions are
        re-read only when the store's version of them moved: the CLI and other instances write to
        the same database, so one small aggregate per ask sees their decisions on the very next
        discover (a time-to-live would hide them for its length), and reading and parsing every
        snapshot happens once per decision instead of once per discover."""
        if not self.quarantine:
            return
        before = self._decided
        approved, denied = await self._decisions()
        if self._decided is before:
            return  # nothing decided since the last read: the quarantine already reflects it
        self.denied = denied
        for name, finding in list(self.quarantine.items()):
            pinned = approved.get(name)
            if pinned is not None and pinned[0] == finding.fingerprint:
                del self.quarantine[name]

    async def decide(self, name: str, *, approve: bool, by: str) -> Finding | None:
        """An operator's decision on quarantined action ``name`` (its current snapshot). None when
        nothing by that name is held."""
        finding = self.quarantine.get(name)
        if finding is None:
            return None
        record = _decision(finding, "approved" if approve else "denied", by, self._clock.now())
        await self._store.put_action_review(record)
        if approve:
            del self.quarantine[name]
            self.denied.discard((name, finding.fingerprint))
        else:
            self.denied.add((name, finding.fingerprint))
        return finding

    # -- the origin a connector sends to -----------------------------------------------------------

    async def pin_origins(self, slugs: Iterable[str]) -> None:
        """Pin the origin of every connector of ``slugs`` whose base URL comes from a description
        fetched from a URL (``sync.fetched_base_url``), or hold it when the description moved it.

        The first sync that sees such a connector (or sees it fetch another description URL: the
        operator's edit) records its origin as approved (``origin_name``);
        a later description naming another origin is quarantined like a changed action, logged and
        audited, and ``base_url`` keeps the connector on the pinned origin until an operator approves
        the new one (``mcp-gateway review``, the operator page). Runs at every sync, whatever the
        catalog's fingerprint: a fetched description can move its servers without changing an action.
        """
        todo = []
        for slug in slugs:
            catalog, cfg = self.loaded.get(slug), self.config_of(slug)
            self.quarantine.pop(origin_name(slug), None)
            source = fetched_base_url(cfg, self.manifest) if cfg is not None else None
            if catalog is not None and catalog.base_url and source is not None:
                todo.append((slug, catalog.base_url, source))
        if not todo:
            return
        approved, self.denied = await self._decisions()
        now = self._clock.now()
        for slug, base_url, source in todo:
            name = origin_name(slug)
            pinned = approved.get(name)
            if pinned is None or not same_source(pinned[1], source):  # a first sync, or the operator's new source
                shown = origin_snapshot(origin_of(base_url), source)
                first = Finding(name, "approved", snapshot_fingerprint(shown), shown)
                await self._store.put_action_review(_decision(first, "approved", "first sync", now))
                continue
            held = moved_origin(slug, base_url, pinned[1], source)
            if held is None:
                continue
            self.quarantine[name] = held
            logger.warning(
                "connector %s is held for review: %s (approve with `mcp-gateway review %s`)", slug, held.flags[0], name
            )
            await self._audit_held([(slug, held)], now)

    def origin_held(self, slug: str) -> Finding | None:
        """The finding that keeps connector ``slug`` on its pinned origin, or None."""
        return self.quarantine.get(origin_name(slug)) if self.quarantine else None

    async def base_url(self, slug: str) -> str | None:
        """Where connector ``slug``'s requests go: its base URL, or that URL's path on the pinned
        origin while a move of its origin waits for an operator (approved elsewhere since: the new one)."""
        base = self.loaded[slug].base_url
        if self.origin_held(slug) is not None:
            await self.refresh_decisions()
            held = self.origin_held(slug)
            if held is not None and held.previous is not None and base:
                return on_origin(base, str(held.previous.get("origin", "")))
        return base

    def pending(self) -> list[Finding]:
        """The quarantined findings an operator has not denied, by name."""
        return [f for name, f in sorted(self.quarantine.items()) if (name, f.fingerprint) not in self.denied]

    async def _decisions(self) -> tuple[Mapping[str, tuple[str, Mapping[str, Any]]], set[tuple[str, str]]]:
        """The approved snapshots by name and the denied (name, fingerprint), read from the store
        only when its version of them changed since the last read."""
        version = await self._store.action_reviews_version()  # before the read: a race re-reads, never misses
        if self._decided is None or self._decided.version != version:
            approved: dict[str, tuple[str, Mapping[str, Any]]] = {}
            denied: set[tuple[str, str]] = set()
            for record in await self._store.list_action_reviews():  # oldest first: the last approval wins
                if record.decision == "approved":
                    approved[record.name] = (record.fingerprint, json.loads(record.snapshot))
                else:
                    denied.add((record.name, record.fingerprint))
            self._decided = _Decisions(version, approved, frozenset(denied))
        return self._decided.approved, set(self._decided.denied)

    def _drop_findings(self, slug: str) -> None:
        self.quarantine = {k: v for k, v in self.quarantine.items() if not k.startswith(f"{slug}.")}

    async def _audit_held(self, held: Sequence[tuple[str, Finding]], now: datetime) -> None:
        """Actions held for review (new, changed since approval, reading as instructions, a moved origin):
        one audit row per hold, when it is first seen. Which (name, fingerprint) were audited is kept in
        the store, so the next command, a restart or another instance does not audit the same hold again."""
        if not held:
            return
        kept = await self._store.get_meta(_HELD_AUDITED)
        audited: dict[str, str] = dict(kept) if isinstance(kept, dict) else {}
        fresh = [(slug, f) for slug, f in held if audited.get(f.name) != f.fingerprint]
        if not fresh:
            return
        await self._store.append_audits([_held_row(slug, f, now) for slug, f in fresh])
        audited.update((f.name, f.fingerprint) for _, f in fresh)
        slugs = {c.slug for c in self.manifest.connectors}  # a removed connector's holds are forgotten
        await self._store.set_meta(
            _HELD_AUDITED, {name: fp for name, fp in audited.items() if name.partition(".")[0] in slugs}
        )

    def _forget_validators(self, slug: str) -> None:
        self._validators = {k: v for k, v in self._validators.items() if not k.startswith(f"{slug}.")}

    def _graphql(self) -> GraphQLServices:
        return GraphQLServices(
            self.graphql_schemas, self._http, self._credentials.sync_auth, client_for=self._client_for
        )

    def _mcp_tools(self, principal: str) -> McpTools:
        """Lists an MCP connector's tools through the MCP executor's pool, with ``principal``'s credential
        (else the project-wide one)."""

        async def list_tools(cfg: ConnectorConfig) -> list[types.Tool]:
            if self._tools is None:
                raise SourceError("this gateway has no MCP client registered, so MCP connectors cannot load")
            sealed = await self._credentials.sealed(cfg, principal)
            if needs_secret(cfg.auth) and sealed is None:
                self.awaiting_credential.add(cfg.slug)
                raise SourceError(
                    f"{cfg.slug} needs {a_credential(cfg.auth.type)} before its tools can be listed; store one "
                    f"(`mcp-gateway secret set {cfg.slug}` or the connect tool), then call one of its tools or sync"
                )
            self.awaiting_credential.discard(cfg.slug)
            try:
                tools = await self._tools.list_tools(cfg, auth=self._credentials.auth_for(cfg, principal, sealed))
            except UpstreamError as exc:
                if sealed is None or exc.reason != "auth_failed" or exc.upstream_status != 401:
                    raise
                self.refused_credential[cfg.slug] = sealed.fingerprint
                raise SourceError(
                    f"{cfg.slug}'s upstream refused its stored credential (HTTP 401) when asked for its tools; "
                    f"store a new one (`mcp-gateway secret set {cfg.slug}` or the connect tool), then call one "
                    "of its tools or sync"
                ) from None
            self.refused_credential.pop(cfg.slug, None)
            return tools

        return list_tools

    async def recover(self, slug: str, *, principal: str) -> ErrorResult | None:
        """For a name that resolved to nothing in visible connector ``slug``: when that connector is in
        error, try to reload it (back-off permitting). None when there is nothing to recover or it
        recovered; else the error the caller answers with."""
        catalog = self.loaded.get(slug)
        if catalog is None or catalog.state.status != "error":
            return None
        if self.backoff.ready(slug):
            state = await self.refresh(slug, principal=principal)
            if state.status != "error":
                return None
        else:
            state = catalog.state
        wait = max(1, round(self.backoff.wait_seconds(slug)))
        why = (state.error or "").rstrip(". ")  # one full stop after it, not two
        return ErrorResult(
            reason="connector_error",
            message=f"Connector {slug!r} is unavailable: {why}. The gateway retries it on calls "
            f"(next attempt in about {wait} s) and on every sync.",
            hint="Use another connector meanwhile, or ask the operator to check its upstream.",
        )


@dataclasses.dataclass(frozen=True)
class _Decisions:
    version: str
    approved: Mapping[str, tuple[str, Mapping[str, Any]]]
    denied: frozenset[tuple[str, str]]


_HELD_AUDITED = "held_audited"
"""The store's meta key of the holds already audited: fingerprint by action name."""


def _held_row(slug: str, finding: Finding, now: datetime) -> AuditRecord:
    why = "; ".join(finding.flags) or "its text, schema or risk changed since it was approved"
    return AuditRecord(
        at=now,
        user="gateway",
        agent=None,
        requested=finding.name,
        connector=slug,
        action=finding.name,
        args_preview=f"quarantined ({finding.status}): {why}"[:500],
        fingerprint=finding.fingerprint,
        verdict=None,
        verdict_source=None,
        status="denied",
        reason="quarantined",
        latency_ms=0.0,
    )


def _decision(finding: Finding, decision: Literal["approved", "denied"], by: str, now: datetime) -> ActionReviewRecord:
    return ActionReviewRecord(
        name=finding.name,
        fingerprint=finding.fingerprint,
        decision=decision,
        snapshot=json.dumps(finding.snapshot, sort_keys=True, ensure_ascii=False, default=str),
        decided_at=now,
        decided_by=by,
    )


def _non_finite(value: Any, path: str = "") -> str | None:
    """The path of the first infinite or NaN number in ``value``, else None."""
    if isinstance(value, float):
        return path if not math.isfinite(value) else None
    if isinstance(value, Mapping):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        if isinstance(item, float | Mapping | list | tuple):
            found = _non_finite(item, f"{path}/{key}" if path else str(key))
            if found is not None:
                return found
    return None


class _Unchecked:
    """The validator of a schema that cannot be checked: arguments are left to the upstream."""

    def iter_errors(self, instance: object) -> list[Any]:
        return []


_UNCHECKED: tuple[QuickCheck | None, Any] = (None, _Unchecked())


def _message(error: Any) -> str:
    """A schema error's message in JSON's words: jsonschema writes the value as Python would (``None is
    not of type 'string'``), which an agent that sent ``null`` has to translate."""
    if error.validator == "type":
        import json

        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        value = json.dumps(error.instance, default=str)
        value = value if len(value) <= 80 else value[:77] + "..."
        return f"{value} is not of type {' or '.join(repr(t) for t in wanted)}"[:300]
    return str(error.message)[:300]


@functools.cache
def _bounded(cls: Any) -> Any:
    """``cls`` (a jsonschema validator class) with a ``pattern`` keyword no upstream's regex can stall
    (``policy.schema_patterns``)."""
    from jsonschema.validators import extend

    from ..policy.schema_patterns import safe_pattern

    return extend(cls, {"pattern": safe_pattern})
