"""``serve`` (the MCP server over stdio or streamable HTTP) and ``pages`` (only the human pages).

The server's modules (the MCP SDK, starlette, uvicorn) are imported here only, inside the commands,
so no other command pays for them.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

from ..services.logs import notice, routine
from .commands import principal
from .output import EXIT_FAILED, EXIT_OK, escaped, started

if TYPE_CHECKING:
    import anyio.abc

    from ..core import Gateway
    from ..manifest import Manifest
    from ..runtime import BackgroundSync, SighupReloads
    from ..server.limits import ConnectionLimits
    from ..vocabulary.served import ServedAddress
    from ..vocabulary.settings import Settings
    from . import SignalSeen

logger = logging.getLogger(__name__)

__all__ = [
    "claude_line",
    "cmd_pages",
    "cmd_serve",
    "connection_limits",
    "discovery_line",
    "loaded_line",
    "request_state_key",
    "serve_http",
    "serve_stdio",
    "served_public_url",
    "stopped",
]


def served_public_url(manifest: Manifest, given: str | None, host: str, port: int) -> str:
    """The base of the links humans open: ``--public-url``, else the manifest's own ``public_url``,
    else the address this HTTP server listens on (a wildcard bind is reached on loopback)."""
    if given:
        return given.rstrip("/")
    if "public_url" in manifest.model_fields_set:
        return manifest.public_url
    reach = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    if ":" in reach and not reach.startswith("["):
        reach = f"[{reach}]"
    return f"http://{reach}:{port}"


def _warn_unknown_agent(manifest: Manifest, agent: str | None) -> None:
    if agent and manifest.agents is not None and agent not in {a.name for a in manifest.agents}:
        known = ", ".join(a.name for a in manifest.agents) or "none"
        notice(
            f"mcp-gateway: warning: the manifest has no agent {agent!r} (known: {known}); "
            "this session will see no connector"
        )


async def cmd_serve(args: argparse.Namespace) -> int:
    """``serve``: the MCP server over ``--transport`` (stdio, or streamable HTTP) until it is stopped."""
    import anyio

    from ..manifest import load_manifest
    from ..runtime import SighupReloads
    from ..tracing import configure_tracing, shutdown_tracing

    reloads, starting, cut = SighupReloads(args.settings), _Starting(), 0
    async with anyio.create_task_group() as signals:
        await signals.start(reloads.run)
        await signals.start(starting.watch)
        if args.early_sighup is not None and args.early_sighup.seen:
            routine(logger, "SIGHUP during start-up: the manifest is read as it is now, by the load starting")
        configure_tracing(os.environ)  # OTLP export when the standard OTEL_* variables ask for it
        manifest = load_manifest(args.settings.manifest_path)
        _warn_unknown_agent(manifest, principal(args).agent)
        if args.transport == "http":
            cut = await serve_http(args, manifest, reloads, starting)
        else:
            cut = await serve_stdio(args, manifest, reloads, starting)
        signals.cancel_scope.cancel()
    shutdown_tracing()
    return stopped(cut)


class _Starting:
    """SIGTERM and SIGINT while ``serve`` starts, before the server's own stop takes them (uvicorn's over
    HTTP, ``_end_on_signals`` over stdio): the start-up sync is cut short and the gateway closed like
    at any stop, with the same ``stopping`` and ``stopped`` lines, where the signal's default action
    ended the process without a word."""

    def __init__(self) -> None:
        import anyio

        self.stopped = False
        self.sync = anyio.CancelScope()
        """Around the start-up sync (``open_gateway(stop=...)``): cancelled by the signal, so the sync ends
        and the gateway is closed in the ordinary way, never cancelled halfway through its closing."""
        self._watching = anyio.CancelScope()
        self._left = anyio.Event()

    async def watch(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        import signal

        import anyio

        try:
            with self._watching, anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                task_status.started()
                async for signum in signals:
                    routine(logger, "stopping (%s during start-up)", signal.Signals(signum).name)
                    self.stopped = True
                    self.sync.cancel()
                    break
        finally:
            self._left.set()

    async def over(self) -> bool:
        """The server is about to take the stop signals: this handler lets go of them first (once it has,
        they have their default action until the server's own handler is in place). Whether a stop was
        asked for meanwhile."""
        self._watching.cancel()
        await self._left.wait()
        return self.stopped


def stopped(cut: int) -> int:
    """The stop's last line, and the exit code: 1 when calls were cut (a supervisor or a script sees
    that the stop was not clean), else 0."""
    if not cut:
        routine(logger, "stopped")
        return EXIT_OK
    logger.warning("stopped; %d call(s) were cut, audited interrupted (see 'mcp-gateway audit')", cut)
    return EXIT_FAILED


def connection_limits(args: argparse.Namespace) -> ConnectionLimits:
    """``serve --transport http``'s limits, checked before anything starts: a connection limit at or
    below the sessions' is refused."""
    from ..server.limits import ConnectionLimits

    return ConnectionLimits(
        request_timeout=args.request_timeout,
        keep_alive=args.keep_alive,
        max_connections=args.max_connections,
        max_sessions=args.max_sessions,
        drain_timeout=args.drain_timeout,
        shutdown_delay=args.shutdown_delay,
    )


