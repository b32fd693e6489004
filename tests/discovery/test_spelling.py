"""Typos repaired against the catalog's words: a typo'd query finds its action, a real word is never changed."""

from __future__ import annotations

from functools import partial

import pytest

from mcp_gateway.discovery import DiscoveryIndex
from mcp_gateway.discovery._spelling import correction, edits, english_words, slip_rank
from tests.support.actions import catalog_action, catalog_index

action = partial(catalog_action, method="POST")


@pytest.fixture
def index() -> DiscoveryIndex:
    built = DiscoveryIndex()
    built.replace_connector(
        "calendar",
        [
            action("calendar", "meetings.schedule", "Schedule a meeting", start={"type": "string"}),
            action("calendar", "meetings.cancel", "Cancel a meeting"),
            action("calendar", "events.list", "List upcoming events"),
            action("calendar", "contacts.create", "Create a contact", email={"type": "string"}),
        ],
    )
    built.replace_connector(
        "shop",
        [
            action("shop", "customers.create", "Create a customer"),
            action("shop", "customers.delete", "Delete a customer"),
            action("shop", "payments.refund", "Refund a payment"),
            action("shop", "schedules.list", "List payment schedules"),
        ],
    )
    return built


def first(index: DiscoveryIndex, query: str) -> str:
    return index.search(query, limit=5)[0][0].qualified_name


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("shedule a meetng for tmorrow", "calendar.meetings.schedule"),
        ("shedule the meeting", "calendar.meetings.schedule"),
        ("refnud a paymnet", "shop.payments.refund"),
        ("delte a custmoer", "shop.customers.delete"),
        ("add a custmer", "shop.customers.create"),
    ],
)
def test_a_typod_query_ranks_the_right_action_first(index: DiscoveryIndex, query: str, expected: str) -> None:
    assert first(index, query) == expected
    # Each one misses unrepaired: another action first, or none at all.
    unrepaired = index._search(query, 5, None, None)[0]
    assert not unrepaired or unrepaired[0][0].qualified_name != expected


def test_without_repair_those_typos_would_miss() -> None:
    # The repair is what finds them: the same words, unrepaired, match no action at all.
    built = DiscoveryIndex()
    built.replace_connector("calendar", [action("calendar", "meetings.schedule", "Schedule a meeting")])
    assert built.corrected("shedule a meetng") == "schedule a meeting"
    assert built._search("shedule meetng", 5, None, None)[0] == []


def test_a_word_of_the_catalog_is_never_corrected(index: DiscoveryIndex) -> None:
    # "schedules" is one letter from "schedule", "contact" from "contacts": both are catalog words as written.
    for query in ("list payment schedules", "schedule a contact", "events", "customer refund"):
        assert index.corrected(query) == query
    # A word the catalog knows only by its index term (a plural, a verb form) is not touched either.
    assert index.corrected("cancelled meetings, refunding customers") == "cancelled meetings, refunding customers"


def test_a_word_cut_short_within_its_stem_gets_its_whole_word(index: DiscoveryIndex) -> None:
    # "creat" and "delet" already match "create" and "delete" by their index term; the dense side reads the
    # text, and gets the whole word.
    assert index.corrected("creat a contact, delet a customer") == "create a contact, delete a customer"
    # Only to a word of the same term: "payed" is one letter from "paged", which is another word.
    built = DiscoveryIndex()
    built.replace_connector(
        "billing",
        [action("billing", "invoices.pay", "Pay an invoice"), action("billing", "pages.get", "Get paged results")],
    )
    assert built.corrected("payed invoices") == "payed invoices"


def test_a_real_english_word_the_catalog_lacks_is_not_turned_into_a_catalog_word(index: DiscoveryIndex) -> None:
    if not english_words():
        pytest.skip("the bundled model's word list is not installed")
    # "contract" is one letter from "contact"; "events" would be one from "event"/"vents": real words stay.
    assert index.corrected("sign the contract") == "sign the contract"
    assert index.corrected("remove the intern from payroll") == "remove the intern from payroll"


def test_a_word_of_everyday_work_with_software_is_not_turned_into_a_catalog_word() -> None:
    if not english_words():
        pytest.skip("the bundled model's word list is not installed")
    # The tokenizer's whole words miss "typo", "login", "tweak": "typo" was repaired to the catalog's "type".
    tracker = DiscoveryIndex()
    tracker.replace_connector(
        "tracker",
        [action("tracker", "issues.set_type", "Set the type of an issue"), action("tracker", "logs.list", "List logs")],
    )
    assert tracker.corrected("fix the typo on the login page") == "fix the typo on the login page"
    assert tracker.corrected("tweak the frontend") == "tweak the frontend"
    assert tracker.corrected("set the tpye of the issue") == "set the type of the issue"  # still repaired


def test_identifiers_short_words_and_casing(index: DiscoveryIndex) -> None:
    # camelCase is an identifier typed on purpose; three letters are too few to guess from.
    assert index.corrected("getMeetng") == "getMeetng"
    assert index.corrected("mtg") == "mtg"
    # Capitals are kept on the repaired word.
    assert index.corrected("Shedule a MEETNG") == "Schedule a MEETING"


def test_a_quoted_name_or_value_is_as_meant(index: DiscoveryIndex) -> None:
    # Quotes hold a value the agent means as written ("custmer" may be a tag), JSON strings included.
    assert index.corrected('shedule a meetng titled "custmer meetng"') == 'schedule a meeting titled "custmer meetng"'
    assert index.corrected('create {"name": "custmer"} custmer') == 'create {"name": "custmer"} customer'
    # A request quoted whole is still the request.
    assert index.corrected('"shedule a meetng"') == '"schedule a meeting"'


