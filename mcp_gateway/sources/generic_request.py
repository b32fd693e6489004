"""The generic ``request`` action a connector gets with ``request_action: true``.

When no curated action fits (a spec that lags the API, an endpoint nobody described), the agent
can still reach the connector's API through ``<slug>.request``: method, path, query, headers and
body of its choosing, sent to the connector's ``base_url`` with the connector's credential applied
server-side. What it can never do is leave the connector's origin, climb out of the base path
with ``..``, or set a credential itself (``execution/request_action.py`` enforces that).

Its static risk is ``write``; a call's effective risk is its method's (``policy.effective_risk``):
GET/HEAD/OPTIONS read, DELETE destructive, the rest write, so policy defaults treat a GET through
it like any read and a POST like any write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..manifest import ConnectorConfig
from ..vocabulary.model import Action, RequestBinding
from .base import LoadContext, Normalized, Source

__all__ = ["METHODS", "REQUEST_PATH", "WithRequestAction", "request_action", "with_request_action"]

REQUEST_PATH = "request"
METHODS = ("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE")
MAX_PATH_CHARS = 4096

_SCALAR = {"type": ["string", "number", "integer", "boolean"]}
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["method", "path"],
    "additionalProperties": False,
    "properties": {
        "method": {
            "type": "string",
            "enum": list(METHODS),
            "description": "GET, HEAD and OPTIONS read; DELETE destroys; POST, PUT and PATCH write. "
            "Policy judges the call by this method (writes need a human's approval by default).",
        },
        "path": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_PATH_CHARS,
            "description": "The path below the connector's base URL, e.g. '/repos/octocat/hello-world' (a query "
            "string may follow '?'), or an absolute URL on the same origin as the base URL. No '..' segments.",
        },
        "query": {
            "type": "object",
            "description": "Query parameters; a list value repeats the parameter (a=1&a=2).",
            "additionalProperties": {"anyOf": [_SCALAR, {"type": "array", "items": _SCALAR}, {"type": "null"}]},
        },
        "headers": {
            "type": "object",
            "description": "Extra request headers (Accept, Content-Type, API version headers). The gateway adds "
            "the connector's credential itself; credential headers are refused.",
            "additionalProperties": {"type": "string"},
        },
        "body": {
            "description": "The request body: JSON (any value) by default; a string is sent as it is. With "
            "headers {'Content-Type': 'application/x-www-form-urlencoded'} an object is form-encoded, nested keys "
            "as a[b]=c and lists as a[]=1&a[]=2.",
        },
    },
}


def request_action(connector: ConnectorConfig, path: str = REQUEST_PATH) -> Action:
    """The synthesized action for ``connector``."""
    name = connector.display_name
    return Action(
        connector=connector.slug,
        path=path,
        summary=f"Send any HTTP request to the {name} API (fallback when no other action fits)",
        description=(
            f"Sends one HTTP request to {name}'s API with the connector's credentials applied by the gateway. "
            "Use it when no curated action of this connector can express the call: describe and discover find "
            "those first. 'path' is relative to the connector's base URL (or an absolute URL on its origin); "
            "the answer comes back like any call's (status, JSON or text, capped). Risk follows the method."
        ),
        input_schema=INPUT_SCHEMA,
        risk="write",
        binding=RequestBinding(),
    )


def with_request_action(connector: ConnectorConfig, actions: Sequence[Action]) -> list[Action]:
    """``actions`` plus the request action, unless one is there already. A source action that
    already uses the path ``request`` keeps it; the synthesized one becomes ``request_2``."""
    if any(isinstance(a.binding, RequestBinding) for a in actions):
        return list(actions)
    taken = {a.path for a in actions}
    path, n = REQUEST_PATH, 1
    while path in taken:
        n += 1
        path = f"{REQUEST_PATH}_{n}"
    return [*actions, request_action(connector, path)]


@dataclass(frozen=True)
class WithRequestAction:
    """Any ``Source`` plus the request action (``request_action: true``). A reused catalog has it
    already and is returned as it is; a source that normalizes again even when its fingerprint
    is unchanged (``http``, none) gets it again, so a restart does not lose it."""

    inner: Source

    async def load(self, cfg: ConnectorConfig, ctx: LoadContext) -> Normalized:
        normalized = await self.inner.load(cfg, ctx)
        if any(isinstance(a.binding, RequestBinding) for a in normalized.actions):
            return normalized
        return replace(normalized, actions=with_request_action(cfg, normalized.actions))
