"""Shaping an MCP tool result into call data: one byte budget over everything, MCP's own names."""

from __future__ import annotations

import base64
import json

import mcp_types as types

from mcp_gateway.execution.mcp_result import ITEM_FRAMING, says_nothing, shape_result, tool_error_text

PNG = base64.b64encode(bytes(range(200))).decode()


def result(*content: types.ContentBlock, structured: dict[str, object] | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured)


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_structured_content_is_not_sent_twice() -> None:
    data, truncated = shape_result(result(text('{"a": 1}'), structured={"a": 1}), 1000)
    assert data == {"structuredContent": {"a": 1}}
    assert truncated is False
    data, _ = shape_result(result(text("a summary"), structured={"a": 1}), 1000)
    assert data == {"structuredContent": {"a": 1}, "content": [{"type": "text", "text": "a summary"}]}
    assert shape_result(result(), 1000) == ({"content": []}, False)


def test_the_budget_cuts_text_and_base64_and_drops_what_follows() -> None:
    image = types.ImageContent(type="image", data=PNG, mime_type="image/png")
    # Each item is counted for its framing too (``ITEM_FRAMING``), then its text or data.
    data, truncated = shape_result(result(text("x" * 10), image, text("after")), 10 + 41 + 2 * ITEM_FRAMING)
    assert truncated is True
    first, cut = data["content"]
    assert first == {"type": "text", "text": "x" * 10}
    assert cut["bytes"] == 200 and cut["truncated"] is True
    assert len(cut["data"]) == 40  # a whole number of base64 quads
    assert base64.b64decode(cut["data"]) == bytes(range(30))

    data, truncated = shape_result(result(text("é" * 10)), 5 + ITEM_FRAMING)
    assert truncated is True and data["content"][0]["text"] == "éé"  # never half a character


def test_oversized_structured_content_becomes_its_text_prefix() -> None:
    data, truncated = shape_result(result(structured={"k": "v" * 100}), 20)
    assert truncated is True
    assert data["structuredContent"] == '{"k":"vvvvvvvvvvvvvv'


def test_the_error_text_is_the_tools_own_words() -> None:
    failed = types.CallToolResult(content=[text("quota exceeded"), text("retry tomorrow")], is_error=True)
    assert tool_error_text(failed) == "quota exceeded\nretry tomorrow"
    silent = types.CallToolResult(content=[], is_error=True)
    assert tool_error_text(silent) == "the tool reported an error without saying why"
    assert len(tool_error_text(types.CallToolResult(content=[text("x" * 9000)], is_error=True))) == 2000


def test_the_error_text_keeps_the_details_of_its_structured_content() -> None:
    details = {"errors": [{"field": "email", "message": "must be a valid address"}]}
    failed = types.CallToolResult(content=[text("Validation failed")], structured_content=details, is_error=True)
    assert (
        tool_error_text(failed)
        == 'Validation failed\n{"errors":[{"field":"email","message":"must be a valid address"}]}'
    )
    # The SDK's habit, the same JSON as the text: said once.
    twice = types.CallToolResult(content=[text(json.dumps(details))], structured_content=details, is_error=True)
    assert tool_error_text(twice) == json.dumps(details)


def test_the_sdks_generic_error_says_nothing() -> None:
    assert says_nothing("Error executing tool wipe")
    assert says_nothing("Error executing tool outer: Error executing tool inner")
    assert says_nothing(tool_error_text(types.CallToolResult(content=[], is_error=True)))
    assert not says_nothing("Error executing tool wipe: disk full")
    assert not says_nothing("the widget is broken; pass a smaller size")


def test_many_empty_items_are_bounded_by_their_framing() -> None:
    many = result(*(text("") for _ in range(100_000)))
    data, truncated = shape_result(many, 64 * 1024)
    assert truncated and len(data["content"]) <= 64 * 1024 // ITEM_FRAMING
    assert len(json.dumps(data)) < 2 * 64 * 1024
