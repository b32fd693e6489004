"""Hybrid ``discover``'s confidence with the bundled model over a real API description: a request the
catalog serves is sure however it is worded around, a question it does not answer is not."""

from __future__ import annotations

import anyio
import pytest

from mcp_gateway.discovery import DiscoveryIndex, _rank
from mcp_gateway.discovery.dense import EmbeddingProvider
from mcp_gateway.discovery.hybrid import MEAN_WEIGHT, SURE_FLOOR, HybridSearch, sure
from tests.discovery.conftest import embedded

pytestmark = pytest.mark.hybrid


def test_sure_weighs_the_best_cosine_and_the_mean_over_the_catalog() -> None:
    assert sure(SURE_FLOOR, 0.0)
    assert not sure(SURE_FLOOR - 0.01, 0.0)
    # A diluted best match (a long message) is sure when the query is near the catalog as a whole.
    assert sure(SURE_FLOOR - 0.05, 0.05 / MEAN_WEIGHT)
    assert not sure(SURE_FLOOR - 0.05, 0.04 / MEAN_WEIGHT)


def _confidence(found: tuple[DiscoveryIndex, HybridSearch], query: str, *, narrowed: bool = False) -> tuple[str, str]:
    index, search = found
    lexical = index.find(query, limit=_rank.POOL)
    vector = anyio.run(search.embedder.embed_query, query)
    result = search.rank(index, lexical, vector, allowed={"petstore"}, limit=5, narrowed=narrowed)
    return result.confidence, result.hits[0][0].qualified_name


@pytest.mark.parametrize(
    ("query", "action"),
    [
        ("add a new pet to the store", "petstore.add_pet"),
        (
            "So I've been going back and forth with my team about this all week and we finally agreed on what "
            "to do. Morning! I'm catching up on a backlog of small chores today and could use a hand. Add a new "
            "pet to the store. Thanks a lot, I really appreciate it! My manager wants a short summary afterwards, "
            "so keep track of what you did.",
            "petstore.add_pet",
        ),
        (
            "Context: I'm covering for a colleague who is out sick, so I don't know all the details of how they "
            "usually handle things. This came up in a customer call yesterday and it's been bugging me since. "
            "Log the user in. We've had a couple of issues with this in the past, so please double check before "
            "doing anything irreversible.",
            "petstore.login_user",
        ),
        ("dlete the pet with id 12", "petstore.delete_pet"),
    ],
)
def test_a_request_the_catalog_serves_is_sure(
    petstore: tuple[DiscoveryIndex, HybridSearch], query: str, action: str
) -> None:
    assert _confidence(petstore, query) == ("high", action)


@pytest.mark.parametrize(
    "query", ["who painted the Mona Lisa", "how do I make sourdough bread from scratch", "set a timer for ten minutes"]
)
def test_a_question_the_catalog_does_not_answer_is_not(
    petstore: tuple[DiscoveryIndex, HybridSearch], query: str
) -> None:
    assert _confidence(petstore, query)[0] == "low"


@pytest.mark.parametrize("query", ["delete a repository", "create an issue", "open a pull request"])
def test_inside_a_connector_named_a_request_it_cannot_serve_is_unsure(
    petstore: tuple[DiscoveryIndex, HybridSearch], query: str
) -> None:
    """An agent that asks the Petstore to "delete a repository" gets ``delete_pet`` first: its verb is all
    the two share, and that must not read as sure (the top hit may be destructive)."""
    assert _confidence(petstore, query, narrowed=True)[0] == "low"
    assert _confidence(petstore, "delete the pet with id 12", narrowed=True) == ("high", "petstore.delete_pet")
    assert _confidence(petstore, "remove the pet from the store", narrowed=True) == ("high", "petstore.delete_pet")


def test_a_connector_still_being_embedded_is_as_sure_as_its_words_make_it(provider: EmbeddingProvider) -> None:
    """A connector just added answers from the lexical side until its vectors exist: a request its words
    match well is not "nothing matches, rephrase" for want of a cosine."""
    from scripts.bench_discover_data import catalog

    index, search = embedded(provider, "petstore")
    index.replace_connector("stripe", list(catalog("stripe")))  # indexed, not embedded yet
    query = "create a customer in Stripe"
    lexical = index.find(query, limit=_rank.POOL)
    assert lexical.confidence == "high"
    vector = anyio.run(search.embedder.embed_query, query)
    result = search.rank(index, lexical, vector, allowed={"petstore"}, limit=5)
    assert result.hits[0][0].connector == "stripe" and result.confidence == "high"
    # Nonsense stays unsure either way.
    nonsense = "how do I make sourdough bread from scratch"
    lexical = index.find(nonsense, limit=_rank.POOL)
    vector = anyio.run(search.embedder.embed_query, nonsense)
    assert search.rank(index, lexical, vector, allowed={"petstore"}, limit=5).confidence == "low"