def test_a_name_inside_a_sentence_is_not_a_slip() -> None:
    built = catalog_index(
        {
            "stripe": [("mess.clean", "Clean up the mess")],
            "sports": [("players.stats", "Get the goals a player scored")],
            "music": [("arias.list", "List opera arias")],
        }
    )
    assert built.corrected("how many goals did Messi score") == "how many goals did Messi score"
    assert built.corrected("fit an ARIMA model") == "fit an ARIMA model"  # an acronym, not a shouted "aria"
    # At a sentence's start a capital says nothing; a name's slip of a connector's name is repaired.
    assert built.corrected("Clen up the mess. Cleen it now") == "Clean up the mess. Clean it now"
    assert built.corrected("how much do we have in Sttripe") == "how much do we have in Stripe"


def test_a_function_word_slip_becomes_that_word_and_is_dropped(index: DiscoveryIndex) -> None:
    assert index.corrected("cancel the meeting wiht bob") == "cancel the meeting with bob"


def test_a_longer_slip_is_a_content_word_before_a_function_word() -> None:
    # "shre" is one edit from "she" and from "share": a letter left out is the commoner slip.
    built = DiscoveryIndex()
    built.replace_connector("files", [action("files", "permissions.create", "Share a file with someone")])
    assert built.corrected("shre the file wiht anna") == "share the file with anna"


def test_a_slip_the_api_made_too_still_reaches_the_word_it_meant() -> None:
    built = DiscoveryIndex()
    videos = [action("media", f"videos.op_{i}", f"Upload a video of kind {i}") for i in range(25)]
    legacy = action("media", "videos.legacy", "Uplaod a legacy video")  # the description's own slip
    built.replace_connector("media", [*videos, legacy])
    assert built.corrected("uplaod a video") == "upload a video"
    # A word two actions use is the API's own, and so is one that is rare but no commoner word is near.
    built.replace_connector("media", [*videos, legacy, action("media", "videos.old", "Uplaod an old video")])
    assert built.corrected("uplaod a video") == "uplaod a video"
    built.replace_connector("other", [action("other", "okra.list", "List okra harvests")])
    assert built.corrected("okra harvests") == "okra harvests"


def test_corrections_follow_the_catalog() -> None:
    built = DiscoveryIndex()
    built.replace_connector("calendar", [action("calendar", "meetings.schedule", "Schedule a meeting")])
    assert built.corrected("payuot") == "payuot"
    built.replace_connector("shop", [action("shop", "payouts.create", "Create a payout")])
    assert built.corrected("payuot") == "payout"
    built.remove_connector("shop")
    assert built.corrected("payuot") == "payuot"


def test_the_commonest_candidate_wins_and_the_first_letter_is_kept() -> None:
    vocabulary = frozenset({"cart", "card", "bard"})
    counts = {"cart": 1, "card": 5, "bard": 50}
    # "carx" is one edit from all three: "bard" changes the first letter, "card" is commoner than "cart".
    assert correction("carx", vocabulary, counts.__getitem__) == "card"
    assert correction("card", vocabulary, counts.__getitem__) is None
    assert correction("zzzz", vocabulary, counts.__getitem__) is None


def test_a_likely_slip_wins_over_a_commoner_word() -> None:
    vocabulary = frozenset({"task", "trash", "book", "page", "pale", "radius", "calendar"})
    counts = {"task": 90, "trash": 3, "book": 30, "page": 5, "pale": 50, "radius": 9, "calendar": 9}
    # A letter left out ("tash") or a neighbouring key hit ("pate": t sits over g) is how people slip;
    # "task" and "pale" are commoner, but a far key is rarely hit by mistake.
    assert correction("tash", vocabulary, counts.__getitem__) == "trash"
    assert correction("pate", vocabulary, counts.__getitem__) == "page"
    assert correction("bool", vocabulary, counts.__getitem__) == "book"  # k and l are neighbours
    assert correction("calender", vocabulary, counts.__getitem__) == "calendar"  # one vowel for another
    # A letter left out comes before a vowel written for another, however common the latter's word.
    assert correction("bock", frozenset({"back", "block"}), {"back": 40, "block": 2}.__getitem__) == "block"
    # Only a far key away, a word is another word ("radium"), or a name ("Rodin" is no "Robin").
    assert correction("radium", vocabulary, counts.__getitem__) is None


def test_likely_slips() -> None:
    assert slip_rank("shedule", "schedule") is not None  # a letter left out
    assert slip_rank("meeeting", "meeting") is not None  # one typed twice
    assert slip_rank("meetnig", "meeting") is not None  # two swapped
    assert slip_rank("meetimg", "meeting") is not None  # n and m are neighbours
    assert slip_rank("seperate", "separate") is not None  # a vowel for another, as it sounds
    assert slip_rank("meetipg", "meeting") is None  # p is far from n
    # Two letters swapped before a key's neighbour hit, however common the other word: "taks" is "task".
    assert slip_rank("taks", "task") < slip_rank("taks", "take")  # type: ignore[operator]
    assert correction("taks", frozenset({"task", "take"}), {"take": 50, "task": 3}.__getitem__) == "task"


def test_edits_are_one_step_away() -> None:
    found = edits("abc")
    assert {"ab", "bac", "abd", "abcd", "xabc"} <= found
    assert "abc" not in found and "cba" not in found
