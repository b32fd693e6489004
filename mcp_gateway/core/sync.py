"""Sync: manifest connectors -> normalized, persisted catalogs. Best effort per connector.

A connector whose source cannot be read or normalized gets ``status=error`` with its reason and
zero actions; the others load. Each source kind is a ``sources.base.Source`` (picked by
``source_for``); it reuses the stored catalog when its fingerprint says nothing changed
(``sources/_fingerprint.py``), so restarting on an unchanged spec only reads the catalog back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import assert_never

import anyio

from ..execution import said
from ..execution.graphql_introspection import GraphQLServices
from ..manifest import ConnectorConfig, GraphQLSource, HttpSource, Manifest, McpSource, OpenAPISource, PostmanSource
from ..primitives.catalog_memory import CatalogSharing, release_free_memory
from ..primitives.sanitize import MAX_ERROR_CHARS
from ..primitives.url_secrets import shown_url
from ..services.logs import known_secrets
from ..sources.base import EmptySource, LoadContext, Normalized, Source
from ..sources.generic_request import WithRequestAction
from ..sources.graphql_schemas import GraphQLSchemas
from ..sources.http import HttpLoader
from ..sources.mcp import McpLoader, McpTools
from ..sources.openapi import OpenAPILoader
from ..sources.postman import PostmanLoader
from ..store.contract import CatalogRecord, ConnectorState, Store
from ..vocabulary.clock import Clock
from ..vocabulary.errors import GatewayError
from ..vocabulary.model import Action

__all__ = [
    "ConnectorCatalog",
    "McpTools",
    "Progress",
    "describe_source",
    "fetched_base_url",
    "source_for",
    "sync_connector",
    "sync_manifest",
]

logger = logging.getLogger(__name__)
Progress = Callable[[str, str], None]
"""Called with (slug, phase) as a connector loads: ``start``, ``cached``, ``normalized``, ``error``."""


@dataclass(frozen=True)
class ConnectorCatalog:
    state: ConnectorState
    actions: list[Action]
    base_url: str | None
    fingerprint: str | None = None
    """Changes exactly when the actions may have changed; None for a connector that failed."""
    withheld: str | None = None
    """What the upstream said when it failed, withheld from ``state.error`` because it reads as
    instructions to the model: cleaned, redacted and flagged, for the operator's review only."""
    kept: str | None = None
    """The load error of a connector that failed to load and serves the catalog it last loaded."""


def describe_source(cfg: ConnectorConfig) -> str:
    """What ``sync`` shows of ``cfg``'s source (and the store keeps): a URL as ``shown_url`` shows it,
    since an operator may have written a password or a token into it; a file by its name."""
    match cfg.source:
        case OpenAPISource(openapi=ref):
            return f"openapi:{_shown_ref(ref)}"
        case HttpSource(http=h):
            return f"http:{len(h.actions)} actions"
        case PostmanSource(postman=ref):
            return f"postman:{_shown_ref(ref)}"
        case GraphQLSource(graphql=g):
            return f"graphql:{Path(g.schema_).name}" if g.schema_ else "graphql:introspect"
        case McpSource(mcp=m):
            if m.url:
                return f"mcp:{shown_url(m.url)}"
            return f"mcp:{' '.join(shown_url(a) if '://' in a else a for a in m.command or [])}"
        case None:
            return "none"
        case unreachable:
            assert_never(unreachable)


def _shown_ref(ref: str) -> str:
    return shown_url(ref) if ref.startswith("http") else Path(ref).name


def fetched_base_url(cfg: ConnectorConfig, manifest: Manifest) -> str | None:
    """The URL of the description ``cfg``'s base URL comes from, when the manifest names no base URL
    and the OpenAPI or Postman source is fetched from a URL (its ``servers`` can change at any sync)."""
    if cfg.base_url:
        return None
    match cfg.source:
        case OpenAPISource(openapi=ref) | PostmanSource(postman=ref):
            resolved = manifest.resolve(ref)
            return resolved if resolved.startswith(("http://", "https://")) else None
        case _:
            return None


