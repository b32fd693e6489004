"""An upstream MCP tool's result as the data of an ``ok`` call, within the response byte budget.

The shape keeps MCP's own vocabulary, so an agent that knows MCP reads it at sight:

    {"content": [{"type": "text", "text": ...},
                 {"type": "image", "mimeType": "image/png", "data": <base64>, "bytes": 1234},
                 {"type": "audio", ...}, {"type": "resource", "resource": {"uri", "mimeType", "text" | "blob"}},
                 {"type": "resource_link", "uri", "name", ...}],
     "structuredContent": {...}}

Everything counts against one budget (``max_bytes``, the same cap as an HTTP body): text and
base64 are cut where the budget ends, items past it are dropped, and ``truncated`` says so. A
cut base64 payload stays valid base64 of the leading bytes (it is cut at a 4-character boundary).
When a tool returns ``structuredContent`` and its only text is that same JSON (the SDK's habit),
the duplicate text is left out rather than spending the budget twice.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import mcp_types as types

__all__ = ["ITEM_FRAMING", "says_nothing", "shape_result", "tool_error_text"]

_ERROR_TEXT_LIMIT = 2000
_NO_TEXT = "the tool reported an error without saying why"
_GENERIC_ERROR = re.compile(r"Error executing tool [^\s:]{1,200}(?:: Error executing tool [^\s:]{1,200})*")
"""What the SDK's ``MCPServer`` says in place of an exception it does not pass on (for a nested
tool, once per tool)."""


ITEM_FRAMING = 64
"""Bytes each content item is counted for beyond its text or data: its JSON framing, from
``{"type":"text","text":""},`` (27) to an image's type, MIME type, size and flags (about 60)."""


@dataclass
class _Budget:
    left: int
    truncated: bool = False

    def text(self, value: str) -> str:
        data = value.encode("utf-8")
        if len(data) <= self.left:
            self.left -= len(data)
            return value
        self.truncated = True
        cut = data[: max(self.left, 0)].decode("utf-8", errors="ignore")
        self.left = 0
        return cut

    def base64(self, value: str) -> str:
        if len(value) <= self.left:
            self.left -= len(value)
            return value
        self.truncated = True
        keep = max(self.left, 0) // 4 * 4
        self.left = 0
        return value[:keep]


def shape_result(result: types.CallToolResult, max_bytes: int) -> tuple[dict[str, Any], bool]:
    """(data, truncated) for a successful tool result."""
    budget = _Budget(max_bytes)
    data: dict[str, Any] = {}
    structured = result.structured_content
    if structured is not None:
        encoded = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        if len(encoded.encode("utf-8")) <= budget.left:
            budget.left -= len(encoded.encode("utf-8"))
            data["structuredContent"] = structured
        else:
            # As with a JSON body cut by the cap: its text prefix, flagged, is still the best answer.
            data["structuredContent"] = budget.text(encoded)
    content = [c for c in result.content if not (structured is not None and _is_json_of(c, structured))]
    items: list[dict[str, Any]] = []
    for block in content:
        # Each item costs its JSON framing too: 400,000 empty text items are megabytes with no text at all.
        budget.left -= ITEM_FRAMING
        if budget.left < 0:
            budget.truncated = True
            break
        items.append(_item(block, budget))
    if items or structured is None:
        data["content"] = items
    return data, budget.truncated


def tool_error_text(result: types.CallToolResult) -> str:
    """The text of an ``isError`` result, as the upstream phrased it (capped): its text items, then
    its ``structuredContent`` as JSON unless the text already is that JSON. A tool often puts a
    summary in the text ("Validation failed") and the reasons in the structured content."""
    texts = [c.text for c in result.content if isinstance(c, types.TextContent) and c.text.strip()]
    structured = result.structured_content
    if structured is not None and not any(_is_json_of(c, structured) for c in result.content):
        texts.append(json.dumps(structured, ensure_ascii=False, separators=(",", ":")))
    text = "\n".join(texts).strip() or _NO_TEXT
    return text if len(text) <= _ERROR_TEXT_LIMIT else text[: _ERROR_TEXT_LIMIT - 1] + "…"


def says_nothing(text: str) -> bool:
    """Whether an ``isError`` text says nothing of what went wrong: the SDK's stand-in for an
    exception it keeps to itself ("Error executing tool X"), or no text at all."""
    return bool(_GENERIC_ERROR.fullmatch(text.strip())) or text == _NO_TEXT


def _is_json_of(block: types.ContentBlock, structured: Any) -> bool:
    if not isinstance(block, types.TextContent):
        return False
    try:
        return bool(json.loads(block.text) == structured)
    except (ValueError, RecursionError):
        return False


def _item(block: types.ContentBlock, budget: _Budget) -> dict[str, Any]:
    match block:
        case types.TextContent(text=text):
            return {"type": "text", "text": budget.text(text)}
        case types.ImageContent(data=data, mime_type=mime) | types.AudioContent(data=data, mime_type=mime):
            return _binary({"type": block.type, "mimeType": mime}, data, budget)
        case types.EmbeddedResource(resource=types.TextResourceContents() as res):
            head = {"uri": str(res.uri), "mimeType": res.mime_type}
            return {"type": "resource", "resource": {**_drop_none(head), "text": budget.text(res.text)}}
        case types.EmbeddedResource(resource=types.BlobResourceContents() as res):
            head = {"uri": str(res.uri), "mimeType": res.mime_type}
            return {"type": "resource", "resource": _binary(_drop_none(head), res.blob, budget, key="blob")}
        case types.ResourceLink():
            link = block.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"annotations", "meta"})
            budget.text(json.dumps(link))
            return link
        case _:
            # A content type newer than this build: pass it on as the upstream sent it.
            raw = block.model_dump(mode="json", by_alias=True, exclude_none=True)
            size = len(json.dumps(raw, ensure_ascii=False).encode("utf-8"))
            if size > budget.left:
                budget.left, budget.truncated = 0, True
                return {"type": raw.get("type", "unknown"), "omitted": True}
            budget.left -= size
            return raw


def _binary(head: dict[str, Any], b64: str, budget: _Budget, *, key: str = "data") -> dict[str, Any]:
    # Decoded size without decoding: 3 bytes per 4 characters, less the padding.
    size = len(b64) * 3 // 4 - b64[-2:].count("=")
    kept = budget.base64(b64)
    out = {**head, key: kept, "bytes": size}
    if len(kept) < len(b64):
        out["truncated"] = True
    return out


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}
