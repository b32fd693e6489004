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


def test_a_file_extension_is_not_part_of_the_resource() -> None:
    """``Messages.json`` is the messages: ``send_sms`` finds their create."""
    phone = indexed(
        [
            op("create_message", "POST", "/Accounts/{AccountSid}/Messages.json", "Send a message"),
            op("list_short_code", "GET", "/Accounts/{AccountSid}/SMS/ShortCodes.json", "List short codes"),
        ]
    )
    assert first(phone, "acme.send_sms") == ["acme.create_message"]


def test_a_plural_last_segment_is_a_collection_not_a_verb() -> None:
    """``/suppression/blocks`` lists blocks (``block`` is also a verb segment, as in ``/users/{id}/block``)."""
    mail = indexed(
        [
            op("delete_suppression_blocks", "DELETE", "/suppression/blocks", "Delete blocks"),
            op("get_suppression_blocks", "GET", "/suppression/blocks", "Retrieve all blocks"),
        ]
    )
    assert first(mail, "acme.list_blocks") == ["acme.get_suppression_blocks"]


USERS = [
    op("get_users", "GET", "/v1/users", "List all users"),
    op("get_user", "GET", "/v1/users/{user_id}", "Retrieve a user"),
    op("get_self", "GET", "/v1/users/me", "Retrieve your token's bot user"),
]


@pytest.mark.parametrize("guess", ["acme.get_current_user", "acme.users.me", "acme.get_me"])
def test_the_caller_is_users_me_not_the_users_collection(guess: str) -> None:
    assert first(indexed(USERS), guess) == ["acme.get_self"]


def test_without_an_operation_of_the_callers_own_a_users_get_is_it() -> None:
    """Where no URL names the caller, the caller is one member of the users (its own id, or ``me``)."""
    assert first(indexed(USERS[:2]), "acme.get_current_user") == ["acme.get_user"]


def test_a_singular_account_segment_is_the_callers_own() -> None:
    cloud = indexed(
        [
            op("account_get", "GET", "/v2/account", "Get User Information"),
            op("databases_get_user", "GET", "/v2/databases/{id}/users/{username}", "Retrieve a database user"),
        ]
    )
    assert first(cloud, "acme.get_current_user") == ["acme.account_get"]


def test_a_list_naming_no_scope_is_the_callers_own() -> None:
    # An agent listing codespaces means its own, before an organization's or a repository's.
    spaces = indexed(
        [
            op("list_in_organization", "GET", "/orgs/{org}/codespaces", "List codespaces for the organization"),
            op("list_for_authenticated_user", "GET", "/user/codespaces", "List codespaces for the authenticated user"),
            op("list_in_repository", "GET", "/repos/{owner}/{repo}/codespaces", "List codespaces in a repository"),
        ]
    )
    assert first(spaces, "acme.list_codespaces") == ["acme.list_for_authenticated_user"]
    assert first(spaces, "acme.list_org_codespaces") == ["acme.list_in_organization"]  # a scope named


def test_an_operation_doing_another_verb_is_not_the_guess() -> None:
    """``list_contacts``: the contacts' list, not the delete of a list's contacts that spells ``list``."""
    mail = indexed(
        [
            op("delete_mc_lists_id_contacts", "DELETE", "/marketing/lists/{id}/contacts", "Remove contacts"),
            op("get_mc_contats", "GET", "/marketing/contacts", "Get sample contacts"),
        ]
    )
    assert first(mail, "acme.list_contacts") == ["acme.get_mc_contats"]


CLOUD = [
    op("droplets_list", "GET", "/v2/droplets", "List all droplets"),
    op("droplets_get", "GET", "/v2/droplets/{droplet_id}", "Retrieve a droplet"),
    op("droplets_destroy", "DELETE", "/v2/droplets/{droplet_id}", "Delete a droplet"),
    op("droplet_actions_post", "POST", "/v2/droplets/{droplet_id}/actions", "Initiate a droplet action"),
    op("update_task", "PUT", "/tasks/{task_gid}", "Update a task"),
    op("delete_task", "DELETE", "/tasks/{task_gid}", "Delete a task"),
    op("duplicate_task", "POST", "/tasks/{task_gid}/duplicate", "Duplicate a task"),
    op("update_call", "POST", "/Calls/{Sid}.json", "Initiates a call redirect or terminates a call"),
    op("list_call", "GET", "/Calls.json", "List calls"),
]


