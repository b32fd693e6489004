"""``secrets``: a revealed secret never prints itself, what a response would leak it as, and what
``secret set`` reads for each auth kind (its errors never echo the input)."""

from __future__ import annotations

import base64
import json
import pickle
import unicodedata

import pytest

from mcp_gateway.primitives.secrets import SecretValue, parse_secret_input
from mcp_gateway.vocabulary.errors import CredentialError
from mcp_gateway.vocabulary.model import AuthKind

CANARY = "canary-7f3a9c1e-never-show-me"


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


def test_a_secret_beyond_ascii_is_redacted_as_a_latin1_reader_echoes_its_utf8_bytes() -> None:
    # Sent as UTF-8 in a header, it came back from a server reading header bytes as Latin-1 as "clÃ©".
    for value in ("CANARY-clé-4711", "CANARY-ключ-4711"):
        forms = SecretValue(value).redaction_forms()
        misread = value.encode().decode("latin-1")
        assert misread in forms and json.dumps(misread)[1:-1] in forms
    assert "CANARY-cl\u00c3\u00a9-4711" in SecretValue("CANARY-clé-4711").redaction_forms()
    assert "CANARY-clâ€™-4711" in SecretValue("CANARY-cl\u2019-4711").redaction_forms()  # read as Windows-1252


def test_a_secret_beyond_ascii_is_redacted_in_every_spelling_an_upstream_writes_it_in() -> None:
    value = "CANARY-p85-pässwörd+Z9/="
    forms = SecretValue({"username": "u", "password": value}).redaction_forms()
    for spelling in (
        unicodedata.normalize("NFD", value),  # reads the same
        "CANARY-p85-p?ssw?rd+Z9/=",  # letters beyond ASCII as '?'
        "CANARY-p85-p\ufffdssw\ufffdrd+Z9/=",  # Latin-1 bytes read as UTF-8
        "CANARY-p85-p\ufffd\ufffdssw\ufffd\ufffdrd+Z9/=",  # one U+FFFD per UTF-8 byte
        "CANARY-p85-psswrd+Z9/=",  # dropped
        "CANARY-p85-password+Z9/=",  # accents stripped
        "CANARY-p85-paesswoerd+Z9/=",  # as German writes it
    ):
        assert spelling in forms, spelling
    assert "Gruesse-2026!" in SecretValue("Grüße-2026!").redaction_forms()
    assert "MARKE-\u00c5-17" in SecretValue("MARKE-\u212b-17").redaction_forms()  # NFC/NFKC of the Angstrom sign
    assert "????" not in SecretValue("ключ").redaction_forms()  # too little of it left to tell it by


def test_the_spellings_of_a_secret_with_many_letters_beyond_ascii_stay_few() -> None:
    # Each spelling changes every such letter at once: 40 letters give no more forms than two do.
    few = SecretValue("CANARY-ключ-4711").redaction_forms()
    many = SecretValue("CANARY-" + "ключ" * 10 + "-4711").redaction_forms()
    assert len(many) <= len(few) + 10 < 1000
    assert "CANARY-" + "????" * 10 + "-4711" in many


def test_a_basic_header_is_redacted_whatever_the_password_length() -> None:
    # "API key as the username, password x": the whole credential is the username.
    forms = SecretValue({"username": CANARY, "password": "x"}).redaction_forms()
    token = base64.b64encode(f"{CANARY}:x".encode()).decode()
    assert {"Basic " + token, token, CANARY, f"{CANARY}:x"} <= forms
    assert (
        "Basic " + base64.b64encode(b"ab:x").decode()
        in SecretValue({"username": "ab", "password": "x"}).redaction_forms()
    )
    assert "alice" not in SecretValue({"username": "alice", "password": CANARY}).redaction_forms()


# -- parse_secret_input -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["bearer", "api_key", "custom", "hmac"])
def test_plain_kinds_strip_one_newline_only(kind: AuthKind) -> None:
    assert parse_secret_input(kind, f"{CANARY}\n") == CANARY
    assert parse_secret_input(kind, f"{CANARY}\r\n") == CANARY
    assert parse_secret_input("hmac", f" {CANARY} \n\n") == f" {CANARY} \n"  # a key that only signs: as given


