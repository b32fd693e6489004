"""The ``mcp-gateway`` command: the parser, the exit codes and ``main``.

Each command lives in a module of this package (``commands``, ``serve``, ``edit``, ``doctor``) and
is imported only when it runs, so ``--help``, ``--version`` and a typo answer at once and a
listing command loads only what it uses. Global options (``--manifest``, ``--state-dir``,
``--database-url``, ``--json``, ``--debug``) work before or after the command: the subcommands'
copies default to ``argparse.SUPPRESS``, so a copy left out never overwrites one given earlier.

stdout carries results only (under ``serve --transport stdio``, the protocol alone); logs and
errors go to stderr, without a traceback unless ``--debug``. A closed pipe (``| head``) ends the
command quietly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from .output import EXIT_CONFIG, EXIT_FAILED, EXIT_STORE, CliError, escaped, holding_collector

if TYPE_CHECKING:
    from ..vocabulary.settings import Settings

__all__ = ["Args", "build_parser", "main"]


class Args(argparse.Namespace):
    """The parsed command line. ``settings`` is built on first use, so a command that needs only the
    manifest's path (``validate``, ``init``, ``add`` before its sync) never imports the runtime."""

    manifest: str | None
    state_dir: str | None
    database_url: str | None

    @cached_property
    def settings(self) -> Settings:
        from ..vocabulary.settings import Settings

        path = self.manifest_path
        return Settings.from_env(
            manifest=str(path) if path else None, state_dir=self.state_dir, database_url=self.database_url
        )

    @property
    def manifest_path(self) -> Path | None:
        """The manifest every command reads (``manifest_choice``); None for the bundled default."""
        return manifest_choice(self.manifest)[0]

    @property
    def manifest_source(self) -> str:
        """Which manifest this command uses and why, as the line on stderr and ``--json``'s field say it."""
        path, why = manifest_choice(self.manifest)
        return f"{path} ({why})" if path else why


LOCAL_MANIFEST = "gateway.yaml"
"""The file ``init`` writes and every command reads when it is in the current folder."""


def manifest_choice(given: str | None) -> tuple[Path | None, str]:
    """The one rule every command follows: ``--manifest``, else ``$MCP_GATEWAY_MANIFEST``, else
    ``./gateway.yaml`` when it exists, else the bundled default (None); and why that one."""
    if given:
        return Path(given), "--manifest"
    if env := os.environ.get("MCP_GATEWAY_MANIFEST"):
        return Path(env), "$MCP_GATEWAY_MANIFEST"
    if Path(LOCAL_MANIFEST).is_file():
        return Path(LOCAL_MANIFEST), f"./{LOCAL_MANIFEST} in this folder"
    return None, f"the bundled default manifest (no --manifest, $MCP_GATEWAY_MANIFEST or ./{LOCAL_MANIFEST})"


SAYS_MANIFEST = frozenset(
    {"sync", "connectors", "discover", "describe", "call", "connect", "secret", "token", "doctor", "review"}
    | {"audit", "add", "remove", "approvals"}
)
"""The commands that say on stderr which manifest they used (``serve`` says it in its start-up block)."""


EXIT_CODES = f"""exit codes:
  0  done (a call's status ok, needs_auth or pending_approval)
  {EXIT_FAILED}  the operation failed (a call denied or in error, a connector failed, doctor found a problem)
  {EXIT_CONFIG}  usage or configuration error (bad option, invalid manifest, unknown id)
  {EXIT_STORE}  the state store cannot be opened
  141  stdout was closed early (e.g. piped into head)"""

