"""Transports: the streamable HTTP app (MCP at ``/mcp`` + human pages) and the stdio runner.

HTTP: every request to ``/mcp`` needs ``Authorization: Bearer <token>`` minted by ``token
create``; anything else gets a 401 with one short JSON body (no detail to probe with). Host and Origin are checked
against DNS rebinding on every route (``HostGuard``: pages, operator, OAuth callback, health) and
by the SDK's transport security on ``/mcp``, both from one allow-list for the address we bind.
stdio: stdout belongs to the protocol; the human pages are served on loopback at ``public_url``,
started the first time a link is minted, so every link the gateway hands out works.

Stopping: SIGTERM or SIGINT over HTTP stops uvicorn gracefully (no new connections; the requests in
flight finish, for at most the drain timeout) and then unwinds ``open_gateway`` like any close (the
audit queue is written, upstream MCP sessions closed, the store closed) and exits 0. Connection
limits and timeouts: see ``server/limits.py``. On stdio, EOF on stdin
unwinds the same way; a signal cannot (see ``_end_on_signals``), so it writes the audit queue and
then ends the process as the signal asks.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urlsplit, urlunsplit

import anyio
import anyio.to_thread
import httpx2
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.types import ASGIApp

from ..core import Gateway
from ..core.in_flight import CANCELLED_WRITE_SECONDS, CallsInFlight
from ..services.identity import Principal
from ..services.tokens import TokenService
from ..vocabulary.errors import LinksUnavailable, StoreUnavailable
from ..vocabulary.served import read_served, url_answers
from .host_guard import HostGuard, allow_list
from .observability import metrics_app, observability_routes, store_unavailable_handler
from .stopping import CutAnswers
from .tools import build_mcp_server

# HTTP only: front_door (JWT verification) and limits (the guarded h11 protocol); a stdio server
# imports them with its first link page, or never.
if TYPE_CHECKING:
    from .fast.early_stdio import EarlyStdio
    from .limits import ConnectionLimits, DrainGate
    from .mcp_door import FrontDoor

__all__ = ["build_http_app", "call_when_started", "pages_server", "run_http", "run_stdio", "serve_metrics"]

logger = logging.getLogger(__name__)
MCP_PATH = "/mcp"


def build_http_app(
    gateway: Gateway,
    tokens: TokenService,
    *,
    host: str,
    port: int,
    request_state_key: bytes | None = None,
    front_door: FrontDoor | None = None,
    limits: ConnectionLimits | None = None,
) -> ASGIApp:
    from .limits import ConnectionLimits
    from .mcp_door import Gate  # /mcp's door: static tokens, and the identity provider's with front_door
    from .mcp_endpoint import streamable_http_app  # the SDK's, answering quick requests as JSON

    limits = limits or ConnectionLimits()
    # Over HTTP every request names its principal; the default is never used.
    nobody = Principal(user="anonymous", agent="\0none")
    server = build_mcp_server(gateway, default_principal=nobody, request_state_key=request_state_key)
    from .web import web_routes  # the pages (jinja2, forms) load only when served

    routes = [*web_routes(gateway, front_door), *observability_routes(gateway)]
    routes += front_door.routes() if front_door else []
    allowed = allow_list(host, port, gateway.links.public_url)
    app, manager = streamable_http_app(
        server,
        path=MCP_PATH,
        routes=routes,
        security=allowed.transport_security(),
        max_sessions=limits.max_sessions,
        session_idle_timeout=limits.session_idle_timeout,
    )
    app.add_exception_handler(StoreUnavailable, store_unavailable_handler(gateway))
    from .retry_after import with_retry_after  # rate-limited answers carry Retry-After too
    from .rpc_refusals import json_rpc_refusals  # /mcp's text refusals as errors an MCP client shows

    gate = Gate(app, tokens, front_door, gateway.health, mcp=with_retry_after(manager.handle_request))
    return json_rpc_refusals(HostGuard(gate, allowed))


class _Server(uvicorn.Server):
    """uvicorn, minus re-raising the stop signal once it has shut down, and with a stop it tells.

    uvicorn re-delivers a captured SIGTERM/SIGINT after ``serve()`` returns, with the handler that
    was there before it: by default that kills the process on the spot, before ``open_gateway``
    unwinds, and the audit rows still queued would be lost. Here the signal only asks for the
    graceful stop; the caller's unwinding then ends the process.

    The stop is one sequence in the log: "stopping" (with the calls in flight it waits for), each call
    cut when the drain ends named once (``core.in_flight``), then the caller's "stopped". The requests
    still running are cut, and waited for, before ``serve()`` returns, even on a second Ctrl-C, so their
    rows are written before the store closes, and their agents are answered (``CutAnswers``).
    """

    drain: DrainGate | None = None
    cut: CutAnswers | None = None
    calls: CallsInFlight | None = None
    shutdown_delay: float = 0.0
    on_exit: Callable[[], None] | None = None
    """Told when a stop is asked for: requests that would sleep through the graceful shutdown (a call
    waiting on an approval) answer now instead of being cancelled when it runs out."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.on_exit is not None:
            self.on_exit()
        loop = asyncio.get_running_loop()
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: stop waiting for open connections
            loop.call_soon(self._say, "stopping now (a second Ctrl-C): the calls in flight are cut")
        if self.drain is not None and self.shutdown_delay > 0 and not self.drain.draining:
            # Health checks fail first; the listener closes once the load balancer has noticed.
            self.drain.draining = True
            loop.call_soon(self._say, f"stopping in {self.shutdown_delay:g} s: /healthz answers 503 meanwhile")
            loop.call_later(self.shutdown_delay, self._stop)
            return
        self.should_exit = True

    def _stop(self) -> None:
        self.should_exit = True

    @staticmethod
    def _say(text: str) -> None:
        from ..services.logs import routine

        routine(logger, text)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's graceful shutdown (stop listening, wait for the requests in flight up to the drain
        timeout), then the requests left cut and waited for, and the app's lifespan ended in every case."""
        calls, timeout = self.calls, self.config.timeout_graceful_shutdown or 0
        if calls is not None and len(calls) and not self.force_exit:
            logger.warning(
                "stopping: %d call(s) in flight (%s); waiting up to %g s for them",
                len(calls),
                "; ".join(calls.named()[:5]),
                timeout,
            )
        elif calls is not None and not self.force_exit:  # the gateway's listener, not a stdio gateway's pages
            self._say("stopping")
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        await asyncio.sleep(0.1)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while (self.server_state.connections or self.server_state.tasks) and not self.force_exit:  # noqa: ASYNC110 -- uvicorn keeps sets, no event
                    await asyncio.sleep(0.1)
        if calls is not None:
            calls.stopping = True
        if self.cut is not None:
            self.cut.stopping = True
        left = [task for task in self.server_state.tasks if not task.done()]
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left, timeout=CANCELLED_WRITE_SECONDS + 1)
        # The sessions' tasks (the calls among them) end with the app's lifespan, their rows written.
        # The SDK then tries to answer each cut request too, and says it could not: it was answered.
        quiet = _DroppedAfterCut()
        logging.getLogger("mcp.shared.jsonrpc_dispatcher").addFilter(quiet)
        try:
            await self.lifespan.shutdown()
        finally:
            logging.getLogger("mcp.shared.jsonrpc_dispatcher").removeFilter(quiet)


