"""A request that names a product nothing searched serves ("a Spotify playlist" over YouTube) is unsure,
and says which product is missing; naming a served product, or one the catalog mentions, changes nothing."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from mcp_gateway.discovery import LOW_CONFIDENCE_HINT, DiscoveryIndex, _rank
from mcp_gateway.discovery._products import named_products
from mcp_gateway.discovery.hybrid import HybridSearch
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.runtime import Settings, open_gateway
from mcp_gateway.services.identity import OPERATOR
from tests.support.actions import catalog_index

VIDEOS = {
    "videos": [
        ("playlists.insert", "Create a playlist"),
        ("playlists.list", "List the playlists of a channel"),
        ("videos.upload", "Upload a video"),
        ("videos.list", "List videos"),
    ]
}


def test_products_are_found_by_name_and_everyday_words_are_not() -> None:
    assert named_products("start a Spotify playlist, then post a tweet about it") == {
        "spotify": "Spotify",
        "tweet": "Twitter",
    }
    assert named_products("what's the square root of 1764? zoom in on the box") == {}
    # What the request carries is not where it happens.
    assert named_products("post the GitHub PR link and attach the Figma file") == {}
    assert named_products("share the YouTube video on Spotify") == {"youtube": "YouTube", "spotify": "Spotify"}


def test_a_request_for_a_product_nothing_serves_is_unsure_and_says_which() -> None:
    index = catalog_index(VIDEOS)
    assert index.find("create a playlist for running").confidence == "high"
    found = index.find("create a Spotify playlist for running")
    assert found.hits and found.hits[0][0].qualified_name == "videos.playlists.insert"
    assert found.confidence == "low"
    assert found.unserved == ("Spotify",)
    assert found.hint is not None and "Spotify" in found.hint and found.hint != LOW_CONFIDENCE_HINT


def test_a_product_named_in_a_long_messages_context_is_not_its_request() -> None:
    index = catalog_index(VIDEOS)
    message = (
        "Our marketing team used to keep every campaign video in a Dropbox folder and a Spotify playlist "
        "for the background music, which got messy last quarter. Could you create a playlist for the "
        "launch clips?"
    )
    assert index.find(message).unserved == ()
    assert index.find(message.replace("create a playlist", "create a Spotify playlist")).unserved == ("Spotify",)


def test_a_served_product_is_not_missing() -> None:
    # By the connector's slug, by a word of its actions, or beside the product that is served.
    by_slug = catalog_index({"spotify": VIDEOS["videos"]})
    assert by_slug.find("create a Spotify playlist").confidence == "high"
    mentioned = catalog_index({"videos": [*VIDEOS["videos"], ("shares.create", "Share a video to Instagram")]})
    assert mentioned.find("create an Instagram playlist").unserved == ()
    both = catalog_index({"videos": VIDEOS["videos"], "spotify": [("tracks.list", "List tracks")]})
    assert both.find("copy the Spotify playlist to a new playlist in videos").unserved == ()
    # Or by what the manifest says the connector is: an upstream whose tools never name their product.
    named = catalog_index({"music": VIDEOS["videos"]})
    assert named.find("create a Spotify playlist").unserved == ("Spotify",)
    named.name_connectors({"music": "Tunes spotify Our Spotify account"})
    assert named.find("create a Spotify playlist").confidence == "high"
    # The same question about a guessed name's head (``spotify.playlists.create``), over some connectors.
    assert by_slug.products_missing("spotify") == () and named.products_missing("spotify") == ()
    assert both.products_missing("spotify", ["videos"]) == ("Spotify",)
    assert both.products_missing("repos") == ()  # no product named


def test_a_product_name_is_never_repaired_into_a_catalog_word() -> None:
    index = catalog_index({"people": [("users.list", "List users"), ("users.get", "Get a user")]})
    assert index.corrected("book a Lyft to the airport") == "book a Lyft to the airport"  # not "left"
    assert index.corrected("lsit usres") == "list users"


@pytest.mark.hybrid
def test_hybrid_answers_are_unsure_for_a_product_nothing_serves(petstore: tuple[DiscoveryIndex, HybridSearch]) -> None:
    index, search = petstore

    def answer(query: str) -> tuple[str, str | None]:
        lexical = index.find(query, limit=_rank.POOL)
        vector = anyio.run(search.embedder.embed_query, query)
        found = search.rank(index, lexical, vector, allowed={"petstore"}, limit=5)
        return found.confidence, found.hint

    assert answer("add a new pet to the store") == ("high", None)
    confidence, hint = answer("add a new pet to my Shopify store")
    assert confidence == "low" and hint is not None and "Shopify" in hint


MANIFEST = """
project: products
connectors:
  - slug: tracker
    name: {name}
    base_url: http://127.0.0.1:9
    source:
      http:
        actions:
          - {{path: issues.create, method: POST, url: /issues, summary: Create an issue}}
          - {{path: issues.list, method: GET, url: /issues, summary: List issues}}
"""


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_the_manifest_says_which_product_a_connector_is(tmp_path: Path, anyio_backend: str) -> None:
    env = {"MCP_GATEWAY_MASTER_KEY": "products-master-key-0123456789abcdef", "MCP_GATEWAY_DISCOVERY_MODE": "lexical"}
    for name, confidence in (("Jira", "high"), ("Issues", "low")):
        manifest = parse_manifest(MANIFEST.format(name=name), base_dir=tmp_path)
        settings = Settings(manifest_path=None, state_dir=tmp_path / name, env=env)
        async with open_gateway(settings, manifest=manifest, embed=False) as gw:
            found = await gw.discover(OPERATOR, "create a Jira issue for the login crash")
        assert found.results[0].name == "tracker.issues.create"
        assert found.confidence == confidence, name
