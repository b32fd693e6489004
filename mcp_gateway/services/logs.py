"""Logging: every record, from every library, passes a secret-redaction filter; text or JSON lines.

A secret can reach a log line without anyone printing it on purpose: an upstream MCP stdio child
that echoes its environment on a non-JSON line (the MCP SDK logs the unparsable line verbatim), an
HTTP library's debug output, an exception message quoting a URL. So the filter sits on the
*handlers* (a logger's own filters do not see records that propagate from its children) and
rewrites each record's final text — message, arguments, exception and stack — with every form of
every secret this process has opened (``SecretValue.redaction_forms``: as is, URL-encoded,
JSON-escaped, base64, ``Bearer …``).

Secrets are learned where they are opened: whoever builds a ``LastMeterAuth`` or fills an MCP
child's environment also hands the ``SecretValue`` to ``known_secrets().add``. The filter keeps
forms, never ``SecretValue`` objects, for the process's life.

``--log-format json`` writes one object per line: ``time``, ``level``, ``logger``, ``message`` and,
when the record carries them (``logger.info(..., extra={...})``), ``request_id``, ``agent``,
``tool``, ``connector``, ``status``, ``duration_ms``; a traceback is the ``exception`` field.

The format holds whatever a library logs or prints: a log shipper reading JSON lines drops or
splits anything else, and an operator reading text should not meet a traceback for an event the
gateway expects. So every record's message is one line (control characters escaped: a peer's text
cannot forge a line or drive the terminal), warnings go through logging, a stdio child's stderr is
read into records (``execution/child_output.py``), and in text format an exception logged by the
MCP SDK -- a peer speaking the protocol wrong, an upstream's garbage on stdout, an expected fault --
is summarised on the record's line, its traceback shown only at debug level. The gateway's own
unexpected failures keep their traceback.

A server (``configure_logging(queued=True)``) never writes stderr from the thread that logs: its
parent (an MCP client over stdio) may never read the pipe, whose 64 KiB then fill, and a blocked
write on the event loop would stall every call. Records pass the filters where they are logged, wait
in a bounded queue, and a listener thread writes them; when the queue is full a record is dropped and
counted, and once writing works again one line says how many were. ``stop_logging`` (at the
command's end and at exit) writes what is queued, waiting a few seconds at most for a pipe nobody reads.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import re
import sys
import threading
import time
from contextvars import ContextVar
from datetime import UTC, datetime
from logging.handlers import QueueHandler
from typing import Any, Final, Literal, TextIO, cast

from ..primitives.escapes import escaped, escaped_json
from ..primitives.redaction import Redactor
from ..primitives.secret_spans import hide_userinfo
from ..primitives.secrets import SecretValue
from ..primitives.url_secrets import secret_query_name

__all__ = [
    "CONTEXT_FIELDS",
    "QUEUED_RECORDS",
    "REQUESTER",
    "JsonFormatter",
    "LogFormat",
    "LogThrottle",
    "SecretFilter",
    "TextFormatter",
    "configure_logging",
    "known_secrets",
    "notice",
    "query_values_hidden",
    "routine",
    "stop_logging",
]

LogFormat = Literal["text", "json"]
CONTEXT_FIELDS: Final = ("request_id", "agent", "tool", "connector", "status", "duration_ms")
_TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
PEER_FAULT_LOGGERS: Final = ("mcp",)
"""Libraries whose logged exceptions are a peer's fault, expected events: the MCP SDK (an upstream's
or an agent's malformed message, a dropped connection)."""
_MAX_SUMMARY: Final = 1000
_VERBATIM: Final = "mcp_gateway_verbatim"
"""A record's attribute: a notice, its text written as it is in text format."""


