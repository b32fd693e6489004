"""DiscoveryIndex on real specs (GitHub, Stripe, Slack from tests/data/openapi) and on tiny catalogs.

The real-data tests build actions with a small local helper rather than the OpenAPI normalizer, so a
change there cannot move these rankings; it names paths the same way (``issues/create`` ->
``issues.create``, ``repos/get-content`` -> ``repos.get_content``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from mcp_gateway.discovery import DiscoveryIndex, fold_name
from mcp_gateway.sources.openapi import normalize_openapi
from mcp_gateway.vocabulary.model import Action
from scripts.bench_discover_data import OPENAPI_SPECS
from tests.support.actions import catalog_action as action

SPECS = OPENAPI_SPECS
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


# -- building actions -------------------------------------------------------------------------------


def _load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def openapi_actions(document: dict[str, Any], slug: str) -> list[Action]:
    """The real OpenAPI normalizer: the index is tested on what a connector's sync would give it."""
    return list(normalize_openapi(document, connector=slug).actions)


@pytest.fixture(scope="module")
def catalogs() -> dict[str, list[Action]]:
    return {slug: openapi_actions(_load(path), slug) for slug, path in SPECS.items()}


@pytest.fixture(scope="module")
def index(catalogs: dict[str, list[Action]]) -> DiscoveryIndex:
    """GitHub + Stripe + Slack, about 1,800 actions. Shared: tests must not mutate it."""
    built = DiscoveryIndex()
    for slug, actions in catalogs.items():
        built.replace_connector(slug, actions)
    return built


def names(hits: list[tuple[Action, float]]) -> list[str]:
    return [action.qualified_name for action, _ in hits]


# -- ranking on real data ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("create an issue", "github.issues.create"),
        ("delete a repository", "github.repos.delete"),
        ("list pull requests", "github.pulls.list"),
        ("star a repo", "github.activity.star_repo_for_authenticated_user"),
        ("get the contents of a file", "github.repos.get_content"),
        ("merge a pull request", "github.pulls.merge"),
        ("add labels to an issue", "github.issues.add_labels"),
        ("list commits", "github.repos.list_commits"),
        ("fork a repository", "github.repos.create_fork"),
        ("get the authenticated user", "github.users.get_authenticated"),
        ("create a release", "github.repos.create_release"),
        ("list my repositories", "github.repos.list_for_authenticated_user"),
        ("list organization members", "github.orgs.list_members"),
        ("download a workflow artifact", "github.actions.download_artifact"),
        ("create a refund", "stripe.post_refunds"),
        ("create a payment intent", "stripe.post_payment_intents"),
        ("send a slack message", "slack.chat_post_message"),
        ("upload a file to slack", "slack.files_upload"),
        ("invite user to channel", "slack.conversations_invite"),
    ],
)
def test_realistic_intents_rank_the_right_action_in_the_top_three(
    index: DiscoveryIndex, query: str, expected: str
) -> None:
    top = names(index.search(query, limit=3))
    assert expected in top, f"{query!r} -> {top}"


def test_results_are_sorted_limited_and_scored(index: DiscoveryIndex) -> None:
    hits = index.search("list issues in a repository", limit=7)
    assert len(hits) == 7
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(score > 0 for score in scores)
    assert names(index.search("list issues in a repository", limit=1)) == names(hits)[:1]


def test_empty_and_stopword_queries_return_nothing(index: DiscoveryIndex) -> None:
    assert index.search("") == []
    assert index.search("   \n") == []
    assert index.search("the of a to in") == []
    assert index.search("!!! ???") == []
    assert index.search("create an issue", limit=0) == []
    assert index.search("zzqxj wvkpt") == []  # words no action uses


