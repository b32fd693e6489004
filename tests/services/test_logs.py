"""The log pipeline: every record passes the secret filter, from any logger; text and JSON lines."""

from __future__ import annotations

import base64
import io
import json
import logging
import threading
import time
import warnings
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from mcp_gateway.primitives.secrets import SecretValue
from mcp_gateway.services.logs import (
    QUEUED_RECORDS,
    JsonFormatter,
    KnownSecrets,
    SecretFilter,
    TextFormatter,
    configure_logging,
    known_secrets,
    notice,
    stop_logging,
)

CANARY = "log-canary-secret-0123456789"


@pytest.fixture
def captured() -> Iterator[tuple[io.StringIO, KnownSecrets]]:
    stream = io.StringIO()
    secrets = KnownSecrets()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    handler.addFilter(SecretFilter(secrets))
    logger = logging.getLogger("test.logs")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield stream, secrets
    finally:
        logger.removeHandler(handler)
        logger.propagate = True


def test_a_known_secret_is_redacted_in_messages_arguments_and_encodings(
    captured: tuple[io.StringIO, KnownSecrets],
) -> None:
    stream, secrets = captured
    secrets.add(SecretValue(CANARY))
    log = logging.getLogger("test.logs.child")  # a child logger: the handler's filter still applies
    log.warning("child printed %s", CANARY)
    spaced = SecretValue("log canary/secret+0123")
    secrets.add(spaced)
    log.warning("url https://x/?key=%s", quote("log canary/secret+0123", safe=""))
    log.warning("basic %s", base64.b64encode(CANARY.encode()).decode())
    log.warning("Authorization: Bearer " + CANARY)
    text = stream.getvalue()
    assert CANARY not in text and base64.b64encode(CANARY.encode()).decode() not in text
    assert text.count("[redacted]") == 4


def test_forgotten_secrets_are_no_longer_looked_for_and_new_ones_are() -> None:
    secrets = KnownSecrets()
    secrets.add(SecretValue(CANARY))
    secrets.forget()
    assert not secrets and secrets.redact(f"x {CANARY}") == f"x {CANARY}"
    secrets.add(SecretValue(CANARY))  # learned again, not skipped as already seen
    assert secrets.redact(f"x {CANARY}") == "x [redacted]"


def test_exceptions_and_stacks_are_redacted_too(captured: tuple[io.StringIO, KnownSecrets]) -> None:
    stream, secrets = captured
    secrets.add(SecretValue({"username": "u", "password": CANARY}))
    try:
        raise RuntimeError(f"upstream said {CANARY}")
    except RuntimeError:
        logging.getLogger("test.logs").exception("failed", stack_info=True)
    assert CANARY not in stream.getvalue()
    assert "RuntimeError: upstream said [redacted]" in stream.getvalue()


def test_a_library_quoting_the_input_it_could_not_parse_loses_the_quote(
    captured: tuple[io.StringIO, KnownSecrets],
) -> None:
    # The MCP client logs pydantic's error for an upstream message it could not read: the quote is cut
    # in the middle, and a piece of an echoed secret is no form the redactor knows.
    stream, secrets = captured
    secrets.add(SecretValue(CANARY))
    piece = CANARY[1:]
    log = logging.getLogger("test.logs")
    log.error(
        "Error parsing JSON response: 1 validation error for JSONRPCMessage\n  Invalid JSON: EOF "
        '[type=json_invalid, input_value=b\'{"jsonrpc":"2.0","id":5...%s"}]}}\', input_type=bytes]',
        piece,
    )
    try:
        raise ValueError(f"1 validation error\n  [type=json_invalid, input_value='...{piece}']")
    except ValueError:
        log.exception("failed")
    text = stream.getvalue()
    assert piece not in text
    assert text.count("input_value=[withheld]") == 3  # the message, the exception, and its source line
    assert "input_type=bytes]" in text and "Error parsing JSON response" in text


def test_nothing_changes_while_no_secret_is_known(captured: tuple[io.StringIO, KnownSecrets]) -> None:
    stream, _ = captured
    logging.getLogger("test.logs").warning("plain %d", 3)
    assert stream.getvalue() == "test.logs plain 3\n"


def test_json_lines_carry_the_context_fields() -> None:
    record = logging.LogRecord("mcp_gateway.core", logging.INFO, __file__, 1, "call %s", ("done",), None)
    record.__dict__.update(request_id="r1", agent="bot", tool="call", connector="github", status="ok", duration_ms=1.5)
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "call done" and line["level"] == "info" and line["logger"] == "mcp_gateway.core"
    assert {k: line[k] for k in ("request_id", "agent", "tool", "connector", "status", "duration_ms")} == {
        "request_id": "r1",
        "agent": "bot",
        "tool": "call",
        "connector": "github",
        "status": "ok",
        "duration_ms": 1.5,
    }
    assert line["time"].endswith("+00:00")