@pytest.mark.parametrize(
    ("guess", "expected"),
    [
        ("acme.reboot_droplet", "acme.droplet_actions_post"),
        ("acme.power_off_droplet", "acme.droplet_actions_post"),
        ("acme.complete_task", "acme.update_task"),
        ("acme.end_call", "acme.update_call"),
    ],
)
def test_a_change_of_state_is_an_action_posted_to_the_resource_else_its_update(guess: str, expected: str) -> None:
    assert first(indexed(CLOUD), guess) == [expected]


def test_an_operation_named_by_the_verb_comes_before_an_update() -> None:
    screens = indexed(
        [
            op("update_custom_field", "PUT", "/field/{fieldId}", "Update a custom field"),
            op("move_tab_field", "POST", "/screens/{screenId}/tabs/{tabId}/fields/{id}/move", "Move a field"),
        ]
    )
    assert first(screens, "acme.move_field") == ["acme.move_tab_field"]


def test_a_state_segment_spelled_as_a_participle_is_the_verb() -> None:
    """Trello closes a board with ``PUT /boards/{id}/closed``: the segment is ``close``'s, no plural."""
    boards = indexed(
        [
            op("update_boards", "PUT", "/boards/{idBoard}", "updateBoardsByIdBoard()"),
            op("update_boards_closed", "PUT", "/boards/{idBoard}/closed", "updateBoardsClosedByIdBoard()"),
            op("update_boards_name", "PUT", "/boards/{idBoard}/name", "updateBoardsNameByIdBoard()"),
        ]
    )
    assert first(boards, "close_board") == ["acme.update_boards_closed"]


def test_verbs_of_one_change_of_state_are_one_verb() -> None:
    """``void_payment`` is the payment's cancel, not the void of another resource."""
    payments = indexed(
        [
            op("cancel_payment", "POST", "/v2/payments/{payment_id}/cancel", "CancelPayment"),
            op("void_transaction", "POST", "/v2/transactions/{transaction_id}/void", "VoidTransaction"),
            op("get_payment", "GET", "/v2/payments/{payment_id}", "GetPayment"),
        ]
    )
    assert first(payments, "acme.void_payment") == ["acme.cancel_payment"]


def test_a_collection_listed_only_by_its_search_answers_list() -> None:
    team = indexed(
        [
            op("search_team_members", "POST", "/v2/team-members/search", "SearchTeamMembers"),
            op("list_team_member_wages", "GET", "/v2/labor/team-member-wages", "ListTeamMemberWages"),
            op("update_team_member", "PUT", "/v2/team-members/{team_member_id}", "UpdateTeamMember"),
        ]
    )
    assert first(team, "acme.list_team_members") == ["acme.search_team_members"]


def test_a_custom_method_is_the_operations_verb() -> None:
    """Google's ``/sheets/{sheetId}:copyTo`` is a copy, ``/values:batchGet`` a get: not an update of the member."""
    from mcp_gateway.discovery._rest_shape import shape_of
    from mcp_gateway.discovery._text import stem

    copy = shape_of(op("copy", "POST", "/v4/spreadsheets/{spreadsheetId}/sheets/{sheetId}:copyTo"))
    batch_get = shape_of(op("get", "GET", "/v4/spreadsheets/{spreadsheetId}/values:batchGet"))
    assert copy is not None and stem("copy") in copy.verbs and stem("update") not in copy.verbs
    assert batch_get is not None and stem("get") in batch_get.verbs and batch_get.resource == {stem("values")}


def test_an_item_is_a_catalog_object() -> None:
    shop = indexed(
        [
            op("retrieve_catalog_object", "GET", "/v2/catalog/object/{object_id}", "RetrieveCatalogObject"),
            op("search_catalog_items", "POST", "/v2/catalog/search-catalog-items", "SearchCatalogItems"),
            op("catalog_info", "GET", "/v2/catalog/info", "CatalogInfo"),
        ]
    )
    assert first(shop, "acme.get_catalog_item") == ["acme.retrieve_catalog_object"]


def test_mail_and_email_are_one_word() -> None:
    """``send_email`` is ``POST /mail/send``, its own verb on mail, before an email's validation."""
    mail = indexed(
        [
            op("post_validations_email", "POST", "/validations/email", "Validate an email"),
            op("post_mail_send", "POST", "/mail/send", "v3 Mail Send"),
        ]
    )
    assert first(mail, "acme.send_email") == ["acme.post_mail_send"]


