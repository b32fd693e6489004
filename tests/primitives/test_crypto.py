from __future__ import annotations

import base64
import os
import secrets
import stat
from pathlib import Path

import pytest

from mcp_gateway.primitives.crypto import (
    KEY_ENV_VAR,
    AESGCMCipher,
    credential_aad,
    derive_key,
    load_master_key,
    parse_master_key,
)
from mcp_gateway.vocabulary.errors import CredentialError

CANARY = "canary-7f3a9c1e-never-show-me"
KEY = b"k" * 32
AAD = credential_aad("demo", "github", "*", "default")


def _assert_clean(exc: BaseException, *secrets_: bytes | str) -> None:
    text = f"{exc} {exc!r} {exc.args}"
    for s in secrets_:
        needle = s.decode("latin-1") if isinstance(s, bytes) else s
        assert needle not in text
    # No crypto-library exception rides along (its text and traceback are not for the operator).
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)


def test_round_trip_and_fresh_nonce() -> None:
    cipher = AESGCMCipher(KEY, project="demo")
    a = cipher.seal(CANARY.encode(), aad=AAD)
    b = cipher.seal(CANARY.encode(), aad=AAD)
    assert a != b  # a fresh nonce each time
    assert CANARY.encode() not in a
    assert cipher.open(a, aad=AAD) == CANARY.encode()
    assert a[0] == 1 and AESGCMCipher.key_id_of(a) == cipher.key_id
    assert len(a) == 1 + 8 + 12 + len(CANARY) + 16


@pytest.mark.parametrize("index", [0, 1, 9, 21, 25, -1], ids=["version", "kid", "nonce", "body", "body2", "tag"])
def test_tampered_value_fails_closed(index: int) -> None:
    cipher = AESGCMCipher(KEY, project="demo")
    sealed = bytearray(cipher.seal(CANARY.encode(), aad=AAD))
    sealed[index] ^= 0x01
    with pytest.raises(CredentialError) as info:
        cipher.open(bytes(sealed), aad=AAD)
    _assert_clean(info.value, CANARY, KEY)


def test_truncated_value_fails() -> None:
    cipher = AESGCMCipher(KEY, project="demo")
    sealed = cipher.seal(CANARY.encode(), aad=AAD)
    for cut in (0, 5, 21, 36):
        with pytest.raises(CredentialError):
            cipher.open(sealed[:cut], aad=AAD)


def test_wrong_project_fails_and_names_key_ids() -> None:
    sealed = AESGCMCipher(KEY, project="demo").seal(CANARY.encode(), aad=AAD)
    other = AESGCMCipher(KEY, project="other")
    with pytest.raises(CredentialError, match="another master key or project") as info:
        other.open(sealed, aad=AAD)
    _assert_clean(info.value, CANARY, KEY)


def test_wrong_master_key_fails() -> None:
    sealed = AESGCMCipher(KEY, project="demo").seal(CANARY.encode(), aad=AAD)
    with pytest.raises(CredentialError) as info:
        AESGCMCipher(b"x" * 32, project="demo").open(sealed, aad=AAD)
    _assert_clean(info.value, CANARY, KEY)


@pytest.mark.parametrize(
    "aad",
    [
        credential_aad("demo", "gitlab", "*", "default"),
        credential_aad("demo", "github", "alice", "default"),
        credential_aad("demo", "github", "*", "other"),
        credential_aad("other", "github", "*", "default"),
    ],
    ids=["connector", "principal", "name", "project"],
)
def test_wrong_binding_fails(aad: bytes) -> None:
    cipher = AESGCMCipher(KEY, project="demo")
    sealed = cipher.seal(CANARY.encode(), aad=AAD)
    with pytest.raises(CredentialError, match="failed authentication") as info:
        cipher.open(sealed, aad=aad)
    _assert_clean(info.value, CANARY, KEY)


def test_aad_is_unambiguous() -> None:
    assert credential_aad("p", "a:b", "c", "d") != credential_aad("p", "a", "b:c", "d")
    assert credential_aad("p", 'a","b', "c", "d") != credential_aad("p", "a", "b", "c")