def request_state_key(settings: Settings, gw: Gateway) -> bytes:
    """The key sealing 2026-07-28 ``requestState``: derived from the master key, so a state verifies
    on whichever request (or restart, or instance) the client's retry lands."""
    from ..primitives.crypto import load_master_key
    from ..server.elicitation import derive_request_state_key

    return derive_request_state_key(load_master_key(settings.env, settings.state_dir), gw.manifest.project)


async def serve_http(args: argparse.Namespace, manifest: Manifest, reloads: SighupReloads, starting: _Starting) -> int:
    """``serve --transport http``: ``/mcp`` and the human pages on one listener, until SIGTERM; the
    manifest reloaded on SIGHUP or when it changes; this server's address recorded meanwhile. How many
    calls the stop cut."""
    import anyio

    from ..primitives.url_secrets import shown_url
    from ..runtime import open_gateway, watch_manifest
    from ..server.app import run_http, serve_metrics
    from .ports import check_port_free

    check_port_free(args.host, args.port, args.settings.state_dir, instead="pick another with --port N")
    limits = connection_limits(args)
    public_url = served_public_url(manifest, args.public_url, args.host, args.port)
    say = _Say(args)
    async with open_gateway(args.settings, manifest=manifest, public_url=public_url, stop=starting.sync) as gw:
        if starting.stopped:
            return 0
        started()
        shown = shown_url(public_url)  # a password written into it is the proxy's, not the log's
        say.block(gw, f"http, MCP at {_mcp_url(args.host, args.port)} (links and pages at {shown})")
        recorded = _Recorded(args, gw, "http", args.host, args.port)
        reloads.started(gw, recorded.reloaded)
        if await starting.over():
            return 0
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_manifest, gw, args.settings, recorded.reloaded)
                tg.start_soon(say.when_embedded, gw, None)
                if args.metrics_port is not None:
                    tg.start_soon(serve_metrics, gw, args.metrics_host, args.metrics_port)
                await run_http(
                    gw,
                    gw.tokens,
                    host=args.host,
                    port=args.port,
                    request_state_key=request_state_key(args.settings, gw),
                    limits=limits,
                    on_started=recorded.write,
                )
                tg.cancel_scope.cancel()
        finally:
            recorded.forget()
        return gw.in_flight.cut


REOPEN_FIRST, REOPEN_MAX = 1.0, 30.0
"""Seconds between two tries to open a store that did not open at a stdio start: doubling from the first
to the last."""


async def serve_stdio(args: argparse.Namespace, manifest: Manifest, reloads: SighupReloads, starting: _Starting) -> int:
    """``serve`` over stdio: ``initialize`` and ``tools/list`` answered at once while the catalog
    loads (tool calls wait for it); the human pages served once a link is handed out. How many calls
    the stop cut.

    A store that does not open (the database down) stops a start whose stdio the SDK claims itself. With
    the streams claimed early, the client holds a session already (``initialize`` answered): the process
    stays up, answers every tool call ``store_unavailable`` (nothing runs) and opens the store once it
    answers, trying again in the background with back-off; the outage is logged once."""
    from ..core.health import store_unavailable_result
    from ..server.tools import shaped
    from ..vocabulary.errors import StoreUnopenable

    early = args.early_stdio
    delay = REOPEN_FIRST
    told = False
    while True:
        if starting.stopped:
            return 0  # SIGTERM or SIGINT while waiting for the database: nothing started, nothing cut
        opened: list[bool] = []
        try:
            return await _serve_stdio_once(args, manifest, reloads, starting, opened)
        except StoreUnopenable as exc:
            if opened or early is None:
                raise
            if early.closed.is_set():
                raise  # the client left before the database came back: the one line, exit 3
            if not told:
                told = True
                notice(
                    f"mcp-gateway: error: {exc}. Serving stdio meanwhile: tool calls answer store_unavailable "
                    f"(nothing runs) until the database answers; trying again every {REOPEN_MAX:g} s at most",
                    level=logging.ERROR,
                )
                answer = shaped(store_unavailable_result()).model_dump_json(by_alias=True, exclude_none=True)
                early.stand_by(answer)
            if await _closed_within(early.closed, delay):
                raise
            delay = min(delay * 2, REOPEN_MAX)


