"""``DiscoveryIndex``'s pruned scoring (``_best`` / ``_pruned``) gives exactly what scoring every
document gives: the same hits, in the same order, with the same floats, under any view and filter."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from mcp_gateway.discovery import DiscoveryIndex, _index
from mcp_gateway.discovery._rank import POOL
from mcp_gateway.sources.openapi import normalize_openapi
from mcp_gateway.vocabulary.model import Action, McpBinding
from scripts.bench_discover_data import OPENAPI_SPECS

SPECS = OPENAPI_SPECS
QUERIES = (
    "create an issue", "list pull requests", "get the authenticated user", "list my repositories",
    "add a collaborator to a repository", "list organization members", "get a user by username",
    "create a stripe charge", "refund a charge in stripe", "list customers", "cancel a subscription",
    "send a slack message", "post a message to a channel", "list channels", "update a webhook",
    "delete a file", "search for comment", "get release", "list secret", "create deployment",
    "Please create a new issue in our repository. It should describe the failing deploy. Then tell #general.",
)  # fmt: skip


def _load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def index() -> DiscoveryIndex:
    """GitHub, Stripe and Slack twice over (~3,700 actions): long enough postings for pruning to pay."""
    built = DiscoveryIndex()
    for slug, path in SPECS.items():
        document = _load(path)
        for copy in range(2):
            name = f"{slug}-{copy}"
            built.replace_connector(name, list(normalize_openapi(document, connector=name).actions))
    # Re-indexed last: its ids now follow every other segment's, leaving a gap where they were.
    built.replace_connector("github-0", list(built._segments["github-0"].actions))
    return built


def _both(
    index: DiscoveryIndex, query: str, connectors: set[str] | None = None, allow: Any = None, limit: int = POOL
) -> tuple[Any, Any, bool]:
    weighted = index._query_terms(query)
    visible = index._visible(connectors)
    pruned = index._pruned(index._lists(weighted, visible), limit) is not None
    full = index._top(index._score(weighted, visible), limit, allow)
    return index._best(weighted, visible, limit, allow), full, pruned


def test_pruned_hits_are_the_full_scorings(index: DiscoveryIndex) -> None:
    engaged = 0
    for query in QUERIES:
        best, full, pruned = _both(index, query)
        assert best == full, query
        engaged += pruned
    assert engaged >= len(QUERIES) // 2  # the pruned path is what these queries took


@pytest.mark.parametrize("limit", [1, 10, POOL, 200])
def test_pruned_hits_are_the_full_scorings_at_any_depth(index: DiscoveryIndex, limit: int) -> None:
    for query in QUERIES:
        best, full, _ = _both(index, query, limit=limit)
        assert best == full, (query, limit)


def test_pruned_hits_are_the_full_scorings_under_a_view_and_a_filter(index: DiscoveryIndex) -> None:
    def no_deletes(action: Action) -> bool:
        return "delete" not in action.path

    def rare(action: Action) -> bool:  # hides nearly everything: the window must widen
        return len(action.path) % 7 == 0

    for query in QUERIES:
        for connectors in (None, {"github-0", "stripe-1", "slack-0"}, {"stripe-0"}):
            for allow in (None, no_deletes, rare):
                best, full, _ = _both(index, query, connectors, allow)
                assert best == full, (query, connectors, allow)


def test_search_ranks_as_before_pruning(index: DiscoveryIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole search (second stage, named connectors included) with pruning off gives the same answer."""
    queries = (*QUERIES, "send a message in slack-1", "list customers in stripe-0")
    pruned = [index.find(query, limit=10) for query in queries]
    monkeypatch.setattr(DiscoveryIndex, "_pruned", lambda self, lists, k: None)
    assert [index.find(query, limit=10) for query in queries] == pruned


def _action(index: int, summary: str) -> Action:
    return Action(
        connector="tied",
        path=f"things.op_{index:03d}",
        summary=summary,
        input_schema={"type": "object", "properties": {}},
        risk="read",
        # An upstream tool: hundreds of HTTP operations sharing one summary would be read by their routes.
        binding=McpBinding(tool=f"op_{index:03d}"),
    )


def test_ties_at_the_cut_come_along(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many documents tied with the k-th best, and a common word that cannot decide: pruned or not,
    the ties are all candidates and break by name."""
    monkeypatch.setattr(_index, "_PRUNE_MIN", 0)
    actions = [_action(i, "list widgets" if i % 3 else "list gadgets and widgets") for i in range(120)]
    actions += [_action(200 + i, "list everything") for i in range(300)]
    index = DiscoveryIndex()
    index.replace_connector("tied", actions)
    for query in ("list widgets", "list gadgets", "widgets gadgets", "list list widgets"):
        for limit in (1, 5, 40, 100):
            best, full, _ = _both(index, query, limit=limit)
            assert best == full, (query, limit)
    assert _both(index, "list widgets", limit=5)[2]  # the common "list" was set aside