def test_configure_logging_puts_the_filter_on_the_root_handler() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging(level=logging.INFO, log_format="json", stream=stream)
        known_secrets().add(SecretValue(CANARY + "-root"))
        logging.getLogger("mcp.client.stdio").warning("Failed to parse JSONRPC message: %s", CANARY + "-root")
        line = json.loads(stream.getvalue().splitlines()[-1])
        assert line["message"] == "Failed to parse JSONRPC message: [redacted]"
    finally:
        root.handlers[:], root.level = saved


def _record(name: str, message: str, *, error: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(error), error, error.__traceback__) if error is not None else None
    return logging.LogRecord(name, logging.ERROR, __file__, 1, message, None, exc_info)


def _raised(message: str) -> BaseException:
    try:
        raise ValueError(message)
    except ValueError as exc:
        return exc


def test_a_text_record_is_one_line_whatever_its_message_holds() -> None:
    line = TextFormatter().format(_record("mcp_gateway.x", "child said \x1b]0;pwned\x07\nFORGED ERROR line"))
    assert "\n" not in line and "\x1b" not in line and "\x07" not in line
    assert line.endswith("child said \\x1b]0;pwned\\x07\\nFORGED ERROR line")


def test_an_sdk_fault_is_one_line_in_text_and_its_traceback_only_at_debug() -> None:
    record = _record("mcp.client.stdio", "Failed to parse", error=_raised("1 error\n  input_value='garbage'\n"))
    line = TextFormatter().format(record)
    assert "\n" not in line and "Traceback" not in line
    # The input a library quotes is withheld here as in the message: a piece of an echoed secret is no
    # form the redactor knows, and this summary is built from the exception, not the filtered text.
    assert line.endswith("Failed to parse (ValueError: 1 error input_value=[withheld])")
    debug = TextFormatter(tracebacks=True).format(_record("mcp.client.stdio", "Failed", error=_raised("x")))
    assert "Traceback (most recent call last)" in debug


def test_the_gateways_own_failure_keeps_its_traceback_escaped() -> None:
    line = TextFormatter().format(_record("mcp_gateway.core.calls", "call failed", error=_raised("bug \x1b[2J")))
    assert "Traceback (most recent call last)" in line and line.endswith("ValueError: bug \\x1b[2J")


def test_a_summary_is_redacted_though_it_is_made_from_the_exception_itself() -> None:
    known_secrets().add(SecretValue(CANARY + "-summary"))
    record = _record("mcp.shared.session", "bad message", error=_raised(f"echoed {CANARY}-summary"))
    SecretFilter().filter(record)
    line = TextFormatter().format(record)
    assert CANARY not in line and "(ValueError: echoed [redacted])" in line


def test_a_json_record_is_one_object_on_one_line_with_the_traceback_in_a_field() -> None:
    record = _record("mcp.client.stdio", "bad \u202e\x9b line\nTWO", error=_raised("garbage\nmore"))
    text = JsonFormatter().format(record)
    assert "\n" not in text and "\u202e" not in text and "\x9b" not in text
    entry = json.loads(text)
    assert entry["message"] == "bad \u202e\x9b line\nTWO"  # the value itself is kept, escaped on the wire
    assert entry["exception"].startswith("Traceback") and entry["exception"].endswith("ValueError: garbage\nmore")


def test_warnings_and_notices_keep_the_json_format() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        with warnings.catch_warnings():  # pytest's own capture of warnings is set aside in here
            warnings.simplefilter("always")
            logging.captureWarnings(False)  # an earlier capture may have been undone by pytest: start afresh
            configure_logging(level=logging.WARNING, log_format="json", stream=stream)
            warnings.warn("a library is deprecated\nsecond line", DeprecationWarning, stacklevel=1)
        notice("mcp-gateway: MCP at http://127.0.0.1:1/mcp")  # INFO, shown though the level is WARNING
        lines = [json.loads(line) for line in stream.getvalue().splitlines()]
        assert [entry["logger"] for entry in lines] == ["py.warnings", "mcp_gateway"]
        assert "a library is deprecated" in lines[0]["message"]
        assert lines[1]["message"] == "mcp-gateway: MCP at http://127.0.0.1:1/mcp" and lines[1]["level"] == "info"
    finally:
        logging.captureWarnings(False)
        configure_logging(stream=io.StringIO())  # text again, for notice() in later tests
        root.handlers[:], root.level = saved


