"""The GraphQL schemas the executor checks an agent's ``__select`` against, by connector.

Apart from ``sources/graphql.py`` so that the gateway can hold the cache without importing
graphql-core (a heavy import): a gateway with no GraphQL connector, or one whose agents never override a
selection, never parses a schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from ..vocabulary.errors import SourceError

if TYPE_CHECKING:
    from graphql import GraphQLSchema

__all__ = ["GraphQLSchemas"]


class GraphQLSchemas:
    """Parsed schemas by connector, for checking an agent's ``__select`` against the real types.

    Sync registers each GraphQL connector: a schema built from introspection is kept (it cannot
    be read again without the network), a schema file is only remembered by path and parsed on
    the first ``__select`` (a large SDL such as GitHub's is slow to parse and big in memory, which a warm restart and an
    agent that never overrides the selection should not pay).
    """

    def __init__(self) -> None:
        self._loaded: dict[str, GraphQLSchema] = {}
        self._files: dict[str, str] = {}
        self._lock = anyio.Lock()

    def put(self, slug: str, schema: GraphQLSchema) -> None:
        self._files.pop(slug, None)
        self._loaded[slug] = schema

    def put_file(self, slug: str, path: str) -> None:
        if self._files.get(slug) != path:
            self._loaded.pop(slug, None)
        self._files[slug] = path

    def drop(self, slug: str) -> None:
        self._loaded.pop(slug, None)
        self._files.pop(slug, None)

    def get(self, slug: str) -> GraphQLSchema | None:
        """The schema if it is in memory already (no I/O)."""
        return self._loaded.get(slug)

    def known(self, slug: str) -> bool:
        return slug in self._loaded or slug in self._files

    async def load(self, slug: str) -> GraphQLSchema | None:
        """The schema, parsing a registered file in a worker thread the first time; None if unknown
        or unreadable now (the upstream still validates the operation itself)."""
        async with self._lock:
            if slug in self._loaded:
                return self._loaded[slug]
            path = self._files.get(slug)
            if path is None:
                return None
            try:
                schema = await anyio.to_thread.run_sync(_read_schema, path)
            except SourceError:
                return None
            self._loaded[slug] = schema
            return schema


def _read_schema(path: str) -> GraphQLSchema:
    from .graphql import read_schema  # graphql-core is imported here, in the worker thread, on first use

    return read_schema(path)
