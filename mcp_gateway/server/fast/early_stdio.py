"""``serve --transport stdio`` answers ``initialize`` and ``tools/list`` before the MCP SDK is imported.

A stdio start spends most of its time importing: the SDK's protocol models (pydantic models of two
protocol versions) and the gateway's own modules are slow to import. Both
answers are fixed for a given build (the six meta-tools never change with the catalog or the
manifest), so the answers the SDK gave last time are kept in the state folder (``stdio-answers.json``)
and replayed at once, from the first instant of the process, by a thread that needs nothing but the
standard library. A state folder without them (a first start) replays the answers shipped in the
package (``stdio_answers.json`` beside this module, written by ``scripts/build_stdio_answers.py``),
but only for the build they were made by: their key is the content of the modules that shape them,
this package's version, the versions of the SDK and pydantic, and Python's release (``content_key``).
Everything the client sends still goes to the SDK in order, exactly as it arrived, so its
session is what it would have been; its own answer to a request already answered is dropped, and
compared: an answer that changed (a client's parameters never seen, another build) is stored for
the next start, never replayed before the SDK gave it.

An answer is replayed only for the same request, the same protocol version negotiated in this
session, and the same build: the state folder's key covers the Python version, this package's
version and the files that shape the answers, and the SDK's installed files (sizes and times, not
contents: cheap). ``initialize`` is the same request for any client that asks for the same protocol
version with parameters of the plain shape the SDK accepts (the SDK's answer depends on that version
alone); ``tools/list`` is the same request for the same parameters.
Like the SDK's own stdio transport, the standard descriptors are diverted while serving (fd 0 reads
the null device, fd 1 writes to stderr), so a child process or a stray print never touches the wire.
Unlike it, a message costs no worker thread at all in the common case: the SDK's lines are read on
the event loop from our pipe (``SdkStdin``), and an answer the wire can take whole at once is
written there too (``SdkWire``); ``anyio.wrap_file`` took three thread round trips per exchange.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import logging
import os
import select
import sys
import threading
from collections import deque
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from ..request_ids import invalid_id_error

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp.server.mcpserver import MCPServer

__all__ = [
    "CACHEABLE",
    "EarlyStdio",
    "SdkStdin",
    "SdkStdout",
    "SdkWire",
    "build_key",
    "content_key",
    "entry",
    "run_stdio_streams",
    "shipped_answers",
]

logger = logging.getLogger(__name__)

CACHEABLE = frozenset({"initialize", "tools/list"})
"""Requests whose answer depends on the build and the request alone, never on state."""
_CACHEABLE_BYTES = tuple(method.encode() for method in CACHEABLE)

_FILE = "stdio-answers.json"
_SHIPPED = Path(__file__).with_name("stdio_answers.json")
_PACKAGE = Path(__file__).resolve().parents[2]
_DISTRIBUTIONS = ("mcp-action-gateway", "mcp", "mcp-types", "pydantic", "pydantic-core")
"""What the answers' bytes depend on besides this package's code: its version (``serverInfo``), the
SDK that builds the answers, and the pydantic that writes the tools' schemas."""
_MAX_ENTRIES = 32
_READ_BYTES = 1 << 16
_SHAPING = ("__init__.py", "server/tools.py", "server/elicitation.py")
"""This package's files that shape the two answers (its version, the tools, the capabilities)."""


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def build_key() -> str:
    """What the answers depend on besides the request: this build of the gateway, of the SDK, of Python."""
    parts = [sys.version]
    here = Path(__file__).resolve().parents[2]
    files = [here / name for name in (*_SHAPING, "server/fast/early_stdio.py")]
    for package in ("mcp", "mcp_types", "pydantic"):
        spec = importlib.util.find_spec(package)  # finds the files, imports nothing
        if spec is not None and spec.origin is not None:
            files.append(Path(spec.origin))
    for path in files:
        try:
            stat = path.stat()
        except OSError:
            parts.append(f"{path}:-")
            continue
        parts.append(f"{path}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def build_environment() -> dict[str, str]:
    """The releases the answers' bytes depend on besides this package's code (``_DISTRIBUTIONS``) and
    Python's: recorded beside the shipped answers, so a check can tell "made elsewhere" from "stale"."""
    from importlib.metadata import PackageNotFoundError, version  # a first start only: stored answers need none

    found = {"python": f"{sys.version_info.major}.{sys.version_info.minor}"}
    for name in _DISTRIBUTIONS:
        try:
            found[name] = version(name)
        except PackageNotFoundError:  # a checkout run from its folder: the answers then say ``__version__``
            found[name] = "-"
    return found


def content_key() -> str:
    """The build the shipped answers belong to, from contents (the same in a wheel, a checkout, any
    folder): the modules that shape them (``_SHAPING``) and ``build_environment()``. What else a
    tool's schema reads (a limit imported from another module) is guarded by the test that compares
    the shipped answers with the server's own."""
    digest = hashlib.sha256(json.dumps(build_environment(), sort_keys=True).encode())
    for name in _SHAPING:
        digest.update(f"{name}\n".encode())
        try:
            digest.update((_PACKAGE / name).read_bytes())
        except OSError:
            digest.update(b"-")
    return digest.hexdigest()


def shipped_answers() -> dict[str, str]:
    """The answers shipped in the package, if they were made by this very build; else none."""
    try:
        data = json.loads(_SHIPPED.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("answers"), dict) or data.get("key") != content_key():
        return {}
    return {str(k): str(v) for k, v in data["answers"].items()}


def _initialize_version(params: Any) -> str | None:
    """The protocol version an ``initialize`` asks for, when its parameters have the plain shape the
    SDK accepts (its answer then depends on that version alone); None for anything else, which only
    the SDK answers: a key, a type or a capability this cannot vouch for."""
    if type(params) is not dict or not params.keys() <= _INITIALIZE_KEYS:
        return None
    version, capabilities, info = params.get("protocolVersion"), params.get("capabilities"), params.get("clientInfo")
    if type(version) is not str or type(capabilities) is not dict or type(info) is not dict:
        return None
    if not info.keys() <= _CLIENT_INFO_KEYS or not {"name", "version"} <= info.keys():
        return None
    if any(type(value) is not str for value in info.values()) or type(params.get("_meta", {})) is not dict:
        return None
    for name, capability in capabilities.items():
        if name not in _CAPABILITIES or type(capability) is not dict:
            return None
        allowed = (dict,) if name in ("experimental", "extensions") else (dict, bool)
        if any(type(value) not in allowed for value in capability.values()):
            return None
    return version


def entry(method: str, params: Any, negotiated: str | None) -> str | None:
    """The key a request's answer is kept under, in a session that negotiated ``negotiated`` (None: not yet)."""
    if method == "initialize":
        version = _initialize_version(params)
        return None if version is None else _compact([method, version])
    return None if negotiated is None else _compact([method, negotiated, params])


_INITIALIZE_KEYS = frozenset({"protocolVersion", "capabilities", "clientInfo", "_meta"})
_CLIENT_INFO_KEYS = frozenset({"name", "version", "title", "description", "websiteUrl"})
_CAPABILITIES = frozenset({"experimental", "sampling", "elicitation", "roots", "extensions", "tasks"})


class EarlyStdio:
    """The process's stdin and stdout for an MCP stdio session, claimed before anything is imported.

    ``start`` diverts fd 0 and 1 and starts the pump; the SDK then reads ``sdk_stdin`` (everything
    the client sent, in order) and writes through ``sdk_stdout`` (its answers, minus the ones
    already given).
    """

    def __init__(self, state_dir: Path) -> None:
        self._path = state_dir / _FILE
        self._key = build_key()
        self._lock = threading.Lock()
        self._answers = self._read()
        self._saved = bool(self._answers)  # the state folder holds them: a later start need not look further
        if not self._saved:
            self._answers = shipped_answers()
            # Kept for the next start at once (the SDK may never answer this one: EOF first), but only
            # in a state folder that exists: a start refused by a later check must leave none behind.
            if self._answers and self._path.parent.is_dir():
                self._store()
        self._answered: set[str] = set()
        self._asked: dict[str, str] = {}  # request id -> cache entry, for the requests worth remembering
        self._version: str | None = None  # the protocol version this session negotiated
        self.serving = False  # the SDK answers from now on: nothing more is replayed
        self._wire: IO[bytes] = sys.stderr.buffer  # set by start
        self._to_sdk: IO[bytes] = sys.stderr.buffer
        self.sdk_stdin: IO[bytes] = sys.stdin.buffer
        self._poll: select.poll | None = None
        self._standby: str | None = None
        """While the gateway cannot open its store: the tool result every ``tools/call`` is answered with."""
        self.held = b""
        """What the pump had passed on for the SDK when the gateway stood by, minus the requests answered
        then: the SDK reads it first (``SdkStdin``)."""
        self.closed = threading.Event()
        """Set once the client closed stdin."""

    @classmethod
    def start(cls, state_dir: Path) -> EarlyStdio | None:
        """Claim fd 0 and 1 and start the pump; None when they cannot be duplicated (then the SDK
        claims them itself, as without this module)."""
        early = cls(state_dir)
        sys.stdout.flush()
        try:
            wire_in = os.dup(0)
        except OSError:
            return None
        try:
            wire_out = os.dup(1)
            read_end, write_end = os.pipe()
        except OSError:
            os.close(wire_in)
            return None
        with open(os.devnull, "rb") as null:
            os.dup2(null.fileno(), 0)
        os.dup2(2, 1)
        early._wire = os.fdopen(wire_out, "wb", buffering=0)
        early._to_sdk = os.fdopen(write_end, "wb", buffering=0)
        early.sdk_stdin = os.fdopen(read_end, "rb")
        threading.Thread(target=early._pump, args=(os.fdopen(wire_in, "rb"),), name="stdio-pump", daemon=True).start()
        return early

    # -- the stored answers ------------------------------------------------------------------------

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self._path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("key") != self._key or not isinstance(data.get("answers"), dict):
            return {}
        return {str(k): str(v) for k, v in data["answers"].items()}

    def _remember(self, entry: str, result: str) -> None:
        if self._answers.get(entry) == result and self._saved:
            return
        self._answers[entry] = result
        while len(self._answers) > _MAX_ENTRIES:
            self._answers.pop(next(iter(self._answers)))
        self._store()

    def _forget(self, entry: str) -> None:
        if self._answers.pop(entry, None) is not None:
            self._store()

    def _store(self) -> None:
        try:
            self._path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = self._path.with_suffix(f".{os.getpid()}.tmp")  # another instance may write at once
            tmp.write_text(json.dumps({"key": self._key, "answers": self._answers}))
            tmp.chmod(0o600)
            tmp.replace(self._path)
            self._saved = True
        except OSError as exc:  # a read-only state folder: the next start is just slower
            logger.debug("cannot store the stdio answers: %s", exc)

    def _entry(self, method: str, params: Any) -> str | None:
        """The key of a request's answer; None when it cannot be known yet (tools/list before this
        session negotiated its protocol version: its answer's shape depends on it), or only the SDK
        may judge the request (an ``initialize`` of another shape)."""
        return entry(method, params, self._version)

    # -- the client's side -------------------------------------------------------------------------

    def _pump(self, wire: IO[bytes]) -> None:
        """Every line the client sends goes to the SDK; a known request is answered on the way."""
        try:
            with wire:  # closed at the client's EOF: this thread is its only reader
                self._pass_on(wire)
        except OSError:
            pass
        finally:
            self.closed.set()
            try:
                self._to_sdk.close()  # EOF for the SDK: the client closed stdin
            except OSError:
                pass

    def _pass_on(self, wire: IO[bytes]) -> None:
        for line in wire:
            if not line.strip():
                continue  # a blank line between messages is no message: nothing to answer or log
            refused = invalid_id_error(line)
            if refused is not None:  # the SDK would take it for a notification: never answered, never run
                self._refuse(refused)
                continue
            if self._stand_in(line):
                continue  # answered here, never run: the SDK must not run it once it is up
            self._early_answer(line)
            self._to_sdk.write(line)

    def stand_by(self, result: str | None) -> None:
        """Answer every ``tools/call`` (and ``ping``) here with ``result``, a tool result's JSON, and not
        pass it on, while the gateway cannot start (its store does not open): the session stays up and
        the agent hears why. Those the pump passed on before, while the gateway was starting, are taken
        back and answered too (the SDK is not reading yet). None: pass everything on to the SDK again
        (the gateway is up)."""
        with self._lock:
            self._standby = result
        if result is None:
            return
        fd = self.sdk_stdin.fileno()
        blocking = os.get_blocking(fd)
        os.set_blocking(fd, False)
        taken = b""
        try:
            while chunk := os.read(fd, _READ_BYTES):
                taken += chunk
        except BlockingIOError:
            pass
        finally:
            os.set_blocking(fd, blocking)
        *lines, tail = (self.held + taken).split(b"\n")
        kept = [line + b"\n" for line in lines if not self._stand_in(line + b"\n")]
        self.held = b"".join(kept) + tail

    def _stand_in(self, line: bytes) -> bool:
        """Whether ``line`` was a request answered for the gateway standing by (``stand_by``)."""
        if self._standby is None or (b"tools/call" not in line and b"ping" not in line):
            return False
        message = _parse(line.decode("utf-8", errors="replace"))
        if message is None or "id" not in message or message.get("method") not in ("tools/call", "ping"):
            return False
        rid = _compact(message["id"])
        with self._lock:
            result = self._standby
            if result is None:
                return False
            answer = result if message["method"] == "tools/call" else "{}"
            self._write(f'{{"jsonrpc":"2.0","id":{rid},"result":{answer}}}\n'.encode())
        return True

    def _early_answer(self, line: bytes) -> None:
        if not any(method in line for method in _CACHEABLE_BYTES):
            return  # a tool call, a notification: parsed by the SDK alone, not here as well
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("method") not in CACHEABLE or "id" not in message:
            return
        rid = _compact(message["id"])
        with self._lock:
            entry = self._entry(message["method"], message.get("params"))
            if entry is None:
                return
            self._asked[rid] = entry
            result = None if self.serving else self._answers.get(entry)
            if result is None:
                return
            self._write(f'{{"jsonrpc":"2.0","id":{rid},"result":{result}}}\n'.encode())
            self._answered.add(rid)
            if message["method"] == "initialize":
                self._version = _version_of(result)

    def _refuse(self, answer: dict[str, Any]) -> None:
        logger.warning("stdio: %s", answer["error"]["message"])
        with self._lock:
            self._write(json.dumps(answer).encode() + b"\n")

    # -- the SDK's side ----------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        self._wire.write(data)

    def wire_ready(self) -> bool:
        """Whether the client's end can take a write now (a pipe: room for ``PIPE_BUF`` bytes at least)."""
        if self._poll is None:
            self._poll = select.poll()
            self._poll.register(self._wire.fileno(), select.POLLOUT)
        return any(events & select.POLLOUT for _, events in self._poll.poll(0))

    def sdk_line(self, text: str) -> None:
        """One line the SDK writes (a JSON-RPC message and its newline)."""
        with self._lock:
            self.serving = True  # the SDK is up: from now on it answers everything itself
            if not self._asked and not self._answered:
                self._write(text.encode())  # nothing to compare or drop: not parsed again here
                return
            message = _parse(text)
            if message is not None and "id" in message and "method" not in message:  # an answer
                rid = _compact(message["id"])
                entry = self._asked.pop(rid, None)
                if entry is not None and "result" in message:
                    result = _compact(message["result"])
                    if entry.startswith('["initialize",') and self._version is None:
                        self._version = _version_of(result)
                    self._remember(entry, result)
                elif entry is not None:  # the SDK refused it: never replay an answer to it again
                    self._forget(entry)
                if rid in self._answered:
                    self._answered.discard(rid)
                    return  # the client has it already
            self._write(text.encode())


class SdkStdin:
    """What the SDK's stdio transport reads (``async for line in stdin``): the lines the pump forwards,
    read from our own pipe on the event loop when it is readable.

    ``anyio.wrap_file`` would hand every line's ``readline`` to a worker thread and wait for it to come
    back (a thread round trip per message); the pipe's read end is this process's alone, so it can
    be non-blocking and watched by the event loop instead. Lines are decoded like the SDK's own text
    wrapper does (UTF-8, undecodable bytes replaced), each with its newline (the last one may lack it).
    """

    def __init__(self, pipe: IO[bytes], held: bytes = b"") -> None:
        self._pipe = pipe  # kept open: the descriptor is read through it
        self._fd = pipe.fileno()
        os.set_blocking(self._fd, False)
        *complete, self._partial = held.split(b"\n")  # what was read off the pipe before (``EarlyStdio.held``)
        self._lines: deque[bytes] = deque(line + b"\n" for line in complete)
        self._ended = False

    def __aiter__(self) -> SdkStdin:
        return self

    async def __anext__(self) -> str:
        import anyio

        while not self._lines:
            if self._ended:
                raise StopAsyncIteration
            try:
                chunk = os.read(self._fd, _READ_BYTES)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not chunk:  # EOF: the client closed stdin
                self._ended = True
                if self._partial:
                    self._lines.append(self._partial)
                    self._partial = b""
                continue
            *complete, self._partial = (self._partial + chunk).split(b"\n")
            self._lines.extend(line + b"\n" for line in complete)
        return self._lines.popleft().decode("utf-8", errors="replace")


class SdkWire:
    """What the SDK's stdio transport writes to (``await stdout.write(line)``, then ``flush``).

    A line the wire can take at once (at most ``PIPE_BUF`` bytes, and the wire ready for writing: a
    pipe then takes it whole without blocking) is written on the event loop; any other goes through
    ``EarlyStdio`` on a worker thread, so a client that stops reading never blocks the event loop.
    The flush needs no thread of its own: every line is written unbuffered already.
    """

    def __init__(self, early: EarlyStdio) -> None:
        self._out = SdkStdout(early)
        self._ready = early.wire_ready

    async def write(self, text: str) -> int:
        import anyio.to_thread

        if len(text) <= select.PIPE_BUF // 4 or len(text.encode()) <= select.PIPE_BUF:  # 4 bytes a character at most
            if self._ready():
                return self._out.write(text)
        return await anyio.to_thread.run_sync(self._out.write, text)

    async def flush(self) -> None:
        pass


class SdkStdout(io.TextIOBase):
    """What the SDK's stdio transport writes to: a text file whose lines go through ``EarlyStdio``."""

    def __init__(self, early: EarlyStdio) -> None:
        super().__init__()
        self._early = early
        self._buffer = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buffer += text
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            self._early.sdk_line(line + "\n")
        return len(text)


def _parse(text: str) -> dict[str, Any] | None:
    try:
        message = json.loads(text)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _version_of(result: str) -> str | None:
    try:
        version = json.loads(result).get("protocolVersion")
    except (ValueError, AttributeError):
        return None
    return version if isinstance(version, str) else None


async def run_stdio_streams(server: MCPServer, early: EarlyStdio) -> None:
    """``server.run_stdio_async()`` over the streams ``early`` claimed at start: the SDK's own stdio
    transport, given the client's lines and writing its answers through ``early``. Its lines are read
    on the event loop (``SdkStdin``) and its flushes cost nothing (``SdkWire``): of the three
    worker-thread round trips a message exchange costs through ``anyio.wrap_file``, one is left.

    The SDK's ``run_stdio_async`` takes no streams, so its low-level server is run here directly
    (``_lowlevel_server``, private): with the fast paths off, ``run_stdio_async`` serves instead. A line
    that is no JSON-RPC message is answered with an error here (``unparsed``); the SDK's own stdio
    transport, with the fast paths off, only logs it at debug level."""
    import anyio
    from mcp.server.stdio import stdio_server

    stdin = cast("anyio.AsyncFile[str]", SdkStdin(early.sdk_stdin, early.held))  # iterated only
    stdout = cast("anyio.AsyncFile[str]", SdkWire(early))  # its write and flush only
    lowlevel = server._lowlevel_server  # pyright: ignore[reportPrivateUsage]  # what run_stdio_async runs
    from ..finishing import finishing
    from ..unparsed import answering_unparsed

    close_read_end: Callable[[], None] | None = None
    try:
        async with stdio_server(stdin, stdout) as (read_stream, write_stream):
            close_read_end = read_stream.close
            async with answering_unparsed(read_stream, write_stream) as messages:
                reader, writer = finishing(messages, write_stream)  # every request read is answered before EOF
                await lowlevel.run(reader, writer, lowlevel.create_initialization_options())
    finally:
        # The session reads ``messages``, so nothing closed the transport's own read end (a
        # ResourceWarning at exit): closed once the transport has stopped and nothing sends to it.
        if close_read_end is not None:
            close_read_end()
