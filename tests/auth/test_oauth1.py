"""OAuth 1.0a (RFC 5849): the RFC's own examples, and byte-for-byte agreement with oauthlib."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

import httpx2
import pytest
from oauthlib.oauth1 import Client
from oauthlib.oauth1.rfc5849 import signature as reference
from pydantic import TypeAdapter

from mcp_gateway.auth import LastMeterAuth, apply_auth
from mcp_gateway.auth.oauth1 import (
    base_string_uri,
    normalize_parameters,
    protocol_params,
    request_parameters,
    sign,
    signature_base_string,
)
from mcp_gateway.manifest import AuthConfig, OAuth1Auth
from mcp_gateway.primitives.redaction import Redactor
from mcp_gateway.primitives.secrets import SecretValue
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.errors import ArgumentError, CredentialError
from tests.support.sealed import sealed_credential

CANARY = "canary-7f3a9c1e-never-show-me"
AUTH = TypeAdapter(AuthConfig)
WHEN = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
NONCE = "4572616e48616d6d65724c61686176"
SECRET = {
    "consumer_key": "dpf43f3p2l4k3l03",
    "consumer_secret": "kd94hf93k423kf44&+ é",
    "token": "nnch734d00sl2jdk",
    "token_secret": f"pfkkdhi9sl3r4s00/{CANARY}",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def oauth1(**data: Any) -> OAuth1Auth:
    config = AUTH.validate_python({"type": "oauth1", **data})
    assert isinstance(config, OAuth1Auth)
    return config


# -- RFC 5849's own examples -------------------------------------------------------------------

RFC_3_4_1_REQUEST = httpx2.Request(
    "POST",
    "http://example.com/request?b5=%3D%253D&a3=a&c%40=&a2=r%20b",
    headers={"Content-Type": "application/x-www-form-urlencoded"},
    content=b"c2&a3=2+q",
)
RFC_3_4_1_PROTOCOL = [
    ("oauth_consumer_key", "9djdj82h48djs9d2"),
    ("oauth_token", "kkk9d7dh3k39sjv7"),
    ("oauth_signature_method", "HMAC-SHA1"),
    ("oauth_timestamp", "137131201"),
    ("oauth_nonce", "7d8f3e4a"),
]


def test_rfc5849_3_4_1_signature_base_string() -> None:
    """Section 3.4.1.1's worked example, character for character (its line breaks are for display only)."""
    expected = (
        "POST&http%3A%2F%2Fexample.com%2Frequest&a2%3Dr%2520b%26a3%3D2%2520q"
        "%26a3%3Da%26b5%3D%253D%25253D%26c%2540%3D%26c2%3D%26oauth_consumer_"
        "key%3D9djdj82h48djs9d2%26oauth_nonce%3D7d8f3e4a%26oauth_signature_m"
        "ethod%3DHMAC-SHA1%26oauth_timestamp%3D137131201%26oauth_token%3Dkkk"
        "9d7dh3k39sjv7"
    )
    r = RFC_3_4_1_REQUEST
    assert signature_base_string(r.method, r.url, r.headers["Content-Type"], r.content, RFC_3_4_1_PROTOCOL) == expected


def test_rfc5849_3_4_1_3_parameters() -> None:
    """Section 3.4.1.3.1's decoded parameter table and 3.4.1.3.2's normalized string."""
    r = RFC_3_4_1_REQUEST
    params = request_parameters(r.url, r.headers["Content-Type"], r.content)
    assert sorted(params) == sorted([("b5", "=%3D"), ("a3", "a"), ("c@", ""), ("a2", "r b"), ("c2", ""), ("a3", "2 q")])
    assert normalize_parameters([*params, *RFC_3_4_1_PROTOCOL]) == (
        "a2=r%20b&a3=2%20q&a3=a&b5=%3D%253D&c%40=&c2=&oauth_consumer_key=9dj"
        "dj82h48djs9d2&oauth_nonce=7d8f3e4a&oauth_signature_method=HMAC-SHA1"
        "&oauth_timestamp=137131201&oauth_token=kkk9d7dh3k39sjv7"
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # Section 3.4.1.2's two examples: host lower-cased, default port dropped, other ports kept.
        ("http://EXAMPLE.COM:80/r%20v/X?id=123", "http://example.com/r%20v/X"),
        ("https://www.example.net:8080/?q=1", "https://www.example.net:8080/"),
        ("https://api.test", "https://api.test/"),
        ("http://[::1]:8080/a", "http://[::1]:8080/a"),
    ],
)
def test_rfc5849_3_4_1_2_base_string_uri(url: str, expected: str) -> None:
    assert base_string_uri(httpx2.URL(url)) == expected
    assert reference.base_string_uri(str(httpx2.URL(url))) == expected


