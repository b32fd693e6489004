"""``fast.param_headers``: the SDK's ``Mcp-Param-*`` check handed only the schemas that declare a header."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.shared.inbound import validate_mcp_param_headers
from pydantic import Field

from mcp_gateway.server.fast.param_headers import only_declared_param_headers


def _server() -> MCPServer:
    server = MCPServer(name="t")

    @server.tool(name="plain")
    async def plain(
        tool: Annotated[str, Field(min_length=1)], args: dict[str, Any] | None = None, wait: float | None = None
    ) -> str:
        return tool

    @server.tool(name="routed")
    async def routed(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        return region

    return server


def test_param_headers_are_checked_only_for_a_tool_that_declares_one() -> None:
    server = _server()
    lowlevel = server._lowlevel_server
    before = lowlevel.get_tool_input_schema
    assert before is not None
    only_declared_param_headers(server)
    lookup = lowlevel.get_tool_input_schema
    assert lookup is not None

    # A schema without x-mcp-header: the SDK's check could never reject a request, so none is made.
    assert before("plain") is not None and lookup("plain") is None
    headers = {"mcp-param-region": "eu"}
    assert validate_mcp_param_headers(before("plain"), {"tool": "x"}, headers) is None
    # A declared header is still checked, against the same schema as before.
    routed = lookup("routed")
    assert routed is not None and routed == before("routed")
    assert validate_mcp_param_headers(routed, {"region": "us"}, headers) is not None
    assert validate_mcp_param_headers(routed, {"region": "eu"}, headers) is None
    assert lookup("nosuch") is None


def test_a_tool_registered_later_is_looked_up_by_its_own_schema() -> None:
    server = _server()
    only_declared_param_headers(server)
    lookup = server._lowlevel_server.get_tool_input_schema
    assert lookup is not None and lookup("plain") is None

    server.remove_tool("plain")

    @server.tool(name="plain")
    async def plain(zone: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Zone"})]) -> str:
        return zone

    assert lookup("plain") is not None  # the new schema declares one: checked again
