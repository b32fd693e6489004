"""A real gateway and its human pages in process, for page tests.

    async with page_site(tmp_path, MANIFEST, upstream) as site:
        url = (await site.gateway.connect(principal, "slug")).connect_url
        page = await site.http.get(url.removeprefix(PUBLIC))

SQLite store, AES-GCM vault, link and approval services and auditor are the real ones; the clock
is a ``FixedClock`` and the upstream a ``httpx2.MockTransport`` handler the test passes. The pages
app (Starlette) is reached over ``httpx2.ASGITransport`` at ``PUBLIC``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
from starlette.applications import Starlette

from mcp_gateway.core import Gateway
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.primitives.crypto import AESGCMCipher
from mcp_gateway.server.web import web_routes
from mcp_gateway.services.approvals import ApprovalService
from mcp_gateway.services.audit import Auditor
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.services.links import LinkService
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.clock import FixedClock

__all__ = ["PUBLIC", "PageSite", "page_site"]

PUBLIC = "http://pages.test"


@dataclass
class PageSite:
    gateway: Gateway
    store: SQLiteStore
    vault: CredentialVault
    clock: FixedClock
    http: httpx2.AsyncClient


Upstream = (
    Callable[[httpx2.Request], httpx2.Response] | Callable[[httpx2.Request], Coroutine[None, None, httpx2.Response]]
)
"""The upstream's handler: plain, or a coroutine (an answer that waits for the test)."""


@asynccontextmanager
async def page_site(
    tmp_path: Path,
    manifest: str,
    upstream: Callable[[httpx2.Request], httpx2.Response]
    | Callable[[httpx2.Request], Coroutine[None, None, httpx2.Response]],
    *,
    credentials: dict[str, str] | None = None,
) -> AsyncIterator[PageSite]:
    """``credentials``: team-wide credentials stored before the gateway starts (as ``secret set`` would)."""
    parsed = parse_manifest(manifest, base_dir=tmp_path)
    clock = FixedClock()
    async with SQLiteStore(tmp_path / "pages.db") as store:
        cipher = AESGCMCipher(b"k" * 32, project=parsed.project)
        vault = CredentialVault(store, cipher, project=parsed.project)
        for connector, value in (credentials or {}).items():
            await vault.put(connector, value)
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream)) as client:
            gateway = Gateway(
                manifest=parsed,
                store=store,
                vault=vault,
                clock=clock,
                http=client,
                links=LinkService(store, clock, PUBLIC),
                approvals=ApprovalService(store, clock),
                auditor=Auditor(store),
            )
            await gateway.sync()
            app = Starlette(routes=web_routes(gateway))
            async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url=PUBLIC) as http:
                yield PageSite(gateway, store, vault, clock, http)
