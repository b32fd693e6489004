"""``auth.secret_check.unusable``: a secret its connector could never use is refused where it is entered."""

from __future__ import annotations

import trustme

from mcp_gateway.auth.secret_check import unusable
from mcp_gateway.manifest import BearerAuth, HmacAuth, MtlsAuth


def test_an_hmac_key_must_be_in_the_encoding_the_connector_declares() -> None:
    assert unusable(HmacAuth(type="hmac", key_encoding="hex"), "zz-not-hex") is not None
    assert unusable(HmacAuth(type="hmac", key_encoding="hex"), "00ff10") is None
    assert unusable(HmacAuth(type="hmac", key_encoding="base64"), "c2VjcmV0") is None
    assert unusable(HmacAuth(type="hmac"), "any text at all") is None  # utf-8: every string is a key


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