class KnownSecrets:
    """The forms of every secret this process has opened, for the log filter. Thread-safe: records
    are emitted from worker threads (the store, sync) as well as the event loop."""

    def __init__(self) -> None:
        self._redactor = Redactor()
        self._lock = threading.Lock()
        self._seen: set[bytes] = set()
        self._shortest = 0
        """The shortest form's length, read without the lock (an int is swapped whole)."""
        """Digests of the values learned: every call opens its credential again, and working out
        a value's forms (encodings) once is enough."""

    def add(self, secret: SecretValue) -> None:
        digest = secret.digest()
        if digest in self._seen:
            return
        with self._lock:
            self._redactor.add(secret)
            self._seen.add(digest)
            self._shortest = self._redactor.shortest

    def redact(self, text: str, *, truncated: bool = False) -> str:
        """``truncated``: ``text`` was cut, and a tail that starts a secret is cut off too."""
        if not self._redactor or (len(text) < self._shortest and not truncated):
            return text  # without the lock: most texts (ids, names) are shorter than any secret
        with self._lock:
            return self._redactor.redact_text(text, truncated=truncated)

    def forget(self) -> None:
        """Forget every secret learned: for a process that runs one gateway after another (a test
        session), where the secrets of gateways long closed would only slow every later look."""
        with self._lock:
            self._redactor = Redactor()
            self._seen = set()
            self._shortest = 0

    def __bool__(self) -> bool:
        return bool(self._redactor)


_KNOWN = KnownSecrets()


def known_secrets() -> KnownSecrets:
    """The process-wide set the log filter redacts (one per process, like the logging tree itself)."""
    return _KNOWN


_INPUT_VALUE = re.compile(r"input_value=.*?(?=, input_type=|$)", re.MULTILINE)
"""pydantic's quote of the input it could not validate (``[type=json_invalid, input_value='…', …]``), which
a library logs as it is: an upstream's message there, cut in the middle, holds pieces of an echoed secret
that are no form the redactor knows (``…ANARY-s3cr3t-7f2a9``)."""


def _without_inputs(text: str) -> str:
    return _INPUT_VALUE.sub("input_value=[withheld]", text) if "input_value=" in text else text


_QUERY_VALUE = re.compile(r"([?&;]([^=&;?#\s'\"<>]+)=)([^&;#\s'\"<>)]*)")
"""A query parameter as a library quotes a URL or its path (``…with url: /v1/traces?api-key=…``)."""


def query_values_hidden(text: str) -> str:
    """``text`` with the value of every credential-like query parameter it quotes, and the userinfo
    of every URL (``user:password@``), as ``[redacted]`` (``secret_query_name``, ``hide_userinfo``): a
    library logs the URLs it was given (an OTLP endpoint's ``?api-key=``, an MCP server's
    ``https://user:pw@…``) as they are, and the filter knows only the secrets this process opened."""
    text = hide_userinfo(text)
    if "=" not in text:
        return text
    return _QUERY_VALUE.sub(lambda m: m.group(1) + "[redacted]" if secret_query_name(m.group(2)) else m.group(0), text)


class LogThrottle:
    """When each kind of repeated record was last let through, and how many since were not: the first
    is logged, then at most one a ``window`` seconds, saying how many it left out."""

    def __init__(self, window: float = 10.0) -> None:
        self.window = window
        self.last: dict[object, float] = {}
        self.left_out: dict[object, int] = {}
        self._lock = threading.Lock()

    def admit(self, kind: object) -> int | None:
        """None to stay silent; else how many of ``kind`` were left out before this line."""
        now = time.monotonic()
        with self._lock:
            if now - self.last.get(kind, -self.window) < self.window:
                self.left_out[kind] = self.left_out.get(kind, 0) + 1
                return None
            self.last[kind] = now
            return self.left_out.pop(kind, 0)

    def more(self, left_out: int) -> str:
        """What a line let through says of the ones left out before it ("" for none)."""
        return f"; {left_out} more in the last {self.window:g}+ s not logged" if left_out else ""


THROTTLED_LOGGERS: Final = ("opentelemetry",)
"""Libraries that repeat a record for as long as a condition lasts (an OTLP collector down: a warning
per export, every few seconds): each of their records is logged once a window (``LogThrottle``)."""

