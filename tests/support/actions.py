"""Catalog actions for ranking tests: an OpenAPI action whose parameters are the keyword arguments, and an
index of such actions."""

from __future__ import annotations

from typing import Any

from mcp_gateway.discovery import DiscoveryIndex
from mcp_gateway.vocabulary.model import Action, OpenAPIBinding, Risk


def catalog_action(
    connector: str,
    path: str,
    summary: str = "",
    description: str = "",
    *,
    method: str = "GET",
    risk: Risk = "read",
    **properties: Any,
) -> Action:
    return Action(
        connector=connector,
        path=path,
        summary=summary,
        description=description,
        input_schema={"type": "object", "properties": properties},
        risk=risk,
        binding=OpenAPIBinding(method=method, url="/" + path.replace(".", "/")),
    )


def catalog_index(connectors: dict[str, list[tuple[str, str]]]) -> DiscoveryIndex:
    """An index of ``{connector: [(path, summary), ...]}``, each a ``catalog_action``."""
    index = DiscoveryIndex()
    for slug, actions in connectors.items():
        index.replace_connector(slug, [catalog_action(slug, path, summary) for path, summary in actions])
    return index