def source_for(cfg: ConnectorConfig, graphql: GraphQLServices, mcp_tools: McpTools | None) -> Source:
    """The ``Source`` that loads ``cfg``'s ``source:`` (plus the request action, when it has one)."""
    source: Source
    match cfg.source:
        case OpenAPISource(openapi=ref, credential_params=names):
            source = OpenAPILoader(ref, tuple(names))
        case HttpSource(http=h):
            source = HttpLoader(h.actions)
        case PostmanSource(postman=ref):
            source = PostmanLoader(ref)
        case GraphQLSource(graphql=spec):
            from ..sources.graphql import GraphQLLoader  # graphql-core, for GraphQL connectors only

            source = GraphQLLoader(spec, graphql.schemas, graphql.introspect_connector)
        case McpSource():
            source = McpLoader(mcp_tools)
        case None:
            source = EmptySource()
        case unreachable:
            assert_never(unreachable)
    return WithRequestAction(source) if cfg.request_action else source


REMOTE_AT_ONCE = 8
"""Connectors read over the network that one sync loads at the same time."""


def _remote(cfg: ConnectorConfig, manifest: Manifest) -> bool:
    """Whether loading ``cfg`` waits on another process or the network (an MCP server, a spec or a
    collection fetched from a URL, a schema read by introspection)."""
    match cfg.source:
        case McpSource():
            return True
        case GraphQLSource(graphql=spec):
            return not spec.schema_
        case OpenAPISource(openapi=ref) | PostmanSource(postman=ref):
            return manifest.resolve(ref).startswith(("http://", "https://"))
        case _:
            return False


def served_by_upstream(cfg: ConnectorConfig) -> bool:
    """Whether the connector's catalog is what its live upstream says, not a document's."""
    return isinstance(cfg.source, McpSource) or (
        isinstance(cfg.source, GraphQLSource) and cfg.source.graphql.introspect
    )


def kept_catalog(
    cfg: ConnectorConfig, source: str, previous: ConnectorState | None, cached: CatalogRecord | None
) -> CatalogRecord | None:
    """The stored catalog a connector that failed to load keeps serving, or None.

    A connector that served actions and now fails to load, its source unchanged (its spec file replaced
    by a half-copied one, a new version with a broken ``$ref``, its spec URL down), keeps the catalog
    it last loaded, its state saying why, until a load succeeds: a broken spec must not empty a
    working connector, as a broken manifest does not. Decided from the store, so every process (a
    server, a CLI command) says the same of it. A connector whose catalog its live upstream gives (an
    MCP server's tools, a GraphQL endpoint's introspection) is not kept: an upstream that does not
    answer, or refuses the credential, says so by failing."""
    if cached is None or not cached.actions or previous is None or previous.status != "ready":
        return None
    return cached if previous.source == source and not served_by_upstream(cfg) else None


