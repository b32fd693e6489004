"""Discovery v2 (issue 11) behaviours of the index: long queries, filler words, objects over verbs,
connector priors, readable summaries, no boilerplate, confidence, near-twins, guessed names."""

from __future__ import annotations

import pytest

from mcp_gateway.discovery import DiscoveryIndex, summary_of
from mcp_gateway.discovery._index import _SHAPE_WEIGHT, _SYNONYM_WEIGHT, LOW_CONFIDENCE_HINT, MAX_QUERY_CHARS
from mcp_gateway.discovery._text import stem
from mcp_gateway.vocabulary.model import Action
from tests.support.actions import catalog_action as action
from tests.support.actions import catalog_index


@pytest.fixture
def index() -> DiscoveryIndex:
    built = DiscoveryIndex()
    built.replace_connector(
        "shop",
        [
            action("shop", "products.create", "Create a product", name={"type": "string"}),
            action("shop", "products.delete", "Delete a product"),
            action("shop", "products.update", "Update a product"),
            action("shop", "refunds.create", "Create a refund", charge={"type": "string"}),
            action("shop", "customers.cards.create", "Create a card for a customer"),
            action("shop", "customers.cards.delete", "Delete a card of a customer"),
        ],
    )
    built.replace_connector(
        "chat",
        [
            action("chat", "stars.add", "Add a star to an item"),
            action("chat", "chat.post_message", "Sends a message to a channel", channel={"type": "string"}),
            action("chat", "chat.me_message", "Share a me message into a channel"),
            action("chat", "users.get_presence", "Gets user presence information"),
            action("chat", "reminders.add", "Creates a reminder"),
        ],
    )
    return built


def names(hits: list[tuple[Action, float]]) -> list[str]:
    return [hit.qualified_name for hit, _ in hits]


def test_a_7000_character_query_is_searched_not_refused(index: DiscoveryIndex) -> None:
    query = "Create a product called Premium T-shirt in our catalog. " + "Some unrelated context follows. " * 230
    assert 7000 <= len(query) <= MAX_QUERY_CHARS
    found = index.find(query)
    assert names(found.hits)[0] == "shop.products.create"


def test_the_first_sentence_outweighs_the_rest(index: DiscoveryIndex) -> None:
    query = "Delete the product we no longer sell. Later we may create a refund or post a message about it."
    assert names(index.search(query, limit=1)) == ["shop.products.delete"]


def test_queries_past_the_cap_are_cut_not_refused(index: DiscoveryIndex) -> None:
    assert names(index.search("create a product " + "x" * 20_000, limit=1)) == ["shop.products.create"]


@pytest.mark.parametrize("query", ["me", "my", "please", "remind me please", "the me"])
def test_filler_words_and_pronouns_do_not_match_action_names(index: DiscoveryIndex, query: str) -> None:
    assert "chat.chat.me_message" not in names(index.search(query, limit=10))


def test_an_action_naming_the_object_beats_one_sharing_only_the_verb(index: DiscoveryIndex) -> None:
    top = names(index.search("add 'Premium T-shirt' to our product catalog", limit=2))
    assert top[0] == "shop.products.create", top


def test_the_verb_tells_near_twins_apart(index: DiscoveryIndex) -> None:
    assert names(index.search("remove an old credit card of a customer", limit=1)) == ["shop.customers.cards.delete"]


def test_a_connector_named_in_the_query_is_a_prior_not_a_filter(index: DiscoveryIndex) -> None:
    assert names(index.search("add a reminder in chat", limit=1)) == ["chat.reminders.add"]
    # Named but not matching: other connectors still answer.
    assert "shop.refunds.create" in names(index.search("create a refund in chat", limit=5))


def test_a_connector_whose_slug_has_several_words_is_named_by_them_in_a_row() -> None:
    built = DiscoveryIndex()
    for slug in ("caldav", "google-calendar"):
        built.replace_connector(slug, [action(slug, "events.create", "Create an event")])
    for query in ("add the dentist to my Google Calendar", "googlecalendar: add an event", "in google-calendar"):
        assert built.find(query).named == frozenset({"google-calendar"}), query
    assert names(built.search("add an event in Google Calendar", limit=1)) == ["google-calendar.events.create"]
    # Its words apart, or in another order, name nothing.
    for query in ("a google search for the calendar", "calendar google"):
        assert built.find(query).named == frozenset(), query


def test_make_sure_asks_to_make_nothing() -> None:
    built = catalog_index(
        {
            "files": [
                ("permissions.delete", "Delete a permission on a file"),
                ("shortcuts.create", "Create a shortcut to a file"),
            ]
        }
    )
    query = "make sure Bob can no longer see the file"
    assert names(built.search(query, limit=1)) == ["files.permissions.delete"]
    # "make" read as a request to create something puts the create first.
    assert names(built.search(query.replace("make sure", "make"), limit=1)) == ["files.shortcuts.create"]