@pytest.mark.parametrize(
    ("guess", "expected"),
    [
        ("acme.redeploy_app", "acme.apps_create_deployment"),
        ("acme.release_phone_number", "acme.delete_phone_number"),
        ("acme.write_values", "acme.values_update"),
        ("acme.save_card", "acme.create_card"),
    ],
)
def test_verbs_read_for_the_operation_they_name(guess: str, expected: str) -> None:
    ops = indexed(
        [
            op("apps_list", "GET", "/v2/apps", "List all apps"),
            op("apps_update", "PUT", "/v2/apps/{id}", "Update an app"),
            op("apps_create_deployment", "POST", "/v2/apps/{app_id}/deployments", "Create an app deployment"),
            op("create_phone_number", "POST", "/phone_numbers", "Purchase a number"),
            op("update_phone_number", "POST", "/phone_numbers/{sid}", "Update a number"),
            op("delete_phone_number", "DELETE", "/phone_numbers/{sid}", "Delete a number"),
            op("values_get", "GET", "/spreadsheets/{id}/values/{range}", "Returns a range of values"),
            op("values_update", "PUT", "/spreadsheets/{id}/values/{range}", "Sets values in a range"),
            op("create_card", "POST", "/v2/cards", "CreateCard"),
            op("disable_card", "POST", "/v2/cards/{card_id}/disable", "DisableCard"),
            op("retrieve_card", "GET", "/v2/cards/{card_id}", "RetrieveCard"),
        ]
    )
    assert first(ops, guess) == [expected]


def test_a_summary_saying_the_guess_names_its_operation() -> None:
    """``validate_email``: "Validate an email" is ``POST /validations/email``, not the update of the account's email."""
    mail = indexed(
        [
            op("put_user_email", "PUT", "/user/email", "Update your account email address"),
            op("post_validations_email", "POST", "/validations/email", "Validate an email"),
        ]
    )
    assert first(mail, "acme.validate_email") == ["acme.post_validations_email"]


def test_a_plural_the_stemmer_keeps_names_the_same_resource() -> None:
    """``reserved_ips`` and ``reserved_ip`` are one resource: its actions take the assignment."""
    ips = indexed(
        [
            op("reserved_ips_get", "GET", "/v2/reserved_ips/{reserved_ip}", "Retrieve a reserved IP"),
            op("reserved_ips_delete", "DELETE", "/v2/reserved_ips/{reserved_ip}", "Delete a reserved IP"),
            op("reserved_ips_actions_post", "POST", "/v2/reserved_ips/{reserved_ip}/actions", "Initiate an action"),
        ]
    )
    assert first(ips, "acme.assign_reserved_ip") == ["acme.reserved_ips_actions_post"]


@pytest.mark.parametrize(
    ("guess", "expected"),
    [("acme.send_invoice", "acme.publish_invoice"), ("acme.capture_payment", "acme.complete_payment")],
)
def test_a_verb_of_the_same_change_names_the_operation(guess: str, expected: str) -> None:
    """Sending an invoice is publishing it; capturing a payment completes it (each its own verb segment)."""
    billing = indexed(
        [
            op("create_invoice", "POST", "/v2/invoices", "CreateInvoice"),
            op("publish_invoice", "POST", "/v2/invoices/{invoice_id}/publish", "PublishInvoice"),
            op("create_payment", "POST", "/v2/payments", "CreatePayment"),
            op("update_payment", "PUT", "/v2/payments/{payment_id}", "UpdatePayment"),
            op("complete_payment", "POST", "/v2/payments/{payment_id}/complete", "CompletePayment"),
        ]
    )
    assert first(billing, guess) == [expected]


