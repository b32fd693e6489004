"""Wiring: settings read once at the edge, and the one function that assembles a ``Gateway``.

The CLI and both transports go through ``open_gateway``, so ``mcp-gateway call`` and the MCP
``call`` tool run exactly the same code against the same state.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import httpx2

from .approvals import ApprovalService
from .audit import Auditor
from .catalog_memory import limit_malloc_arenas, validate_actions
from .clock import Clock, SystemClock
from .core import Gateway
from .core.sync import Progress
from .credentials import CredentialVault
from .crypto import AESGCMCipher, derive_key, load_master_key
from .discovery import DiscoveryIndex, EmbeddingReranker, minilm_reranker
from .errors import GatewayError
from .execution.mcp import McpExecutor
from .links import LinkService
from .manifest import Manifest, load_manifest
from .settings import Settings
from .store.base import Store
from .store.database_url import is_postgres_url, redact_url
from .store.sqlite import SQLiteStore

__all__ = [
    "BackgroundSync",
    "Settings",
    "discovery_index",
    "keep_discovery_warm",
    "open_gateway",
    "open_store",
    "reload_manifest",
    "reload_on_sighup",
]

logger = logging.getLogger(__name__)


@dataclass
class BackgroundSync:
    """A sync that runs after the gateway is handed out (``open_gateway(background=...)``), so a stdio
    server answers ``initialize`` and ``tools/list`` at once.

    The sync starts once the server says it answered its first ``tools/list`` (``served``), or after
    ``grace`` seconds, so its CPU-heavy part (indexing) does not delay that answer; ``ready`` is set
    when the catalog is loaded. Whatever needs the catalog awaits ``wait_ready``.
    """

    grace: float = 1.0
    served: anyio.Event = field(default_factory=anyio.Event)
    ready: anyio.Event = field(default_factory=anyio.Event)

    async def wait_ready(self) -> None:
        self.served.set()  # a caller needs the catalog now: no reason to hold the sync back
        await self.ready.wait()

    async def run(self, gateway: Gateway, progress: Progress | None) -> None:
        with anyio.move_on_after(self.grace):
            await self.served.wait()
        try:
            await gateway.sync(progress)
        finally:
            self.ready.set()


def _store_for(settings: Settings) -> Store:
    url = settings.database_url
    if not url:
        settings.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return SQLiteStore(settings.database, decode_actions=validate_actions)
    if not is_postgres_url(url):
        raise GatewayError(
            f"the database URL {redact_url(url)} is not a PostgreSQL URL; give postgresql://user:password@host:5432/"
            "database, or unset $MCP_GATEWAY_DATABASE_URL (and drop --database-url) to use the embedded SQLite "
            "database in the state folder"
        )
    try:
        from .store.postgres import PostgresStore
    except ImportError:
        raise GatewayError(
            "a PostgreSQL database URL is set but its driver is not installed; run: "
            "python3 -m pip install 'mcp-action-gateway[postgres]'"
        ) from None
    return PostgresStore(url, decode_actions=validate_actions)


@asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[Store]:
    """The store the settings select: PostgreSQL for a ``postgresql://`` URL, else SQLite in the state folder."""
    store = _store_for(settings)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def open_gateway(
    settings: Settings,
    *,
    manifest: Manifest | None = None,
    public_url: str | None = None,
    on_link_minted: Callable[[], None] | None = None,
    progress: Progress | None = None,
    clock: Clock | None = None,
    background: BackgroundSync | None = None,
    build_index: bool = True,
) -> AsyncIterator[Gateway]:
    """Load the manifest, open the state, sync every connector, and yield a ready gateway.

    With ``background``, the gateway is yielded before the sync, which runs beside the caller
    (see ``BackgroundSync``); the caller makes everything that needs the catalog wait for it.
    ``build_index=False``: the discovery index stays empty (for a command that only reports states)."""
    if "MALLOC_ARENA_MAX" not in os.environ:  # else glibc read the operator's own choice at start
        limit_malloc_arenas()  # before the store's and the sync's threads allocate (SPEC 12)
    manifest = manifest or load_manifest(settings.manifest_path)
    index = discovery_index(manifest)  # first: a missing embeddings extra fails before anything is opened
    clock = clock or SystemClock()
    async with open_store(settings) as store:
        master_key = load_master_key(settings.env, settings.state_dir)
        cipher = AESGCMCipher(master_key, project=manifest.project)
        vault = CredentialVault(store, cipher, project=manifest.project)
        links = LinkService(store, clock, public_url or manifest.public_url, on_mint=on_link_minted)
        # trust_env=False: a proxy from the environment would see every credential we send.
        # The MCP executor owns the upstream MCP sessions; leaving it stops every stdio child.
        async with (
            httpx2.AsyncClient(trust_env=False, follow_redirects=False) as http,
            McpExecutor(base_dir=manifest.base_dir) as mcp,
        ):
            gateway = Gateway(
                manifest=manifest,
                store=store,
                vault=vault,
                clock=clock,
                http=http,
                links=links,
                approvals=ApprovalService(store, clock),
                auditor=Auditor(store),
                mcp=mcp,
                page_key=derive_key(master_key, "pages", manifest.project),
                index=index,
            )
            try:
                # Audit rows are written by a background task; leaving this block (close, SIGTERM,
                # stdio EOF) writes whatever is still queued before the store closes.
                async with gateway.auditor.running():
                    if background is None:
                        await gateway.sync(progress, index=build_index)
                        yield gateway
                    else:
                        async with anyio.create_task_group() as tg:
                            tg.start_soon(background.run, gateway, progress)
                            yield gateway
                            tg.cancel_scope.cancel()
            finally:
                await gateway.aclose()


def discovery_index(manifest: Manifest) -> DiscoveryIndex:
    """The discovery index the manifest asks for: lexical, or with the MiniLM re-ranker (``discovery.reranker``).

    Raises:
        EmbeddingsUnavailable: ``minilm`` without the ``embeddings`` extra (a ``GatewayError`` naming
            the install command), so ``serve`` stops at startup rather than ranking differently.
    """
    if manifest.discovery.reranker == "minilm":
        return DiscoveryIndex(reranker=minilm_reranker())
    return DiscoveryIndex()


async def keep_discovery_warm(gateway: Gateway) -> None:
    """Embed newly indexed actions for the re-ranker in a worker thread, until cancelled; a no-op without one.

    ``serve`` runs it beside the transport, so startup never waits for it: until a query's candidates
    are embedded, that query is answered in lexical order.
    """
    reranker = gateway.index.reranker
    if isinstance(reranker, EmbeddingReranker):
        await reranker.keep_warm()


async def reload_manifest(gateway: Gateway, settings: Settings) -> str | None:
    """Re-read the manifest and re-sync. On any problem the running gateway is left exactly as it
    was and the reason is returned (and logged), so a half-edited file never takes effect."""
    try:
        manifest = load_manifest(settings.manifest_path)
        await gateway.reload(manifest)
    except GatewayError as exc:
        logger.warning("manifest reload refused, keeping the previous one: %s", exc)
        return str(exc)
    logger.warning("manifest reloaded: %d connectors", len(manifest.connectors))
    if (manifest.discovery.reranker == "minilm") != isinstance(gateway.index.reranker, EmbeddingReranker):
        logger.warning("discovery.reranker changed: it takes effect when the gateway restarts")
    return None


async def reload_on_sighup(gateway: Gateway, settings: Settings) -> None:
    """``kill -HUP <pid>`` re-reads the manifest (runs until cancelled)."""
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            await reload_manifest(gateway, settings)
