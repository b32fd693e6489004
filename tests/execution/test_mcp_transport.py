"""How JSON-RPC errors of an upstream MCP server are read: a server's own -32000 is an answer, not a
lost connection, and a parse error's text (the client's, quoting the unreadable message) is not passed on."""

from __future__ import annotations

from mcp.shared.exceptions import MCPError

from mcp_gateway.execution.mcp_transport import connection_closed, refused, session_lost, step_refused

SECRET = "CANARY-s3cr3t-7f2a9"


def test_a_servers_own_minus_32000_is_its_answer_not_a_lost_connection() -> None:
    busy = MCPError(code=-32000, message="rate limit exceeded; retry in a minute")
    assert not connection_closed(busy) and not session_lost(busy)
    error = refused("up's MCP server", "send", busy)
    assert error.reason == "upstream_error" and error.upstream_message == "rate limit exceeded; retry in a minute"
    closed = MCPError(code=-32000, message="Connection closed")
    assert connection_closed(closed) and session_lost(closed)
    assert session_lost(MCPError(code=-32000, message="Bad Request: No valid session ID provided"))


def test_a_parse_errors_text_is_not_passed_on() -> None:
    # The SDK words an unreadable message as pydantic does: pieces of it, an echoed secret's among them.
    cut = f'1 validation error for JSONRPCMessage\n  Invalid JSON: input_value=\'{{"x": "...{SECRET[1:]}"}}\''
    parse_error = MCPError(code=-32700, message=cut)
    for error in (
        refused("up's MCP server", "send", parse_error),
        step_refused("up's MCP server", "tools/list", parse_error),
    ):
        shown = f"{error} {error.upstream_message or ''}"
        assert SECRET[1:] not in shown and "input_value" not in shown
        assert "could not parse" in shown