class _DroppedAfterCut(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "gave up" not in str(record.msg)


def _uvicorn(app: ASGIApp, host: str, port: int, limits: ConnectionLimits | None = None) -> _Server:
    from .limits import ConnectionLimits, DrainGate, guarded_h11

    limits = limits or ConnectionLimits()
    drain = DrainGate(app)
    cut = CutAnswers(drain)
    config = uvicorn.Config(
        cut,
        host=host,
        port=port,
        log_config=None,  # its records go through the gateway's handler: one format, secrets filtered
        log_level="warning",
        access_log=False,
        lifespan="on",
        http=guarded_h11(limits.request_timeout),
        timeout_keep_alive=max(1, round(limits.keep_alive)),
        limit_concurrency=limits.connection_limit,
        timeout_graceful_shutdown=max(1, round(limits.drain_timeout)),
        h11_max_incomplete_event_size=limits.max_header_bytes,
    )
    server = _Server(config)
    server.drain, server.cut, server.shutdown_delay = drain, cut, limits.shutdown_delay
    return server


def pages_server(app: ASGIApp, host: str, port: int) -> uvicorn.Server:
    """The ``pages`` command's listener, configured as ``serve``'s: uvicorn's records through the
    gateway's one log handler (its format, its secret filter), its protocol noise throttled, the same
    connection limits, and the same graceful stop."""
    return _uvicorn(app, host, port)


async def run_http(
    gateway: Gateway,
    tokens: TokenService,
    *,
    host: str,
    port: int,
    request_state_key: bytes | None = None,
    limits: ConnectionLimits | None = None,
    on_started: Callable[[], None] | None = None,
) -> None:
    """Serve until stopped. ``on_started`` runs once the listener accepts connections."""
    front_door = None
    if gateway.manifest.front_door is not None:
        from .mcp_door import open_front_door

        front_door = await open_front_door(
            gateway.manifest.front_door, gateway.links.public_url, _idp_http(), gateway.credentials
        )
    app = build_http_app(
        gateway,
        tokens,
        host=host,
        port=port,
        request_state_key=request_state_key,
        front_door=front_door,
        limits=limits,
    )
    _settle_heap()
    server = _uvicorn(app, host, port, limits)
    server.on_exit = gateway.approvals.stop_waiting
    server.calls = gateway.in_flight
    if on_started is None:
        await server.serve()
        return
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call_when_started, server, on_started)
        await server.serve()
        tasks.cancel_scope.cancel()