def test_scores_are_deterministic_whatever_the_build_order(catalogs: dict[str, list[Action]]) -> None:
    forward, backward = DiscoveryIndex(), DiscoveryIndex()
    for slug in ["github", "stripe", "slack"]:
        forward.replace_connector(slug, catalogs[slug])
    for slug in ["slack", "stripe", "github"]:
        backward.replace_connector(slug, list(reversed(catalogs[slug])))
    for query in ["create an issue", "list customers", "post a message to a channel", "delete", "get"]:
        first = [(a.qualified_name, s) for a, s in forward.search(query, limit=25)]
        assert first == [(a.qualified_name, s) for a, s in forward.search(query, limit=25)]
        assert first == [(a.qualified_name, s) for a, s in backward.search(query, limit=25)]


def test_ties_break_by_qualified_name() -> None:
    index = DiscoveryIndex()
    for slug in ["zeta", "alpha", "mid"]:
        index.replace_connector(slug, [action(slug, "widgets.frobnicate", "Frobnicate a widget")])
    hits = index.search("frobnicate widget")
    assert names(hits) == ["alpha.widgets.frobnicate", "mid.widgets.frobnicate", "zeta.widgets.frobnicate"]
    assert len({score for _, score in hits}) == 1


# -- the permission view ----------------------------------------------------------------------------


def test_connector_filter_only_returns_those_connectors(index: DiscoveryIndex) -> None:
    hits = index.search("create", limit=50, connectors={"slack", "stripe"})
    assert hits and {a.connector for a, _ in hits} <= {"slack", "stripe"}
    assert {a.connector for a, _ in hits} == {"slack", "stripe"}
    assert index.search("create an issue", connectors=[]) == []
    assert index.search("create an issue", connectors={"not-a-connector"}) == []
    # A filter restricts what is ranked: the best GitHub hit overall is among GitHub's own best. (The
    # second stage scores relative to the best *visible* match, so exact scores may differ.)
    for query in ["create an issue", "list customers", "send a message"]:
        only_github = names(index.search(query, limit=5, connectors=["github"]))
        everywhere = names(index.search(query, limit=100))
        assert next(name for name in everywhere if name.startswith("github.")) in only_github


def test_allow_filter_hides_actions_and_still_fills_the_limit(index: DiscoveryIndex) -> None:
    def not_destructive(candidate: Action) -> bool:
        return candidate.risk != "destructive"

    hits = index.search("delete a repository", limit=10, allow=not_destructive)
    assert len(hits) == 10
    assert all(a.risk != "destructive" for a, _ in hits)
    assert "github.repos.delete" not in names(hits)

    # Hiding the whole top of the ranking forces the window to widen; the rest keep their order.
    everything = names(index.search("issue", limit=200))
    hidden = set(everything[:150])
    rest = index.search("issue", limit=20, allow=lambda a: a.qualified_name not in hidden)
    assert names(rest) == everything[150:170]


def test_filters_combine(index: DiscoveryIndex) -> None:
    hits = index.search("delete", limit=30, connectors={"stripe"}, allow=lambda a: a.path.startswith("delete_c"))
    assert hits and all(a.connector == "stripe" and a.path.startswith("delete_c") for a, _ in hits)


# -- incremental maintenance ------------------------------------------------------------------------


def test_replace_connector_swaps_its_actions_and_leaves_the_others(catalogs: dict[str, list[Action]]) -> None:
    index = DiscoveryIndex()
    for slug, actions in catalogs.items():
        index.replace_connector(slug, actions)
    total = len(index)
    slack_segment = index._segments["slack"]  # identity proves slack was not rebuilt
    assert names(index.search("create an issue", limit=1)) == ["github.issues.create"]

    smaller = [a for a in catalogs["github"] if not a.path.startswith("issues.")]
    smaller.append(action("github", "widgets.frobnicate", "Frobnicate a widget", "Turns the crank.", widget_id={}))
    index.replace_connector("github", smaller)

    assert len(index) == total - len(catalogs["github"]) + len(smaller)
    assert index.get("github.issues.create") is None
    assert index.resolve("github.issues.create") is None
    assert not any(n.startswith("github.issues.") for n in names(index.search("create an issue", limit=100)))
    assert names(index.search("frobnicate a widget", limit=1)) == ["github.widgets.frobnicate"]
    assert index.get("github.widgets.frobnicate") is smaller[-1]
    assert index._segments["slack"] is slack_segment
    assert names(index.search("send a message", limit=1, connectors={"slack"})) == ["slack.chat_post_message"]
    assert index.get("stripe.post_refunds") is not None

    # And back: the full catalog again ranks as before.
    index.replace_connector("github", catalogs["github"])
    assert len(index) == total
    assert names(index.search("create an issue", limit=1)) == ["github.issues.create"]
    assert index.search("frobnicate a widget") == []