def test_an_exporters_repeated_warning_is_logged_once_a_window_without_its_urls_token() -> None:
    # The OTLP exporter quotes its endpoint, query token included, in a warning every few seconds
    # while the collector is down; the filter knows only the secrets the process opened.
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    exporter = logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    try:
        handler = configure_logging(level=logging.INFO, stream=stream)
        for _ in range(5):
            exporter.warning(
                "Transient error %s encountered while exporting span batch, retrying in %ss.",
                "Max retries exceeded with url: /v1/traces?api-key=CANARY-Q&tenant=t1",
                1,
                exc_info=_raised("GET http://h/v1/traces?token=CANARY-T&x=1 refused"),
            )
        throttle = next(f for f in handler.filters if hasattr(f, "throttle")).throttle  # type: ignore[attr-defined]
        throttle.last.clear()  # the window passes
        exporter.warning("Transient error %s encountered while exporting span batch, retrying in %ss.", "again", 2)
        logging.getLogger("mcp_gateway.core").warning("the gateway's own lines are not throttled")
        logging.getLogger("mcp_gateway.core").warning("the gateway's own lines are not throttled")
    finally:
        root.handlers[:], root.level = saved
    text = stream.getvalue()
    assert "CANARY" not in text, text
    assert "api-key=[redacted]&tenant=t1" in text and "token=[redacted]&x=1" in text
    assert text.count("Transient error") == 2 and "again" in text
    assert "retrying in 2s.; 4 more in the last 10+ s not logged" in text
    assert text.count("not throttled") == 2


def test_a_urls_password_a_library_logs_is_hidden_though_no_secret_is_known(
    captured: tuple[io.StringIO, KnownSecrets],
) -> None:
    """The MCP SDK's client logs the URL it connects to as given, password included."""
    stream, _secrets = captured
    log = logging.getLogger("test.logs.mcp")
    log.debug("Connecting to StreamableHTTP endpoint: http://alice:%s@127.0.0.1:1/mcp?key=k", CANARY)
    log.debug("Connecting to SSE endpoint: https://%s@host/sse", CANARY)
    log.debug("shown already: http://alice:***@host/mcp")
    text = stream.getvalue()
    assert CANARY not in text, text
    assert "http://[redacted]@127.0.0.1:1/mcp?key=[redacted]" in text and "https://[redacted]@host/sse" in text
    assert "http://alice:***@host/mcp" in text


class _StuckStream(io.StringIO):
    """stderr as a pipe nobody reads: a write waits until ``unblock`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.unblock = threading.Event()

    def write(self, s: str) -> int:
        self.unblock.wait(10)
        return super().write(s)


@pytest.fixture
def root_saved() -> Iterator[None]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        yield
    finally:
        stop_logging()
        configure_logging(stream=io.StringIO())  # direct again, for notice() in later tests
        root.handlers[:], root.level = saved


@pytest.mark.usefixtures("root_saved")
def test_a_queued_log_never_waits_for_a_stuck_stderr_and_counts_what_it_dropped() -> None:
    stream = _StuckStream()
    configure_logging(stream=stream, queued=True)
    log = logging.getLogger("mcp_gateway.core")
    began = time.monotonic()
    for n in range(QUEUED_RECORDS * 3):
        log.warning("record %d", n)
    assert time.monotonic() - began < 5  # a direct handler waits 10 s on the first record
    stream.unblock.set()
    stop_logging()
    lines = stream.getvalue().splitlines()
    said = [line for line in lines if "log records were dropped" in line]
    assert len(said) == 1, said
    dropped = int(said[0].split(" WARNING mcp_gateway.services.logs: ")[1].split()[0])
    written = [line for line in lines if "mcp_gateway.core: record" in line]
    assert dropped > 0 and dropped + len(written) == QUEUED_RECORDS * 3
    assert written[0].endswith("record 0")  # the oldest kept, in order


@pytest.mark.usefixtures("root_saved")
def test_a_queued_log_loses_nothing_when_stderr_is_read_and_keeps_notices_in_order() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream, queued=True)
    log = logging.getLogger("mcp_gateway.core")
    log.warning("before")
    notice("mcp-gateway serving\n  manifest   x")  # written as it is, after the record before it
    for n in range(300):
        log.warning("record %d", n)
    stop_logging()
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("mcp_gateway.core: before") and lines[1:3] == ["mcp-gateway serving", "  manifest   x"]
    assert len(lines) == 303 and "dropped" not in stream.getvalue()
    log.warning("after the stop")  # written directly, through the same filters
    assert stream.getvalue().splitlines()[-1].endswith("after the stop")
