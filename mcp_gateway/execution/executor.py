"""How an action runs, per binding kind: the ``Executor`` protocol and the HTTP executor.

The gateway runs every call in two steps. ``prepare`` is pure (no I/O, no credential): it turns
the agent's arguments into what will be sent, so an argument the wire cannot carry is refused
*before* a human is asked to approve the call. ``run`` sends it, with the connector's
last-meter auth, and returns a capped ``Outcome``. New source kinds (GraphQL, upstream MCP,
Postman) add an executor and register it for their binding kind; the gateway itself does not
change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2

from ..errors import UpstreamError
from ..manifest import ConnectorConfig
from ..model import Action
from .request import build_request
from .response import Outcome
from .send import send

__all__ = ["Executor", "HttpExecutor", "Prepared"]


@dataclass(frozen=True)
class Prepared:
    """A call ready to send. HTTP-like executors fill ``request``; others use ``payload``."""

    action: Action
    connector: ConnectorConfig
    request: httpx2.Request | None = None
    payload: Any = None


class Executor(Protocol):
    def prepare(
        self, action: Action, args: Mapping[str, Any], connector: ConnectorConfig, base_url: str | None
    ) -> Prepared:
        """Place the arguments. Raises ``ArgumentError`` (the agent's mistake) or ``UpstreamError``
        with reason ``connector_error`` (the operator's)."""
        ...

    async def run(self, prepared: Prepared, *, auth: httpx2.Auth, max_bytes: int) -> Outcome:
        """Send it. Raises ``UpstreamError`` when no answer could be had; any answer is an Outcome."""
        ...


class HttpExecutor:
    """openapi and http bindings: one HTTP exchange through the shared client."""

    def __init__(self, client: httpx2.AsyncClient) -> None:
        self._client = client

    def prepare(
        self, action: Action, args: Mapping[str, Any], connector: ConnectorConfig, base_url: str | None
    ) -> Prepared:
        if not base_url:
            raise UpstreamError(
                "connector_error",
                f"Connector {connector.slug!r} has no base_url; the operator must set one in the manifest.",
            )
        request = build_request(action, args, base_url=base_url, static_headers=connector.headers)
        return Prepared(action=action, connector=connector, request=request)

    async def run(self, prepared: Prepared, *, auth: httpx2.Auth, max_bytes: int) -> Outcome:
        assert prepared.request is not None
        return await send(
            self._client, prepared.request, auth=auth, timeout=prepared.connector.timeout, max_bytes=max_bytes
        )
