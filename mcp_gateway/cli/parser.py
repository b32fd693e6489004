"""The ``mcp-gateway`` command line's parser: one table row per command (``COMMANDS``), each with a
small function adding that command's options, so ``build_parser(only=...)`` builds one command's
parser alone (``main`` knows the command from ``command_word`` before parsing: building the thirty
others would slow every start).

Global options (``--manifest``, ``--state-dir``, ``--database-url``, ``--json``, ``--debug``,
``--log-format``) work before or after the command: the subcommands' copies default to
``argparse.SUPPRESS``, so a copy left out never overwrites one given earlier.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, cast

from .. import __version__
from .output import EXIT_CONFIG, EXIT_FAILED, EXIT_STORE, escaped

if TYPE_CHECKING:
    Subcommands = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["COMMANDS", "EXAMPLES", "EXIT_CODES", "Command", "build_parser", "command_word"]

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
    "  mcp-gateway token list\n  mcp-gateway token revoke ID-OR-TOKEN",
    "secret": 'echo "$GITHUB_TOKEN" | mcp-gateway secret set github\n'
    "  mcp-gateway secret delete github               # the team-wide credential\n"
    "  mcp-gateway secret delete gdrive oauth2_token  # an OAuth2 connector's team-wide sign-in\n"
    "  mcp-gateway secret delete gdrive oauth2_token --user token:3f2a  # one user's own",
    "approvals": "mcp-gateway approvals list\n  mcp-gateway approvals show ID\n  mcp-gateway approvals approve ID",
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


def _command(sub: Subcommands, name: str, fn: str, help: str, examples: str | None = None) -> argparse.ArgumentParser:
    """A (sub)command running ``fn`` (``module:function`` in this package, imported only when it runs),
    with the global options, its examples and the exit codes."""
    example = examples or EXAMPLES.get(name)
    p = sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=f"examples:\n  {example}\n\n{EXIT_CODES}" if example else EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _global_options(p, top=False)
    p.set_defaults(fn=fn)
    return p


# -- each command's options -------------------------------------------------------------------


def _no_options(p: argparse.ArgumentParser) -> None:
    """A command that takes only the global options."""


def serve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio: a client starts this command (default); http: streamable HTTP at http://HOST:PORT/mcp",
    )
    p.add_argument("--host", default="127.0.0.1", help="http: the address to listen on (default: loopback)")
    p.add_argument("--port", type=_port, default=8765, help="http: the port to listen on (default: 8765)")
    p.add_argument("--quiet", action="store_true", help="no start-up summary on stderr")
    p.add_argument(
        "--public-url",
        type=_public_url,
        help="base of links handed to humans (default: the manifest's public_url; with --transport http and none "
        "in the manifest, the address served)",
    )
    p.add_argument("--agent", help="stdio: act as this agent of the manifest")
    p.add_argument(
        "--metrics-port",
        type=_port,
        help="also serve /metrics (no token needed) and /readyz on this port, on --metrics-host",
    )
    p.add_argument("--metrics-host", default="127.0.0.1", help="where --metrics-port listens (default: loopback)")
    p.add_argument("--request-timeout", type=_timeout, default=10.0, help="http: seconds to send a whole request")
    p.add_argument("--keep-alive", type=_seconds, default=5.0, help="http: seconds an idle connection stays open")
    p.add_argument(
        "--max-connections",
        type=_count,
        help="http: concurrent connections (503 beyond; default 2 x --max-sessions + 100, must exceed it)",
    )
    p.add_argument(
        "--max-sessions", type=_count, default=1000, help="http: open MCP sessions (new ones refused beyond)"
    )
    p.add_argument(
        "--drain-timeout", type=_seconds, default=10.0, help="http: seconds SIGTERM waits for calls in flight"
    )
    p.add_argument(
        "--shutdown-delay",
        type=_seconds,
        default=0.0,
        help="http: seconds after SIGTERM with /healthz answering 503 before the listener closes (load balancers)",
    )


def pages_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--public-url", type=_public_url, help="where to serve them (default: the manifest's public_url)")


def _whole(text: str, low: int, high: int | None, out_of_range: str) -> int:
    """``text`` as a whole number from ``low`` to ``high`` (no upper bound: None), else a usage error
    saying ``out_of_range`` after the number."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"{value} {out_of_range}")
    return value


def _results(text: str) -> int:
    """``discover --limit``: a whole number from 1 to 50, as the ``discover`` tool takes."""
    return _whole(text, 1, 50, "is not from 1 to 50")


def _port(text: str) -> int:
    """A TCP port to listen on: a whole number from 1 to 65535."""
    return _whole(text, 1, 65535, "is not a port (from 1 to 65535)")


MAX_COUNT = 1_000_000_000
"""The most sessions, connections or rows a count may name: past it a number is a typo, and past 2**63
the database cannot even be asked (``audit --limit 99999999999999999999`` was an OverflowError)."""


def _count(text: str) -> int:
    """A whole number from 1 to ``MAX_COUNT`` (sessions, connections, rows)."""
    return _whole(text, 1, MAX_COUNT, f"is not from 1 to {MAX_COUNT:,}")


