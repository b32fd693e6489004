"""A request whose ``id`` is neither a string nor an integer, answered ``-32600`` rather than left waiting.

MCP allows only strings and integers as request ids. The SDK reads a message with a ``method`` and an
``id`` of ``1.5``, ``true``, ``null`` or an object as a notification: it never answers it and never
runs it, and the client waits for ever (over HTTP it is even told ``202 Accepted``).
``invalid_id_error`` finds such a message, before the SDK sees it, on the stdio pump and the HTTP fast
path. Every message pays one pattern search; only one it matches is parsed. Standard library only:
the stdio pump asks it while the MCP SDK is still being imported.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["INVALID_REQUEST", "invalid_id_error"]

INVALID_REQUEST: Final = -32600

_SUSPECT: Final = re.compile(rb'"id"\s*:\s*(?:[^\s"\-0-9]|-?[0-9]+[.eE])')
"""An ``id`` member whose value starts as no string and no integer does (or a nested member of that name)."""

_KINDS: Final[dict[type, str]] = {
    bool: "true or false",
    float: "a number with a fraction or an exponent",
    dict: "an object",
    list: "an array",
}


def invalid_id_error(message: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error (id null) answering ``message``, a request whose ``id`` is neither a string
    nor an integer; None for any other message, or for one that is no JSON (answered elsewhere)."""
    if _SUSPECT.search(message) is None:
        return None  # the common case, decided without parsing
    try:
        decoded = json.loads(message)
    except (ValueError, RecursionError):
        return None
    if not isinstance(decoded, dict) or "method" not in decoded or "id" not in decoded:
        return None
    request_id = decoded["id"]
    if isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool)):
        return None
    kind = "null" if request_id is None else _KINDS.get(type(request_id), "neither")
    text = (
        f"Invalid request: id must be a string or an integer (got {kind}). Send the request again with a "
        "whole-number or string id (a message without an id is a notification, never answered)."
    )
    return {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": text}}
