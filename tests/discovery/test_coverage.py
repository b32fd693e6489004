"""A message of several asks: the first hits cover each ask before a near-twin of one already placed."""

from __future__ import annotations

import anyio
import pytest

from mcp_gateway.discovery import DiscoveryIndex, _rank
from mcp_gateway.discovery._coverage import ASK_SPREAD, cover, scaled_relevance
from mcp_gateway.discovery.dense import EmbeddingProvider, Matrix
from mcp_gateway.discovery.hybrid import HybridSearch
from tests.discovery.conftest import embedded


def test_the_whole_messages_first_hit_stays_first() -> None:
    # Candidate 1 serves the second ask best, but the whole message's first hit keeps its place.
    assert cover([1.0, 0.2, 0.9], [[1.0, 0.0, 0.9], [0.0, 1.0, 0.0]], 3)[0] == 0


def test_an_open_asks_best_action_comes_before_a_near_twin_of_a_placed_hit() -> None:
    fused = [1.0, 0.95, 0.9, 0.0]  # 1 and 2: near-twins of 0; 3: only the second ask found it
    relevance = [[1.0, 0.95, 0.9, 0.0], [0.0, 0.05, 0.0, 1.0]]
    assert cover(fused, relevance, 2) == [0, 3]
    assert cover(fused, relevance, 4) == [0, 3, 1, 2]


def test_once_every_ask_is_served_the_fused_order_decides() -> None:
    fused = [1.0, 0.3, 0.9, 0.8]
    relevance = [[1.0, 0.0, 0.5, 0.5], [0.0, 1.0, 0.0, 0.0]]
    assert cover(fused, relevance, 4) == [0, 1, 2, 3]


def test_nothing_to_place() -> None:
    assert cover([], [[]], 5) == []
    assert cover([1.0], [[1.0]], 0) == []


def test_an_asks_relevance_is_scaled_over_its_own_best() -> None:
    cosines = [0.9, *[0.5] * ASK_SPREAD, 0.1]
    scaled = scaled_relevance(cosines)
    assert scaled[0] == 1.0 and scaled[1] == 0.0 and scaled[-1] == 0.0
    # Near-equal cosines are noise: scaled over at least 0.1, not blown up to 0..1.
    assert scaled_relevance([0.52, 0.5, 0.5])[0] == pytest.approx(0.2)


@pytest.fixture(scope="module")
def slack(provider: EmbeddingProvider) -> tuple[DiscoveryIndex, HybridSearch]:
    """Slack's Web API description indexed and embedded with the bundled model (skipped without the extra)."""
    return embedded(provider, "slack")


@pytest.mark.hybrid
def test_each_ask_of_a_message_reaches_the_first_hits(slack: tuple[DiscoveryIndex, HybridSearch]) -> None:
    index, search = slack
    message = "Archive the #old-marketing channel. Also, set my status to away and snooze my notifications for an hour."
    lexical = index.find(message, limit=_rank.POOL)
    vector, each = anyio.run(search.query_vectors, index, message)
    assert each is not None and len(each) == 3

    def first_five(asks: Matrix | None) -> list[str]:
        found = search.rank(index, lexical, vector, allowed={"slack"}, limit=5, asks=asks)
        return [action.qualified_name for action, _ in found.hits]

    covered, whole = first_five(each), first_five(None)
    assert covered[0] == whole[0]
    assert "slack.users_set_presence" in covered
    assert "slack.users_set_presence" not in whole  # the message as one query leaves the status ask out
    found = anyio.run(search.find, index, message)
    assert "slack.users_set_presence" in [action.qualified_name for action, _ in found.hits[:5]]