def test_rfc5849_1_2_photos_example_signature() -> None:
    """Section 1.2's complete example (no oauth_version, as in the RFC): its base string exactly.

    The RFC prints the signature as ``MdpQcU8iPSUjWoN5UDhSfKCIbh8=``, which agrees with the real value
    in its first 15 characters only: HMAC-SHA1 of the base string the RFC itself prints, under its
    keys, is ``MdpQcU8iPSUjWoN/UDMsK2sui9I=`` (stdlib hmac and oauthlib agree), so the printed one is a misprint.
    """
    url = httpx2.URL("http://photos.example.net/photos?file=vacation.jpg&size=original")
    params = protocol_params(
        consumer_key="dpf43f3p2l4k3l03",
        token="nnch734d00sl2jdk",
        signature_method="HMAC-SHA1",
        timestamp="137131202",
        nonce="chapoH",
        version=False,
    )
    base = signature_base_string("GET", url, None, b"", params)
    assert base == (
        "GET&http%3A%2F%2Fphotos.example.net%2Fphotos&file%3Dvacation.jpg%26"
        "oauth_consumer_key%3Ddpf43f3p2l4k3l03%26oauth_nonce%3DchapoH%26"
        "oauth_signature_method%3DHMAC-SHA1%26oauth_timestamp%3D137131202%26"
        "oauth_token%3Dnnch734d00sl2jdk%26size%3Doriginal"
    )
    ours = sign(base, "kd94hf93k423kf44", "pfkkdhi9sl3r4s00", method="HMAC-SHA1")
    digest = hmac.new(b"kd94hf93k423kf44&pfkkdhi9sl3r4s00", base.encode(), hashlib.sha1).digest()
    assert ours == base64.b64encode(digest).decode() == "MdpQcU8iPSUjWoN/UDMsK2sui9I="
    client = Client("dpf43f3p2l4k3l03", client_secret="kd94hf93k423kf44", resource_owner_secret="pfkkdhi9sl3r4s00")
    assert reference.sign_hmac_sha1_with_client(base, client) == ours


# -- byte for byte against oauthlib --------------------------------------------------------------

REQUESTS: list[tuple[str, str, dict[str, str], bytes]] = [
    ("GET", "https://api.test/1.1/statuses/home_timeline.json", {}, b""),
    # Reserved characters, UTF-8, a repeated name, an empty value and a bare name in the query.
    ("GET", "https://API.test:8443/v1/items?q=caf%C3%A9%20%2B%26&tag=b&tag=a&empty=&bare&x=%7E!", {}, b""),
    ("GET", "http://127.0.0.1:8080/users/a%2Fb/na%C3%AFve%20file.txt?z=1", {}, b""),
    # Form body parameters are signed, with '+' read as a space.
    (
        "POST",
        "https://api.test/1.1/statuses/update.json?include_entities=true",
        {"Content-Type": "application/x-www-form-urlencoded"},
        b"status=Hello+Ladies+%2B+Gentlemen%2C+a+signed+OAuth+request%21&lang=fr&msg=%C3%A9t%C3%A9",
    ),
    # A JSON body is covered by oauth_body_hash.
    ("POST", "https://api.test/v2/items?dry_run=1", {"Content-Type": "application/json"}, b'{"name": "caf\xc3\xa9"}'),
    ("PUT", "https://api.test/v2/items/7", {"Content-Type": "text/plain; charset=utf-8"}, b"plain text body"),
    ("DELETE", "https://api.test/v2/items/7", {}, b""),
]


@pytest.mark.parametrize("method", ["HMAC-SHA1", "HMAC-SHA256"])
@pytest.mark.parametrize("realm", [None, "Photos"])
@pytest.mark.parametrize(
    ("verb", "url", "headers", "body"), REQUESTS, ids=[f"{r[0]}-{i}" for i, r in enumerate(REQUESTS)]
)
def test_authorization_header_equals_oauthlib(
    method: str, realm: str | None, verb: str, url: str, headers: dict[str, str], body: bytes
) -> None:
    ours = httpx2.Request(verb, url, headers=headers, content=body)
    apply_auth(
        ours,
        oauth1(signature_method=method, realm=realm),
        SecretValue(SECRET),
        clock=FixedClock(WHEN),
        nonce=lambda: NONCE,
    )
    client = Client(
        SECRET["consumer_key"],
        client_secret=SECRET["consumer_secret"],
        resource_owner_key=SECRET["token"],
        resource_owner_secret=SECRET["token_secret"],
        signature_method=method,
        nonce=NONCE,
        timestamp=str(int(WHEN.timestamp())),
        realm=realm,
    )
    _, signed, _ = client.sign(str(ours.url), verb, body=body.decode() or None, headers=headers)
    assert ours.headers["Authorization"] == signed["Authorization"]