THROTTLED_RECORDS: Final = {
    ("mcp.server.streamable_http_manager", "Refusing to open a new session"): (
        "refused to open a new MCP session for %s: %s (--max-sessions)"
    ),
}
"""Records any client can repeat at will, by (logger, start of the message): one a window, told anew
with who asked. A client retrying past ``--max-sessions`` in a loop wrote one line per attempt, naming
no one, until a stderr pipe nobody read filled and blocked the event loop."""

REQUESTER: ContextVar[str | None] = ContextVar("mcp_gateway_requester", default=None)
"""Who the request being served is from (an agent's label), for the records a library writes about it."""


class _RepeatFilter(logging.Filter):
    def __init__(self, throttle: LogThrottle | None = None) -> None:
        super().__init__()
        self.throttle = throttle if throttle is not None else LogThrottle()

    def filter(self, record: logging.LogRecord) -> bool:
        told = None
        if not any(record.name == root or record.name.startswith(root + ".") for root in THROTTLED_LOGGERS):
            msg = record.msg if isinstance(record.msg, str) else ""
            told = next(
                (t for (name, start), t in THROTTLED_RECORDS.items() if name == record.name and msg.startswith(start)),
                None,
            )
            if told is None:
                return True
        kind = (record.name, str(record.msg))
        left_out = self.throttle.admit(kind)
        if left_out is None:
            return False
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the secret filter renders what it can
            return True
        if told is not None:
            why = message.partition(": ")[2] or message
            message = told % (REQUESTER.get() or "a client", why)
        record.msg, record.args = message + self.throttle.more(left_out), None
        return True


class SecretFilter(logging.Filter):
    """Rewrites a record's message, exception and stack text with every known secret redacted.

    The record is rendered once here (``getMessage``) and its arguments dropped, so a formatter
    further down cannot re-insert an argument's raw value.
    """

    def __init__(self, secrets: KnownSecrets | None = None) -> None:
        super().__init__()
        self._secrets = secrets if secrets is not None else _KNOWN

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._secrets and record.name.startswith("mcp_gateway"):
            return True  # the gateway's own lines quote URLs as shown_url shows them
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: log what we have rather than lose the record
            message = f"{record.msg!r} {record.args!r}"
        record.msg, record.args = self._secrets.redact(query_values_hidden(_without_inputs(message))), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._secrets.redact(query_values_hidden(_without_inputs(record.exc_text)))
        if record.stack_info:
            record.stack_info = self._secrets.redact(record.stack_info)
        for name in CONTEXT_FIELDS:
            value = record.__dict__.get(name)
            if isinstance(value, str):
                record.__dict__[name] = self._secrets.redact(value)
        return True


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message`` on one line. A traceback follows on the next lines for the
    gateway's own failures, or for any with ``tracebacks`` (``--debug``); an exception a peer caused
    (``PEER_FAULT_LOGGERS``) is otherwise summarised at the end of the line."""

    def __init__(self, *, tracebacks: bool = False) -> None:
        super().__init__(_TEXT_FORMAT)
        self._tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, _VERBATIM, False):
            return record.getMessage()  # a notice, written as the command wrote it
        record.message = escaped(record.getMessage())
        record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        if record.exc_info or record.exc_text:
            if self._tracebacks or not _peer_fault(record.name):
                if record.exc_info and not record.exc_text:
                    record.exc_text = self.formatException(record.exc_info)
                line += "\n" + escaped(record.exc_text or "", lines=True)  # its message may quote a peer
            else:
                line += f" ({_summary(record)})"
        if record.stack_info:
            line += "\n" + escaped(self.formatStack(record.stack_info), lines=True)
        return line


def _peer_fault(name: str) -> bool:
    return any(name == root or name.startswith(root + ".") for root in PEER_FAULT_LOGGERS)


def _summary(record: logging.LogRecord) -> str:
    """The exception's type and message on one line, redacted and escaped (its traceback left out)."""
    exc = record.exc_info[1] if record.exc_info else None
    if exc is not None:
        text = f"{type(exc).__name__}: {exc}"
    else:  # only the formatted text is left: its last line names the exception
        text = (record.exc_text or "").strip().splitlines()[-1:][0] if record.exc_text else ""
    text = _without_inputs(" ".join(part.strip() for part in text.splitlines() if part.strip()))
    cut = len(text) > _MAX_SUMMARY
    return escaped(_KNOWN.redact(query_values_hidden(text[:_MAX_SUMMARY]), truncated=cut)) + ("…" if cut else "")


