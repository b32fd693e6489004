"""``serve`` (the MCP server over stdio or streamable HTTP) and ``pages`` (only the human pages).

The server's modules (the MCP SDK, starlette, uvicorn) are imported here only, inside the commands,
so no other command pays for them.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from .commands import principal
from .output import started

if TYPE_CHECKING:
    from ..core import Gateway
    from ..manifest import Manifest

__all__ = ["cmd_pages", "cmd_serve", "served_public_url"]


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
        sys.stderr.write(
            f"mcp-gateway: warning: the manifest has no agent {agent!r} (known: {known}); "
            "this session will see no connector\n"
        )


async def cmd_serve(args: argparse.Namespace) -> int:
    import anyio

    from ..crypto import load_master_key
    from ..manifest import load_manifest
    from ..runtime import BackgroundSync, open_gateway, reload_on_sighup
    from ..server.app import run_http, run_stdio, serve_metrics
    from ..server.elicitation import derive_request_state_key
    from ..server.tools import build_mcp_server
    from ..tokens import TokenService
    from ..tracing import configure_tracing, shutdown_tracing

    def state_key(gw: Gateway) -> bytes:
        # 2026-07-28 requestState must verify on whichever request the client's retry lands.
        master = load_master_key(args.settings.env, args.settings.state_dir)
        return derive_request_state_key(master, gw.manifest.project)

    configure_tracing(os.environ)  # OTLP export when the standard OTEL_* variables ask for it
    manifest = load_manifest(args.settings.manifest_path)
    _warn_unknown_agent(manifest, principal(args).agent)
    if args.transport == "http":
        from ..server.limits import ConnectionLimits

        public_url = served_public_url(manifest, args.public_url, args.host, args.port)
        async with open_gateway(args.settings, manifest=manifest, public_url=public_url) as gw:
            started()
            sys.stderr.write(
                f"mcp-gateway: MCP at http://{args.host}:{args.port}/mcp, {len(gw.index)} actions, "
                f"{gw.discovery_status}\n"
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(reload_on_sighup, gw, args.settings)
                if args.metrics_port is not None:
                    tg.start_soon(serve_metrics, gw, args.metrics_host, args.metrics_port)
                tokens = TokenService(gw.store, gw.clock)
                limits = ConnectionLimits(
                    request_timeout=args.request_timeout,
                    keep_alive=args.keep_alive,
                    max_connections=args.max_connections,
                    max_sessions=args.max_sessions,
                    drain_timeout=args.drain_timeout,
                    shutdown_delay=args.shutdown_delay,
                )
                await run_http(
                    gw, tokens, host=args.host, port=args.port, request_state_key=state_key(gw), limits=limits
                )
                tg.cancel_scope.cancel()
        shutdown_tracing()
        return 0
    pages_requested = anyio.Event()
    startup = BackgroundSync()  # initialize and tools/list answer at once; tool calls wait for the catalog
    async with open_gateway(
        args.settings,
        manifest=manifest,
        public_url=args.public_url,
        on_link_minted=pages_requested.set,
        background=startup,
    ) as gw:
        server = build_mcp_server(
            gw, default_principal=principal(args), request_state_key=state_key(gw), startup=startup
        )
        started()
        async with anyio.create_task_group() as tg:
            tg.start_soon(reload_on_sighup, gw, args.settings)
            if args.metrics_port is not None:
                tg.start_soon(serve_metrics, gw, args.metrics_host, args.metrics_port)
            await run_stdio(server, gw, pages_requested, early=args.early_stdio)
            tg.cancel_scope.cancel()
    shutdown_tracing()
    return 0


async def cmd_pages(args: argparse.Namespace) -> int:
    """Serve the human pages (connect, secrets, approvals, OAuth callback, operator) on ``public_url``,
    for people whose agents use stdio and who minted a link with ``connect`` or ``call``."""
    from urllib.parse import urlsplit

    import uvicorn
    from starlette.applications import Starlette

    from ..runtime import open_gateway
    from ..server.host_guard import HostGuard, allow_list
    from ..server.web import web_routes
    from .output import EXIT_CONFIG, CliError

    async with open_gateway(args.settings, public_url=args.public_url) as gw:
        started()
        url = urlsplit(gw.links.public_url)
        host, port = url.hostname or "127.0.0.1", url.port or (443 if url.scheme == "https" else 80)
        if host not in ("127.0.0.1", "localhost", "::1"):
            host = "127.0.0.1"  # only loopback: the pages sit behind whatever proxies public_url
        sys.stderr.write(f"mcp-gateway: human pages at {gw.links.public_url} (Ctrl-C to stop)\n")
        app = HostGuard(Starlette(routes=web_routes(gw)), allow_list(host, port, gw.links.public_url))
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        try:
            await server.serve()
        except (OSError, SystemExit) as exc:
            raise CliError(f"cannot serve the pages on {host}:{port}: {exc}", EXIT_CONFIG) from None
    return 0
