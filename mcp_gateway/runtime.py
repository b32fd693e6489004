"""Wiring: settings read once at the edge, and the one function that assembles a ``Gateway``.

The CLI and both transports go through ``open_gateway``, so ``mcp-gateway call`` and the MCP
``call`` tool run exactly the same code against the same state.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import anyio.to_thread
import httpx2

from .core import Gateway
from .core.admission import TrafficGate
from .core.sync import Progress
from .discovery import DiscoveryIndex, EmbeddingsUnavailable, ReviewCache, SegmentCache
from .discovery.hybrid import HybridSearch, discovery_status
from .execution.mcp_sessions import McpExecutor
from .manifest import ConnectorConfig, Manifest, blank_manifest, load_manifest
from .manifest.discovery_mode import discovery_override
from .primitives.catalog_memory import collect_frozen_garbage, limit_malloc_arenas
from .primitives.cookies import no_cookies
from .primitives.crypto import KEY_ENV_VAR, KEY_FILE_NAME, AESGCMCipher, derive_key, load_master_key
from .primitives.secrets import PROJECT_WIDE, SealedCredential
from .services.approvals import ApprovalService
from .services.audit import RETRY_SECONDS, Auditor
from .services.credentials import CredentialVault
from .services.links import LinkService
from .services.logs import routine
from .store.audit_journal import AuditJournal
from .store.contract import Store
from .store.opening import open_store
from .vocabulary.clock import Clock, SystemClock
from .vocabulary.errors import GatewayError, StoreUnavailable
from .vocabulary.served import manifest_digest, read_served
from .vocabulary.settings import Settings

__all__ = [
    "DISCOVERY_SECRET",
    "BackgroundSync",
    "LazyTransport",
    "Settings",
    "SighupReloads",
    "check_discovery",
    "discovery_override",
    "discovery_search",
    "links_base",
    "open_gateway",
    "open_store",
    "reload_manifest",
    "watch_manifest",
]

logger = logging.getLogger(__name__)


@dataclass
class BackgroundSync:
    """A sync that runs after the gateway is handed out (``open_gateway(background=...)``), so a stdio
    server answers ``initialize`` and ``tools/list`` at once.

    The sync starts once the server says it answered its first ``tools/list`` (``served``), or after
    ``grace`` seconds, so its CPU-heavy part (indexing) does not delay that answer; ``ready`` is set
    when the catalog is loaded. Whatever needs the whole catalog awaits ``wait_ready``; what needs one
    connector awaits ``wait_for``, which returns once that connector's own load is over: an upstream
    that hangs until its timeout holds up only the calls to its own connector. ``connectors`` and
    ``discover`` await ``wait_patiently``: at most ``patience`` seconds, then they answer with what has
    loaded and name the rest as still loading.
    """

    grace: float = 1.0
    patience: float = 3.0
    served: anyio.Event = field(default_factory=anyio.Event)
    ready: anyio.Event = field(default_factory=anyio.Event)
    settled: dict[str, anyio.Event] = field(default_factory=dict[str, anyio.Event])
    """One event per connector whose load was waited for or is over (set for all once ``ready`` is)."""

    async def wait_ready(self) -> None:
        self.served.set()  # a caller needs the catalog now: no reason to hold the sync back
        await self.ready.wait()

    async def wait_patiently(self) -> list[str]:
        """Wait for the whole sync, at most ``patience`` seconds. The connectors whose own load is over
        while the rest is still running, for the caller to have the gateway ``adopt``; none once the
        sync is over."""
        with anyio.move_on_after(self.patience):
            await self.wait_ready()
        if self.ready.is_set():
            return []
        return [slug for slug, event in self.settled.items() if event.is_set()]

    async def wait_for(self, slug: str) -> bool:
        """Wait until connector ``slug`` has loaded (or failed to), or the whole sync is over (a name that
        is no connector's). True when the rest of the sync is still running: the caller then has the
        gateway ``adopt`` the connector."""
        self.served.set()
        if self.ready.is_set():
            return False
        await self.settled.setdefault(slug, anyio.Event()).wait()
        return not self.ready.is_set()

    def _settle(self, slug: str) -> None:
        self.settled.setdefault(slug, anyio.Event()).set()

    async def run(self, gateway: Gateway, progress: Progress | None) -> None:
        with anyio.move_on_after(self.grace):
            await self.served.wait()
        try:
            await gateway.sync(progress, settled=self._settle)
        finally:
            self.ready.set()
            for event in self.settled.values():
                event.set()


class LazyTransport(httpx2.AsyncBaseTransport):
    """httpx2's own transport (``trust_env=False``), made by the first request: making it imports
    httpcore2 and loads the CA bundle, which a start that sends nothing (a warm catalog,
    a listing command) should not pay. It is made in a worker thread, off the event loop."""

    def __init__(self) -> None:
        self._transport: httpx2.AsyncHTTPTransport | None = None
        self._lock = anyio.Lock()

    async def _made(self) -> httpx2.AsyncHTTPTransport:
        async with self._lock:
            if self._transport is None:
                self._transport = await anyio.to_thread.run_sync(lambda: httpx2.AsyncHTTPTransport(trust_env=False))
            return self._transport

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        transport = self._transport or await self._made()
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()


@asynccontextmanager
async def open_gateway(
    settings: Settings,
    *,
    manifest: Manifest | None = None,
    public_url: str | None = None,
    on_link_minted: Callable[[], Awaitable[None] | None] | None = None,
    progress: Progress | None = None,
    clock: Clock | None = None,
    background: BackgroundSync | None = None,
    build_index: bool = True,
    embed: bool = True,
    embed_now: bool = False,
    resident: bool = True,
    stop: anyio.CancelScope | None = None,
) -> AsyncIterator[Gateway]:
    """Load the manifest, open the state, sync every connector, and yield a ready gateway.

    With ``background``, the gateway is yielded before the sync, which runs beside the caller
    (see ``BackgroundSync``); the caller makes everything that needs the catalog wait for it.
    ``build_index=False``: the discovery index stays empty (for a command that only reports states).
    ``embed=False``: hybrid discovery embeds no catalog in the background (a one-shot command exits
    long before a catalog is embedded; it would only load the model and wait for its first batch).
    ``embed_now=True``: the first sync embeds the changed catalogs before the gateway is yielded (the
    ``sync`` and ``add`` commands: the vectors are stored, and the next ``serve`` ranks hybrid at once).
    ``resident=False``: the first sync does not share equal values across the catalog (a one-shot
    command exits before the memory it would save matters; sharing slows decoding a stored catalog).
    ``stop``: a scope around the first sync, cancelled to cut it short (a stop asked for while ``serve``
    starts): the gateway is yielded with what loaded, for the caller to close."""
    if "MALLOC_ARENA_MAX" not in os.environ:  # else glibc read the operator's own choice at start
        limit_malloc_arenas()  # before the store's and the sync's threads allocate
    manifest = manifest or load_manifest(settings.manifest_path)
    manifest = discovery_override(manifest, settings.env)
    check_discovery(manifest)  # first: `mode: hybrid` without the embeddings extra fails before anything is opened
    clock = clock or SystemClock()
    async with open_store(settings) as store:
        key_file = settings.state_dir / KEY_FILE_NAME
        made_now = not (settings.env.get(KEY_ENV_VAR) or "").strip() and not key_file.exists()
        master_key = load_master_key(settings.env, settings.state_dir)
        cipher = AESGCMCipher(master_key, project=manifest.project)
        vault = CredentialVault(store, cipher, project=manifest.project)
        if made_now and (stored := len(await store.list_credentials())):
            # A key file deleted or lost with credentials still stored: the new key opens none of them.
            logger.error(
                "the master key file %s was missing and a new key was made, but the store holds %d credentials "
                "sealed under the previous key: none of them can be opened. Stop, put the previous master.key "
                "back (from a backup), and start again; or enter them again (`mcp-gateway secret set`, connect "
                "links)",
                key_file,
                stored,
            )
        links = LinkService(store, clock, public_url or links_base(manifest, settings), on_mint=on_link_minted)
        # trust_env=False: a proxy from the environment would see every credential we send. No cookie
        # is kept: one caller's upstream session must not ride along with another's requests through
        # the shared client (its token requests, say), and an upstream's Set-Cookie must not grow memory.
        # The MCP executor owns the upstream MCP sessions; leaving it stops every stdio child.
        async with (
            httpx2.AsyncClient(
                transport=LazyTransport(), trust_env=False, follow_redirects=False, cookies=no_cookies()
            ) as http,
            McpExecutor(base_dir=manifest.base_dir) as mcp,
        ):
            search = await discovery_search(manifest, store, vault, http)
            kept = settings.state_dir if settings.state_dir.is_dir() else None
            if search is not None:
                search.state_dir = kept  # other processes of the folder see how far an embedding is
            gateway = Gateway(
                manifest=manifest,
                store=store,
                vault=vault,
                clock=clock,
                http=http,
                links=links,
                approvals=ApprovalService(store, clock),
                # Outcome rows the store refuses wait in the state folder until it answers again.
                auditor=Auditor(store, journal=AuditJournal(settings.state_dir), retry_for=_audit_retry(settings.env)),
                mcp=mcp,
                page_key=derive_key(master_key, "pages", manifest.project),
                traffic=traffic_gate(store),
                dense=search,
                # Built segments and hidden-text scans outlive the process: the next start on unchanged
                # catalogs reads them back. Only into a state folder that exists (SQLite's; PostgreSQL
                # needs none, so none is made).
                index=DiscoveryIndex(SegmentCache(kept / "discovery-index") if kept else None),
                review_cache=ReviewCache(kept / "review-scan") if kept else None,
            )
            gateway.manifest_file = str(settings.manifest_path) if settings.manifest_path is not None else None
            logger.info("%s", discovery_status(search))
            try:
                # Audit rows are written by a background task; leaving this block (close, SIGTERM,
                # stdio EOF) writes whatever is still queued before the store closes. Vectors for
                # hybrid discover are computed by another, after each sync, off the event loop.
                async with gateway.auditor.running():
                    # Calls a crashed instance left without an outcome (see audit.Auditor).
                    await gateway.auditor.interrupt_started()
                    failed: Exception | None = None
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(gateway.reload_drifted)
                        if search is not None and embed:
                            search.will_run()
                            tasks.start_soon(_embed_when_loaded, search, background)
                        try:
                            if background is None:
                                with stop or anyio.CancelScope():
                                    await gateway.sync(progress, index=build_index, share=resident, embed=embed_now)
                            else:
                                tasks.start_soon(background.run, gateway, progress)
                            yield gateway
                        except Exception as exc:  # re-raised as is below, not wrapped in an ExceptionGroup
                            failed = exc
                        tasks.cancel_scope.cancel()
                    if failed is not None:
                        raise failed
            finally:
                await gateway.aclose()


def links_base(manifest: Manifest, settings: Settings) -> str:
    """Where the links this process mints point: the manifest's ``public_url`` when the operator wrote
    one; else the address a gateway of this state folder serves right now (``served.json``), so a link
    minted beside ``serve --transport http --port N`` opens on port N; else the default address."""
    if "public_url" in manifest.model_fields_set:
        return manifest.public_url
    served = read_served(settings.state_dir)
    return served.url if served is not None else manifest.public_url


async def _embed_when_loaded(search: HybridSearch, background: BackgroundSync | None) -> None:
    """Run the embedder; after a background sync, once the catalog is loaded: loading the model and
    embedding beside the sync would slow the sync that the first tool call waits for."""
    if background is not None:
        await background.ready.wait()
    await search.run()


def traffic_gate(store: Store) -> TrafficGate:
    """Rate limits in memory, or in the database when several instances share PostgreSQL (so the
    manifest's ``limits:`` hold across all of them)."""
    if type(store).__name__ != "PostgresStore":  # asyncpg (an extra) is imported only when in use
        return TrafficGate()
    from .store.postgres import PostgresBuckets, PostgresStore

    return TrafficGate(shared=PostgresBuckets(store) if isinstance(store, PostgresStore) else None)


DISCOVERY_SECRET = ("_discovery", "embeddings")
"""Where the API key of ``discovery.embeddings`` is stored: connector ``_discovery`` (no slug starts with
``_``), secret name ``embeddings``, project-wide: ``mcp-gateway secret set --discovery``."""


AUDIT_RETRY_ENV = "MCP_GATEWAY_AUDIT_RETRY_SECONDS"
"""How long a call holds its answer retrying an outcome row the database refused before it journals
the row (``audit.RETRY_SECONDS`` unless set): longer for a database whose failover takes longer."""
MAX_AUDIT_RETRY = 300.0


def _audit_retry(env: Mapping[str, str]) -> float:
    text = (env.get(AUDIT_RETRY_ENV) or "").strip()
    if not text:
        return RETRY_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_AUDIT_RETRY:  # NaN fails both
        raise GatewayError(f"${AUDIT_RETRY_ENV} must be a number of seconds from 0 to 300, not {text[:40]!r}")
    return seconds


def check_discovery(manifest: Manifest) -> None:
    """Raise ``EmbeddingsUnavailable`` (naming the install command) for ``mode: hybrid`` without the extra."""
    if manifest.discovery.effective_mode == "hybrid" and manifest.discovery.embeddings is None:
        from .discovery.providers import local_provider

        local_provider()


async def discovery_search(
    manifest: Manifest, store: Store, vault: CredentialVault, http: httpx2.AsyncClient
) -> HybridSearch | None:
    """Dense retrieval for ``discover`` as the manifest asks (``discovery``), or None for lexical only.

    ``mode: auto`` is hybrid whenever it can be: an ``embeddings`` endpoint is configured, or the
    ``embeddings`` extra (numpy, tokenizers, onnxruntime and the bundled model) imports.
    """
    config = manifest.discovery
    mode = config.effective_mode
    if mode == "lexical":
        return None
    from .discovery.providers import OpenAIEmbeddings, local_provider

    if config.embeddings is not None:
        connector, name = DISCOVERY_SECRET
        sealed = await vault.sealed(connector, principal=PROJECT_WIDE, name=name)
        key = _SealedKey(sealed) if sealed is not None else None
        provider = OpenAIEmbeddings(config.embeddings.url, config.embeddings.model, http, api_key=key)
        return HybridSearch(provider, store, label=f"{config.embeddings.model} at {config.embeddings.url}")
    try:
        provider = local_provider()
    except EmbeddingsUnavailable:
        if mode == "hybrid":
            raise
        return None
    return HybridSearch(provider, store)


class _SealedKey:
    """The endpoint's API key, opened only while a request is built (``OpenAIEmbeddings`` calls ``reveal``)."""

    def __init__(self, sealed: SealedCredential) -> None:
        self._sealed = sealed

    def __repr__(self) -> str:
        return "_SealedKey(<sealed>)"

    def reveal(self) -> str | dict[str, str]:
        return self._sealed.open().reveal()


async def reload_manifest(gateway: Gateway, settings: Settings) -> str | None:
    """Re-read the manifest and re-sync. On any problem the running gateway is left exactly as it
    was and the reason is returned (and logged), so a half-edited file never takes effect."""
    return (await _reload(gateway, settings))[0]


async def _reload(gateway: Gateway, settings: Settings) -> tuple[str | None, bool]:
    """``reload_manifest``, and whether the reason will pass by itself (the database was unreachable)."""
    before = gateway.manifest
    if blank_manifest(settings.manifest_path):
        # Truncated, then written: an editor or a copy caught mid-save, not an operator removing everything.
        logger.warning(
            "manifest reload put off, keeping the previous one: the file is empty (being saved?); it is read "
            "again when it changes (to serve nothing, leave 'connectors: []' in it)"
        )
        return "the manifest file is empty", False
    try:
        manifest = discovery_override(load_manifest(settings.manifest_path), settings.env)
        await gateway.reload(manifest)
    except Exception as exc:
        # A reload runs beside the calls being served: whatever goes wrong, it must not end the server.
        problem = _anticipated(exc)
        if isinstance(problem, StoreUnavailable):
            gateway.health.failed(problem)
            logger.warning(
                "manifest reload put off, keeping the previous one: the database cannot be used (%s); "
                "it is tried again once the database answers",
                problem,
            )
            return str(problem), True
        if problem is not None:
            logger.warning("manifest reload refused, keeping the previous one: %s", problem)
            return str(problem), False
        logger.error(
            "manifest reload failed, keeping the previous one: unexpected %s", type(exc).__name__, exc_info=_debugging()
        )
        return f"unexpected {type(exc).__name__}", False
    collect_frozen_garbage()
    routine(logger, "manifest reloaded: %d connectors%s", len(manifest.connectors), _changes(before, manifest))
    return None, False


def _anticipated(exc: BaseException) -> GatewayError | None:
    """The ``GatewayError`` an exception is, or the first a group of them holds (a task group's wrapping of
    a store outage met by one connector's load), with an outage first, whatever else failed beside it:
    the reload is tried again once the database is back; None for anything else."""
    if isinstance(exc, GatewayError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        leaves = [_anticipated(e) for e in exc.exceptions]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        outage = next((leaf for leaf in leaves if isinstance(leaf, StoreUnavailable)), None)
        if outage is not None:
            return outage
        if leaves and all(leaf is not None for leaf in leaves):
            return leaves[0]
    return None


def _debugging() -> bool:
    return logging.getLogger("mcp_gateway").isEnabledFor(logging.DEBUG)


def _changes(old: Manifest, after: Manifest) -> str:
    """What a reload changed, for its log line: ``(added x; removed y; changed z; changed agents,
    policies)``, or that nothing did."""
    before: Mapping[str, ConnectorConfig] = {c.slug: c for c in old.connectors}
    now = {c.slug: c for c in after.connectors}
    sections = [
        name for name in type(after).model_fields if name != "connectors" and getattr(old, name) != getattr(after, name)
    ]
    parts = [
        f"{what} {', '.join(names)}"
        for what, names in (
            ("added", [s for s in now if s not in before]),
            ("removed", [s for s in before if s not in now]),
            ("changed", [s for s in now if s in before and now[s] != before[s]]),
            ("changed", sections),
        )
        if names
    ]
    return f" ({'; '.join(parts)})" if parts else " (nothing changed)"


class SighupReloads:
    """``kill -HUP <pid>`` re-reads the manifest. Caught from the moment ``serve`` begins, before the
    start-up load (a slow spec URL or an ``npx`` server can make it long), where SIGHUP's default action
    would end the process without a word (a ``systemctl reload`` right after a restart, logrotate's
    ``postrotate``): a SIGHUP then is logged and its reload run once the start ends."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._gateway: Gateway | None = None
        self._on_reloaded: Callable[[], None] | None = None
        self._asked = False
        self._ready = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Receive SIGHUP until cancelled; ``started`` once the handler is in place."""
        with anyio.open_signal_receiver(signal.SIGHUP) as signals:
            task_status.started()
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._after_start)
                async for _ in signals:
                    if self._gateway is None:
                        if not self._asked:
                            routine(logger, "SIGHUP during start-up: the manifest is read again once the start ends")
                        self._asked = True
                        continue
                    await self._reload()

    def started(self, gateway: Gateway, on_reloaded: Callable[[], None] | None = None) -> None:
        """The start is over: reload now if a SIGHUP asked for it meanwhile, then on each one."""
        self._gateway, self._on_reloaded = gateway, on_reloaded
        self._ready.set()

    async def _after_start(self) -> None:
        await self._ready.wait()
        if self._asked:
            await self._reload()

    async def _reload(self) -> None:
        assert self._gateway is not None
        if await reload_manifest(self._gateway, self._settings) is None and self._on_reloaded is not None:
            self._on_reloaded()


MANIFEST_POLL_SECONDS = 1.0
RELOAD_RETRY_SECONDS = 10.0
"""Seconds before a reload put off by a database outage is tried again."""


async def watch_manifest(
    gateway: Gateway,
    settings: Settings,
    on_reloaded: Callable[[], None] | None = None,
    *,
    interval: float = MANIFEST_POLL_SECONDS,
) -> None:
    """Reload when the manifest file's content changes (``add``, ``remove``, an editor), until cancelled.

    Polling the file's size and modification time is one ``stat`` a second, portable, and needs no
    extra dependency; the content's hash decides, so touching the file or an editor's rewrite of the
    same text reloads nothing. A half-written or invalid file is refused by ``reload_manifest``."""
    path = settings.manifest_path
    if path is None:
        return  # the bundled default never changes while we run
    seen, digest = _file_mark(path), manifest_digest(path)
    while True:
        await anyio.sleep(interval)
        mark = _file_mark(path)
        if mark == seen:
            continue
        seen = mark
        now = manifest_digest(path)
        if not now or now == digest:
            continue
        problem, passing = await _reload(gateway, settings)
        if problem is None:
            digest = now
            if on_reloaded is not None:
                on_reloaded()
        elif passing:
            seen = None  # the same file is tried again, after a pause: one warning per try, not per second
            await anyio.sleep(RELOAD_RETRY_SECONDS)
        else:
            digest = now  # a refused file is not tried again until it changes


def _file_mark(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size
