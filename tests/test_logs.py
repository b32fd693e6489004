"""The log pipeline: every record passes the secret filter, from any logger; text and JSON lines."""

from __future__ import annotations

import base64
import io
import json
import logging
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from mcp_gateway.logs import JsonFormatter, KnownSecrets, SecretFilter, configure_logging, known_secrets
from mcp_gateway.secrets import SecretValue

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


def test_exceptions_and_stacks_are_redacted_too(captured: tuple[io.StringIO, KnownSecrets]) -> None:
    stream, secrets = captured
    secrets.add(SecretValue({"username": "u", "password": CANARY}))
    try:
        raise RuntimeError(f"upstream said {CANARY}")
    except RuntimeError:
        logging.getLogger("test.logs").exception("failed", stack_info=True)
    assert CANARY not in stream.getvalue()
    assert "RuntimeError: upstream said [redacted]" in stream.getvalue()


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
