"""Wiring: settings read once at the edge, and the one function that assembles a ``Gateway``.

The CLI and both transports go through ``open_gateway``, so ``mcp-gateway call`` and the MCP
``call`` tool run exactly the same code against the same state.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2

from .approvals import ApprovalService
from .audit import Auditor
from .clock import Clock, SystemClock
from .credentials import CredentialVault
from .crypto import AESGCMCipher, load_master_key
from .errors import GatewayError
from .execution.mcp import McpExecutor
from .gateway import Gateway
from .links import LinkService
from .manifest import Manifest, load_manifest
from .store.sqlite import SQLiteStore
from .sync import Progress

__all__ = ["Settings", "open_gateway", "open_store", "reload_manifest", "reload_on_sighup"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    manifest_path: Path | None
    """None means the bundled default manifest."""
    state_dir: Path
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, manifest: str | None = None, state_dir: str | None = None
    ) -> Settings:
        env = dict(os.environ if env is None else env)
        manifest = manifest or env.get("MCP_GATEWAY_MANIFEST")
        state = state_dir or env.get("MCP_GATEWAY_STATE_DIR") or ".mcp-gateway"
        return cls(manifest_path=Path(manifest) if manifest else None, state_dir=Path(state), env=env)

    @property
    def database(self) -> Path:
        return self.state_dir / "state.db"


@asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[SQLiteStore]:
    settings.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    store = SQLiteStore(settings.database)
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
) -> AsyncIterator[Gateway]:
    """Load the manifest, open the state, sync every connector, and yield a ready gateway."""
    manifest = manifest or load_manifest(settings.manifest_path)
    clock = clock or SystemClock()
    async with open_store(settings) as store:
        cipher = AESGCMCipher(load_master_key(settings.env, settings.state_dir), project=manifest.project)
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
                executors={"mcp": mcp},
            )
            try:
                await gateway.sync(progress)
                yield gateway
            finally:
                await gateway.aclose()


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
    return None


async def reload_on_sighup(gateway: Gateway, settings: Settings) -> None:
    """``kill -HUP <pid>`` re-reads the manifest (runs until cancelled)."""
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            await reload_manifest(gateway, settings)