def test_an_issue_key_says_the_request_is_about_an_issue() -> None:
    built = catalog_index(
        {
            "files": [("comments.create", "Add a comment to a file")],
            "tracker": [
                ("comments.add", "Add a comment to an issue"),
            ],
        }
    )
    assert names(built.search("add a comment on OPS-3", limit=1)) == ["tracker.comments.add"]
    # The key is what the request acts on: "issue" weighs as half a written word, more than a synonym does.
    terms = built._query_terms("assign PAY-12 to mikael")
    assert terms[stem("issue")] == _SHAPE_WEIGHT > _SYNONYM_WEIGHT
    assert stem("issue") not in built._query_terms("assign UTF-8 to mikael")
    # A standard's name is no issue key, and nothing then tells the two apart but their order.
    assert names(built.search("add a comment on UTF-8", limit=1)) == ["files.comments.create"]


def test_a_nonsense_query_gives_low_confidence_and_a_hint(index: DiscoveryIndex) -> None:
    for query in ("xyzzy plugh frobnicate", "bake a chocolate cake for grandma"):
        found = index.find(query)
        assert found.confidence == "low" and found.hint == LOW_CONFIDENCE_HINT, query
    good = index.find("delete a product")
    assert good.confidence == "high" and good.hint is None


def test_near_twins_are_grouped_side_by_side(index: DiscoveryIndex) -> None:
    found = index.find("product", limit=10)
    twins = found.twins["shop.products.create"]
    assert set(twins) == {"shop.products.delete", "shop.products.update"}
    top = names(found.hits)
    positions = sorted(top.index(name) for name in ["shop.products.create", *twins])
    assert positions == list(range(positions[0], positions[0] + 3))


def test_bare_route_summaries_are_made_readable() -> None:
    bare = action("wise", "rates.get_rates", "GET /v1/rates")
    assert summary_of(bare) == "list rates"
    nested = action("stripe", "x", "POST /v1/customers/{customer}/sources")
    assert summary_of(nested) == "create customers sources"
    # Postman: the description's first line only repeats the route.
    repeated = action("wise", "x", "GET /account-requirements", "GET /account-requirements\n\nMore text.")
    assert summary_of(repeated) == "list account requirements"
    described = action("wise", "x", "GET /v1/rates", "Current exchange rates. Use them to price a transfer.")
    assert summary_of(described) == "Current exchange rates."
    described = action("wise", "b", "GET /borderless-accounts", "Get Accounts")
    assert summary_of(described) == "Get Accounts"


def test_the_gateways_boilerplate_is_never_indexed() -> None:
    boilerplate = "Arguments you omit are sent with their default (the collection's value); pass null to leave one out."
    index = DiscoveryIndex()
    index.replace_connector(
        "wise",
        [
            action("wise", "a.statement", "GET /statement", f"Get account statement\n\n{boilerplate}"),
            action("wise", "b.other", "Other thing"),
        ],
    )
    assert summary_of(index.get("wise.a.statement")) == "Get account statement"  # type: ignore[arg-type]
    assert index.search("pass null to leave one out omit default collection value") == []


@pytest.mark.parametrize(
    "guess", ["chat.chat.postMessage", "chat.chat_postMessage", "Chat.Chat.Post.Message", "chat.chat_post_message"]
)
def test_guessed_names_differing_by_dots_case_or_camel_case_resolve_directly(index: DiscoveryIndex, guess: str) -> None:
    found = index.resolve(guess)
    assert found is not None and found.qualified_name == "chat.chat.post_message"
    assert index.suggest(guess, limit=1)[0].qualified_name == "chat.chat.post_message"


def test_slack_style_guess_resolves_against_a_flat_path() -> None:
    index = DiscoveryIndex()
    index.replace_connector("slack", [action("slack", "chat_post_message", "Sends a message")])
    found = index.resolve("slack.chat.postMessage")
    assert found is not None and found.qualified_name == "slack.chat_post_message"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("show the new orders", "shop.orders.list"),
        ("show all open tickets", "shop.tickets.list"),
        # As verbs they still ask to make one.
        ("new order", "shop.orders.create"),
        ("open a ticket", "shop.tickets.create"),
    ],
)
def test_open_and_new_describing_a_thing_ask_for_no_create(query: str, expected: str) -> None:
    built = catalog_index(
        {
            "shop": [
                ("orders.create", "Create an order"),
                ("orders.list", "List orders"),
                ("tickets.create", "Create a ticket"),
                ("tickets.list", "List tickets"),
            ]
        }
    )
    assert names(built.search(query, limit=1)) == [expected]