EXAMPLES: dict[str, str] = {
    "serve": "mcp-gateway serve\n  mcp-gateway serve --transport http --port 8765\n"
    "  mcp-gateway --manifest gateway.yaml serve --agent bot",
    "pages": "mcp-gateway pages          # open the links `connect` and `call` print",
    "validate": "mcp-gateway validate --manifest gateway.yaml",
    "sync": "mcp-gateway sync --json",
    "connectors": "mcp-gateway connectors\n  mcp-gateway --json connectors --agent bot",
    "discover": "mcp-gateway discover list open issues\n  mcp-gateway discover send a message --connector slack",
    "describe": "mcp-gateway describe github.issues.list",
    "call": 'mcp-gateway call github.issues.list --args \'{"owner": "octocat", "repo": "hello"}\'\n'
    "  mcp-gateway call github.issues.create --args '{...}' --wait 60",
    "connect": "mcp-gateway connect github",
    "token": "mcp-gateway token create --agent bot\n  mcp-gateway token create --operator\n"
    "  mcp-gateway token list\n  mcp-gateway token revoke ID",
    "secret": 'echo "$GITHUB_TOKEN" | mcp-gateway secret set github',
    "approvals": "mcp-gateway approvals list\n  mcp-gateway approvals approve ID",
    "audit": "mcp-gateway audit --limit 20 | head",
    "review": "mcp-gateway review            # what is held, with diffs and flags\n"
    "  mcp-gateway review --all\n  mcp-gateway review 'lab.*'\n  mcp-gateway review --deny lab.exfiltrate",
    "keys": "new=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')\n"
    '  echo "$new" | mcp-gateway keys rotate',
    "init": "mcp-gateway init                 # writes ./gateway.yaml\n  mcp-gateway init my-gateway.yaml",
    "add": "mcp-gateway add stripe\n  mcp-gateway add ./openapi.yaml --slug billing --base-url https://api.example.com\n"
    "  mcp-gateway add https://example.com/openapi.json --slug example\n"
    "  mcp-gateway add --slug time --mcp -- uvx mcp-server-time\n"
    "  mcp-gateway add --slug docs --mcp-url https://mcp.example.com/mcp",
    "remove": "mcp-gateway remove stripe",
    "doctor": "mcp-gateway doctor\n  mcp-gateway --manifest gateway.yaml doctor --json",
}


