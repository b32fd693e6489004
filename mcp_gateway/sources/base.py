"""What every source kind has in common: the ``Source`` protocol sync calls, and what it returns.

A source turns one connector's ``source:`` into catalog actions. Each kind is one class
in its own module (``OpenAPILoader``, ``PostmanLoader``, ``GraphQLLoader``, ``McpLoader``,
``HttpLoader``; ``WithRequestAction`` adds the generic request action to any of them); sync picks
the one for a connector's config and calls ``load``. A source does no store, credential or
execution I/O of its own: what it needs from the running gateway (listing an MCP server's tools,
introspecting a GraphQL endpoint) is handed to its constructor as a callable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..manifest import ConnectorConfig
from ..vocabulary.model import Action
from ._fingerprint import settings_digest

__all__ = ["EmptySource", "LoadContext", "Normalized", "Source"]


@dataclass(frozen=True)
class Normalized:
    """One connector's normalized catalog, and what tells whether it may have changed."""

    actions: list[Action]
    base_url: str | None
    """The base URL the source itself declares (OpenAPI ``servers``, Postman's common origin), or None."""
    fingerprint: str
    """Changes exactly when the actions may have changed: the source's content and the connector
    settings that shape actions (see ``_fingerprint``). Equal to ``LoadContext.cached``'s when
    the cached catalog was reused."""
    files: list[str]
    """Absolute paths of every local file read, the main one first (for change detection); empty otherwise."""


@dataclass(frozen=True)
class LoadContext:
    """What a source may consult besides the connector's own config."""

    resolve: Callable[[str], str]
    """A manifest reference as a URL or an absolute path (``Manifest.resolve``)."""
    cached: Normalized | None = None
    """The connector's stored catalog; a source returns it unchanged when its fingerprint still matches."""


class Source(Protocol):
    """One source kind's way from a connector's config to its actions."""

    async def load(self, cfg: ConnectorConfig, ctx: LoadContext) -> Normalized:
        """The connector's actions, reusing ``ctx.cached`` when nothing that shapes them changed.

        Raises:
            SourceError: the source cannot be read or normalized; the message says what to fix.
        """
        ...


@dataclass(frozen=True)
class EmptySource:
    """A connector without a ``source:`` (only a request action, if any)."""

    async def load(self, cfg: ConnectorConfig, ctx: LoadContext) -> Normalized:
        return Normalized([], None, settings_digest(cfg), [])