def test_where_no_url_names_the_guess_its_last_words_or_the_description_do() -> None:
    """``release_phone_number``: the incoming phone numbers' delete; ``query_database``: the data source's
    query, which its description calls a database; never what the summary names after the guessed words."""
    api = indexed(
        [
            op("create_incoming_phone_number", "POST", "/IncomingPhoneNumbers.json", "Purchase a phone-number"),
            op("delete_incoming_phone_number", "DELETE", "/IncomingPhoneNumbers/{Sid}.json", "Delete a phone-number"),
            op("update_incoming_phone_number", "POST", "/IncomingPhoneNumbers/{Sid}.json", "Update a number"),
            op("fetch_incoming_phone_number", "GET", "/IncomingPhoneNumbers/{Sid}.json", "Fetch a number"),
            op("list_incoming_phone_number", "GET", "/IncomingPhoneNumbers.json", "List numbers"),
            op("create_incoming_phone_number_local", "POST", "/IncomingPhoneNumbers/Local.json", "Buy a local number"),
            op("retrieve_a_data_source", "GET", "/v1/data_sources/{data_source_id}", "Retrieve a data source"),
            op("update_a_data_source", "PATCH", "/v1/data_sources/{data_source_id}", "Update a data source"),
            op("post_search", "POST", "/v1/search", "Search by title"),
            Action(
                connector="acme",
                path="query_data_source",
                summary="Query a data source",
                description="Query a data source (database) using filters and sorts",
                input_schema={"type": "object", "properties": {}},
                risk="read",
                binding=OpenAPIBinding(method="POST", url="/v1/data_sources/{data_source_id}/query"),
            ),
            op("retrieve_a_database", "GET", "/v1/databases/{database_id}", "Retrieve a database"),
        ]
    )
    assert first(api, "acme.release_phone_number") == ["acme.delete_incoming_phone_number"]
    assert first(api, "acme.query_database") == ["acme.query_data_source"]


def test_resource_words_written_apart_name_a_segment_written_as_one() -> None:
    mail = indexed(
        [
            op("post_marketing_singlesends", "POST", "/marketing/singlesends", "Create Single Send"),
            op("get_marketing_singlesends", "GET", "/marketing/singlesends", "Get All Single Sends"),
            op("post_list_recipient", "POST", "/lists/{list_id}/recipients/{recipient_id}", "Add a recipient"),
        ]
    )
    assert first(mail, "acme.list_single_sends") == ["acme.get_marketing_singlesends"]


def test_a_plural_get_is_spelled_like_the_list() -> None:
    """``get_call_recordings`` is the call's recordings listed, not one recording fetched."""
    calls = indexed(
        [
            op("fetch_call_recording", "GET", "/Calls/{CallSid}/Recordings/{Sid}.json", "Fetch a recording"),
            op("list_call_recording", "GET", "/Calls/{CallSid}/Recordings.json", "List recordings of a call"),
        ]
    )
    assert first(calls, "acme.get_call_recordings") == ["acme.list_call_recording"]


def test_a_part_with_no_operation_of_its_own_is_its_holders_update_or_read() -> None:
    """Sheets are ``/spreadsheets/{id}/sheets/{sheetId}`` with no delete: deleting one updates the spreadsheet."""
    sheets = indexed(
        [
            op("spreadsheets_create", "POST", "/v4/spreadsheets", "Creates a spreadsheet"),
            op("spreadsheets_get", "GET", "/v4/spreadsheets/{spreadsheetId}", "Returns the spreadsheet"),
            op("spreadsheets_batch_update", "POST", "/v4/spreadsheets/{spreadsheetId}:batchUpdate", "Applies updates"),
            op("sheets_copy_to", "POST", "/v4/spreadsheets/{spreadsheetId}/sheets/{sheetId}:copyTo", "Copies a sheet"),
        ]
    )
    assert first(sheets, "acme.delete_sheet") == ["acme.spreadsheets_batch_update"]
    # Nor is there a read of sheets: the spreadsheet's get returns them, not the copy spelled alike.
    assert first(sheets, "acme.list_sheets") == ["acme.spreadsheets_get"]


def test_between_nested_lists_the_broader_scope_comes_first() -> None:
    """Teams are listed under a user and under a workspace; the workspace holds more kinds of things."""
    teams = indexed(
        [
            op("get_teams_for_user", "GET", "/users/{user_gid}/teams", "Get teams for a user"),
            op("get_teams_for_workspace", "GET", "/workspaces/{workspace_gid}/teams", "Get teams in a workspace"),
            op("get_projects_for_workspace", "GET", "/workspaces/{workspace_gid}/projects", "Get projects"),
            op("get_tags_for_workspace", "GET", "/workspaces/{workspace_gid}/tags", "Get tags"),
        ]
    )
    assert first(teams, "acme.list_teams") == ["acme.get_teams_for_workspace"]


def test_a_long_summary_is_read_as_its_first_sentence_and_the_rest_as_description() -> None:
    """Google's summaries are whole descriptions: "Appends values to a spreadsheet. ... appended to the next
    row" names the append by a row, as a description does."""
    sheets = indexed(
        [
            op("spreadsheets_create", "POST", "/v4/spreadsheets", "Creates a spreadsheet, returning it."),
            op(
                "spreadsheets_values_append",
                "POST",
                "/v4/spreadsheets/{spreadsheetId}/values/{range}:append",
                "Appends values to a spreadsheet. Values will be appended to the next row of the table.",
            ),
        ]
    )
    assert first(sheets, "acme.insert_row") == ["acme.spreadsheets_values_append"]