async def _closed_within(closed: threading.Event, seconds: float) -> bool:
    """Whether ``closed`` is set within ``seconds`` (checked a few times a second)."""
    import anyio

    waited = 0.0
    while not closed.is_set():
        if waited >= seconds:
            return False
        await anyio.sleep(0.2)
        waited += 0.2
    return True


async def _serve_stdio_once(
    args: argparse.Namespace,
    manifest: Manifest,
    reloads: SighupReloads,
    starting: _Starting,
    opened: list[bool],
) -> int:
    """``serve_stdio`` once the store opens (``opened`` gets True then); raises ``StoreUnopenable`` if it
    does not."""
    import anyio

    from ..primitives.url_secrets import shown_url
    from ..runtime import BackgroundSync, open_gateway, watch_manifest
    from ..server.app import StdioPages, run_stdio, serve_metrics
    from ..server.tools import build_mcp_server

    chosen = args.public_url is not None or "public_url" in manifest.model_fields_set
    pages = StdioPages(args.settings.state_dir, chosen=chosen)
    startup = BackgroundSync()
    say = _Say(args)
    async with open_gateway(
        args.settings,
        manifest=manifest,
        public_url=args.public_url,
        on_link_minted=pages.wanted,
        background=startup,
    ) as gw:
        opened.append(True)
        if args.early_stdio is not None:
            args.early_stdio.stand_by(None)  # the gateway answers tool calls from now on
        if starting.stopped:
            return 0
        key = request_state_key(args.settings, gw)
        server = build_mcp_server(gw, default_principal=principal(args), request_state_key=key, startup=startup)
        started()
        say.block(gw, f"stdio (links and pages at {shown_url(gw.links.public_url)} once a link is handed out)")
        reloads.started(gw)
        if await starting.over():
            return 0
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_manifest, gw, args.settings)
            tg.start_soon(say.when_embedded, gw, startup)
            if args.metrics_port is not None:
                tg.start_soon(serve_metrics, gw, args.metrics_host, args.metrics_port)
            await run_stdio(server, gw, pages, early=args.early_stdio)
            tg.cancel_scope.cancel()
        return gw.in_flight.cut


def _mcp_url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/mcp"


class _Recorded:
    """This server's entry in the state folder's served-address record (``served.py``): written once
    it listens, its manifest digest renewed on each reload, removed when it stops."""

    def __init__(self, args: argparse.Namespace, gw: Gateway, transport: str, host: str, port: int) -> None:
        self._args, self._gw, self._transport, self._host, self._port = args, gw, transport, host, port
        self._written = False
        self._before: ServedAddress | None = None
        """Another live server's entry this one replaced: put back when this one stops, while it serves."""

    def write(self) -> None:
        from ..vocabulary.served import ServedAddress, manifest_digest, read_served, record

        if not self._written:
            self._before = read_served(self._args.settings.state_dir)
            if self._before is not None and self._before.pid != os.getpid():
                logger.warning(
                    "another gateway of this state folder serves at %s (pid %d); commands run beside them mint "
                    "links to this one (%s) until it stops, then to that one again",
                    self._before.url,
                    self._before.pid,
                    self._gw.links.public_url,
                )

        path = self._args.settings.manifest_path
        served = ServedAddress(
            url=self._gw.links.public_url,
            pid=os.getpid(),
            host=self._host,
            port=self._port,
            transport=self._transport,
            manifest=str(path.resolve()) if path else "bundled",
            manifest_digest=manifest_digest(path),
        )
        try:
            record(self._args.settings.state_dir, served)
            self._written = True
        except OSError as exc:  # a read-only state folder: links still work, the CLI just cannot find us
            notice(f"mcp-gateway: warning: cannot record the served address: {exc}")

    def reloaded(self) -> None:
        if self._written:
            self.write()

    def forget(self) -> None:
        from ..vocabulary.served import forget, read_served, record

        if not self._written:
            return
        forget(self._args.settings.state_dir)
        before, state_dir = self._before, self._args.settings.state_dir
        if before is not None and before.pid != os.getpid() and read_served(state_dir) is None:
            try:
                record(state_dir, before)  # read_served checks it is still alive before anyone uses it
            except OSError:
                pass


