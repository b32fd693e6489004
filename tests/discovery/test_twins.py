"""Near-twins (``discovery/_twins.py``): one object, other verbs. They are kept side by side, and between
the first hit and its twin the kind the request's opening verb asks for has the last word."""

from __future__ import annotations

import anyio
import pytest

from mcp_gateway.discovery import hybrid
from mcp_gateway.discovery._twins import TWIN_REACH, asked_first, group_twins, none_of_kind, opening_kind
from mcp_gateway.discovery.dense import EmbeddingProvider
from mcp_gateway.vocabulary.model import Action
from tests.discovery.conftest import embedded_actions
from tests.support.actions import catalog_action as action


def names(hits: list[tuple[Action, float]]) -> list[str]:
    return [hit.qualified_name for hit, _ in hits]


def test_a_far_twin_stays_in_place_but_is_still_named() -> None:
    """Moving a twin up from far below would push distinct candidates out of the top: it stays where it
    ranks, and ``twins`` still names it."""
    hits = [(action("shop", "products.create", "Create a product"), 1.0)]
    hits += [(action("shop", f"other{i}.thing", f"Thing {i}"), 0.9 - i / 100) for i in range(TWIN_REACH)]
    hits += [(action("shop", "products.delete", "Delete a product"), 0.5)]
    hits += [(action("shop", "products.update", "Update a product"), 0.95)]
    hits.sort(key=lambda hit: -hit[1])
    ordered, twins = group_twins(hits)
    top = names(ordered)
    assert top[:2] == ["shop.products.create", "shop.products.update"]  # near: moved next to it
    assert top[-1] == "shop.products.delete"  # far: left in place
    assert set(twins["shop.products.create"]) == {"shop.products.update", "shop.products.delete"}
    assert set(twins["shop.products.delete"]) == {"shop.products.create", "shop.products.update"}


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        ("log work", "create"),  # an everyday verb of a kind
        ("Please remove the label from PAY-3", "delete"),  # a generic verb, past the filler
        ("turn on the checkout flag in production", "update"),  # a switch flips a state: an update
        ("toggle feature flag", "update"),
        ("Put the newsletter emails back from the trash", "undo"),  # undoing, however worded
        ("restore the deleted file", "undo"),
        ("unarchive the old channel", "undo"),
        ("get the report", "read"),  # "get" undoes only with "back"
        ("make sure the intern can no longer see payroll", None),  # a light verb says nothing alone
        ("set my status to away", None),
        ("what tickets are assigned to me", None),
    ],
)
def test_the_kind_a_requests_opening_verb_asks_for(query: str, kind: str | None) -> None:
    assert opening_kind(query) == kind


def test_the_first_hits_twin_of_the_asked_kind_goes_first() -> None:
    def hit(path: str, method: str = "GET", connector: str = "flags") -> tuple[Action, float]:
        return action(connector, path, method=method), 1.0

    create, read, update = hit("post_feature_flag", "POST"), hit("get_feature_flag"), hit("patch_feature_flag", "PATCH")
    other = hit("patch_segment", "PATCH")
    assert names(asked_first([create, read, update, other], "update"))[0] == "flags.patch_feature_flag"
    # Only a twin moves, only from the first five, only when the first is of another kind.
    assert asked_first([create, other, read], "update") == [create, other, read]
    assert asked_first([create, *[other] * 4, update], "update")[0] == create
    assert asked_first([update, create], "create") == [create, update]
    assert asked_first([create, update], "create") == [create, update]
    assert asked_first([create, update], None) == [create, update]
    assert asked_first([create, hit("patch_feature_flag", "PATCH", "other")], "update")[0] == create
    # An un- action undoes its twin: "put it back from the trash" is the untrash, not the trash.
    trash, untrash = hit("messages_trash", "POST"), hit("messages_untrash", "POST")
    assert asked_first([trash, read, untrash], "undo") == [untrash, trash, read]
    assert asked_first([untrash, trash], "create") == [trash, untrash]
    # A name with verbs of two kinds ("list" of "calendar_list") is the kind its method says.
    listing = hit("calendar_list_update", "PUT")
    assert asked_first([listing, hit("calendar_list_get")], "read")[0] != listing
    assert asked_first([listing, hit("calendar_list_patch", "PATCH")], "update") == [
        listing,
        hit("calendar_list_patch", "PATCH"),
    ]


@pytest.mark.hybrid
def test_a_switch_reaches_the_flags_update_though_the_model_reads_a_create(
    provider: EmbeddingProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scripts.bench_heldout import bundled_catalog

    flags = [action for action in bundled_catalog("launchdarkly") if "feature_flag" in action.path][:9]
    index, search = embedded_actions(provider, "launchdarkly", flags)

    def first() -> str:
        found = anyio.run(lambda: search.find(index, "toggle feature flag", limit=5))
        return found.hits[0][0].path

    assert first() == "patch_feature_flag"
    monkeypatch.setattr(hybrid, "asked_first", lambda hits, kind: hits)
    assert first() == "post_feature_flag"  # what the fused scores alone put first


def test_a_request_to_delete_answered_by_no_deletion_is_not_one_to_be_sure_of() -> None:
    # "delete a widget" where no visible action deletes (none exists, or a policy hides it): the best
    # match only updates one, and the answer must not say it is sure.
    update, read = (action("w", "update_widget", method="PATCH"), 1.0), (action("w", "get_widget"), 1.0)
    delete, trash = (
        (action("w", "delete_widget", method="DELETE"), 1.0),
        (action("w", "messages_trash", method="POST"), 1.0),
    )
    assert none_of_kind([update, read], "delete")
    assert not none_of_kind([update, delete], "delete")
    assert not none_of_kind([update, trash], "delete")  # trashing is deleting
    assert not none_of_kind([update, read], "update") and not none_of_kind([], "delete")
    assert none_of_kind([update, read, read, read, read, delete], "delete")  # past the first five
