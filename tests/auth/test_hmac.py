"""hmac request signing: RFC 4231's test vectors, the vendors' published examples, and signatures
computed independently here (stdlib hmac over a message written out by hand) for every recipe."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

import httpx2
import pytest
from pydantic import TypeAdapter

from mcp_gateway.auth import LastMeterAuth, apply_auth
from mcp_gateway.auth.hmac import format_timestamp
from mcp_gateway.manifest import AuthConfig, HmacAuth, ManifestError, auth_headers, parse_manifest
from mcp_gateway.primitives.redaction import Redactor
from mcp_gateway.primitives.secrets import SecretValue
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.errors import CredentialError
from tests.support.sealed import sealed_credential

CANARY = "canary-7f3a9c1e-never-show-me"
AUTH = TypeAdapter(AuthConfig)
WHEN = datetime(2026, 3, 4, 5, 6, 7, 891000, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def recipe(**data: Any) -> HmacAuth:
    config = AUTH.validate_python({"type": "hmac", **data})
    assert isinstance(config, HmacAuth)
    return config


def signed(config: HmacAuth, secret: str, request: httpx2.Request, when: datetime = WHEN) -> httpx2.Request:
    apply_auth(request, config, SecretValue(secret), clock=FixedClock(when))
    return request


# -- RFC 4231: HMAC-SHA-256/384/512 test vectors (the key in hex, the data as the body) -------------

_LONG_KEY = "aa" * 131
RFC_4231: list[tuple[str, str, bytes, dict[str, str]]] = [
    (
        "1",
        "0b" * 20,
        b"Hi There",
        {
            "sha256": "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            "sha384": "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59c"
            "faea9ea9076ede7f4af152e8b2fa9cb6",
            "sha512": "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde"
            "daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854",
        },
    ),
    (
        "2",
        b"Jefe".hex(),
        b"what do ya want for nothing?",
        {
            "sha256": "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            "sha384": "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e"
            "8e2240ca5e69e2c78b3239ecfab21649",
            "sha512": "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
            "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
        },
    ),
    (
        "3",
        "aa" * 20,
        b"\xdd" * 50,
        {
            "sha256": "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
            "sha384": "88062608d3e6ad8a0aa2ace014c8a86f0aa635d947ac9febe83ef4e55966144b"
            "2a5ab39dc13814b94e3ab6e101a34f27",
            "sha512": "fa73b0089d56a284efb0f0756c890be9b1b5dbdd8ee81a3655f83e33b2279d39"
            "bf3e848279a722c806b485a47e67c807b946a337bee8942674278859e13292fb",
        },
    ),
    (
        "4",
        bytes(range(1, 26)).hex(),
        b"\xcd" * 50,
        {
            "sha256": "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
            "sha384": "3e8a69b7783c25851933ab6290af6ca77a9981480850009cc5577c6e1f573b4e"
            "6801dd23c4a7d679ccf8a386c674cffb",
            "sha512": "b0ba465637458c6990e5a8c5f61d4af7e576d97ff94b872de76f8050361ee3db"
            "a91ca5c11aa25eb4d679275cc5788063a5f19741120c4f2de2adebeb10a298dd",
        },
    ),
    # Test case 5's outputs are truncated to 128 bits: the first 32 hex digits must agree.
    (
        "5",
        "0c" * 20,
        b"Test With Truncation",
        {
            "sha256": "a3b6167473100ee06e0c796c2955552b",
            "sha384": "3abf34c3503b2a23a46efc619baef897",
            "sha512": "415fad6271580a531d4179bc891d87a6",
        },
    ),
    (
        "6",
        _LONG_KEY,
        b"Test Using Larger Than Block-Size Key - Hash Key First",
        {
            "sha256": "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            "sha384": "4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c6"
            "0c2ef6ab4030fe8296248df163f44952",
            "sha512": "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352"
            "6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598",
        },
    ),
    (
        "7",
        _LONG_KEY,
        b"This is a test using a larger than block-size key and a larger than block-size data. "
        b"The key needs to be hashed before being used by the HMAC algorithm.",
        {
            "sha256": "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
            "sha384": "6617178e941f020d351e2f254e8fd32c602420feb0b8fb9adccebb82461e99c5"
            "a678cc31e799176d3860e6110c46523e",
            "sha512": "e37b6a775dc87dbaa4dfa9f96e5e3ffddebd71f8867289865df5a32d20cdc944"
            "b6022cac3c4982b10d5eeb55c3e4de15134676fb6de0446065c97440fa8c6a58",
        },
    ),
]


@pytest.mark.parametrize("algorithm", ["sha256", "sha384", "sha512"])
@pytest.mark.parametrize(("case", "key_hex", "data", "expected"), RFC_4231, ids=[v[0] for v in RFC_4231])
def test_rfc4231_vectors(case: str, key_hex: str, data: bytes, expected: dict[str, str], algorithm: str) -> None:
    want = expected[algorithm]
    hex_out = signed(
        recipe(algorithm=algorithm, key_encoding="hex"),
        key_hex,
        httpx2.Request("POST", "https://a.test/", content=data),
    )
    assert hex_out.headers["X-Signature"][: len(want)] == want
    # The same digest in base64, with the key given in base64 this time.
    b64_key = base64.b64encode(bytes.fromhex(key_hex)).decode()
    config = recipe(algorithm=algorithm, key_encoding="base64", encoding="base64", header="X-Sig")
    b64_out = signed(config, b64_key, httpx2.Request("POST", "https://a.test/", content=data))
    assert base64.b64decode(b64_out.headers["X-Sig"]).hex()[: len(want)] == want


# -- the vendors' published examples -------------------------------------------------------------


def test_github_documented_example() -> None:
    """GitHub's "validating webhook deliveries" test values: X-Hub-Signature-256 of "Hello, World!"."""
    config = recipe(header="X-Hub-Signature-256", prefix="sha256=")
    r = signed(
        config, "It's a Secret to Everybody", httpx2.Request("POST", "https://hooks.test/", content=b"Hello, World!")
    )
    assert r.headers["X-Hub-Signature-256"] == "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_slack_documented_example() -> None:
    """Slack's "verifying requests" walkthrough: v0:timestamp:body, hex, the v0= prefix."""
    body = (
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
        b"&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
        b"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
        b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    config = recipe(
        header="X-Slack-Signature",
        prefix="v0=",
        template="v0:{timestamp}:{body}",
        timestamp_header="X-Slack-Request-Timestamp",
    )
    r = signed(
        config,
        "8f742231b10e8888abcd99yyyzzz85a5",
        httpx2.Request("POST", "https://a.test/", content=body),
        datetime.fromtimestamp(1531420618, UTC),
    )
    assert r.headers["X-Slack-Request-Timestamp"] == "1531420618"
    assert r.headers["X-Slack-Signature"] == "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


# -- every recipe, against a signature computed here independently -------------------------------


def _mac(key: bytes, message: bytes, algorithm: str = "sha256") -> bytes:
    return hmac.new(key, message, getattr(hashlib, algorithm)).digest()


def test_body_only_hex_default() -> None:
    body = b'{"event": "push", "n": 1}'
    r = signed(recipe(), CANARY, httpx2.Request("POST", "https://a.test/hook", content=body))
    assert r.headers["X-Signature"] == _mac(CANARY.encode(), body).hex()
    assert "X-Timestamp" not in r.headers


def test_shopify_style_base64_of_the_body() -> None:
    body = '{"id": 1, "title": "caf\u00e9"}'.encode()
    config = recipe(header="X-Shopify-Hmac-Sha256", encoding="base64")
    r = signed(config, "shpss_" + CANARY, httpx2.Request("POST", "https://a.test/", content=body))
    assert r.headers["X-Shopify-Hmac-Sha256"] == base64.b64encode(_mac(f"shpss_{CANARY}".encode(), body)).decode()


def test_method_path_timestamp_body_joined_by_the_separator() -> None:
    body = b'{"name": "x"}'
    config = recipe(signed="method_path_timestamp_body", timestamp_header="X-Timestamp", algorithm="sha512")
    r = signed(config, CANARY, httpx2.Request("post", "https://a.test/v1/items/a%20b?x=1&y=%C3%A9", content=body))
    message = b"POST\n/v1/items/a%20b?x=1&y=%C3%A9\n1772600767\n" + body
    assert r.headers["X-Timestamp"] == "1772600767"
    assert r.headers["X-Signature"] == _mac(CANARY.encode(), message, "sha512").hex()


def test_coinbase_style_template_with_base64_key_and_iso_timestamp() -> None:
    key = base64.b64encode(b"\x00\xffraw key bytes\x10").decode()
    config = recipe(
        header="CB-ACCESS-SIGN",
        encoding="base64",
        key_encoding="base64",
        template="{timestamp}{method}{path}{body}",
        timestamp_header="CB-ACCESS-TIMESTAMP",
        timestamp_format="iso8601",
    )
    r = signed(config, key, httpx2.Request("GET", "https://a.test/orders?limit=2"))
    message = b"2026-03-04T05:06:07.891ZGET/orders?limit=2"
    assert r.headers["CB-ACCESS-TIMESTAMP"] == "2026-03-04T05:06:07.891Z"
    assert r.headers["CB-ACCESS-SIGN"] == base64.b64encode(_mac(b"\x00\xffraw key bytes\x10", message)).decode()


def test_millisecond_timestamps_and_sha1() -> None:
    config = recipe(
        algorithm="sha1", template="{timestamp}.{body}", timestamp_header="X-Ts", timestamp_format="unix_ms"
    )
    r = signed(config, CANARY, httpx2.Request("PUT", "https://a.test/", content=b"data"))
    assert r.headers["X-Ts"] == "1772600767891"
    assert r.headers["X-Signature"] == _mac(CANARY.encode(), b"1772600767891.data", "sha1").hex()


def test_a_binary_body_signs_as_sent() -> None:
    body = bytes(range(256))
    config = recipe(template="{method} {body}")
    r = signed(config, CANARY, httpx2.Request("POST", "https://a.test/", content=body))
    assert r.headers["X-Signature"] == _mac(CANARY.encode(), b"POST " + body).hex()


def test_timestamp_formats() -> None:
    assert format_timestamp(WHEN, "unix") == "1772600767"
    assert format_timestamp(WHEN, "unix_ms") == "1772600767891"
    assert format_timestamp(WHEN, "iso8601") == "2026-03-04T05:06:07.891Z"
    # Milliseconds by integer arithmetic: 0.001 s steps that floating point would round down.
    assert format_timestamp(datetime(2026, 1, 1, 0, 0, 0, 3000, tzinfo=UTC), "unix_ms") == "1767225600003"


def test_replaces_agent_supplied_signature_headers() -> None:
    config = recipe(template="{timestamp}{body}", timestamp_header="X-Timestamp")
    r = httpx2.Request("POST", "https://a.test/", content=b"x", headers={"X-Signature": "forged", "X-Timestamp": "1"})
    signed(config, CANARY, r)
    assert r.headers.get_list("X-Signature") == [_mac(CANARY.encode(), b"1772600767x").hex()]
    assert r.headers.get_list("X-Timestamp") == ["1772600767"]


# -- errors and the manifest -----------------------------------------------------------------------


def test_a_secret_that_is_not_what_key_encoding_says() -> None:
    for encoding in ("hex", "base64"):
        with pytest.raises(CredentialError, match=f"not valid {encoding}") as info:
            signed(recipe(key_encoding=encoding), f"{CANARY}!", httpx2.Request("POST", "https://a.test/"))
        assert CANARY not in str(info.value)
    with pytest.raises(CredentialError, match="plain-string") as info:
        apply_auth(httpx2.Request("POST", "https://a.test/"), recipe(), SecretValue({"key": CANARY}))
    assert CANARY not in str(info.value)


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        ('{type: hmac, template: "{body}{nonce}"}', "unknown placeholder {nonce}"),
        ('{type: hmac, template: "static"}', "uses no placeholder"),
        ('{type: hmac, template: "{timestamp}{body}"}', "no header sends it"),
        ("{type: hmac, signed: method_path_timestamp_body}", "no header sends it"),
        ("{type: hmac, algorithm: md5}", "algorithm"),
    ],
)
def test_manifest_errors_are_located(auth: str, message: str) -> None:
    text = f"connectors:\n  - slug: hooks\n    base_url: https://a.test\n    auth: {auth}\n"
    with pytest.raises(ManifestError, match=message) as info:
        parse_manifest(text, file="m.yaml")
    assert str(info.value).startswith("m.yaml:4:")


def test_signature_and_timestamp_headers_are_credential_headers() -> None:
    config = recipe(header="X-Hub-Signature-256", template="{timestamp}{body}", timestamp_header="X-Ts")
    assert auth_headers(config) == {"x-hub-signature-256", "x-ts"}


@pytest.mark.anyio
async def test_last_meter_signs_the_body_httpx2_sends() -> None:
    """Through a client: the body a form encoder produced is what is signed, byte for byte."""
    config = recipe(prefix="sha256=", header="X-Hub-Signature-256")

    def upstream(request: httpx2.Request) -> httpx2.Response:
        expected = "sha256=" + _mac(CANARY.encode(), request.content).hex()
        ok = hmac.compare_digest(request.headers["X-Hub-Signature-256"], expected)
        return httpx2.Response(200 if ok else 401, text=f"secret was {CANARY}")

    redactor = Redactor()
    auth = LastMeterAuth(
        config, await sealed_credential("hooks", CANARY), on_secret=redactor.add, clock=FixedClock(WHEN)
    )
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream)) as client:
        response = await client.post("https://a.test/hook", data={"a": "1 2", "b": "é"}, auth=auth)
    assert response.status_code == 200
    assert CANARY not in redactor.redact_text(response.text)
