"""Long messages: the request wins over its context; a request for many things reaches the bulk operation."""

from __future__ import annotations

from functools import partial

import pytest

from mcp_gateway.discovery import DiscoveryIndex
from mcp_gateway.discovery._message import (
    LONG_MESSAGE,
    MAX_ASKS,
    asked_kind,
    asks,
    quoted,
    sentences,
    several_asks,
    wants_many,
    without_declined,
)
from mcp_gateway.discovery._text import prose_words
from tests.support.actions import catalog_action, catalog_index

action = partial(catalog_action, method="POST", risk="write")


@pytest.fixture
def index() -> DiscoveryIndex:
    built = DiscoveryIndex()
    built.replace_connector(
        "chat",
        [
            action("chat", "conversations.archive", "Archive a channel"),
            action("chat", "chat.post_message", "Post a message to a channel"),
            action("chat", "users.invite", "Invite a user to the workspace"),
            action("chat", "users.bulk_invite", "Bulk invite users to the workspace", emails={"type": "array"}),
        ],
    )
    built.replace_connector(
        "billing",
        [
            action("billing", "invoices.list", "List invoices of a customer"),
            action("billing", "customers.get", "Get a customer"),
            action("billing", "refunds.create", "Create a refund"),
        ],
    )
    return built


LONG = (
    "Quick context: last week a customer complained that their invoice was wrong, and the billing team spent "
    "the night on the customer's invoices and the refund history before finding the problem. "
    "Could you archive the old incident channel? "
    "Thanks, I'll be in meetings with the customer most of the afternoon."
)


def test_a_long_messages_request_wins_over_its_context(index: DiscoveryIndex) -> None:
    assert asks(LONG) == ("Could you archive the old incident channel?",)
    assert index.search(LONG, limit=3)[0][0].qualified_name == "chat.conversations.archive"


def test_without_finding_the_request_the_context_would_win(index: DiscoveryIndex) -> None:
    # The same words with the request sentence no longer reading as one ("Could you" dropped, no "?"):
    # the context's customer and invoice words take the first place.
    flat = LONG.replace("Could you archive the old incident channel?", "The old incident channel archive.")
    assert asks(flat) is None
    assert index.search(flat, limit=3)[0][0].qualified_name != "chat.conversations.archive"


_CONTEXT = (
    "Some background first: the team moved to the new tooling last quarter, the release notes and the billing "
    "dashboard were rewritten, and the on-call rotation changed twice since."
)


@pytest.mark.parametrize(
    ("message", "ask"),
    [
        ("We had an outage. Please post a message to the channel.", "Please post a message to the channel."),
        ("The bill looks off. Refund the last charge.", "Refund the last charge."),
        ("I'm new here. I need to invite Bob. Thanks!", "I need to invite Bob."),
        ("Our team grew this month.\nhow do I invite a user?", "how do I invite a user?"),
        (
            "It is a lot of records. I'd rather request a report I download later.",
            "I'd rather request a report I download later.",
        ),
        ("The old one is gone. We'd prefer a new invoice for May.", "We'd prefer a new invoice for May."),
        ("Could you help me with a few things? I need to invite Bob.", "I need to invite Bob."),
        ("We are moving the line. First step: check the number.", "First step: check the number."),
        ("We are moving the line. Step 2: check the number.", "Step 2: check the number."),
    ],
)
def test_the_request_sentence_is_found(message: str, ask: str) -> None:
    padded = f"{_CONTEXT} {message}"
    assert len(padded) >= LONG_MESSAGE
    assert asks(padded) == (ask,)
    # A short message is left whole: every sentence of it narrows the request.
    assert asks(message) is None


def test_a_single_sentence_or_no_request_changes_nothing() -> None:
    assert asks("archive the old channel " * 20) is None
    assert asks(f"{_CONTEXT} The channel is old. Nobody uses it.") is None
    assert sentences("One. Two!\nThree?") == ["One.", "Two!", "Three?"]


@pytest.mark.parametrize(
    "message",
    [
        "invite these people to the workspace: alice, bob, carol and dave",
        "invite 20 users to the workspace",
        "add several users at once",
        "invite alice, bob and carol",
        "invite them:\n- alice@example.com\n- bob@example.com\n- carol@example.com",
    ],
)
def test_a_request_for_many_things_is_told_apart(message: str) -> None:
    assert wants_many(message)


@pytest.mark.parametrize(
    "message",
    [
        "invite bob to the workspace",
        "archive the channel, then tell me",
        "invite a user",
        "how many users are in the workspace",  # a count asked for, not many things to make
        "log 2 hours of work on the ticket",  # a quantity of a unit
        "convert 100 dollars to euros",
        "show the latency, jitter and packet loss of each participant",  # a list of fields to read
        "update the draft's body, but don't send it yet, I want to reread it",  # commas, no list
    ],
)
def test_a_request_for_one_thing_is_not(message: str) -> None:
    assert not wants_many(message)


def test_a_bulk_request_reaches_the_bulk_operation(index: DiscoveryIndex) -> None:
    many = "invite alice@example.com, bob@example.com, carol@example.com and dave@example.com to the workspace"
    assert index.search(many, limit=3)[0][0].qualified_name == "chat.users.bulk_invite"
    # One person: the single invite, though the bulk one shares every word of the request.
    assert index.search("invite bob@example.com to the workspace", limit=3)[0][0].qualified_name == "chat.users.invite"