def _global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """The options every command takes. On the top parser they have their defaults; on each
    subcommand they default to SUPPRESS, so one given before the command is not overwritten."""

    def d(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    g = parser.add_argument_group("global options (before or after the command)")
    g.add_argument(
        "--manifest",
        default=d(None),
        help="manifest YAML (default: $MCP_GATEWAY_MANIFEST, else ./gateway.yaml if it exists, else the bundled one)",
    )
    g.add_argument(
        "--state-dir", default=d(None), help="state folder (default: $MCP_GATEWAY_STATE_DIR or ./.mcp-gateway)"
    )
    g.add_argument(
        "--database-url",
        default=d(None),
        help="postgresql://... shared by several instances (default: $MCP_GATEWAY_DATABASE_URL, else SQLite in the "
        "state folder); prefer the variable, since other local users can see a password in a command line",
    )
    g.add_argument("--json", action="store_true", default=d(False), help="machine-readable output")
    g.add_argument("--debug", action="store_true", default=d(False), help="show tracebacks and debug logs on stderr")
    g.add_argument(
        "--log-format",
        choices=["text", "json"],
        default=d("text"),
        help="stderr log lines as text or one JSON object per line (time, level, logger, message, ...)",
    )


_AGENT_HELP = "act as this agent of the manifest (default: $MCP_GATEWAY_AGENT, else the operator)"


class _Skipped:
    """Stands in for the parser of a command ``build_parser(only=...)`` leaves out: takes its options
    and subcommands and builds nothing (each ``argparse`` parser costs start time, mostly gettext lookups)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> None:
        pass

    def add_subparsers(self, *args: Any, **kwargs: Any) -> _Skipped:
        return self


_SKIPPED = _Skipped()

_VALUED = frozenset({"--manifest", "--state-dir", "--database-url", "--log-format"})
"""The global options that take a value (``_global_options``)."""
_BARE = frozenset({"--json", "--debug"})


def command_word(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, when that is certain without parsing: every token before it is a
    global option written in full. None for anything else (``-h``, ``--version``, an abbreviated or
    unknown option): then every command's parser is built, as help and errors need."""
    value_next = False
    for token in argv:
        if value_next:
            value_next = False
        elif token in _VALUED:
            value_next = True
        elif token in _BARE or token.partition("=")[0] in _VALUED:
            continue
        else:
            return None if token.startswith("-") else token
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line's parser; with ``only``, one whose only command is ``only`` (``main``,
    once ``command_word`` knows the command: building the thirty others would slow every start).
    Any other ``only`` (not a command) gives the whole parser."""
    parser = argparse.ArgumentParser(
        prog="mcp-gateway",
        description="One MCP server in front of many APIs.",
        epilog=EXIT_CODES + "\n\nrun 'mcp-gateway COMMAND --help' for a command's options and examples.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mcp-gateway {__version__}")
    _global_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    built: list[str] = []

    def add(name: str, fn: str, help: str, parent: Any = sub, examples: str | None = None) -> Any:
        """A subcommand running ``fn`` (``module:function`` in this package, imported only when it runs);
        ``_SKIPPED`` for a command left out (and everything under it)."""
        if parent is _SKIPPED or (only is not None and parent is sub and name != only):
            return _SKIPPED
        if parent is sub:
            built.append(name)
        example = examples or EXAMPLES.get(name)
        p = parent.add_parser(
            name,
            help=help,
            description=help,
            epilog=f"examples:\n  {example}\n\n{EXIT_CODES}" if example else EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _global_options(p, top=False)
        p.set_defaults(fn=fn)
        return p

    p = add("serve", "serve:cmd_serve", "run the MCP server (stdio or streamable HTTP)")
    p.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio: a client starts this command (default); http: streamable HTTP at http://HOST:PORT/mcp",
    )
    p.add_argument("--host", default="127.0.0.1", help="http: the address to listen on (default: loopback)")
    p.add_argument("--port", type=int, default=8765, help="http: the port to listen on (default: 8765)")
    p.add_argument("--quiet", action="store_true", help="no start-up summary on stderr")
    p.add_argument(
        "--public-url",
        help="base of links handed to humans (default: the manifest's public_url; with --transport http and none "
        "in the manifest, the address served)",
    )
    p.add_argument("--agent", help="stdio: act as this agent of the manifest")
    p.add_argument(
        "--metrics-port",
        type=int,
        help="also serve /metrics (no token needed) and /readyz on this port, on --metrics-host",
    )
    p.add_argument("--metrics-host", default="127.0.0.1", help="where --metrics-port listens (default: loopback)")
    p.add_argument("--request-timeout", type=float, default=10.0, help="http: seconds to send a whole request")
    p.add_argument("--keep-alive", type=float, default=5.0, help="http: seconds an idle connection stays open")
    p.add_argument(
        "--max-connections",
        type=int,
        help="http: concurrent connections (503 beyond; default 2 x --max-sessions + 100, must exceed it)",
    )
    p.add_argument("--max-sessions", type=int, default=1000, help="http: open MCP sessions (new ones refused beyond)")
    p.add_argument("--drain-timeout", type=float, default=10.0, help="http: seconds SIGTERM waits for calls in flight")
    p.add_argument(
        "--shutdown-delay",
        type=float,
        default=0.0,
        help="http: seconds after SIGTERM with /healthz answering 503 before the listener closes (load balancers)",
    )

    p = add("pages", "serve:cmd_pages", "serve only the human pages (connect, approvals) on loopback at public_url")
    p.add_argument("--public-url", help="where to serve them (default: the manifest's public_url)")

    add("validate", "commands:cmd_validate", "check the manifest; non-zero exit on any problem")
    add("sync", "commands:cmd_sync", "load every connector and print a table; non-zero exit if any failed")
    p = add("connectors", "commands:cmd_connectors", "list connectors with status")
    p.add_argument("--agent", help=_AGENT_HELP)
    p = add("discover", "commands:cmd_discover", "search actions by intent")
    p.add_argument("query", nargs="+", help="what you want to do, in words")
    p.add_argument("--connector", help="search only this connector (a slug of the manifest)")
    p.add_argument("--limit", type=int, default=10, help="at most this many results (default: 10)")
    p.add_argument("--agent", help=_AGENT_HELP)
    p = add("describe", "commands:cmd_describe", "show an action's input schema, risk and policy")
    p.add_argument("tool", help="the action's name, e.g. github.issues.list")
    p.add_argument("--agent", help=_AGENT_HELP)
    p = add("call", "commands:cmd_call", "run an action (same checks as the MCP call tool)")
    p.add_argument("tool", help="the action's name, e.g. github.issues.list")
    p.add_argument("--args", help="arguments as a JSON object")
    p.add_argument("--approval-id", help="the approval_id a pending_approval answer gave, once a human approved it")
    p.add_argument("--fields", nargs="*", help="keep only these fields of the result (dotted paths)")
    p.add_argument(
        "--wait", type=float, metavar="SECONDS", help="if approval is needed, wait for the decision (at most 120 s)"
    )
    p.add_argument("--agent", help=_AGENT_HELP)
    p = add("connect", "commands:cmd_connect", "print a link a human opens to connect a connector")
    p.add_argument("connector", help="the connector's slug")
    p.add_argument("--agent", help=_AGENT_HELP)

    p = add("token", "commands:cmd_token", "manage HTTP bearer tokens")
    tsub = p.add_subparsers(dest="token_cmd", required=True)
    t = add("create", "commands:cmd_token", "mint a token (shown once)", tsub, EXAMPLES["token"])
    t.add_argument("--agent", help="the manifest agent an MCP token acts as")
    t.add_argument("--operator", action="store_true", help="a token for the operator overview page (/operator)")
    t.add_argument("--force", action="store_true", help="mint a token for an agent the manifest does not name")
    add("list", "commands:cmd_token", "list tokens (never the secret)", tsub, EXAMPLES["token"])
    t = add("revoke", "commands:cmd_token", "revoke a token by id", tsub, EXAMPLES["token"])
    t.add_argument("id", help="the token's id ('mcp-gateway token list')")

    p = add("secret", "commands:cmd_secret", "store a connector's secret, read from stdin")
    ssub = p.add_subparsers(dest="secret_cmd", required=True)
    s = add("set", "commands:cmd_secret", "read the value from stdin (JSON for multi-field kinds)", ssub, None)
    s.add_argument("connector", nargs="?", help="the connector's slug")
    s.add_argument("name", nargs="?", default="default", help="the secret's name (default: the connector's credential)")
    s.add_argument(
        "--discovery", action="store_true", help="store the API key of discovery.embeddings (instead of a connector's)"
    )
    s.add_argument(
        "--front-door",
        choices=["approver", "introspection"],
        help="store a client secret of the front door: the approval page's sign-in client, or the introspection client",
    )

    p = add("approvals", "commands:cmd_approvals", "list, approve or deny pending approvals")
    asub = p.add_subparsers(dest="approvals_cmd", required=True)
    a = add("list", "commands:cmd_approvals", "pending approvals (--all: every one)", asub, EXAMPLES["approvals"])
    a.add_argument("--all", action="store_true", help="every approval, not only the pending ones")
    for verb in ("approve", "deny"):
        a = add(verb, "commands:cmd_approvals", f"{verb} a pending approval", asub, EXAMPLES["approvals"])
        a.add_argument("id", help="the approval's id ('mcp-gateway approvals list')")

    p = add("audit", "commands:cmd_audit", "show recent call decisions")
    p.add_argument("--limit", type=int, default=50, help="the newest this many decisions (default: 50)")

    p = add("keys", "commands:cmd_keys", "re-encrypt stored credentials under a new master key (read from stdin)")
    ksub = p.add_subparsers(dest="keys_cmd", required=True)
    add("rotate", "commands:cmd_keys", "read the new key on stdin", ksub, EXAMPLES["keys"])

    p = add("init", "edit:cmd_init", "write a commented starter manifest")
    p.add_argument("path", nargs="?", default="gateway.yaml", help="where to write it (default: ./gateway.yaml)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")

    p = add("add", "edit:cmd_add", "add a connector to the manifest (catalog entry, OpenAPI file or URL, MCP server)")
    p.add_argument("what", nargs="?", help="a catalog entry name, an OpenAPI file, or an OpenAPI URL")
    p.add_argument("--slug", help="the connector's slug (default: from the catalog name, file or host)")
    p.add_argument("--base-url", help="the API's base URL (default: the spec's first server)")
    p.add_argument("--mcp", action="store_true", help="an MCP server over stdio: the command follows '--'")
    p.add_argument("--mcp-url", help="an MCP server over streamable HTTP")
    p.add_argument("--no-sync", action="store_true", help="only write and validate the entry")

    p = add("remove", "edit:cmd_remove", "remove a connector from the manifest (comments and order kept)")
    p.add_argument("slug", help="the connector's slug")

    add("doctor", "doctor:cmd_doctor", "check the set-up and say how to fix each problem; non-zero exit on any")

    p = add(
        "review",
        "review_queue:cmd_review",
        "list upstream actions held for review (new, changed, flagged) and approve them",
    )
    p.add_argument("names", nargs="*", help="approve these actions (globs allowed, e.g. 'lab.*')")
    p.add_argument("--all", action="store_true", help="approve every action held for review")
    p.add_argument("--deny", action="store_true", help="keep the named actions quarantined and off the list")
    if only is not None and not built:
        return build_parser()  # not a command: the whole parser says so, listing them
    return parser


def _quiet_closed_pipe() -> int:
    """stdout's reader went away (``| head``): no traceback, and no second error at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (tests capture stdout)
    return 141


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Without ``argv``, this process's command line: the process ends when it returns."""
    exiting = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after "--" is a command to run (``add --mcp -- npx -y server``), never our options.
    rest: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, rest = argv[:at], argv[at + 1 :]
    parser = build_parser(only=command_word(argv))
    args = parser.parse_args(argv, namespace=Args())
    if rest and args.command != "add":
        parser.error(f"unexpected arguments after '--': {' '.join(rest)}")
    args.mcp_command = rest
    args.early_stdio = None
    if args.command == "serve" and args.transport == "stdio":
        from ..server import fast

        if fast.ENABLED:
            from ..server.fast.early_stdio import EarlyStdio

            # Claims stdin/stdout now and answers initialize and tools/list as the last start did,
            # while the SDK and the gateway load (see server/fast/early_stdio.py).
            args.early_stdio = EarlyStdio.start(args.settings.state_dir)
    # A start allocates objects that nearly all stay alive (modules, classes, models, the catalog):
    # until it is over, the collector's passes would walk them all and free next to
    # nothing. A command that runs on (``serve``, ``pages``) turns it back on once started.
    with holding_collector(exiting=exiting):
        return _run(args)


