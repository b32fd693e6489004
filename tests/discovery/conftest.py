"""Fixtures shared by the discovery tests."""

from __future__ import annotations

import anyio
import pytest

from mcp_gateway.discovery import DiscoveryIndex, EmbeddingsUnavailable
from mcp_gateway.discovery.dense import EmbeddingProvider
from mcp_gateway.discovery.hybrid import HybridSearch
from mcp_gateway.vocabulary.model import Action


@pytest.fixture(scope="module")
def provider() -> EmbeddingProvider:
    """The bundled model (skipped without the embeddings extra)."""
    try:
        from mcp_gateway.discovery.providers import local_provider

        return local_provider()
    except (EmbeddingsUnavailable, ImportError):
        pytest.skip("the embeddings extra is not installed")


def embedded(provider: EmbeddingProvider, slug: str) -> tuple[DiscoveryIndex, HybridSearch]:
    """The benchmark's API ``slug`` indexed and embedded with ``provider``."""
    from scripts.bench_discover_data import catalog

    return embedded_actions(provider, slug, list(catalog(slug)))


def embedded_actions(
    provider: EmbeddingProvider, slug: str, actions: list[Action]
) -> tuple[DiscoveryIndex, HybridSearch]:
    """``actions`` indexed and embedded with ``provider`` as connector ``slug``."""
    from mcp_gateway.discovery.dense import MemoryVectorStore

    index = DiscoveryIndex()
    index.replace_connector(slug, actions)
    search = HybridSearch(provider, MemoryVectorStore())
    anyio.run(search.embedder.refresh, slug, actions)
    return index, search


@pytest.fixture(scope="module")
def petstore(provider: EmbeddingProvider) -> tuple[DiscoveryIndex, HybridSearch]:
    """The Petstore description indexed and embedded with the bundled model (skipped without the extra)."""
    return embedded(provider, "petstore")
