"""Everyday words reach the actions APIs name differently ("text" a number -> send a message,
"old versions" -> revisions, "kill switch" -> a feature flag): the query side's synonyms and phrases."""

from __future__ import annotations

import pytest

from mcp_gateway.discovery import DiscoveryIndex
from tests.support.actions import catalog_index


@pytest.fixture(scope="module")
def index() -> DiscoveryIndex:
    # Each everyday word's target sits next to a decoy that shares every other word of the query, so
    # only the everyday word can tell them apart (the decoy's name sorts first: it wins a tie).
    return catalog_index(
        {
            "mail": [
                ("labels.delete", "Delete a label"),
                ("threads.delete", "Delete a thread"),
                ("settings.get", "Get settings"),
                ("messages.send", "Send a message"),
            ],
            "phone": [
                ("calls.create", "Dial a phone number"),
                ("messages.create", "Send a message to a phone number"),
            ],
            "drive": [
                ("drives.list", "List shared drives"),
                ("files.list", "List files"),
                ("revisions.list", "List the revisions of a file"),
                ("comments.list", "List the comments on a file"),
                ("permissions.list", "List the permissions of a file"),
                ("drives.create", "Create a shared drive"),
                ("files.create", "Create a file"),
                ("drives.update", "Update a shared drive"),
                ("files.update", "Update a file"),
            ],
            "work": [
                ("tasks.create", "Create a task"),
                ("events.insert", "Create an event on a calendar"),
                ("integrations.create", "Create an integration"),
                ("flags.create", "Create a feature flag"),
                ("meetings.create", "Create a meeting"),
                ("webinars.create", "Create a webinar"),
                ("alerts.count", "Count the alerts"),
                ("alerts.enable", "Enable the alerts"),
                ("alerts.disable", "Disable the alerts"),
            ],
        }
    )


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
        ("switch on the alerts", "work.alerts.enable"),  # "switch on" -> enable
        ("switch off the alerts", "work.alerts.disable"),  # "switch off" -> disable
        ("a video chat with the team tomorrow", "work.meetings.create"),  # "video chat" -> meeting
    ],
)
def test_an_everyday_word_reaches_the_action_named_by_the_apis_word(
    index: DiscoveryIndex, query: str, expected: str
) -> None:
    hits = index.search(query, limit=3)
    assert hits, query
    assert hits[0][0].qualified_name == expected


def test_dont_forget_asks_for_a_reminder() -> None:
    built = catalog_index({"work": [("tasks.list", "List tasks"), ("reminders.add", "Add a reminder")]})
    hits = built.search("don't forget the dentist on Friday", limit=1)
    assert hits and hits[0][0].qualified_name == "work.reminders.add"