def _seconds(text: str) -> float:
    """A number of seconds, 0 or more and finite."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more, finite)")
    return value


def _timeout(text: str) -> float:
    """A number of seconds above 0, finite (nothing could be sent in 0 s)."""
    value = _seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("0 is not a timeout: give a number of seconds above 0")
    return value


def _wait(text: str) -> float:
    """``call --wait``: 0 or more seconds (``inf`` allowed: the wait is capped anyway)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def _public_url(text: str) -> str:
    """``--public-url``: checked as the manifest's ``public_url`` is (an http(s) URL with a host and a port
    that can be)."""
    from ..primitives.public_url import public_url_problem

    if (problem := public_url_problem(text)) is not None:
        raise argparse.ArgumentTypeError(f"{problem}; give the base humans open, e.g. http://127.0.0.1:8765")
    return text


def _agent(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agent", help=_AGENT_HELP)


def discover_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", nargs="+", help="what you want to do, in words")
    p.add_argument("--connector", help="search only this connector (a slug of the manifest)")
    p.add_argument("--limit", type=_results, default=10, help="at most this many results, 1 to 50 (default: 10)")
    _agent(p)


def describe_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("tool", help="the action's name, e.g. github.issues.list")
    _agent(p)


def call_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("tool", help="the action's name, e.g. github.issues.list")
    p.add_argument("--args", help="arguments as a JSON object")
    p.add_argument("--approval-id", help="the approval_id a pending_approval answer gave, once a human approved it")
    p.add_argument("--fields", nargs="*", help="keep only these fields of the result (dotted paths)")
    p.add_argument(
        "--wait", type=_wait, metavar="SECONDS", help="if approval is needed, wait for the decision (at most 120 s)"
    )
    _agent(p)


def connect_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("connector", help="the connector's slug")
    _agent(p)


def token_options(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="token_cmd", required=True)
    t = _command(sub, "create", "commands:cmd_token", "mint a token (shown once)", EXAMPLES["token"])
    t.add_argument("--agent", help="the manifest agent an MCP token acts as")
    t.add_argument("--operator", action="store_true", help="a token for the operator overview page (/operator)")
    t.add_argument("--force", action="store_true", help="mint a token for an agent the manifest does not name")
    _command(sub, "list", "commands:cmd_token", "list tokens (never the secret)", EXAMPLES["token"])
    t = _command(
        sub, "revoke", "commands:cmd_token", "revoke a token by its id, or by the token itself", EXAMPLES["token"]
    )
    t.add_argument(
        "id",
        metavar="ID-OR-TOKEN",
        help="the token's id ('mcp-gateway token list'), or the token itself (a leaked one; never printed back)",
    )


def secret_options(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="secret_cmd", required=True)
    s = _command(sub, "set", "commands:cmd_secret", "read the value from stdin (JSON for multi-field kinds)")
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
    d = _command(
        sub,
        "delete",
        "commands:cmd_secret",
        "delete a stored credential (audited; its value is never shown)",
        EXAMPLES["secret"],
    )
    d.add_argument("connector", help="the connector's slug (also one already removed from the manifest)")
    d.add_argument("name", nargs="?", default="default", help="the secret's name (default: the connector's credential)")
    d.add_argument(
        "--user",
        help="delete this user's own credential (a per_user connector's), as `audit` names the user "
        "(`operator`, `token:ID`, a signed-in subject); default: the team-wide one",
    )


def approvals_options(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="approvals_cmd", required=True)
    a = _command(sub, "list", "commands:cmd_approvals", "pending approvals (--all: every one)", EXAMPLES["approvals"])
    a.add_argument("--all", action="store_true", help="every approval, not only the pending ones")
    a = _command(
        sub,
        "show",
        "commands:cmd_approvals",
        "everything an approval covers: its target and every argument, whole",
        EXAMPLES["approvals"],
    )
    a.add_argument("id", help="the approval's id ('mcp-gateway approvals list')")
    for verb in ("approve", "deny"):
        a = _command(sub, verb, "commands:cmd_approvals", f"{verb} a pending approval", EXAMPLES["approvals"])
        a.add_argument("id", help="the approval's id ('mcp-gateway approvals list')")


def audit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=_count, default=50, help="the newest this many decisions (default: 50)")


def keys_options(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="keys_cmd", required=True)
    _command(sub, "rotate", "commands:cmd_keys", "read the new key on stdin", EXAMPLES["keys"])


def init_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", default="gateway.yaml", help="where to write it (default: ./gateway.yaml)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.add_argument(
        "--default",
        action="store_true",
        help="write the bundled default manifest (what serve runs without one: same project, same connectors)",
    )


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", nargs="?", help="a catalog entry name, an OpenAPI file, or an OpenAPI URL")
    p.add_argument("--slug", help="the connector's slug (default: from the catalog name, file or host)")
    p.add_argument("--base-url", help="the API's base URL (default: the spec's first server)")
    p.add_argument("--mcp", action="store_true", help="an MCP server over stdio: the command follows '--'")
    p.add_argument("--mcp-url", help="an MCP server over streamable HTTP")
    p.add_argument("--no-sync", action="store_true", help="only write and validate the entry")


