from __future__ import annotations

import base64
import pickle
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcp_gateway.credentials import CredentialVault
from mcp_gateway.crypto import AESGCMCipher
from mcp_gateway.errors import CredentialError
from mcp_gateway.secrets import CredentialKey, SecretValue, parse_secret_input

CANARY = "canary-7f3a9c1e-never-show-me"
KEY = b"k" * 32


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class DictStore:
    """The credential part of ``Store``, over a dict: the contract the vault relies on."""

    def __init__(self) -> None:
        self.rows: dict[CredentialKey, bytes] = {}

    async def put_credential(self, key: CredentialKey, sealed: bytes) -> None:
        self.rows[key] = sealed

    async def get_credential(self, key: CredentialKey) -> bytes | None:
        return self.rows.get(key)

    async def delete_credential(self, key: CredentialKey) -> None:
        self.rows.pop(key, None)

    async def list_credentials(self) -> list[CredentialKey]:
        return sorted(self.rows, key=lambda k: (k.connector, k.principal, k.name))

    async def replace_all_credentials(self, sealed: dict[CredentialKey, bytes]) -> None:
        self.rows = dict(sealed)


@pytest.fixture(params=["dict", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "dict":
        yield DictStore()
        return
    sqlite = pytest.importorskip("mcp_gateway.store.sqlite")
    s = sqlite.SQLiteStore(tmp_path / "gateway.db")
    await s.open()
    try:
        yield s
    finally:
        await s.close()


def _vault(store: Any, key: bytes = KEY, project: str = "demo") -> CredentialVault:
    return CredentialVault(store, AESGCMCipher(key, project=project), project=project)


# -- SecretValue ------------------------------------------------------------------------------


def test_secret_value_never_prints_itself() -> None:
    for value in (CANARY, {"username": "u", "password": CANARY}):
        secret = SecretValue(value)
        for text in (repr(secret), str(secret), f"{secret}", f"{secret!r}", repr([secret]), repr({"s": secret})):
            assert CANARY not in text
        assert repr(secret) == "SecretValue([secure])"
        assert secret.reveal() == value
        with pytest.raises(TypeError):
            pickle.dumps(secret)


def test_redaction_forms_plain() -> None:
    forms = SecretValue("a b/c+d").redaction_forms()
    assert {"a b/c+d", "a%20b%2Fc%2Bd", "a%20b%2fc%2bd", "a+b%2Fc%2Bd", "Bearer a b/c+d"} <= forms
    assert base64.b64encode(b"a b/c+d").decode() in forms
    assert SecretValue("abc").redaction_forms() == set()  # too short to redact on its own


def test_redaction_forms_basic() -> None:
    forms = SecretValue({"username": "alice", "password": CANARY}).redaction_forms()
    assert CANARY in forms
    assert base64.b64encode(f"alice:{CANARY}".encode()).decode() in forms
    assert "Basic " + base64.b64encode(f"alice:{CANARY}".encode()).decode() in forms
    assert "alice" not in forms  # an identifier, not a secret


# -- vault ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_round_trip_plain_and_json(store: Any) -> None:
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
async def test_own_credential_wins_over_project_wide(store: Any) -> None:
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
async def test_configured_keys_delete(store: Any) -> None:
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
async def test_sealed_credential_repr_has_no_bytes(store: Any) -> None:
    vault = _vault(store)
    await vault.put("github", CANARY)
    sealed = await vault.sealed("github", principal="alice")
    assert sealed is not None
    text = repr(sealed) + str(sealed) + repr(vault)
    assert CANARY not in text and not re.search(r"\bb'|\\x", text)
    assert "github" in repr(sealed)


@pytest.mark.anyio
async def test_moved_blob_does_not_open(store: Any) -> None:
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
async def test_other_project_or_key_does_not_open(store: Any) -> None:
    await _vault(store).put("github", CANARY)
    for vault in (_vault(store, project="other"), _vault(store, key=b"z" * 32)):
        sealed = await vault.sealed("github", principal="alice")
        assert sealed is not None
        with pytest.raises(CredentialError) as info:
            sealed.open()
        assert CANARY not in str(info.value)


@pytest.mark.anyio
async def test_rotate(store: Any) -> None:
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
async def test_rotate_aborts_without_changes_when_a_credential_does_not_open(store: Any) -> None:
    vault = _vault(store)
    await vault.put("github", CANARY)
    await _vault(store, key=b"z" * 32).put("gitlab", CANARY)  # sealed under a key nobody has now
    before = {k: await store.get_credential(k) for k in await store.list_credentials()}
    with pytest.raises(CredentialError, match="nothing was changed") as info:
        await vault.rotate(AESGCMCipher(b"n" * 32, project="demo"))
    assert "gitlab" in str(info.value) and CANARY not in str(info.value)
    assert {k: await store.get_credential(k) for k in await store.list_credentials()} == before


# -- parse_secret_input -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["bearer", "api_key", "custom", "hmac"])
def test_plain_kinds_strip_one_newline_only(kind: str) -> None:
    assert parse_secret_input(kind, f"{CANARY}\n") == CANARY
    assert parse_secret_input(kind, f"{CANARY}\r\n") == CANARY
    assert parse_secret_input(kind, f" {CANARY} \n\n") == f" {CANARY} \n"


def test_custom_accepts_json_object() -> None:
    assert parse_secret_input("custom", '{"id": "a", "key": "b"}\n') == {"id": "a", "key": "b"}


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        ("basic", '{"username": "u", "password": "p"}', {"username": "u", "password": "p"}),
        (
            "oauth1",
            '{"consumer_key": "a", "consumer_secret": "b", "token": "c", "token_secret": "d"}',
            {"consumer_key": "a", "consumer_secret": "b", "token": "c", "token_secret": "d"},
        ),
        (
            "aws_sigv4",
            '{"access_key_id": "a", "secret_access_key": "b"}',
            {"access_key_id": "a", "secret_access_key": "b"},
        ),
        (
            "aws_sigv4",
            '{"access_key_id": "a", "secret_access_key": "b", "session_token": "c"}\n',
            {"access_key_id": "a", "secret_access_key": "b", "session_token": "c"},
        ),
        ("mtls", '{"cert_pem": "C", "key_pem": "K"}', {"cert_pem": "C", "key_pem": "K"}),
        ("oauth2", '{"client_id": "i", "client_secret": "s"}', {"client_id": "i", "client_secret": "s"}),
    ],
)
def test_json_shapes(kind: str, raw: str, expected: dict[str, str]) -> None:
    assert parse_secret_input(kind, raw) == expected


