"""The ``mcp-gateway`` command (SPEC 3.3).

``discover``, ``describe`` and ``call`` run the very same ``Gateway`` methods as the MCP tools.
Listing commands print a table, or JSON with ``--json``. Errors go to stderr with a non-zero exit
and no traceback unless ``--debug``. stdout is reserved for results (and, under ``serve
--transport stdio``, for the protocol alone): logs always go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio

from .core import Gateway, result_payload
from .errors import GatewayError, ManifestError
from .identity import OPERATOR, Principal, TokenService
from .manifest import load_manifest
from .runtime import Settings, keep_discovery_warm, open_gateway, open_store, reload_on_sighup
from .sync import Progress

__all__ = ["main"]

logger = logging.getLogger("mcp_gateway")


class CliError(Exception):
    """An error already phrased for the user; printed without a traceback."""


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def _table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    # Cap every column but the last, which is usually the one with the reason in it.
    widths = [min(w, 60) for w in widths[:-1]] + widths[-1:]
    line = "  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))
    sys.stdout.write(line.rstrip() + "\n")
    for row in cells:
        out = "  ".join((v if len(v) <= w else v[: w - 1] + "…").ljust(w) for v, w in zip(row, widths, strict=True))
        sys.stdout.write(out.rstrip() + "\n")


def _principal(args: argparse.Namespace) -> Principal:
    agent = getattr(args, "agent", None) or args.settings.env.get("MCP_GATEWAY_AGENT")
    return Principal(user=OPERATOR.user, agent=agent) if agent else OPERATOR


def _progress() -> Progress | None:
    if not sys.stderr.isatty():
        return None

    def report(slug: str, phase: str) -> None:
        if phase == "start":
            sys.stderr.write(f"\r\033[Kloading {slug}…")
        else:
            sys.stderr.write(f"\r\033[K{slug}: {phase}\n")
        sys.stderr.flush()

    return report


def _gateway(args: argparse.Namespace, **kw: Any) -> AbstractAsyncContextManager[Gateway]:
    return open_gateway(args.settings, **kw)


# -- commands ---------------------------------------------------------------------------------


async def cmd_validate(args: argparse.Namespace) -> int:
    manifest = load_manifest(args.settings.manifest_path)
    problems = manifest.diagnostics()
    where = args.settings.manifest_path or "bundled default manifest"
    if args.json:
        _print_json({"manifest": str(where), "connectors": len(manifest.connectors), "problems": problems})
    else:
        for p in problems:
            sys.stderr.write(f"{p}\n")
        if not problems:
            sys.stdout.write(f"{where}: ok ({len(manifest.connectors)} connectors)\n")
    return 1 if problems else 0


async def cmd_sync(args: argparse.Namespace) -> int:
    async with _gateway(args, progress=_progress()) as gw:
        states = gw.catalogs.states()
    if args.json:
        _print_json([s.model_dump(mode="json") for s in states])
    else:
        _table(
            [(s.slug, s.source, s.actions, s.status, s.error) for s in states],
            ["slug", "source", "actions", "status", "error"],
        )
    return 1 if any(s.status == "error" for s in states) else 0


async def cmd_connectors(args: argparse.Namespace) -> int:
    async with _gateway(args) as gw:
        data = result_payload(await gw.connectors(_principal(args)))
    if args.json:
        _print_json(data)
    else:
        _table(
            [(c["slug"], c["status"], c["actions"], c["auth"], c.get("error")) for c in data["connectors"]],
            ["slug", "status", "actions", "auth", "error"],
        )
    return 0


async def cmd_discover(args: argparse.Namespace) -> int:
    async with _gateway(args) as gw:
        found = await gw.discover(_principal(args), " ".join(args.query), connector=args.connector, limit=args.limit)
    data = result_payload(found)
    if args.json:
        _print_json(data)
    else:
        _table([(r["name"], r["risk"], r["summary"]) for r in data["results"]], ["action", "risk", "summary"])
    return 0


def _exit_for(data: dict[str, Any]) -> int:
    return 1 if data.get("status") in ("denied", "error") else 0


async def cmd_describe(args: argparse.Namespace) -> int:
    async with _gateway(args) as gw:
        data = result_payload(await gw.describe(_principal(args), args.tool))
    _print_json(data)
    return _exit_for(data)


async def cmd_call(args: argparse.Namespace) -> int:
    try:
        call_args = json.loads(args.args) if args.args else {}
    except json.JSONDecodeError as exc:
        raise CliError(
            f"--args is not valid JSON ({exc.msg} at column {exc.colno}); pass an object like "
            '\'{"owner": "octocat"}\''
        ) from None
    if not isinstance(call_args, dict):
        raise CliError('--args must be a JSON object, e.g. \'{"owner": "octocat"}\'')
    async with _gateway(args) as gw:
        result = await gw.call(
            _principal(args),
            args.tool,
            call_args,
            approval_id=args.approval_id,
            fields=args.fields or None,
            wait=args.wait,
        )
    data = result_payload(result)
    _print_json(data)
    return _exit_for(data)


async def cmd_connect(args: argparse.Namespace) -> int:
    async with _gateway(args) as gw:
        data = result_payload(await gw.connect(_principal(args), args.connector))
    _print_json(data)
    return _exit_for(data)


async def cmd_token(args: argparse.Namespace) -> int:
    from .server.pages.operator import OperatorTokens

    async with open_store(args.settings) as store:
        tokens = TokenService(store, _clock())
        operators = OperatorTokens(store, _clock())
        if args.token_cmd == "create":
            if args.operator == bool(args.agent):
                raise CliError("give either --agent NAME (an MCP token) or --operator (for the /operator page)")
            if args.operator:
                made, token = await operators.create()
                token_id, label = made.id, "the operator page"
            else:
                record, token = await tokens.create(args.agent)
                token_id, label = record.id, f"agent {record.agent!r}"
            if args.json:
                _print_json({"id": token_id, "agent": args.agent, "operator": args.operator, "token": token})
            else:
                sys.stderr.write(f"token {token_id} for {label} (shown once; store it safely):\n")
                sys.stdout.write(token + "\n")
        elif args.token_cmd == "list":
            rows = [
                {"id": r.id, "agent": r.agent, "kind": "agent", "created_at": r.created_at, "revoked": r.revoked}
                for r in await store.list_tokens()
            ]
            rows += [
                {"id": o.id, "agent": None, "kind": "operator", "created_at": o.created_at, "revoked": o.revoked}
                for o in await operators.list()
            ]
            if args.json:
                _print_json(rows)
            else:
                _table(
                    [
                        (
                            r["id"],
                            r["agent"] or "(operator)",
                            str(r["created_at"])[:19],
                            "revoked" if r["revoked"] else "active",
                        )
                        for r in rows
                    ],
                    ["id", "agent", "created", "state"],
                )
        else:
            if not await store.revoke_token(args.id) and not await operators.revoke(args.id):
                raise CliError(f"no active token with id {args.id!r}; see 'mcp-gateway token list'")
            sys.stdout.write(f"revoked {args.id}\n")
    return 0


async def cmd_secret(args: argparse.Namespace) -> int:
    from .credentials import CredentialVault, parse_secret_input
    from .crypto import AESGCMCipher, load_master_key

    manifest = load_manifest(args.settings.manifest_path)
    cfg = manifest.connector(args.connector)
    if cfg is None:
        raise CliError(
            f"no connector {args.connector!r} in the manifest; known: {', '.join(c.slug for c in manifest.connectors)}"
        )
    raw = sys.stdin.read()
    kind = cfg.auth.type if args.name == "default" else "bearer"
    value = parse_secret_input(kind, raw)
    async with open_store(args.settings) as store:
        cipher = AESGCMCipher(load_master_key(args.settings.env, args.settings.state_dir), project=manifest.project)
        await CredentialVault(store, cipher, project=manifest.project).put(cfg.slug, value, name=args.name)
    sys.stderr.write(f"stored secret {args.name!r} for {cfg.slug} ({cfg.auth.type})\n")
    return 0


async def cmd_approvals(args: argparse.Namespace) -> int:
    from .approvals import ApprovalService

    async with open_store(args.settings) as store:
        if args.approvals_cmd == "list":
            rows = await store.list_approvals(None if args.all else "pending")
            if args.json:
                _print_json([r.model_dump(mode="json") for r in rows])
            else:
                _table(
                    [
                        (
                            r.id,
                            r.status,
                            r.tool,
                            r.agent or r.principal,
                            r.expires_at.isoformat(timespec="seconds"),
                            r.summary,
                        )
                        for r in rows
                    ],
                    ["id", "status", "tool", "who", "expires", "summary"],
                )
            return 0
        decided = await ApprovalService(store, _clock()).decide(args.id, args.approvals_cmd == "approve")
        if decided is None:
            raise CliError(f"approval {args.id!r} is not pending (unknown, decided or expired)")
        sys.stdout.write(f"{decided.id}: {decided.status}\n")
    return 0


async def cmd_audit(args: argparse.Namespace) -> int:
    async with open_store(args.settings) as store:
        rows = await store.list_audit(args.limit)
    if args.json:
        _print_json([r.model_dump(mode="json") for r in rows])
    else:
        _table(
            [
                (
                    r.at.isoformat(timespec="seconds"),
                    r.agent or r.user,
                    r.requested,
                    r.verdict,
                    r.verdict_source,
                    r.status,
                    r.reason,
                    r.upstream_status,
                    r.latency_ms,
                )
                for r in rows
            ],
            ["time", "who", "tool", "verdict", "source", "status", "reason", "upstream", "ms"],
        )
    return 0


async def cmd_keys(args: argparse.Namespace) -> int:
    from .credentials import CredentialVault
    from .crypto import AESGCMCipher, load_master_key

    new_key = sys.stdin.buffer.read().strip()
    if len(new_key) < 32:
        raise CliError(
            "pipe the new master key (>= 32 bytes) on stdin; make one with "
            'python -c "import secrets; print(secrets.token_urlsafe(32))"'
        )
    manifest = load_manifest(args.settings.manifest_path)
    async with open_store(args.settings) as store:
        old = AESGCMCipher(load_master_key(args.settings.env, args.settings.state_dir), project=manifest.project)
        count = await CredentialVault(store, old, project=manifest.project).rotate(
            AESGCMCipher(new_key, project=manifest.project)
        )
    sys.stderr.write(
        f"re-encrypted {count} credentials; now set MCP_GATEWAY_MASTER_KEY to the new key "
        "(or write it to the key file)\n"
    )
    return 0


async def cmd_serve(args: argparse.Namespace) -> int:
    from .crypto import load_master_key
    from .server.app import run_http, run_stdio
    from .server.elicitation import derive_request_state_key
    from .server.tools import build_mcp_server

    def state_key(gw: Gateway) -> bytes:
        # 2026-07-28 requestState must verify on whichever request the client's retry lands.
        master = load_master_key(args.settings.env, args.settings.state_dir)
        return derive_request_state_key(master, gw.manifest.project)

    if args.transport == "http":
        manifest = load_manifest(args.settings.manifest_path)
        public_url = args.public_url or manifest.public_url
        async with _gateway(args, manifest=manifest, public_url=public_url) as gw:
            sys.stderr.write(f"mcp-gateway: MCP at http://{args.host}:{args.port}/mcp, {len(gw.index)} actions\n")
            async with anyio.create_task_group() as tg:
                tg.start_soon(reload_on_sighup, gw, args.settings)
                tg.start_soon(keep_discovery_warm, gw)  # the optional re-ranker's vectors, off the event loop
                tokens = TokenService(gw.store, gw.clock)
                await run_http(gw, tokens, host=args.host, port=args.port, request_state_key=state_key(gw))
                tg.cancel_scope.cancel()
        return 0
    pages_requested = anyio.Event()
    async with _gateway(args, public_url=args.public_url, on_link_minted=pages_requested.set) as gw:
        server = build_mcp_server(gw, default_principal=_principal(args), request_state_key=state_key(gw))
        async with anyio.create_task_group() as tg:
            tg.start_soon(reload_on_sighup, gw, args.settings)
            tg.start_soon(keep_discovery_warm, gw)
            await run_stdio(server, gw, pages_requested)
            tg.cancel_scope.cancel()
    return 0


def _clock() -> Any:
    from .clock import SystemClock

    return SystemClock()


# -- parser -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--manifest", help="manifest YAML (default: the bundled manifests/default.yaml)")
    common.add_argument("--state-dir", help="state folder (default: $MCP_GATEWAY_STATE_DIR or ./.mcp-gateway)")
    common.add_argument(
        "--database-url",
        help="postgresql://... shared by several instances (default: $MCP_GATEWAY_DATABASE_URL, else SQLite in the "
        "state folder); prefer the variable, since other local users can see a password in a command line",
    )
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--debug", action="store_true", help="show tracebacks and debug logs on stderr")

    parser = argparse.ArgumentParser(
        prog="mcp-gateway", description="One MCP server in front of many APIs.", parents=[common]
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, fn: Callable[[argparse.Namespace], Awaitable[int]], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help, description=help)
        p.set_defaults(fn=fn)
        return p

    p = add("serve", cmd_serve, "run the MCP server (stdio or streamable HTTP)")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--public-url", help="base of links handed to humans (default: the manifest's public_url)")
    p.add_argument("--agent", help="stdio: act as this agent of the manifest")

    add("validate", cmd_validate, "check the manifest; non-zero exit on any problem")
    add("sync", cmd_sync, "load every connector and print a table; non-zero exit if any failed")
    p = add("connectors", cmd_connectors, "list connectors with status")
    p.add_argument("--agent")
    p = add("discover", cmd_discover, "search actions by intent")
    p.add_argument("query", nargs="+")
    p.add_argument("--connector")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--agent")
    p = add("describe", cmd_describe, "show an action's input schema, risk and policy")
    p.add_argument("tool")
    p.add_argument("--agent")
    p = add("call", cmd_call, "run an action (same checks as the MCP call tool)")
    p.add_argument("tool")
    p.add_argument("--args", help="arguments as a JSON object")
    p.add_argument("--approval-id")
    p.add_argument("--fields", nargs="*")
    p.add_argument(
        "--wait", type=float, metavar="SECONDS", help="if approval is needed, wait for the decision (at most 120 s)"
    )
    p.add_argument("--agent")
    p = add("connect", cmd_connect, "print a link a human opens to connect a connector")
    p.add_argument("connector")
    p.add_argument("--agent")

    p = add("token", cmd_token, "manage HTTP bearer tokens")
    tsub = p.add_subparsers(dest="token_cmd", required=True)
    t = tsub.add_parser("create", parents=[common])
    t.add_argument("--agent", help="the manifest agent an MCP token acts as")
    t.add_argument("--operator", action="store_true", help="a token for the operator overview page (/operator)")
    tsub.add_parser("list", parents=[common])
    t = tsub.add_parser("revoke", parents=[common])
    t.add_argument("id")

    p = add("secret", cmd_secret, "store a connector's secret, read from stdin")
    ssub = p.add_subparsers(dest="secret_cmd", required=True)
    s = ssub.add_parser("set", parents=[common], help="read the value from stdin (JSON for multi-field kinds)")
    s.add_argument("connector")
    s.add_argument("name", nargs="?", default="default")

    p = add("approvals", cmd_approvals, "list, approve or deny pending approvals")
    asub = p.add_subparsers(dest="approvals_cmd", required=True)
    a = asub.add_parser("list", parents=[common])
    a.add_argument("--all", action="store_true")
    for verb in ("approve", "deny"):
        a = asub.add_parser(verb, parents=[common])
        a.add_argument("id")

    p = add("audit", cmd_audit, "show recent call decisions")
    p.add_argument("--limit", type=int, default=50)

    p = add("keys", cmd_keys, "re-encrypt stored credentials under a new master key (read from stdin)")
    ksub = p.add_subparsers(dest="keys_cmd", required=True)
    ksub.add_parser("rotate", parents=[common])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    # These libraries log full request URLs (an api_key may sit in the query) and SQL parameters
    # (sealed credentials) at DEBUG: they stay quiet even under --debug.
    for noisy in ("httpx2", "httpcore2", "httpx", "httpcore", "aiosqlite", "asyncpg"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args.settings = Settings.from_env(manifest=args.manifest, state_dir=args.state_dir, database_url=args.database_url)
    try:
        return anyio.run(args.fn, args)
    except KeyboardInterrupt:
        return 130
    except (CliError, GatewayError) as exc:
        if args.debug:
            raise
        label = "manifest error" if isinstance(exc, ManifestError) else "error"
        sys.stderr.write(
            f"mcp-gateway: {label}:\n  " + str(exc).replace("\n", "\n  ") + "\n"
            if isinstance(exc, ManifestError)
            else f"mcp-gateway: {label}: {exc}\n"
        )
        return 2
    except Exception as exc:
        if args.debug:
            raise
        sys.stderr.write(f"mcp-gateway: unexpected {type(exc).__name__}; rerun with --debug for details\n")
        return 1