@pytest.mark.parametrize("kind", ["bearer", "api_key", "custom"])
@pytest.mark.parametrize("raw", [f" {CANARY}", f"{CANARY} ", f"{CANARY}\t\n", f"{CANARY}\n\n", "a\x00b"])
def test_a_value_sent_as_written_with_whitespace_around_it_or_a_control_character_is_refused(
    kind: AuthKind, raw: str
) -> None:
    # Sent in a header, it would fail every call later, far from the paste that caught the space.
    with pytest.raises(CredentialError, match="paste the value alone") as info:
        parse_secret_input(kind, raw)
    assert CANARY not in str(info.value)


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
def test_json_shapes(kind: AuthKind, raw: str, expected: dict[str, str]) -> None:
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
def test_bad_input_is_explained_without_echoing_it(kind: AuthKind, raw: str, match: str) -> None:
    with pytest.raises(CredentialError, match=match) as info:
        parse_secret_input(kind, raw)
    message = str(info.value)
    assert CANARY not in message
    if kind == "basic" and "empty" not in match:
        assert '{"username": "...", "password": "..."}' in message


@pytest.mark.parametrize("kind", ["bearer", "api_key", "custom"])
@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (f"{CANARY}\u200b", "an invisible formatting character at the end"),  # a zero-width space
        (f"\ufeff{CANARY}", "an invisible formatting character at the start"),  # a byte-order mark
        (f"canary\u202e{CANARY}", "an invisible formatting character inside it"),  # right-to-left override
        (f"{CANARY}\u00a0", "a space other than the ordinary one at the end"),
        (f"{CANARY}-clé", "a character beyond ASCII at the end"),
        (f"{CANARY}\u2028", "a line break at the end"),
    ],
)
def test_a_value_sent_as_written_is_visible_ascii(kind: AuthKind, raw: str, problem: str) -> None:
    # Saved as connected, it went out as raw UTF-8 bytes that no upstream reads as the key.
    with pytest.raises(CredentialError, match=f"the {kind} secret holds {problem}; paste the value alone") as info:
        parse_secret_input(kind, raw)
    assert CANARY not in str(info.value)


def test_a_stdio_servers_secret_may_hold_letters_beyond_ascii() -> None:
    # It goes into the child's environment, not a header.
    assert parse_secret_input("bearer", "pässwörd-ключ", over_http=False) == "pässwörd-ключ"
    with pytest.raises(CredentialError, match="invisible formatting character at the end"):
        parse_secret_input("bearer", "pässwörd\u200b", over_http=False)


@pytest.mark.parametrize("field", [f" {CANARY}", f"{CANARY}\n", f"{CANARY}\u200b", f"{CANARY}-ключ"])
def test_each_field_of_a_custom_json_secret_is_checked_as_the_plain_form_is(field: str) -> None:
    with pytest.raises(CredentialError, match="a field of the custom secret holds") as info:
        parse_secret_input("custom", json.dumps({"org": "acme", "key": field}))
    assert CANARY not in str(info.value)


@pytest.mark.parametrize(
    ("kind", "fields", "match"),
    [
        ("basic", {"username": "ali:ce", "password": CANARY}, "basic username contains ':'"),
        ("basic", {"username": f"{CANARY} ", "password": "x"}, "'username' holds whitespace at the end"),
        ("basic", {"username": "alice", "password": f"{CANARY}\u0007"}, "'password' holds a control character"),
        (
            "oauth1",
            {"consumer_key": "c", "consumer_secret": f"\ufeff{CANARY}", "token": "t", "token_secret": "s"},
            "'consumer_secret' holds an invisible formatting character at the start",
        ),
        (
            "aws_sigv4",
            {"access_key_id": "AKIA1", "secret_access_key": "s", "session_token": f"{CANARY}-tøken"},
            "'session_token' holds a character beyond ASCII inside it",
        ),
        ("oauth2", {"client_id": "i", "client_secret": f"{CANARY}\ud800"}, "half of a UTF-16 pair"),
    ],
)
def test_json_fields_are_refused_for_what_their_kind_cannot_send(
    kind: AuthKind, fields: dict[str, str], match: str
) -> None:
    with pytest.raises(CredentialError, match=match) as info:
        parse_secret_input(kind, json.dumps(fields))
    assert CANARY not in str(info.value)


def test_json_fields_encoded_before_sending_keep_their_letters() -> None:
    # Basic base64-encodes UTF-8 (RFC 7617), OAuth 1.0a percent-encodes: these letters arrive intact.
    basic = {"username": "josé", "password": " pässwort "}
    assert parse_secret_input("basic", json.dumps(basic)) == basic
    oauth1 = {"consumer_key": "clé", "consumer_secret": "sécret", "token": "t", "token_secret": "s"}
    assert parse_secret_input("oauth1", json.dumps(oauth1)) == oauth1


def test_a_blank_hmac_key_is_refused() -> None:
    # Under key_encoding hex it became an empty key signing every request.
    with pytest.raises(CredentialError, match="blank"):
        parse_secret_input("hmac", "   \n")
