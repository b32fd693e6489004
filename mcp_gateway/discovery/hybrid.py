"""Hybrid ``discover``: the lexical index fused with dense retrieval, and the vectors kept up to date.

``HybridSearch`` is what the gateway holds when hybrid discovery is on (the ``embeddings`` extra is
installed, or an OpenAI-compatible endpoint is configured). ``schedule(slug, actions)`` is called by
``Catalogs`` right after it re-indexes a connector lexically; ``run()``, a background task of
``runtime.open_gateway``, embeds what was scheduled through ``DenseEmbedder.refresh`` (store first,
so a restart or another instance embeds nothing it already has; the provider runs in a worker thread
or on a remote endpoint, never on the event loop). Until a connector's vectors are in, ``find``
answers lexically for it.

``find`` takes the lexical pool (``DiscoveryIndex.find``), the dense top hits over every connector
the caller may see, fuses them by score (``dense.hybrid``) and puts near-twins side by side again.
Confidence is low only when neither side found anything convincing: the lexical coverage is under
its floor and the best cosine under ``DENSE_FLOOR``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence

import anyio

from ..errors import GatewayError
from ..model import Action
from . import _rank
from ._index import LOW_CONFIDENCE_HINT, DiscoveryIndex, SearchResult, _group_twins
from .dense import DenseEmbedder, EmbeddingProvider, Matrix, VectorStore, hybrid

__all__ = ["DENSE_FLOOR", "HybridSearch", "discovery_status"]

logger = logging.getLogger(__name__)

DENSE_FLOOR = 0.35
"""A best cosine at or above this (all-MiniLM-L6-v2 scale) counts as a real match even when the query
shares no word with the action; gibberish and off-topic queries stay well under it."""


def discovery_status(search: HybridSearch | None) -> str:
    """What ``connectors``, ``/healthz`` and the start-up log say about ranking."""
    return "discovery: lexical only" if search is None else search.status()


class HybridSearch:
    """Dense retrieval beside a ``DiscoveryIndex``: scheduling, background embedding, fused search."""

    def __init__(self, provider: EmbeddingProvider, store: VectorStore, *, label: str | None = None) -> None:
        self.embedder = DenseEmbedder(provider, store)
        self.label = label or provider.model
        """The model as the status line names it (never a key: the endpoint's URL at most)."""
        self._pending: dict[str, Sequence[Action]] = {}
        self._wake = anyio.Event()
        self._idle = anyio.Event()
        self._idle.set()
        self._connectors: set[str] = set()

    # -- upkeep ------------------------------------------------------------------------------------

    def schedule(self, slug: str, actions: Sequence[Action]) -> None:
        """Connector ``slug`` now has these actions: (re-)embed them in the background (none: drop it)."""
        if actions:
            self._connectors.add(slug)
        else:
            self._connectors.discard(slug)
            self.embedder.remove(slug)
        self._pending[slug] = actions
        self._idle = anyio.Event() if self._idle.is_set() else self._idle
        self._wake.set()

    async def run(self) -> None:
        """Embed scheduled connectors one after another, until cancelled. A failure is logged and the
        connector keeps answering lexically (the next sync schedules it again)."""
        while True:
            if not self._pending:
                self._idle.set()
                await self._wake.wait()
                self._wake = anyio.Event()
                continue
            slug = next(iter(self._pending))
            actions = self._pending.pop(slug)
            if not actions:
                continue
            try:
                embedded = await self.embedder.refresh(slug, actions)
            except (GatewayError, OSError, ValueError) as exc:
                logger.warning("discovery: could not embed %s (it answers lexically meanwhile): %s", slug, exc)
                continue
            logger.info("discovery: %s has its vectors (%d embedded anew, %d actions)", slug, embedded, len(actions))

    async def settled(self) -> None:
        """Wait until everything scheduled so far is embedded (or failed). For tests and benchmarks."""
        await self._idle.wait()

    def status(self) -> str:
        ready = sum(1 for slug in self._connectors if self.embedder.index.ready(slug))
        return f"discovery: hybrid ({self.label}; {ready} of {len(self._connectors)} connectors embedded)"

    # -- search ------------------------------------------------------------------------------------

    async def find(
        self,
        index: DiscoveryIndex,
        query: str,
        *,
        limit: int = 10,
        connectors: Collection[str] | None = None,
        allow: Callable[[Action], bool] | None = None,
    ) -> SearchResult:
        """``index.find`` fused with dense retrieval over ``connectors`` (None: all)."""
        dense = self.embedder.index
        allowed = dense.connectors if connectors is None else dense.connectors & set(connectors)
        if not allowed:
            return index.find(query, limit=limit, connectors=connectors, allow=allow)
        lexical = index.find(query, limit=max(limit, _rank.POOL), connectors=connectors, allow=allow)
        try:
            vector = await self.embedder.embed_query(query)
        except (GatewayError, OSError, ValueError) as exc:
            logger.warning("discovery: query embedding failed, answering lexically: %s", exc)
            return index.find(query, limit=limit, connectors=connectors, allow=allow)
        return self.rank(index, lexical, vector, allowed=allowed, allow=allow, limit=limit)

    def rank(
        self,
        index: DiscoveryIndex,
        lexical: SearchResult,
        vector: Matrix,
        *,
        allowed: Collection[str],
        allow: Callable[[Action], bool] | None = None,
        limit: int = 10,
    ) -> SearchResult:
        """The fusion itself, for a lexical pool and the query's vector (``find`` minus the embedding;
        the quality benchmark calls it directly)."""
        dense = self.embedder.index
        fused = hybrid(
            lexical.hits, dense, vector, lookup=index.get, allowed_connectors=allowed, allow=allow, limit=limit
        )
        best_cosine = max(dense.scores(vector, [a.qualified_name for a, _ in fused[:3]]).values(), default=0.0)
        low = not fused or (lexical.confidence == "low" and best_cosine < DENSE_FLOOR)
        ordered, twins = _group_twins(fused)
        return SearchResult(ordered, "low" if low else "high", LOW_CONFIDENCE_HINT if low else None, twins)
