"""``Permissions`` and ``Catalogs`` on their own: grant, hide, verdict and not-found suggestions over
the loaded catalogs; argument validation, back-off and recovery of a connector in error."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_gateway.core import result_payload
from mcp_gateway.core.permissions import SUGGESTIONS
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.services.identity import OPERATOR, Principal
from tests.core.test_gateway import AGENTS, CONNECTORS, harness, manifest_text

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_visible_connectors_follow_the_grants(tmp_path: Path) -> None:
    async with harness(tmp_path, AGENTS + CONNECTORS) as h:
        permissions = h.gateway._permissions
        assert permissions.visible(Principal(user="alice", agent="bot")) == {"open"}
        assert permissions.lookup(Principal(user="alice", agent="bot"), "api.items.get") is None
        assert permissions.lookup(OPERATOR, "api.items.get") is not None
        assert permissions.connector_of(OPERATOR, "api.nothing.here") == "api"


async def test_verdict_and_conditional_rules(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        permissions = h.gateway._permissions
        payment = permissions.lookup(OPERATOR, "api.payments.create")
        assert payment is not None
        assert permissions.verdict(payment, {"amount": 5}).action == "always_run"
        assert permissions.verdict(payment, {"amount": 500}).action == "require_approval"
        assert permissions.conditional(payment)


async def test_a_verdict_no_argument_can_change_is_kept_until_the_manifest_changes(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        permissions = h.gateway._permissions
        items = permissions.lookup(OPERATOR, "api.items.get")
        payment = permissions.lookup(OPERATOR, "api.payments.create")
        assert items is not None and payment is not None
        first = permissions.verdict(items, {"id": "1"})
        assert first.action == "always_run" and permissions.verdict(items, {"id": "2"}) is first
        # A matching rule with ``when``: decided again for every call.
        assert permissions.verdict(payment, {"amount": 5}).action == "always_run"
        assert permissions.verdict(payment, {"amount": 500}).action == "require_approval"

        blocked = manifest_text().replace(
            '  - match: "*.admin.*"', '  - match: "api.items.*"\n    action: block\n  - match: "*.admin.*"', 1
        )
        await h.gateway.reload(parse_manifest(blocked, base_dir=tmp_path))
        items = permissions.lookup(OPERATOR, "api.items.get", include_hidden=True)
        assert items is not None and permissions.verdict(items, {"id": "1"}).action == "block"


async def test_an_action_blocked_whatever_its_arguments_is_hidden_but_call_still_finds_it(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        permissions = h.gateway._permissions
        assert permissions.lookup(OPERATOR, "api.admin.purge") is None
        purge = permissions.lookup(OPERATOR, "api.admin.purge", include_hidden=True)
        assert purge is not None and permissions.hidden(purge) and not permissions.allow(purge)
        assert permissions.verdict(purge, {}).action == "block"


async def test_not_found_suggests_close_visible_names(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        denied = await h.gateway._permissions.not_found(OPERATOR, "api.item.get")
        assert denied.reason == "action_not_found"
        assert denied.suggestions is not None and 0 < len(denied.suggestions) <= SUGGESTIONS
        assert denied.suggestions[0]["name"] == "api.items.get"


async def test_a_guess_its_spelling_does_not_find_is_searched_for_its_meaning(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        permissions = h.gateway._permissions
        assert permissions._index.suggest("api.send_amount", connectors={"api"}) == []  # no name is spelled so
        denied = await permissions.not_found(OPERATOR, "api.send_amount")
        assert denied.suggestions is not None
        assert denied.suggestions[0]["name"] == "api.payments.create"  # "Send a payment of an amount"
    async with harness(tmp_path / "granted", AGENTS + CONNECTORS) as h:
        # What the grant hides stays hidden from the search as from the spelling.
        bot = await h.gateway._permissions.not_found(Principal(user="alice", agent="bot"), "api.send_amount")
        assert all(s["name"].startswith("open.") for s in bot.suggestions or [])


async def test_catalogs_validate_arguments_and_list_states(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        catalogs = h.gateway._catalogs
        action = h.gateway._permissions.lookup(OPERATOR, "api.items.get")
        assert action is not None
        assert catalogs.validate(action, {"id": "1"}) == []
        assert catalogs.validate(action, {}) == [{"path": "(root)", "message": "'id' is a required property"}]
        assert {s.slug: s.status for s in catalogs.states()} == {"api": "ready", "vault": "ready", "open": "ready"}
        assert await catalogs.recover("api", principal="alice") is None  # not in error: nothing to recover


_UNNAMED_OPERATIONS = """{"openapi": "3.0.0", "info": {"title": "Pets", "version": "1"},
 "paths": {"/pets/{petId}": {"get": {"summary": "Get a pet", "responses": {"200": {"description": "ok"}}},
                             "delete": {"summary": "Delete a pet", "responses": {"200": {"description": "ok"}}}}}}"""


async def test_a_name_an_earlier_release_gave_still_resolves_and_its_rules_still_apply(tmp_path: Path) -> None:
    (tmp_path / "pets.json").write_text(_UNNAMED_OPERATIONS)
    text = (
        "project: unit\npolicies:\n  - match: pets.pets.by_pet_id.delete\n    action: block\n"
        "connectors:\n  - slug: pets\n    base_url: http://pets.test\n    source: {openapi: pets.json}\n"
    )
    async with harness(tmp_path, text) as h:
        permissions = h.gateway._permissions
        found = permissions.lookup(OPERATOR, "pets.pets.by_pet_id.get")
        assert found is not None and found.qualified_name == "pets.get_pet"
        assert permissions.lookup(OPERATOR, "Pets.Pets.ByPetId.Get") is found  # forgiving as any name
        # The block written for the old name still holds the renamed action: hidden, and blocked.
        assert permissions.lookup(OPERATOR, "pets.delete_pet") is None
        delete = permissions.lookup(OPERATOR, "pets.delete_pet", include_hidden=True)
        assert delete is not None and permissions.hidden(delete)
        assert permissions.verdict(delete, {"petId": "1"}).action == "block"
        assert permissions.verdict(found, {"petId": "1"}).action == "always_run"


async def test_a_huge_unknown_name_is_quoted_by_its_start(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        name = "api." + "x" * 100_000
        for result in (await h.gateway.call(OPERATOR, name, {}), await h.gateway.describe(OPERATOR, name)):
            payload = result_payload(result)
            assert payload["reason"] == "action_not_found"
            assert len(payload["message"]) < 2_000 and "(100004 characters)" in payload["message"], payload