def _stored(record: CatalogRecord | None) -> Normalized | None:
    if record is None:
        return None
    return Normalized(record.actions, record.base_url, record.fingerprint, record.files)


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
    share: bool = True,
    guard: anyio.Lock | None = None,
    previous: ConnectorState | None = None,
) -> ConnectorCatalog:
    """``sharing``: the table this connector's catalog shares equal values through; ``sync_manifest``
    passes one for all its connectors, and a catalog normalized just now then comes back with no
    actions: they are parked in ``sharing`` and ``sync_manifest`` fills them in after the last parse.
    Without it the connector gets a table of its own and the heap is trimmed after. ``share=False``:
    no sharing at all, for a catalog that does not stay resident (a command that lists and exits);
    sharing triples the cost of decoding a stored catalog. ``guard``: held while this connector reads or
    writes ``sharing``, which connectors loading at the same time share. ``previous``: its state as the
    store had it, for ``kept_catalog``."""
    parked = False
    cached: CatalogRecord | None = None
    kept: str | None = None
    withheld: str | None = None
    table = sharing or CatalogSharing()
    source = describe_source(cfg)
    if progress:
        progress(cfg.slug, "start")
    try:
        async with guard or nullcontext():
            with table.active() if share else nullcontext():  # the store shares a catalog's actions as it decodes
                cached = await store.get_catalog(cfg.slug)
        loader = source_for(cfg, graphql or GraphQLServices(GraphQLSchemas()), mcp_tools)
        loaded = await loader.load(cfg, LoadContext(manifest.resolve, _stored(cached)))
        actions, spec_base_url, fp, files = loaded.actions, loaded.base_url, loaded.fingerprint, loaded.files
        scrubbed = False
        if known_secrets():
            # Read with a credential (introspection, an MCP server's environment), a catalog may echo it.
            actions, scrubbed = await anyio.to_thread.run_sync(_without_secrets, cfg.slug, actions)
        reused = cached is not None and cached.fingerprint == fp and not scrubbed
        if not reused:
            await store.put_catalog(
                CatalogRecord(slug=cfg.slug, fingerprint=fp, actions=actions, files=files, base_url=spec_base_url)
            )
        # The catalog stays resident for the process's life: equal values become one object.
        async with guard or nullcontext():
            if share and sharing is not None and not reused:
                await anyio.to_thread.run_sync(sharing.park, cfg.slug, actions)
                parked = True
            elif share:  # what the store decoded is shared already, and skipped
                await anyio.to_thread.run_sync(table.share_actions, actions)
        if sharing is None:
            table.clear()
            release_free_memory()
        state = ConnectorState(
            slug=cfg.slug, source=source, status="ready", actions=len(actions), synced_at=clock.now()
        )
        if progress:
            progress(cfg.slug, "cached" if reused else "normalized")
    except Exception as exc:
        if isinstance(exc, GatewayError):
            # The message may quote the upstream (screened where it was made): screened once more as it is
            # stored, so that no error text reaches a result, a table or a log without redaction and cleaning.
            error = said(exc, max_chars=MAX_ERROR_CHARS).text
            withheld = exc.withheld
            if withheld:
                logger.warning(
                    "connector %s: the upstream's error text was withheld from agents: it looks like instructions "
                    "to the model; `mcp-gateway review` shows it",
                    cfg.slug,
                )
        else:
            # One line; the traceback under --debug only (a multi-line record breaks line-based log shippers).
            logger.error(
                "connector %s failed to load: unexpected %s",
                cfg.slug,
                type(exc).__name__,
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )
            error = f"unexpected {type(exc).__name__} while loading; run with --debug for details"
        actions, spec_base_url, fp = [], None, None
        state = ConnectorState(
            slug=cfg.slug, source=source, status="error", actions=0, error=error, synced_at=clock.now()
        )
        if previous is not None and (last := kept_catalog(cfg, source, previous, cached)) is not None:
            actions, spec_base_url, fp, kept = last.actions, last.base_url, last.fingerprint, error
            since = previous.synced_at.isoformat(timespec="seconds")
            state = previous.model_copy(
                update={
                    "actions": len(actions),
                    "error": f"loading it again failed, so the catalog loaded at {since} is kept: {error}",
                }
            )
        if progress:
            progress(cfg.slug, "error")
    await store.put_connector_state(state)
    return ConnectorCatalog(
        state=state,
        actions=[] if parked else actions,
        base_url=cfg.base_url or spec_base_url,
        fingerprint=fp,
        withheld=withheld,
        kept=kept,
    )