@pytest.mark.parametrize(
    ("kind", "raw", "match"),
    [
        ("bearer", "\n", "empty"),
        ("basic", CANARY, "not valid JSON"),
        ("basic", f'{{"username": "u", "password": "{CANARY}"', "not valid JSON"),
        ("basic", f'["{CANARY}"]', "must be a JSON object"),
        ("basic", f'{{"username": "u", "pass": "{CANARY}"}}', "missing 'password'"),
        ("basic", f'{{"username": "", "password": "{CANARY}"}}', "missing 'username'"),
        ("basic", f'{{"username": "u", "password": "p", "{CANARY}": "x"}}', "1 unexpected field"),
        ("basic", f'{{"username": 5, "password": "{CANARY}"}}', "'username' must be a string"),
        ("aws_sigv4", f'{{"secret_access_key": "{CANARY}"}}', "missing 'access_key_id'"),
        ("none", CANARY, "takes no secret"),
    ],
)
def test_bad_input_is_explained_without_echoing_it(kind: str, raw: str, match: str) -> None:
    with pytest.raises(CredentialError, match=match) as info:
        parse_secret_input(kind, raw)
    message = str(info.value)
    assert CANARY not in message
    if kind == "basic" and "empty" not in match:
        assert '{"username": "...", "password": "..."}' in message