def test_short_key_rejected_with_a_way_to_make_one() -> None:
    with pytest.raises(CredentialError, match=r"secrets\.token_urlsafe\(32\)"):
        AESGCMCipher(b"short", project="demo")


@pytest.mark.parametrize("bad", [32, "k" * 32, None])
def test_key_bytes_never_coerced(bad: object) -> None:
    with pytest.raises(TypeError):
        AESGCMCipher(bad, project="demo")  # type: ignore[arg-type]


def test_repr_shows_no_key() -> None:
    cipher = AESGCMCipher(KEY, project="demo")
    assert "kkkk" not in repr(cipher) and cipher.key_id in repr(cipher)


# -- master key -----------------------------------------------------------------------------


def test_parse_master_key_rule() -> None:
    raw = secrets.token_bytes(32)
    assert parse_master_key(raw.hex()) == raw
    assert parse_master_key(raw.hex().upper()) == raw
    assert parse_master_key(base64.urlsafe_b64encode(raw).decode().rstrip("=")) == raw
    assert parse_master_key(base64.urlsafe_b64encode(raw).decode()) == raw
    phrase = "correct horse battery staple, twice over!"
    assert parse_master_key(phrase) == phrase.encode()
    assert parse_master_key(f"  {raw.hex()}\n") == raw
    with pytest.raises(CredentialError, match="too short") as info:
        parse_master_key("hunter2-is-short")
    assert "hunter2" not in str(info.value)


def test_env_key_wins_and_no_file_is_written(tmp_path: Path) -> None:
    raw = secrets.token_bytes(32)
    state = tmp_path / "state"
    assert load_master_key({KEY_ENV_VAR: raw.hex()}, state) == raw
    assert not state.exists()


def test_short_env_key_rejected(tmp_path: Path) -> None:
    with pytest.raises(CredentialError, match="token_urlsafe"):
        load_master_key({KEY_ENV_VAR: "too-short"}, tmp_path)


def test_key_file_created_private_and_reused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    old = os.umask(0)  # even with a permissive umask the key must be private
    try:
        key = load_master_key({}, state)
    finally:
        os.umask(old)
    path = state / "master.key"
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert load_master_key({}, state) == key
    assert load_master_key({KEY_ENV_VAR: ""}, state) == key  # an empty variable is "not set"
    # The file's text works as the environment variable too.
    assert load_master_key({KEY_ENV_VAR: path.read_text()}, tmp_path / "elsewhere") == key
    assert [p.name for p in state.iterdir()] == ["master.key"]  # no temporary file left behind


def test_open_key_file_refused(tmp_path: Path) -> None:
    load_master_key({}, tmp_path)
    path = tmp_path / "master.key"
    path.chmod(0o644)
    with pytest.raises(CredentialError, match="chmod 600"):
        load_master_key({}, tmp_path)


def test_empty_key_file_refused(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    path.write_bytes(b"")
    path.chmod(0o600)
    with pytest.raises(CredentialError, match="too short or empty"):
        load_master_key({}, tmp_path)


def test_loaded_key_works_with_cipher(tmp_path: Path) -> None:
    key = load_master_key({}, tmp_path)
    cipher = AESGCMCipher(key, project="demo")
    again = AESGCMCipher(load_master_key({}, tmp_path), project="demo")
    assert again.open(cipher.seal(b"x", aad=AAD), aad=AAD) == b"x"


def test_derived_keys_are_stable_and_bound_to_purpose_and_project() -> None:
    from mcp_gateway.server.elicitation import derive_request_state_key

    pages = derive_key(KEY, "pages", "demo")
    assert pages == derive_key(KEY, "pages", "demo") and len(pages) == 32  # every instance derives the same
    others = {
        derive_key(KEY, "pages", "other"),
        derive_key(KEY, "csrf", "demo"),
        derive_key(b"j" * 32, "pages", "demo"),
        derive_request_state_key(KEY, "demo"),
    }
    assert pages not in others and len(others) == 4
    with pytest.raises(ValueError, match="plain word"):
        derive_key(KEY, "v1/project", "demo")  # cannot be made to spell the sealing key's label
