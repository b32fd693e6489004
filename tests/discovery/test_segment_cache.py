"""Segments kept between starts (issue 14, "start fast"): read back only for the same catalog, and
indistinguishable from a segment built now."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from mcp_gateway.discovery import DiscoveryIndex, SegmentCache, _index
from mcp_gateway.discovery._segment import Segment, build_segment
from mcp_gateway.vocabulary.model import Action, OpenAPIBinding


def action(connector: str, path: str, summary: str, **properties: dict[str, str]) -> Action:
    return Action(
        connector=connector,
        path=path,
        summary=summary,
        description=f"{summary}. Returns the ``{path}`` object.",
        input_schema={"type": "object", "properties": properties},
        risk="read",
        binding=OpenAPIBinding(method="GET", url="/" + path.replace(".", "/")),
    )


SHOP = [
    action("shop", "products.create", "Create a product", name={"type": "string", "description": "Its name"}),
    action("shop", "refunds.create", "Create a refund", charge={"type": "string"}),
    action("shop", "customers.cards.delete", "Delete a card of a customer"),
]
QUERIES = ("create a refund", "post a message", "delete card")
CHAT = [action("chat", "chat.post_message", "Sends a message to a channel", channel={"type": "string"})]


def same(kept: Segment, built: Segment) -> None:
    for f in fields(Segment):
        assert getattr(kept, f.name) == getattr(built, f.name), f.name


def test_a_kept_segment_equals_a_built_one_at_any_start(tmp_path: Path) -> None:
    cache = SegmentCache(tmp_path / "index")
    cache.save(build_segment("shop", 5, SHOP), "fp-1")
    for start in (0, 5, 1000):
        kept = cache.load("shop", "fp-1", start, SHOP)
        assert kept is not None
        same(kept, build_segment("shop", start, SHOP))


def test_only_the_same_catalog_is_read_back(tmp_path: Path) -> None:
    cache = SegmentCache(tmp_path / "index")
    cache.save(build_segment("shop", 0, SHOP), "fp-1")
    assert cache.load("shop", "fp-2", 0, SHOP) is None  # another fingerprint: the catalog changed
    assert cache.load("chat", "fp-1", 0, CHAT) is None  # another connector
    assert cache.load("shop", "fp-1", 0, SHOP[:2]) is None  # other actions under the same fingerprint
    for path in (tmp_path / "index").iterdir():
        path.write_bytes(b"not a segment")
    assert cache.load("shop", "fp-1", 0, SHOP) is None


def test_an_index_started_from_kept_segments_ranks_as_one_built_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def started(cache: SegmentCache | None) -> DiscoveryIndex:
        index = DiscoveryIndex(cache)
        index.replace_connector("chat", CHAT, fingerprint="c1")
        index.replace_connector("shop", SHOP, fingerprint="s1")
        return index

    first = started(SegmentCache(tmp_path / "index"))
    assert len(list((tmp_path / "index").iterdir())) == 2
    expected = {query: started(None).search(query, limit=5) for query in QUERIES}

    def no_build(*_: object) -> Segment:
        raise AssertionError("built, not read back")

    monkeypatch.setattr(_index, "build_segment", no_build)
    again = started(SegmentCache(tmp_path / "index"))
    for query in QUERIES:
        assert again.search(query, limit=5) == first.search(query, limit=5) == expected[query]
        assert expected[query]