async def call_when_started(server: uvicorn.Server, then: Callable[[], None]) -> None:
    """Run ``then`` once ``server`` listens (uvicorn sets a plain flag: there is no event to wait on)."""
    while not server.started:  # noqa: ASYNC110
        await anyio.sleep(0.05)
    then()


YOUNG_COLLECTION_THRESHOLD = 5000
"""Container objects allocated (net) between two young collections while serving (CPython's default
is 700). The transports leave cyclic garbage on every request (the SDK's streams, task groups and
cancelled scopes): at 700 a young collection ran every few calls over HTTP, each paying a fixed
cost; at 5,000 the collector does the same work in a seventh of the passes, so each call pays
fewer fixed per-pass costs, for at most a few hundred kilobytes of garbage kept a little longer."""


def _settle_heap() -> None:
    """Hand what the start made (modules, manifest, catalog, app) to the collector's permanent
    generation, once per process: it lives as long as the process, yet every full collection
    walked all of it again. The MCP transports leave cyclic garbage on every request (a collection
    every few calls over HTTP), so full collections come regularly: each walked every object the
    start made and now walks only what came after the start. Young
    collections then run every ``YOUNG_COLLECTION_THRESHOLD`` allocations.

    A start leaves no cyclic garbage behind to pin (``gc.collect()`` here finds none). A frozen
    object nobody refers to any more is still freed by reference counting; a reference cycle among
    frozen objects (say, parts of a catalog replaced by a reload) is freed by the reload itself
    (``catalog_memory.collect_frozen_garbage``)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        young, *older = gc.get_threshold()
        if 0 < young < YOUNG_COLLECTION_THRESHOLD:  # 0: automatic collection is off, left so
            gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *older)


def _idp_http() -> httpx2.AsyncClient:
    """The client that reads the identity provider's metadata and keys (no redirects, no cookies)."""
    return httpx2.AsyncClient(follow_redirects=False, timeout=10.0)


