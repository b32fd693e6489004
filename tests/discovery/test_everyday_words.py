"""Everyday words reach the actions APIs name differently ("text" a number -> send a message,
"old versions" -> revisions, "kill switch" -> a feature flag): the query side's synonyms and phrases."""

from __future__ import annotations

import pytest

from mcp_gateway.discovery import DiscoveryIndex
from tests.support.actions import catalog_action as action


@pytest.fixture(scope="module")
def index() -> DiscoveryIndex:
    # Each everyday word's target sits next to a decoy that shares every other word of the query, so
    # only the everyday word can tell them apart (the decoy's name sorts first: it wins a tie).
    built = DiscoveryIndex()
    built.replace_connector(
        "mail",
        [
            action("mail", "labels.delete", "Delete a label"),
            action("mail", "threads.delete", "Delete a thread"),
            action("mail", "settings.get", "Get settings"),
            action("mail", "messages.send", "Send a message"),
        ],
    )
    built.replace_connector(
        "phone",
        [
            action("phone", "calls.create", "Dial a phone number"),
            action("phone", "messages.create", "Send a message to a phone number"),
        ],
    )
    built.replace_connector(
        "drive",
        [
            action("drive", "drives.list", "List shared drives"),
            action("drive", "files.list", "List files"),
            action("drive", "revisions.list", "List the revisions of a file"),
            action("drive", "comments.list", "List the comments on a file"),
            action("drive", "permissions.list", "List the permissions of a file"),
            action("drive", "drives.create", "Create a shared drive"),
            action("drive", "files.create", "Create a file"),
            action("drive", "drives.update", "Update a shared drive"),
            action("drive", "files.update", "Update a file"),
        ],
    )
    built.replace_connector(
        "work",
        [
            action("work", "tasks.create", "Create a task"),
            action("work", "events.insert", "Create an event on a calendar"),
            action("work", "integrations.create", "Create an integration"),
            action("work", "flags.create", "Create a feature flag"),
            action("work", "meetings.create", "Create a meeting"),
            action("work", "webinars.create", "Create a webinar"),
            action("work", "alerts.count", "Count the alerts"),
            action("work", "alerts.enable", "Enable the alerts"),
            action("work", "alerts.disable", "Disable the alerts"),
        ],
    )
    return built


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("delete the whole conversation", "mail.threads.delete"),  # conversation -> thread
        ("text this phone number", "phone.messages.create"),  # text -> message, sms
        ("email my boss", "mail.messages.send"),  # email -> message
        ("show the old versions of the file", "drive.revisions.list"),  # version -> revision
        ("who has access to the file", "drive.permissions.list"),  # access -> permission
        ("share the file with anna", "drive.permissions.list"),  # share -> permission
        ("upload the quarterly report", "drive.files.create"),  # upload -> create, file
        ("rename the document", "drive.files.update"),  # document -> file
        ("find the pdf", "drive.files.list"),  # pdf -> file
        ("add lunch with Ben to my schedule", "work.events.insert"),  # schedule -> calendar, event
        ("create a kill switch", "work.flags.create"),  # "kill switch" -> flag
        ("create an online seminar", "work.webinars.create"),  # seminar -> webinar
        ("turn on the alerts", "work.alerts.enable"),  # "turn on" -> enable
        ("turn off the alerts", "work.alerts.disable"),  # "turn off" -> disable
    ],
)
def test_an_everyday_word_reaches_the_action_named_by_the_apis_word(
    index: DiscoveryIndex, query: str, expected: str
) -> None:
    hits = index.search(query, limit=3)
    assert hits, query
    assert hits[0][0].qualified_name == expected