def test_body_hash_can_be_turned_off() -> None:
    r = httpx2.Request("POST", "https://api.test/x", json={"a": 1})
    apply_auth(r, oauth1(body_hash=False), SecretValue(SECRET), clock=FixedClock(WHEN), nonce=lambda: NONCE)
    assert "oauth_body_hash" not in r.headers["Authorization"]
    r = httpx2.Request("POST", "https://api.test/x", json={"a": 1})
    apply_auth(r, oauth1(), SecretValue(SECRET), clock=FixedClock(WHEN), nonce=lambda: NONCE)
    assert 'oauth_body_hash="' in r.headers["Authorization"]


# -- the rest of the contract ---------------------------------------------------------------------


def test_fresh_nonce_and_current_time_by_default() -> None:
    headers = []
    for _ in range(2):
        r = httpx2.Request("GET", "https://api.test/x")
        apply_auth(r, oauth1(), SecretValue(SECRET))
        headers.append(dict(reference.utils.parse_authorization_header(r.headers["Authorization"])))
    first, second = headers
    assert first["oauth_nonce"] != second["oauth_nonce"]
    assert len(first["oauth_nonce"]) == 30 and first["oauth_nonce"].isalnum()
    assert abs(int(first["oauth_timestamp"]) - datetime.now(UTC).timestamp()) < 60


def test_agent_supplied_oauth_parameter_is_refused() -> None:
    r = httpx2.Request("GET", "https://api.test/x?oauth_token=forged")
    with pytest.raises(ArgumentError, match="'oauth_token'") as info:
        apply_auth(r, oauth1(), SecretValue(SECRET))
    assert CANARY not in str(info.value) and "Authorization" not in r.headers
    form = httpx2.Request(
        "POST",
        "https://api.test/x",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        content=b"oauth_x=1",
    )
    with pytest.raises(ArgumentError, match="'oauth_x'"):
        apply_auth(form, oauth1(), SecretValue(SECRET))


def test_replaces_an_agent_supplied_authorization_header() -> None:
    r = httpx2.Request("GET", "https://api.test/x", headers={"Authorization": "OAuth forged"})
    apply_auth(r, oauth1(), SecretValue(SECRET), clock=FixedClock(WHEN), nonce=lambda: NONCE)
    assert len(r.headers.get_list("Authorization")) == 1
    assert r.headers["Authorization"].startswith('OAuth oauth_nonce="')


def test_wrong_secret_shapes_never_show_the_secret() -> None:
    with pytest.raises(CredentialError, match="JSON-object") as info:
        apply_auth(httpx2.Request("GET", "https://api.test/"), oauth1(), SecretValue(CANARY))
    assert CANARY not in str(info.value)
    partial = {"consumer_key": "k", "consumer_secret": CANARY}
    with pytest.raises(CredentialError, match="'token', 'token_secret'") as info:
        apply_auth(httpx2.Request("GET", "https://api.test/"), oauth1(), SecretValue(partial))
    assert CANARY not in str(info.value)


def test_realm_with_a_quote_is_refused_by_the_manifest() -> None:
    with pytest.raises(ValueError, match="quote"):
        oauth1(realm='a"b')


# -- through a client: the last meter signs what is sent -----------------------------------------


@pytest.mark.anyio
async def test_last_meter_signs_the_final_request_and_oauthlib_verifies_it() -> None:
    """The upstream recomputes the signature with oauthlib's own functions from what it received."""

    def upstream(request: httpx2.Request) -> httpx2.Response:
        header = request.headers["Authorization"]
        oauth = {k: reference.utils.unescape(v) for k, v in reference.utils.parse_authorization_header(header)}
        params = reference.collect_parameters(
            uri_query=request.url.query.decode(),
            body=request.content.decode(),
            headers={"Authorization": header, "Content-Type": request.headers["Content-Type"]},
        )
        base = reference.signature_base_string(
            request.method, reference.base_string_uri(str(request.url)), reference.normalize_parameters(params)
        )
        client = Client("", client_secret=SECRET["consumer_secret"], resource_owner_secret=SECRET["token_secret"])
        expected = reference.sign_hmac_sha256_with_client(base, client)
        ok = oauth["oauth_signature"] == expected and oauth["oauth_timestamp"] == str(int(WHEN.timestamp()))
        return httpx2.Response(200 if ok else 401, json={"echo": header})

    redactor = Redactor()
    auth = LastMeterAuth(
        oauth1(signature_method="HMAC-SHA256"),
        await sealed_credential("twitter", SECRET),
        on_secret=redactor.add,
        clock=FixedClock(WHEN),
    )
    assert auth.requires_request_body
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream)) as client:
        response = await client.post(
            "https://api.test/statuses/update.json?x=caf%C3%A9", data={"status": "hi there", "n": "1"}, auth=auth
        )
    assert response.status_code == 200, response.text
    assert CANARY not in repr(auth) + repr(response.request.headers)
