"""Guessed names read as verb + resource against each operation's method and URL (``_rest_shape``).

Each catalog here is small and made up, with the names an API would give that the guess does not
spell: the guess reaches the operation by what its verb means and what its resource is called.
"""

from __future__ import annotations

import pytest

from mcp_gateway.discovery import DiscoveryIndex
from mcp_gateway.vocabulary.model import Action, OpenAPIBinding


def op(path: str, method: str, url: str, summary: str = "") -> Action:
    return Action(
        connector="acme",
        path=path,
        summary=summary,
        input_schema={"type": "object", "properties": {}},
        risk="read" if method == "GET" else "write",
        binding=OpenAPIBinding(method=method, url=url),
    )


CATALOG = [
    # Mail: an email is a message; sending is its own verb segment beside the plain insert.
    op("mailbox_letters_insert", "POST", "/boxes/{boxId}/messages", "Inserts a message."),
    op("mailbox_letters_send", "POST", "/boxes/{boxId}/messages/send", "Sends a message."),
    op("mailbox_letters_fetch_one", "GET", "/boxes/{boxId}/messages/{id}", "Gets a message."),
    op("mailbox_threads_fetch_one", "GET", "/boxes/{boxId}/threads/{id}", "Gets a thread."),
    op("mailbox_settings_send_as_patch", "PATCH", "/boxes/{boxId}/settings/sendAs/{alias}", "Patches an alias."),
    # Storage: upload is a create, download a get, share a permission on the document.
    op("storage_docs_insert", "POST", "/docs", "Creates a document."),
    op("storage_docs_watch", "POST", "/docs/{docId}/watch", "Watches a document."),
    op("storage_docs_one", "GET", "/docs/{docId}", "Gets a document."),
    op("storage_docs_remove", "DELETE", "/docs/{docId}", "Deletes a document."),
    op("storage_grants_insert", "POST", "/docs/{docId}/permissions", "Creates a permission."),
    # Numbers: buying one is creating an order for it.
    op("update_line_number", "PATCH", "/line_numbers/{id}", "Update a number."),
    op("delete_line_number", "DELETE", "/line_numbers/{id}", "Delete a number."),
    op("create_number_order", "POST", "/number_orders", "Create an order."),
]


def indexed(actions: list[Action]) -> DiscoveryIndex:
    built = DiscoveryIndex()
    built.replace_connector("acme", actions)
    return built


def first(index: DiscoveryIndex, guess: str) -> list[str]:
    return [a.qualified_name for a in index.suggest(guess, limit=3)][:1]


@pytest.fixture(scope="module")
def index() -> DiscoveryIndex:
    return indexed(CATALOG)


@pytest.mark.parametrize(
    ("guess", "expected"),
    [
        ("acme.send_email", "acme.mailbox_letters_send"),
        ("acme.read_email", "acme.mailbox_letters_fetch_one"),
        ("acme.upload_doc", "acme.storage_docs_insert"),
        ("acme.download_doc", "acme.storage_docs_one"),
        ("acme.share_doc", "acme.storage_grants_insert"),
        ("acme.buy_line_number", "acme.create_number_order"),
    ],
)
def test_a_verb_is_read_for_what_it_does_to_what(index: DiscoveryIndex, guess: str, expected: str) -> None:
    assert first(index, guess) == [expected]


def test_sending_an_sms_is_creating_a_message() -> None:
    texting = indexed(
        [
            op("dispatch_text", "POST", "/messages", "Dispatch."),
            op("send_chat_message", "POST", "/chat_messages", "Sends a chat message."),
            op("send_fax", "POST", "/faxes", "Sends a fax."),
        ]
    )
    assert first(texting, "acme.send_sms") == ["acme.dispatch_text"]


def test_a_spelled_name_beats_what_the_verb_means() -> None:
    texting = indexed(
        [
            op("create_message", "POST", "/messages", "Send a message"),
            op("send_message", "POST", "/chat_messages", "Send Message"),
        ]
    )
    assert first(texting, "acme.send_messages") == ["acme.send_message"]


TOGGLES = [
    op("get_boards", "GET", "/boards", "List boards."),
    op("fetch_switch_toggles", "GET", "/toggles/{boardKey}", "List toggles."),
    op("post_switch_toggle", "POST", "/toggles/{boardKey}", "Create a toggle."),
    op("fetch_switch_toggle", "GET", "/toggles/{boardKey}/{toggleKey}", "Get a toggle."),
    op("patch_switch_toggle", "PATCH", "/toggles/{boardKey}/{toggleKey}", "Update a toggle."),
    op("list_toggle_dependent_toggles", "GET", "/toggles/{boardKey}/{toggleKey}/dependents", "Dependents."),
    op("get_member_toggle_settings", "GET", "/members/{boardKey}/{memberKey}/toggles", "Member toggles."),
]
"""``/toggles/{boardKey}`` is a board's toggles (the collection): the parameter names another resource of
the API; ``/toggles/{boardKey}/{toggleKey}`` is one toggle."""


@pytest.mark.parametrize(
    ("guess", "expected"),
    [
        ("acme.toggles.list", "acme.fetch_switch_toggles"),
        ("acme.list_toggles", "acme.fetch_switch_toggles"),
        ("acme.update_toggle", "acme.patch_switch_toggle"),
        ("acme.create_toggle", "acme.post_switch_toggle"),
    ],
)
def test_a_parameter_naming_another_resource_keeps_the_collection(guess: str, expected: str) -> None:
    assert first(indexed(TOGGLES), guess) == [expected]


def test_a_collection_under_another_resources_key_answers_list() -> None:
    from mcp_gateway.discovery._rest_shape import guess_of, shapes_of

    actions = [
        *TOGGLES[:2],
        TOGGLES[3],
        op("fetch_one_user", "GET", "/user/{accountId}", "Get a user."),
        op("get_accounts", "GET", "/accounts", "List accounts."),
    ]
    collection, member, singular, _ = shapes_of(actions)[1:]
    listing = guess_of("toggles.list")
    assert listing is not None and collection is not None and member is not None and singular is not None
    assert listing.matches(collection) and not listing.matches(member)
    # A singular segment names one member whatever its parameter is called.
    assert singular.member