def test_when_nothing_matches_a_near_tie_goes_to_the_operation_doing_the_verb() -> None:
    """``list_team_members``: no URL names members; the team's users listed, not a user added to it."""
    teams = indexed(
        [
            op("add_user_for_team", "POST", "/teams/{team_gid}/addUser", "Add a user to a team"),
            op("get_users_for_team", "GET", "/teams/{team_gid}/users", "Get users in a team"),
        ]
    )
    assert first(teams, "acme.list_team_members") == ["acme.get_users_for_team"]


def test_a_url_root_shares_the_operations_under_it_and_the_caller_holds_what_follows_it() -> None:
    from mcp_gateway.discovery._rest_shape import root_shares, shapes_of

    actions = (
        op("repo_hooks", "GET", "/repos/{owner}/{repo}/hooks"),
        op("repo_issues", "GET", "/repos/{owner}/{repo}/issues"),
        op("repo_pulls", "GET", "/repos/{owner}/{repo}/pulls"),
        op("org_hooks", "GET", "/orgs/{org}/hooks"),
        op("my_repos", "GET", "/user/repos"),
        op("someones_repos", "GET", "/users/{username}/repos"),
    )
    shapes = shapes_of(actions)
    shares = root_shares(actions)
    assert [round(shares[shape.root], 2) for shape in shapes if shape is not None][:4] == [1.0, 1.0, 1.0, 0.33]
    # ``/user/repos`` is the caller's own repositories; ``/users/{username}/repos`` someone's.
    assert [shape.under_caller for shape in shapes if shape is not None][4:] == [True, False]


def test_a_guess_naming_the_caller_reads_the_callers_own_collection() -> None:
    index = indexed(
        [
            op("repos_list_public", "GET", "/repositories", "List public repositories"),
            op("repos_list_for_authenticated_user", "GET", "/user/repos", "List the authenticated user's repositories"),
            op("repos_list_for_user", "GET", "/users/{username}/repos", "List repositories for a user"),
        ]
    )
    assert first(index, "acme.list_my_repos") == ["acme.repos_list_for_authenticated_user"]


def test_a_bare_search_reads_what_its_summary_says_it_searches() -> None:
    """Jira lists issues only through ``GET /rest/api/3/search`` ("Search for issues using JQL")."""
    tracker = indexed(
        [
            op("search_for_issues_using_jql", "GET", "/rest/api/3/search", "Search for issues using JQL (GET)"),
            op("search_for_issues_using_jql_post", "POST", "/rest/api/3/search", "Search for issues using JQL (POST)"),
            op("get_issue", "GET", "/rest/api/3/issue/{issueIdOrKey}", "Get issue"),
            op("create_issue", "POST", "/rest/api/3/issue", "Create issue"),
            op("bulk_set_issues_properties_list", "POST", "/rest/api/3/issue/properties", "Bulk set issues properties"),
            op("get_issue_watchers", "GET", "/rest/api/3/issue/{issueIdOrKey}/watchers", "Get issue watchers"),
        ]
    )
    for guess in ("acme.list_issues", "acme.find_issues", "acme.list_my_issues"):
        assert first(tracker, guess) == ["acme.search_for_issues_using_jql"], guess
    assert first(tracker, "acme.get_issue") == ["acme.get_issue"]


def test_granting_is_a_create() -> None:
    index = indexed(
        [
            op("get_permissions", "GET", "/permissions", "List Permissions"),
            op("post_permissions", "POST", "/permissions", "Create Permission"),
            op("delete_permissions_id", "DELETE", "/permissions/{id}", "Delete Permission"),
        ]
    )
    assert first(index, "acme.grant_permission") == ["acme.post_permissions"]


def test_logging_in_makes_a_session_and_logging_out_deletes_it() -> None:
    index = indexed(
        [
            op("history_list_logins", "GET", "/history/login", "List site login history."),
            op("post_sessions", "POST", "/sessions", "Create user session"),
            op("delete_sessions", "DELETE", "/sessions", "Delete user session"),
        ]
    )
    assert first(index, "acme.login") == ["acme.post_sessions"]
    assert first(index, "acme.signout") == ["acme.delete_sessions"]