class _Say:
    """The start-up block on stderr (``--quiet``: nothing). Never stdout: over stdio it is the protocol's.
    With ``--log-format json`` each block is one log record (``notice``), so stderr stays JSON lines."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args
        self.quiet: bool = bool(getattr(args, "quiet", False))

    def block(self, gw: Gateway, transport: str) -> None:
        if self.quiet:
            return
        args = self._args
        settings = args.settings
        state = str(settings.state_dir.resolve())
        if settings.database_url:
            from ..store.database_url import redact_url

            given = "--database-url" if getattr(args, "database_url", None) else "$MCP_GATEWAY_DATABASE_URL"
            state += f" (database: {redact_url(settings.database_url)}, from {given})"
        lines = [
            f"mcp-gateway {_version()} serving {len(gw.manifest.connectors)} connectors{loaded_line(gw)}",
            f"  manifest   {args.manifest_source}",
            f"  state      {state}",
            f"  transport  {transport}",
            f"  discovery  {discovery_line(gw)}",
            f"  register   {claude_line(args)}",
        ]
        if args.transport == "http":
            lines.append("             (a token: TOKEN=$(mcp-gateway token create --agent NAME))")
        notice("\n".join(escaped(line) for line in lines))  # paths may hold any character
        sys.stderr.flush()

    async def when_embedded(self, gw: Gateway, startup: BackgroundSync | None) -> None:
        """One line once hybrid discovery has embedded the catalog (it ranks lexically until then)."""
        if self.quiet or gw.dense is None:
            return
        if startup is not None:
            await startup.ready.wait()
        await gw.dense.settled()
        notice(f"mcp-gateway: {gw.discovery_status}")
        sys.stderr.flush()


def loaded_line(gw: Gateway) -> str:
    """`` (2 loaded, 1 failed: see the warnings above)`` once the connectors were loaded, else ``""`` (stdio
    loads them in the background after the start block)."""
    states = gw.states()
    if not states:
        return ""
    failed = sum(s.status == "error" for s in states)
    loaded = len(states) - failed
    return f" ({loaded} loaded, {failed} failed: see the warnings above)" if failed else f" ({loaded} loaded)"


def discovery_line(gw: Gateway) -> str:
    """``hybrid (...)``, or why discovery is lexical only and how to make it hybrid."""
    if gw.dense is not None:
        count = len(gw.manifest.connectors)
        # A connector ranks by meaning once its vectors are read back from the store (a second or two after
        # a sync, which embedded them) or, never embedded, made in the background; by words until then.
        if not gw.dense.scheduled and count:
            # Start-up loads the catalog in the background: nothing is scheduled to embed yet.
            plural = "s" if count != 1 else ""
            return f"hybrid ({gw.dense.label}; {count} connector{plural} loading{_UNTIL}"
        return gw.discovery_status.removeprefix("discovery: ").removesuffix(")") + _UNTIL
    if gw.manifest.discovery.effective_mode == "lexical":
        return "lexical only (discovery.mode or $MCP_GATEWAY_DISCOVERY_MODE says lexical)"
    return f"lexical only — install the embeddings extra for hybrid: {EMBEDDINGS_INSTALL}"


EMBEDDINGS_INSTALL = "pip install 'mcp-action-gateway[embeddings]'"

_UNTIL = "); each ranks by meaning once its stored vectors are read or new ones made, by words until then"


def claude_line(args: argparse.Namespace) -> str:
    """The ``claude mcp add`` command that registers this very server with Claude Code."""
    import shlex

    if args.transport == "http":
        url = _mcp_url(args.host, args.port)
        return f'claude mcp add --transport http gateway {url} --header "Authorization: Bearer $TOKEN"'
    command = [*_self_command()]
    path = args.settings.manifest_path
    if path is not None:
        command += ["--manifest", str(path.resolve())]
    command += ["--state-dir", str(args.settings.state_dir.resolve()), "serve"]
    if getattr(args, "agent", None):
        command += ["--agent", args.agent]
    env = ' -e MCP_GATEWAY_MASTER_KEY="$MCP_GATEWAY_MASTER_KEY"' if "MCP_GATEWAY_MASTER_KEY" in os.environ else ""
    if args.settings.database_url:  # else the registered server would run on the state folder's SQLite
        env += ' -e MCP_GATEWAY_DATABASE_URL="$MCP_GATEWAY_DATABASE_URL"'
    return f"claude mcp add{env} gateway -- {shlex.join(command)}"


def _self_command() -> list[str]:
    """How a client starts this program: ``mcp-gateway`` when that name on PATH is this very
    script, its full path when it is another, else ``python -m mcp_gateway`` with this interpreter."""
    import shutil
    from pathlib import Path

    script = Path(sys.argv[0])
    if script.name == "mcp-gateway":
        found = shutil.which("mcp-gateway")
        if found and Path(found).resolve() == script.resolve():
            return ["mcp-gateway"]
        return [str(script.resolve())]
    return [sys.executable, "-m", "mcp_gateway"]


def _version() -> str:
    from .. import __version__

    return __version__


async def cmd_pages(args: argparse.Namespace) -> int:
    """Serve the human pages (connect, secrets, approvals, OAuth callback, operator) on ``public_url``,
    for people whose agents use stdio and who minted a link with ``connect`` or ``call``."""
    from urllib.parse import urlsplit

    import anyio

    from ..manifest import load_manifest
    from .ports import check_port_free

    manifest = load_manifest(args.settings.manifest_path)
    # The manifest's own address (or --public-url): never a running server's, which is where these would clash.
    base = (args.public_url or manifest.public_url).rstrip("/")
    url = urlsplit(base)
    host, port = url.hostname or "127.0.0.1", url.port or (443 if url.scheme == "https" else 80)
    if host not in ("127.0.0.1", "localhost", "::1"):
        host = "127.0.0.1"  # only loopback: the pages sit behind whatever proxies public_url
    check_port_free(
        host, port, args.settings.state_dir, instead="stop it, or serve the pages elsewhere with --public-url URL"
    )
    async with anyio.create_task_group() as signals:
        await signals.start(_sighup_ignored, args.early_sighup)
        await _serve_pages(args, manifest, base, host, port)
        signals.cancel_scope.cancel()
    return 0


async def _sighup_ignored(early: SignalSeen | None, *, task_status: anyio.abc.TaskStatus[None]) -> None:
    """``pages`` reads the manifest once: a SIGHUP (logrotate's, a reload meant for ``serve``) is logged
    and changes nothing, where its default action ended the process."""
    import signal

    import anyio

    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        task_status.started()
        if early is not None and early.seen:
            routine(logger, _PAGES_HUP)
        async for _ in signals:
            routine(logger, _PAGES_HUP)


_PAGES_HUP = "SIGHUP: the pages have nothing to reload (restart them to read an edited manifest)"


async def _serve_pages(args: argparse.Namespace, manifest: Manifest, base: str, host: str, port: int) -> None:
    import anyio
    from starlette.applications import Starlette

    from ..primitives.url_secrets import shown_url
    from ..runtime import open_gateway
    from ..server.app import call_when_started, pages_server
    from ..server.host_guard import HostGuard, allow_list
    from ..server.web import web_routes
    from .output import EXIT_CONFIG, CliError

    async with open_gateway(args.settings, manifest=manifest, public_url=base) as gw:
        started()
        notice(f"mcp-gateway: human pages at {shown_url(gw.links.public_url)} (Ctrl-C to stop)")
        app = HostGuard(Starlette(routes=web_routes(gw)), allow_list(host, port, gw.links.public_url))
        server = pages_server(app, host, port)
        recorded = _Recorded(args, gw, "pages", host, port)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(call_when_started, server, recorded.write)
                await server.serve()
                tg.cancel_scope.cancel()
        except (OSError, SystemExit) as exc:
            raise CliError(f"cannot serve the pages on {host}:{port}: {exc}", EXIT_CONFIG) from None
        finally:
            recorded.forget()