@pytest.mark.parametrize(
    ("message", "kept"),
    [
        ("hide the old drive but don't delete it", "hide the old drive but don't  it"),
        ("close the pull request without merging", "close the pull request without "),
        ("I don't want to end the stream, ban him", "I don't want to  the stream, ban him"),
        ("do not send it yet, save a draft", "do not  it yet, save a draft"),
        ("who signed up but never showed up", "who signed up but never  up"),
    ],
)
def test_a_verb_the_message_declines_is_taken_out(message: str, kept: str) -> None:
    assert without_declined(message) == kept


@pytest.mark.parametrize(
    "message",
    [
        "turn off do not disturb",  # the name of a mode, not a verb declined
        "push to main without a review",  # "without" a noun: part of what is wanted
        "make sure Paul can't host meetings anymore",  # a goal: the ability is what goes
        "the intern should no longer see payroll",
        "add them in one request rather than adding them one at a time",  # a manner, not another operation
        "I don't want to be bothered by notifications",
        "make sure I don't forget the report",  # an idiom: remind me
    ],
)
def test_what_is_not_a_declined_operation_stays(message: str) -> None:
    assert without_declined(message) == message


def test_a_declined_verb_does_not_pull_its_operation_up() -> None:
    built = catalog_index(
        {
            "files": [
                ("drives.hide", "Hide a shared drive from the default view"),
                ("drives.delete", "Delete a shared drive"),
            ]
        }
    )
    query = "keep the old shared drive out of my list, but don't delete it"
    assert built.search(query, limit=2)[0][0].qualified_name == "files.drives.hide"
    # Read as written, the declined "delete" names the other operation, which then comes first.
    assert built.search(query.replace("don't ", ""), limit=2)[0][0].qualified_name == "files.drives.delete"


def test_quoted_words_are_marked_as_the_words_split() -> None:
    message = "Rename the \u201cDraft v3\u201d doc to 'Final plan', Bob's call"
    words = prose_words(message)
    assert [words[position] for position in sorted(quoted(message))] == ["draft", "v", "3", "final", "plan"]
    assert quoted('"list open issues"') == frozenset()  # the whole request quoted is the request
    assert quoted("Bob's call, isn't it") == frozenset()  # apostrophes quote nothing


def test_a_quoted_name_does_not_name_the_operation() -> None:
    built = catalog_index({"mail": [("drafts.create", "Create a draft message"), ("labels.create", "Create a label")]})
    query = 'create a "Draft message" label'
    assert built.search(query, limit=2)[0][0].qualified_name == "mail.labels.create"
    # Unquoted, the same words read as a request about draft messages.
    assert built.search(query.replace('"', ""), limit=2)[0][0].qualified_name == "mail.drafts.create"


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("log three hours on PAY-12", "create"),
        ("Please file a bug for the login page", "create"),
        ("book the big room for Friday", "create"),
        ("mark OPS-9 as a duplicate", "update"),
        ("download the report as CSV", "read"),
        ("show me the audit log", None),  # "log" as a noun, not the request's verb
        ("share the file with Anna", None),
    ],
)
def test_the_opening_verb_says_what_kind_of_operation_is_asked(message: str, kind: str | None) -> None:
    assert asked_kind(message) == kind


def test_an_everyday_opening_verb_picks_the_operation_of_its_kind() -> None:
    built = DiscoveryIndex()
    built.replace_connector(
        "tracker",
        [
            # Alike but for their verbs, and the one read sorts first on a tie.
            action("tracker", "worklogs.browse", "Browse the worklogs of an issue", method="GET", risk="read"),
            action("tracker", "worklogs.create", "Create a worklog on an issue"),
        ],
    )
    for query in ("log three hours on the issue", "record the time spent on the issue"):
        assert built.search(query, limit=1)[0][0].qualified_name == "tracker.worklogs.create", query


@pytest.mark.parametrize(
    ("message", "each"),
    [
        (
            "Find the invoice for ACME. Then email it to their billing contact.",
            ("Find the invoice for ACME.", "Then email it to their billing contact."),
        ),
        ("create the issue and also assign it to me", ("create the issue", "assign it to me")),
        ("Archive the channel, then post a note in #general", ("Archive the channel", "post a note in #general")),
        (
            "First, refund the charge. Second, close the ticket and send the customer a note.",
            ("First, refund the charge.", "Second, close the ticket", "send the customer a note."),
        ),
        # A sentence that only asks for help says nothing of what: it is no ask of its own.
        (
            "Can you help me with two things? First, convert 5000 yen to dollars. Then convert 15 km to miles.",
            ("First, convert 5000 yen to dollars.", "Then convert 15 km to miles."),
        ),
    ],
)
def test_a_message_that_counts_off_its_asks_is_read_ask_by_ask(message: str, each: tuple[str, ...]) -> None:
    assert several_asks(message) == each


@pytest.mark.parametrize(
    "message",
    [
        "archive the old marketing channel",
        # One ask said twice, with no word counting asks off.
        "I need the history of changes to that flag. I need the raw entries with their timestamps.",
        # "and" before what is not a request verb joins the things of one ask.
        "Also give me the median and the variance of these numbers.",
        # An ordinal inside a sentence counts nothing off.
        "We want to offer the dashboard to enterprise customers first. Please create the flag.",
    ],
)
def test_a_message_of_one_ask_is_not_split(message: str) -> None:
    assert several_asks(message) is None


def test_a_message_of_many_asks_is_read_up_to_a_few() -> None:
    message = ". Then ".join(f"archive channel {n}" for n in range(MAX_ASKS + 3))
    found = several_asks(message)
    assert found is not None and len(found) == MAX_ASKS
