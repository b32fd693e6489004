"""Which executor runs an action: one per binding kind, chosen by a ``match`` over the closed set of
bindings, so a new binding kind fails the type check here until it has an executor.

The HTTP-like kinds (``openapi``, ``http``, ``postman``) share one HTTP executor, which also owns
the ``mtls`` connectors' clients; ``graphql`` and the generic ``request`` action send through it.
``mcp`` runs on the upstream MCP session pool the runtime opens (absent in a gateway built without one).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, assert_never

import httpx2

from ..auth import MtlsClients
from ..execution.executor import Executor, HttpExecutor
from ..execution.mcp_sessions import McpExecutor
from ..execution.request_action import RequestExecutor
from ..execution.tls_trust import TrustedClients
from ..sources.graphql_schemas import GraphQLSchemas
from ..vocabulary.model import (
    Binding,
    GraphQLBinding,
    HttpBinding,
    McpBinding,
    OpenAPIBinding,
    PostmanBinding,
    RequestBinding,
)

if TYPE_CHECKING:
    from ..execution.graphql_call import GraphQLExecutor

__all__ = ["Executors"]


class Executors:
    """The executors of one gateway, by binding kind.

    Args:
        resolve: resolves a path in the manifest in force (a connector's relative ``ca_file``).
        mcp: the upstream MCP session pool; None in a gateway that cannot run ``mcp`` actions.
    """

    def __init__(
        self,
        http: httpx2.AsyncClient,
        schemas: GraphQLSchemas,
        *,
        resolve: Callable[[str], str],
        mcp: McpExecutor | None = None,
    ) -> None:
        self.http = HttpExecutor(
            http, client_certificates=MtlsClients(resolve=resolve), trusted=TrustedClients(resolve=resolve)
        )
        self._shared = http
        self._schemas = schemas
        self.request = RequestExecutor(self.http)
        self.mcp = mcp

    @cached_property
    def graphql(self) -> GraphQLExecutor:
        """Made on the first GraphQL action: its module imports graphql-core, which a gateway without
        GraphQL connectors never needs."""
        from ..execution.graphql_call import GraphQLExecutor

        return GraphQLExecutor(self._shared, self._schemas, client_for=self.http.client_for)

    def for_binding(self, binding: Binding) -> Executor | None:
        """The executor of ``binding``'s kind; None when this gateway has none for it (``mcp`` without a pool)."""
        match binding:
            case OpenAPIBinding() | HttpBinding() | PostmanBinding():
                return self.http
            case GraphQLBinding():
                return self.graphql
            case RequestBinding():
                return self.request
            case McpBinding():
                return self.mcp
            case _:
                assert_never(binding)

    async def aclose(self) -> None:
        """Close the clients opened here (mTLS); the shared client and the MCP pool are the caller's."""
        await self.http.aclose()
