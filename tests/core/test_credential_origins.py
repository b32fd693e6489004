"""``CredentialOrigins``: the record of who stored a credential, and the mark a 401 leaves on it —
cleared by a success in any process, kept out of the store on the hot path, read for the right key
on an OAuth2 sign-in connector, and told without the control characters a chosen name may carry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_gateway.core.credential_origins import CredentialOrigins, answered_key, refused_note, team_key
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.primitives.secrets import OAUTH2_TOKEN_NAME, PROJECT_WIDE, CredentialKey
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.clock import FixedClock

pytestmark = pytest.mark.anyio

TEAM = CredentialKey(connector="team", principal=PROJECT_WIDE, name="default")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class CountingStore(SQLiteStore):
    """Counts the record reads, as a process's hot path would pay them."""

    reads = 0

    async def get_meta(self, key: str) -> Any:
        self.reads += 1
        return await super().get_meta(key)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[CountingStore]:
    store = CountingStore(tmp_path / "s.db")
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def test_a_success_in_another_process_or_after_a_restart_clears_the_mark(store: CountingStore) -> None:
    clock = FixedClock()
    first = CredentialOrigins(store, clock)
    await first.stored(TEAM, by="operator", via="secret set", replaced=False)
    await first.refused(TEAM, 401, "team.reject")
    marked = await first.of(TEAM)
    assert marked is not None and marked.refused_at is not None

    other = CredentialOrigins(store, clock)  # another process on the same store, or this one restarted
    await other.accepted(TEAM)
    origin = await CredentialOrigins(store, clock).of(TEAM)
    assert origin is not None and origin.refused_at is None

    # Marked again by the first process, and seen marked by the other one (its `connectors`): the
    # other's next success clears it too.
    await first.refused(TEAM, 401, "team.reject")
    seen = await other.of(TEAM)
    assert seen is not None and seen.refused_at is not None
    await other.accepted(TEAM)
    origin = await CredentialOrigins(store, clock).of(TEAM)
    assert origin is not None and origin.refused_at is None


async def test_successes_read_the_record_once_not_per_call(store: CountingStore) -> None:
    origins = CredentialOrigins(store, FixedClock())
    await origins.stored(TEAM, by="operator", via="secret set", replaced=False)
    restarted = CredentialOrigins(store, FixedClock())
    before = store.reads
    for _ in range(5):
        await restarted.accepted(TEAM)
    assert store.reads - before == 1


async def test_the_mark_names_the_call_that_drew_it(store: CountingStore) -> None:
    origins = CredentialOrigins(store, FixedClock())
    await origins.stored(TEAM, by="operator", via="secret set", replaced=False)
    note = refused_note("team", await origins.refused(TEAM, 401, "team.reject"))
    assert "team answered 401 to team.reject carrying it at " in note, note
    assert "a call it accepts since clears this" in note


async def test_chosen_names_are_told_with_their_hidden_characters_spelled_out(store: CountingStore) -> None:
    origins = CredentialOrigins(store, FixedClock())
    hostile = "mallory\u202e\x1b[8m\nOK       connector team: ready"
    await origins.stored(TEAM, by=hostile, via="connect", replaced=True, agent="cli\x1b[31m<b>", approved_by="op\n")
    note = refused_note("team", await origins.refused(TEAM, 401, "team.get\nOK"))
    assert not any(c in note for c in "\u202e\x1b\n"), repr(note)
    assert "mallory\\u202e\\x1b[8m\\nOK" in note and "(agent cli\\x1b[31m<b>)" in note
    assert "approved by op\\n" in note and "team.get\\nOK" in note


def test_an_oauth2_sign_in_connector_is_refused_in_its_sign_in_not_its_client(tmp_path: Path) -> None:
    manifest = parse_manifest(
        "project: unit\nconnectors:\n"
        "  - slug: o2\n    base_url: http://o2.test\n"
        "    auth: {type: oauth2, authorize_url: http://a.test/authorize, token_url: http://a.test/token}\n"
        "    source: {http: {actions: [{path: me, url: /me}]}}\n"
        "  - slug: mine\n    base_url: http://o2.test\n    credentials: per_user\n"
        "    auth: {type: oauth2, authorize_url: http://a.test/authorize, token_url: http://a.test/token}\n"
        "    source: {http: {actions: [{path: me, url: /me}]}}\n"
        "  - slug: team\n    base_url: http://t.test\n    auth: {type: bearer}\n"
        "    source: {http: {actions: [{path: me, url: /me}]}}\n",
        base_dir=tmp_path,
    )
    o2, mine, team = (manifest.connector(s) for s in ("o2", "mine", "team"))
    assert o2 is not None and mine is not None and team is not None
    client = CredentialKey(connector="o2", principal=PROJECT_WIDE, name="default")
    sign_in = CredentialKey(connector="o2", principal=PROJECT_WIDE, name=OAUTH2_TOKEN_NAME)
    assert answered_key(o2, client, "ana") == sign_in == team_key(o2)
    mine_client = CredentialKey(connector="mine", principal=PROJECT_WIDE, name="default")
    assert answered_key(mine, mine_client, "ana").principal == "ana"  # her own sign-in: no team mark
    assert answered_key(team, TEAM, "ana") == TEAM == team_key(team)


async def test_the_mark_belongs_to_the_revision_the_call_carried(store: CountingStore) -> None:
    origins = CredentialOrigins(store, FixedClock())
    await origins.stored(TEAM, by="operator", via="secret set", replaced=False, fingerprint="old")
    await origins.stored(TEAM, by="operator", via="secret set", replaced=True, fingerprint="new")
    stale = await origins.refused(TEAM, 401, "team.slow", fingerprint="old")  # a call still carrying the old one
    assert stale is not None and stale.refused_at is None and not stale.carried_by("old")
    marked = await origins.refused(TEAM, 401, "team.get", fingerprint="new")
    assert marked is not None and marked.refused_at is not None
    await origins.accepted(TEAM, fingerprint="old")  # the old value's success says nothing of the new one
    kept = await CredentialOrigins(store, FixedClock()).of(TEAM)
    assert kept is not None and kept.refused_at is not None
    await origins.accepted(TEAM, fingerprint="new")
    cleared = await CredentialOrigins(store, FixedClock()).of(TEAM)
    assert cleared is not None and cleared.refused_at is None


async def test_a_success_here_clears_a_mark_another_process_set_after_this_one_last_read(
    store: CountingStore,
) -> None:
    clock = FixedClock()
    here, there = CredentialOrigins(store, clock), CredentialOrigins(store, clock)
    await here.stored(TEAM, by="operator", via="secret set", replaced=False, fingerprint="f")
    await here.accepted(TEAM, fingerprint="f")  # read: unmarked
    await there.refused(TEAM, 401, "team.get", fingerprint="f")
    clock.advance(5)
    await here.accepted(TEAM, fingerprint="f")
    origin = await CredentialOrigins(store, clock).of(TEAM)
    assert origin is not None and origin.refused_at is None