class JsonFormatter(logging.Formatter):
    """One JSON object per line (time, level, logger, message, the context fields present, exception)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = record.stack_info
        return escaped_json(json.dumps(entry, ensure_ascii=False, default=str))


def configure_logging(
    *, level: int = logging.WARNING, log_format: LogFormat = "text", stream: TextIO | None = None, queued: bool = False
) -> logging.Handler:
    """Send every record to stderr (stdout belongs to the stdio transport) through the
    secret filter, as text or JSON lines, and Python's warnings with them (printed, a warning is
    two lines of raw text). Replaces handlers a previous call installed. ``queued`` (a server): the
    records are written by a listener thread, through a bounded queue (the module's docstring).
    Returns the handler that carries the filters."""
    global _format
    stop_logging()
    target = stream if stream is not None else sys.stderr
    text = TextFormatter(tracebacks=level <= logging.DEBUG)
    formatter = JsonFormatter() if log_format == "json" else text
    handler: logging.Handler
    if queued:
        handler = _Queued.start(_Writer(_unlocked(target), formatter))
    else:
        handler = logging.StreamHandler(target)
        handler.setFormatter(formatter)
    handler.addFilter(_RepeatFilter())
    handler.addFilter(SecretFilter())
    _install(handler)
    root = logging.getLogger()
    root.setLevel(level)
    logging.captureWarnings(True)
    _format = log_format
    return handler


def _install(handler: logging.Handler) -> None:
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)


QUEUED_RECORDS: Final = 1000
"""Records waiting for stderr at most (a server's log): past it, new ones are dropped and counted."""
STOP_WAIT: Final = 5.0
"""Seconds ``stop_logging`` waits for the queued records to be written: a pipe nobody reads is left."""


class _Drops:
    """How many records the full queue turned away since the writer last said so."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def add(self) -> None:
        with self._lock:
            self._count += 1

    def take(self) -> int:
        with self._lock:
            count, self._count = self._count, 0
            return count


class _Unlocked:
    """stderr's file descriptor written with ``os.write``: a writer blocked on a full pipe holds none
    of ``sys.stderr``'s locks, which the interpreter takes at exit (it would wait on them forever)."""

    def __init__(self, fd: int, encoding: str) -> None:
        self._fd = fd
        self._encoding = encoding

    def write(self, text: str) -> int:
        view = memoryview(text.encode(self._encoding, "backslashreplace"))
        while view:
            try:
                view = view[os.write(self._fd, view) :]
            except OSError:  # stderr is gone (its reader exited): there is nowhere to say so
                break
        return len(text)

    def flush(self) -> None:
        pass


def _unlocked(stream: TextIO) -> TextIO:
    """``stream``, written without its locks when it is a real file (else as it is: a test's capture)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return stream
    stream.flush()  # what it holds goes out before the listener's lines
    return cast("TextIO", _Unlocked(fd, stream.encoding or "utf-8"))


class _Writer(logging.StreamHandler[TextIO]):
    """The listener's handler: each record written, after a line saying how many were dropped before it."""

    def __init__(self, stream: TextIO, formatter: logging.Formatter) -> None:
        super().__init__(stream)
        self.setFormatter(formatter)
        self.drops = _Drops()

    def handle(self, record: logging.LogRecord) -> bool:
        self.say_dropped()
        return super().handle(record)

    def say_dropped(self) -> None:
        if dropped := self.drops.take():
            message = "%d log records were dropped: stderr was not read (a full pipe) while the log queue held %d"
            super().handle(
                logging.LogRecord(__name__, logging.WARNING, __file__, 0, message, (dropped, QUEUED_RECORDS), None)
            )


class _Queued(QueueHandler):
    """The root's handler in a server: filters run where a record is logged (the secret filter renders
    it there, with its arguments as they are then), and a listener thread's ``_Writer`` writes it.
    (The stdlib's ``QueueListener`` would wait forever to stop on a pipe nobody reads.)"""

    def __init__(self, writer: _Writer) -> None:
        self.records: queue.Queue[logging.LogRecord | None] = queue.Queue(QUEUED_RECORDS)
        super().__init__(self.records)
        self.writer = writer
        self.listener = threading.Thread(target=self._listen, name="mcp-gateway-log", daemon=True)

    @classmethod
    def start(cls, writer: _Writer) -> _Queued:
        global _queued
        handler = cls(writer)
        handler.listener.start()
        if _queued is None:
            atexit.register(stop_logging)  # runs before logging's own shutdown (registered earlier)
        _queued = handler
        return handler

    def _listen(self) -> None:
        while (record := self.records.get()) is not None:
            self.writer.handle(record)

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record  # rendered by the filters; its exception is formatted by the writer's formatter

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.records.put_nowait(record)
        except queue.Full:
            self.writer.drops.add()

    def stop(self) -> bool:
        """Write what is queued and end the listener; False when its writes stay blocked (the
        listener is then left, a daemon thread, and records keep being queued or dropped)."""
        try:
            self.records.put(None, timeout=STOP_WAIT)
        except queue.Full:
            return False
        self.listener.join(STOP_WAIT)
        if self.listener.is_alive():
            return False
        self.writer.say_dropped()
        return True


_queued: _Queued | None = None
"""The server's queued handler while its listener runs."""


def stop_logging() -> None:
    """Write the queued records and write the next ones directly (at a command's end, and at exit).
    Without a queued handler, nothing to do."""
    global _queued
    handler, _queued = _queued, None
    if handler is None or not handler.stop():
        return
    if handler in logging.getLogger().handlers:
        direct = handler.writer
        for kept in handler.filters:
            direct.addFilter(kept)
        _install(direct)


_format: LogFormat | None = None
"""The format ``configure_logging`` chose (None before it ran)."""


def notice(text: str, *, level: int = logging.INFO, exc: BaseException | None = None) -> None:
    """What a command tells the operator on stderr (the manifest it read, where it serves, why it
    failed): as written in text format, a log record at ``level`` (shown whatever the log level) in
    JSON, so the JSON stream has no line of another shape. ``exc`` (``--debug``): its traceback too,
    through the handler's secret filter, as the record's ``exception`` field in JSON."""
    log = logging.getLogger("mcp_gateway")
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    if _format != "json":
        if exc_info is not None:
            log.handle(log.makeRecord(log.name, level, "(notice)", 0, "the traceback of:", (), exc_info))
        if _queued is not None:  # in order with the records before it, and never a blocking write
            log.handle(log.makeRecord(log.name, level, "(notice)", 0, "%s", (text,), None, extra={_VERBATIM: True}))
        else:
            sys.stderr.write(text + "\n")
        return
    log.handle(log.makeRecord(log.name, level, "(notice)", 0, text, (), exc_info))


def routine(logger: logging.Logger, msg: str, *args: object) -> None:
    """A routine event the operator wants in the log whatever its level (a manifest reloaded): an INFO
    record, so an alert on WARNING does not fire for it, written even where the level is WARNING."""
    logger.handle(logger.makeRecord(logger.name, logging.INFO, "(routine)", 0, msg, args, None))
