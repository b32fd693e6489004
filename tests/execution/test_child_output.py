"""What a stdio child writes besides the protocol becomes log records: its stderr one record a line,
redacted in every encoding, escaped, cut; a stray stdout line the SDK could not parse, whole and redacted."""

from __future__ import annotations

import base64
import logging
import sys

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcp_gateway.execution.child_output import BURST_LINES, MAX_LINE, child_stderr
from mcp_gateway.primitives.secrets import SecretValue
from mcp_gateway.services.logs import known_secrets

CANARY = "child-stderr-canary-7d1e4b9a2c"
B64 = base64.b64encode(CANARY.encode()).decode()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def run_child(code: str, caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Run ``code`` in a real child process whose stderr is ``child_stderr``'s pipe; its records."""
    caplog.set_level(logging.WARNING, logger="mcp_gateway.execution.child_output")
    # A handler of its own on the logger: whatever another test in this process did to the root's
    # handlers (a command's logging set-up replaces them), these records are seen here.
    seen: list[logging.LogRecord] = []
    catcher = logging.Handler()
    catcher.emit = seen.append  # type: ignore[method-assign]
    logger = logging.getLogger("mcp_gateway.execution.child_output")
    logger.addHandler(catcher)
    try:
        async with child_stderr("lab") as errlog:
            async with await anyio.open_process(
                [sys.executable, "-c", code], stderr=errlog
            ) as child:  # as the SDK does
                errlog.close()  # as the transport does once the child has its copy
                with anyio.fail_after(30):
                    assert await child.wait() == 0
    finally:
        logger.removeHandler(catcher)
    # Leaving the block waited for the reader: everything the child wrote is logged by now.
    return seen


@pytest.mark.anyio
async def test_each_line_is_one_record_with_the_secret_redacted_in_every_form(caplog: pytest.LogCaptureFixture) -> None:
    known_secrets().add(SecretValue(CANARY))
    code = (
        "import sys;"
        f"sys.stderr.write('token {CANARY}\\n');"
        f"sys.stderr.write('b64 {B64}\\r\\n\\n');"
        "sys.stderr.write('\\x1b]0;pwned\\x07\\x1b[2Jtitle\\n');"
        "sys.stderr.write('done')"  # the last line has no newline
    )
    records = await run_child(code, caplog)
    messages = [r.getMessage() for r in records]
    assert messages == [
        "lab's MCP server (stderr): token [redacted]",
        "lab's MCP server (stderr): b64 [redacted]",
        "lab's MCP server (stderr): \\x1b]0;pwned\\x07\\x1b[2Jtitle",
        "lab's MCP server (stderr): done",
    ]
    assert all(r.levelno == logging.WARNING and r.__dict__["connector"] == "lab" for r in records)


@pytest.mark.anyio
async def test_a_long_line_is_cut_and_a_secret_at_the_cut_does_not_leak(caplog: pytest.LogCaptureFixture) -> None:
    known_secrets().add(SecretValue(CANARY))
    pad = MAX_LINE - len(CANARY) // 2  # the cut falls in the middle of the secret
    code = f"import sys; sys.stderr.write('x' * {pad} + '{CANARY}' * 3 + 'y' * 50000 + '\\ndone\\n')"
    records = await run_child(code, caplog)
    messages = [r.getMessage() for r in records]
    assert len(messages) == 2 and messages[1].endswith(": done")
    assert messages[0].endswith("[redacted] [cut]") and len(messages[0]) < MAX_LINE + 100
    assert CANARY[: len(CANARY) // 2] not in messages[0]


@pytest.mark.anyio
async def test_a_stray_stdout_line_is_logged_whole_and_redacted(caplog: pytest.LogCaptureFixture) -> None:
    known_secrets().add(SecretValue(CANARY))
    line = "x" * 10 + CANARY + "\x1b[2J" + "y" * 60  # pydantic's own text cuts it in the middle of the secret
    code = f"import sys; print({line!r}, flush=True); sys.stdin.read()"
    caplog.set_level(logging.WARNING, logger="mcp.client.stdio")
    params = StdioServerParameters(command=sys.executable, args=["-c", code])
    async with child_stderr("lab") as errlog, stdio_client(params, errlog=errlog) as (read, _):
        errlog.close()
        with anyio.fail_after(30):
            assert isinstance(await read.receive(), Exception)  # what the SDK hands the session
    records = [r for r in caplog.records if r.name == "mcp.client.stdio"]
    assert [r.getMessage() for r in records] == [
        "Failed to parse JSONRPC message from server: a line on its stdout is not JSON-RPC: "
        + "x" * 10
        + "[redacted]\\x1b[2J"
        + "y" * 60
    ]
    assert records[0].exc_info is None and records[0].exc_text is None  # no traceback quoting the cut line


@pytest.mark.anyio
async def test_a_flood_of_stderr_is_read_whole_but_logged_within_a_budget(caplog: pytest.LogCaptureFixture) -> None:
    # 5 MB of stderr made a 5.7 MB log; the pipe must still be drained, or the child blocks on it.
    code = "import sys\nfor i in range(20000): sys.stderr.write(f'noise line {i}\\n')\nsys.stderr.write('last')"
    records = await run_child(code, caplog)
    messages = [r.getMessage() for r in records]
    logged = [m for m in messages if "noise line" in m]
    assert BURST_LINES <= len(logged) < 2 * BURST_LINES
    assert any("more stderr lines than the log takes" in m for m in messages)
    dropped = sum(int(m.split(" wrote ")[1].split()[0]) for m in messages if "more stderr lines" in m)
    lines = [m for m in messages if "(stderr): " in m]
    assert len(lines) + dropped == 20001  # every line read: logged, or counted as not logged
