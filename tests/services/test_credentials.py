"""``CredentialVault``: sealing into a ``CredentialStore`` and finding a credential again, over the
in-memory fake and SQLite (the pure ``SecretValue`` and input parsing: tests/test_secrets.py)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp_gateway.primitives.crypto import AESGCMCipher
from mcp_gateway.primitives.secrets import CredentialKey
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.store import CredentialStore, MemoryStore, SQLiteStore
from mcp_gateway.vocabulary.errors import CredentialError

CANARY = "canary-7f3a9c1e-never-show-me"
KEY = b"k" * 32


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[CredentialStore]:
    s: MemoryStore | SQLiteStore = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "gateway.db")
    await s.open()
    try:
        yield s
    finally:
        await s.close()


def _vault(store: CredentialStore, key: bytes = KEY, project: str = "demo") -> CredentialVault:
    return CredentialVault(store, AESGCMCipher(key, project=project), project=project)


# -- vault ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_round_trip_plain_and_json(store: CredentialStore) -> None:
    vault = _vault(store)
    await vault.put("github", CANARY)
    await vault.put("jira", {"username": "alice", "password": CANARY})
    await vault.put("odd", '{"looks": "like json"}')

    github = await vault.sealed("github", principal="alice")
    assert github is not None and github.open().reveal() == CANARY
    jira = await vault.sealed("jira", principal="alice")
    assert jira is not None and jira.open().reveal() == {"username": "alice", "password": CANARY}
    odd = await vault.sealed("odd", principal="alice")
    assert odd is not None and odd.open().reveal() == '{"looks": "like json"}'  # a string stays a string

    for key in await store.list_credentials():
        assert CANARY.encode() not in await store.get_credential(key)


@pytest.mark.anyio
async def test_own_credential_wins_over_project_wide(store: CredentialStore) -> None:
    vault = _vault(store)
    await vault.put("github", "team-token")
    await vault.put("github", "alice-token", principal="alice")

    alice = await vault.sealed("github", principal="alice")
    bob = await vault.sealed("github", principal="bob")
    assert alice is not None and alice.open().reveal() == "alice-token" and alice.key.principal == "alice"
    assert bob is not None and bob.open().reveal() == "team-token" and bob.key.principal == "*"
    assert await vault.sealed("github", principal="bob", name="other") is None
    assert await vault.sealed("gitlab", principal="alice") is None


@pytest.mark.anyio
async def test_configured_keys_delete(store: CredentialStore) -> None:
    vault = _vault(store)
    assert not await vault.configured("github")
    await vault.put("github", CANARY, principal="alice")
    assert await vault.configured("github")
    assert await vault.configured("github", principal="alice")
    assert not await vault.configured("github", principal="bob")
    assert await vault.keys("github") == [CredentialKey(connector="github", principal="alice")]
    assert await vault.delete("github", principal="alice")
    assert not await vault.delete("github", principal="alice")
    assert not await vault.configured("github")


@pytest.mark.anyio
async def test_sealed_credential_repr_has_no_bytes(store: CredentialStore) -> None:
    vault = _vault(store)
    await vault.put("github", CANARY)
    sealed = await vault.sealed("github", principal="alice")
    assert sealed is not None
    text = repr(sealed) + str(sealed) + repr(vault)
    assert CANARY not in text and not re.search(r"\bb'|\\x", text)
    assert "github" in repr(sealed)


@pytest.mark.anyio
async def test_moved_blob_does_not_open(store: CredentialStore) -> None:
    """The associated data binds a blob to its row: copying it elsewhere yields no secret."""
    vault = _vault(store)
    await vault.put("github", CANARY, principal="alice")
    blob = await store.get_credential(CredentialKey(connector="github", principal="alice"))
    await store.put_credential(CredentialKey(connector="github", principal="*"), blob)
    await store.put_credential(CredentialKey(connector="gitlab", principal="alice"), blob)
    for connector, principal in (("github", "bob"), ("gitlab", "alice")):
        sealed = await vault.sealed(connector, principal=principal)
        assert sealed is not None
        with pytest.raises(CredentialError) as info:
            sealed.open()
        assert CANARY not in str(info.value)


@pytest.mark.anyio
async def test_other_project_or_key_does_not_open(store: CredentialStore) -> None:
    await _vault(store).put("github", CANARY)
    for vault in (_vault(store, project="other"), _vault(store, key=b"z" * 32)):
        sealed = await vault.sealed("github", principal="alice")
        assert sealed is not None
        with pytest.raises(CredentialError) as info:
            sealed.open()
        assert CANARY not in str(info.value)


@pytest.mark.anyio
async def test_rotate(store: CredentialStore) -> None:
    vault = _vault(store)
    await vault.put("github", CANARY)
    await vault.put("jira", {"username": "alice", "password": CANARY}, principal="alice")
    new_cipher = AESGCMCipher(b"n" * 32, project="demo")

    assert await vault.rotate(new_cipher) == 2
    for key in await store.list_credentials():
        assert AESGCMCipher.key_id_of(await store.get_credential(key)) == new_cipher.key_id
    fresh = _vault(store, key=b"n" * 32)
    sealed = await fresh.sealed("jira", principal="alice")
    assert sealed is not None and sealed.open().reveal() == {"username": "alice", "password": CANARY}
    same = await vault.sealed("github", principal="x")  # the rotated vault uses the new key
    assert same is not None and same.open().reveal() == CANARY
    old = await _vault(store).sealed("github", principal="x")
    assert old is not None
    with pytest.raises(CredentialError):
        old.open()
    assert await vault.rotate(new_cipher) == 2  # running it again changes nothing


@pytest.mark.anyio
async def test_rotate_aborts_without_changes_when_a_credential_does_not_open(store: CredentialStore) -> None:
    vault = _vault(store)
    await vault.put("github", CANARY)
    await _vault(store, key=b"z" * 32).put("gitlab", CANARY)  # sealed under a key nobody has now
    before = {k: await store.get_credential(k) for k in await store.list_credentials()}
    with pytest.raises(CredentialError, match="nothing was changed") as info:
        await vault.rotate(AESGCMCipher(b"n" * 32, project="demo"))
    assert "gitlab" in str(info.value) and CANARY not in str(info.value)
    assert "`mcp-gateway secret delete gitlab default`" in str(info.value)  # a command that exists
    assert {k: await store.get_credential(k) for k in await store.list_credentials()} == before
