"""What an upstream MCP server answers, read before the SDK's client does, so that one bad part of an
answer costs only that part.

The SDK validates a ``tools/list`` result whole: one tool it cannot accept (an ``inputSchema`` whose
type is not ``object``, a tool without a name) fails the listing, and the connector would load no
tool at all. ``AnswerReader`` sees each message between the transport and the SDK; it checks each
tool of a ``tools/list`` answer on its own, against the same models the SDK uses for the protocol
version the handshake agreed, and leaves out the ones that fail, with a warning naming the tool and
what is wrong. When every tool fails, the answer becomes a parse error (``NO_READABLE_TOOL``) that
says so.

The SDK's JSON parser also stops at a nesting depth (about 200 levels). Over stdio, a line nested
deeper is not handed to any request: the request waited for its whole timeout, then was told the
server did not answer. Such a line is read again here with Python's parser: a ``tools/list`` answer
keeps its tools that nest less than ``MAX_TOOL_DEPTH``, and any other answer becomes a parse error
for its own request, so the call says at once that its answer could not be read.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from ..primitives.escapes import escaped

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

# The SDK is imported inside the methods (see ``execution/mcp_sessions.py``).

__all__ = ["MAX_TOOL_DEPTH", "NO_READABLE_TOOL", "AnswerReader", "nesting", "validation_problem"]

logger = logging.getLogger(__name__)

MAX_TOOL_DEPTH: Final = 100
"""Levels of nesting a listed tool may have (its schemas included). Deeper, its describe answer and
the arguments an agent sends for it would nest past what MCP clients parse."""
NO_READABLE_TOOL: Final = "none of the tools it listed could be read"
"""The message of the parse error a ``tools/list`` answer becomes when it lists tools and none is readable."""
PARSE_ERROR: Final = -32700
_FALLBACK_VERSION: Final = "2025-11-25"
"""The protocol version the SDK checks answers against before the handshake has agreed one."""


class AnswerReader:
    """One session's messages, as the transport passes them: ``sent`` sees each outgoing message,
    ``received`` each incoming one (a parsed message, or the transport's parse error) and returns
    what the SDK reads instead."""

    def __init__(self, slug: str) -> None:
        self._slug = slug
        self._listings: set[int | str] = set()
        self._handshakes: set[int | str] = set()
        self._version: str | None = None

    def sent(self, message: SessionMessage) -> None:
        from mcp_types import JSONRPCRequest

        request = message.message
        if isinstance(request, JSONRPCRequest):
            if request.method == "tools/list":
                self._listings.add(request.id)
            elif request.method == "initialize":
                self._handshakes.add(request.id)

    def received(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        from mcp_types import JSONRPCError, JSONRPCResponse

        if isinstance(item, Exception):
            return self._unparsed(item)
        answer = item.message
        if isinstance(answer, JSONRPCError):
            self._listings.discard(answer.id)
            self._handshakes.discard(answer.id)
        elif isinstance(answer, JSONRPCResponse):
            if answer.id in self._handshakes:
                self._handshakes.discard(answer.id)
                version = answer.result.get("protocolVersion")
                self._version = version if isinstance(version, str) else None
            elif answer.id in self._listings:
                self._listings.discard(answer.id)
                return self._listing(answer.id, answer.result, item)
        return item

    def _listing(self, request_id: int | str, result: dict[str, Any], item: SessionMessage | None) -> SessionMessage:
        from mcp_types import methods

        tools = result.get("tools")
        if not isinstance(tools, list):  # no listing at all: the SDK's own error says what is wrong
            return item or _response(request_id, result, None)
        version = self._version or _FALLBACK_VERSION
        if all(nesting(tool) <= MAX_TOOL_DEPTH for tool in tools):  # pyright: ignore[reportUnknownVariableType]
            try:
                methods.validate_server_result("tools/list", version, result)
            except ValidationError:
                pass  # read tool by tool below
            except (KeyError, ValueError):  # a version the tables do not know: the SDK decides
                return item or _response(request_id, result, None)
            else:
                return item or _response(request_id, result, None)
        kept: list[Any] = []
        for index, tool in enumerate(tools):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            problem = _problem(tool, version)
            if problem is None:
                kept.append(tool)
                continue
            logger.warning(
                "connector %s: tool %s is left out, as the MCP client cannot read it: %s; ask the MCP server's "
                "maintainers to fix the tool's definition",
                self._slug,
                _named(tool, index),
                problem,
                extra={"connector": self._slug},
            )
        if tools and not kept:
            return _parse_error(request_id, NO_READABLE_TOOL)
        return _response(request_id, {**result, "tools": kept}, item)

    def _unparsed(self, exc: Exception) -> SessionMessage | Exception:
        errors = exc.errors() if isinstance(exc, ValidationError) else []
        if not errors or errors[0].get("type") != "json_invalid" or not isinstance(line := errors[0].get("input"), str):
            return exc
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            return exc
        request_id = data.get("id") if isinstance(data, dict) else None
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            logger.warning(
                "connector %s: its MCP server sent a message nested deeper than the MCP client parses; it is ignored",
                self._slug,
                extra={"connector": self._slug},
            )
            return exc
        result = data.get("result")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if request_id in self._listings and isinstance(result, dict):
            self._listings.discard(request_id)
            return self._listing(request_id, result, None)  # pyright: ignore[reportUnknownArgumentType]
        self._handshakes.discard(request_id)
        logger.warning(
            "connector %s: its MCP server answered a request with JSON nested deeper than the MCP client parses; "
            "the request is told its answer could not be read",
            self._slug,
            extra={"connector": self._slug},
        )
        return _parse_error(request_id, "the answer nests deeper than the MCP client parses")


def nesting(value: object) -> int:
    """How many levels of objects and arrays ``value`` nests (0 for a scalar), without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict):
            children: list[Any] = list(current.values())  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
        elif isinstance(current, list):
            children = current  # pyright: ignore[reportUnknownVariableType]
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _problem(tool: object, version: str) -> str | None:
    """What makes one listed tool unreadable to the SDK, in a few words, or None."""
    from mcp_types import Tool, methods

    if (depth := nesting(tool)) > MAX_TOOL_DEPTH:
        return f"a definition nested {depth} levels deep (the gateway reads up to {MAX_TOOL_DEPTH})"
    try:
        methods.validate_server_result("tools/list", version, {"tools": [tool]})
    except ValidationError as exc:
        return validation_problem(exc, skip=2)  # past ("tools", 0)
    except (KeyError, ValueError):
        pass  # a version the tables do not know: the version-free model alone
    try:
        Tool.model_validate(tool, by_name=False)
    except ValidationError as exc:
        return validation_problem(exc)
    return None


def validation_problem(exc: ValidationError, *, skip: int = 0) -> str:
    """The first error of ``exc`` as ``field.path: what it expects`` (``skip``: leading parts of the
    path left out). pydantic's location and message never quote the value it got."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"][skip:])
    return f"{escaped(where[:100]) or 'its definition'}: {escaped(first['msg'][:200])}"


def _named(tool: object, index: int) -> str:
    name = tool.get("name") if isinstance(tool, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if isinstance(name, str) and name:
        return repr(escaped(name[:200]))
    return f"number {index + 1} of the listing (it has no name)"


def _response(request_id: int | str, result: dict[str, Any], like: SessionMessage | None) -> SessionMessage:
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCResponse

    message = JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)
    return SessionMessage(message, metadata=like.metadata if like is not None else None)


def _parse_error(request_id: int | str, message: str) -> SessionMessage:
    from mcp.shared.message import SessionMessage
    from mcp_types import ErrorData, JSONRPCError

    error = ErrorData(code=PARSE_ERROR, message=message)
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