async def serve_metrics(gateway: Gateway, host: str, port: int) -> None:
    """``serve --metrics-port``: ``/metrics`` (no token) and ``/readyz`` on their own listener, until cancelled."""
    # No lifespan: the app has no start-up or shutdown of its own, and uvicorn's lifespan task outlives a
    # cancelled server, to be cancelled as the process exits and logged as an ERROR with a traceback.
    config = uvicorn.Config(
        metrics_app(gateway),
        host=host,
        port=port,
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
    try:
        await _Sidecar(config).serve()
    except (OSError, SystemExit) as exc:
        logger.warning("cannot serve /metrics on %s:%d: %s", host, port, exc)


class _Sidecar(uvicorn.Server):
    """A second listener in the same process: it leaves the stop signals to the main server (its
    task is cancelled when that one stops), so SIGTERM still stops the gateway gracefully."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


PAGES_WAIT = 10.0
"""Seconds a minted link waits, at most, for the stdio gateway's pages server to answer."""


class StdioPages:
    """The human pages beside stdio, started by the first minted link: ``wanted`` (the links' ``on_mint``)
    asks for them and returns once they answer, so a link is never handed out before its page.

    A loopback port another program holds is never taken for the pages (it could be anyone's, and a
    pasted secret would go to it): the pages move to a free port and the links follow, or, where the
    operator chose the address (``public_url``), no link is handed out and the agent is told why.
    ``state_dir``: a gateway of this state folder already serving there (``served.json``) serves them."""

    def __init__(self, state_dir: Path | None = None, *, chosen: bool = False) -> None:
        self.requested = anyio.Event()
        self.done = anyio.Event()
        """Set when nothing is left to wait for: another gateway serves the pages, or serving them ended
        or failed (logged)."""
        self.server: uvicorn.Server | None = None
        self.state_dir = state_dir
        self.chosen = chosen
        """The links' address was the operator's choice (``public_url``): they never move."""
        self.unavailable: str | None = None
        """Why no link can be handed out (the pages cannot be served where links point), once known."""

    async def wanted(self) -> None:
        self.requested.set()
        with anyio.move_on_after(PAGES_WAIT):
            # uvicorn's ``started`` (its sockets bound, its lifespan run) is a flag with no event to wait on.
            while not self.done.is_set() and not (self.server is not None and self.server.started):  # noqa: ASYNC110
                await anyio.sleep(0.01)
        if self.unavailable is not None:
            raise LinksUnavailable(self.unavailable)

    async def claim(self, base: str) -> socket.socket | None:
        """The listening socket the pages are to be served on, for links pointing at ``base``: bound to its
        address, or to a free port of its host when another program holds that one and the address was
        not the operator's choice. None when they are served elsewhere already (a gateway of this state
        folder, ``served.json``; whatever answers at a non-loopback address the operator named) or cannot
        be served where the operator chose (``unavailable`` then says why)."""
        url = urlsplit(base)
        host, port = url.hostname or "127.0.0.1", _port_of(url)
        loopback = _loopback(host)
        # Elsewhere: at a proxy's address the operator named, whatever answers; on loopback, only a
        # gateway of this state folder.
        if await anyio.to_thread.run_sync(self._served_elsewhere if loopback else url_answers, base):
            return None
        try:
            return _listening(host, port)
        except OSError as exc:
            if self.chosen or not loopback:
                self.unavailable = (
                    f"The gateway cannot serve its link pages at {base}: {exc.strerror or exc}. No link was handed "
                    "out (another program there would receive what a human types into it). Ask the operator to "
                    "free that port or to set public_url to a free address, then try again."
                )
                logger.error("cannot serve the link pages at %s: %s; no link is handed out", base, exc)
                return None
            return _listening(host, 0)

    def _served_elsewhere(self, base: str) -> bool:
        served = read_served(self.state_dir) if self.state_dir is not None else None
        return served is not None and served.url.rstrip("/") == base.rstrip("/")


async def run_stdio(server: MCPServer, gateway: Gateway, pages: StdioPages, *, early: EarlyStdio | None = None) -> None:
    """Serve MCP on stdio; serve the human pages on loopback once the first link is minted.
    ``early``: stdin and stdout were claimed at start (``fast.early_stdio``), the SDK reads and writes
    through it; None (the fast paths off, or the streams not claimable) leaves them to the SDK.

    When stdin closes, a running pages server is asked to stop (uvicorn's graceful exit) rather than
    cancelled: cancelling it mid-lifespan prints a ``CancelledError`` traceback on the way out.
    """
    pages_server: uvicorn.Server | None = None
    _settle_heap()

    async def serve_pages() -> None:
        nonlocal pages_server
        await pages.requested.wait()
        base = gateway.links.public_url
        sock = await pages.claim(base)
        if sock is None:
            pages.done.set()  # served elsewhere, or nowhere (a link asked for is then refused)
            return
        url = urlsplit(base)
        host, wanted, port = url.hostname or "127.0.0.1", _port_of(url), sock.getsockname()[1]
        if port != wanted:
            gateway.links.rebase(_with_port(base, port))
            logger.warning(
                "port %d is taken by another program: the link pages are served at %s instead, and links point there",
                wanted,
                gateway.links.public_url,
            )
        from .web import web_routes  # the pages (jinja2, forms) load with the first link, not at start

        app = Starlette(
            routes=[*web_routes(gateway), *observability_routes(gateway)],
            exception_handlers={StoreUnavailable: store_unavailable_handler(gateway)},
        )
        guarded = HostGuard(app, allow_list(host, port, gateway.links.public_url))
        pages_server = pages.server = _uvicorn(guarded, host, port)
        try:
            await pages_server.serve(sockets=[sock])
        except (OSError, SystemExit) as exc:
            logger.warning("cannot serve the link pages at %s: %s", gateway.links.public_url, exc)
        finally:
            sock.close()
            pages.done.set()  # failed or ended: a link waiting for them waits no longer

    async with anyio.create_task_group() as outer:
        outer.start_soon(serve_pages)
        async with anyio.create_task_group() as inner:
            if threading.current_thread() is threading.main_thread():
                inner.start_soon(_end_on_signals, gateway)
            if early is None:
                await server.run_stdio_async()
            else:
                from .fast.early_stdio import run_stdio_streams

                await run_stdio_streams(server, early)
            inner.cancel_scope.cancel()
        if pages_server is None:
            outer.cancel_scope.cancel()  # no link was minted: stop waiting for one
        else:
            pages_server.should_exit = True


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() == "localhost"


def _port_of(url: SplitResult) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


def _with_port(base: str, port: int) -> str:
    url = urlsplit(base)
    host = url.hostname or "127.0.0.1"
    return urlunsplit(url._replace(netloc=f"[{host}]:{port}" if ":" in host else f"{host}:{port}"))


def _listening(host: str, port: int) -> socket.socket:
    """A listening socket bound to ``host:port`` (0: a free port). OSError when another socket holds it."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, port), family=family)


async def _end_on_signals(gateway: Gateway) -> None:
    """On SIGTERM or SIGINT under stdio: write the queued audit rows, then end as the signal asks.

    The SDK reads stdin on a worker thread that cancellation cannot interrupt, so the server cannot
    unwind until stdin closes, which is what a client does first (the MCP shutdown sequence: close
    stdin, then SIGTERM after a grace period). A signal therefore ends the process as it did before,
    but only after every row recorded so far is written, and each call still in flight is named in
    the log and audited ``interrupted`` (its request may have taken effect): "stopping", then "stopped".
    """
    from ..services.logs import routine, stop_logging

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            name = signal.Signals(signum).name
            if running := len(gateway.in_flight):
                logger.warning("stopping (%s): %d call(s) in flight are cut", name, running)
            else:
                routine(logger, "stopping (%s)", name)
            cut = await gateway.in_flight.cut_all()
            await gateway.auditor.close()
            if cut:
                logger.warning("stopped; %d call(s) were cut, audited interrupted (see 'mcp-gateway audit')", cut)
            else:
                routine(logger, "stopped")
            stop_logging()  # the signal ends the process without its exit handlers
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
