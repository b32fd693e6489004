"""Suggestions for a guessed action name (``action_not_found``): the name is read as a verb and a
resource, matched against what each operation's method and URL do, the resource's own operation
first; a name the guess spells but for a synonym or a plural comes first."""

from __future__ import annotations

import functools

import pytest

from mcp_gateway.discovery import DiscoveryIndex
from mcp_gateway.vocabulary.model import Action, OpenAPIBinding
from tests.support.actions import catalog_index


def op(connector: str, path: str, method: str, url: str, summary: str) -> Action:
    return Action(
        connector=connector,
        path=path,
        summary=summary,
        risk="read" if method == "GET" else "write",
        binding=OpenAPIBinding(method=method, url=url),
    )


# (connector, path, method, URL, summary): shaped like Stripe's and GitHub's operations.
OPERATIONS = [
    ("stripe", "get_customers", "GET", "/v1/customers", "List all customers"),
    ("stripe", "post_customers", "POST", "/v1/customers", "Create a customer"),
    ("stripe", "get_customers_customer", "GET", "/v1/customers/{customer}", "Retrieve a customer"),
    ("stripe", "post_customers_customer", "POST", "/v1/customers/{customer}", "Update a customer"),
    ("stripe", "delete_customers_customer", "DELETE", "/v1/customers/{customer}", "Delete a customer"),
    (
        "stripe",
        "post_customers_customer_sources_id",
        "POST",
        "/v1/customers/{customer}/sources/{id}",
        "Update a source",
    ),
    ("stripe", "post_customers_customer_tax_ids", "POST", "/v1/customers/{customer}/tax_ids", "Create a tax ID"),
    (
        "stripe",
        "get_customers_customer_balance_transactions",
        "GET",
        "/v1/customers/{customer}/balance_transactions",
        "List a customer's balance transactions",
    ),
    ("stripe", "post_invoices_invoice_void", "POST", "/v1/invoices/{invoice}/void", "Void an invoice"),
    ("stripe", "get_invoices", "GET", "/v1/invoices", "List all invoices"),
    ("stripe", "post_subscriptions", "POST", "/v1/subscriptions", "Create a subscription"),
    ("stripe", "get_subscriptions", "GET", "/v1/subscriptions", "List subscriptions"),
    ("github", "issues.list", "GET", "/issues", "List issues assigned to the authenticated user"),
    ("github", "issues.list_for_repo", "GET", "/repos/{owner}/{repo}/issues", "List repository issues"),
    ("github", "issues.list_for_org", "GET", "/orgs/{org}/issues", "List organization issues"),
    ("github", "issues.update", "PATCH", "/repos/{owner}/{repo}/issues/{issue_number}", "Update an issue"),
    ("github", "issues.update_comment", "PATCH", "/repos/{o}/{r}/issues/comments/{id}", "Update an issue comment"),
    ("github", "users.get_authenticated", "GET", "/user", "Get the authenticated user"),
    ("github", "users.get_by_username", "GET", "/users/{username}", "Get a user"),
    ("github", "users.list", "GET", "/users", "List users"),
    ("github", "enterprise_admin.list_users", "GET", "/admin/users", "List users of the enterprise"),
]


@pytest.fixture(scope="module")
def index() -> DiscoveryIndex:
    built = DiscoveryIndex()
    for slug in ("stripe", "github"):
        built.replace_connector(slug, [op(*row) for row in OPERATIONS if row[0] == slug])
    return built


