"""Replaying use over a real API: after an agent called the right action for half of the Slack dev
intents, a reworded repeat of each finds it higher, and the other half (other actions) ranks as
before: the same first hits and top fives.

``tests/data/use_replay/slack.json`` pairs each dev intent of ``tests/data/intents/slack.json``
(``asked``) with a rewording written for this test (``again``) and the action the agent calls. The
ranking is ``discover``'s own (``HybridSearch`` with the bundled model, or lexical without it),
through the ``UseMemory`` the gateway uses, over a ``MemoryStore``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_gateway.core.use_memory import UseMemory
from mcp_gateway.discovery import DiscoveryIndex, EmbeddingsUnavailable, SearchResult
from mcp_gateway.discovery.hybrid import HybridSearch
from mcp_gateway.services.identity import Principal
from mcp_gateway.store.memory import MemoryStore
from mcp_gateway.vocabulary.clock import FixedClock
from scripts.bench_discover_data import catalog

pytestmark = pytest.mark.hybrid

ROWS: list[dict[str, str]] = json.loads(
    (Path(__file__).parents[1] / "data" / "use_replay" / "slack.json").read_text(encoding="utf-8")
)
AGENT = Principal("u", "agent")


class Replay:
    def __init__(self, dense: HybridSearch | None) -> None:
        self.actions = list(catalog("slack"))
        self.index = DiscoveryIndex()
        self.index.replace_connector("slack", self.actions)
        self.dense = dense
        self.store = MemoryStore()
        self.memory = UseMemory(self.store, FixedClock(), self.index, learn="agent", project="p", dense=dense)

    async def embed(self) -> None:
        await self.store.open()
        if self.dense is not None:
            await self.dense.embedder.refresh("slack", self.actions)

    async def ranked(self, query: str, limit: int) -> SearchResult:
        if self.dense is not None:
            return await self.dense.find(self.index, query, limit=limit)
        return self.index.find(query, limit=limit)

    async def discover(self, query: str, limit: int = 10) -> list[str]:
        """As ``Gateway.discover`` asks: the ranker's answer, and its wider pool when there are uses."""
        found = await self.memory.answer(AGENT, query, limit, functools.partial(self.ranked, query), lambda name: True)
        return [action.qualified_name for action, _ in found.hits]

    async def rank(self, query: str, action: str) -> int:
        """1-based, 11 when outside the first ten."""
        names = await self.discover(query)
        return names.index(action) + 1 if action in names else 11


async def replay(dense: HybridSearch | None) -> dict[str, Any]:
    run = Replay(dense)
    await run.embed()
    used, others = ROWS[::2], ROWS[1::2]
    taught = {row["action"] for row in used}
    unrelated = [row for row in others if row["action"] not in taught]
    queries = [(row["again"], row["action"]) for row in used]
    controls = [(q, row["action"]) for row in unrelated for q in (row["asked"], row["again"])]
    before = [await run.rank(q, a) for q, a in queries]
    control_before = [await run.rank(q, a) for q, a in controls]
    for row in used:
        if row["action"] in await run.discover(row["asked"]):
            await run.memory.called(AGENT, row["action"])  # the agent calls the right one of the answers
    after = [await run.rank(q, a) for q, a in queries]
    control_after = [await run.rank(q, a) for q, a in controls]
    return {"before": before, "after": after, "control_before": control_before, "control_after": control_after}


def _top(ranks: list[int], k: int) -> int:
    return sum(rank <= k for rank in ranks)


def _check(result: dict[str, Any]) -> None:
    before, after = result["before"], result["after"]
    # Reworded repeats: never lower, and more of them first.
    assert all(a <= b for a, b in zip(after, before, strict=True)), (before, after)
    assert _top(after, 1) > _top(before, 1) and sum(after) < sum(before), (before, after)
    # Unrelated queries (other actions, asked as written and reworded): as many first and in the
    # first five as before, none more than one place lower.
    controls = list(zip(result["control_before"], result["control_after"], strict=True))
    assert all(a <= b + 1 for b, a in controls), controls
    for k in (1, 5):
        assert _top(result["control_after"], k) == _top(result["control_before"], k), controls


def test_lexical_replay_lifts_reworded_repeats_and_leaves_the_rest() -> None:
    _check(anyio.run(replay, None))


def test_hybrid_replay_lifts_reworded_repeats_and_leaves_the_rest() -> None:
    try:
        from mcp_gateway.discovery.dense import MemoryVectorStore
        from mcp_gateway.discovery.providers import local_provider

        dense = HybridSearch(local_provider(), MemoryVectorStore())
    except (EmbeddingsUnavailable, ImportError):
        pytest.skip("the embeddings extra is not installed")
    _check(anyio.run(replay, dense))