def remove_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("slug", help="the connector's slug")


def review_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", help="approve these actions (globs allowed, e.g. 'lab.*')")
    p.add_argument("--all", action="store_true", help="approve every action held for review")
    p.add_argument("--deny", action="store_true", help="keep the named actions quarantined and off the list")


# -- the table --------------------------------------------------------------------------------


class Command(NamedTuple):
    """One ``mcp-gateway`` command: its name, the handler it runs (``module:function`` in this
    package), its one-line help, and the function adding its options. (A named tuple: ``dataclasses``
    would import ``inspect`` and ``ast`` into every start.)"""

    name: str
    run: str
    help: str
    options: Callable[[argparse.ArgumentParser], None] = _no_options


COMMANDS: tuple[Command, ...] = (
    Command("serve", "serve:cmd_serve", "run the MCP server (stdio or streamable HTTP)", serve_options),
    Command(
        "pages",
        "serve:cmd_pages",
        "serve only the human pages (connect, approvals) on loopback at public_url",
        pages_options,
    ),
    Command("validate", "commands:cmd_validate", "check the manifest; non-zero exit on any problem"),
    Command("sync", "commands:cmd_sync", "load every connector and print a table; non-zero exit if any failed"),
    Command("connectors", "commands:cmd_connectors", "list connectors with status", _agent),
    Command("discover", "commands:cmd_discover", "search actions by intent", discover_options),
    Command("describe", "commands:cmd_describe", "show an action's input schema, risk and policy", describe_options),
    Command("call", "commands:cmd_call", "run an action (same checks as the MCP call tool)", call_options),
    Command("connect", "commands:cmd_connect", "print a link a human opens to connect a connector", connect_options),
    Command("token", "commands:cmd_token", "manage HTTP bearer tokens", token_options),
    Command(
        "secret", "commands:cmd_secret", "store a connector's secret (read from stdin), or delete one", secret_options
    ),
    Command("approvals", "commands:cmd_approvals", "list, approve or deny pending approvals", approvals_options),
    Command("audit", "commands:cmd_audit", "show recent call decisions", audit_options),
    Command(
        "keys",
        "commands:cmd_keys",
        "re-encrypt stored credentials under a new master key (read from stdin)",
        keys_options,
    ),
    Command("init", "edit:cmd_init", "write a commented starter manifest", init_options),
    Command(
        "add",
        "edit:cmd_add",
        "add a connector to the manifest (catalog entry, OpenAPI file or URL, MCP server)",
        add_options,
    ),
    Command(
        "remove", "edit:cmd_remove", "remove a connector from the manifest (comments and order kept)", remove_options
    ),
    Command("doctor", "doctor:cmd_doctor", "check the set-up and say how to fix each problem; non-zero exit on any"),
    Command(
        "review",
        "review_queue:cmd_review",
        "list upstream actions held for review (new, changed, flagged) and approve them",
        review_options,
    ),
)
"""Every command, in the order ``--help`` lists them."""


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


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its usage errors escaped as every other error is (``output.escaped``): an
    "unrecognized arguments" error quotes what was typed as it is, where an ESC sequence in a pasted
    argument would retitle or clear the operator's terminal."""

    def error(self, message: str) -> NoReturn:
        super().error(escaped(message))


class _JsonErrors(_Parser):
    """A parser whose usage errors are one JSON log record, for ``--log-format json``: a log reader that
    takes every stderr line as JSON must not meet argparse's two lines of text."""

    def error(self, message: str) -> NoReturn:
        import logging

        from ..services.logs import configure_logging, notice

        configure_logging(log_format="json")
        usage = " ".join(self.format_usage().split()).removeprefix("usage: ")
        notice(f"{self.prog}: error: {escaped(message)} (usage: {usage})", level=logging.ERROR)
        raise SystemExit(EXIT_CONFIG)


def wants_json(argv: Sequence[str]) -> bool:
    """Whether ``argv`` asks for JSON logs (``--log-format json`` or ``--log-format=json``)."""
    pairs = zip(argv, [*argv[1:], ""], strict=True)
    return "--log-format=json" in argv or any(a == "--log-format" and b == "json" for a, b in pairs)


def build_parser(only: str | None = None, *, json_errors: bool = False) -> argparse.ArgumentParser:
    """The whole command line's parser; with ``only``, one whose only command is ``only``. Any other
    ``only`` (not a command) gives the whole parser, whose error lists them all. ``json_errors``: usage
    errors are a JSON log record (``--log-format json``)."""
    chosen = [command for command in COMMANDS if command.name == only] or COMMANDS
    kind = cast("type[argparse.ArgumentParser]", _JsonErrors if json_errors else _Parser)
    parser = kind(
        prog="mcp-gateway",
        description="One MCP server in front of many APIs.",
        epilog=EXIT_CODES + "\n\nrun 'mcp-gateway COMMAND --help' for a command's options and examples.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mcp-gateway {__version__}")
    _global_options(parser, top=True)
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        parser_class=kind,
    )
    for command in chosen:
        command.options(_command(sub, command.name, command.run, command.help))
    return parser
