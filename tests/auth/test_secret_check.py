"""``auth.secret_check.unusable``: a secret its connector could never use is refused where it is entered."""

from __future__ import annotations

import trustme

from mcp_gateway.auth.secret_check import over_http, unusable
from mcp_gateway.manifest import BearerAuth, CustomAuth, HmacAuth, MtlsAuth, parse_manifest


def test_an_hmac_key_must_be_in_the_encoding_the_connector_declares() -> None:
    assert unusable(HmacAuth(type="hmac", key_encoding="hex"), "zz-not-hex") is not None
    assert unusable(HmacAuth(type="hmac", key_encoding="hex"), "00ff10") is None
    assert unusable(HmacAuth(type="hmac", key_encoding="base64"), "c2VjcmV0") is None
    assert unusable(HmacAuth(type="hmac"), "any text at all") is None  # utf-8: every string is a key


def test_an_hmac_key_that_decodes_to_nothing_is_refused() -> None:
    # Every request was signed with the empty key, and each call answered "reconnect".
    assert "empty key" in (unusable(HmacAuth(type="hmac", key_encoding="hex"), " \n") or "")


def test_a_stdio_servers_secret_is_not_sent_over_http() -> None:
    manifest = parse_manifest(
        "project: p\nconnectors:\n"
        "  - {slug: child, source: {mcp: {command: [server], env: {T: '{secret}'}}}, auth: {type: bearer}}\n"
        "  - {slug: remote, source: {mcp: {url: 'http://127.0.0.1:9/mcp'}}, auth: {type: bearer}}\n"
        "  - {slug: api, base_url: 'http://127.0.0.1:9', source: {http: {actions: []}}, auth: {type: bearer}}\n"
    )
    assert [over_http(c) for c in manifest.connectors] == [False, True, True]


def test_an_mtls_key_must_belong_to_its_certificate() -> None:
    ca = trustme.CA()
    mine, other = ca.issue_cert("client.test"), ca.issue_cert("other.test")
    cert = mine.cert_chain_pems[0].bytes().decode()
    assert unusable(MtlsAuth(type="mtls"), {"cert_pem": cert, "key_pem": mine.private_key_pem.bytes().decode()}) is None
    wrong = unusable(MtlsAuth(type="mtls"), {"cert_pem": cert, "key_pem": other.private_key_pem.bytes().decode()})
    assert wrong == "The private key does not belong to this certificate."
    garbage = unusable(MtlsAuth(type="mtls"), {"cert_pem": "SECRET-garbage", "key_pem": "x"})
    assert garbage is not None and "SECRET" not in garbage


def test_other_kinds_are_not_checked() -> None:
    assert unusable(BearerAuth(type="bearer"), "token") is None


def test_a_custom_value_must_fill_the_fields_its_templates_read() -> None:
    fields = CustomAuth(type="custom", headers={"X-User": "{secret.user}", "X-Pass": "p={secret.pass}"})
    assert unusable(fields, {"user": "ana", "pass": "CANARY-pw"}) is None
    half = unusable(fields, {"pass": "CANARY-pw"}) or ""
    assert "Missing 'user'" in half and "'user', 'pass'" in half and "CANARY" not in half
    plain = unusable(fields, "CANARY-pw") or ""
    assert "the fields 'user', 'pass' of a JSON object" in plain and "CANARY" not in plain
    whole = CustomAuth(type="custom", headers={"X-Key": "{secret}"})
    assert unusable(whole, "CANARY-key") is None and unusable(whole, {"key": "CANARY-key"}) is not None