@pytest.mark.parametrize(
    ("guess", "want"),
    [
        # update/get/delete of the resource itself before its sub-resources
        ("stripe.update_customer", "stripe.post_customers_customer"),
        ("stripe.customers.update", "stripe.post_customers_customer"),
        ("stripe.get_customer", "stripe.get_customers_customer"),
        ("stripe.customer.get", "stripe.get_customers_customer"),
        ("stripe.delete_customer", "stripe.delete_customers_customer"),
        ("stripe.remove_customer", "stripe.delete_customers_customer"),
        ("github.update_issue", "github.issues.update"),
        # a collection's list before admin or nested lists
        ("stripe.list_customers", "stripe.get_customers"),
        ("stripe.customers.list", "stripe.get_customers"),
        ("stripe.fetch_all_customers", "stripe.get_customers"),
        ("github.list_issues", "github.issues.list"),
        ("github.list_users", "github.users.list"),
        ("github.users.list_all", "github.users.list"),
        # REST verbs and HTTP methods, create on the collection
        ("stripe.create_customer", "stripe.post_customers"),
        ("stripe.customers.create", "stripe.post_customers"),
        ("stripe.patch_customer", "stripe.post_customers_customer"),
        ("stripe.create_tax_id", "stripe.post_customers_customer_tax_ids"),
        ("stripe.void_invoice", "stripe.post_invoices_invoice_void"),
        ("stripe.invoices.void", "stripe.post_invoices_invoice_void"),
        # the caller
        ("github.get_current_user", "github.users.get_authenticated"),
        ("github.get_me", "github.users.get_authenticated"),
        ("github.me.get", "github.users.get_authenticated"),
        ("github.get_user", "github.users.get_by_username"),
        # a name spelled but for the connector, a synonym or a plural
        ("issues.list_for_org", "github.issues.list_for_org"),
        ("stripe.fetch_customers", "stripe.get_customers"),
        ("stripe.get_customer_balance_transaction", "stripe.get_customers_customer_balance_transactions"),
    ],
)
def test_the_first_suggestion_is_the_operation_the_guess_means(index: DiscoveryIndex, guess: str, want: str) -> None:
    assert index.resolve(guess) is None  # a guess, not a name
    assert [a.qualified_name for a in index.suggest(guess, limit=3)][:1] == [want]


def test_a_hidden_operation_is_never_suggested_however_well_it_matches(index: DiscoveryIndex) -> None:
    hidden = "stripe.post_customers_customer"
    found = index.suggest("stripe.update_customer", limit=3, allow=lambda a: a.qualified_name != hidden)
    assert found and hidden not in [a.qualified_name for a in found]
    assert index.suggest("stripe.update_customer", limit=3, connectors=["github"])[:1] != [hidden]


def test_a_guess_in_another_form_of_the_names_word_is_answered(index: DiscoveryIndex) -> None:
    # "subscribe" stems apart from "subscription", and is too far from it to read as a slip.
    found = [a.qualified_name for a in index.suggest("stripe.subscribe", limit=2)]
    assert found and set(found) <= {"stripe.post_subscriptions", "stripe.get_subscriptions"}
    # Discovery reads the word the same way.
    assert index.search("subscribe", limit=1)[0][0].qualified_name in found


@functools.cache
def _bundled(*slugs: str) -> DiscoveryIndex:
    """An index of these bundled catalog entries, each loaded as a connector of that name loads it (one
    per set of entries: the tests read it, none changes it)."""
    from scripts.bench_heldout import bundled_catalog

    built = DiscoveryIndex()
    for slug in slugs:
        built.replace_connector(slug, list(bundled_catalog(slug)))
    return built


