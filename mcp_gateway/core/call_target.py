"""Where a prepared call goes and what its action does, in words for the approval page.

An approver decides on what will run, so the page shows the request as the executor built it
(method and URL of an HTTP or GraphQL call, the upstream tool of an MCP one), with query values
under credential-like names shown as ``[redacted]``, as the arguments are.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from ..execution.executor import Prepared
from ..execution.mcp_transport import where
from ..primitives.sanitize import MAX_DESCRIPTION_CHARS, clean_text
from ..services.approvals import REDACTED, secret_name
from ..vocabulary.model import Action, GraphQLBinding, McpBinding

__all__ = ["what_it_calls", "what_it_does"]


def what_it_calls(prepared: Prepared) -> str:
    """``POST https://api.example.com/payments``; ``MCP tool “send” of files's MCP server at host``."""
    binding = prepared.action.binding
    if isinstance(binding, McpBinding):
        return f"MCP tool “{binding.tool}” of {where(prepared.connector)}"
    request = prepared.request
    if request is None:
        return ""
    url = request.url
    query = url.query.decode("ascii", "replace")
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(secret_name(k) for k, _ in pairs):
            shown = [(k, REDACTED if secret_name(k) else v) for k, v in pairs]
            url = url.copy_with(query=urlencode(shown).encode())
    target = f"{request.method} {url}"
    if isinstance(binding, GraphQLBinding):
        return f"{target} (GraphQL {binding.operation} {binding.field})"
    return target


def what_it_does(action: Action) -> str:
    """The action's summary (else the start of its description), cleaned of hidden characters."""
    return clean_text(action.summary or action.description or "", max_chars=MAX_DESCRIPTION_CHARS)