def _without_secrets(slug: str, actions: list[Action]) -> tuple[list[Action], bool]:
    """``actions`` with every secret the process has opened redacted from their text (names, summaries,
    descriptions, schemas, defaults), and whether any held one. An action whose redacted form is no
    longer a valid action (its name was the secret) is left out."""
    known = known_secrets()
    texts = [action.model_dump_json() for action in actions]
    # One look over the whole catalog first: a process that opened many secrets (many users' personal
    # credentials) holds thousands of forms, and looking for each in each action's text, thousands of
    # actions long, took minutes. Only a catalog that holds one is gone through action by action.
    joined = "\n".join(texts)
    if known.redact(joined) == joined:
        return actions, False
    kept: list[Action] = []
    changed = False
    for action, text in zip(actions, texts, strict=True):
        redacted = known.redact(text)
        if redacted == text:
            kept.append(action)
            continue
        changed = True
        binding = action.binding.model_dump_json()
        if known.redact(binding) != binding:
            # Its upstream name (a tool's, an operation's) holds the secret: the name the agent would see
            # is made from it (snake_case: no longer the secret's spelling), and calling it sends it.
            logger.warning(
                "connector %s: an action whose upstream name held a secret was left out of the catalog", slug
            )
            continue
        try:
            kept.append(Action.model_validate_json(redacted))
        except ValueError:
            logger.warning("connector %s: an action whose name held a secret was left out of the catalog", slug)
    if changed:
        logger.warning("connector %s: its catalog quoted a secret; it is redacted there", slug)
    return kept, changed


async def sync_manifest(
    manifest: Manifest,
    store: Store,
    clock: Clock,
    progress: Progress | None = None,
    *,
    graphql: GraphQLServices | None = None,
    mcp_tools: McpTools | None = None,
    share: bool = True,
    settled: Callable[[str], None] | None = None,
) -> dict[str, ConnectorCatalog]:
    """Sync every connector. ``graphql`` carries the schema cache the GraphQL executor
    shares and, for ``introspect: true``, the HTTP client and the connector's auth. ``mcp_tools``
    lists an MCP connector's tools (the gateway binds it to its MCP executor and the credential).
    ``share=False``: the catalogs do not stay resident, so equal values are not shared (see ``sync_connector``).
    ``settled``: called with a connector's slug once its load is over and its state and catalog are stored,
    before the others are done.

    Connectors read over the network (``_remote``: an MCP server, a fetched spec, an introspected
    schema) load side by side, up to ``REMOTE_AT_ONCE``: one that hangs until its timeout must not hold
    up the others for its whole timeout each. Local specs load one after another, as their parses are
    where a sync's memory peaks."""
    sharing = CatalogSharing()  # one table for the whole manifest: connectors share with each other too
    guard = anyio.Lock()
    limiter = anyio.CapacityLimiter(REMOTE_AT_ONCE)
    catalogs: dict[str, ConnectorCatalog] = {}
    previous = {state.slug: state for state in await store.list_connector_states()}

    async def one(c: ConnectorConfig) -> None:
        catalogs[c.slug] = await sync_connector(
            c,
            manifest,
            store,
            clock,
            progress,
            graphql=graphql,
            mcp_tools=mcp_tools,
            sharing=sharing,
            share=share,
            guard=guard,
            previous=previous.get(c.slug),
        )
        if settled is not None:
            settled(c.slug)

    async def remote(c: ConnectorConfig) -> None:
        async with limiter:
            await one(c)

    async with anyio.create_task_group() as tg:
        for c in manifest.connectors:
            if _remote(c, manifest):
                tg.start_soon(remote, c)
        for c in manifest.connectors:
            if not _remote(c, manifest):
                await one(c)
    catalogs = {c.slug: catalogs[c.slug] for c in manifest.connectors}  # manifest order
    for slug, actions in (await anyio.to_thread.run_sync(sharing.unpark)).items():
        if catalogs[slug].state.status == "ready":
            catalogs[slug] = replace(catalogs[slug], actions=actions)
    sharing.clear()  # the table and the specs parsed meanwhile are garbage now: give the heap back
    release_free_memory()
    return catalogs
