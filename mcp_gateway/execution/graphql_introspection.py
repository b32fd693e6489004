"""GraphQL introspection at sync (``graphql: {introspect: true}``): one POST of the standard
introspection query to the connector's ``base_url``, with its credential applied server-side.

``sources/graphql.py`` turns the answer into actions (``GraphQLLoader``); it is handed
``GraphQLServices.introspect_connector`` so that the source layer itself does no network or
credential I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import httpx2

from ..manifest import ConnectorConfig
from ..primitives.redaction import Redactor
from ..primitives.sanitize import MAX_ERROR_CHARS
from ..primitives.secrets import SecretValue
from ..primitives.upstream_text import WITHHELD
from ..sources._documents import MAX_REMOTE_BYTES
from ..sources.graphql_schemas import GraphQLSchemas
from ..vocabulary.errors import CredentialMissing, GatewayError, SourceError, UpstreamError
from .http_request import USER_AGENT
from .response import said
from .send import send

if TYPE_CHECKING:
    from graphql import GraphQLSchema

__all__ = ["AuthFor", "GraphQLServices", "introspect"]

AuthFor = Callable[[ConnectorConfig, Callable[[SecretValue], None]], Awaitable[httpx2.Auth]]
"""The connector's last-meter auth for a sync-time request; the callback learns what to redact."""


async def introspect(
    client: httpx2.AsyncClient,
    url: str,
    *,
    auth: httpx2.Auth,
    headers: Mapping[str, str],
    timeout: float,  # noqa: ASYNC109 - handed to send(), which also limits each network operation with it
    redactor: Redactor,
) -> tuple[GraphQLSchema, str]:
    """Introspect a live endpoint; returns the schema and a digest of the answer (for change detection).

    Raises:
        SourceError: the endpoint cannot be reached, refuses (401/403), or answers something that
            is not an introspection result. Messages are redacted and name the host only.
    """
    # graphql-core is imported by the first introspection, not by every gateway that could do one.
    from graphql import get_introspection_query

    from ..sources.graphql import build_schema_from_introspection

    body = json.dumps({"query": get_introspection_query(descriptions=True), "operationName": "IntrospectionQuery"})
    request = httpx2.Request(
        "POST",
        url,
        headers={
            "User-Agent": USER_AGENT,
            "Accept": "application/graphql-response+json, application/json;q=0.9",
            **headers,
            "Content-Type": "application/json",
        },
        content=body.encode(),
    )
    host = request.url.host
    unauthenticated: GatewayError | None = None
    try:
        try:
            outcome = await send(client, request, auth=auth, timeout=timeout, max_bytes=MAX_REMOTE_BYTES)
        except CredentialMissing as exc:
            # No credential stored yet: many endpoints answer introspection without one, and then the
            # connector loads now (its calls still need the credential) instead of waiting for it.
            unauthenticated = exc
            outcome = await send(client, request, auth=httpx2.Auth(), timeout=timeout, max_bytes=MAX_REMOTE_BYTES)
    except UpstreamError as exc:
        # The gateway's own sentence (send() words it), screened all the same: it may quote the upstream.
        raise SourceError(f"introspection failed: {said(exc, redactor.redact_text).text}") from None
    except GatewayError as exc:  # an unusable credential, an auth kind this build cannot apply
        raise SourceError(
            f"introspection of {host} could not be authenticated: {exc}; store the connector's credential "
            "(mcp-gateway secret set, or the connect link), then sync again"
        ) from None
    if unauthenticated is not None and outcome.http_status in (401, 403):
        raise SourceError(
            f"introspection of {host} needs the credential ({outcome.http_status} without it): {unauthenticated}; "
            "store the connector's credential (mcp-gateway secret set, or the connect link), then sync again"
        )
    if outcome.http_status in (401, 403):
        raise SourceError(
            f"{host} refused the introspection query ({outcome.http_status}); store a valid credential for this "
            "connector (mcp-gateway secret set, or the connect link), then sync again."
        )
    data, status = outcome.data, outcome.http_status
    assert status is not None, "send() answers over HTTP, with a status"
    errors = data.get("errors") if isinstance(data, dict) else None
    if status >= 400 or outcome.truncated or not isinstance(data, dict) or not data.get("data"):
        detail = said(_error_messages(errors), redactor.redact_text) if errors else None
        raise (detail or said("")).attach(
            SourceError(
                f"{host} did not return an introspection result (HTTP {status}"
                f"{': ' + detail.for_agent() if detail else ''}); check that the connector's base_url is the "
                "GraphQL endpoint and that introspection is enabled, or use 'graphql: {schema: file}'."
            )
        )
    try:
        schema = await anyio.to_thread.run_sync(build_schema_from_introspection, data, f"introspection of {host}")
    except SourceError as exc:
        # graphql-core's complaint quotes the answer's own names and descriptions.
        problem = said(exc, redactor.redact_text, max_chars=MAX_ERROR_CHARS)
        message = problem.text if not problem.withheld else f"the answer of {host} is not a schema; {WITHHELD}"
        raise problem.attach(SourceError(message)) from None
    digest = hashlib.sha256(json.dumps(data["data"], sort_keys=True).encode()).hexdigest()
    return schema, digest


def _error_messages(errors: Any) -> str:
    items = errors if isinstance(errors, list) else [errors]
    messages = [str(e.get("message")) if isinstance(e, dict) else str(e) for e in items[:5]]
    return "; ".join(messages)[:500]


@dataclass(frozen=True)
class GraphQLServices:
    """What sync needs for GraphQL sources: the schema cache, and for ``introspect: true`` the
    shared HTTP client and the connector's auth."""

    schemas: GraphQLSchemas
    http: httpx2.AsyncClient | None = None
    auth_for: AuthFor | None = None
    client_for: Callable[[ConnectorConfig, httpx2.Auth], httpx2.AsyncClient] | None = None
    """Picks the client per connector (an ``mtls`` one presents its certificate); else ``http``."""

    async def introspect_connector(self, cfg: ConnectorConfig, url: str) -> tuple[GraphQLSchema, str]:
        """``introspect`` for one connector, with its credential and its client (``sources.graphql.Introspect``).

        Raises:
            SourceError: this sync has no HTTP client or auth, or the introspection failed.
        """
        if self.http is None or self.auth_for is None:
            raise SourceError("introspection needs the running gateway's HTTP client; sync through the gateway")
        redactor = Redactor()
        auth = await self.auth_for(cfg, redactor.add)
        client = self.client_for(cfg, auth) if self.client_for else self.http
        return await introspect(client, url, auth=auth, headers=cfg.headers, timeout=cfg.timeout, redactor=redactor)
