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
``tool``, ``connector``, ``status``, ``duration_ms``.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from datetime import UTC, datetime
from typing import Any, Final, Literal, TextIO

from .redaction import Redactor
from .secrets import SecretValue

__all__ = ["CONTEXT_FIELDS", "JsonFormatter", "LogFormat", "SecretFilter", "configure_logging", "known_secrets"]

LogFormat = Literal["text", "json"]
CONTEXT_FIELDS: Final = ("request_id", "agent", "tool", "connector", "status", "duration_ms")
_TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class KnownSecrets:
    """The forms of every secret this process has opened, for the log filter. Thread-safe: records
    are emitted from worker threads (the store, sync) as well as the event loop."""

    def __init__(self) -> None:
        self._redactor = Redactor()
        self._lock = threading.Lock()
        self._seen: set[bytes] = set()
        """Digests of the values learned: every call opens its credential again, and working out
        a value's forms (encodings) once is enough."""

    def add(self, secret: SecretValue) -> None:
        digest = secret.digest()
        if digest in self._seen:
            return
        with self._lock:
            self._redactor.add(secret)
            self._seen.add(digest)

    def redact(self, text: str) -> str:
        if not self._redactor:
            return text
        with self._lock:
            return self._redactor.redact_text(text)

    def __bool__(self) -> bool:
        return bool(self._redactor)


_KNOWN = KnownSecrets()


def known_secrets() -> KnownSecrets:
    """The process-wide set the log filter redacts (one per process, like the logging tree itself)."""
    return _KNOWN


class SecretFilter(logging.Filter):
    """Rewrites a record's message, exception and stack text with every known secret redacted.

    The record is rendered once here (``getMessage``) and its arguments dropped, so a formatter
    further down cannot re-insert an argument's raw value.
    """

    def __init__(self, secrets: KnownSecrets | None = None) -> None:
        super().__init__()
        self._secrets = secrets if secrets is not None else _KNOWN

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: log what we have rather than lose the record
            message = f"{record.msg!r} {record.args!r}"
        record.msg, record.args = self._secrets.redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._secrets.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self._secrets.redact(record.stack_info)
        for name in CONTEXT_FIELDS:
            value = record.__dict__.get(name)
            if isinstance(value, str):
                record.__dict__[name] = self._secrets.redact(value)
        return True


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
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(
    *, level: int = logging.WARNING, log_format: LogFormat = "text", stream: TextIO | None = None
) -> logging.Handler:
    """Send every record to stderr (stdout belongs to the stdio transport, SPEC 2.9) through the
    secret filter, as text or JSON lines. Replaces handlers a previous call installed."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(_TEXT_FORMAT))
    handler.addFilter(SecretFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