@pytest.mark.parametrize(
    ("served", "guess", "want"),
    [
        # Plaid posts every operation to a verb URL (``POST /institutions/get``). The URL names no member:
        # the id the body requires does.
        (("plaid",), "plaid.get_institution", "plaid.institutions_get_by_id"),
        # A read of the collection that requires no id lists it.
        (("plaid",), "plaid.list_institutions", "plaid.institutions_get"),
        # To verify is to create a verification ("verify" and "verification" stem apart).
        (("plaid",), "plaid.verify_identity", "plaid.identity_verification_create"),
        # Netlify beside Plaid (near ties turn on the whole catalog's words). A name with the guess's own
        # verb and resource beats a resource's update matched for what the verb changes
        # (``PUT /sites/{site_id}/rollback`` names the site, not the deploy).
        (("netlify", "plaid"), "netlify.rollback_deploy", "netlify.rollback_site_deploy"),
        # To trigger a build is to create one (``POST /sites/{site_id}/builds``: "Runs a build").
        (("netlify", "plaid"), "netlify.trigger_build", "netlify.create_site_build"),
        # Slack names methods after a dot: ``/conversations.create`` creates a conversation, and a channel
        # is one.
        (("slack",), "slack.create_channel", "slack.conversations_create"),
        (("slack",), "slack.list_channels", "slack.conversations_list"),
        (("slack",), "slack.archive_channel", "slack.conversations_archive"),
        # ``users.info`` is a user's read ("Gets information about a user"), not a resource named info.
        (("slack",), "slack.get_user", "slack.users_info"),
        (("slack",), "slack.get_channel", "slack.conversations_info"),
        # No channel subscription is a resource of YouTube's: subscribing to a channel makes a
        # subscription. Beside other catalogs the words' rarity alone put the channel banners' insert first.
        (("youtube", "plaid", "stripe"), "youtube.subscribe_channel", "youtube.youtube_subscriptions_insert"),
        (("youtube", "plaid", "stripe"), "youtube.subscribe_to_channel", "youtube.youtube_subscriptions_insert"),
        # GitHub groups its names (``issues.add_labels``): a guess that is a name but for its group is that
        # action, before the create its verb's synonym reads first (``POST /repos/{o}/{r}/labels``).
        (("github",), "github.add_labels", "github.issues.add_labels"),
        (("github",), "github.remove_label", "github.issues.remove_label"),
        # A repository's webhooks and an organization's are alike in every word: most of GitHub's
        # operations are a repository's, so the unqualified guess means the repository's.
        (("github",), "github.list_webhooks", "github.repos.list_webhooks"),
        (("github",), "github.list_code_scanning_alerts", "github.code_scanning.list_alerts_for_repo"),
        # The caller's own repositories (``GET /user/repos``), not every public one (``GET /repositories``).
        (("github",), "github.list_my_repos", "github.repos.list_for_authenticated_user"),
        # The comments of one issue: a plural read of a collection held under the issue the guess names,
        # not the member read whose summary spells the guess ("Get an issue comment").
        (("github",), "github.get_issue_comments", "github.issues.list_comments"),
        # A noun used as a verb creates that noun under what it names.
        (("github",), "github.comment_on_issue", "github.issues.create_comment"),
        (("github",), "github.issues.comment", "github.issues.create_comment"),
    ],
)
def test_on_a_real_catalog_the_first_suggestion_is_the_operation_meant(
    served: tuple[str, ...], guess: str, want: str
) -> None:
    assert [a.qualified_name for a in _bundled(*served).suggest(guess, limit=3)][:1] == [want]


@functools.cache
def _bench_api(slug: str) -> DiscoveryIndex:
    """An index of one benchmark API of ``tests/data`` (``bench_discover_data.catalog``), built once."""
    from scripts.bench_discover_data import catalog

    index = DiscoveryIndex()
    index.replace_connector(slug, list(catalog(slug)))
    return index


@pytest.mark.parametrize(
    ("guess", "want"),
    [
        ("box.update_file", "box.files.update_a_files_information"),
        ("box.get_file", "box.files.get_information_about_a_file"),
        ("box.get_folder", "box.folders.get_information_about_a_folder"),
        ("box.get_current_user", "box.users.get_the_current_users_information"),
        ("box.me", "box.users.get_the_current_users_information"),
    ],
)
def test_of_a_collections_requests_to_one_url_the_plain_one_the_guess_names_comes_first(guess: str, want: str) -> None:
    # Box's Postman collection saves several requests to one method and URL (``PUT /files/{id}`` locks,
    # moves or updates a file; ``GET /users/me`` with ``fields=my_tags`` reads the caller's tags): the one
    # whose name says the guess, and of the reads the plain one, not a view fixing a ``fields``.
    assert [a.qualified_name for a in _bench_api("box").suggest(guess, limit=3)][:1] == [want]


@pytest.mark.parametrize(
    ("guess", "want"),
    [
        ("githubql.get_current_user", "githubql.query.viewer"),
        ("githubql.me", "githubql.query.viewer"),
        ("githubql.current_user", "githubql.query.viewer"),
    ],
)
def test_an_api_that_names_the_caller_in_words_is_found_for_a_guess_naming_the_caller(guess: str, want: str) -> None:
    # GitHub's GraphQL schema has no URL for the caller: ``viewer`` is "The currently authenticated user."
    # (``query.user`` looks a user up by login).
    assert [a.qualified_name for a in _bench_api("githubql").suggest(guess, limit=3)][:1] == [want]


def test_a_verb_is_read_as_its_noun_ending_in_ification() -> None:
    index = catalog_index({"api": [("create_notification", "Send a notification"), ("list_users", "List users")]})
    assert index._word_forms("notify") == ["notification"]
    assert index.search("notify the team", limit=1)[0][0].qualified_name == "api.create_notification"