def _run(args: Args) -> int:
    import inspect
    import logging

    from ..services.logs import configure_logging, notice

    # Every record, from every library, passes the secret filter on this one handler.
    configure_logging(level=logging.DEBUG if args.debug else logging.WARNING, log_format=args.log_format)
    # These libraries log full request URLs (an api_key may sit in the query) and SQL parameters
    # (sealed credentials) at DEBUG: they stay quiet even under --debug.
    for noisy in ("httpx2", "httpcore2", "httpx", "httpcore", "aiosqlite", "asyncpg"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.command in SAYS_MANIFEST and (args.manifest_path is not None or args.command not in ("add", "remove")):
        notice(f"mcp-gateway: manifest {args.manifest_source}")  # a log record with --log-format json
    try:
        module, _, name = args.fn.partition(":")
        fn = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        if inspect.iscoroutinefunction(fn):
            import anyio

            code = anyio.run(fn, args)
        else:  # a command that awaits nothing (``validate``) need not pay for loading an event loop
            code = fn(args)
        sys.stdout.flush()  # a closed pipe shows here, not as an "Exception ignored" at exit
        return code
    except BrokenPipeError:
        return _quiet_closed_pipe()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        return _report(exc, args.debug)


def _report(exc: Exception, debug: bool) -> int:
    import logging

    from ..services.logs import notice
    from ..vocabulary.errors import GatewayError, ManifestError

    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1 and isinstance(exc.exceptions[0], Exception):
        exc = exc.exceptions[0]
    if isinstance(exc, BrokenPipeError):
        return _quiet_closed_pipe()
    if debug:
        raise exc
    if isinstance(exc, ManifestError):
        shown = escaped(str(exc), lines=True).replace("\n", "\n  ")
        notice(f"mcp-gateway: manifest error:\n  {shown}", level=logging.ERROR)
        return EXIT_CONFIG
    if isinstance(exc, (CliError, GatewayError)):
        notice(f"mcp-gateway: error: {escaped(str(exc), lines=True)}", level=logging.ERROR)
        return exc.code if isinstance(exc, CliError) else EXIT_CONFIG
    notice(f"mcp-gateway: unexpected {type(exc).__name__}; rerun with --debug for details", level=logging.ERROR)
    return EXIT_FAILED
