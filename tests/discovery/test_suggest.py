"""Suggestions for a guessed tool name (``_suggest``): what a guess's words say beyond its verb and resource.

Each catalog is small and made up, in the shape real APIs have (a CRM's ``/people``, a file store's
``/locks/{path}``), with names the guess does not spell.
"""

from __future__ import annotations

from mcp_gateway.discovery import DiscoveryIndex
from mcp_gateway.vocabulary.model import Action, OpenAPIBinding


def op(path: str, method: str, url: str, summary: str = "", *, connector: str = "acme") -> Action:
    return Action(
        connector=connector,
        path=path,
        summary=summary,
        input_schema={"type": "object", "properties": {}},
        risk="read" if method == "GET" else "write",
        binding=OpenAPIBinding(method=method, url=url),
    )


def indexed(*catalogs: list[Action]) -> DiscoveryIndex:
    built = DiscoveryIndex()
    for actions in catalogs:
        built.replace_connector(actions[0].connector, actions)
    return built


def first(index: DiscoveryIndex, guess: str) -> str | None:
    found = index.suggest(guess, limit=3)
    return found[0].qualified_name if found else None


def test_a_product_named_inside_the_guess_is_its_connector() -> None:
    """``get_leadbook_person`` names the ``leadbook`` connector without a dot, ``upload_file_to_box_drive``
    a two-word one; a product its own names use as a word is a resource there, not the product."""
    crm = [
        op("fetch_person", "GET", "/people/{id}", "Fetch a person", connector="leadbook"),
        op("list_people", "GET", "/people", "List people", connector="leadbook"),
    ]
    files = [
        op("put_file", "POST", "/files/{path}", "Upload file", connector="boxdrive"),
        op("get_user", "GET", "/users/{id}", "Show User", connector="boxdrive"),
    ]
    billing = [
        op("get_person_card", "GET", "/person_cards/{id}", "Retrieve a person card", connector="payco"),
        op("upload_file_for_invoice", "POST", "/invoices/{id}/files", "Upload a file", connector="payco"),
    ]
    calendar = [op("calendar_event_create", "POST", "/events", "Create an event", connector="calendar")]
    index = indexed(crm, files, billing, calendar)
    assert first(index, "get_leadbook_person") == "leadbook.fetch_person"
    assert first(index, "upload_file_to_box_drive") == "boxdrive.put_file"
    assert first(index, "create_calendar_event") == "calendar.calendar_event_create"


def test_people_are_persons() -> None:
    index = indexed(
        [
            op("get_users_2", "GET", "/users/{id}", "Fetch a user"),
            op("get_people_2", "GET", "/people/{id}", "Fetch a person"),
            op("create_person_upserts", "POST", "/person_upserts", "Upsert a person"),
            op("create_people", "POST", "/people", "Create a person"),
        ]
    )
    assert first(index, "acme.get_person") == "acme.get_people_2"
    assert first(index, "acme.create_person") == "acme.create_people"


def test_a_read_guess_that_matches_nothing_reads_before_it_writes() -> None:
    """No ``GET /payment-methods`` lists them: an account's credit cards come before the create and delete
    spelled as the guess is. A write whose name says a read (``freebusy_query``) is a read."""
    index = indexed(
        [
            op("post_payment_methods", "POST", "/payment-methods", "Create a payment method"),
            op("delete_payment_methods", "DELETE", "/payment-methods/{id}", "Delete a payment method"),
            op(
                "get_payment_methods_credit_card",
                "GET",
                "/payment-methods/credit-cards/accounts/{account-key}",
                "List all credit card payment methods of an account",
            ),
        ]
    )
    assert first(index, "acme.list_payment_methods") == "acme.get_payment_methods_credit_card"
    calendar = indexed(
        [
            op("freebusy_query", "POST", "/freeBusy", "Returns free/busy information for a set of calendars."),
            op("events_get", "GET", "/calendars/{calendarId}/events/{eventId}", "Returns an event."),
        ]
    )
    assert first(calendar, "acme.get_freebusy") == "acme.freebusy_query"


def test_whoami_is_the_caller() -> None:
    index = indexed(
        [
            op("get_me_json", "GET", "/me.json", "Fetch current user"),
            op("get_accounts_json", "GET", "/accounts.json", "List accounts"),
            op("get_users_json", "GET", "/users.json", "List users"),
        ]
    )
    assert first(index, "acme.whoami") == "acme.get_me_json"


def test_a_state_verb_is_the_create_of_its_noun_and_its_undoing_the_delete() -> None:
    """``lock_file``: no URL locks a file, a lock is made at ``POST /locks/{path}``; ``unlock_file`` deletes
    it, not the unlock of a user. Where the verb is a segment of the resource's own URL, that wins; a
    noun held by something the guess does not name (a repository's merges) is no reading of it."""
    index = indexed(
        [
            op("post_files_path", "POST", "/files/{path}", "Upload file"),
            op("patch_files_path", "PATCH", "/files/{path}", "Update file metadata"),
            op("post_locks_path", "POST", "/locks/{path}", "Create Lock"),
            op("delete_locks_path", "DELETE", "/locks/{path}", "Delete Lock"),
            op("post_users_id_unlock", "POST", "/users/{id}/unlock", "Unlock user"),
            op("pulls_merge", "PUT", "/repos/{owner}/{repo}/pulls/{number}/merge", "Merge a pull request"),
            op("repos_merge", "POST", "/repos/{owner}/{repo}/merges", "Merge a branch"),
        ]
    )
    assert first(index, "acme.lock_file") == "acme.post_locks_path"
    assert first(index, "acme.unlock_file") == "acme.delete_locks_path"
    assert first(index, "acme.merge_pull_request") == "acme.pulls_merge"


def test_adding_to_a_group_makes_a_membership() -> None:
    index = indexed(
        [
            op("create_person_upserts_json", "POST", "/person_upserts.json", "Upsert a person"),
            op("create_people_json", "POST", "/people.json", "Create a person"),
            op("create_cadence_memberships_json", "POST", "/cadence_memberships.json", "Create a membership"),
            op("delete_cadence_memberships_json", "DELETE", "/cadence_memberships/{id}.json", "Delete a membership"),
            op("create_team_member", "POST", "/teams/{id}/members", "Add a member"),
            op("create_team", "POST", "/teams", "Create a team"),
        ]
    )
    assert first(index, "acme.add_person_to_cadence") == "acme.create_cadence_memberships_json"
    assert first(index, "acme.add_user_to_team") == "acme.create_team_member"


def test_a_shell_command_is_the_file_operation_it_names() -> None:
    index = indexed(
        [
            op("post_folders_path", "POST", "/folders/{path}", "Create folder"),
            op("post_users", "POST", "/users", "Create User"),
            op("delete_files_path", "DELETE", "/files/{path}", "Delete file/folder"),
            op("file_action_move", "POST", "/file_actions/move/{path}", "Move file/folder"),
        ]
    )
    assert first(index, "acme.mkdir") == "acme.post_folders_path"
    assert first(index, "rm") == "acme.delete_files_path"
