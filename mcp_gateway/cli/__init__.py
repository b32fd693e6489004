"""The ``mcp-gateway`` command: ``main``, the parsed command line (``Args``) and the manifest it reads.

Each command lives in a module of this package (``commands``, ``serve``, ``edit``, ``doctor``,
``review_queue``) and is imported only when it runs, so ``--help``, ``--version`` and a typo answer
at once and a listing command loads only what it uses. The parser, one table row per command, is
``parser.py``.

stdout carries results only (under ``serve --transport stdio``, the protocol alone); logs and
errors go to stderr, without a traceback unless ``--debug`` (which adds it, and keeps the exit
code). A closed pipe (``| head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from .output import EXIT_CONFIG, EXIT_FAILED, EXIT_STORE, CliError, escaped, holding_collector
from .parser import build_parser, command_word, wants_json

if TYPE_CHECKING:
    from ..vocabulary.settings import Settings

__all__ = ["Args", "build_parser", "command_word", "main"]


class Args(argparse.Namespace):
    """The parsed command line. ``settings`` is built on first use, so a command that needs only the
    manifest's path (``validate``, ``init``, ``add`` before its sync) never imports the runtime."""

    manifest: str | None
    state_dir: str | None
    database_url: str | None
    early_sighup: SignalSeen | None
    """``serve`` and ``pages``: whether a SIGHUP came before their event loop's handler took it."""

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


class SignalSeen:
    """A signal handler that only notes that its signal came (nothing else is safe that early)."""

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, signum: int, frame: object) -> None:
        self.seen = True


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
SERVERS = frozenset({"serve", "pages"})
"""The commands that run until stopped: their log is written by a thread of its own (``logs``)."""


QUIET_UNDER_DEBUG: dict[str, int] = {
    # Full request URLs (an api_key may sit in the query) and SQL parameters (sealed credentials).
    **dict.fromkeys(("httpx2", "httpcore2", "httpx", "httpcore", "aiosqlite", "asyncpg"), logging.WARNING),
    # Every MCP message whole: each SSE chunk an agent is sent (an approval_url or connect_url is a
    # bearer capability; arguments and results are the agent's and the upstream's data), and every
    # message to and from an upstream MCP server with the URL it connects to.
    **dict.fromkeys(("sse_starlette", "mcp.client", "mcp.server.sse"), logging.INFO),
}
"""Libraries whose DEBUG records carry payloads or credentials: held at WARNING or INFO even
under ``--debug``, where every other logger goes to DEBUG."""


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
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C while the command's modules load: as quiet as one while it runs
        return 130


def _main(argv: Sequence[str] | None) -> int:
    exiting = argv is None
    if exiting:
        _stderr_or_nowhere()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after "--" is a command to run (``add --mcp -- npx -y server``), never our options.
    rest: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, rest = argv[:at], argv[at + 1 :]
    parser = build_parser(only=command_word(argv), json_errors=wants_json(argv))
    args = parser.parse_args(argv, namespace=Args())
    if rest and args.command != "add":
        parser.error(f"unexpected arguments after '--': {' '.join(rest)}")
    args.mcp_command = rest
    args.early_stdio = None
    args.early_sighup = None
    if exiting and args.command in ("serve", "pages"):
        import signal

        # Until the event loop's own handler takes it (a reload for serve, a log line for pages), SIGHUP's
        # default action would end the process without a word. The manifest is not read yet: the
        # command only says, once it can log, that one came.
        args.early_sighup = SignalSeen()
        signal.signal(signal.SIGHUP, args.early_sighup)
    from ..vocabulary.settings import check_switches

    try:
        check_switches()  # before the fast paths read theirs at import
        refused = None
    except ValueError as exc:
        refused = CliError(str(exc))
    if refused is None and args.command == "serve" and args.transport == "stdio":
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
        return _run(args, refused)


def _stderr_or_nowhere() -> None:
    """A command started with stderr closed (``2>&-``, a daemon's or a cron line's) does its work and
    writes its notices nowhere: every write to stderr failed (``sys.stderr`` is None, or fd 2 is a file
    someone else opened for reading), and the command exited 1 before doing anything. A closed fd 2 is
    opened on ``/dev/null``: the next file opened (the state database) would take it, and a library
    writing to stderr would write into that file."""
    import fcntl

    try:
        writable = fcntl.fcntl(2, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY
    except OSError:
        nowhere = os.open(os.devnull, os.O_WRONLY)
        if nowhere != 2:
            os.dup2(nowhere, 2)
            os.close(nowhere)
        writable = sys.stderr is not None
    if not writable or sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # for the process's life


def _run(args: Args, refused: CliError | None = None) -> int:
    import logging

    from ..services.logs import configure_logging, stop_logging

    # Every record, from every library, passes the secret filter on this one handler; a server's
    # records are written by a thread of their own (a stderr pipe nobody reads must not stall it).
    level = logging.DEBUG if args.debug else logging.WARNING
    configure_logging(level=level, log_format=args.log_format, queued=args.command in SERVERS)
    try:
        return _command(args, refused)
    finally:
        stop_logging()  # the queued records written before the command returns


def _command(args: Args, refused: CliError | None) -> int:
    import inspect

    from ..services.logs import notice

    for noisy, level in QUIET_UNDER_DEBUG.items():
        logging.getLogger(noisy).setLevel(level)
    if args.command in SAYS_MANIFEST and (args.manifest_path is not None or args.command not in ("add", "remove")):
        notice(f"mcp-gateway: manifest {escaped(args.manifest_source)}")  # a log record with --log-format json
    if refused is not None:
        return _report(refused, args.debug)
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
    from ..primitives.quoting import long_words_cut
    from ..services.logs import notice
    from ..vocabulary.errors import GatewayError, ManifestError, StoreUnavailable, StoreUnopenable

    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1 and isinstance(exc.exceptions[0], Exception):
        exc = exc.exceptions[0]
    if isinstance(exc, BrokenPipeError):
        return _quiet_closed_pipe()
    # --debug adds the traceback; the exit code stays the one a script reads without it.
    traced = exc if debug else None
    if isinstance(exc, ManifestError):
        shown = escaped(str(exc), lines=True).replace("\n", "\n  ")
        notice(f"mcp-gateway: manifest error:\n  {shown}", level=logging.ERROR, exc=traced)
        return EXIT_CONFIG
    if isinstance(exc, (CliError, GatewayError)):
        notice(f"mcp-gateway: error: {long_words_cut(escaped(str(exc), lines=True))}", level=logging.ERROR, exc=traced)
        if isinstance(exc, StoreUnopenable | StoreUnavailable):
            return EXIT_STORE
        return exc.code if isinstance(exc, CliError) else EXIT_CONFIG
    rerun = "" if debug else "; rerun with --debug for details"
    notice(f"mcp-gateway: unexpected {type(exc).__name__}{rerun}", level=logging.ERROR, exc=traced)
    return EXIT_FAILED