def test_replace_connector_rejects_bad_input_and_changes_nothing() -> None:
    index = DiscoveryIndex()
    index.replace_connector("tools", [action("tools", "hammers.list", "List hammers")])
    with pytest.raises(ValueError, match="does not belong"):
        index.replace_connector("tools", [action("other", "saws.list", "List saws")])
    with pytest.raises(ValueError, match="two actions"):
        index.replace_connector("tools", [action("tools", "saws.list"), action("tools", "saws.list")])
    assert len(index) == 1
    assert names(index.search("hammers")) == ["tools.hammers.list"]


def test_remove_connector(catalogs: dict[str, list[Action]]) -> None:
    index = DiscoveryIndex()
    for slug, actions in catalogs.items():
        index.replace_connector(slug, actions)
    index.remove_connector("slack")
    assert len(index) == len(catalogs["github"]) + len(catalogs["stripe"])
    assert index.get("slack.chat_post_message") is None
    assert all(a.connector != "slack" for a, _ in index.search("send a slack message to a channel", limit=50))
    assert all(a.connector != "slack" for a in index.suggest("slack.chat_postMessage"))
    index.remove_connector("slack")  # again: a no-op
    index.remove_connector("never-there")
    for slug in ["github", "stripe"]:
        index.remove_connector(slug)
    assert len(index) == 0
    assert index.search("create an issue") == []


def test_empty_connector_is_allowed() -> None:
    index = DiscoveryIndex()
    index.replace_connector("broken", [])  # a connector that failed to load has zero actions
    assert len(index) == 0
    assert index.search("anything") == []


# -- names ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        "github.repos.get_content",
        "github.repos.getContent",
        "github.repos.get-content",
        "GitHub.Repos.GetContent",
        "GITHUB.REPOS.GET_CONTENT",
        " github.repos.get_content ",
    ],
)
def test_resolve_forgives_case_and_separator_spelling(index: DiscoveryIndex, spelling: str) -> None:
    found = index.resolve(spelling)
    assert found is not None and found.qualified_name == "github.repos.get_content"


def test_resolve_reads_dots_inside_the_path_as_any_separator(index: DiscoveryIndex) -> None:
    # Issue 11: a guess differing only by "." against "_" resolves directly (slack.chat.postMessage).
    found = index.resolve("github.repos_get_content")
    assert found is not None and found.qualified_name == "github.repos.get_content"
    found = index.resolve("github.Repos.Get.Content")
    assert found is not None and found.qualified_name == "github.repos.get_content"


def test_resolve_keeps_the_connector_separate(index: DiscoveryIndex) -> None:
    assert index.resolve("githubrepos.get_content") is None
    assert index.resolve("github.repos.get_content.extra") is None
    assert index.resolve("github") is None
    assert index.resolve("") is None
    assert index.get("github.repos.getContent") is None  # get() is exact
    created = index.get("github.issues.create")
    assert created is not None and index.resolve("GitHub.Issues.Create") is created


def test_resolve_refuses_an_ambiguous_spelling() -> None:
    index = DiscoveryIndex()
    index.replace_connector("a", [action("a", "get_x"), action("a", "getx")])
    for spelling, path in [("a.get_x", "get_x"), ("a.GET_X", "get_x"), ("a.GETX", "getx")]:
        found = index.resolve(spelling)
        assert found is not None and found.path == path
    assert index.resolve("a.get-x") is None  # folds onto both, equals neither up to case
    assert index.resolve("a.getX") is not None  # equal to a.getx up to case


def test_fold_name() -> None:
    assert fold_name("GitHub.Repos.get-Content") == fold_name("github.repos.get_content") == "github.repos.getcontent"


