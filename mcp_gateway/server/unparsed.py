"""What a client's stdio line that is no JSON-RPC message gets: an error answer, never silence.

The SDK's stdio transport hands such a line to the session as an exception, which the session only
logs at debug level: a client that sent a request with a lone surrogate escape (``"\\ud800"``, a
JavaScript string cut in the middle of an emoji), nesting deeper than the parser follows, or a
truncated line waits for an answer that never comes. Its HTTP transport answers ``-32700`` at once.
``answering_unparsed`` sits between the transport and the session and answers each one as JSON-RPC
says: ``-32700`` (parse error) or ``-32600`` (invalid request), with the request's id when the line
still shows one, so the client's pending call ends with a message saying what to send instead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["answering_unparsed", "unparsed_answer"]

logger = logging.getLogger(__name__)


@asynccontextmanager
async def answering_unparsed(read_stream: Any, write_stream: Any) -> AsyncIterator[Any]:
    """A read stream with the transport's messages, and its exceptions answered on ``write_stream``
    (``unparsed_answer``) instead of passed on."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def relay() -> None:
        async with send:
            async for item in read_stream:
                if isinstance(item, Exception):
                    answer = unparsed_answer(item)
                    logger.warning("stdio: %s", answer.error.message)
                    await write_stream.send(SessionMessage(answer))
                    continue
                await send.send(item)

    async with anyio.create_task_group() as group:
        group.start_soon(relay)
        async with receive:
            yield receive
        group.cancel_scope.cancel()


def unparsed_answer(error: Exception) -> types.JSONRPCError:
    """The JSON-RPC error answering a line the transport could not read as a message (``error``)."""
    detail = error.errors()[0] if isinstance(error, ValidationError) and error.errors() else None
    line = detail.get("input") if detail is not None else None
    if detail is None or detail["type"] != "json_invalid":
        request_id = _id_of(line) if isinstance(line, dict) else None
        return _error(
            types.INVALID_REQUEST,
            "Invalid request: the message is JSON but not a JSON-RPC 2.0 "
            "request or notification (jsonrpc, method, params, id).",
            request_id,
        )
    parsed = _lenient(line) if isinstance(line, str) else None
    why = str(detail.get("msg", "")).removeprefix("Invalid JSON: ")
    if "recursion" in why:  # Python's parser may read it (some hundreds of levels) or not: the id is scanned
        message = "Parse error: the message nests deeper than the server reads. Send flatter arguments."
        request_id = _id_of(parsed) if parsed is not None else _top_level_id(line) if isinstance(line, str) else None
        return _error(types.PARSE_ERROR, message, request_id)
    if parsed is not None:  # Python's parser takes what the strict one refused: a lone surrogate
        message = (
            "Parse error: a string holds a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair). "
            "Send whole characters: a string cut in the middle of an emoji, or an unpaired \\u escape, is not text."
        )
    else:
        message = f"Parse error: the line is not valid JSON ({why}). Send one JSON-RPC message per line."
    return _error(types.PARSE_ERROR, message, _id_of(parsed))


def _error(code: int, message: str, request_id: int | str | None) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def _lenient(line: str) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


_DECODER = json.JSONDecoder()
MAX_ID_SCAN = 1 << 20
"""Characters of a line read for its id when no parser reads the line: clients write it near the start."""


def _top_level_id(line: str) -> int | str | None:
    """The ``id`` member of the object ``line`` opens, read without parsing the rest (a message too deep
    for any parser still says which request it answers). None when there is none at the top level."""
    depth, at, length = 0, 0, min(len(line), MAX_ID_SCAN)
    while at < length:
        char = line[at]
        if char == '"':
            try:
                key, end = _DECODER.raw_decode(line, at)
            except ValueError:
                return None
            if depth == 1 and key == "id":
                colon = end
                while colon < length and line[colon] in " \t\r\n":
                    colon += 1
                if colon < length and line[colon] == ":":
                    value_at = colon + 1
                    while value_at < length and line[value_at] in " \t\r\n":
                        value_at += 1
                    try:
                        value, _ = _DECODER.raw_decode(line, value_at)
                    except (ValueError, RecursionError):
                        return None
                    return _id_of({"id": value})
            at = end
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        at += 1
    return None


def _id_of(message: Any) -> int | str | None:
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, int | str) and not isinstance(request_id, bool) else None