@pytest.mark.parametrize(
    ("guess", "expected"),
    [
        ("github.create_issue", "github.issues.create"),
        ("issues.create", "github.issues.create"),
        ("github.issue.create", "github.issues.create"),
        ("github.repos.getContent", "github.repos.get_content"),
        ("github.isues.create", "github.issues.create"),
        ("create_issue", "github.issues.create"),
        ("github.delete_repo", "github.repos.delete"),
        ("github.star_repo", "github.activity.star_repo_for_authenticated_user"),
        ("slack.postMessage", "slack.chat_post_message"),
        ("slack.send_message", "slack.chat_post_message"),
    ],
)
def test_suggest_puts_the_intended_action_first(index: DiscoveryIndex, guess: str, expected: str) -> None:
    suggestions = [a.qualified_name for a in index.suggest(guess)]
    assert suggestions[:1] == [expected], f"{guess!r} -> {suggestions}"
    assert len(suggestions) == 3
    assert len(set(suggestions)) == 3


def test_suggest_respects_the_permission_view(index: DiscoveryIndex) -> None:
    assert all(a.connector == "slack" for a in index.suggest("github.create_issue", connectors={"slack"}))
    blocked = {"github.issues.create"}
    allowed = index.suggest("github.create_issue", limit=5, allow=lambda a: a.qualified_name not in blocked)
    assert allowed and "github.issues.create" not in [a.qualified_name for a in allowed]
    # Even an exact name is not suggested when the view hides it.
    assert "github.repos.get_content" not in [
        a.qualified_name for a in index.suggest("github.repos.get_content", connectors={"stripe"})
    ]


def test_suggest_returns_nothing_for_noise(index: DiscoveryIndex) -> None:
    assert index.suggest("") == []
    assert index.suggest("...") == []
    assert index.suggest("zzqxj.wvkpt") == []
    assert index.suggest("github.create_issue", limit=0) == []


# -- words ------------------------------------------------------------------------------------------


@pytest.fixture
def tiny() -> DiscoveryIndex:
    index = DiscoveryIndex()
    index.replace_connector(
        "shop",
        [
            action("shop", "orders.list", "List orders", "<p>Returns the <strong>orders</strong>, newest first.</p>"),
            action("shop", "orders.create", "Create an order", "Places a new order.", lineItems={}, customerId={}),
            action("shop", "refunds.issue", "Refund a payment", "See [the rules](https://example.com/policy)."),
            action("shop", "categories.get_children", "", "Child categories of a category."),
            action("shop", "discoverer.get", "", "Who found an element."),
        ],
    )
    return index


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("listing the orders", "shop.orders.list"),  # -ing and plural stemmed on both sides
        ("created orders", "shop.orders.create"),
        ("line items", "shop.orders.create"),  # camelCase parameter names are split
        ("getChildren", "shop.categories.get_children"),  # an identifier typed as a query
        ("category children", "shop.categories.get_children"),
        ("refunding payments", "shop.refunds.issue"),
        ("the rules", "shop.refunds.issue"),  # a link's text is indexed ...
        ("who discovered radium", "shop.discoverer.get"),  # no action says "discover": its agent noun
    ],
)
def test_words_meet_across_spellings(tiny: DiscoveryIndex, query: str, expected: str) -> None:
    assert names(tiny.search(query, limit=1)) == [expected]


def test_markup_and_urls_are_not_indexed(tiny: DiscoveryIndex) -> None:
    assert tiny.search("strong") == []  # an HTML tag
    assert tiny.search("example policy") == []  # ... but not its target


def test_the_group_is_a_search_field() -> None:
    from mcp_gateway.vocabulary.model import HttpBinding

    def make(path: str, group: str) -> Action:
        binding = HttpBinding(method="POST", url=f"/{path}")
        return Action(connector="pay", path=path, summary="Create one", binding=binding, group=group)

    index = DiscoveryIndex()
    index.replace_connector("pay", [make("create_a", "Webhooks"), make("create_b", "Refunds")])
    assert index.search("refunds", limit=1)[0][0].path == "create_b"
